/* The few driver declarations the test programs need (no CUDA toolkit here). */
#include <stddef.h>
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
CUresult cuInit(unsigned flags);
CUresult cuDevicePrimaryCtxRetain(void **context, int device);
CUresult cuDeviceGetCount(int *count);
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, CUstream s, void **params, void **extra);
CUresult cuLaunchKernel_ptsz(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem, CUstream s, void **params, void **extra);
CUresult cuGraphLaunch(void *exec, CUstream s);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuCtxSynchronize(void);
CUresult cuStreamQuery(CUstream s);
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags);
CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t n, int dev, CUstream s);
typedef CUresult (*GetProc5)(const char *, void **, int, unsigned long long, int *);
typedef CUresult (*GetProc4)(const char *, void **, int, unsigned long long);
/* Test hook of the fake driver (tools/fakecuda): the last launch's 11 arguments. */
void fakecuda_last_launch(unsigned long long *out);
