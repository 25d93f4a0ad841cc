"""Real-GPU programs for bench/gpu/hardening.sh: the shim's signal, exec and thread handling
under PyTorch. Usage: python3 hardening.py MODE [ARG]."""
import os
import sys
import threading


def loop_until_signalled():
    """Launches kernels, says "ready", then keeps launching until a signal ends it."""
    import torch
    x = torch.ones(1024, device="cuda")
    for _ in range(500):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    print("ready", flush=True)
    while True:
        x = x * 1.0001 + 0.1
        torch.cuda.synchronize()


def exec_self():
    """500 iterations, then exec the same script as `after` (which does 70)."""
    import torch
    x = torch.ones(1024, device="cuda")
    for _ in range(500):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    os.execv(sys.executable, [sys.executable, __file__, "after"])


def after():
    import torch
    x = torch.ones(1024, device="cuda")
    for _ in range(70):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    print(f"result after-exec {x.sum().item():.4f}")


def threads(n, one_thread):
    """n short-lived threads one after another, each doing the same small CUDA work, or the
    same work n times on one thread: the launch counts must be equal."""
    import torch
    torch.ones(1, device="cuda")  # context first, on the main thread

    def work():
        y = torch.ones(256, device="cuda") * 2.0 + 1.0
        torch.cuda.synchronize()
        return y

    for _ in range(n):
        if one_thread:
            work()
        else:
            t = threading.Thread(target=work)
            t.start()
            t.join()
    print(f"result threads {n}")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "signal":
        loop_until_signalled()
    elif mode == "exec":
        exec_self()
    elif mode == "after":
        after()
    elif mode in ("threads", "one-thread"):
        threads(int(sys.argv[2]), mode == "one-thread")
