"""GPU workloads for checking gpuspy on a real driver: each prints a deterministic result
line, so runs with and without the shim can be compared, plus extra lines for timing and
profiler counts. Usage: python3 workloads.py MODE [N]."""
import sys
import time


def torch_elementwise(n):
    import torch
    x = torch.ones(1024, device="cuda")
    for _ in range(n):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    print(f"result torch-elementwise {x.sum().item():.4f}")


def torch_item(n):
    import torch
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    total = 0.0
    for i in range(n):
        total += (x * i).sum().item()
    print(f"result torch-item {total:.1f}")


def torch_copies(n, pinned):
    import torch
    h = torch.arange(1 << 20, dtype=torch.float32)
    if pinned:
        h = h.pin_memory()
    acc = torch.zeros(1 << 20, device="cuda")
    for _ in range(n):
        acc += h.to("cuda", non_blocking=pinned)
    torch.cuda.synchronize()
    print(f"result torch-{'pinned' if pinned else 'pageable'} {acc.sum().item():.6e}")


def torch_matmul(n):
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    c = None
    for _ in range(n):
        c = a @ b
    torch.cuda.synchronize()
    print(f"result torch-matmul {c.float().abs().sum().item():.6e}")


def torch_profiled(n):
    """The elementwise loop under torch.profiler: its CUDA kernel events, to compare with
    the launches gpuspy counts."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            x = x * 1.0001 + 0.1
        torch.cuda.synchronize()
    kernels = [
        e for e in prof.events()
        if e.device_type.name == "CUDA" and not e.name.startswith(("Memcpy", "Memset"))
    ]
    print(f"result torch-profiled {x.sum().item():.4f}")
    print(f"profiler-kernels {len(kernels)}")


def torch_timed(n):
    """Per-iteration time of the elementwise loop: warm-up, then the best of 5 passes."""
    import torch
    x = torch.ones(1024, device="cuda")
    for _ in range(2000):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    passes = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            x = x * 1.0001 + 0.1
        torch.cuda.synchronize()
        passes.append((time.perf_counter() - t0) / n * 1e9)
    passes.sort()
    print(f"timed-ns-per-iter median {passes[2]:.1f} min {passes[0]:.1f}")


def cupy_work(n):
    import cupy as cp
    x = cp.arange(1 << 20, dtype=cp.float32)
    for _ in range(n):
        x = x * 0.5 + 1.0
    m = cp.ones((512, 512), dtype=cp.float32) @ cp.ones((512, 512), dtype=cp.float32)
    print(f"result cupy {float(x.sum()):.6e} {float(m.sum()):.1f}")


def triton_work(n):
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)

    size = 1 << 20
    x = torch.arange(size, device="cuda", dtype=torch.float32)
    y = torch.ones(size, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    for _ in range(n):
        axpy[(triton.cdiv(size, 1024),)](x, y, out, size, BLOCK=1024)
    torch.cuda.synchronize()
    print(f"result triton {out.sum().item():.6e}")


def jax_work(n):
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x.T) * 0.5

    x = jnp.ones((256, 256), dtype=jnp.float32) * 0.01
    for _ in range(n):
        x = step(x)
    print(f"result jax {float(jnp.sum(x)):.6e}")


MODES = {
    "torch-elementwise": (torch_elementwise, 20000),
    "torch-item": (torch_item, 500),
    "torch-pageable": (lambda n: torch_copies(n, False), 200),
    "torch-pinned": (lambda n: torch_copies(n, True), 200),
    "torch-matmul": (torch_matmul, 50),
    "torch-profiled": (torch_profiled, 20000),
    "torch-timed": (torch_timed, 20000),
    "cupy": (cupy_work, 200),
    "triton": (triton_work, 100),
    "jax": (jax_work, 100),
}

if __name__ == "__main__":
    fn, default = MODES[sys.argv[1]]
    fn(int(sys.argv[2]) if len(sys.argv) > 2 else default)
