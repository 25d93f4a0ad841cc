/* One rank of a 2-rank job under the fake NCCL's rendezvous (FAKENCCL_RENDEZVOUS): three
 * all-reduces with its peer, then rank 0 enters a fourth, which waits for rank 1 forever,
 * while rank 1 never enters it: it sleeps argv[2] seconds outside any call and exits.
 * usage: nccl_hang RANK SECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;
int ncclCommInitRank(void **, int, ncclUniqueId, int);
int ncclAllReduce(const void *, void *, size_t, int, int, void *, void *);

int main(int argc, char **argv) {
    int rank = argc > 1 ? atoi(argv[1]) : 0;
    int seconds = argc > 2 ? atoi(argv[2]) : 3;
    ncclUniqueId id;
    memset(&id, 0x5a, sizeof id);
    void *comm = NULL;
    if (ncclCommInitRank(&comm, 2, id, rank)) return 2;
    for (int i = 0; i < 3; i++) ncclAllReduce(0, 0, 1024, 7, 0, comm, 0);
    printf("rank %d: three all-reduces done\n", rank);
    fflush(stdout);
    if (rank == 0) ncclAllReduce(0, 0, 1024, 7, 0, comm, 0);
    sleep(seconds);
    return 0;
}
