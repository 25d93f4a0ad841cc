/* CUPTI activity through the fake libcupti: the program emits records the way the GPU
 * would, and gpuspy's dump must reduce them exactly. With "profiler", the program then
 * registers its own activity callbacks (as torch.profiler does): gpuspy must step aside,
 * keep what it had, switch its kinds off and leave later records to the program; with
 * "profiler-early", the program enables the kernel kind before it registers (as CUPTI's
 * samples do), and that kind must stay on; with "subscriber", it first subscribes to
 * CUPTI's callbacks (as Kineto does): gpuspy must have finalized CUPTI before the
 * subscription goes through, so that the program finds it as if unused. With "vfork", a vfork child
 * ends in _exit (as after a failed exec) and the parent then emits 7 more kernels, which
 * its dump must still hold. With "no-context", the program creates its context some way
 * gpuspy does not hook: its activity must still reach the dump. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cuda_min.h"

typedef void (*request_fn)(unsigned char **, size_t *, size_t *);
typedef void (*complete_fn)(void *, unsigned, unsigned char *, size_t, size_t);
extern int cuptiActivityRegisterCallbacks(request_fn, complete_fn);
extern int cuDevicePrimaryCtxRetain(void **context, int device);
extern int cuptiActivityEnable(unsigned kind);
extern int cuptiSubscribe(void **subscriber, void *callback, void *userdata);
extern int fakecupti_found_finalized(void);
extern unsigned long long fakecupti_stray_calls(void);
extern int cuptiActivityFlushAll(unsigned flag);
extern int fakecupti_enabled(unsigned kind);
extern unsigned long long fakecupti_now(void);
extern void fakecupti_kernel(unsigned device, unsigned long long start, unsigned long long end,
                             int blocks, const char *name);
extern void fakecupti_memcpy(unsigned char kind, unsigned char src, unsigned char dst,
                             unsigned long long bytes, unsigned long long start,
                             unsigned long long end, unsigned device);
extern void fakecupti_um(unsigned counter, unsigned long long value);

#define MS 1000000ULL

static unsigned char program_buffer[1 << 16];
static size_t program_bytes;

static void program_request(unsigned char **buf, size_t *size, size_t *max) {
    *buf = program_buffer;
    *size = sizeof program_buffer;
    *max = 0;
}

static void program_complete(void *ctx, unsigned stream, unsigned char *buf, size_t size,
                             size_t valid) {
    (void)ctx, (void)stream, (void)size;
    if (buf == program_buffer) program_bytes += valid;
}

int main(int argc, char **argv) {
    int early = argc > 1 && strcmp(argv[1], "profiler-early") == 0;
    int subscriber = argc > 1 && strcmp(argv[1], "subscriber") == 0;
    int profiler = early || subscriber || (argc > 1 && strcmp(argv[1], "profiler") == 0);
    int use_vfork = argc > 1 && strcmp(argv[1], "vfork") == 0;
    int hooked_context = !(argc > 1 && strcmp(argv[1], "no-context") == 0);
    if (cuInit(0)) return 1;
    void *context;
    if (hooked_context && cuDevicePrimaryCtxRetain(&context, 0)) return 3;
    /* gpuspy starts CUPTI on its own thread after cuInit. */
    for (int i = 0; i < 5000 && !(fakecupti_enabled(10) && fakecupti_enabled(25)); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, 0);
    }
    if (!fakecupti_enabled(10)) return 2;
    unsigned long long t = fakecupti_now();
    /* Kernels [0,10) [5,20) [30,40) ms: 30 ms busy; then 1000 kernels of 1 us, 2 us apart. */
    fakecupti_kernel(0, t + 30 * MS, t + 40 * MS, 4, "_Z6vecAddPfS_S_i");
    fakecupti_kernel(0, t, t + 10 * MS, 4, "_Z6vecAddPfS_S_i");
    fakecupti_kernel(0, t + 5 * MS, t + 20 * MS, 4, "_Z6vecAddPfS_S_i");
    for (int i = 0; i < 1000; i++)
        fakecupti_kernel(0, t + 50 * MS + i * 2000ULL, t + 50 * MS + i * 2000ULL + 1000, 1024,
                         "gemm_kernel");
    /* 64 MiB host-to-device from pageable memory in 8 ms, during the first kernel. */
    fakecupti_memcpy(1, 1, 3, 64ULL << 20, t + 1 * MS, t + 9 * MS, 0);
    fakecupti_um(3, 0x7f00);
    fakecupti_um(3, 0x7f08);
    fakecupti_um(4, 2);
    fakecupti_um(1, 1 << 20);
    if (use_vfork) {
        pid_t child = vfork();
        if (child == 0) _exit(0);
        waitpid(child, 0, 0);
        for (int i = 0; i < 7; i++)
            fakecupti_kernel(0, t + 200 * MS + i * MS, t + 200 * MS + i * MS + 100, 8, "after_vfork");
    }
    if (profiler) {
        if (early) cuptiActivityEnable(10);
        if (subscriber) {
            void *handle;
            cuptiSubscribe(&handle, 0, 0);
            printf("subscribing found CUPTI finalized: %d\n", fakecupti_found_finalized());
        }
        cuptiActivityRegisterCallbacks(program_request, program_complete);
        printf("registering found CUPTI finalized: %d\n", fakecupti_found_finalized());
        printf("after registering: kernels %d copies %d\n", fakecupti_enabled(10), fakecupti_enabled(1));
        cuptiActivityEnable(10);
        for (int i = 0; i < 10; i++)
            fakecupti_kernel(0, t + 100 * MS + i * MS, t + 100 * MS + i * MS + 100, 8, "late_kernel");
        cuptiActivityFlushAll(1);
        printf("program records %zu stray calls %llu\n", program_bytes / 112, fakecupti_stray_calls());
    }
    /* Long enough for a few NVML samples at GPUSPY_NVML_MS=50. */
    struct timespec samples = {0, 300 * 1000000};
    nanosleep(&samples, 0);
    return 0;
}
