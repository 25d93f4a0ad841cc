//! One thread's recent blocking calls, in its statistics block: the recorder pushes each
//! one with its start and end ticks (after such a call only: never on the launch path);
//! `events.rs` reads them off the hot path. One writer, a fixed size; a reader that comes
//! too late finds the oldest overwritten, and is told how many.

use gpuspy_format::timeline::HostEventKind;
use gpuspy_format::SyncCause;
use std::sync::atomic::{fence, AtomicU64, Ordering::*};

/// Slots of one thread's ring. It keeps the last `RING_EVENTS - 1` events (the slot after
/// them is the one being written): 100 ms of a thread that blocks every 50 µs.
pub const RING_EVENTS: usize = 2048;
const KEPT: u64 = RING_EVENTS as u64 - 1;
/// One thread's recent blocking calls. Written only by its thread.
#[repr(C)]
pub struct Ring {
    /// Events ever pushed; event `n` is in slot `n % RING_EVENTS`.
    pushed: AtomicU64,
    slots: [RingSlot; RING_EVENTS],
}

/// `table[n % N]`: the modulo is the bound, so the access needs no check and cannot fail.
#[inline(always)]
pub fn wrapped<T, const N: usize>(table: &[T; N], n: usize) -> &T {
    const { assert!(N > 0) };
    // SAFETY: n % N < N, the array's length.
    unsafe { table.get_unchecked(n % N) }
}

#[repr(C)]
struct RingSlot {
    start: AtomicU64,
    /// Duration in ticks << 8 | the kind's code.
    length_kind: AtomicU64,
}

impl Ring {
    /// Out of line: only calls that block reach it, and the wrappers stay small.
    #[inline(never)]
    pub fn push(&self, kind: HostEventKind, start: u64, end: u64) {
        let n = self.pushed.load(Relaxed);
        let slot = wrapped(&self.slots, n as usize);
        slot.start.store(start, Relaxed);
        slot.length_kind
            .store(end.saturating_sub(start) << 8 | code(kind), Relaxed);
        self.pushed.store(n + 1, Release);
    }

    /// The events from position `from` on, as `(start, end, kind)` ticks; returns the next
    /// position and how many events between `from` and it were overwritten before being
    /// read.
    pub fn read(&self, from: u64, out: &mut Vec<(u64, u64, HostEventKind)>) -> (u64, u64) {
        let pushed = self.pushed.load(Acquire);
        if pushed < from {
            // Not ours to explain (a reused block is caught by its retire count): start over.
            return (pushed, 0);
        }
        let first = from.max(pushed.saturating_sub(KEPT));
        let raw: Vec<(u64, u64)> = (first..pushed)
            .map(|n| {
                let slot = wrapped(&self.slots, n as usize);
                (slot.start.load(Relaxed), slot.length_kind.load(Relaxed))
            })
            .collect();
        // Slots the owner overwrote while we read them are not to be trusted.
        fence(Acquire);
        let intact_from = self.pushed.load(Relaxed).saturating_sub(KEPT);
        let overwritten = intact_from.saturating_sub(first).min(pushed - first);
        out.extend(
            raw.iter()
                .skip(overwritten as usize)
                .filter_map(|&(start, length_kind)| {
                    let kind = kind(length_kind & 0xff)?;
                    Some((start, start + (length_kind >> 8), kind))
                }),
        );
        (pushed, first - from + overwritten)
    }
}

fn code(kind: HostEventKind) -> u64 {
    match kind {
        HostEventKind::Sync(cause) => cause as u64,
        HostEventKind::Alloc => SyncCause::ALL.len() as u64,
        HostEventKind::Collective => SyncCause::ALL.len() as u64 + 1,
    }
}

fn kind(code: u64) -> Option<HostEventKind> {
    let causes = SyncCause::ALL.len() as u64;
    match code {
        c if c < causes => SyncCause::ALL
            .get(c as usize)
            .copied()
            .map(HostEventKind::Sync),
        c if c == causes => Some(HostEventKind::Alloc),
        c if c == causes + 1 => Some(HostEventKind::Collective),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> Box<Ring> {
        // SAFETY: all-zero bytes are valid atomics.
        unsafe { Box::new_zeroed().assume_init() }
    }

    #[test]
    fn kinds_round_trip_through_their_codes() {
        let mut kinds: Vec<HostEventKind> = SyncCause::ALL
            .iter()
            .map(|&c| HostEventKind::Sync(c))
            .collect();
        kinds.extend([HostEventKind::Alloc, HostEventKind::Collective]);
        for k in kinds {
            assert_eq!(kind(code(k)), Some(k));
        }
        assert_eq!(kind(0xff), None);
    }

    #[test]
    fn a_ring_reads_in_order_and_counts_what_it_overwrote() {
        let r = ring();
        r.push(HostEventKind::Alloc, 10, 15);
        r.push(HostEventKind::Sync(SyncCause::Free), 20, 40);
        let mut out = Vec::new();
        assert_eq!(r.read(0, &mut out), (2, 0));
        assert_eq!(
            out,
            vec![
                (10, 15, HostEventKind::Alloc),
                (20, 40, HostEventKind::Sync(SyncCause::Free))
            ]
        );
        // 100 more than the ring's slots since the last read: it keeps all but one slot's
        // worth, so the 101 oldest are lost.
        for i in 0..RING_EVENTS as u64 + 100 {
            r.push(HostEventKind::Alloc, 1000 + i, 1001 + i);
        }
        out.clear();
        assert_eq!(r.read(2, &mut out), (2 + RING_EVENTS as u64 + 100, 101));
        assert_eq!(out.len(), RING_EVENTS - 1);
        assert_eq!(out[0], (1101, 1102, HostEventKind::Alloc));
        // Read up to date: nothing new, nothing lost.
        out.clear();
        assert_eq!(r.read(2 + RING_EVENTS as u64 + 100, &mut out).1, 0);
        assert!(out.is_empty());
    }
}
