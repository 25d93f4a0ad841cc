/* Forked children: each caller gets its own dump with exactly its own calls.
 * argv[1] picks how the child ends: "return", "_exit", "kill" (SIGKILL after a periodic
 * flush that saw all its calls: GPUSPY_FLUSH_S must be set), or
 * "silent" (never calls the driver); "init-parent" and "init-child" return normally after
 * creating a context (where GPU-side collection starts) in the parent before the fork, or
 * in the child. The parent always makes 5 launches, the child 7. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

/* The inode of PID's dump in $GPUSPY_OUT (gpuspy-...-PID.json), 0 if there is none yet.
 * Each flush renames a new file over it: a new inode. */
static ino_t dump_inode(pid_t pid) {
    const char *out = getenv("GPUSPY_OUT");
    DIR *dir = opendir(out ? out : "gpuspy-out");
    ino_t inode = 0;
    char tail[32];
    int tail_len = snprintf(tail, sizeof tail, "-%d.json", (int)pid);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        int len = (int)strlen(e->d_name);
        if (strncmp(e->d_name, "gpuspy-", 7) == 0 && len > tail_len &&
            strcmp(e->d_name + len - tail_len, tail) == 0)
            inode = e->d_ino;
    }
    if (dir) closedir(dir);
    return inode;
}

/* Waits (60 s at most) until PID's dump has been replaced twice since now: the second
 * flush began after the first ended, so after everything PID did before now. Waiting on
 * the flushes themselves, not for a time, keeps this right on a slow or loaded machine. */
static void await_two_flushes(pid_t pid) {
    ino_t last = dump_inode(pid);
    int seen = 0;
    for (int i = 0; i < 6000 && seen < 2; i++) {
        struct timespec ms = {0, 10 * 1000000};
        nanosleep(&ms, 0);
        ino_t now = dump_inode(pid);
        if (now != 0 && now != last) seen++, last = now;
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "return";
    if (strcmp(mode, "init-parent") == 0) init();
    launches(5);
    fflush(stdout);
    int ready[2];
    if (pipe(ready)) return 1;
    pid_t child = fork();
    if (child == 0) {
        if (strcmp(mode, "silent") == 0) return 0;
        if (strcmp(mode, "init-child") == 0) init();
        launches(7);
        if (strcmp(mode, "_exit") == 0) _exit(3);
        if (strcmp(mode, "kill") == 0) {
            if (write(ready[1], "", 1) != 1) _exit(4);
            for (;;) pause(); /* the parent kills us after a flush */
        }
        return 0;
    }
    if (strcmp(mode, "kill") == 0) {
        char byte;
        if (read(ready[0], &byte, 1) != 1) return 5; /* the child made its 7 launches */
        await_two_flushes(child);
        kill(child, SIGKILL);
    }
    int status;
    waitpid(child, &status, 0);
    printf("child %d %s\n", (int)child, mode);
    return 0;
}
