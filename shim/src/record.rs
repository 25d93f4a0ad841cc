//! The recorder: per-thread statistics blocks in one lazily committed anonymous mapping,
//! and `intercept`, the hot path every wrapper runs.
//!
//! Each thread that calls the driver claims a slot (one `fetch_add`) on its first call and
//! from then on writes only its own block with relaxed atomic adds: no locks, no
//! allocation, no sharing between threads. Slots past `MAX_THREADS - 1` share the last one,
//! which stays correct because every update is an atomic read-modify-write. Pages of the
//! mapping are committed only when first written, so the untouched part of a block costs
//! nothing; a forked child gets a zeroed mapping back with one `madvise`.

use crate::clock;
use crate::effect::Effect;
use crate::hooks::{CUresult, Hook, HOOK_COUNT};
use crate::lifecycle;
use gpuspy_format::{hist, Direction, HostKind, SyncCause};
use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

pub const MAX_THREADS: usize = 256;
const DIRECTIONS: usize = Direction::ALL.len();
const HOST_KINDS: usize = HostKind::ALL.len();
const SYNC_CAUSES: usize = SyncCause::ALL.len();

#[repr(C)]
pub struct Series {
    pub total_ns: AtomicU64,
    pub max_ns: AtomicU64,
    pub hist: [AtomicU64; hist::BUCKETS],
}

#[repr(C)]
pub struct ApiCell {
    pub nested: AtomicU64,
    pub bytes: AtomicU64,
    pub series: Series,
}

#[repr(C)]
pub struct CopyCell {
    pub calls: AtomicU64,
    pub bytes: AtomicU64,
}

#[repr(C)]
pub struct ThreadStats {
    pub apis: [ApiCell; HOOK_COUNT],
    pub syncs: [Series; SYNC_CAUSES],
    pub copies: [[CopyCell; HOST_KINDS]; DIRECTIONS],
}

static ARENA: AtomicPtr<ThreadStats> = AtomicPtr::new(std::ptr::null_mut());
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

const ARENA_BYTES: usize = MAX_THREADS * std::mem::size_of::<ThreadStats>();

/// Reserves the arena. Cold; returns false when the mapping cannot be made.
pub fn init_arena() -> bool {
    // SAFETY: a fresh private anonymous mapping; MAP_NORESERVE keeps untouched pages free.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            ARENA_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    ARENA.store(p.cast(), Release);
    true
}

/// Zeroes every block (fork child: async-signal-safe, one syscall).
pub fn reset_arena() {
    let arena = ARENA.load(Acquire);
    if !arena.is_null() {
        // SAFETY: the range is exactly our mapping; DONTNEED on a private anonymous mapping
        // makes its pages read back as zero.
        unsafe { libc::madvise(arena.cast(), ARENA_BYTES, libc::MADV_DONTNEED) };
    }
    NEXT_SLOT.store(0, Relaxed);
    ERRORS.iter().for_each(|e| {
        e.key.store(0, Relaxed);
        e.count.store(0, Relaxed);
    });
    LOCAL.with(|l| l.slot.set(std::ptr::null()));
}

/// The blocks in use, for the dump.
pub fn blocks() -> &'static [ThreadStats] {
    let arena = ARENA.load(Acquire);
    if arena.is_null() {
        return &[];
    }
    let used = NEXT_SLOT.load(Acquire).min(MAX_THREADS);
    // SAFETY: the first `used` blocks lie inside the mapping, which is never unmapped, and
    // all-zero bytes are valid atomics.
    unsafe { std::slice::from_raw_parts(arena, used) }
}

pub fn threads_seen() -> u32 {
    NEXT_SLOT.load(Relaxed) as u32
}

struct Local {
    slot: Cell<*const ThreadStats>,
    depth: Cell<u32>,
}

thread_local! {
    // const-initialised and Drop-free: no lazy-init check, no TLS destructor.
    static LOCAL: Local = const {
        Local { slot: Cell::new(std::ptr::null()), depth: Cell::new(0) }
    };
}

#[cold]
#[inline(never)]
fn claim_slot(local: &Local) -> Option<&'static ThreadStats> {
    let arena = ARENA.load(Acquire);
    if arena.is_null() {
        return None;
    }
    let index = NEXT_SLOT.fetch_add(1, AcqRel).min(MAX_THREADS - 1);
    // SAFETY: index < MAX_THREADS, inside the mapping.
    let block = unsafe { &*arena.add(index) };
    local.slot.set(block);
    Some(block)
}

/// Runs `call` (the real driver function) and records it. The hot path: one TLS lookup,
/// two timestamps, the call, a bucket index and three relaxed atomic adds.
#[inline(always)]
pub fn intercept(hook: Hook, effect: Effect, call: impl FnOnce() -> CUresult) -> CUresult {
    if !lifecycle::recording() {
        return call();
    }
    // Thread teardown (TLS gone): just forward.
    let Ok(local) = LOCAL.try_with(|l| l as *const Local) else {
        return call();
    };
    // SAFETY: a pointer to this thread's own TLS block, used on this thread only while the
    // thread runs.
    let local = unsafe { &*local };
    let depth = local.depth.get();
    let block = match unsafe { local.slot.get().as_ref() } {
        Some(block) => block,
        None => match claim_slot(local) {
            Some(block) => block,
            None => return call(),
        },
    };
    // SAFETY: Hook ids are < HOOK_COUNT by construction.
    let cell = unsafe { block.apis.get_unchecked(hook as usize) };
    if depth > 0 {
        // The driver calling its own exports: forwarded and counted, not timed.
        cell.nested.fetch_add(1, Relaxed);
        return call();
    }
    local.depth.set(1);
    let start = clock::ticks();
    let result = call();
    let ns = clock::ticks_to_ns(clock::ticks().saturating_sub(start));
    local.depth.set(0);

    cell.series.add(ns);
    if result == 0 {
        apply(block, cell, &effect, ns);
    } else {
        record_error(hook, result);
    }
    result
}

#[inline(always)]
fn apply(block: &ThreadStats, cell: &ApiCell, effect: &Effect, ns: u64) {
    if matches!(effect, Effect::None) {
        return;
    }
    let bytes = effect.bytes();
    if bytes > 0 {
        cell.bytes.fetch_add(bytes, Relaxed);
    }
    if let Effect::Copy { dir, host, .. } = *effect {
        // SAFETY: enum discriminants index arrays sized by the same enums' ALL lists.
        let copy = unsafe {
            block
                .copies
                .get_unchecked(dir as usize)
                .get_unchecked(host as usize)
        };
        copy.calls.fetch_add(1, Relaxed);
        copy.bytes.fetch_add(bytes, Relaxed);
    }
    if let Some(cause) = effect.sync_cause() {
        // SAFETY: as above.
        unsafe { block.syncs.get_unchecked(cause as usize) }.add(ns);
    }
    effect.track_host_memory();
}

impl Series {
    #[inline(always)]
    fn add(&self, ns: u64) {
        // SAFETY: bucket_index is < BUCKETS for every input.
        unsafe { self.hist.get_unchecked(hist::bucket_index(ns)) }.fetch_add(1, Relaxed);
        self.total_ns.fetch_add(ns, Relaxed);
        if ns > self.max_ns.load(Relaxed) {
            self.max_ns.fetch_max(ns, Relaxed);
        }
    }
}

/// Non-zero results by (hook, code): a small open-addressed table, cold path.
struct ErrorSlot {
    key: AtomicU32,
    count: AtomicU64,
}
const ERROR_SLOTS: usize = 512;
#[allow(clippy::declare_interior_mutable_const)]
const NO_ERROR: ErrorSlot = ErrorSlot {
    key: AtomicU32::new(0),
    count: AtomicU64::new(0),
};
static ERRORS: [ErrorSlot; ERROR_SLOTS] = [NO_ERROR; ERROR_SLOTS];

#[cold]
#[inline(never)]
fn record_error(hook: Hook, code: CUresult) {
    // Key 0 marks a free slot, so hook ids are stored plus one.
    let key = ((hook as u32 + 1) << 16) | code.min(0xffff);
    let start = (key.wrapping_mul(2_654_435_761) as usize) % ERROR_SLOTS;
    for i in 0..ERROR_SLOTS {
        let slot = &ERRORS[(start + i) % ERROR_SLOTS];
        match slot.key.compare_exchange(0, key, AcqRel, Acquire) {
            Ok(_) => {}
            Err(existing) if existing == key => {}
            Err(_) => continue,
        }
        slot.count.fetch_add(1, Relaxed);
        return;
    }
}

/// `(hook index, code, count)` for every recorded error.
pub fn errors() -> Vec<(usize, u32, u64)> {
    ERRORS
        .iter()
        .filter_map(|e| {
            let key = e.key.load(Acquire);
            let count = e.count.load(Relaxed);
            (key != 0 && count > 0).then(|| (((key >> 16) - 1) as usize, key & 0xffff, count))
        })
        .collect()
}
