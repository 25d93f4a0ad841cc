//! Host ranges the driver pinned or allocated as managed memory, as seen by our own
//! allocation hooks. Copies look their host pointer up here instead of asking the driver
//! (`cuPointerGetAttribute` inside a hook is a driver call on the hot path, and breaks under
//! stream capture): a host pointer not found here is pageable.
//!
//! A fixed table of slots claimed by CAS: lock-free, allocation-free, safe to read while
//! another thread inserts or removes. Lookups scan up to the high-water mark; programs pin a
//! few large buffers, so the scan is short. When the table is full new ranges go untracked
//! and copies from them are reported as `none` (unknown) rather than wrongly as pageable.

use gpuspy_format::HostKind;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};

const SLOTS: usize = 4096;

struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    kind: AtomicU8,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    kind: AtomicU8::new(0),
};
static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static HIGH_WATER: AtomicUsize = AtomicUsize::new(0);
static OVERFLOWED: AtomicBool = AtomicBool::new(false);

/// The slots claimed so far: up to the high-water mark.
#[inline]
fn claimed() -> impl Iterator<Item = &'static Slot> {
    TABLE.iter().take(HIGH_WATER.load(Acquire))
}

fn encode(kind: HostKind) -> u8 {
    match kind {
        HostKind::Pinned => 1,
        HostKind::Managed => 2,
        HostKind::Pageable | HostKind::None => 0,
    }
}

pub fn insert(start: usize, len: u64, kind: HostKind) {
    if start == 0 || len == 0 {
        return;
    }
    let end = start.saturating_add(len as usize);
    for (i, slot) in TABLE.iter().enumerate() {
        if slot
            .start
            .compare_exchange(0, start, AcqRel, Relaxed)
            .is_ok()
        {
            slot.kind.store(encode(kind), Relaxed);
            // Published last: a reader that sees `end` also sees `kind`.
            slot.end.store(end, Release);
            HIGH_WATER.fetch_max(i + 1, Release);
            return;
        }
    }
    OVERFLOWED.store(true, Relaxed);
}

pub fn remove(start: usize) {
    if start == 0 {
        return;
    }
    if let Some(slot) = claimed().find(|s| s.start.load(Acquire) == start) {
        slot.end.store(0, Release);
        slot.start.store(0, Release);
    }
}

/// The kind of a range holding `addr`, if the shim saw it allocated.
#[inline]
pub fn lookup(addr: usize) -> Option<HostKind> {
    for slot in claimed() {
        let start = slot.start.load(Relaxed);
        if start != 0 && start <= addr && addr < slot.end.load(Acquire) {
            return Some(match slot.kind.load(Relaxed) {
                1 => HostKind::Pinned,
                _ => HostKind::Managed,
            });
        }
    }
    None
}

/// Pinned, managed, or pageable; unknown once the table has overflowed.
#[inline]
pub fn classify(addr: usize) -> HostKind {
    match lookup(addr) {
        Some(kind) => kind,
        None if OVERFLOWED.load(Relaxed) => HostKind::None,
        None => HostKind::Pageable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test owns the global table (tests run in parallel threads).
    #[test]
    fn insert_lookup_remove_and_overflow() {
        insert(0x10_0000, 0x1000, HostKind::Pinned);
        insert(0x20_0000, 0x100, HostKind::Managed);
        assert_eq!(classify(0x10_0000), HostKind::Pinned);
        assert_eq!(classify(0x10_0fff), HostKind::Pinned);
        assert_eq!(classify(0x10_1000), HostKind::Pageable);
        assert_eq!(classify(0x20_0080), HostKind::Managed);
        remove(0x10_0000);
        assert_eq!(classify(0x10_0000), HostKind::Pageable);
        // The freed slot is reused.
        insert(0x30_0000, 0x10, HostKind::Pinned);
        assert_eq!(classify(0x30_0001), HostKind::Pinned);
        for i in 0..SLOTS {
            insert(0x1_0000_0000 + i * 0x100, 0x10, HostKind::Pinned);
        }
        assert_eq!(classify(0x7_0000_0000), HostKind::None);
        assert_eq!(classify(0x20_0080), HostKind::Managed);
    }
}
