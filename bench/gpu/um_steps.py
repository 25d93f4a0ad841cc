"""Where a step of examples/staged.py's managed-memory loop goes, without gpuspy: the
GPU part (kernel, with or without prefetches, to the sync's return) and the host part
(touching every page), per step, for the fault-heavy loop and the prefetched one; and
what a bulk prefetch of the 256 MiB costs each way. For um-fault-heavy's impact model:
a fix that prefetches still moves the pages, in bulk.
Usage on the GPU machine: python3 bench/gpu/um_steps.py [STEPS]"""
import statistics
import sys
import time

import cupy

sys.path.insert(0, "examples")
from staged import managed_floats, prefetch_to  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
count = 64 << 20
stream = cupy.cuda.get_current_stream()


def loop(prefetch):
    mem, d, h = managed_floats(count)
    rows = []
    for _ in range(steps):
        t0 = time.perf_counter()
        if prefetch:
            prefetch_to(mem.ptr, count * 4, 0, stream.ptr)
        d.__iadd__(1.0)
        if prefetch:
            prefetch_to(mem.ptr, count * 4, None, stream.ptr)
        stream.synchronize()
        t1 = time.perf_counter()
        h[::1024] += 1.0
        t2 = time.perf_counter()
        rows.append((t1 - t0, t2 - t1))
    return rows


def prefetch_cost():
    mem, d, h = managed_floats(count)
    e = [cupy.cuda.Event() for _ in range(4)]
    rows = []
    for _ in range(steps):
        e[0].record(stream)
        prefetch_to(mem.ptr, count * 4, 0, stream.ptr)
        e[1].record(stream)
        d.__iadd__(1.0)
        e[2].record(stream)
        prefetch_to(mem.ptr, count * 4, None, stream.ptr)
        e[3].record(stream)
        stream.synchronize()
        t0 = time.perf_counter()
        h[::1024] += 1.0
        host = time.perf_counter() - t0
        ms = [cupy.cuda.get_elapsed_time(e[i], e[i + 1]) for i in range(3)]
        rows.append((*ms, host * 1e3))
    return rows


def med(xs):
    return statistics.median(xs)


for prefetch in (False, True):
    rows = loop(prefetch)[2:]
    gpu, host = [r[0] * 1e3 for r in rows], [r[1] * 1e3 for r in rows]
    name = "um-fixed" if prefetch else "um-fault-heavy"
    print(f"{name}: step {med([a + b for a, b in zip(gpu, host)]):.2f} ms = gpu part {med(gpu):.2f} + host part {med(host):.2f} (medians of {len(rows)} steps)")
rows = prefetch_cost()[2:]
to_gpu, kernel, to_host, host = (med([r[i] for r in rows]) for i in range(4))
mib = count * 4 / 2**20
print(f"prefetched step: to GPU {to_gpu:.2f} ms ({mib / 1024 / to_gpu * 1e3:.1f} GiB/s), kernel {kernel:.3f} ms, to host {to_host:.2f} ms ({mib / 1024 / to_host * 1e3:.1f} GiB/s), host touch {host:.2f} ms")
