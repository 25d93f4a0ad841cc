/* Hardening cases: the program must run as it would without gpuspy, and its data must be kept.
 * argv[1] picks the case; each prints what the test checks and makes known driver calls:
 *   exit7          prints (buffered) and exits 7 after 20 launches; sleeps argv[2] ms first
 *   exec           100 launches, then execv's itself as "after": 7 launches, exit 0
 *   chdir-exec     chdir to argv[2] first, then as "exec"
 *   after          7 launches (the image after exec)
 *   threads-seq    argv[2] threads one after another, each 3 launches
 *   threads-conc   argv[2] threads alive at once, each 1 launch before and 1 after a barrier
 *   wait-signal    50 launches, prints "ready", then waits for a signal (pause)
 *   own-handler    installs a SIGTERM handler (before or after the first call: argv[2]),
 *                  50 launches, "ready", pause; the handler prints "handled" and exits 3
 *   malloc-signal  50 launches, a thread loops on malloc/free, SIGTERM is sent to that thread
 *   abort          50 launches, then abort()
 *   chdir          chdir to argv[2], then 5 launches */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"

static void launches(int n) {
    for (int i = 0; i < n; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
}

static void *three_launches(void *arg) {
    (void)arg;
    launches(3);
    return 0;
}

static pthread_barrier_t barrier;
static void *launch_wait_launch(void *arg) {
    (void)arg;
    launches(1);
    pthread_barrier_wait(&barrier);
    launches(1);
    return 0;
}

static void handled(int sig) {
    (void)sig;
    static const char msg[] = "handled\n";
    write(1, msg, sizeof msg - 1);
    _exit(3);
}

static void *churn(void *arg) {
    (void)arg;
    for (;;) {
        void *p = malloc(64 + (rand() & 4095));
        free(p);
    }
    return 0;
}

static void spawn_threads(int n, void *(*f)(void *), int together) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t *t = calloc(n, sizeof *t);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&t[i], &attr, f, 0) != 0) {
            perror("pthread_create");
            exit(2);
        }
        if (!together) pthread_join(t[i], 0);
    }
    if (together)
        for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    free(t);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *arg = argc > 2 ? argv[2] : "";
    if (!strcmp(mode, "exit7")) {
        launches(20);
        printf("buffered output of exit7\n"); /* stdout is a pipe: fully buffered */
        usleep(atoi(arg) * 1000);
        exit(7);
    }
    if (!strcmp(mode, "chdir-exec") || !strcmp(mode, "chdir")) {
        if (chdir(arg) != 0) {
            perror("chdir");
            return 2;
        }
    }
    if (!strcmp(mode, "chdir")) {
        launches(5);
        return 0;
    }
    if (!strcmp(mode, "exec") || !strcmp(mode, "chdir-exec")) {
        launches(100);
        char *args[] = {argv[0], "after", 0};
        execv("/proc/self/exe", args);
        perror("execv");
        return 2;
    }
    if (!strcmp(mode, "after")) {
        launches(7);
        printf("after exec\n");
        return 0;
    }
    if (!strcmp(mode, "threads-seq")) {
        spawn_threads(atoi(arg), three_launches, 0);
        return 0;
    }
    if (!strcmp(mode, "threads-conc")) {
        int n = atoi(arg);
        pthread_barrier_init(&barrier, 0, n);
        spawn_threads(n, launch_wait_launch, 1);
        return 0;
    }
    if (!strcmp(mode, "own-handler")) {
        int before = !strcmp(arg, "before");
        if (before) signal(SIGTERM, handled);
        launches(50);
        if (!before) signal(SIGTERM, handled);
        printf("ready\n");
        fflush(stdout);
        for (;;) pause();
    }
    if (!strcmp(mode, "wait-signal")) {
        launches(50);
        printf("ready\n");
        fflush(stdout);
        for (;;) pause();
    }
    if (!strcmp(mode, "malloc-signal")) {
        launches(50);
        pthread_t t;
        pthread_create(&t, 0, churn, 0);
        usleep(50 * 1000);
        pthread_kill(t, SIGTERM);
        for (;;) pause();
    }
    if (!strcmp(mode, "abort")) {
        launches(50);
        abort();
    }
    fprintf(stderr, "hardening: unknown mode %s\n", mode);
    return 2;
}
