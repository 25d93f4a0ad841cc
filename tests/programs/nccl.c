/* NCCL calls of one rank of a 2-rank job: argv[1] is the rank; argv[2] "dlopen" reaches
 * NCCL through dlopen + dlsym (as ctypes-based bindings do) instead of linking it, and
 * "skip" issues one all-reduce fewer (a desynchronised rank). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef int (*InitRank)(void **, int, ncclUniqueId, int);
typedef int (*AllReduce)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*AllGather)(const void *, void *, size_t, int, void *, void *);
typedef int (*Bcast)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*SendRecv)(void *, size_t, int, int, void *, void *);
typedef int (*Group)(void);
typedef int (*Split)(void *, int, int, void **, void *);
typedef int (*Destroy)(void *);

int ncclCommInitRank(void **, int, ncclUniqueId, int);
int ncclAllReduce(const void *, void *, size_t, int, int, void *, void *);
int ncclAllGather(const void *, void *, size_t, int, void *, void *);
int ncclBroadcast(const void *, void *, size_t, int, int, void *, void *);
int ncclSend(const void *, size_t, int, int, void *, void *);
int ncclRecv(void *, size_t, int, int, void *, void *);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclCommSplit(void *, int, int, void **, void *);
int ncclCommDestroy(void *);

enum { INT8 = 0, FLOAT32 = 7, FLOAT64 = 8, BF16 = 9 };

int main(int argc, char **argv) {
    int rank = argc > 1 ? atoi(argv[1]) : 0;
    InitRank init = ncclCommInitRank;
    AllReduce all_reduce = ncclAllReduce;
    AllGather all_gather = ncclAllGather;
    Bcast bcast = ncclBroadcast;
    SendRecv send = (SendRecv)ncclSend, recv = ncclRecv;
    Group start = ncclGroupStart, end = ncclGroupEnd;
    Split split = ncclCommSplit;
    Destroy destroy = ncclCommDestroy;
    if (argc > 2 && strcmp(argv[2], "dlopen") == 0) {
        void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!h) return 1;
        init = (InitRank)dlsym(h, "ncclCommInitRank");
        all_reduce = (AllReduce)dlsym(h, "ncclAllReduce");
        all_gather = (AllGather)dlsym(h, "ncclAllGather");
        bcast = (Bcast)dlsym(h, "ncclBroadcast");
        send = (SendRecv)dlsym(h, "ncclSend");
        recv = (SendRecv)dlsym(h, "ncclRecv");
        start = (Group)dlsym(h, "ncclGroupStart");
        end = (Group)dlsym(h, "ncclGroupEnd");
        split = (Split)dlsym(h, "ncclCommSplit");
        destroy = (Destroy)dlsym(h, "ncclCommDestroy");
    }
    ncclUniqueId id;
    memset(&id, 0x5a, sizeof id); /* rank 0 would make it and broadcast it */
    void *comm = NULL, *sub = NULL;
    if (init(&comm, 2, id, rank)) return 2;
    int all_reduces = argc > 2 && strcmp(argv[2], "skip") == 0 ? 99 : 100;
    for (int i = 0; i < all_reduces; i++) all_reduce(0, 0, 1024, FLOAT32, 0, comm, 0);
    for (int i = 0; i < 10; i++) all_gather(0, 0, 512, BF16, comm, 0);
    for (int i = 0; i < 5; i++) {
        start();
        send(0, 256, INT8, 1 - rank, comm, 0);
        recv(0, 256, INT8, 1 - rank, comm, 0);
        end();
    }
    if (split(comm, 0, rank, &sub, 0)) return 3;
    for (int i = 0; i < 3; i++) bcast(0, 0, 8, FLOAT64, 0, sub, 0);
    destroy(sub);
    destroy(comm);
    printf("nccl rank %d: done\n", rank);
    return 0;
}
