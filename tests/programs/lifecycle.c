/* Forked children: each caller gets its own dump with exactly its own calls.
 * argv[1] picks how the child ends: "return", "_exit", "kill" (SIGKILL after a flush), or
 * "silent" (never calls the driver); "init-parent" and "init-child" return normally after
 * creating a context (where GPU-side collection starts) in the parent before the fork, or
 * in the child. The parent always makes 5 launches, the child 7. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda_min.h"

static void init(void) {
    void *context;
    cuInit(0);
    cuDevicePrimaryCtxRetain(&context, 0);
}

static void launches(int n) {
    for (int i = 0; i < n; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "return";
    if (strcmp(mode, "init-parent") == 0) init();
    launches(5);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        if (strcmp(mode, "silent") == 0) return 0;
        if (strcmp(mode, "init-child") == 0) init();
        launches(7);
        if (strcmp(mode, "_exit") == 0) _exit(3);
        if (strcmp(mode, "kill") == 0) {
            for (;;) pause(); /* the parent kills us after a flush */
        }
        return 0;
    }
    if (strcmp(mode, "kill") == 0) {
        usleep(600 * 1000); /* GPUSPY_FLUSH_S=0.2 in the test: several flushes */
        kill(child, SIGKILL);
    }
    int status;
    waitpid(child, &status, 0);
    printf("child %d %s\n", (int)child, mode);
    return 0;
}
