/* A program that ends itself with a signal: 50 launches, then argv[3] (a signal number) sent
 * to itself in the way argv[1] names: kill-pid, kill-0, kill-group (kill of minus its group),
 * killpg, raise, tgkill, pthread_kill, sigqueue, pthread_sigqueue. With argv[2] "default" it
 * first sets the signal back to SIG_DFL (as Python does after Ctrl-C), replacing gpuspy's
 * handler; with "as-is" it leaves the disposition alone. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: self_signal FORM default|as-is SIGNAL\n");
        return 2;
    }
    const char *form = argv[1];
    int sig = atoi(argv[3]);
    for (int i = 0; i < 50; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    if (!strcmp(argv[2], "default")) signal(sig, SIG_DFL);
    union sigval value = {.sival_int = 7};
    int sent;
    if (!strcmp(form, "kill-pid")) sent = kill(getpid(), sig);
    else if (!strcmp(form, "kill-0")) sent = kill(0, sig);
    else if (!strcmp(form, "kill-group")) sent = kill(-getpgrp(), sig);
    else if (!strcmp(form, "killpg")) sent = killpg(getpgrp(), sig);
    else if (!strcmp(form, "raise")) sent = raise(sig);
    else if (!strcmp(form, "tgkill")) sent = tgkill(getpid(), gettid(), sig);
    else if (!strcmp(form, "pthread_kill")) sent = pthread_kill(pthread_self(), sig);
    else if (!strcmp(form, "sigqueue")) sent = sigqueue(getpid(), sig, value);
    else if (!strcmp(form, "pthread_sigqueue")) sent = pthread_sigqueue(pthread_self(), sig, value);
    else {
        fprintf(stderr, "self_signal: unknown form %s\n", form);
        return 2;
    }
    if (sent != 0) {
        perror(form);
        return 2;
    }
    for (;;) pause();
}
