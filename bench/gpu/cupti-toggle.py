"""Can gpuspy's default mode switch CUPTI activity kinds on and off in a running process
(its duty cycle)? A ctypes client of torch's libcupti, without the shim:

  toggle  CONCURRENT_KERNEL, MEMCPY and MEMSET switched on and off around blocks of 50
          launches (300 cycles): the time of each switch, whether exactly the launches made
          while on are recorded, and the cost per launch with the kinds on and off,
          alternating blocks in one process (an in-process paired estimate).
  race    a second thread switches the kinds every 2 ms while the main thread launches
          for 3 s: no hang (run it under `timeout`), and how many records came.
  um      unified-memory counters configured at start but enabled only after managed
          memory exists (late), then disabled and enabled again around managed loops:
          the records seen in each phase, and how long each disable takes.
  stuck   the shim's attached duty cycle (kinds on 20 ms in every 80 ms, FlushAll(0)
          before and after each switch-off, buffers read as they complete) from a second
          thread, around a loop that syncs every step (examples/staged.py's sync-stalled)
          for SECONDS: per second, the steps made while on and the kernel records read.
          Where no record comes for 2 s of steps made while on, CUPTI is detached
          (cuptiFinalize after a forced flush) and attached again, as the shim's detach
          and attach do: whether records come again.

Usage: python3 cupti-toggle.py toggle|race|um|stuck [SECONDS]"""
import ctypes
import os
import statistics
import sys
import threading
import time

import torch

KERNEL, MEMCPY, MEMSET, UM = 10, 1, 2, 25
TRACED = (KERNEL, MEMCPY, MEMSET)

x = torch.ones(1024, device="cuda")
torch.cuda.synchronize()
cupti = ctypes.CDLL("libcupti.so.13", mode=os.RTLD_NOLOAD | os.RTLD_NOW)

REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                       ctypes.POINTER(ctypes.c_size_t))
DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_size_t)
SIZE = 8 << 20
pool = [ctypes.create_string_buffer(SIZE) for _ in range(32)]
free = [ctypes.addressof(b) for b in pool]
filled = []
lock = threading.Lock()


@REQ
def on_request(buf, size, max_records):
    with lock:
        buf[0] = free.pop() if free else None
    size[0] = SIZE if buf[0] else 0
    max_records[0] = 0


@DONE
def on_done(ctx, stream, buf, size, valid):
    if buf:
        with lock:
            filled.append((buf, valid))


def call(name, *args):
    r = getattr(cupti, name)(*args)
    if r != 0:
        print(f"{name}{args} -> {r}")
    return r


def switch(on):
    t0 = time.perf_counter_ns()
    for k in TRACED:
        call("cuptiActivityEnable" if on else "cuptiActivityDisable", k)
    return time.perf_counter_ns() - t0


def drain():
    """Records by kind (UM records by counter kind), from every buffer, forced complete."""
    call("cuptiActivityFlushAll", 1)
    return read_completed()


def read_completed():
    """Records by kind (UM records by counter kind), from the buffers CUPTI completed."""
    counts = {}
    rec = ctypes.c_void_p()
    with lock:
        got = filled[:]
        filled.clear()
    for buf, valid in got:
        rec.value = None
        while cupti.cuptiActivityGetNextRecord(ctypes.c_void_p(buf), ctypes.c_size_t(valid),
                                               ctypes.byref(rec)) == 0:
            kind = ctypes.c_uint32.from_address(rec.value).value
            if kind == UM:
                kind = f"um{ctypes.c_uint32.from_address(rec.value + 4).value}"
            counts[kind] = counts.get(kind, 0) + 1
        with lock:
            free.append(buf)
    return counts


def p50_max(v):
    return f"p50 {statistics.median(v) / 1e3:.1f} us, max {max(v) / 1e3:.1f} us"


call("cuptiActivityRegisterCallbacks", on_request, on_done)
mode = sys.argv[1]
if mode == "toggle":
    on_t, off_t, on_launch, off_launch = [], [], [], []
    for cycle in range(300):
        on_t.append(switch(True))
        t0 = time.perf_counter_ns()
        for _ in range(50):
            x.add_(1)
        on_launch.append((time.perf_counter_ns() - t0) / 50)
        torch.cuda.synchronize()
        off_t.append(switch(False))
        t0 = time.perf_counter_ns()
        for _ in range(50):
            x.add_(1)
        off_launch.append((time.perf_counter_ns() - t0) / 50)
        torch.cuda.synchronize()
    counts = drain()
    print(f"enable 3 kinds: {p50_max(on_t)}")
    print(f"disable 3 kinds: {p50_max(off_t)}")
    print(f"kernel records {counts.get(KERNEL, 0)} of {300 * 50} launched while on; all records {counts}")
    print(f"per launch: kinds on {statistics.median(on_launch):.0f} ns, off {statistics.median(off_launch):.0f} ns")
elif mode == "race":
    stop = threading.Event()
    toggles = []

    def toggler():
        on = True
        while not stop.is_set():
            toggles.append(switch(on))
            on = not on
            time.sleep(0.002)
        switch(False)

    switch(True)
    t = threading.Thread(target=toggler)
    t.start()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 3:
        x.add_(1)
        n += 1
    stop.set()
    t.join()
    torch.cuda.synchronize()
    counts = drain()
    print(f"race: {n} launches, {len(toggles)} switches ({p50_max(toggles)}), kernel records {counts.get(KERNEL, 0)}")
elif mode == "um":
    import cupy
    import numpy

    class Config(ctypes.Structure):
        _fields_ = [("scope", ctypes.c_uint32), ("kind", ctypes.c_uint32),
                    ("device", ctypes.c_uint32), ("enable", ctypes.c_uint32)]

    cfg = (Config * 5)(*[Config(1, k, 0, 1) for k in range(1, 6)])
    call("cuptiActivityConfigureUnifiedMemoryCounter", cfg, 5)
    count = 64 << 20
    mem = cupy.cuda.malloc_managed(count * 4)
    d = cupy.ndarray((count,), dtype=cupy.float32, memptr=mem)
    h = numpy.ctypeslib.as_array(ctypes.cast(mem.ptr, ctypes.POINTER(ctypes.c_float)), (count,))
    h[:] = 1.0

    def loop(n=3):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            d.__iadd__(1.0)
            cupy.cuda.Device().synchronize()
            h[::1024] += 1.0
        return (time.perf_counter_ns() - t0) / n / 1e6

    print(f"um: before enabling: {loop():.1f} ms per iteration, records {drain()}")
    t0 = time.perf_counter_ns()
    call("cuptiActivityEnable", UM)
    print(f"um: enable took {(time.perf_counter_ns() - t0) / 1e6:.2f} ms")
    print(f"um: enabled late: {loop():.1f} ms per iteration, records {drain()}")
    for attempt in range(3):
        ms = loop()
        t0 = time.perf_counter_ns()
        call("cuptiActivityDisable", UM)
        took = (time.perf_counter_ns() - t0) / 1e6
        print(f"um: on {ms:.1f} ms per iteration, then disable took {took:.2f} ms, records {drain()}")
        print(f"um: off: {loop():.1f} ms per iteration, records {drain()}")
        t0 = time.perf_counter_ns()
        call("cuptiActivityEnable", UM)
        print(f"um: re-enable took {(time.perf_counter_ns() - t0) / 1e6:.2f} ms")
    print(f"result {float(h[:1024].sum()):.1f}")
elif mode == "stuck":
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    steps = [0]
    stop = threading.Event()

    def cycle():
        second, on_steps, records, quiet, resets, since_reset = 0, 0, 0, 0, 0, None
        t0 = time.perf_counter()
        while not stop.is_set():
            switch(True)
            s0 = steps[0]
            time.sleep(0.020)
            call("cuptiActivityFlushAll", 0)
            switch(False)
            on_steps += steps[0] - s0
            call("cuptiActivityFlushAll", 0)
            records += read_completed().get(KERNEL, 0)
            time.sleep(0.060)
            if time.perf_counter() - t0 >= second + 1:
                second += 1
                quiet = quiet + 1 if records == 0 and on_steps > 20 else 0
                note = ""
                if since_reset is not None:
                    since_reset += 1
                    note = f" ({since_reset} s after reset {resets})"
                print(f"stuck: second {second}: {on_steps} steps while on, {records} kernel records{note}", flush=True)
                if quiet >= 2:
                    call("cuptiActivityFlushAll", 1)
                    read_completed()
                    t1 = time.perf_counter_ns()
                    call("cuptiFinalize")
                    call("cuptiActivityRegisterCallbacks", on_request, on_done)
                    resets += 1
                    since_reset, quiet = 0, 0
                    print(f"stuck: no record for 2 s: detached and attached again in {(time.perf_counter_ns() - t1) / 1e6:.1f} ms (reset {resets})", flush=True)
                on_steps, records = 0, 0
        print(f"stuck: {second} s, {resets} resets", flush=True)

    t = threading.Thread(target=cycle)
    t.start()
    total, t0 = 0.0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        total += (a @ b).float().abs().mean().item()
        steps[0] += 1
    stop.set()
    t.join()
    print(f"stuck: {steps[0]} steps, metric {total:.1f}")
