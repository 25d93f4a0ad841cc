/* Times each of N cuStreamSynchronize calls itself (CLOCK_MONOTONIC just outside the call)
 * and prints the durations in ns, one a line: what gpuspy recorded inside the call can be
 * checked against what the program saw, on a machine of any speed or load. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "cuda_min.h"

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5;
    if (cuInit(0)) return 1;
    for (int i = 0; i < n; i++) {
        long long start = now_ns();
        cuStreamSynchronize(0);
        printf("%lld\n", now_ns() - start);
    }
    return 0;
}
