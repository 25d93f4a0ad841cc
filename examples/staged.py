"""Labelled workloads that each stage one problem gpuspy diagnoses, plus healthy ones and
the fixed versions of three. Each prints `loop_s <seconds>` for its steady-state loop.

    python3 examples/staged.py MODE

Modes and the first finding each should get (bench/gpu/diagnose.sh checks them):
    launch-bound      many tiny elementwise ops, one kernel each          -> launch-bound
    sync-stalled      .item() on every step                                -> sync-stalled
    sync-fixed        the same, metric accumulated on the GPU, read once  -> (fix)
    pageable-memcpy   a pageable 16 MiB batch copied every step            -> pageable-memcpy
    pageable-fixed    the same batch pinned, copied non_blocking           -> (fix)
    alloc-churn       run with PYTORCH_NO_CUDA_MEMORY_CACHING=1            -> alloc-churn
    alloc-fixed       the same loop with the caching allocator on          -> (fix)
    slow-startup      one small op in a fresh process                      -> slow-startup
    healthy-matmul    large bf16 matmuls                                   -> no warning
    healthy-graph     a captured step replayed as a CUDA graph             -> no warning
    input-starved     3 ms of host "loading" per 1 ms GPU step            -> input-starved
    input-fixed       the same batches loaded by 4 threads, ahead          -> (fix)
    um-fault-heavy    CuPy managed memory touched by host and GPU          -> um-fault-heavy
    um-fixed          the same, prefetched to where it is used next        -> (fix)
    small-grid        a CuPy kernel on 16 Mi floats with a 1-block grid    -> small-grid
    small-grid-fixed  the same kernel with one thread per element          -> (fix)

The last six need CUPTI activity (on by default; torch's import loads libcupti, which
CuPy's modes then find).
"""
import sys
import time

import torch


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    print(f"loop_s {time.perf_counter() - t0:.4f}")


def launch_bound():
    x = torch.ones(256, device="cuda")

    def loop():
        nonlocal x
        for _ in range(60_000):
            x = x * 1.0001 + 0.1
    timed(loop)


def sync_steps(fixed):
    # More GPU work per step (a 4096^2 bf16 matmul and a reduction) than host work, so a
    # sync in every step makes the two take turns instead of overlapping.
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)

    def loop():
        total = torch.zeros((), device="cuda") if fixed else 0.0
        for _ in range(8_000):
            y = (a @ b).float().abs().mean()
            if fixed:
                total += y
            else:
                total += y.item()
        if fixed:
            total = total.item()
        print(f"metric {total:.3f}")
    timed(loop)


def copies(pinned):
    batch = torch.randn(4 << 20)  # 16 MiB
    if pinned:
        batch = batch.pin_memory()
    w = torch.randn(1 << 20, device="cuda")

    def loop():
        acc = torch.zeros(4 << 20, device="cuda")
        for _ in range(600):
            acc += batch.to("cuda", non_blocking=pinned)
            acc[: 1 << 20] *= w
        print(f"acc {acc[:8].sum().item():.3f}")
    timed(loop)


def alloc_loop():
    # Run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 for the problem, without it for the fix.
    x = torch.randn(1 << 20, device="cuda")

    def loop():
        for _ in range(3_000):
            y = x * 2.0
            z = y + 1.0
            del y, z
    timed(loop)


def slow_startup():
    timed(lambda: torch.ones(16, device="cuda").add_(1))


def healthy_matmul():
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)

    def loop():
        for _ in range(2_500):
            torch.matmul(a, b)
    timed(loop)


def healthy_graph():
    x = torch.randn(1 << 22, device="cuda")  # 16 MiB: grids far larger than the GPU
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            y = x
            for _ in range(50):
                y = y * 1.0001 + 0.1
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x
        for _ in range(50):
            y = y * 1.0001 + 0.1

    def loop():
        for _ in range(2_000):
            graph.replay()
    timed(loop)


def input_loop(workers):
    # Each batch takes 3 ms of host work ("decoding": a sleep, then a pinned tensor);
    # each step gives the GPU about 1 ms of matmuls and never waits for it.
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    w = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)

    def load(i):
        time.sleep(0.003)
        return torch.full((2048, 2048), float(i % 7), dtype=torch.bfloat16).pin_memory()

    def loop():
        steps = 1_000
        if workers:
            ahead = 2 * workers  # batches in flight, so pinned memory stays bounded
            with ThreadPoolExecutor(workers) as pool:
                pending = deque(pool.submit(load, i) for i in range(ahead))
                for i in range(steps):
                    x = pending.popleft().result().to("cuda", non_blocking=True)
                    if i + ahead < steps:
                        pending.append(pool.submit(load, i + ahead))
                    for _ in range(32):  # about 1 ms of bf16 2048^3 matmuls
                        x = x @ w
        else:
            for i in range(steps):
                x = load(i).to("cuda", non_blocking=True)
                for _ in range(32):  # about 1 ms of bf16 2048^3 matmuls
                    x = x @ w
    timed(loop)


def prefetch_to(ptr, size, device, stream):
    # The driver's cuMemPrefetchAsync_v2 (CUDA 12.2+), called directly: the runtime's
    # cudaMemPrefetchAsync changed its signature in CUDA 13. device None is the host.
    import ctypes

    class Location(ctypes.Structure):  # CUmemLocation
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    host, gpu = 2, 1  # CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_DEVICE
    where = Location(host, 0) if device is None else Location(gpu, device)
    r = ctypes.CDLL("libcuda.so.1").cuMemPrefetchAsync_v2(
        ctypes.c_uint64(ptr), ctypes.c_size_t(size), where, ctypes.c_uint(0), ctypes.c_void_p(stream))
    if r != 0:
        raise RuntimeError(f"cuMemPrefetchAsync_v2 returned {r}")


def managed(prefetch):
    # 256 MiB of managed memory: the GPU adds to every element, then the host touches
    # every page. Without prefetching each side faults the pages over.
    import ctypes

    import cupy
    import numpy

    count = 64 << 20
    mem = cupy.cuda.malloc_managed(count * 4)
    d = cupy.ndarray((count,), dtype=cupy.float32, memptr=mem)
    h = numpy.ctypeslib.as_array(ctypes.cast(mem.ptr, ctypes.POINTER(ctypes.c_float)), (count,))
    h[:] = 1.0
    stream = cupy.cuda.get_current_stream()

    def loop():
        for _ in range(20):
            if prefetch:
                prefetch_to(mem.ptr, count * 4, 0, stream.ptr)
            d.__iadd__(1.0)
            if prefetch:
                prefetch_to(mem.ptr, count * 4, None, stream.ptr)
            stream.synchronize()
            h[::1024] += 1.0
        print(f"sum {float(h[:1024].sum()):.1f}")
    timed(loop)


def small_grid(blocks):
    # A grid-stride kernel over 16 Mi floats: one block of 256 threads, or one thread
    # per element.
    import cupy

    kernel = cupy.RawKernel(r"""
    extern "C" __global__ void scale(float *x, unsigned long n) {
        for (unsigned long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (unsigned long)gridDim.x * blockDim.x)
            x[i] = x[i] * 1.0001f + 0.1f;
    }""", "scale")
    n = 16 << 20
    x = cupy.ones(n, dtype=cupy.float32)
    grid = blocks or n // 256

    def loop():
        for _ in range(50):
            kernel((grid,), (256,), (x, cupy.uint64(n)))
        cupy.cuda.get_current_stream().synchronize()
        print(f"x0 {float(x[0]):.4f}")
    timed(loop)


MODES = {
    "launch-bound": launch_bound,
    "sync-stalled": lambda: sync_steps(False),
    "sync-fixed": lambda: sync_steps(True),
    "pageable-memcpy": lambda: copies(False),
    "pageable-fixed": lambda: copies(True),
    "alloc-churn": alloc_loop,
    "alloc-fixed": alloc_loop,
    "slow-startup": slow_startup,
    "healthy-matmul": healthy_matmul,
    "healthy-graph": healthy_graph,
    "input-starved": lambda: input_loop(0),
    "input-fixed": lambda: input_loop(4),
    "um-fault-heavy": lambda: managed(False),
    "um-fixed": lambda: managed(True),
    "small-grid": lambda: small_grid(1),
    "small-grid-fixed": lambda: small_grid(0),
}

if __name__ == "__main__":
    MODES[sys.argv[1]]()
