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


def tee(n):
    """A mixed loop (elementwise ops, small matmuls, a host pause every 100 steps) run
    entirely inside torch.profiler: torch's kernel records against gpuspy's."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        x = torch.ones(1 << 16, device="cuda")
        w = torch.randn(512, 512, device="cuda")
        for i in range(n):
            x = x * 1.0001 + 0.1
            w = torch.tanh(w @ w)
            if i % 100 == 0:
                torch.cuda.synchronize()
                time.sleep(0.002)
        torch.cuda.synchronize()
    trace = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(trace)
    events = json.load(open(trace))["traceEvents"]
    kernels = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel"]
    other = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    kernels.sort()
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
    print(f"torch_kernels {len(kernels)}")
    print(f"torch_busy_share {busy / span:.5f}")
    print(f"torch_kernel_sum_share {sum(e - s for s, e in kernels) / span:.5f}")
    print(f"torch_span_us {span:.1f}")
    print(f"result {x.sum().item():.4f}")


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
    mode = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    {
        "elementwise": elementwise,
        "matmul": matmul,
        "tee": tee,
        "managed": lambda n: managed(n, True),
        "unmanaged": lambda n: managed(n, False),
        "launches": launches,
    }[mode](n)
