"""Workloads for checking gpuspy's GPU-side data (CUPTI activity, NVML) on a real GPU.
Usage: python3 truth.py MODE [N]. Each prints `key value` lines that truth.sh compares
with the dump gpuspy wrote for the same process."""
import json
import os
import resource
import sys
import tempfile
import time


def elementwise(n):
    import torch
    x = torch.ones(1 << 16, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    t1 = time.perf_counter_ns()
    print(f"loop_ns_per_iter {(t1 - t0) / n:.1f}")
    print(f"result {x.sum().item():.4f}")


def matmul(n):
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        c = a @ b
    torch.cuda.synchronize()
    t1 = time.perf_counter_ns()
    print(f"loop_ns_per_iter {(t1 - t0) / n:.1f}")
    print(f"result {c.float().abs().sum().item():.6e}")


def paced(n, profiling):
    """Four 4096^3 bf16 matmuls (about 1 ms of GPU work), a sync and a 1 ms host pause per
    step: the GPU is busy about half the time whatever the launch overhead, so a profiler's
    per-op cost barely moves it. `profiling`: "none"; "profile" (torch.profiler around
    everything); "late" (the second half of the steps inside torch.profiler)."""
    import contextlib
    import torch
    from torch.profiler import ProfilerActivity, profile

    def steps(count):
        for _ in range(count):
            for _ in range(4):
                c = a @ b
            torch.cuda.synchronize()
            time.sleep(0.001)
        return c

    outer = profile(activities=[ProfilerActivity.CUDA]) if profiling == "profile" else contextlib.nullcontext()
    with outer as prof:
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
        c = steps(n // 2 if profiling == "late" else n)
        if profiling == "late":
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                c = steps(n - n // 2)
        result = c.float().abs().sum().item()
    if prof is not None:
        torch_busy(prof)
    print(f"result {result:.6e}")


def torch_busy(prof):
    """torch.profiler's kernel count and busy share: the union of kernel intervals over the
    span from the first to the last GPU activity (kernels, copies, memsets)."""
    trace = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(trace)
    events = json.load(open(trace))["traceEvents"]
    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel")
    other = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    print(f"torch_kernels {len(kernels)}")
    if not kernels:
        return
    busy, open_s, open_e = 0.0, None, None
    for s, e in kernels:
        if open_e is None or s > open_e:
            if open_e is not None:
                busy += open_e - open_s
            open_s, open_e = s, e
        else:
            open_e = max(open_e, e)
    busy += open_e - open_s
    everything = kernels + other
    span = max(e for _, e in everything) - min(s for s, _ in everything)
    print(f"torch_busy_share {busy / span:.5f}")
    print(f"torch_span_us {span:.1f}")


def managed(n, use_managed):
    """Host and device touch the same 256 MiB every iteration: with managed memory each
    touch migrates pages on faults; with a device array and explicit copies, none."""
    import ctypes
    import cupy
    import numpy
    count = 64 << 20
    if use_managed:
        mem = cupy.cuda.malloc_managed(count * 4)
        d = cupy.ndarray((count,), dtype=cupy.float32, memptr=mem)
        h = numpy.ctypeslib.as_array(ctypes.cast(mem.ptr, ctypes.POINTER(ctypes.c_float)), (count,))
        h[:] = 1.0
        for _ in range(n):
            d += 1.0
            cupy.cuda.Device().synchronize()
            h[::1024] += 1.0  # the host touches every page
        total = float(h[:1024].sum())
    else:
        d = cupy.ones(count, dtype=cupy.float32)
        h = numpy.empty(count, dtype=numpy.float32)
        for _ in range(n):
            d += 1.0
            h[:] = cupy.asnumpy(d)
            h[::1024] += 1.0
            d.set(h)
        total = float(h[:1024].sum())
    print(f"result {total:.1f}")


def launches(n):
    """Many tiny launches, for the memory bound: peak RSS at the end."""
    import torch
    x = torch.ones(16, device="cuda")
    for _ in range(n // 2):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    print(f"max_rss_kib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
    print(f"result {x.sum().item():.4f}")


if __name__ == "__main__":
    import faulthandler
    import signal
    faulthandler.dump_traceback_later(120, exit=True)  # a hang prints where, then exits
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # truth.sh's hang probe
    mode = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    {
        "elementwise": elementwise,
        "matmul": matmul,
        "paced": lambda n: paced(n, "none"),
        "paced-profile": lambda n: paced(n, "profile"),
        "paced-late": lambda n: paced(n, "late"),
        "managed": lambda n: managed(n, True),
        "unmanaged": lambda n: managed(n, False),
        "launches": launches,
    }[mode](n)
