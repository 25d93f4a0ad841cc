/* What bench/gpu/modes.c and bench/gpu/cupti-cost.c share: the driver API's function
 * types, the kernels (PTX, loaded with cuModuleLoadData, so no CUDA toolkit is needed) and
 * the host-side clock and busy work. */
#ifndef GPUSPY_BENCH_DRIVER_H
#define GPUSPY_BENCH_DRIVER_H
#include <time.h>

typedef int (*Fn)();
typedef int (*Launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, void *, void **, void **);

static const char PTX[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry empty() { ret; }\n"
    ".visible .entry touch(.param .u64 p, .param .u32 n) {\n"
    "  .reg .u32 %r<6>; .reg .u64 %rd<4>; .reg .pred %q;\n"
    "  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x;\n"
    "  mad.lo.u32 %r4, %r1, %r2, %r3;\n"
    "  ld.param.u32 %r5, [n];\n"
    "  setp.ge.u32 %q, %r4, %r5;\n"
    "  @%q ret;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  mul.wide.u32 %rd2, %r4, 4096;\n"
    "  add.u64 %rd3, %rd1, %rd2;\n"
    "  ld.global.u32 %r1, [%rd3];\n"
    "  add.u32 %r1, %r1, 1;\n"
    "  st.global.u32 [%rd3], %r1;\n"
    "  ret;\n}\n"
    ".visible .entry spin(.param .u64 ns) {\n"
    "  .reg .u64 %rd<4>; .reg .pred %q;\n"
    "  ld.param.u64 %rd1, [ns];\n"
    "  mov.u64 %rd2, %globaltimer;\n"
    "  add.u64 %rd3, %rd2, %rd1;\n"
    "LOOP:\n"
    "  mov.u64 %rd2, %globaltimer;\n"
    "  setp.lt.u64 %q, %rd2, %rd3;\n"
    "  @%q bra LOOP;\n"
    "  ret;\n}\n";

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void host_work(long long ns) {
    long long until = now_ns() + ns;
    while (now_ns() < until) {
    }
}

#endif
