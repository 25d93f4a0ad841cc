//! The switch every intercepted call reads first: whether to record, and with which clock;
//! and what the activation fixed for every layer to read: the process's start, and whether
//! the process is a child forked from a recording one.
//!
//! It sits below the recorder and above nothing but the clock, so that the hot path can
//! read it without knowing the lifecycle that turns it on: the first call of a process
//! generation finds it off and asks the lifecycle, through `crate::UPCALLS.activate`, to
//! start recording (the clock, the arena, the writer thread), which then turns it on.

use crate::clock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::*};

/// The two globals every intercepted call reads, on one cache line: between two calls a
/// Python interpreter evicts most of what the wrapper touches, and each line is a miss.
#[repr(C, align(64))]
struct Hot {
    /// 0 until the first call of a process generation (cleared in a fork child), then the
    /// clock source: one load says both "record" and "which clock".
    active: AtomicU8,
    /// `clock::ns_per_tick_q32()`, copied here at activation.
    ns_per_tick_q32: AtomicU64,
}

static HOT: Hot = Hot {
    active: AtomicU8::new(0),
    ns_per_tick_q32: AtomicU64::new(1 << 32),
};

/// The tick-to-nanosecond factor of the active clock.
#[inline(always)]
pub fn ns_per_tick_q32() -> u64 {
    HOT.ns_per_tick_q32.load(Relaxed)
}

/// Whether wrappers should record, and with which clock. One relaxed load on the hot path.
#[inline(always)]
pub fn recording() -> Option<clock::Source> {
    match HOT.active.load(Relaxed) {
        1 => Some(clock::Source::Monotonic),
        2 => Some(clock::Source::Tsc),
        _ => activate(),
    }
}

#[cold]
#[inline(never)]
fn activate() -> Option<clock::Source> {
    (crate::UPCALLS.activate)().then(clock::chosen)
}

/// Whether recording is on (with acquire ordering: what was set up before `turn_on` is
/// visible).
pub fn is_on() -> bool {
    HOT.active.load(Acquire) != 0
}

/// Turns recording on with the chosen clock.
pub fn turn_on() {
    HOT.ns_per_tick_q32.store(clock::ns_per_tick_q32(), Relaxed);
    HOT.active.store(clock::chosen() as u8, Release);
}

/// Turns recording off until the next call activates it again (a fork child).
pub fn turn_off() {
    HOT.active.store(0, Relaxed);
}

static START_UNIX_NS: AtomicU64 = AtomicU64::new(0);

/// The process's start (Unix ns), the origin of the dump's timeline; 0 before the first
/// recorded call.
pub fn start_unix_ns() -> u64 {
    START_UNIX_NS.load(Relaxed)
}

pub fn set_start_unix_ns(start: u64) {
    START_UNIX_NS.store(start, Relaxed);
}

/// Set in a child forked from a recording process: it inherited its parent's rank
/// variables, so its Prometheus series are named by its pid (`prom::Identity`).
static FORKED: AtomicBool = AtomicBool::new(false);

pub fn forked() -> bool {
    FORKED.load(Relaxed)
}

pub fn mark_forked() {
    FORKED.store(true, Relaxed);
}
