/* A regular stream of GPU work through the fake libcupti, in real time: every 100 µs ten
 * kernels of 5 µs back to back from "now", each launched through cuLaunchKernel (recorded
 * only while gpuspy has the kernel kind on, as the real CUPTI records only launches made
 * while it is on), and with "managed", a managed allocation and one CPU page fault every
 * millisecond (recorded only while the
 * unified-memory counters are on). A late step is not made up for (the stream stays
 * regular in time, never bunched). Runs for ARGV[1] ms; prints how many of each it made,
 * which gpuspy's sampled counts must match once extrapolated, and how many CUPTI calls
 * gpuspy made while it had CUPTI detached between slots (each would attach it again), and
 * how many switches of a traced kind came while the fake driver had a call in flight.
 * Options after ARGV[1], any of: "managed"; "graph", a stream capture begins first (a CUDA
 * graph); "nccl", an NCCL communicator is made first; "paced", the ten kernels come every
 * 10 ms (1,000 a second: cheap enough to be recorded whole); "late", each burst's records
 * come 300 ms after it (a deep queue's buffers complete late), if the kind is on then;
 * "setup", with "managed": 300 ms of host set-up faults (the host filling the memory, no
 * launch) before the stream, not counted in the faults printed; "stuck", run under
 * FAKECUPTI_KERNELS_STOP: the ten kernels come every 2 ms (5,000 a second, cheaper to record
 * with CUPTI left attached between slots than detached), each burst followed by a 4-byte
 * copy to the host and a sync (none with "nosync"), and the run ends 500 ms after CUPTI was
 * attached anew (or at ARGV[1] ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cuda_min.h"

extern int fakecupti_enabled(unsigned kind);
extern unsigned long long fakecupti_now(void);
extern void fakecupti_kernel(unsigned device, unsigned long long start, unsigned long long end,
                             int blocks, const char *name);
extern void fakecupti_um(unsigned counter, unsigned long long value);
extern void fakecupti_memcpy(unsigned char kind, unsigned char src, unsigned char dst,
                             unsigned long long bytes, unsigned long long start,
                             unsigned long long end, unsigned device);
extern unsigned long long fakecupti_stray_calls(void);
extern unsigned long long fakecupti_switches_in_calls(void);
extern int fakecupti_found_finalized(void);
extern int cuStreamBeginCapture_v2(void *stream, int mode);
typedef struct { char internal[128]; } ncclUniqueId;
extern int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank);

/* Whether OPTION is among the arguments after the run time. */
static int has(int argc, char **argv, const char *option) {
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], option) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    unsigned long long run_ns = (argc > 1 ? atoll(argv[1]) : 1500) * 1000000ULL;
    int managed = has(argc, argv, "managed");
    int stuck = has(argc, argv, "stuck");
    unsigned long long step_ns = has(argc, argv, "paced") ? 10000000 : stuck ? 2000000 : 100000;
    /* With "late": the bursts whose records are still to come, oldest first. */
    enum { PENDING = 8192 };
    static unsigned long long pending[PENDING];
    unsigned long long lag_ns = has(argc, argv, "late") ? 300000000 : 0;
    long queued = 0, emitted = 0;
    void *context;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&context, 0)) return 1;
    CUdeviceptr p;
    if (managed && cuMemAllocManaged(&p, 1 << 20, 1)) return 3;
    if (managed && has(argc, argv, "setup"))
        for (unsigned long long t0 = fakecupti_now(), t = t0; t - t0 < 300000000; t = fakecupti_now()) {
            fakecupti_um(3, 0x7f00);
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
        }
    if (has(argc, argv, "graph") && cuStreamBeginCapture_v2(0, 0)) return 4;
    ncclUniqueId id;
    memset(&id, 0x5a, sizeof id);
    void *comm = NULL;
    if (has(argc, argv, "nccl") && ncclCommInitRank(&comm, 2, id, 0)) return 6;
    unsigned long long start = fakecupti_now(), next = start, next_fault = start;
    long kernels = 0, faults = 0;
    unsigned long long attached_anew = 0;
    for (;;) {
        unsigned long long t = fakecupti_now();
        if (t - start >= run_ns) break;
        if (stuck && !attached_anew && fakecupti_found_finalized()) attached_anew = t;
        if (attached_anew && t - attached_anew >= 500000000) break;
        if (t >= next) {
            for (int k = 0; k < 10; k++) {
                if (cuLaunchKernel(0, 1024, 1, 1, 256, 1, 1, 0, 0, 0, 0)) return 5;
                if (!lag_ns)
                    fakecupti_kernel(0, t + k * 5000, t + (k + 1) * 5000, 1024, "stream_kernel");
            }
            if (lag_ns) pending[queued++ % PENDING] = t;
            if (stuck) {
                fakecupti_memcpy(2, 3, 1, 4, t + 50000, t + 52000, 0);
                if (!has(argc, argv, "nosync") && cuStreamSynchronize(0)) return 7;
            }
            kernels += 10;
            next = t + step_ns;
        }
        for (; emitted < queued && pending[emitted % PENDING] + lag_ns <= t; emitted++) {
            unsigned long long b = pending[emitted % PENDING];
            for (int k = 0; k < 10; k++)
                fakecupti_kernel(0, b + k * 5000, b + (k + 1) * 5000, 1024, "stream_kernel");
        }
        if (managed && t >= next_fault) {
            fakecupti_um(3, 0x7f00);
            faults++;
            next_fault = t + 1000000;
        }
    }
    printf("kernels %ld faults %ld switches_in_calls %llu stray_calls %llu\n", kernels, faults,
           fakecupti_switches_in_calls(), fakecupti_stray_calls());
    return 0;
}
