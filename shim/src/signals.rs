//! Signals that end the process: the dump is written first, then the process dies of the
//! same signal with the same wait status.
//!
//! At the first driver call of a process generation, each of SIGINT, SIGTERM, SIGHUP and
//! SIGABRT whose disposition is still the default gets `on_signal`. A signal the program
//! handles or ignores is left alone, and a handler the program installs later replaces ours
//! (Python's KeyboardInterrupt, torchrun's SIGTERM handling): the program then exits its own
//! way and the exit dump is written as usual. `exec` resets the dispositions, so a new image
//! starts clean. To the program, `on_signal` is the default disposition (dispositions.rs).
//!
//! The handler does nothing that is not async-signal-safe: it never allocates, locks or
//! formats. It wakes the writer thread through its pipe, waits (at most `WAIT`) until the
//! dump is written, restores the default disposition and raises the signal again, which is
//! delivered, now fatal, when the handler returns. A thread interrupted inside `malloc`
//! holds that arena's lock, which is why the writing happens on the writer thread, and why
//! the wait is bounded: if the writer cannot finish in time the process still dies as it
//! would have without gpuspy, only without the last dump. gpuspy's own threads block these
//! signals, so the kernel delivers them to one of the program's threads.
//!
//! A program may also end itself with one of these signals after restoring the default
//! disposition: Python does exactly that after an unhandled KeyboardInterrupt (its atexit
//! handlers have run; it sets SIGINT to the default and calls `kill(getpid(), SIGINT)`, so
//! that its parent sees "killed by SIGINT"), and so do crash handlers that re-raise. No
//! handler of ours runs then and no exit path follows, so `kill` and `raise` aimed at the
//! process itself, for a signal that will end it, first ask for the dump the same way.

use crate::clock::monotonic_ns;
use crate::dispositions::real as real_sigaction;
use crate::resolve::NextFns;
use std::ffi::c_int;

/// The signals whose default action ends the process and after which a dump is kept.
const SIGNALS: [c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGABRT];
/// How long a dying process waits for its dump.
const WAIT_NS: u64 = 2_000_000_000;

/// Installs `on_signal` for each of `SIGNALS` whose disposition is the default.
pub fn install() {
    for signal in SIGNALS {
        // SAFETY: a zeroed sigaction struct is valid; reading the current disposition.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            if real_sigaction(signal, std::ptr::null(), &mut current) != 0
                || current.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            real_sigaction(signal, &our_action(), std::ptr::null_mut());
        }
    }
}

/// The disposition `install` sets.
pub fn our_action() -> libc::sigaction {
    // SAFETY: a zeroed sigaction struct is valid; sigemptyset fills its mask.
    unsafe {
        let mut ours: libc::sigaction = std::mem::zeroed();
        ours.sa_sigaction = handler();
        ours.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut ours.sa_mask);
        ours
    }
}

/// `on_signal`, as a disposition.
pub fn handler() -> libc::sighandler_t {
    on_signal as extern "C" fn(c_int) as libc::sighandler_t
}

/// Whether the default disposition of `signal` is `on_signal` in this process now: one of
/// `SIGNALS`, in a process generation that records. Async-signal-safe.
pub fn default_is_ours(signal: c_int) -> bool {
    SIGNALS.contains(&signal) && crate::lifecycle::owns_process()
}

extern "C" fn on_signal(signal: c_int) {
    // SAFETY: __errno_location is this thread's errno; restored before returning.
    let errno = unsafe { *libc::__errno_location() };
    wait_for_dump(signal);
    // SAFETY: sigaction and raise are async-signal-safe, and RaiseFn is raise's signature.
    // The signal stays blocked until this handler returns, then its default action ends the
    // process.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        real_sigaction(signal, &default, std::ptr::null_mut());
        if let Some(raise) = NEXT.get::<RaiseFn>(1) {
            raise(signal);
        }
        *libc::__errno_location() = errno;
    }
}

/// Asks the writer thread for the dump `signal` is about to cut short and waits for it,
/// at most `WAIT_NS`. Async-signal-safe: clock_gettime and nanosleep.
fn wait_for_dump(signal: c_int) {
    if !crate::lifecycle::request_signal_dump(signal) {
        return;
    }
    let deadline = monotonic_ns().saturating_add(WAIT_NS);
    while !crate::lifecycle::signal_dump_written() && monotonic_ns() < deadline {
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        // SAFETY: nanosleep is async-signal-safe; pause is a valid timespec.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

/// Before the process sends itself `signal`: if the signal will end it (one of `SIGNALS`,
/// default disposition, not blocked on this thread), the dump comes first. May run inside
/// a signal handler, so only async-signal-safe calls.
fn before_signalling_self(signal: c_int) {
    if !SIGNALS.contains(&signal) {
        return;
    }
    // SAFETY: zeroed sigaction/sigset_t are valid; only reading the disposition and mask.
    let fatal = unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        let mut mask: libc::sigset_t = std::mem::zeroed();
        real_sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
            && libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) == 0
            && libc::sigismember(&mask, signal) == 0
    };
    if fatal {
        wait_for_dump(signal);
    }
}

type KillFn = unsafe extern "C" fn(libc::pid_t, c_int) -> c_int;
type RaiseFn = unsafe extern "C" fn(c_int) -> c_int;
/// libc's `kill` and `raise` (`dlsym` is not async-signal-safe).
pub static NEXT: NextFns<2> = NextFns::new([c"kill", c"raise"]);

/// `kill(2)`, with the dump first when the process is ending itself.
///
/// # Safety
/// Same contract as `kill(2)`.
#[no_mangle]
pub unsafe extern "C" fn kill(pid: libc::pid_t, signal: c_int) -> c_int {
    // SAFETY: getpid has no preconditions.
    if pid == unsafe { libc::getpid() } {
        before_signalling_self(signal);
    }
    // SAFETY: KillFn is kill's C signature.
    match unsafe { NEXT.get::<KillFn>(0) } {
        // SAFETY: the caller's arguments to libc's kill.
        Some(real) => unsafe { real(pid, signal) },
        None => -1,
    }
}

/// `raise(3)`, with the dump first when the signal will end the process.
///
/// # Safety
/// Same contract as `raise(3)`.
#[no_mangle]
pub unsafe extern "C" fn raise(signal: c_int) -> c_int {
    before_signalling_self(signal);
    // SAFETY: RaiseFn is raise's C signature.
    match unsafe { NEXT.get::<RaiseFn>(1) } {
        // SAFETY: the caller's argument to libc's raise.
        Some(real) => unsafe { real(signal) },
        None => -1,
    }
}

/// Spawns a gpuspy thread with every signal blocked that the program could be sent, so
/// that the kernel never picks it to run the program's (or our) handlers. Returns whether
/// the thread started.
pub fn spawn_without_signals(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
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
        let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        spawned.is_ok()
    }
}
