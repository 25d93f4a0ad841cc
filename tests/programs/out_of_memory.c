/* A program that runs out of memory under its own address-space limit and exits cleanly: 50
 * launches, RLIMIT_AS set to what it maps now plus 16 MiB, malloc until it returns NULL (large
 * blocks, then small ones), "out of memory", argv[1] ms more without memory, and exit 3. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
#include "cuda_min.h"

int main(int argc, char **argv) {
    for (int i = 0; i < 50; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    unsigned long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (!statm || fscanf(statm, "%lu", &pages) != 1) {
        perror("statm");
        return 2;
    }
    fclose(statm);
    printf("limited\n"); /* stdout's buffer, allocated before the limit */
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = pages * 4096 + (16 << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
        perror("setrlimit");
        return 2;
    }
    long blocks = 0;
    for (size_t size = 1 << 20; size >= 16; size /= 16)
        while (malloc(size)) blocks++;
    printf("out of memory after %s blocks\n", blocks > 0 ? "some" : "no");
    usleep((argc > 1 ? atoi(argv[1]) : 0) * 1000);
    exit(3);
}
