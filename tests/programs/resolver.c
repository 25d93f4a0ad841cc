/* Door 3: only cuGetProcAddress, per-thread default stream flags, the way cudart works:
 * one dlsym of the resolver, then the resolver asked for itself, then everything else. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "cuda_min.h"

#define PER_THREAD 2

typedef CUresult (*Launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **);
typedef CUresult (*Copy)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*CopySync)(CUdeviceptr, const void *, size_t);
typedef CUresult (*Alloc)(CUdeviceptr *, size_t);
typedef CUresult (*Sync)(CUstream);
typedef CUresult (*CtxSync)(void);

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    GetProc5 first = (GetProc5)dlsym(h, "cuGetProcAddress_v2");
    GetProc5 gpa = NULL;
    int status = -1;
    if (!first || first("cuGetProcAddress", (void **)&gpa, 12000, 0, &status) || !gpa) return 1;
    GetProc4 gpa4 = NULL;
    gpa("cuGetProcAddress", (void **)&gpa4, 11030, 0, &status);
    if (!gpa4) return 2;

    Launch launch = NULL, launch_legacy = NULL;
    Copy copy = NULL;
    CopySync copy_sync = NULL;
    Alloc alloc = NULL;
    Sync sync = NULL;
    CtxSync ctx_sync = NULL;
    gpa("cuLaunchKernel", (void **)&launch, 7000, PER_THREAD, &status);
    gpa4("cuLaunchKernel", (void **)&launch_legacy, 4000, 0);
    gpa("cuMemcpyHtoDAsync", (void **)&copy, 3020, PER_THREAD, &status);
    gpa("cuMemcpyHtoD", (void **)&copy_sync, 3020, PER_THREAD, &status);
    gpa("cuMemAlloc", (void **)&alloc, 3020, PER_THREAD, &status);
    gpa("cuStreamSynchronize", (void **)&sync, 2000, PER_THREAD, &status);
    gpa("cuCtxSynchronize", (void **)&ctx_sync, 13000, 0, &status);
    if (!launch || !launch_legacy || !copy || !copy_sync || !alloc || !sync || !ctx_sync) return 3;
    if (launch == launch_legacy) return 4; /* per-thread and legacy must stay distinct */
    void *none = (void *)1;
    if (gpa("cuNoSuchFunction", &none, 12000, 0, &status) == 0 || status != 1) return 5;
    void *unwrapped = NULL;
    gpa("cuDeviceGetAttribute", &unwrapped, 2000, 0, &status);

    CUdeviceptr d;
    alloc(&d, 4096);
    char buf[256];
    for (int i = 0; i < 400; i++) launch(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    for (int i = 0; i < 100; i++) launch_legacy(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    for (int i = 0; i < 30; i++) copy(d, buf, sizeof buf, 0);
    for (int i = 0; i < 20; i++) copy_sync(d, buf, sizeof buf);
    for (int i = 0; i < 9; i++) sync(0);
    ctx_sync();
    puts("resolver: done");
    return 0;
}
