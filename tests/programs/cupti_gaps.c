/* GPU idle gaps of two kinds through the fake driver and the fake libcupti; the program
 * emits the GPU's records itself. Waits for gpuspy's CUPTI, then, with ARGV[1]:
 *   "sleep": 20 steps of a burst of 10 kernels of 5 µs back to back from "now", then 5 ms
 *            of host sleep (the host building the next batch) and the batch's
 *            cuMemcpyHtoDAsync from pinned memory, its copy record starting as the call
 *            returns: each step leaves a gap of at least 4.95 ms that the copy ends;
 *   "dense": 1,000 steps of 10 kernels of 5 µs and one 10 µs copy to the device, 20 µs
 *            apart on a GPU clock of the program's own (per-op dispatch: a gap after
 *            every launch), which the host keeps at most 10 ms ahead of real time, so that
 *            the gaps are 20 µs however the host is scheduled; the program ends once the
 *            last record is over.
 * Prints the steps it made. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "cuda_min.h"

extern int fakecupti_enabled(unsigned kind);
extern unsigned long long fakecupti_now(void);
extern void fakecupti_kernel(unsigned device, unsigned long long start, unsigned long long end,
                             int blocks, const char *name);
extern void fakecupti_memcpy(unsigned char kind, unsigned char src, unsigned char dst,
                             unsigned long long bytes, unsigned long long start,
                             unsigned long long end, unsigned device);

#define US 1000ULL
#define MS 1000000ULL
/* CUPTI's copy kind and memory kinds. */
#define HTOD 1
#define PINNED 2
#define DEVICE 3
#define BATCH (1 << 20)

static void launch(void) { cuLaunchKernel(0, 132, 1, 1, 256, 1, 1, 0, 0, 0, 0); }

int main(int argc, char **argv) {
    int sleep = argc > 1 && strcmp(argv[1], "sleep") == 0;
    void *context, *host;
    CUdeviceptr device;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&context, 0)) return 1;
    if (cuMemHostAlloc(&host, BATCH, 0) || cuMemAlloc_v2(&device, BATCH)) return 2;
    memset(host, 0, BATCH);
    for (int i = 0; i < 5000 && !fakecupti_enabled(10); i++) {
        struct timespec pause = {0, MS};
        nanosleep(&pause, NULL);
    }
    if (!fakecupti_enabled(10)) return 3;
    int steps = sleep ? 20 : 1000;
    unsigned long long gpu = fakecupti_now();
    for (int step = 0; step < steps; step++) {
        if (sleep) {
            unsigned long long t = fakecupti_now();
            for (int k = 0; k < 10; k++) launch();
            for (int k = 0; k < 10; k++)
                fakecupti_kernel(0, t + k * 5 * US, t + (k + 1) * 5 * US, 132, "step_kernel");
            struct timespec building = {0, 5 * MS};
            clock_nanosleep(CLOCK_MONOTONIC, 0, &building, NULL);
            if (cuMemcpyHtoDAsync_v2(device, host, BATCH, 0)) return 4;
            unsigned long long c = fakecupti_now();
            fakecupti_memcpy(HTOD, PINNED, DEVICE, BATCH, c, c + 10 * US, 0);
        } else {
            while (fakecupti_now() + 10 * MS < gpu) {
            }
            for (int k = 0; k < 10; k++) {
                launch();
                fakecupti_kernel(0, gpu, gpu + 5 * US, 132, "op_kernel");
                gpu += 25 * US;
            }
            if (cuMemcpyHtoDAsync_v2(device, host, BATCH, 0)) return 4;
            fakecupti_memcpy(HTOD, PINNED, DEVICE, BATCH, gpu, gpu + 10 * US, 0);
            gpu += 30 * US;
        }
    }
    /* Records after the recording's end would be seen only while they run. */
    while (fakecupti_now() < gpu) {
    }
    printf("steps %d\n", steps);
    return 0;
}
