"""Loop timing shared by the staged programs (examples/staged.py, examples/reallib.py).

A program prints `loop_s` for its loop, `step_s` per step, `second_half_s` for the loop's
second half (its steady state, past warm-up and JIT: what a finding's impact is a share
of) and `cuda_s` from the first CUDA call to the loop's end. bench/gpu/phases_table.py
reads these lines.
"""
import time


class LoopTimer:
    """Times one loop. `sync` waits until the GPU has done all the work queued so far (it
    differs by framework: torch.cuda.synchronize, a CuPy device sync, blocking on a JAX
    array); it may be replaced before the loop starts."""

    def __init__(self, sync):
        self.sync = sync
        self.start_t = None
        self.second_half_t = None

    def start(self):
        self.second_half_t = None  # a warm-up in the set-up ran `steps` too
        self.sync()
        self.start_t = time.perf_counter()

    def half(self):
        """Marks the start of the second half, once the GPU has caught up."""
        self.sync()
        self.second_half_t = time.perf_counter()

    def steps(self, n):
        """range(n) for a loop's steps, marking the second half on the way."""
        for i in range(n):
            if i == n // 2 and i > 0:
                self.half()
            yield i

    def stop(self, steps, cuda_t0):
        self.sync()
        end = time.perf_counter()
        loop = end - self.start_t
        print(f"loop_s {loop:.4f}")
        print(f"step_s {loop / steps:.6f}")
        if self.second_half_t is not None:
            print(f"second_half_s {end - self.second_half_t:.4f}")
        # From the first CUDA call to the loop's end: without the Python imports before it
        # (which vary by a second from one process to the next).
        print(f"cuda_s {end - cuda_t0:.4f}")

    def run(self, loop, steps, cuda_t0):
        self.start()
        loop(steps)
        self.stop(steps, cuda_t0)
