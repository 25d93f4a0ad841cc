//! gpuspy's own threads (the writer, the GPU collector): started so that they never take
//! anything from the program. They block every signal the program could be sent, so the
//! kernel never picks one of them to run the program's (or our) handlers, and they run at
//! the lowest priority, so that on a core the program keeps busy they get only the time it
//! leaves (a nice-19 thread gets 1.5 % of a contended core against a nice-0 one). On the
//! H200 the collector's one-off start (opening NVML and CUPTI, about 25 ms of CPU) cost a
//! 0.3 s loop pinned to the same core +8 % at the default priority
//! (bench/results/gpu-2026-11-30-overhead-modes). Threads they create (CUPTI's) inherit
//! both.

/// Spawns a gpuspy thread named `name`. Returns whether it started.
pub fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    // SAFETY: sigset_t values filled by sigfillset/sigdelset; the caller's mask is restored
    // right after the spawn (a new thread inherits its creator's mask).
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut block);
        // Faults are the thread's own doing and must stay deliverable.
        for fault in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL] {
            libc::sigdelset(&mut block, fault);
        }
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut previous);
        let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
            lowest_priority();
            f()
        });
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        spawned.is_ok()
    }
}

/// Nice 19 for the calling thread (on Linux the nice value is per thread). Failure leaves
/// the default: a gpuspy thread then competes as any other.
fn lowest_priority() {
    // SAFETY: the gettid system call and setpriority on this thread's own id have no
    // preconditions (the system call, not glibc's 2.30 wrapper, for older glibc).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}
