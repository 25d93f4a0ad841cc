//! The memory a dump is written with when the program has used up its own.
//!
//! A program that runs out of memory under its own limit (`RLIMIT_AS`, a cgroup, no
//! overcommit) and then exits cleanly must keep its exit status. The exit dump allocates
//! (the snapshot, the JSON), and Rust's answer to a failed allocation is to abort the
//! process. So the shim's allocator is the system allocator with a reserve behind it: address
//! space mapped at the first driver call (`RESERVE_BYTES`, `MAP_NORESERVE`: untouched pages
//! cost nothing), from which allocations are carved only when `malloc` fails.
//!
//! A write needs about what the largest write before it needed: the allocator counts the
//! bytes the shim holds, and `with_room` measures each write's peak. Before a write, if
//! neither the reserve nor `malloc` has twice that, the write is skipped (the caller warns
//! once) rather than started and cut short by an abort. The first write of a process has
//! no measure and is bounded by the reserve alone.
//!
//! The reserve is a bump region: a block freed last is taken back, and the whole region is
//! free again once its last block is, which is what happens after each write.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

/// Many times a typical dump's need (a few hundred KiB); a fraction of the arena's size.
const RESERVE_BYTES: usize = 32 << 20;

/// A region allocations are carved from in order.
pub struct Region {
    base: AtomicUsize,
    len: AtomicUsize,
    /// The offset of the first free byte (high half) and the number of live blocks (low
    /// half), in one word so that freeing the last block can reset the offset.
    state: AtomicU64,
}

fn unpack(state: u64) -> (usize, u32) {
    ((state >> 32) as usize, state as u32)
}

fn pack(top: usize, live: u32) -> u64 {
    ((top as u64) << 32) | u64::from(live)
}

impl Region {
    const fn new() -> Region {
        Region {
            base: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            state: AtomicU64::new(0),
        }
    }

    /// Maps the region, once; afterwards (or when the mapping fails) a no-op.
    fn map(&self, len: usize) {
        let len = len.min(u32::MAX as usize);
        if self.base.load(Acquire) != 0 {
            return;
        }
        // SAFETY: a fresh private anonymous mapping; MAP_NORESERVE keeps untouched pages free.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            self.len.store(len, Relaxed);
            self.base.store(p as usize, Release);
        }
    }

    fn contains(&self, ptr: *mut u8) -> bool {
        (ptr as usize).wrapping_sub(self.base.load(Acquire)) < self.len.load(Relaxed)
    }

    fn free_bytes(&self) -> usize {
        self.len.load(Relaxed) - unpack(self.state.load(Relaxed)).0
    }

    /// A block for `layout`, or null when the region is not mapped or has no room.
    fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.base.load(Acquire);
        let len = self.len.load(Relaxed);
        if base == 0 {
            return std::ptr::null_mut();
        }
        let mut state = self.state.load(Acquire);
        loop {
            let (top, live) = unpack(state);
            // The alignment is a power of two; the base is page-aligned.
            let start = (top + layout.align() - 1) & !(layout.align() - 1);
            let Some(end) = start.checked_add(layout.size()).filter(|&end| end <= len) else {
                return std::ptr::null_mut();
            };
            match self
                .state
                .compare_exchange_weak(state, pack(end, live + 1), AcqRel, Acquire)
            {
                Ok(_) => return (base + start) as *mut u8,
                Err(now) => state = now,
            }
        }
    }

    /// Frees a block of `size` bytes at `ptr`, one of this region's.
    fn dealloc(&self, ptr: *mut u8, size: usize) {
        let at = ptr as usize - self.base.load(Acquire);
        let mut state = self.state.load(Acquire);
        loop {
            let (top, live) = unpack(state);
            let live = live.saturating_sub(1);
            let top = match live {
                0 => 0,
                _ if at + size == top => at,
                _ => top,
            };
            match self
                .state
                .compare_exchange_weak(state, pack(top, live), AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }

    /// Grows or shrinks the block at `ptr` where it is, if it is the last one and there is
    /// room; says whether it did.
    fn resize_in_place(&self, ptr: *mut u8, old: usize, new: usize) -> bool {
        let at = ptr as usize - self.base.load(Acquire);
        let len = self.len.load(Relaxed);
        let mut state = self.state.load(Acquire);
        loop {
            let (top, live) = unpack(state);
            if at + old != top || at + new > len {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(state, pack(at + new, live), AcqRel, Acquire)
            {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }
}

static RESERVE: Region = Region::new();
/// Bytes the shim holds, and the most it held since `with_room` last looked.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The most any write needed so far.
static WRITE_NEEDS: AtomicUsize = AtomicUsize::new(0);

/// At the first driver call: the reserve (kept across fork; a new image maps its own).
pub fn map() {
    RESERVE.map(RESERVE_BYTES);
}

/// Runs `write` when there is memory for it, the reserve included, and measures what it
/// took; `None` (nothing run) when there is not.
pub fn with_room<T>(write: impl FnOnce() -> T) -> Option<T> {
    let wanted = WRITE_NEEDS.load(Relaxed).saturating_mul(2);
    if wanted > RESERVE.free_bytes() && !malloc_has(wanted) {
        return None;
    }
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let written = write();
    WRITE_NEEDS.fetch_max(PEAK.load(Relaxed).saturating_sub(before), Relaxed);
    Some(written)
}

fn malloc_has(bytes: usize) -> bool {
    let Ok(layout) = Layout::from_size_align(bytes, 16) else {
        return false;
    };
    // SAFETY: a non-zero size (the reserve, at least, is smaller than `bytes`); the block
    // is freed at once.
    unsafe {
        let p = System.alloc(layout);
        if !p.is_null() {
            System.dealloc(p, layout);
        }
        !p.is_null()
    }
}

fn held(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed).wrapping_add(bytes);
    PEAK.fetch_max(now, Relaxed);
}

fn released(bytes: usize) {
    LIVE.fetch_sub(bytes, Relaxed);
}

/// The system allocator, then the reserve.
pub struct WithReserve;

impl WithReserve {
    /// # Safety
    /// As `GlobalAlloc::realloc`, without the accounting.
    unsafe fn moved(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's layout's alignment with a size realloc accepts.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size, as realloc's.
        let mut p = unsafe { System.alloc(new_layout) };
        if p.is_null() {
            p = RESERVE.alloc(new_layout);
        }
        if !p.is_null() {
            // SAFETY: both blocks hold at least the smaller size and are distinct.
            unsafe { std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size)) };
            // SAFETY: the caller's block, no longer used.
            unsafe { self.free(ptr, layout) };
        }
        p
    }

    /// # Safety
    /// As `GlobalAlloc::dealloc`, without the accounting.
    unsafe fn free(&self, ptr: *mut u8, layout: Layout) {
        if RESERVE.contains(ptr) {
            RESERVE.dealloc(ptr, layout.size());
        } else {
            // SAFETY: not the reserve's, so System's.
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}

// SAFETY: every block comes from System or from the reserve, where no two live blocks
// overlap; each is returned to where it came from (`Region::contains`).
unsafe impl GlobalAlloc for WithReserve {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract.
        let mut p = unsafe { System.alloc(layout) };
        if p.is_null() {
            p = RESERVE.alloc(layout);
        }
        if !p.is_null() {
            held(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract.
        let mut p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            p = RESERVE.alloc(layout);
            if !p.is_null() {
                // SAFETY: a block of layout.size() bytes just carved; reused bytes are dirty.
                unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
            }
        }
        if !p.is_null() {
            held(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        released(layout.size());
        // SAFETY: the caller's contract.
        unsafe { self.free(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = if RESERVE.contains(ptr) {
            if RESERVE.resize_in_place(ptr, layout.size(), new_size) {
                ptr
            } else {
                // SAFETY: the caller's contract.
                unsafe { self.moved(ptr, layout, new_size) }
            }
        } else {
            // SAFETY: the caller's contract; on failure the block is left as it was.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if p.is_null() {
                // SAFETY: the caller's contract; the block is still the caller's.
                unsafe { self.moved(ptr, layout, new_size) }
            } else {
                p
            }
        };
        if !p.is_null() {
            released(layout.size());
            held(new_size);
        }
        p
    }
}

// The shim's unit tests count allocations with an allocator of their own (no_alloc_tests).
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: WithReserve = WithReserve;

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn blocks_are_carved_in_order_and_the_region_is_whole_again_when_all_are_freed() {
        let region = Region::new();
        assert!(region.alloc(layout(8, 8)).is_null(), "not mapped yet");
        region.map(4096);
        let a = region.alloc(layout(100, 8));
        let b = region.alloc(layout(10, 64));
        assert!(region.contains(a) && region.contains(b));
        assert_eq!(b as usize - a as usize, 128, "aligned after a");
        assert_eq!(region.free_bytes(), 4096 - 138);
        assert!(region.alloc(layout(4096, 8)).is_null(), "no room");
        region.dealloc(a, 100);
        assert_eq!(region.free_bytes(), 4096 - 138, "a is not the last block");
        region.dealloc(b, 10);
        assert_eq!(region.free_bytes(), 4096, "nothing live: all free");
    }

    #[test]
    fn the_last_block_grows_and_shrinks_where_it_is() {
        let region = Region::new();
        region.map(4096);
        let a = region.alloc(layout(16, 8));
        let b = region.alloc(layout(16, 8));
        assert!(!region.resize_in_place(a, 16, 32), "b is after a");
        assert!(region.resize_in_place(b, 16, 2000));
        assert!(!region.resize_in_place(b, 2000, 5000), "past the end");
        assert_eq!(region.free_bytes(), 4096 - 16 - 2000);
        region.dealloc(b, 2000);
        assert_eq!(
            region.free_bytes(),
            4096 - 16,
            "the last block freed comes back"
        );
        assert!(!region.contains(std::ptr::null_mut()));
    }

    /// What `realloc` does with a block of the reserve: grows it in place while it is the
    /// last, else moves it (to the system allocator, which has room here), contents kept.
    #[test]
    fn a_reserve_block_grows_in_place_or_moves_with_its_contents() {
        map();
        let small = layout(16, 8);
        let whole = RESERVE.free_bytes();
        let p = RESERVE.alloc(small);
        // SAFETY: p holds 16 bytes; every block below is the allocator's own, used as such.
        unsafe {
            std::ptr::write_bytes(p, 7, 16);
            let grown = WithReserve.realloc(p, small, 64);
            assert_eq!(grown, p, "the last block grows where it is");
            let after = RESERVE.alloc(small);
            let moved = WithReserve.realloc(grown, layout(64, 8), 10_000);
            assert!(!RESERVE.contains(moved), "moved to malloc");
            assert_eq!(std::slice::from_raw_parts(moved, 16), &[7; 16]);
            WithReserve.dealloc(moved, layout(10_000, 8));
            WithReserve.dealloc(after, small);
        }
        assert_eq!(RESERVE.free_bytes(), whole);
    }
}
