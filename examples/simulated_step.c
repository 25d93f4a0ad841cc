/* A training step as a naive PyTorch loop drives the driver: a batch copied from pageable
 * memory, a burst of small kernels, and a .item() (device-to-host copy + sync) for logging.
 * Used by the tests, against the fake driver; `gpuspy demo` runs the same loop
 * (src/cmd/demo/step.rs).
 * Arguments: STEPS (default 100), then the batch size in bytes (default 4 MiB). */
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, void *);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, void *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);
CUresult cuStreamSynchronize(void *);

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 100;
    size_t batch = argc > 2 ? strtoull(argv[2], 0, 10) : 4 << 20;
    char *host = malloc(batch); /* pageable: the copy below cannot overlap */
    CUdeviceptr input, loss;
    float value;
    cuInit(0);
    cuMemAlloc_v2(&input, batch);
    cuMemAlloc_v2(&loss, sizeof value);
    for (int step = 0; step < steps; step++) {
        cuMemcpyHtoDAsync_v2(input, host, batch, 0);
        for (int k = 0; k < 40; k++) cuLaunchKernel(0, 8, 1, 1, 128, 1, 1, 0, 0, 0, 0);
        cuMemcpyDtoHAsync_v2(&value, loss, sizeof value, 0);
        cuStreamSynchronize(0);
    }
    printf("simulated training: %d steps\n", steps);
    free(host);
    return 0;
}
