"""A PyTorch training loop whose backward pass autograd's own thread launches, for
bench/gpu/cupti-hold.sh: does switching CUPTI's traced kinds from another thread crash it?

  python3 cupti_hold.py SECONDS          the loop alone (under a build of the shim)
  python3 cupti_hold.py SECONDS toggle   plus, without the shim, a ctypes client of torch's
                                         libcupti whose thread switches CONCURRENT_KERNEL,
                                         MEMCPY and MEMSET on and off every 2 ms

Prints `steps N switches N`; a crash shows in the exit status (run with
PYTHONFAULTHANDLER=1 for the threads' stacks)."""
import ctypes
import os
import sys
import threading
import time

import torch

seconds = float(sys.argv[1])
toggle = sys.argv[2:] == ["toggle"]
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device="cuda")
torch.cuda.synchronize()
switches = 0
done = threading.Event()

if toggle:
    # The libcupti torch itself loaded (Kineto), as bench/gpu/cupti-toggle.py finds it.
    cupti = ctypes.CDLL("libcupti.so.13", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p),
                           ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
    DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                            ctypes.c_size_t, ctypes.c_size_t)
    SIZE = 8 << 20
    pool = [ctypes.create_string_buffer(SIZE) for _ in range(16)]
    free = [ctypes.addressof(b) for b in pool]
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
                free.append(buf)

    assert cupti.cuptiActivityRegisterCallbacks(on_request, on_done) == 0

    def switcher():
        global switches
        on = False
        while not done.is_set():
            on = not on
            for kind in (10, 1, 2):
                (cupti.cuptiActivityEnable if on else cupti.cuptiActivityDisable)(kind)
            switches += 1
            if switches % 50 == 0:
                cupti.cuptiActivityFlushAll(0)
            time.sleep(0.002)

    threading.Thread(target=switcher, daemon=True).start()

steps = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    steps += 1
torch.cuda.synchronize()
done.set()
print(f"steps {steps} switches {switches}")
