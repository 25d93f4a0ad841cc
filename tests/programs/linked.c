/* Door 1: linked with -lcuda, calls bind to exported symbols. */
#include <stdio.h>
#include <stdlib.h>
#include "cuda_min.h"

int main(int argc, char **argv) {
    int launches = argc > 1 ? atoi(argv[1]) : 1000;
    int syncs = argc > 2 ? atoi(argv[2]) : 10;
    if (cuInit(0)) return 1;
    void *context;
    if (cuDevicePrimaryCtxRetain(&context, 0)) return 3;
    for (int i = 0; i < launches - 1; i++)
        if (cuLaunchKernel(0, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0)) return 2;
    /* The last launch carries distinct values in every argument, stack ones included, and
     * the fake driver reports what it received. */
    if (launches > 0) {
        cuLaunchKernel((void *)0x1111, 2, 3, 4, 5, 6, 7, 8, (void *)0x9999, (void **)0xaaaa,
                       (void **)0xbbbb);
        unsigned long long got[11], want[11] = {0x1111, 2, 3, 4, 5, 6, 7, 8, 0x9999, 0xaaaa, 0xbbbb};
        fakecuda_last_launch(got);
        for (int i = 0; i < 11; i++)
            if (got[i] != want[i]) {
                fprintf(stderr, "argument %d arrived as %llx, sent %llx\n", i, got[i], want[i]);
                return 9;
            }
    }
    for (int i = 0; i < syncs; i++) cuStreamSynchronize(0);
    cuCtxSynchronize();

    CUdeviceptr d;
    cuMemAlloc_v2(&d, 1 << 20);
    char *pageable = malloc(4096);
    void *pinned;
    cuMemHostAlloc(&pinned, 8192, 0);
    cuMemcpyHtoD_v2(d, pageable, 4096);          /* sync copy, pageable */
    cuMemcpyHtoDAsync_v2(d, pageable, 4096, 0);  /* async from pageable: implicit sync */
    cuMemcpyHtoDAsync_v2(d, pinned, 8192, 0);    /* async from pinned: no sync */
    cuMemcpyHtoDAsync_v2(d, (char *)pinned + 100, 100, 0);  /* inside the pinned range */
    cuMemcpyDtoHAsync_v2(pinned, d, 8192, 0);
    cuMemcpyDtoH_v2(pageable, d, 4096);
    cuMemFreeHost(pinned);
    cuMemcpyHtoDAsync_v2(d, pinned, 10, 0);      /* same address, no longer pinned */
    cuMemFree_v2(d);
    CUdeviceptr managed;
    cuMemAllocManaged(&managed, 1 << 16, 1);
    cuMemPrefetchAsync(managed, 1 << 16, 0, 0);
    cuMemcpyHtoDAsync_v2(d, (void *)managed, 64, 0);
    /* A knob of the fake makes some of these fail. */
    for (int i = 0; i < 5; i++) cuStreamQuery(0);
    free(pageable);
    puts("linked: done");
    return 0;
}
