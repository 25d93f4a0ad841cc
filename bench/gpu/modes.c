/* Short GPU loops, one per workload class, for paired overhead runs of gpuspy's CUPTI
 * modes (bench/gpu/overhead-modes.sh). Plain driver API through dlopen, so a process
 * starts in about 0.3 s (no framework import) and 25 pairs of each fit in minutes.
 *
 *   modes WORKLOAD [ITERS]   prints "loop_ns_per_iter X", "launches N", "stalls N MS MAX_MS"
 *                            (iterations over the workload's stall threshold, their total
 *                            and longest time), "excess_pct P" (the loop's time above
 *                            its median iteration's, in % of the loop) and, per thread,
 *                            "thread_cpu_ms NAME MS" (gpuspy's threads are named gpuspy-*)
 *
 * launch   2 empty-kernel launches and 5 µs of host work per iteration, a stream sync
 *          every 256: a launch-bound eager loop (PyTorch's is 2 launches per ~15 µs).
 * managed  64 MiB of managed memory: the host writes a word of every page, a kernel
 *          increments a word of every page, sync: pages migrate both ways each time.
 * sync     a 200 µs kernel, cuCtxSynchronize, then 300 µs of host work: sync-stalled.
 * copy     a 4 MiB cuMemcpyHtoD from pageable memory (staged by the driver).
 * gpu      8 kernels of 1 ms queued, then a sync: GPU-bound.
 * deep     a 20 µs kernel and a counting kernel per iteration, no host work, a sync every
 *          4,096: the launch queue stays full, so gpuspy's sampled mode detaches CUPTI
 *          with hundreds of kernels in flight; the count is checked at the end.
 *
 * The excess is what rare events cost the loop (syncs, CUPTI's switches, its recorded
 * slots), measured within the process: its difference between two configurations has
 * far less noise than their loop times, which vary ±8 % from process to process. A cost
 * on every iteration (the shim's per-call recording) moves the median instead. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

/* CPU time of each thread of this process, from /proc (utime + stime, in clock ticks). */
static void print_thread_cpu(void) {
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *t;
    while (tasks && (t = readdir(tasks))) {
        if (t->d_name[0] == '.') continue;
        char path[300], name[64] = "?", stat[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", t->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%63s", name) != 1) strcpy(name, "?");
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", t->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = 0;
        /* Fields after the ")" that ends the name: state is field 3, utime 14, stime 15. */
        char *rest = strrchr(stat, ')');
        unsigned long utime = 0, stime = 0;
        if (rest && sscanf(rest + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                           &stime) == 2)
            printf("thread_cpu_ms %s %.1f\n", name, (utime + stime) * 1000.0 / sysconf(_SC_CLK_TCK));
    }
    if (tasks) closedir(tasks);
}

/* Iterations slower than `stall_ns`: where CUPTI attaching, detaching or switching its kinds
 * holds the program's thread, its loop shows a stall there, apart from the cost spread over
 * every call. */
static long long stall_ns, stall_last, stall_total, stall_max;
static long stalls;
/* Every iteration's time, for the median. */
static long long *took;
static void mark(long i) {
    if (i < 0) return;
    long long t = now_ns(), d = t - stall_last;
    if (i > 0) {
        took[i - 1] = d;
        if (d > stall_ns) {
            stalls++;
            stall_total += d;
            if (d > stall_max) stall_max = d;
        }
    }
    stall_last = t;
}

static int by_value(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The time of the first n iterations above n times their median, in % of their total. */
static double excess_pct(long n) {
    long long total = 0;
    for (long i = 0; i < n; i++) total += took[i];
    qsort(took, n, sizeof *took, by_value);
    return n > 0 && total > 0 ? 100.0 * (total - n * took[n / 2]) / total : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: modes launch|managed|sync|copy|gpu [ITERS]\n");
        return 2;
    }
    const char *w = argv[1];
    long iters = argc > 2 ? atol(argv[2]) : 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "no driver: %s\n", dlerror());
        return 1;
    }
#define GET(name) ((Fn)dlsym(h, name))
    void *ctx = 0, *mod = 0, *empty = 0, *touch = 0, *spin = 0;
    int dev = 0;
    if (GET("cuInit")(0) || GET("cuDeviceGet")(&dev, 0) ||
        GET("cuDevicePrimaryCtxRetain")(&ctx, dev) || GET("cuCtxSetCurrent")(ctx) ||
        GET("cuModuleLoadData")(&mod, PTX) || GET("cuModuleGetFunction")(&empty, mod, "empty") ||
        GET("cuModuleGetFunction")(&touch, mod, "touch") ||
        GET("cuModuleGetFunction")(&spin, mod, "spin")) {
        fprintf(stderr, "driver setup failed\n");
        return 1;
    }
    Launch launch = (Launch)dlsym(h, "cuLaunchKernel");
    Fn stream_sync = GET("cuStreamSynchronize"), ctx_sync = GET("cuCtxSynchronize");
    long launches = 0;
    long long t0 = 0;
    if (strcmp(w, "launch") == 0) {
        iters = iters ? iters : 100000;
        took = calloc(iters, sizeof *took);
        stall_ns = 300000; /* an iteration takes ~7.5 µs */
        for (long i = -2000; i < iters; i++) {
            if (i == 0) stream_sync(NULL), t0 = now_ns();
            mark(i);
            launch(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
            host_work(2500);
            launch(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
            host_work(2500);
            if ((i & 255) == 255) stream_sync(NULL);
            launches += 2;
        }
    } else if (strcmp(w, "managed") == 0) {
        iters = iters ? iters : 50;
        took = calloc(iters, sizeof *took);
        unsigned pages = 16384;
        unsigned long long p = 0;
        if (GET("cuMemAllocManaged")(&p, (size_t)pages * 4096, 1)) {
            fprintf(stderr, "cuMemAllocManaged failed\n");
            return 1;
        }
        volatile unsigned *host = (volatile unsigned *)(unsigned long)p;
        stall_ns = 100000000;
        for (long i = -2; i < iters; i++) {
            if (i == 0) t0 = now_ns();
            mark(i);
            for (unsigned k = 0; k < pages; k++) host[k * 1024] += 1;
            void *args[] = {&p, &pages};
            launch(touch, pages / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
            ctx_sync();
            launches++;
        }
        if (host[0] != (unsigned)(2 * (iters + 2))) {
            fprintf(stderr, "wrong result %u\n", host[0]);
            return 1;
        }
    } else if (strcmp(w, "sync") == 0) {
        iters = iters ? iters : 3000;
        took = calloc(iters, sizeof *took);
        unsigned long long ns = 200000;
        void *args[] = {&ns};
        stall_ns = 2000000;
        for (long i = -20; i < iters; i++) {
            if (i == 0) t0 = now_ns();
            mark(i);
            launch(spin, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
            ctx_sync();
            host_work(300000);
            launches++;
        }
    } else if (strcmp(w, "copy") == 0) {
        iters = iters ? iters : 1500;
        took = calloc(iters, sizeof *took);
        size_t bytes = 4 << 20;
        char *src = malloc(bytes);
        memset(src, 1, bytes);
        unsigned long long d = 0;
        /* The unversioned names are the 32-bit-pointer forms of CUDA 3.1. */
        Fn copy = GET("cuMemcpyHtoD_v2");
        if (GET("cuMemAlloc_v2")(&d, bytes)) {
            fprintf(stderr, "cuMemAlloc_v2 failed\n");
            return 1;
        }
        stall_ns = 3000000; /* a copy takes ~1 ms */
        for (long i = -20; i < iters; i++) {
            if (i == 0) t0 = now_ns();
            mark(i);
            if (copy(d, src, bytes)) {
                fprintf(stderr, "cuMemcpyHtoD_v2 failed\n");
                return 1;
            }
        }
    } else if (strcmp(w, "gpu") == 0) {
        iters = iters ? iters : 180;
        took = calloc(iters, sizeof *took);
        unsigned long long ns = 1000000;
        void *args[] = {&ns};
        stall_ns = 20000000;
        for (long i = -2; i < iters; i++) {
            if (i == 0) t0 = now_ns();
            mark(i);
            for (int k = 0; k < 8; k++) launch(spin, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
            ctx_sync();
            launches += 8;
        }
    } else if (strcmp(w, "deep") == 0) {
        iters = iters ? iters : 60000;
        took = calloc(iters, sizeof *took);
        stall_ns = 200000000; /* a sync waits for ~80 ms of queued kernels */
        unsigned long long ns = 20000, counter = 0;
        unsigned one = 1;
        void *spin_args[] = {&ns}, *count_args[] = {&counter, &one};
        if (GET("cuMemAlloc_v2")(&counter, 4096) || GET("cuMemsetD32_v2")(counter, 0, 1)) {
            fprintf(stderr, "cuMemAlloc_v2 failed\n");
            return 1;
        }
        for (long i = -100; i < iters; i++) {
            if (i == 0) ctx_sync(), t0 = now_ns();
            mark(i);
            launch(spin, 1, 1, 1, 32, 1, 1, 0, NULL, spin_args, NULL);
            launch(touch, 1, 1, 1, 32, 1, 1, 0, NULL, count_args, NULL);
            if ((i & 4095) == 4095) stream_sync(NULL);
            launches += 2;
        }
        unsigned counted = 0;
        ctx_sync();
        if (GET("cuMemcpyDtoH_v2")(&counted, counter, 4) || counted != (unsigned)(iters + 100)) {
            fprintf(stderr, "wrong count %u of %ld\n", counted, iters + 100);
            return 1;
        }
    } else {
        fprintf(stderr, "unknown workload %s\n", w);
        return 2;
    }
    ctx_sync();
    printf("loop_ns_per_iter %.1f\n", (double)(now_ns() - t0) / iters);
    printf("launches %ld\n", launches);
    printf("stalls %ld %.1f %.1f\n", stalls, stall_total / 1e6, stall_max / 1e6);
    /* The last iteration ends at no mark. */
    printf("excess_pct %.3f\n", excess_pct(iters - 1));
    fflush(stdout);
    print_thread_cpu();
    return 0;
}
