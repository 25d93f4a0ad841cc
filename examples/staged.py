"""Labelled workloads that each stage one problem gpuspy diagnoses, plus healthy ones and
the fixed version of each problem. Written the way people write them: imports, model
set-up, a few warm-up steps (a Triton JIT where it fits), then the loop. Each prints
`loop_s <seconds>` for its loop, `step_s <seconds>` per step, `second_half_s <seconds>` for
the loop's second half (its steady state) and `cuda_s <seconds>` from the first CUDA call
to the loop's end.

    python3 examples/staged.py MODE [--form short|long|default] [--nvtx]

`short` is a loop of at most about 0.5 s after the set-up, `long` one of 5 s or more;
`default` keeps the step counts bench/gpu/diagnose.sh has always used.

Modes, the first finding each should get, and the fix (bench/gpu/phases.sh checks them):
    launch-bound      many tiny elementwise ops, one kernel each          -> launch-bound     (launch-fixed: a CUDA graph)
    sync-stalled      .item() on every step of matmul work                -> sync-stalled     (sync-fixed)
    sync-host         .item() on every step, then 3.5 ms of host work     -> sync-stalled     (sync-host-fixed)
    pageable-memcpy   a pageable 16 MiB batch copied every step            -> pageable-memcpy  (pageable-fixed)
    alloc-churn       run with PYTORCH_NO_CUDA_MEMORY_CACHING=1            -> alloc-churn      (alloc-fixed)
    input-starved     3 ms of host "loading" per 1 ms GPU step            -> input-starved    (input-fixed)
    um-fault-heavy    CuPy managed memory touched by host and GPU          -> um-fault-heavy   (um-fixed)
    small-grid        a CuPy kernel on 16 Mi floats with a 1-block grid    -> small-grid       (small-grid-fixed)
    triton-small-grid a Triton kernel with a 4-block grid, JIT in step 1   -> small-grid       (triton-grid-fixed)
                      (in the set-up of the short form, where it does not fit)
    slow-startup      CUDA_MODULE_LOADING=EAGER: every module loaded       -> slow-startup     (slow-startup-fixed)
    healthy-matmul    large bf16 matmuls                                   -> no warning
    healthy-graph     a captured step replayed as a CUDA graph             -> no warning
    healthy-pauses    a matmul loop with a checkpoint pause every quarter -> no warning (the pauses are phases)
    torch-compile     a torch.compile'd MLP: compile in the first steps   -> slow-startup     (torch-compile-eager)
                      (7-11 s with torch.compile's cache warm, a quarter to a third of the
                      run: the compile is a named pause, the loop itself is healthy)

`--nvtx` (healthy-pauses) wraps each step in `torch.cuda.nvtx.range_push("step")` /
`range_pop()` and each checkpoint in a "checkpoint" range: gpuspy, the NVTX injection
library, names the pauses and the step from them (docs/design.md, "NVTX").

um-* and small-grid need CuPy; the modes that judge kernels need CUPTI activity (on by
default; torch's import loads libcupti, which CuPy's modes then find).
"""
import argparse
import os
import time

import torch

from timing import LoopTimer

# Steps per form: (short, long, default). Short loops run about 0.2-0.5 s on an H200,
# long ones 5 s or more; default is what bench/gpu/diagnose.sh has always run.
STEPS = {
    "launch": (20_000, 400_000, 60_000),
    "sync": (1_200, 15_000, 8_000),
    "sync-host": (60, 800, 200),
    "copies": (300, 4_500, 600),
    "alloc": (2_500, 35_000, 3_000),
    "input": (100, 1_300, 1_000),
    "managed": (3, 40, 20),
    "small-grid": (20, 240, 50),
    "triton-grid": (150, 2_000, 200),
    "startup": (1, 1, 1),
    "matmul": (250, 3_200, 2_500),
    "graph": (200, 8_000, 2_000),
    "pauses": (1_500, 25_000, 8_000),
    "compile": (200, 4_000, 1_000),
}
FORM = {"short": 0, "long": 1, "default": 2}


# Every mode's loop is timed by it; `loop_steps` is range() with the second half marked.
TIMER = LoopTimer(lambda: torch.cuda.synchronize())
loop_steps = TIMER.steps


def busy_host(seconds):
    """Host work that keeps a core busy (decoding, augmenting, logging), not a sleep."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def launch_bound(graphed):
    x = torch.ones(256, device="cuda")
    if not graphed:
        def loop(n):
            nonlocal x
            for _ in loop_steps(n):
                x = x * 1.0001 + 0.1
        loop(100)  # warm-up
        return loop
    # The fix: the same 2 ops x 50 steps captured once and replayed.
    per_graph = 50
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            y = x * 1.0001 + 0.1
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x
        for _ in range(per_graph):
            y = y * 1.0001 + 0.1

    def loop(n):
        for _ in loop_steps(n // per_graph):
            graph.replay()
    return loop


def sync_steps(fixed):
    # More GPU work per step (a 4096^2 bf16 matmul and a reduction) than host work, so a
    # sync in every step makes the two take turns instead of overlapping.
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)

    def loop(n):
        total = torch.zeros((), device="cuda") if fixed else 0.0
        for _ in loop_steps(n):
            y = (a @ b).float().abs().mean()
            if fixed:
                total += y
            else:
                total += y.item()
        if fixed:
            total = total.item()
        print(f"metric {total:.3f}")
    return loop


def sync_host(fixed):
    # About 3 ms of GPU work and 3.5 ms of host work per step. Reading the loss with
    # .item() every step makes them take turns; the fix keeps the metric on the GPU and
    # reads it once, so the host works while the GPU computes.
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)

    def loop(n):
        total = torch.zeros((), device="cuda") if fixed else 0.0
        for _ in loop_steps(n):
            y = (a @ b).float().abs().mean()
            y = (a @ b).float().abs().mean() + y
            if fixed:
                total += y
            else:
                total += y.item()
            busy_host(0.0035)
        if fixed:
            total = total.item()
        print(f"metric {total:.3f}")
    return loop


def copies(pinned):
    batch = torch.randn(4 << 20)  # 16 MiB
    if pinned:
        batch = batch.pin_memory()
    w = torch.randn(1 << 20, device="cuda")

    def loop(n):
        acc = torch.zeros(4 << 20, device="cuda")
        for _ in loop_steps(n):
            acc += batch.to("cuda", non_blocking=pinned)
            acc[: 1 << 20] *= w
        print(f"acc {acc[:8].sum().item():.3f}")
    return loop


def alloc_loop():
    # Run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 for the problem, without it for the fix.
    x = torch.randn(1 << 20, device="cuda")

    def loop(n):
        for _ in loop_steps(n):
            y = x * 2.0
            z = y + 1.0
            del y, z
    return loop


def input_loop(workers):
    # Each batch takes 3 ms of host work ("decoding": a sleep, then a pinned tensor);
    # each step gives the GPU about 1 ms of matmuls and never waits for it.
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    w = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)

    def load(i):
        time.sleep(0.003)
        return torch.full((2048, 2048), float(i % 7), dtype=torch.bfloat16).pin_memory()

    def loop(steps):
        if workers:
            ahead = 2 * workers  # batches in flight, so pinned memory stays bounded
            with ThreadPoolExecutor(workers) as pool:
                pending = deque(pool.submit(load, i) for i in range(ahead))
                for i in loop_steps(steps):
                    x = pending.popleft().result().to("cuda", non_blocking=True)
                    if i + ahead < steps:
                        pending.append(pool.submit(load, i + ahead))
                    for _ in range(32):  # about 1 ms of bf16 2048^3 matmuls
                        x = x @ w
        else:
            for i in loop_steps(steps):
                x = load(i).to("cuda", non_blocking=True)
                for _ in range(32):  # about 1 ms of bf16 2048^3 matmuls
                    x = x @ w
    return loop


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


def managed_floats(count):
    # `count` floats of managed memory, filled by the host: the allocation, and the same
    # memory as a CuPy array and as a NumPy one.
    import ctypes

    import cupy
    import numpy

    mem = cupy.cuda.malloc_managed(count * 4)
    d = cupy.ndarray((count,), dtype=cupy.float32, memptr=mem)
    h = numpy.ctypeslib.as_array(ctypes.cast(mem.ptr, ctypes.POINTER(ctypes.c_float)), (count,))
    h[:] = 1.0
    return mem, d, h


def managed(prefetch):
    # 256 MiB of managed memory: the GPU adds to every element, then the host touches
    # every page. Without prefetching each side faults the pages over.
    import cupy

    count = 64 << 20
    mem, d, h = managed_floats(count)
    stream = cupy.cuda.get_current_stream()

    def loop(n):
        for _ in loop_steps(n):
            if prefetch:
                prefetch_to(mem.ptr, count * 4, 0, stream.ptr)
            d.__iadd__(1.0)
            if prefetch:
                prefetch_to(mem.ptr, count * 4, None, stream.ptr)
            stream.synchronize()
            h[::1024] += 1.0
        print(f"sum {float(h[:1024].sum()):.1f}")
    return loop


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

    def loop(steps):
        for _ in loop_steps(steps):
            kernel((grid,), (256,), (x, cupy.uint64(n)))
        cupy.cuda.get_current_stream().synchronize()
        print(f"x0 {float(x[0]):.4f}")
    return loop


def triton_grid(full):
    # A grid-stride Triton kernel over 16 Mi floats on 4 programs (of 132 SMs, ~2.7 ms a
    # step on the H200), or one program per 1,024 elements. The JIT compile happens in the
    # first step of the loop, as it does in real scripts (in the set-up of the short form,
    # `JIT_IN_SETUP`), fixed or not: each run compiles into a cache of its own. With
    # Triton's shared cache the run before warmed it (the kernel is the same), and the
    # fixed form's loop looked ~1 s faster for a compile it skipped
    # (bench/results/gpu-2026-11-30-run8-triton).
    import tempfile

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="staged-triton-")
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        step = tl.num_programs(0) * BLOCK
        for start in range(tl.program_id(0) * BLOCK, n, step):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 1.0001 + 0.1, mask=mask)

    n = 16 << 20
    x = torch.ones(n, device="cuda")
    grid = (n // 1024,) if full else (4,)

    def loop(steps):
        for _ in loop_steps(steps):
            scale[grid](x, n, BLOCK=1024)
        print(f"x0 {x[0].item():.4f}")
    if JIT_IN_SETUP:
        scale[grid](x, n, BLOCK=1024)
    return loop


def one_op():
    def loop(n):
        for _ in loop_steps(n):
            torch.ones(16, device="cuda").add_(1)
    return loop


def healthy_matmul():
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)

    def loop(n):
        for _ in loop_steps(n):
            torch.matmul(a, b)
    return loop


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

    def loop(n):
        for _ in loop_steps(n):
            graph.replay()
    return loop


def healthy_pauses(nvtx):
    # GPU-bound matmul steps with a checkpoint every quarter of the loop: the weights
    # copied to the host and written out, 0.2 s of host time each. With `nvtx`, the steps
    # and the checkpoints are NVTX ranges.
    import contextlib
    import pickle
    import tempfile

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)

    def checkpoint():
        state = {"a": a.cpu(), "b": b.cpu()}
        with tempfile.TemporaryFile() as f:
            pickle.dump(state, f)
        busy_host(0.2)

    def named(name):
        return torch.cuda.nvtx.range(name) if nvtx else contextlib.nullcontext()

    def loop(n):
        for i in loop_steps(n):
            if nvtx:
                torch.cuda.nvtx.range_push("step")
            torch.matmul(a, b)
            if nvtx:
                torch.cuda.nvtx.range_pop()
            if (i + 1) % (n // 4) == 0 and i + 1 < n:
                with named("checkpoint"):
                    checkpoint()
    return loop


def mlp(use_compile):
    # A bf16 MLP under torch.compile: the first call compiles (Inductor, Triton JIT),
    # then every step is a few large fused kernels. The fix for a run this short: eager.
    model = torch.nn.Sequential(
        *[layer for _ in range(4) for layer in (torch.nn.Linear(4096, 4096), torch.nn.GELU())]
    ).cuda().bfloat16()
    run = torch.compile(model) if use_compile else model
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)

    def loop(n):
        with torch.no_grad():
            for _ in loop_steps(n):
                run(x)
    return loop


# Set by --nvtx: the modes that support it mark their steps and pauses with NVTX ranges.
NVTX = False
# Set by --form short: the Triton compile (1.3-1.6 s on the H200) does not fit in a loop of
# at most 0.5 s, so it is part of the set-up there; in the loop's first step otherwise.
JIT_IN_SETUP = False

# mode -> (steps key, set-up returning the loop, environment it runs with: set here,
# before CUDA initialises, so every runner gets it right)
MODES = {
    "launch-bound": ("launch", lambda: launch_bound(False), {}),
    "launch-fixed": ("launch", lambda: launch_bound(True), {}),
    "sync-stalled": ("sync", lambda: sync_steps(False), {}),
    "sync-fixed": ("sync", lambda: sync_steps(True), {}),
    "sync-host": ("sync-host", lambda: sync_host(False), {}),
    "sync-host-fixed": ("sync-host", lambda: sync_host(True), {}),
    "pageable-memcpy": ("copies", lambda: copies(False), {}),
    "pageable-fixed": ("copies", lambda: copies(True), {}),
    "alloc-churn": ("alloc", alloc_loop, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
    "alloc-fixed": ("alloc", alloc_loop, {}),
    "input-starved": ("input", lambda: input_loop(0), {}),
    "input-fixed": ("input", lambda: input_loop(4), {}),
    "um-fault-heavy": ("managed", lambda: managed(False), {}),
    "um-fixed": ("managed", lambda: managed(True), {}),
    "small-grid": ("small-grid", lambda: small_grid(1), {}),
    "small-grid-fixed": ("small-grid", lambda: small_grid(0), {}),
    "triton-small-grid": ("triton-grid", lambda: triton_grid(False), {}),
    "triton-grid-fixed": ("triton-grid", lambda: triton_grid(True), {}),
    "slow-startup": ("startup", one_op, {"CUDA_MODULE_LOADING": "EAGER"}),
    "slow-startup-fixed": ("startup", one_op, {"CUDA_MODULE_LOADING": "LAZY"}),
    "healthy-matmul": ("matmul", healthy_matmul, {}),
    "healthy-graph": ("graph", healthy_graph, {}),
    "healthy-pauses": ("pauses", lambda: healthy_pauses(NVTX), {}),
    "torch-compile": ("compile", lambda: mlp(True), {}),
    "torch-compile-eager": ("compile", lambda: mlp(False), {}),
}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=MODES)
    p.add_argument("--form", choices=FORM, default="default")
    p.add_argument("--nvtx", action="store_true", help="NVTX ranges around steps and pauses (healthy-pauses)")
    args = p.parse_args()
    global NVTX, JIT_IN_SETUP
    NVTX = args.nvtx
    JIT_IN_SETUP = args.form == "short"
    key, setup, env = MODES[args.mode]
    os.environ.update(env)
    cuda_t0 = time.perf_counter()
    torch.cuda.synchronize()  # initialises CUDA: under EAGER, loads every module
    TIMER.run(setup(), STEPS[key][FORM[args.form]], cuda_t0)


if __name__ == "__main__":
    main()
