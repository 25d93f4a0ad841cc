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

/// The process's ranges live in `TABLE`; a test owns a table of its own, since overflowing
/// the process's one would change every other test's copies.
struct Table {
    slots: [Slot; SLOTS],
    high_water: AtomicUsize,
    overflowed: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    kind: AtomicU8::new(0),
};
static TABLE: Table = Table::new();

fn encode(kind: HostKind) -> u8 {
    match kind {
        HostKind::Pinned => 1,
        HostKind::Managed => 2,
        HostKind::Pageable | HostKind::None => 0,
    }
}

impl Table {
    const fn new() -> Table {
        Table {
            slots: [EMPTY; SLOTS],
            high_water: AtomicUsize::new(0),
            overflowed: AtomicBool::new(false),
        }
    }

    /// The slots claimed so far: up to the high-water mark.
    #[inline]
    fn claimed(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter().take(self.high_water.load(Acquire))
    }

    fn insert(&self, start: usize, len: u64, kind: HostKind) {
        if start == 0 || len == 0 {
            return;
        }
        let end = start.saturating_add(len as usize);
        for (i, slot) in self.slots.iter().enumerate() {
            if slot
                .start
                .compare_exchange(0, start, AcqRel, Relaxed)
                .is_ok()
            {
                slot.kind.store(encode(kind), Relaxed);
                // Published last: a reader that sees `end` also sees `kind`.
                slot.end.store(end, Release);
                self.high_water.fetch_max(i + 1, Release);
                return;
            }
        }
        self.overflowed.store(true, Relaxed);
    }

    fn remove(&self, start: usize) {
        if start == 0 {
            return;
        }
        if let Some(slot) = self.claimed().find(|s| s.start.load(Acquire) == start) {
            slot.end.store(0, Release);
            slot.start.store(0, Release);
        }
    }

    #[inline]
    fn lookup(&self, addr: usize) -> Option<HostKind> {
        for slot in self.claimed() {
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

    #[inline]
    fn classify(&self, addr: usize) -> HostKind {
        match self.lookup(addr) {
            Some(kind) => kind,
            None if self.overflowed.load(Relaxed) => HostKind::None,
            None => HostKind::Pageable,
        }
    }
}

pub fn insert(start: usize, len: u64, kind: HostKind) {
    TABLE.insert(start, len, kind);
}

pub fn remove(start: usize) {
    TABLE.remove(start);
}

/// The kind of a range holding `addr`, if the shim saw it allocated.
#[inline]
pub fn lookup(addr: usize) -> Option<HostKind> {
    TABLE.lookup(addr)
}

/// Pinned, managed, or pageable; unknown once the table has overflowed.
#[inline]
pub fn classify(addr: usize) -> HostKind {
    TABLE.classify(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_lookup_remove_and_overflow() {
        let table = Box::new(Table::new());
        table.insert(0x10_0000, 0x1000, HostKind::Pinned);
        table.insert(0x20_0000, 0x100, HostKind::Managed);
        assert_eq!(table.classify(0x10_0000), HostKind::Pinned);
        assert_eq!(table.classify(0x10_0fff), HostKind::Pinned);
        assert_eq!(table.classify(0x10_1000), HostKind::Pageable);
        assert_eq!(table.classify(0x20_0080), HostKind::Managed);
        table.remove(0x10_0000);
        assert_eq!(table.classify(0x10_0000), HostKind::Pageable);
        // The freed slot is reused.
        table.insert(0x30_0000, 0x10, HostKind::Pinned);
        assert_eq!(table.classify(0x30_0001), HostKind::Pinned);
        for i in 0..SLOTS {
            table.insert(0x1_0000_0000 + i * 0x100, 0x10, HostKind::Pinned);
        }
        assert_eq!(table.classify(0x7_0000_0000), HostKind::None);
        assert_eq!(table.classify(0x20_0080), HostKind::Managed);
    }
}
