/* What CUPTI's states cost a running program, in one process (issue 14): the launch loop
 * and the managed-memory loop of modes.c, timed in blocks, first with no CUPTI loaded,
 * then with libcupti loaded and gpuspy's buffer callbacks registered, in each state that
 * gpuspy's sampled mode passes through, in rotating rounds:
 *
 *   attached   callbacks registered, unified-memory counters configured, no kind on
 *   overhead   the OVERHEAD kind on (gpuspy keeps it on for the whole run)
 *   traced     CONCURRENT_KERNEL, MEMCPY, MEMSET and OVERHEAD on (a recording slot)
 *   um         the unified-memory counter kind on
 *   toggling   a second thread turns the traced kinds on for 20 ms in every 400 ms and
 *              flushes after each slot (the sampled mode on a launch-bound loop)
 *   flushing   a second thread calls cuptiActivityFlushAll(0) every 20 ms, no kind on
 *   finalized  after the rounds, cuptiFinalize: CUPTI detached again
 *
 * The second thread exists (polling every millisecond) in every state, `none` included.
 * Prints one line per block: STATE ROUND launch_ns_per_iter managed_ns_per_iter, then the
 * medians and each state's change against `none`; and the time each switch took.
 *
 * With `detach` as third argument, the second experiment: whether detaching CUPTI
 * (cuptiFinalize) between recording slots gives the launch path back, what attaching and
 * detaching cost, and whether a slot attached anew still records kernels and
 * unified-memory faults. After the `none` rounds CUPTI is attached once and detached, then
 * rounds rotate through:
 *
 *   detached   CUPTI loaded, attached once before, finalized since
 *   attached   callbacks registered, unified-memory counters configured, no kind on
 *   overhead   the OVERHEAD kind on as well
 *   cycling    the second thread attaches with the traced kinds for 20 ms in every 200 ms,
 *              then disables them, flushes and detaches, while the program launches
 *   um         the same with the unified-memory counter kind on in each slot, detached
 *              without disabling it (its off switch took 2.0 s on CUPTI 13.0)
 *
 * and `cycling`'s slots print what each attach and detach took and what each slot recorded.
 *   cc -O2 -o cupti-cost bench/gpu/cupti-cost.c -ldl -lpthread
 *   ./cupti-cost PATH/TO/libcupti.so [ROUNDS] [detach]       (no CUDA toolkit needed) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

enum { MEMCPY = 1, MEMSET = 2, CONCURRENT_KERNEL = 10, OVERHEAD = 17, UM_COUNTER = 25 };
static const int TRACED[] = {CONCURRENT_KERNEL, MEMCPY, MEMSET, OVERHEAD};

static Launch counted_launch;
static atomic_long launches;
/* Counts the program's launches, so that a slot's records can be set against them. */
static int launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                  unsigned bz, unsigned shared, void *stream, void **args, void **extra) {
    atomic_fetch_add_explicit(&launches, 1, memory_order_relaxed);
    return counted_launch(f, gx, gy, gz, bx, by, bz, shared, stream, args, extra);
}
static Fn stream_sync, ctx_sync;
static void *empty, *touch;
static unsigned long long managed;
static const unsigned PAGES = 16384;

/* modes.c's launch loop: 2 empty kernels and 5 µs of host work per iteration. */
static double launch_block(void) {
    const long iters = 20000;
    stream_sync(NULL);
    long long t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        launch(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        host_work(2500);
        launch(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        host_work(2500);
        if ((i & 255) == 255) stream_sync(NULL);
    }
    stream_sync(NULL);
    return (double)(now_ns() - t0) / iters;
}

/* modes.c's managed loop: the host writes a word of every page, a kernel increments it. */
static double managed_block(void) {
    const long iters = 6;
    volatile unsigned *host = (volatile unsigned *)(unsigned long)managed;
    unsigned pages = PAGES;
    long long t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        for (unsigned k = 0; k < PAGES; k++) host[k * 1024] += 1;
        void *args[] = {&managed, &pages};
        launch(touch, PAGES / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
        ctx_sync();
    }
    return (double)(now_ns() - t0) / iters;
}

/* CUPTI, through dlsym: the V1 activity API gpuspy uses (shim/src/collect/gpu/cupti.rs). */
static int (*enable)(int), (*disable)(int), (*flush_all)(int);
static int (*next_record)(void *, size_t, void **);
static int (*register_callbacks)(void *, void *), (*configure_um)(void *, unsigned);
static int (*finalize)(void);
static atomic_long records, kernel_records, um_records[8];

static void on_request(unsigned char **buffer, size_t *size, size_t *max_records) {
    *size = 512 << 10;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void on_complete(void *ctx, unsigned stream, unsigned char *buffer, size_t size,
                        size_t valid) {
    (void)ctx, (void)stream, (void)size;
    void *record = NULL;
    while (next_record(buffer, valid, &record) == 0) {
        atomic_fetch_add(&records, 1);
        unsigned kind = ((unsigned *)record)[0], counter = ((unsigned *)record)[1];
        if (kind == CONCURRENT_KERNEL) atomic_fetch_add(&kernel_records, 1);
        if (kind == UM_COUNTER) atomic_fetch_add(&um_records[counter & 7], 1);
    }
    free(buffer);
}

static atomic_int background; /* 0 none, 1 toggling, 2 flushing, -1 stop */

/* Looks every millisecond; OVERHEAD stays on meanwhile, as gpuspy keeps it. */
static void *background_thread(void *arg) {
    (void)arg;
    long long next = 0;
    int on = 0, what;
    while ((what = atomic_load(&background)) >= 0) {
        long long t = now_ns();
        if (what == 1 && t >= next) {
            for (int k = 0; k < 3; k++) on ? disable(TRACED[k]) : enable(TRACED[k]);
            if (on) flush_all(0);
            next = t + (on ? 380000000LL : 20000000LL);
            on = !on;
        } else if (what == 2 && t >= next) {
            flush_all(0);
            next = t + 20000000LL;
        } else if (what == 0) {
            for (int k = 0; on && k < 3; k++) disable(TRACED[k]);
            on = 0, next = 0;
        }
        usleep(1000);
    }
    return NULL;
}

/* Attaches CUPTI (any CUPTI call does; registering the callbacks is gpuspy's first) with the
 * unified-memory counters configured, then turns `kinds` on; returns the time it took. */
static long long attach(const int *kinds, int n) {
    long long t0 = now_ns();
    register_callbacks(on_request, on_complete);
    struct { unsigned scope, kind, device, enable; } um[5];
    for (int k = 0; k < 5; k++) um[k].scope = 1, um[k].kind = k + 1, um[k].device = 0, um[k].enable = 1;
    configure_um(um, 5);
    for (int k = 0; k < n; k++) enable(kinds[k]);
    return now_ns() - t0;
}

/* Flushes the records out, then detaches CUPTI; returns the time it took. */
static long long detach(void) {
    long long t0 = now_ns();
    flush_all(1);
    finalize();
    return now_ns() - t0;
}

/* `cycling` (1) and `um` (2): one slot of the traced kinds (and the unified-memory
 * counters) per period, detached in between; -1 stops. One line per slot. */
static atomic_int cycling, cycling_seen;
static void *cycling_thread(void *arg) {
    (void)arg;
    static const int UM_TRACED[] = {CONCURRENT_KERNEL, MEMCPY, MEMSET, OVERHEAD, UM_COUNTER};
    long long next = 0;
    int what;
    while ((what = atomic_load(&cycling)) >= 0) {
        atomic_store(&cycling_seen, what);
        long long t = now_ns();
        if (what > 0 && t >= next) {
            long before = atomic_load(&launches), kernels = atomic_load(&kernel_records);
            long um = atomic_load(&um_records[4]) + atomic_load(&um_records[3]);
            long long on_ns = what == 1 ? attach(TRACED, 4) : attach(UM_TRACED, 5);
            long long slot_ns = what == 1 ? 20000000LL : 100000000LL;
            while (now_ns() < t + slot_ns) usleep(1000);
            long long off_t0 = now_ns();
            for (int k = 0; k < 3; k++) disable(TRACED[k]);
            long long off_ns = now_ns() - off_t0;
            long during = atomic_load(&launches) - before;
            long long detach_ns = detach();
            printf("slot %s attach_us %.1f disable_us %.1f detach_us %.1f launches %ld "
                   "kernel_records %ld um_faults_cpu_gpu %ld\n",
                   what == 1 ? "cycling" : "um", on_ns / 1e3, off_ns / 1e3, detach_ns / 1e3,
                   during, atomic_load(&kernel_records) - kernels,
                   atomic_load(&um_records[4]) + atomic_load(&um_records[3]) - um);
            fflush(stdout);
            next = t + 200000000LL;
        }
        usleep(1000);
    }
    return NULL;
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const char *STATES[] = {"none",     "attached", "overhead", "traced",
                               "um",       "toggling", "flushing", "finalized"};
enum { NSTATES = 7, MAX_ROUNDS = 16 };
/* The states measured in rounds, then `finalized`. */
static double launch_ns[NSTATES + 1][MAX_ROUNDS], managed_ns[NSTATES + 1][MAX_ROUNDS];

static long long timed(int (*f)(int), int kind) {
    long long t0 = now_ns();
    f(kind);
    return now_ns() - t0;
}

static void measure(int s, int r) {
    long long switch_ns = 0;
    switch (s) {
    case 2: switch_ns = timed(enable, OVERHEAD); break;
    case 3:
        for (int k = 0; k < 4; k++) switch_ns += timed(enable, TRACED[k]);
        break;
    case 4: switch_ns = timed(enable, UM_COUNTER); break;
    case 5:
    case 6:
        enable(OVERHEAD);
        atomic_store(&background, s == 5 ? 1 : 2);
        break;
    }
    launch_ns[s][r] = launch_block();
    managed_ns[s][r] = managed_block();
    long long off_ns = 0;
    switch (s) {
    case 2: off_ns = timed(disable, OVERHEAD); break;
    case 3:
        for (int k = 0; k < 4; k++) off_ns += timed(disable, TRACED[k]);
        break;
    case 4: off_ns = timed(disable, UM_COUNTER); break;
    case 5:
    case 6:
        atomic_store(&background, 0);
        usleep(5000);
        disable(OVERHEAD);
        break;
    }
    flush_all(1);
    printf("%s %d %.1f %.1f switch_on_us %.1f switch_off_us %.1f records %ld\n", STATES[s], r,
           launch_ns[s][r], managed_ns[s][r], switch_ns / 1e3, off_ns / 1e3,
           atomic_load(&records));
    fflush(stdout);
}

static void print_medians(const char *const *names, int states, int rounds) {
    double base_l = 0, base_m = 0;
    printf("state      launch ns/iter  vs none   managed ns/iter  vs none   (medians of %d)\n",
           rounds);
    for (int s = 0; s < states; s++) {
        double l = median(launch_ns[s], rounds), m = median(managed_ns[s], rounds);
        if (s == 0) base_l = l, base_m = m;
        printf("%-9s %14.1f %+8.2f%% %16.1f %+8.2f%%\n", names[s], l, 100 * (l / base_l - 1), m,
               100 * (m / base_m - 1));
    }
}

/* Experiment 1: the states of one attachment, then finalized. */
static void states_experiment(int rounds) {
    long long t0 = now_ns();
    register_callbacks(on_request, on_complete);
    struct { unsigned scope, kind, device, enable; } um[5];
    for (int k = 0; k < 5; k++) um[k].scope = 1, um[k].kind = k + 1, um[k].device = 0, um[k].enable = 1;
    int um_result = configure_um(um, 5);
    printf("attach_ms %.1f um_configure %d\n", (now_ns() - t0) / 1e6, um_result);
    /* Rotating order: round r starts at state 1 + r. */
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NSTATES - 1; k++) measure(1 + (r + k) % (NSTATES - 1), r);
    /* Detached again: whether cuptiFinalize gives the launch path back. */
    t0 = now_ns();
    int finalized = finalize();
    printf("finalize %d ms %.1f\n", finalized, (now_ns() - t0) / 1e6);
    for (int r = 0; r < rounds; r++) {
        launch_ns[NSTATES][r] = launch_block();
        managed_ns[NSTATES][r] = managed_block();
        printf("finalized %d %.1f %.1f\n", r, launch_ns[NSTATES][r], managed_ns[NSTATES][r]);
    }
    atomic_store(&background, -1);
    print_medians(STATES, NSTATES + 1, rounds);
}

/* Experiment 2: detached between slots (see the top of this file). */
static const char *DETACH_STATES[] = {"none", "detached", "attached", "overhead", "cycling", "um"};
enum { NDETACH = 6 };

static void detach_experiment(int rounds) {
    static const int ONLY_OVERHEAD[] = {OVERHEAD};
    long long first = attach(NULL, 0);
    printf("first_attach_ms %.1f first_detach_ms %.1f\n", first / 1e6, detach() / 1e6);
    pthread_t thread;
    pthread_create(&thread, NULL, cycling_thread, NULL);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NDETACH - 1; k++) {
            int s = 1 + (r + k) % (NDETACH - 1);
            long long on_ns = 0, off_ns = 0;
            if (s == 2 || s == 3) on_ns = s == 2 ? attach(NULL, 0) : attach(ONLY_OVERHEAD, 1);
            if (s >= 4) atomic_store(&cycling, s - 3);
            launch_ns[s][r] = launch_block();
            managed_ns[s][r] = managed_block();
            if (s == 2 || s == 3) off_ns = detach();
            if (s >= 4) {
                atomic_store(&cycling, 0);
                while (atomic_load(&cycling_seen)) usleep(1000); /* its slot is over */
            }
            printf("%s %d %.1f %.1f attach_us %.1f detach_us %.1f\n", DETACH_STATES[s], r,
                   launch_ns[s][r], managed_ns[s][r], on_ns / 1e3, off_ns / 1e3);
            fflush(stdout);
        }
    atomic_store(&cycling, -1);
    pthread_join(thread, NULL);
    atomic_store(&background, -1);
    print_medians(DETACH_STATES, NDETACH, rounds);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cupti-cost LIBCUPTI [ROUNDS] [detach]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 5;
    int detaching = argc > 3 && strcmp(argv[3], "detach") == 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "no driver: %s\n", dlerror());
        return 1;
    }
#define GET(name) ((Fn)dlsym(h, name))
    void *ctx = 0, *mod = 0;
    int dev = 0;
    if (GET("cuInit")(0) || GET("cuDeviceGet")(&dev, 0) ||
        GET("cuDevicePrimaryCtxRetain")(&ctx, dev) || GET("cuCtxSetCurrent")(ctx) ||
        GET("cuModuleLoadData")(&mod, PTX) || GET("cuModuleGetFunction")(&empty, mod, "empty") ||
        GET("cuModuleGetFunction")(&touch, mod, "touch") ||
        GET("cuMemAllocManaged")(&managed, (size_t)PAGES * 4096, 1)) {
        fprintf(stderr, "driver setup failed\n");
        return 1;
    }
    counted_launch = (Launch)dlsym(h, "cuLaunchKernel");
    stream_sync = GET("cuStreamSynchronize");
    ctx_sync = GET("cuCtxSynchronize");
    /* The second thread runs from the start, so that every state has it. */
    pthread_t thread;
    pthread_create(&thread, NULL, background_thread, NULL);
    launch_block(), managed_block(); /* warm-up */
    /* `none` before CUPTI is loaded, each round: nothing can be unloaded after. */
    for (int r = 0; r < rounds; r++) {
        launch_ns[0][r] = launch_block();
        managed_ns[0][r] = managed_block();
        printf("none %d %.1f %.1f\n", r, launch_ns[0][r], managed_ns[0][r]);
    }
    void *cupti = dlopen(argv[1], RTLD_NOW);
    if (!cupti) {
        fprintf(stderr, "no CUPTI: %s\n", dlerror());
        return 1;
    }
    register_callbacks = dlsym(cupti, "cuptiActivityRegisterCallbacks");
    configure_um = dlsym(cupti, "cuptiActivityConfigureUnifiedMemoryCounter");
    enable = dlsym(cupti, "cuptiActivityEnable");
    disable = dlsym(cupti, "cuptiActivityDisable");
    flush_all = dlsym(cupti, "cuptiActivityFlushAll");
    next_record = dlsym(cupti, "cuptiActivityGetNextRecord");
    finalize = dlsym(cupti, "cuptiFinalize");
    if (!register_callbacks || !configure_um || !enable || !disable || !flush_all ||
        !next_record || !finalize) {
        fprintf(stderr, "CUPTI's activity API missing\n");
        return 1;
    }
    if (detaching)
        detach_experiment(rounds);
    else
        states_experiment(rounds);
    pthread_join(thread, NULL);
    return 0;
}
