/* A program that takes over every file descriptor after its first driver calls, as daemons and
 * test harnesses do: it closes 3..1023, then uses the numbers for its own files. argv[1]:
 *   pipe N      pushes N bytes through a pipe of its own to a thread that reads them slowly;
 *               prints "received R"
 *   idle MS     sleeps MS ms; prints "cpu_ms C", the process's CPU time during the sleep
 *   signal FILE opens FILE onto every number 3..63, prints "ready" and waits for a signal
 * Each makes 50 launches first. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "cuda_min.h"

static void close_all(void) {
    for (int fd = 3; fd < 1024; fd++) close(fd);
}

/* Reads slowly (0.2 ms a read), so that the transfer spans several periodic flushes. */
static void *count_bytes(void *arg) {
    int fd = *(int *)arg;
    long total = 0;
    char buf[4096];
    ssize_t n;
    struct timespec pause = {0, 200000};
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        total += n;
        nanosleep(&pause, 0);
    }
    return (void *)total;
}

static long cpu_us(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000L + u.ru_utime.tv_usec +
           u.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *arg = argc > 2 ? argv[2] : "";
    for (int i = 0; i < 50; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    close_all();
    if (!strcmp(mode, "pipe")) {
        long want = atol(arg);
        int fds[2];
        if (pipe(fds) != 0) {
            perror("pipe");
            return 2;
        }
        pthread_t reader;
        pthread_create(&reader, 0, count_bytes, &fds[0]);
        char chunk[4096];
        memset(chunk, 'x', sizeof chunk);
        for (long sent = 0; sent < want;) {
            long n = want - sent < (long)sizeof chunk ? want - sent : (long)sizeof chunk;
            ssize_t w = write(fds[1], chunk, n);
            if (w <= 0) {
                perror("write");
                return 2;
            }
            sent += w;
        }
        close(fds[1]);
        void *received;
        pthread_join(reader, &received);
        printf("received %ld\n", (long)received);
        return 0;
    }
    if (!strcmp(mode, "idle")) {
        long before = cpu_us();
        long ms = atol(arg);
        struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&pause, &pause) != 0) {
        }
        printf("cpu_ms %ld\n", (cpu_us() - before) / 1000);
        return 0;
    }
    if (!strcmp(mode, "signal")) {
        int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) {
            perror("open");
            return 2;
        }
        for (int n = 3; n < 64; n++)
            if (n != fd) dup2(fd, n);
        printf("ready\n");
        fflush(stdout);
        for (;;) pause();
    }
    fprintf(stderr, "descriptors: unknown mode %s\n", mode);
    return 2;
}
