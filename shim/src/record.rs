//! The recorder: per-thread statistics blocks in one lazily committed anonymous mapping,
//! and `intercept`, the hot path every wrapper runs.
//!
//! Each thread that calls the driver claims a block (one `fetch_add`) on its first call and
//! from then on is the only writer of that block. Updates are therefore relaxed loads and
//! stores, not locked read-modify-writes (a `lock` prefix costs about 20 cycles, twice per
//! call); the dump thread reads whole 8-byte words, which x86-64 and aarch64 never tear.
//! Threads beyond `MAX_THREADS` get no block: their calls are forwarded and only counted in
//! one shared atomic (`unrecorded_calls`). Pages of the mapping are committed only when
//! first written, so the untouched part of a block costs nothing; a forked child gets a
//! zeroed mapping back with one `madvise`.

use crate::clock;
use crate::effect::Effect;
use crate::hooks::{CUresult, Hook, HOOK_COUNT};
use crate::lifecycle;
use crate::tls::{self, Local};
use gpuspy_format::{hist, Direction, HostKind, SyncCause};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

pub const MAX_THREADS: usize = 1024;
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

/// The block of gpuspy's own threads: outside the arena, so never in a dump. Zero pages in
/// `.bss` until one of them makes a (nested, counted-only) call.
// SAFETY: all-zero bytes are valid atomics.
static DISCARD: ThreadStats = unsafe { std::mem::MaybeUninit::zeroed().assume_init() };

/// Keeps the calling thread (a gpuspy thread) out of the recording: it looks like a
/// thread forever inside an intercepted call, with a block no dump reads.
pub fn exclude_current_thread() {
    if let Some(l) = tls::local() {
        l.slot.set(&DISCARD);
        l.depth.set(1);
    }
}
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
static UNRECORDED_CALLS: AtomicU64 = AtomicU64::new(0);

/// Adds to a counter only this thread writes: a plain load and store, no lock.
#[inline(always)]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

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
    UNRECORDED_CALLS.store(0, Relaxed);
    ERRORS.iter().for_each(|e| {
        e.key.store(0, Relaxed);
        e.count.store(0, Relaxed);
    });
    if let Some(local) = tls::local() {
        local.slot.set(std::ptr::null());
    }
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
    NEXT_SLOT.load(Relaxed).min(MAX_THREADS) as u32
}

/// Calls from threads past `MAX_THREADS`, forwarded without a block to record them in.
pub fn unrecorded_calls() -> u64 {
    UNRECORDED_CALLS.load(Relaxed)
}

#[cold]
#[inline(never)]
fn claim_slot(local: &Local) -> Option<&'static ThreadStats> {
    let arena = ARENA.load(Acquire);
    if arena.is_null() {
        return None;
    }
    let index = NEXT_SLOT.fetch_add(1, AcqRel);
    if index >= MAX_THREADS {
        UNRECORDED_CALLS.fetch_add(1, Relaxed);
        return None;
    }
    // SAFETY: index < MAX_THREADS, inside the mapping.
    let block = unsafe { &*arena.add(index) };
    local.slot.set(block);
    Some(block)
}

/// One intercepted call in flight. `block` is null when the call is not recorded
/// (recording off, TLS gone, or a nested call, which `begin` has already counted).
pub struct Span {
    block: *const ThreadStats,
    local: *const Local,
    source: clock::Source,
    start: u64,
}

/// The hot path, before the real call: one TLS lookup, the depth guard, one timestamp.
/// Wrappers call `begin`, then the real function exactly once, then `end`, so the
/// caller's arguments go straight to the driver without being copied into a closure.
#[inline(always)]
pub fn begin(hook: Hook) -> Span {
    const SKIP: Span = Span {
        block: std::ptr::null(),
        local: std::ptr::null(),
        source: clock::Source::Monotonic,
        start: 0,
    };
    let Some(source) = lifecycle::recording() else {
        return SKIP;
    };
    // Thread teardown (TLS gone): just forward.
    let Some(l) = tls::local() else {
        return SKIP;
    };
    // SAFETY: slot pointers come from claim_slot (into the never-unmapped arena) or are
    // DISCARD.
    let block = match unsafe { l.slot.get().as_ref() } {
        Some(block) => block,
        None => match claim_slot(l) {
            Some(block) => block,
            None => return SKIP,
        },
    };
    if l.depth.get() > 0 {
        // The driver calling its own exports: forwarded and counted, not timed.
        // SAFETY: Hook ids are < HOOK_COUNT by construction.
        bump(
            &unsafe { block.apis.get_unchecked(hook as usize) }.nested,
            1,
        );
        return SKIP;
    }
    l.depth.set(1);
    Span {
        block,
        local: l,
        source,
        start: source.ticks(),
    }
}

/// The hot path, after the real call: the second timestamp, the histogram, the effect.
#[inline(always)]
pub fn end(span: Span, hook: Hook, effect: Effect, result: CUresult) {
    // SAFETY: a non-null block comes from begin, on this thread.
    let Some(block) = (unsafe { span.block.as_ref() }) else {
        return;
    };
    let ticks = span.source.ticks().saturating_sub(span.start);
    let ns = clock::ticks_to_ns(ticks, lifecycle::ns_per_tick_q32());
    // SAFETY: begin set local alongside block.
    unsafe { &*span.local }.depth.set(0);
    // SAFETY: Hook ids are < HOOK_COUNT by construction.
    let cell = unsafe { block.apis.get_unchecked(hook as usize) };
    cell.series.add(ns);
    if result == 0 {
        apply(block, cell, &effect, ns);
    } else {
        record_error(hook, result);
    }
}

#[inline(always)]
fn apply(block: &ThreadStats, cell: &ApiCell, effect: &Effect, ns: u64) {
    if matches!(effect, Effect::None) {
        return;
    }
    let bytes = effect.bytes();
    if bytes > 0 {
        bump(&cell.bytes, bytes);
    }
    if let Effect::Copy { dir, host, .. } = *effect {
        // SAFETY: enum discriminants index arrays sized by the same enums' ALL lists.
        let copy = unsafe {
            block
                .copies
                .get_unchecked(dir as usize)
                .get_unchecked(host as usize)
        };
        bump(&copy.calls, 1);
        bump(&copy.bytes, bytes);
    }
    if let Some(cause) = effect.sync_cause() {
        // SAFETY: as above.
        unsafe { block.syncs.get_unchecked(cause as usize) }.add(ns);
    }
    effect.track_host_memory();
    effect.notify_gpu();
}

impl Series {
    #[inline(always)]
    fn add(&self, ns: u64) {
        // SAFETY: bucket_index is < BUCKETS for every input.
        bump(
            unsafe { self.hist.get_unchecked(hist::bucket_index(ns)) },
            1,
        );
        bump(&self.total_ns, ns);
        if ns > self.max_ns.load(Relaxed) {
            self.max_ns.store(ns, Relaxed);
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
