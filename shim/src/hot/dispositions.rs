//! The signal dispositions the program sees. While a process records, the default
//! disposition of each of `signals::SIGNALS` is carried out by the shim's handler, which
//! writes the dump and then ends the process as the default would (signals.rs). To the
//! program that handler is the default: `sigaction` and `signal` report `SIG_DFL` where it
//! is installed (as the disposition, and as the one a new handler replaced), and setting
//! `SIG_DFL` installs it again, so that a library that saves a disposition and restores it
//! later keeps the dump. Shells, Python's `signal` module and test frameworks that test
//! for `SIG_DFL` see what the program set.
//!
//! glibc's `sigset`, `sysv_signal` and `bsd_signal` call its internal `sigaction`, and a
//! raw `rt_sigaction` system call goes to the kernel: those still see the shim's handler.

#![allow(clippy::missing_safety_doc)]

use crate::signals::{self, real_sigaction as real, set_errno, SignalFn, DISPOSITION_FNS};
use std::ffi::c_int;

/// What the program set where the disposition is the shim's: `SIG_DFL`.
fn as_set_by_the_program(handler: libc::sighandler_t) -> libc::sighandler_t {
    if handler == signals::handler() {
        libc::SIG_DFL
    } else {
        handler
    }
}

#[no_mangle]
pub unsafe extern "C" fn sigaction(
    signal: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let ours;
    let mut act = act;
    // SAFETY: act is null or the caller's valid sigaction.
    if !act.is_null()
        && unsafe { (*act).sa_sigaction } == libc::SIG_DFL
        && signals::default_is_ours(signal)
    {
        ours = signals::our_action();
        act = &ours;
    }
    // SAFETY: the caller's arguments, or our action in place of SIG_DFL.
    let result = unsafe { real(signal, act, old) };
    // SAFETY: old is null or the caller's sigaction, just filled in.
    if let Some(old) = unsafe { old.as_mut() }.filter(|_| result == 0) {
        if old.sa_sigaction == signals::handler() {
            // SAFETY: a zeroed sigaction is valid; sigemptyset fills its mask.
            *old = unsafe { std::mem::zeroed() };
            old.sa_sigaction = libc::SIG_DFL;
            // SAFETY: a valid sigset_t to fill.
            unsafe { libc::sigemptyset(&mut old.sa_mask) };
        }
    }
    result
}

#[no_mangle]
pub unsafe extern "C" fn signal(signal: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if handler == libc::SIG_DFL && signals::default_is_ours(signal) {
        let ours = signals::our_action();
        // SAFETY: a zeroed sigaction is valid, and filled in by sigaction.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: our action and a local to fill in.
        if unsafe { real(signal, &ours, &mut old) } != 0 {
            return libc::SIG_ERR;
        }
        return as_set_by_the_program(old.sa_sigaction);
    }
    // SAFETY: SignalFn is signal's C signature; the caller's arguments.
    match unsafe { DISPOSITION_FNS.get::<SignalFn>(1) } {
        Some(real) => as_set_by_the_program(unsafe { real(signal, handler) }),
        None => {
            set_errno(libc::ENOSYS);
            libc::SIG_ERR
        }
    }
}
