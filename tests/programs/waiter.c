/* A job for `gpuspy run` tests: makes N launches, creates the file READY, then waits until
 * the file GO exists (if given) or until SIGTERM or SIGHUP arrives. It counts SIGINT, SIGTERM
 * and SIGHUP in handlers (SIGINT does not end it; each one creates READY.int), prints
 * "int=I term=T hup=H" and exits 0, so the shim writes its dump at exit.
 * usage: waiter N READY [GO] */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"

static volatile sig_atomic_t ints, terms, hups;
static char int_marker[4096];

static void on_signal(int sig) {
    if (sig == SIGINT) {
        ints++;
        close(open(int_marker, O_WRONLY | O_CREAT, 0644)); /* async-signal-safe */
    } else if (sig == SIGTERM) {
        terms++;
    } else {
        hups++;
    }
}

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    snprintf(int_marker, sizeof int_marker, "%s.int", argv[2]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, 0);
    sigaction(SIGTERM, &sa, 0);
    sigaction(SIGHUP, &sa, 0);
    for (int i = 0, n = atoi(argv[1]); i < n; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    touch(argv[2]);
    while (!terms && !hups && !(argc > 3 && access(argv[3], F_OK) == 0)) usleep(10 * 1000);
    printf("int=%d term=%d hup=%d\n", (int)ints, (int)terms, (int)hups);
    return 0;
}
