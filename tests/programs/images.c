/* One process, several images: every exec form, and the environment the program hands to
 * exec. argv[1] picks the case:
 *   exec FORM      100 launches, then itself as "after" by FORM: execl, execle, execlp
 *                  (found on PATH), execveat, or syscall (the raw system call, which no
 *                  wrapper sees)
 *   after          7 launches, prints "after exec"
 *   env-empty      1 launch, then `env` (which prints its environment) with an empty one
 *   env-own        1 launch, then `env` with an environment of its own: GPUSPY_OUT,
 *                  GPUSPY_IMAGE and KEPT, and its LD_PRELOAD and LD_LIBRARY_PATH when
 *                  argv[2] is "preloaded"
 *   env-inherited  1 launch, then `env` with the environment it was started with */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "cuda_min.h"

extern char **environ;

static void launches(int n) {
    for (int i = 0; i < n; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
}

static int exec_after(const char *self, const char *form) {
    char *args[] = {(char *)self, "after", 0};
    /* This image's data is only in its periodic flushes: give the writer time for one. */
    if (!strcmp(form, "syscall")) usleep(300 * 1000);
    if (!strcmp(form, "execl")) execl("/proc/self/exe", self, "after", (char *)0);
    if (!strcmp(form, "execle")) execle("/proc/self/exe", self, "after", (char *)0, environ);
    if (!strcmp(form, "execlp")) execlp("images", self, "after", (char *)0);
    if (!strcmp(form, "execveat")) execveat(AT_FDCWD, "/proc/self/exe", args, environ, 0);
    if (!strcmp(form, "syscall")) syscall(SYS_execve, "/proc/self/exe", args, environ);
    perror(form);
    return 2;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *arg = argc > 2 ? argv[2] : "";
    if (!strcmp(mode, "exec")) {
        launches(100);
        return exec_after(argv[0], arg);
    }
    if (!strcmp(mode, "after")) {
        launches(7);
        printf("after exec\n");
        return 0;
    }
    if (!strncmp(mode, "env-", 4)) {
        launches(1);
        char *args[] = {"env", 0};
        char preload[4096], library_path[4096];
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s", getenv("LD_PRELOAD"));
        snprintf(library_path, sizeof library_path, "LD_LIBRARY_PATH=%s", getenv("LD_LIBRARY_PATH"));
        char *empty[] = {0};
        char *own[] = {"GPUSPY_OUT=/own/dir", "GPUSPY_IMAGE=own", "KEPT=1", 0, 0, 0};
        if (!strcmp(arg, "preloaded")) {
            own[3] = preload;
            own[4] = library_path;
        }
        char **env = !strcmp(mode, "env-empty") ? empty : !strcmp(mode, "env-own") ? own : environ;
        execve("/usr/bin/env", args, env);
        perror("execve");
        return 2;
    }
    fprintf(stderr, "images: unknown mode %s\n", mode);
    return 2;
}
