/* 8 threads, each with its own exact number of calls. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "cuda_min.h"

static void *work(void *arg) {
    long id = (long)arg;
    for (long i = 0; i < 10000 + id; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    for (long i = 0; i < 10; i++) cuStreamSynchronize(0);
    return NULL;
}

int main(void) {
    pthread_t t[8];
    for (long i = 0; i < 8; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    puts("threads: done");
    return 0;
}
