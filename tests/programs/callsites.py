"""Calls the (fake) driver through ctypes from known lines, for tests/callsites.rs.

Each blocking call sits on a line marked with a comment naming it; the test finds the lines
by their markers. A native thread (pthread_create straight into cuCtxSynchronize, no Python
in it) makes one more blocking call, which must be attributed to no Python line.
"""
import ctypes
import sys

cuda = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL(None)
cuda.cuInit(0)


class Trainer:
    def __init__(self):
        self.host = ctypes.create_string_buffer(1 << 16)
        self.device = ctypes.c_uint64(0)

    def step(self):
        cuda.cuMemAlloc_v2(ctypes.byref(self.device), ctypes.c_size_t(4096))  # marker: alloc
        cuda.cuMemcpyHtoDAsync_v2(self.device, self.host, ctypes.c_size_t(1 << 16), None)  # marker: pageable copy
        cuda.cuStreamSynchronize(None)  # marker: sync


def native_thread_sync():
    thread = ctypes.c_ulong(0)
    sync = ctypes.cast(cuda.cuCtxSynchronize, ctypes.c_void_p)
    assert libc.pthread_create(ctypes.byref(thread), None, sync, None) == 0
    assert libc.pthread_join(thread, None) == 0


def main():
    trainer = Trainer()
    for _ in range(int(sys.argv[1])):
        trainer.step()
    native_thread_sync()


main()
