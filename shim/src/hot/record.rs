//! The recorder: per-thread statistics blocks in one lazily committed anonymous mapping,
//! `begin`/`end`, the hot path every wrapper runs.
//!
//! Each thread that calls the driver claims a block on its first call and from then on is
//! the only writer of that block. Updates are therefore relaxed loads and stores, not locked
//! read-modify-writes (a `lock` prefix costs about 20 cycles, twice per call); the dump
//! thread reads whole 8-byte words, which x86-64 and aarch64 never tear.
//!
//! When a thread exits (a pthread key destructor), its block is folded into block 0, which
//! holds the statistics of every thread that has ended, zeroed, and its slot freed for the
//! next new thread. So any number of threads one after another are counted exactly, and
//! `MAX_THREADS` bounds only the threads alive at once. Calls from threads beyond that are
//! forwarded and only counted in one shared atomic (`unrecorded_calls`). Pages of the
//! mapping are committed only when first written, so the untouched part of a block costs
//! nothing; a forked child gets a zeroed mapping back with one `madvise`.
//!
//! A block also says what its thread is doing (`in_call`: the outermost call's hook and
//! start, which is the nesting guard too) and keeps the thread's recent blocking calls in
//! a ring (`ring.rs`), so that other threads (the timeline's snapshot, a watchdog) can
//! read both without the hot path doing anything more.

use crate::clock;
use crate::effect::Effect;
use crate::forklock::SpinLock;
use crate::hooks::{CUresult, Hook, HOOK_COUNT};
use crate::ring::{wrapped, Ring};
use crate::switch;
use crate::tls::{self, Local};
use gpuspy_format::{hist, Direction, HostKind, SyncCause};
use std::sync::atomic::{
    compiler_fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*,
};

/// Threads recorded at once.
pub const MAX_THREADS: usize = 2048;
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

/// The outermost intercepted call a thread is in: written by the thread, read by any.
#[repr(C)]
pub struct InCall {
    /// The call's start in ticks of the active clock; 0 when the thread is in no call
    /// (neither clock reads 0 once the machine has booted).
    pub since: AtomicU64,
    /// Its `Hook` id, valid while `since` is not 0.
    pub hook: AtomicU64,
}

/// One thread's statistics. Page-aligned, so that a freed block is zeroed by one `madvise`.
#[repr(C, align(4096))]
pub struct ThreadStats {
    pub in_call: InCall,
    pub apis: [ApiCell; HOOK_COUNT],
    pub syncs: [Series; SYNC_CAUSES],
    pub copies: [[CopyCell; HOST_KINDS]; DIRECTIONS],
    pub events: Ring,
}

/// Block 0 holds the exited threads' statistics; slots 1..=MAX_THREADS are live threads'.
const BLOCKS: usize = MAX_THREADS + 1;
const BLOCK_BYTES: usize = std::mem::size_of::<ThreadStats>();
const ARENA_BYTES: usize = BLOCKS * BLOCK_BYTES;

static ARENA: AtomicPtr<ThreadStats> = AtomicPtr::new(std::ptr::null_mut());

/// The block of gpuspy's own threads: outside the arena, so never in a dump. Zero pages in
/// `.bss` until one of them makes a (nested, counted-only) call.
// SAFETY: all-zero bytes are valid atomics.
static DISCARD: ThreadStats = unsafe { std::mem::MaybeUninit::zeroed().assume_init() };

/// Keeps the calling thread (a gpuspy thread) out of the recording: it looks like a
/// thread forever inside an intercepted call, with a block no dump reads.
pub fn exclude_current_thread() {
    if let Some(l) = tls::local() {
        DISCARD.in_call.since.store(u64::MAX, Relaxed);
        l.slot.set(std::ptr::from_ref(&DISCARD).cast());
    }
}

/// Slots handed out fresh so far: blocks 1..=HIGH_WATER have been used.
static HIGH_WATER: AtomicUsize = AtomicUsize::new(0);
/// Whether slot i (index i - 1) belongs to a live thread.
#[allow(clippy::declare_interior_mutable_const)]
const FREE: AtomicBool = AtomicBool::new(false);
static IN_USE: [AtomicBool; MAX_THREADS] = [FREE; MAX_THREADS];
/// How many times slot i's block was retired (folded and zeroed): a reader that keeps
/// state about a block (the timeline's snapshot, the event rings' read positions) knows
/// from it that the block now belongs to another thread.
#[allow(clippy::declare_interior_mutable_const)]
const NEVER: AtomicU32 = AtomicU32::new(0);
static RETIRED: [AtomicU32; BLOCKS] = [NEVER; BLOCKS];
/// The Linux thread id of slot i's thread (index i - 1), set when the slot is claimed:
/// outside the blocks, so that their layout and the hot path stay as they are.
#[allow(clippy::declare_interior_mutable_const)]
const NO_TID: AtomicU32 = AtomicU32::new(0);
static TIDS: [AtomicU32; MAX_THREADS] = [NO_TID; MAX_THREADS];
static THREADS_SEEN: AtomicU32 = AtomicU32::new(0);
static UNRECORDED_CALLS: AtomicU64 = AtomicU64::new(0);
/// Held while a block is folded into block 0, and while a dump sums the blocks, so that a
/// dump sees each exited thread's calls exactly once. A fork child resets it whatever
/// thread of the parent held it.
static FOLDING: SpinLock<()> = SpinLock::new(());
/// The pthread key whose destructor retires an exiting thread's block (0: none yet).
static EXIT_KEY: AtomicU32 = AtomicU32::new(0);

/// Adds to a counter only this thread writes: a plain load and store, no lock.
#[inline(always)]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

/// Reserves the arena and the thread-exit key. Cold; returns false when the mapping cannot
/// be made.
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
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: key is writable; the destructor is a plain extern "C" fn. Without a key,
    // slots are simply never reused.
    if unsafe { libc::pthread_key_create(&mut key, Some(on_thread_exit)) } == 0 {
        // Stored plus one: 0 means "no key".
        EXIT_KEY.store(key + 1, Release);
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
    HIGH_WATER.store(0, Relaxed);
    IN_USE.iter().for_each(|u| u.store(false, Relaxed));
    THREADS_SEEN.store(0, Relaxed);
    FOLDING.reset_in_child();
    // Forked while gpuspy's thread held the calls: that thread is not in the child.
    CALLS_HELD.store(false, Release);
    [&HOLDS_GIVEN_UP, &HELD_CALLS, &HELD_NS]
        .iter()
        .for_each(|c| c.store(0, Relaxed));
    UNRECORDED_CALLS.store(0, Relaxed);
    ERRORS.iter().for_each(|e| {
        e.key.store(0, Relaxed);
        e.count.store(0, Relaxed);
    });
    if let Some(local) = tls::local() {
        local.slot.set(std::ptr::null());
    }
}

/// How many times block `index` has been retired; stable while `with_blocks` runs.
pub fn retired(index: usize) -> u32 {
    RETIRED.get(index).map_or(0, |r| r.load(Relaxed))
}

/// Runs `f` on the blocks in use, block 0 (exited threads) first, with no thread's block
/// being folded meanwhile.
pub fn with_blocks<R>(f: impl FnOnce(&[ThreadStats]) -> R) -> R {
    let arena = ARENA.load(Acquire);
    if arena.is_null() {
        return f(&[]);
    }
    let _folding = FOLDING.lock();
    let used = 1 + HIGH_WATER.load(Acquire).min(MAX_THREADS);
    // SAFETY: the first `used` blocks lie inside the mapping, which is never unmapped, and
    // all-zero bytes are valid atomics.
    f(unsafe { std::slice::from_raw_parts(arena, used) })
}

/// One live thread's outermost call in flight.
pub struct InFlight {
    /// The thread's block (what `nccl.rs` keys its per-thread operation by).
    pub block: *const ThreadStats,
    pub tid: u32,
    pub hook: usize,
    /// Start, in ticks of the active clock.
    pub since: u64,
}

/// The calls live threads are in now, read from their `in_call` words.
pub fn in_flight() -> Vec<InFlight> {
    with_blocks(|blocks| {
        blocks
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(slot, b)| {
                let since = b.in_call.since.load(Acquire);
                let hook = b.in_call.hook.load(Relaxed);
                // A call that ended (or a new one that began) while we read is not one.
                if since == 0 || b.in_call.since.load(Acquire) != since {
                    return None;
                }
                Some(InFlight {
                    block: b,
                    tid: TIDS.get(slot - 1).map_or(0, |t| t.load(Relaxed)),
                    hook: hook as usize,
                    since,
                })
            })
            .collect()
    })
}

/// Set while gpuspy's thread switches CUPTI's state (`with_calls_held`): a program thread
/// entering an intercepted call waits until it is clear.
static CALLS_HELD: AtomicBool = AtomicBool::new(false);
/// The longest a program's thread waits at a hold, whatever happens on gpuspy's thread: a
/// CUPTI thread that called the driver while a switch waited for it would otherwise
/// deadlock the two.
const HOLD_WAIT_NS: u64 = 5_000_000;

/// The hot path's slow branch, while calls are held: steps out of the call (so that the
/// holder does not wait for this thread), waits, and starts the call again; the new start.
#[cold]
#[inline(never)]
fn wait_while_held(block: &ThreadStats, source: clock::Source) -> u64 {
    let arrived = clock::monotonic_ns();
    let give_up = arrived + HOLD_WAIT_NS;
    HELD_CALLS.fetch_add(1, Relaxed);
    loop {
        block.in_call.since.store(0, Release);
        while CALLS_HELD.load(Acquire) && clock::monotonic_ns() < give_up {
            std::thread::yield_now();
        }
        let start = source.ticks();
        block.in_call.since.store(start, Release);
        compiler_fence(SeqCst);
        let now = clock::monotonic_ns();
        let held = CALLS_HELD.load(Relaxed);
        if !held || now >= give_up {
            HELD_NS.fetch_add(now - arrived, Relaxed);
            if held {
                CALLS_OUTWAITED.fetch_add(1, Relaxed);
            }
            return start;
        }
    }
}

/// Runs `f` (on gpuspy's thread) while no program thread is inside an intercepted call,
/// except calls that wait for the GPU (`Hook::waits`): CUPTI switched from another thread
/// while the program's threads were in the driver made them crash (a PyTorch backward
/// pass, bench/results/gpu-2026-12-03-cupti-hold). Threads that enter a call meanwhile
/// wait until `f` returns. None, without running `f`, when the calls in flight did not
/// end within `patience_ns`: the caller tries again later.
pub fn with_calls_held<R>(patience_ns: u64, f: impl FnOnce() -> R) -> Option<R> {
    CALLS_HELD.store(true, SeqCst);
    fence_every_thread();
    let give_up = clock::monotonic_ns() + patience_ns;
    while calls_in_flight() {
        if clock::monotonic_ns() >= give_up {
            CALLS_HELD.store(false, Release);
            HOLDS_GIVEN_UP.fetch_add(1, Relaxed);
            return None;
        }
        std::thread::yield_now();
    }
    let result = f();
    CALLS_HELD.store(false, Release);
    Some(result)
}

/// What the holds did, for the dump's note.
pub struct HoldCounts {
    /// Holds given up because calls in flight did not end in time.
    pub given_up: u64,
    /// The program's calls that waited at a hold.
    pub held: u64,
    /// How long they waited in all (ns).
    pub held_ns: u64,
    /// Those that went on after `HOLD_WAIT_NS` with the hold still set (gpuspy's thread
    /// descheduled mid-switch on a loaded machine): their calls may overlap the switch.
    pub outwaited: u64,
}

pub fn hold_counts() -> HoldCounts {
    HoldCounts {
        given_up: HOLDS_GIVEN_UP.load(Relaxed),
        held: HELD_CALLS.load(Relaxed),
        held_ns: HELD_NS.load(Relaxed),
        outwaited: CALLS_OUTWAITED.load(Relaxed),
    }
}
static HOLDS_GIVEN_UP: AtomicU64 = AtomicU64::new(0);
static HELD_CALLS: AtomicU64 = AtomicU64::new(0);
static HELD_NS: AtomicU64 = AtomicU64::new(0);
static CALLS_OUTWAITED: AtomicU64 = AtomicU64::new(0);

/// Whether a live thread is inside an intercepted call that `with_calls_held` waits for.
fn calls_in_flight() -> bool {
    with_blocks(|blocks| {
        blocks.iter().skip(1).any(|b| {
            b.in_call.since.load(Acquire) != 0
                && crate::hooks::ALL_HOOKS
                    .get(b.in_call.hook.load(Relaxed) as usize)
                    .is_some_and(|hook| !hook.waits())
        })
    })
}

/// A full memory barrier on every thread of the process (`membarrier`), so that a call
/// a thread began before `CALLS_HELD` was set shows in its `in_call`, and a call begun
/// after it sees the flag. Where the kernel lacks the command, a pause much longer than a
/// store takes to leave a core's store buffer.
fn fence_every_thread() {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: membarrier takes plain integer arguments.
    let membarrier =
        |cmd: libc::c_int| unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) } == 0;
    let registered = *REGISTERED
        .get_or_init(|| membarrier(libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED as libc::c_int));
    if !(registered && membarrier(libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED as libc::c_int)) {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

/// Threads that made at least one intercepted call, exited ones included.
pub fn threads_seen() -> u32 {
    THREADS_SEEN.load(Relaxed)
}

/// Calls from threads past `MAX_THREADS` alive at once, forwarded without a block.
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
    // A freed slot first (its pages are already zero), else a fresh one.
    let high = HIGH_WATER.load(Acquire).min(MAX_THREADS);
    let reused = IN_USE.iter().take(high).position(|in_use| {
        !in_use.load(Relaxed)
            && in_use
                .compare_exchange(false, true, Acquire, Relaxed)
                .is_ok()
    });
    let index = match reused {
        Some(i) => i,
        None => {
            let i = HIGH_WATER.fetch_add(1, AcqRel);
            let Some(in_use) = IN_USE.get(i) else {
                HIGH_WATER.store(MAX_THREADS, Relaxed);
                UNRECORDED_CALLS.fetch_add(1, Relaxed);
                return None;
            };
            in_use.store(true, Relaxed);
            i
        }
    };
    THREADS_SEEN.fetch_add(1, Relaxed);
    if let Some(tid) = TIDS.get(index) {
        // SAFETY: gettid has no preconditions.
        tid.store(unsafe { libc::gettid() } as u32, Relaxed);
    }
    // SAFETY: index < MAX_THREADS, so block index + 1 lies inside the mapping.
    let block = unsafe { &*arena.add(index + 1) };
    local.slot.set(std::ptr::from_ref(block).cast());
    if let Some(key) = EXIT_KEY.load(Acquire).checked_sub(1) {
        // SAFETY: a key we created; the value is only ever read back by on_thread_exit.
        unsafe { libc::pthread_setspecific(key, (index + 1) as *const libc::c_void) };
    }
    Some(block)
}

/// The pthread key destructor: the exiting thread's block goes into block 0 and its slot
/// is freed. Runs on the exiting thread, after its last call unless another key's
/// destructor calls the driver later, which then claims a slot again.
extern "C" fn on_thread_exit(value: *mut libc::c_void) {
    let slot = value as usize;
    let arena = ARENA.load(Acquire);
    let Some(local) = tls::local() else { return };
    if arena.is_null() || !(1..=MAX_THREADS).contains(&slot) {
        return;
    }
    // SAFETY: slot is within 1..=MAX_THREADS, inside the mapping.
    let block = unsafe { &*arena.add(slot) };
    // A forked child's reset left this thread without a block: the slot is not its own.
    if !std::ptr::eq(local.slot.get().cast(), block) {
        return;
    }
    local.slot.set(std::ptr::null());
    // Its blocking calls not yet read go to the timeline first (a lock taken before the
    // folding lock, never inside it).
    (crate::UPCALLS.thread_exit)(slot, block);
    let folding = FOLDING.lock();
    // SAFETY: block 0 lies inside the mapping.
    fold_into(unsafe { &*arena }, block);
    zero(block);
    if let Some(retired) = RETIRED.get(slot) {
        retired.fetch_add(1, Relaxed);
    }
    drop(folding);
    if let Some(in_use) = IN_USE.get(slot - 1) {
        in_use.store(false, Release);
    }
}

/// Which pages of a block were ever written (mincore): readers skip the others, so a
/// thread that made a few kinds of call costs a few pages to read.
pub struct Written {
    base: usize,
    resident: [u8; BLOCK_BYTES.div_ceil(Written::PAGE)],
}

impl Written {
    const PAGE: usize = 4096;

    pub fn of(block: &ThreadStats) -> Written {
        let mut w = Written {
            base: block as *const ThreadStats as usize,
            resident: [1u8; BLOCK_BYTES.div_ceil(Written::PAGE)],
        };
        // SAFETY: the block is page-aligned and BLOCK_BYTES long; the vector has one byte
        // per page. On failure every page counts as written.
        if unsafe {
            libc::mincore(
                w.base as *mut libc::c_void,
                BLOCK_BYTES,
                w.resident.as_mut_ptr(),
            )
        } != 0
        {
            w.resident.fill(1);
        }
        w
    }

    /// Whether any page under `value` was written.
    pub fn holds<T>(&self, value: &T) -> bool {
        let start = value as *const T as usize - self.base;
        let first = start / Self::PAGE;
        let last = (start + std::mem::size_of::<T>() - 1) / Self::PAGE;
        self.resident
            .get(first..=last)
            .is_none_or(|pages| pages.iter().any(|p| p & 1 != 0))
    }
}

/// Adds `from` into `into` (the counters; `in_call` is 0 and the event ring was read).
fn fold_into(into: &ThreadStats, from: &ThreadStats) {
    let written = Written::of(from);
    let add = |a: &AtomicU64, b: &AtomicU64| {
        let v = b.load(Relaxed);
        if v != 0 {
            a.store(a.load(Relaxed).saturating_add(v), Relaxed);
        }
    };
    let add_series = |a: &Series, b: &Series| {
        add(&a.total_ns, &b.total_ns);
        a.max_ns.fetch_max(b.max_ns.load(Relaxed), Relaxed);
        a.hist.iter().zip(&b.hist).for_each(|(x, y)| add(x, y));
    };
    for (a, b) in into.apis.iter().zip(&from.apis) {
        if written.holds(b) {
            add(&a.nested, &b.nested);
            add(&a.bytes, &b.bytes);
            add_series(&a.series, &b.series);
        }
    }
    for (a, b) in into.syncs.iter().zip(&from.syncs) {
        add_series(a, b);
    }
    for (a, b) in into
        .copies
        .iter()
        .flatten()
        .zip(from.copies.iter().flatten())
    {
        add(&a.calls, &b.calls);
        add(&a.bytes, &b.bytes);
    }
}

/// Zeroes a block: gives its pages back, so it reads as zero and costs no memory.
fn zero(block: &ThreadStats) {
    let p = block as *const ThreadStats as *mut libc::c_void;
    // SAFETY: the block is a page-aligned part of our private anonymous mapping.
    if unsafe { libc::madvise(p, BLOCK_BYTES, libc::MADV_DONTNEED) } != 0 {
        // Pages larger than 4 KiB: zero word by word.
        // SAFETY: the block is BLOCK_BYTES of AtomicU64 words, all valid when zero.
        let words = unsafe { std::slice::from_raw_parts(p as *const AtomicU64, BLOCK_BYTES / 8) };
        words.iter().for_each(|w| w.store(0, Relaxed));
    }
}

/// One intercepted call in flight. `block` is null when the call is not recorded
/// (recording off, TLS gone, or a nested call, which `begin` has already counted).
pub struct Span {
    block: *const ThreadStats,
    source: clock::Source,
    start: u64,
}

/// The hot path, before the real call: one TLS lookup, the nesting guard, one timestamp.
/// Wrappers call `begin`, then the real function exactly once, then `end`, so the
/// caller's arguments go straight to the driver without being copied into a closure.
#[inline(always)]
pub fn begin(hook: Hook) -> Span {
    const SKIP: Span = Span {
        block: std::ptr::null(),
        source: clock::Source::Monotonic,
        start: 0,
    };
    let Some(source) = switch::recording() else {
        return SKIP;
    };
    // Thread teardown (TLS gone): just forward.
    let Some(l) = tls::local() else {
        return SKIP;
    };
    // SAFETY: slot pointers come from claim_slot (into the never-unmapped arena) or are
    // DISCARD.
    let block = match unsafe { l.slot.get().cast::<ThreadStats>().as_ref() } {
        Some(block) => block,
        None => match claim_slot(l) {
            Some(block) => block,
            None => return SKIP,
        },
    };
    // SAFETY: only this thread writes the word, so this read races with no write; a plain
    // read (not an atomic load) lets the compiler fold it into the comparison.
    if unsafe { *block.in_call.since.as_ptr() } != 0 {
        // The driver calling its own exports: forwarded and counted, not timed.
        // SAFETY: Hook ids are < HOOK_COUNT by construction.
        bump(
            &unsafe { block.apis.get_unchecked(hook as usize) }.nested,
            1,
        );
        return SKIP;
    }
    let mut start = source.ticks();
    block.in_call.hook.store(hook as u64, Relaxed);
    block.in_call.since.store(start, Release);
    // Ordered after the store above by the compiler here, and by the CPU through the
    // closer's `membarrier` (an asymmetric fence: nothing more on the hot path).
    compiler_fence(SeqCst);
    if CALLS_HELD.load(Relaxed) {
        start = wait_while_held(block, source);
    }
    Span {
        block,
        source,
        start,
    }
}

/// The hot path, after the real call: the second timestamp, the histogram, the effect.
#[inline(always)]
pub fn end(span: Span, hook: Hook, effect: Effect, result: CUresult) {
    // SAFETY: a non-null block comes from begin, on this thread.
    let Some(block) = (unsafe { span.block.as_ref() }) else {
        return;
    };
    let end = span.source.ticks();
    let ns = clock::ticks_to_ns(end.saturating_sub(span.start), switch::ns_per_tick_q32());
    block.in_call.since.store(0, Relaxed);
    // SAFETY: Hook ids are < HOOK_COUNT by construction.
    let cell = unsafe { block.apis.get_unchecked(hook as usize) };
    cell.series.add(ns);
    if result == 0 {
        apply(block, cell, hook, &effect, span.start, end, ns);
    } else {
        record_error(hook, result);
    }
}

#[inline(always)]
fn apply(
    block: &ThreadStats,
    cell: &ApiCell,
    hook: Hook,
    effect: &Effect,
    start: u64,
    end: u64,
    ns: u64,
) {
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
    if let Some(kind) = effect.blocking_kind(ns) {
        block.events.push(kind, start, end);
    }
    effect.track_host_memory();
    effect.notify_gpu();
    if effect.picks_call_site(ns) {
        capture_call_site(hook, effect.sync_cause(), ns);
    }
}

/// Out of line and cold, so that the test before it stays two branches on the hot path.
#[cold]
#[inline(never)]
fn capture_call_site(hook: Hook, cause: Option<SyncCause>, ns: u64) {
    (crate::UPCALLS.call_site)(hook as usize, cause, ns);
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
        let slot = wrapped(&ERRORS, start + i);
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
