from gpuspy import main

main()
