//! Timestamps for the hot path: the invariant TSC where the CPU has one, calibrated once
//! against CLOCK_MONOTONIC, else CLOCK_MONOTONIC itself (vDSO, roughly twice the cost).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

static USE_TSC: AtomicBool = AtomicBool::new(false);
/// Nanoseconds per tick in 32.32 fixed point; 1.0 for the monotonic clock. The recorder
/// keeps a copy on its hot cache line (`switch::HOT`).
static NS_PER_TICK_Q32: AtomicU64 = AtomicU64::new(1 << 32);

pub fn ns_per_tick_q32() -> u64 {
    NS_PER_TICK_Q32.load(Relaxed)
}

/// Which time source is in use, for the dump header.
pub fn source() -> &'static str {
    if USE_TSC.load(Relaxed) {
        "tsc"
    } else {
        "monotonic"
    }
}

/// The time source, read once per call by the recorder (it travels in the call's span, so
/// the second timestamp needs no second load).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Monotonic = 1,
    Tsc = 2,
}

pub fn chosen() -> Source {
    if USE_TSC.load(Relaxed) {
        Source::Tsc
    } else {
        Source::Monotonic
    }
}

impl Source {
    /// A raw timestamp in ticks of this source.
    #[inline(always)]
    pub fn ticks(self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self == Source::Tsc {
            // SAFETY: rdtsc has no preconditions; Tsc is only chosen when the CPU reports an
            // invariant TSC.
            return unsafe { core::arch::x86_64::_rdtsc() };
        }
        monotonic_ns()
    }
}

/// Converts a tick difference to nanoseconds with a 32.32 factor.
#[inline(always)]
pub fn ticks_to_ns(ticks: u64, ns_per_tick_q32: u64) -> u64 {
    ((u128::from(ticks) * u128::from(ns_per_tick_q32)) >> 32) as u64
}

/// A reading of the active clock taken together with `CLOCK_REALTIME`: converts the
/// recorder's ticks near it to Unix ns. Taken afresh at every use (the timeline's ticks, at
/// most 100 ms apart), so the 2 ms TSC calibration's error and NTP's slewing stay small
/// over the distance it spans (docs/dump-format.md, "Clocks").
#[derive(Clone, Copy)]
pub struct Anchor {
    ticks: u64,
    unix_ns: u64,
    ns_per_tick_q32: u64,
}

impl Anchor {
    pub fn now() -> Anchor {
        let source = chosen();
        let before = source.ticks();
        let unix_ns = unix_ns();
        let after = source.ticks();
        Anchor {
            ticks: before + after.saturating_sub(before) / 2,
            unix_ns,
            ns_per_tick_q32: ns_per_tick_q32(),
        }
    }

    /// When the anchor was taken, in Unix ns.
    pub fn unix_now(&self) -> u64 {
        self.unix_ns
    }

    /// Unix ns of a tick of the active clock.
    pub fn unix_ns(&self, ticks: u64) -> u64 {
        if ticks <= self.ticks {
            let back = ticks_to_ns(self.ticks - ticks, self.ns_per_tick_q32);
            self.unix_ns.saturating_sub(back)
        } else {
            self.unix_ns + ticks_to_ns(ticks - self.ticks, self.ns_per_tick_q32)
        }
    }

    /// Nanoseconds between two ticks.
    pub fn ns_between(&self, start: u64, end: u64) -> u64 {
        ticks_to_ns(end.saturating_sub(start), self.ns_per_tick_q32)
    }
}

pub fn monotonic_ns() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

pub fn unix_ns() -> u64 {
    read_clock(libc::CLOCK_REALTIME)
}

fn read_clock(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Picks the time source; `force_monotonic` comes from `GPUSPY_CLOCK=monotonic`.
/// Spins about 2 ms to calibrate the TSC: called once per process, on the cold init path.
#[cold]
pub fn init(force_monotonic: bool) {
    if force_monotonic || !invariant_tsc() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions.
        let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
        // A (tick, ns) pair read as close together as the machine allows: the monotonic
        // read between two tick reads, the tightest of a few tries. An unguarded pair that
        // a preemption splits by 10 µs would bias every duration by 0.5 % (seen on a
        // loaded 2-core VM).
        let pair = || {
            (0..16)
                .map(|_| {
                    let before = tsc();
                    let ns = monotonic_ns();
                    let after = tsc();
                    (after.wrapping_sub(before), before / 2 + after / 2, ns)
                })
                .min_by_key(|&(spread, _, _)| spread)
                .map(|(_, ticks, ns)| (ticks, ns))
                .unwrap_or((tsc(), monotonic_ns()))
        };
        let (t0, m0) = pair();
        while monotonic_ns() - m0 < 2_000_000 {}
        let (t1, m1) = pair();
        if t1 > t0 {
            let q32 = (u128::from(m1 - m0) << 32) / u128::from(t1 - t0);
            NS_PER_TICK_Q32.store(q32 as u64, Relaxed);
            USE_TSC.store(true, Relaxed);
        }
    }
}

/// CPUID leaf 0x8000_0007, EDX bit 8: the TSC runs at a constant rate in all power states.
fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let max_ext = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        if max_ext >= 0x8000_0007 {
            return core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0;
        }
    }
    false
}
