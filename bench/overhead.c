/* The shim's added cost per intercepted call, on an empty-kernel cuLaunchKernel.
 *
 *   overhead paired ROUNDS   one process, calls alternating between libcuda's own
 *                            cuLaunchKernel (found with glibc's real dlsym, which the shim
 *                            does not see) and the pointer a program gets from dlsym (the
 *                            shim's wrapper when preloaded); each call timed with
 *                            CLOCK_MONOTONIC; prints p50/p90/p99 of both and the difference.
 *   overhead paired-cold ROUNDS
 *                            the same, but each call follows a sweep over 1 MiB of
 *                            memory that evicts the caches, as an interpreter does
 *                            between two launches: the cost of the wrapper's cache misses.
 *   overhead count N [CALL]  N calls through the dlsym'd pointer, for callgrind. CALL is
 *                            launch (the default: cuLaunchKernel, 11 arguments), query
 *                            (cuStreamQuery, 1 argument), sync (cuStreamSynchronize after
 *                            an empty launch; the launch is counted apart) or htod (a 4 KiB
 *                            cuMemcpyHtoDAsync_v2 from pageable malloc'd memory).
 *
 * Works against the real driver (an empty PTX kernel) and the fake one (tools/fakecuda). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef CUresult (*Launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
typedef CUresult (*Fn)();
typedef void *(*Dlsym)(void *, const char *);

static const char PTX[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry empty() { ret; }\n";

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static long long pct(long long *v, int n, double q) { return v[(int)(q * (n - 1))]; }

static volatile unsigned char sweep_buf[1 << 20];

/* Touch every cache line of 1 MiB (read and write), evicting L1 and L2. */
static void sweep(int on) {
    if (!on) return;
    for (int i = 0; i < (int)sizeof sweep_buf; i += 64) sweep_buf[i]++;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: overhead paired ROUNDS | count N\n"); return 2; }
    long n = atol(argv[2]);
    Dlsym real_dlsym = (Dlsym)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym) real_dlsym = (Dlsym)dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h || !real_dlsym) { fprintf(stderr, "no driver: %s\n", dlerror()); return 1; }
#define GET(name) ((Fn)dlsym(h, name))
    void *ctx = 0, *mod = 0, *func = 0, *stream = 0;
    int dev = 0;
    if (GET("cuInit")(0) || GET("cuDeviceGet")(&dev, 0) ||
        GET("cuDevicePrimaryCtxRetain")(&ctx, dev) || GET("cuCtxSetCurrent")(ctx) ||
        GET("cuModuleLoadData")(&mod, PTX) || GET("cuModuleGetFunction")(&func, mod, "empty") ||
        GET("cuStreamCreate")(&stream, 1)) {
        fprintf(stderr, "driver setup failed\n");
        return 1;
    }
    Fn sync = GET("cuStreamSynchronize");
    Launch wrapped = (Launch)dlsym(h, "cuLaunchKernel");
    Launch direct = (Launch)real_dlsym(h, "cuLaunchKernel");
    if (strcmp(argv[1], "count") == 0) {
        const char *call = argc > 3 ? argv[3] : "launch";
        if (strcmp(call, "query") == 0) {
            Fn query = GET("cuStreamQuery");
            for (long i = 0; i < n; i++) query(stream);
        } else if (strcmp(call, "sync") == 0) {
            for (long i = 0; i < n; i++) {
                wrapped(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
                sync(stream);
            }
        } else if (strcmp(call, "htod") == 0) {
            unsigned long long dptr = 0;
            char *host = malloc(4096);
            if (!host || GET("cuMemAlloc_v2")(&dptr, (size_t)4096)) {
                fprintf(stderr, "allocation failed\n");
                return 1;
            }
            memset(host, 1, 4096);
            Fn htod = GET("cuMemcpyHtoDAsync_v2");
            for (long i = 0; i < n; i++) {
                htod(dptr, host, (size_t)4096, stream);
                if ((i & 255) == 255) sync(stream);
            }
        } else if (strcmp(call, "launch") == 0) {
            for (long i = 0; i < n; i++) {
                wrapped(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
                if ((i & 255) == 255) sync(stream);
            }
        } else {
            fprintf(stderr, "unknown call %s: launch, query, sync or htod\n", call);
            return 2;
        }
        sync(stream);
        return 0;
    }
    int cold = strcmp(argv[1], "paired-cold") == 0;
    int calls = (int)n * (cold ? 32 : 256);
    long long *a = malloc(sizeof *a * calls), *b = malloc(sizeof *b * calls);
    for (int w = 0; w < 2000; w++) {
        direct(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
        wrapped(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
        if ((w & 127) == 127) sync(stream);
    }
    for (int i = 0; i < calls; i += 2) {
        long long t0, t1;
        sweep(cold);
        t0 = now_ns();
        direct(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
        t1 = now_ns();
        a[i / 2] = t1 - t0;
        sweep(cold);
        t0 = now_ns();
        wrapped(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
        t1 = now_ns();
        b[i / 2] = t1 - t0;
        /* Swap the order every other pair so neither side always goes first. */
        sweep(cold);
        t0 = now_ns();
        wrapped(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
        t1 = now_ns();
        b[calls / 2 + i / 2] = t1 - t0;
        sweep(cold);
        t0 = now_ns();
        direct(func, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
        t1 = now_ns();
        a[calls / 2 + i / 2] = t1 - t0;
        if ((i & 254) == 254) sync(stream);
    }
    qsort(a, calls, sizeof *a, cmp);
    qsort(b, calls, sizeof *b, cmp);
    printf("direct  p50 %6lld p90 %6lld p99 %6lld ns\n", pct(a, calls, .5), pct(a, calls, .9), pct(a, calls, .99));
    printf("wrapped p50 %6lld p90 %6lld p99 %6lld ns\n", pct(b, calls, .5), pct(b, calls, .9), pct(b, calls, .99));
    printf("added   p50 %6lld p90 %6lld ns per call (%s%s)\n", pct(b, calls, .5) - pct(a, calls, .5),
           pct(b, calls, .9) - pct(a, calls, .9), direct == wrapped ? "no shim: A/A" : "shim",
           cold ? ", cold caches" : "");
    return 0;
}
