"""Capture cost: N blocking calls (the fake driver's cuStreamSynchronize, made to take
150 us so that every call is captured) from a stack DEPTH Python frames deep. The shim
times its own captures; bench/callsites.sh reads the figure from the dump."""
import ctypes
import sys

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuInit(0)


def nest(depth, calls):
    if depth > 1:
        return nest(depth - 1, calls)
    for _ in range(calls):
        cuda.cuStreamSynchronize(None)


nest(int(sys.argv[1]), int(sys.argv[2]))
