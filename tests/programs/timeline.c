/* A run with a time axis: cuInit and a context, then ~300 ms without a driver call, then
 * ROUNDS rounds of work on the main thread and on two threads that exit before it ends
 * (each round: 3 launches, a graph launch, a device allocation, a pageable cuMemcpyHtoD of 1000 bytes, a
 * pinned async cuMemcpyDtoH of 512 bytes, a stream sync, a free), then one
 * cuCtxSynchronize, whose length the test sets with FAKECUDA_DELAY_NS.
 * Prints the CLOCK_REALTIME ns at which the rounds begin ("rounds T") and just before and
 * after the cuCtxSynchronize ("long T", "done T"), flushing each line.
 * usage: timeline ROUNDS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "cuda_min.h"

static int rounds;
static void *pinned;

static long long realtime_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *work(void *unused) {
    char pageable[1000] = {0};
    (void)unused;
    for (int i = 0; i < rounds; i++) {
        CUdeviceptr p = 0;
        for (int k = 0; k < 3; k++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
        cuGraphLaunch(0, 0);
        cuMemAlloc_v2(&p, 4096);
        cuMemcpyHtoD_v2(p, pageable, sizeof pageable);
        cuMemcpyDtoHAsync_v2(pinned, p, 512, 0);
        cuStreamSynchronize(0);
        cuMemFree_v2(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    void *ctx;
    struct timespec idle = {0, 300 * 1000000L};
    pthread_t threads[2];
    rounds = argc > 1 ? atoi(argv[1]) : 10;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0)) return 1;
    nanosleep(&idle, NULL);
    printf("rounds %lld\n", realtime_ns());
    fflush(stdout);
    cuMemHostAlloc(&pinned, 4096, 0);
    for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, work, NULL);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    work(NULL);
    cuMemFreeHost(pinned);
    printf("long %lld\n", realtime_ns());
    fflush(stdout);
    cuCtxSynchronize();
    printf("done %lld\n", realtime_ns());
    return 0;
}
