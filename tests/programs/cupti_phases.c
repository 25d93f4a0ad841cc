/* A short script's time axis through the fake driver and the fake libcupti: the program
 * emits the GPU's kernel records itself. Waits for gpuspy's CUPTI, then:
 *   "stall": 15 module loads (1.5 s with FAKECUDA_DELAY_NS=cuModuleLoadData=100000000),
 *            then 200 steps of a 3 ms kernel, a sync that returns as it ends (give
 *            cuStreamSynchronize 3 ms) and 5 ms of host work with nothing queued: the
 *            .item()-then-host-work loop, whose GPU and host work are alike, so that
 *            removing the sync would save about the kernel's 3 ms of 8;
 *   "quiet": 400 steps of 3 ms kernels queued back to back, the host launching each while
 *            10 ms of work are queued: the GPU never idles.
 * Start-up is whatever cuInit is given (FAKECUDA_DELAY_NS=cuInit=...). */
#include <string.h>
#include <time.h>
#include "cuda_min.h"

extern CUresult cuModuleLoadData(void **module, const void *image);
extern int fakecupti_enabled(unsigned kind);
extern unsigned long long fakecupti_now(void);
extern void fakecupti_kernel(unsigned device, unsigned long long start, unsigned long long end,
                             int blocks, const char *name);

#define MS 1000000ULL

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000ULL + t.tv_nsec;
}

/* Host work: spins, so that it takes the time whatever the scheduler's sleep granularity. */
static void work(unsigned long long ns) {
    unsigned long long end = now_ns() + ns;
    while (now_ns() < end) {
    }
}

int main(int argc, char **argv) {
    int stall = argc > 1 && strcmp(argv[1], "stall") == 0;
    void *context, *module;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&context, 0)) return 1;
    for (int i = 0; i < 5000 && !fakecupti_enabled(10); i++) work(MS);
    if (!fakecupti_enabled(10)) return 2;
    if (stall) {
        static const char image[] = "fatbin";
        for (int i = 0; i < 15; i++) cuModuleLoadData(&module, image);
        for (int step = 0; step < 200; step++) {
            /* The kernel runs from its launch until the sync returns, as on a GPU: the idle
             * gap opens at the sync's return however late a loaded machine wakes it. */
            unsigned long long t = fakecupti_now();
            cuLaunchKernel(0, 132, 1, 1, 256, 1, 1, 0, 0, 0, 0);
            cuStreamSynchronize(0);
            fakecupti_kernel(0, t, fakecupti_now(), 132, "step_kernel");
            work(5 * MS);
        }
    } else {
        /* A queue as a GPU keeps one: each kernel starts when the one before ends, and the
         * host launches the next while 10 ms of work are still queued, so a preemption of
         * the host shorter than that (a loaded CI machine) leaves the GPU no gap. */
        unsigned long long queued_to = 0;
        for (int step = 0; step < 400; step++) {
            unsigned long long t = fakecupti_now();
            unsigned long long start = queued_to > t ? queued_to : t;
            queued_to = start + 3 * MS;
            fakecupti_kernel(0, start, queued_to, 132, "step_kernel");
            cuLaunchKernel(0, 132, 1, 1, 256, 1, 1, 0, 0, 0, 0);
            while (fakecupti_now() + 10 * MS < queued_to) {
            }
        }
    }
    return 0;
}
