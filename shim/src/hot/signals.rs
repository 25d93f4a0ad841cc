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
//! formats. It wakes the writer thread (a futex word: no descriptor the program could close
//! or reuse), waits (at most `WAIT_NS`) until the dump is written, restores the default
//! disposition and raises the signal again, which is delivered, now fatal, when the handler
//! returns. A thread interrupted inside `malloc`
//! holds that arena's lock, which is why the writing happens on the writer thread, and why
//! the wait is bounded: if the writer cannot finish in time the process still dies as it
//! would have without gpuspy, only without the last dump. gpuspy's own threads block these
//! signals, so the kernel delivers them to one of the program's threads.
//!
//! A program may also end itself with one of these signals after restoring the default
//! disposition: Python does exactly that after an unhandled KeyboardInterrupt (its atexit
//! handlers have run; it sets SIGINT to the default and calls `kill(getpid(), SIGINT)`, so
//! that its parent sees "killed by SIGINT"), crash handlers re-raise, and supervisors end
//! their whole process group. No handler of ours runs then and no exit path follows, so
//! every libc way of sending a signal that reaches the process itself first asks for the
//! dump the same way, for a signal that will end it: `kill` of its pid, of its process
//! group (0 or minus the group id) and `killpg` of it, `raise`, `tgkill` of its thread
//! group, `pthread_kill` and `pthread_sigqueue` of any of its threads, and `sigqueue` of its
//! pid. A raw `syscall(SYS_kill, ..)` is out of reach.

use crate::clock::monotonic_ns;
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
    SIGNALS.contains(&signal) && (crate::UPCALLS.owns_process)()
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
        if let Some(raise) = NEXT.get::<RaiseFn>(RAISE) {
            raise(signal);
        }
        *libc::__errno_location() = errno;
    }
}

/// Asks the writer thread for the dump `signal` is about to cut short and waits for it,
/// at most `WAIT_NS`. Async-signal-safe: clock_gettime and nanosleep.
fn wait_for_dump(signal: c_int) {
    if !(crate::UPCALLS.request_signal_dump)(signal) {
        return;
    }
    let deadline = monotonic_ns().saturating_add(WAIT_NS);
    while !(crate::UPCALLS.signal_dump_written)() && monotonic_ns() < deadline {
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

type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
pub type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
/// libc's `sigaction` and `signal` (which `dispositions.rs` interposes), looked up at load:
/// both are called in signal handlers, where `dlsym` is not safe.
pub static DISPOSITION_FNS: NextFns<2> = NextFns::new([c"sigaction", c"signal"]);

pub fn set_errno(value: c_int) {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = value };
}

/// libc's `sigaction`, for the shim's own use: the disposition as it is.
///
/// # Safety
/// Same contract as `sigaction(2)`.
pub unsafe fn real_sigaction(
    signal: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: SigactionFn is sigaction's C signature; the caller's arguments.
    match unsafe { DISPOSITION_FNS.get::<SigactionFn>(0) } {
        Some(real) => unsafe { real(signal, act, old) },
        None => {
            set_errno(libc::ENOSYS);
            -1
        }
    }
}

type KillFn = unsafe extern "C" fn(libc::pid_t, c_int) -> c_int;
type RaiseFn = unsafe extern "C" fn(c_int) -> c_int;
type TgkillFn = unsafe extern "C" fn(libc::pid_t, libc::pid_t, c_int) -> c_int;
type PthreadKillFn = unsafe extern "C" fn(libc::pthread_t, c_int) -> c_int;
type SigqueueFn = unsafe extern "C" fn(libc::pid_t, c_int, libc::sigval) -> c_int;
type PthreadSigqueueFn = unsafe extern "C" fn(libc::pthread_t, c_int, libc::sigval) -> c_int;
/// libc's ways of sending a signal (`dlsym` is not async-signal-safe), by these indices.
pub static NEXT: NextFns<7> = NextFns::new([
    c"kill",
    c"raise",
    c"killpg",
    c"tgkill",
    c"pthread_kill",
    c"sigqueue",
    c"pthread_sigqueue",
]);
const KILL: usize = 0;
const RAISE: usize = 1;
const KILLPG: usize = 2;
const TGKILL: usize = 3;
const PTHREAD_KILL: usize = 4;
const SIGQUEUE: usize = 5;
const PTHREAD_SIGQUEUE: usize = 6;

/// Whether `kill(pid, ..)` signals this process: its own pid, or its process group (`0`, or
/// minus the group's id). `kill(-1, ..)` signals every process but the caller on Linux.
fn kill_reaches_self(pid: libc::pid_t) -> bool {
    // SAFETY: getpid and getpgrp have no preconditions and are async-signal-safe.
    let (me, group) = unsafe { (libc::getpid(), libc::getpgrp()) };
    pid == me || pid == 0 || (pid < -1 && pid.checked_neg() == Some(group))
}

/// `kill(2)`, with the dump first when the process is ending itself (or its group).
///
/// # Safety
/// Same contract as `kill(2)`.
#[no_mangle]
pub unsafe extern "C" fn kill(pid: libc::pid_t, signal: c_int) -> c_int {
    if kill_reaches_self(pid) {
        before_signalling_self(signal);
    }
    // SAFETY: KillFn is kill's C signature.
    match unsafe { NEXT.get::<KillFn>(KILL) } {
        // SAFETY: the caller's arguments to libc's kill.
        Some(real) => unsafe { real(pid, signal) },
        None => -1,
    }
}

/// `killpg(3)`: glibc's calls its own `kill` directly, past ours, so it is wrapped too.
///
/// # Safety
/// Same contract as `killpg(3)`.
#[no_mangle]
pub unsafe extern "C" fn killpg(group: libc::pid_t, signal: c_int) -> c_int {
    // killpg(g) is kill(-g): 0 is the caller's group, 1 every process but the caller.
    if group >= 0 && kill_reaches_self(-group) {
        before_signalling_self(signal);
    }
    // SAFETY: KillFn is killpg's C signature.
    match unsafe { NEXT.get::<KillFn>(KILLPG) } {
        // SAFETY: the caller's arguments to libc's killpg.
        Some(real) => unsafe { real(group, signal) },
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
    match unsafe { NEXT.get::<RaiseFn>(RAISE) } {
        // SAFETY: the caller's argument to libc's raise.
        Some(real) => unsafe { real(signal) },
        None => -1,
    }
}

/// `tgkill(2)`, with the dump first when the thread is one of this process's. Whether the
/// signal is blocked is judged by the calling thread's mask (`before_signalling_self`),
/// as for `kill`: another thread's cannot be read async-signal-safely.
///
/// # Safety
/// Same contract as `tgkill(2)`.
#[no_mangle]
pub unsafe extern "C" fn tgkill(process: libc::pid_t, thread: libc::pid_t, signal: c_int) -> c_int {
    // SAFETY: getpid has no preconditions.
    if process == unsafe { libc::getpid() } {
        before_signalling_self(signal);
    }
    // SAFETY: TgkillFn is tgkill's C signature.
    match unsafe { NEXT.get::<TgkillFn>(TGKILL) } {
        // SAFETY: the caller's arguments to libc's tgkill.
        Some(real) => unsafe { real(process, thread, signal) },
        None => -1,
    }
}

/// `pthread_kill(3)`: a thread of this process, so the dump first (as `tgkill`).
///
/// # Safety
/// Same contract as `pthread_kill(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_kill(thread: libc::pthread_t, signal: c_int) -> c_int {
    before_signalling_self(signal);
    // SAFETY: PthreadKillFn is pthread_kill's C signature.
    match unsafe { NEXT.get::<PthreadKillFn>(PTHREAD_KILL) } {
        // SAFETY: the caller's arguments to libc's pthread_kill.
        Some(real) => unsafe { real(thread, signal) },
        None => libc::ESRCH,
    }
}

/// `sigqueue(3)`, with the dump first when the process is queueing to itself.
///
/// # Safety
/// Same contract as `sigqueue(3)`.
#[no_mangle]
pub unsafe extern "C" fn sigqueue(pid: libc::pid_t, signal: c_int, value: libc::sigval) -> c_int {
    // SAFETY: getpid has no preconditions.
    if pid == unsafe { libc::getpid() } {
        before_signalling_self(signal);
    }
    // SAFETY: SigqueueFn is sigqueue's C signature.
    match unsafe { NEXT.get::<SigqueueFn>(SIGQUEUE) } {
        // SAFETY: the caller's arguments to libc's sigqueue.
        Some(real) => unsafe { real(pid, signal, value) },
        None => -1,
    }
}

/// `pthread_sigqueue(3)`: a thread of this process, so the dump first (as `tgkill`).
///
/// # Safety
/// Same contract as `pthread_sigqueue(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigqueue(
    thread: libc::pthread_t,
    signal: c_int,
    value: libc::sigval,
) -> c_int {
    before_signalling_self(signal);
    // SAFETY: PthreadSigqueueFn is pthread_sigqueue's C signature.
    match unsafe { NEXT.get::<PthreadSigqueueFn>(PTHREAD_SIGQUEUE) } {
        // SAFETY: the caller's arguments to libc's pthread_sigqueue.
        Some(real) => unsafe { real(thread, signal, value) },
        None => libc::ESRCH,
    }
}

/// How long a spawn waits for its thread to run (`spawn_without_signals`). Microseconds
/// as a rule; the bound is for a first driver call made under the dynamic loader's lock
/// (a library constructor), which an older glibc's thread start-up also takes.
const STARTUP_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Spawns a gpuspy thread with every signal blocked that the program could be sent, so
/// that the kernel never picks it to run the program's (or our) handlers. Returns whether
/// the thread started, once it runs (at most `STARTUP_WAIT`): its start-up allocates in
/// glibc (the records of its thread-locals' destructors), which no reserve of ours can
/// serve and whose failure ends the process, so it must not be left to run late, after the
/// program may have used up its memory.
pub fn spawn_without_signals(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    let (started, running) = std::sync::mpsc::sync_channel(1);
    let f = move || {
        let _ = started.send(());
        f()
    };
    // SAFETY: sigset_t values filled by sigfillset/sigdelset; the caller's mask is restored
    // right after the spawn (a new thread inherits its creator's mask).
    let spawned = unsafe {
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
    };
    if spawned {
        // Past the wait, the thread just starts later.
        let _ = running.recv_timeout(STARTUP_WAIT);
    }
    spawned
}
