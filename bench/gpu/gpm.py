"""Issue 19: workloads whose GPM figures are known in advance, for checking gpuspy's NVML
GPM sampling against `nvidia-smi dmon --gpm-metrics` on the same loop.

    small-grid-4      a grid-stride Triton kernel on 4 blocks (of 132 SMs): SM active ~3 %
    small-grid-full   the same kernel, one block per 1024 elements, as many iterations
                      as small-grid-4 ran (its `iterations` line): the full-grid saving
    matmul-bf16       8192^2 bf16 matmuls: high tensor activity
    matmul-fp32       the same in fp32 without TF32: matmul kernels, no tensor pipes
    elementwise-fp32  x = x * a + b on 1 GiB of fp32: no tensor activity, DRAM-bound

Each prints `loop_s <seconds>` for its loop (about SECONDS, default 6).
Usage: python3 bench/gpu/gpm.py MODE [ITERATIONS]
"""
import os
import sys
import time

import torch

SECONDS = float(os.environ.get("SECONDS_PER_LOOP", "6"))


def until_time(step):
    """Runs `step` until SECONDS have passed; returns the iterations."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < SECONDS:
        for _ in range(10):
            step()
        n += 10
        torch.cuda.synchronize()
    print(f"loop_s {time.perf_counter() - t0:.4f}")
    print(f"iterations {n}")


def small_grid(blocks, iterations):
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        start = tl.program_id(0) * BLOCK
        step = tl.num_programs(0) * BLOCK
        for base in range(start, n, step):
            offs = base + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(x_ptr + offs, x * 1.0001 + 0.1, mask=mask)

    n = 4 << 20
    x = torch.ones(n, device="cuda", dtype=torch.float32)
    grid = (blocks or triton.cdiv(n, 1024),)

    def step():
        scale[grid](x, n, BLOCK=1024)

    step()
    if iterations:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iterations):
            step()
        torch.cuda.synchronize()
        print(f"loop_s {time.perf_counter() - t0:.4f}")
        print(f"iterations {iterations}")
    else:
        # The 4-block kernel is slow: one per step.
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        n_done = 0
        while time.perf_counter() - t0 < SECONDS:
            step()
            torch.cuda.synchronize()
            n_done += 1
        print(f"loop_s {time.perf_counter() - t0:.4f}")
        print(f"iterations {n_done}")
    print(f"x0 {x[0].item():.4f}")


def matmul(dtype):
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(8192, 8192, device="cuda", dtype=dtype, generator=g)
    out = torch.empty_like(a)
    until_time(lambda: torch.matmul(a, b, out=out))


def elementwise():
    x = torch.ones(256 << 20, device="cuda", dtype=torch.float32)

    def step():
        x.mul_(1.0001).add_(0.1)

    until_time(step)


MODES = {
    "small-grid-4": lambda it: small_grid(4, it),
    "small-grid-full": lambda it: small_grid(0, it),
    "matmul-bf16": lambda _: matmul(torch.bfloat16),
    "matmul-fp32": lambda _: matmul(torch.float32),
    "elementwise-fp32": lambda _: elementwise(),
}

if __name__ == "__main__":
    MODES[sys.argv[1]](int(sys.argv[2]) if len(sys.argv) > 2 else 0)
