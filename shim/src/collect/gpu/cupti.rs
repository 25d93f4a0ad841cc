//! CUPTI activity collection through the V1 activity API (the only one on CUDA 13.0 /
//! driver 580; see shared/design/gpu-truth-facts.md).
//!
//! gpuspy never calls `cuptiSubscribe` (that would take CUPTI from torch.profiler). It
//! registers buffer callbacks, enables CONCURRENT_KERNEL (not KERNEL, which serialises
//! kernels), MEMCPY, MEMSET, OVERHEAD and the unified-memory counters (by default the
//! traced kinds and the counters in duty cycles, `super::sampling`), and flushes from its
//! own thread. By default it also detaches CUPTI between slots (`detach`), unless the
//! program has managed memory or uses CUDA graphs. The request callback runs on
//! application threads inside CUDA calls, so it only hands out a buffer from a fixed
//! pool; completion callbacks only queue the buffer (under the pool lock, under which
//! nothing calls CUPTI); the gpuspy thread parses. The lock is taken on a program thread
//! once per 512 KiB buffer (about 2,000 records) and is otherwise held only for a drain: a lock-free queue would save nothing measurable
//! (docs/design.md, "Sampled by default").
//!
//! The program's own CUPTI client comes first. The V1 callbacks are process-wide and a
//! later registration silently replaces ours, so the shim exports
//! `cuptiActivityRegisterCallbacks` and `cuptiFinalize`: when the program (torch.profiler's
//! Kineto, say) registers, gpuspy flushes its own buffers back to itself, steps aside for
//! the rest of the run and says so in the dump. A client that registered before gpuspy
//! started keeps CUPTI to itself. An earlier design that kept gpuspy's callbacks in place
//! and passed the client's buffers through hung PyTorch's first cuBLAS call under
//! torch.profiler on the H200 (bench/results/gpu-2026-11-29-truth-1).

use super::activity::{Aggregator, Record};
use super::cupti_places::{self, SONAMES};
use crate::resolve::lookup;
use gpuspy_format::timeline::HostEventKind;
use gpuspy_format::SyncCause;
use std::ffi::{c_char, c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering::*};
use std::sync::{Mutex, OnceLock};

type CuptiResult = u32;
type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);

const KIND_MEMCPY: u32 = 1;
const KIND_MEMSET: u32 = 2;
const KIND_KERNEL: u32 = 3;
const KIND_CONCURRENT_KERNEL: u32 = 10;
const KIND_OVERHEAD: u32 = 17;
const KIND_UNIFIED_MEMORY_COUNTER: u32 = 25;
/// The kinds whose records cost the program time per launch or copy: on in duty cycles
/// by default (`super::sampling`), for the whole run under `GPUSPY_CUPTI=full`.
const TRACED_KINDS: [u32; 3] = [KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET];
const FLUSH_FORCED: u32 = 1;

/// Many small buffers rather than a few large ones: with a deep launch queue (1.7 s of bf16
/// matmuls queued on the H200) buffers stay out with CUPTI far longer than a tick, as if
/// each flush set the current one aside until the kernels recorded in it have run.
/// Eight 4 MiB buffers ran out there and lost records (bench/results/gpu-2026-11-29-diagnose-4).
/// 512 KiB holds about 2,000 kernel records; at most 64 MiB of address space.
const BUFFER_BYTES: usize = 512 << 10;
const MAX_BUFFERS: usize = 128;

/// The CUPTI entry points gpuspy calls, resolved in the library itself.
struct Api {
    register_callbacks: unsafe extern "C" fn(RequestFn, CompleteFn) -> CuptiResult,
    enable: unsafe extern "C" fn(u32) -> CuptiResult,
    disable: unsafe extern "C" fn(u32) -> CuptiResult,
    configure_unified_memory: unsafe extern "C" fn(*mut UmConfig, u32) -> CuptiResult,
    flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    dropped_records: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    finalize: unsafe extern "C" fn() -> CuptiResult,
}

#[repr(C)]
struct UmConfig {
    scope: u32,
    kind: u32,
    device_id: u32,
    enable: u32,
}

static API: OnceLock<Api> = OnceLock::new();
/// The libcupti gpuspy uses.
static LIBRARY: AtomicPtr<c_void> = AtomicPtr::new(null_mut());
/// Our callbacks are the ones CUPTI holds.
static REGISTERED: AtomicBool = AtomicBool::new(false);
/// gpuspy detached CUPTI after a recording slot and attaches it again for the next one.
static DETACHED: AtomicBool = AtomicBool::new(false);
/// The program uses CUDA graphs: gpuspy never detaches CUPTI again (`keep_attached`).
static KEEP_ATTACHED: AtomicBool = AtomicBool::new(false);
/// `GPUSPY_CUPTI=detach`: the sampled mode may detach CUPTI between slots.
static DETACH_BETWEEN_SLOTS: AtomicBool = AtomicBool::new(false);
/// Detaches and attaches again so far, and the time they took in all.
static DETACHES: AtomicU64 = AtomicU64::new(0);
static ATTACHES: AtomicU64 = AtomicU64::new(0);
static ATTACH_NS: AtomicU64 = AtomicU64::new(0);
static DETACH_NS: AtomicU64 = AtomicU64::new(0);
/// Switches of the traced kinds on and off so far, and the time they took in all.
static KINDS_ON: AtomicU64 = AtomicU64::new(0);
static KINDS_OFF: AtomicU64 = AtomicU64::new(0);
static KINDS_ON_NS: AtomicU64 = AtomicU64::new(0);
static KINDS_OFF_NS: AtomicU64 = AtomicU64::new(0);
/// Switches of the unified-memory counters so far, and the longest: one took 2.0 s on the
/// H200, during which gpuspy's thread switches nothing else.
static UM_SWITCHES: AtomicU64 = AtomicU64::new(0);
static UM_SWITCH_MAX_NS: AtomicU64 = AtomicU64::new(0);
/// The program registered its own CUPTI callbacks (before or after gpuspy started).
static PROGRAM_CLIENT: AtomicBool = AtomicBool::new(false);
/// Activity kinds (those below 64) that the program itself enabled: stepping aside leaves
/// them on.
static PROGRAM_KINDS: AtomicU64 = AtomicU64::new(0);
/// When gpuspy stepped aside for the program's client (CUPTI timestamp), 0 if it did not.
static YIELDED_AT: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Our buffers: all of them (to recognise ours in the completion callback) and the free
/// ones. Pre-sized, so the callbacks never reallocate.
struct Pool {
    owned: Vec<usize>,
    free: Vec<usize>,
    /// Completed buffers waiting for the gpuspy thread: (address, valid bytes).
    filled: Vec<(usize, usize)>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    owned: Vec::new(),
    free: Vec::new(),
    filled: Vec::new(),
});

/// The running reduction, fed by the gpuspy thread.
pub static AGGREGATOR: Mutex<Option<Aggregator>> = Mutex::new(None);

/// Starts collection; returns a note for the dump saying what was used or why not.
/// `origin_unix_ns`: the process start, the origin of the timeline's windows.
pub fn start(
    sampled: bool,
    detach_between_slots: bool,
    origin_unix_ns: u64,
) -> Result<String, String> {
    DETACH_BETWEEN_SLOTS.store(detach_between_slots, Relaxed);
    // The program's registration waits for this to finish (see `step_aside`).
    let _no_program_registration_meanwhile = STARTING.lock();
    if PROGRAM_CLIENT.load(Acquire) {
        return Err(
            "the program's own CUPTI client (torch.profiler or similar) holds CUPTI".into(),
        );
    }
    let (handle, soname) = find_library()?;
    LIBRARY.store(handle, Release);
    let symbol = |name: &CStr| {
        let f = lookup(handle, name);
        (!f.is_null())
            .then_some(f)
            .ok_or_else(|| format!("{soname} has no {}", name.to_string_lossy()))
    };
    let version_fn = symbol(c"cuptiGetVersion")?;
    let mut version = 0u32;
    // SAFETY: cuptiGetVersion(uint32_t*).
    unsafe {
        std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut u32) -> CuptiResult>(
            version_fn,
        )(&mut version)
    };
    if !layout_known(version) {
        return Err(format!(
            "CUPTI version {version} ({soname}) has record layouts gpuspy does not know"
        ));
    }
    // SAFETY: each symbol is the CUPTI function of that name, whose C signature is the
    // field's type (cupti_activity.h); the field types are the transmutes' annotations.
    #[allow(clippy::missing_transmute_annotations)]
    let api = unsafe {
        Api {
            register_callbacks: std::mem::transmute(symbol(c"cuptiActivityRegisterCallbacks")?),
            enable: std::mem::transmute(symbol(c"cuptiActivityEnable")?),
            disable: std::mem::transmute(symbol(c"cuptiActivityDisable")?),
            configure_unified_memory: std::mem::transmute(symbol(
                c"cuptiActivityConfigureUnifiedMemoryCounter",
            )?),
            flush_all: std::mem::transmute(symbol(c"cuptiActivityFlushAll")?),
            next_record: std::mem::transmute(symbol(c"cuptiActivityGetNextRecord")?),
            dropped_records: std::mem::transmute(symbol(c"cuptiActivityGetNumDroppedRecords")?),
            timestamp: std::mem::transmute(symbol(c"cuptiGetTimestamp")?),
            finalize: std::mem::transmute(symbol(c"cuptiFinalize")?),
        }
    };
    if let Ok(mut pool) = POOL.lock() {
        pool.owned.reserve_exact(MAX_BUFFERS);
        pool.free.reserve_exact(MAX_BUFFERS);
        pool.filled.reserve_exact(MAX_BUFFERS);
    }
    let api = API.get_or_init(|| api);
    let since = crate::clock::unix_ns();
    let to_unix = cupti_to_unix(api);
    // Read before the aggregator's lock: a dump takes the timeline's lock, then this one.
    let launches = crate::timeline::launches_so_far();
    if let Ok(mut agg) = AGGREGATOR.lock() {
        *agg = Some(Aggregator::new(
            origin_unix_ns,
            since,
            to_unix,
            sampled,
            launches,
        ));
    }
    // SAFETY: our callbacks have the signatures CUPTI documents.
    let r = unsafe { (api.register_callbacks)(on_buffer_request, on_buffer_complete) };
    if r != 0 {
        return Err(format!("cuptiActivityRegisterCallbacks failed ({r})"));
    }
    REGISTERED.store(true, Release);
    let mut note = format!("{soname}, CUPTI {version}");
    if sampled {
        note.push_str("; activity sampled in duty cycles");
    }
    let um = configure_unified_memory(api);
    if um != 0 {
        note.push_str(&format!("; unified-memory counters unavailable ({um})"));
    }
    for kind in TRACED_KINDS.into_iter().chain([KIND_OVERHEAD]) {
        // SAFETY: plain CUPTI call.
        let r = unsafe { (api.enable)(kind) };
        if r != 0 {
            note.push_str(&format!("; activity kind {kind} refused ({r})"));
        }
    }
    // Sampled, the counters wait for managed memory: they cost the program per fault,
    // and most programs have none.
    if !sampled {
        switch_unified_memory(true);
    }
    Ok(note)
}

/// Unified-memory counters were configured at start (or, after a detach, since).
static UM_CONFIGURED: AtomicBool = AtomicBool::new(false);

/// Configures the unified-memory counters: after cuInit and before their kind is enabled.
/// Platforms without them (MPS, some virtual GPUs) refuse; CUPTI's status is returned.
fn configure_unified_memory(api: &Api) -> CuptiResult {
    let mut counters: Vec<UmConfig> = (1..=5)
        .map(|kind| UmConfig {
            scope: 1,
            kind,
            device_id: 0,
            enable: 1,
        })
        .collect();
    // SAFETY: a valid array of `counters.len()` configs.
    let r = unsafe { (api.configure_unified_memory)(counters.as_mut_ptr(), counters.len() as u32) };
    UM_CONFIGURED.store(r == 0, Release);
    r
}

/// Detaches CUPTI (`cuptiFinalize`) after a slot of the sampled mode, once its records are
/// read, so that the program runs without CUPTI until the next slot. Once a traced kind
/// has been on, CUPTI costs every launch about 0.7 µs even with every kind off again,
/// until it is finalized: on the H200 that was most of the sampled mode's +9.8 % on a
/// launch-bound loop (bench/results/gpu-2026-11-30-run8-probe). Attaching again for
/// a slot takes about 10 ms and detaching 2-3 ms, on gpuspy's thread.
pub fn detach() {
    if let Some(took) = detach_now() {
        DETACHES.fetch_add(1, Relaxed);
        DETACH_NS.fetch_add(took, Relaxed);
    }
}

/// Detaches CUPTI if gpuspy holds it and may; how long that took, None if it did not.
fn detach_now() -> Option<u64> {
    let api = API.get()?;
    let _no_program_registration_meanwhile = STARTING.lock();
    let _one_at_a_time = COLLECTING.lock().ok()?;
    if !REGISTERED.load(Acquire)
        || KEEP_ATTACHED.load(SeqCst)
        || !DETACH_BETWEEN_SLOTS.load(Relaxed)
    {
        return None;
    }
    let before = crate::clock::monotonic_ns();
    if !finalize(api) {
        return None;
    }
    REGISTERED.store(false, Release);
    DETACHED.store(true, Release);
    Some(crate::clock::monotonic_ns() - before)
}

/// Flushes every buffer back to us, reads them, then finalizes CUPTI; true when it was.
/// Read first: any CUPTI call, reading a record included, attaches it again. Under
/// COLLECTING, from a thread outside any CUPTI callback.
fn finalize(api: &Api) -> bool {
    // SAFETY: plain CUPTI call from a thread outside any CUPTI callback.
    unsafe { (api.flush_all)(FLUSH_FORCED) };
    drain(api, |_| {});
    // SAFETY: as above; our buffers are all back, and no other thread of ours calls CUPTI
    // while COLLECTING is held.
    let finalized = unsafe { (api.finalize)() } == 0;
    if finalized {
        UM_CONFIGURED.store(false, Release);
    }
    finalized
}

/// Restarts tried (`restart`), the most, and those that detached CUPTI: where attaching
/// anew does not bring the records back, they stay missing and the report says so
/// (`gpu_records_missing`).
static RESTARTS_TRIED: AtomicU64 = AtomicU64::new(0);
const MAX_RESTARTS: u64 = 2;
static RESTARTS: AtomicU64 = AtomicU64::new(0);
/// The attach after a restart is left out of the switches' mean cost (`switch_cost_ns`),
/// as the restart's detach is: the first detach after a long attached stretch took 47 ms
/// on the H200 against 2-3 ms between slots, and would have kept the cycle attached.
static ATTACH_UNCOUNTED: AtomicBool = AtomicBool::new(false);
/// A sync that returned this long ago shows that the kernels launched before it ran: their
/// records would have come by now, as completed buffers are read every 100 ms.
const RAN_NS: u64 = 200_000_000;
/// The host's event history is read from here on (`records_stopped`), and the latest end
/// of a sync found in it so far.
static SYNCS_READ_TO: AtomicU64 = AtomicU64::new(0);
static LAST_SYNC_END: AtomicU64 = AtomicU64::new(0);

/// Whether CUPTI stopped sending kernel records: silent periods
/// (`Aggregator::records_stopped_since`) whose kernels ran, as a sync that returned after
/// the last one closed shows (an explicit one, a synchronous copy or a free). Without such
/// a sync, records merely late look the same. The program may have queued work again
/// since: the restart's detach then waits for it (docs/design.md, "Kernel records that
/// stop"). On gpuspy's thread only.
pub fn records_stopped() -> bool {
    if RESTARTS_TRIED.load(Relaxed) >= MAX_RESTARTS || !may_detach_between_slots() {
        return false;
    }
    let mut since = None;
    with_aggregator(|agg| since = agg.records_stopped_since());
    let Some(closed) = since else { return false };
    // Only the history not read before: at each slot end, a few tens of ms.
    let to = crate::clock::unix_ns().saturating_sub(RAN_NS);
    let from = SYNCS_READ_TO.load(Relaxed).max(closed);
    if from < to {
        let mut events = Vec::new();
        crate::events::between(from, to, &mut events);
        let last = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    HostEventKind::Sync(
                        SyncCause::Explicit | SyncCause::SyncCopy | SyncCause::Free
                    )
                ) && e.end_unix_ns <= to
            })
            .map(|e| e.end_unix_ns)
            .max();
        if let Some(end) = last {
            LAST_SYNC_END.fetch_max(end, Relaxed);
        }
        SYNCS_READ_TO.store(to, Relaxed);
    }
    LAST_SYNC_END.load(Relaxed) > closed
}

/// Detaches CUPTI because its kernel records stopped; the next slot attaches it anew. No
/// run detached between slots showed the state after attaching again. Neither switch
/// counts in the cycle's mean cost, and the periods so far no longer count, whatever came
/// of it.
pub fn restart() {
    let at = crate::clock::unix_ns();
    RESTARTS_TRIED.fetch_add(1, Relaxed);
    if detach_now().is_some() {
        RESTARTS.fetch_add(1, Relaxed);
        ATTACH_UNCOUNTED.store(true, Relaxed);
    }
    with_aggregator(|agg| agg.records_restarted(at));
}

/// Called before the program captures, instantiates or launches a CUDA graph: `detach`
/// does nothing from then on. On the H200 a PyTorch CUDA graph captured while CUPTI was
/// attached failed at its first launch after a detach ("unspecified launch failure", and
/// a segfault in the long run: bench/results/gpu-2026-11-30-run8-detach). Attaching
/// again later is safe: that is what a profiler started mid-run does.
pub fn keep_attached() {
    if !KEEP_ATTACHED.load(Relaxed) && !KEEP_ATTACHED.swap(true, SeqCst) {
        // A detach under way ends before the graph call goes on; a later one sees the flag.
        drop(STARTING.lock());
    }
}

/// Whether CUPTI may still be detached: not once the program has used CUDA graphs.
pub fn may_detach() -> bool {
    !KEEP_ATTACHED.load(Relaxed)
}

/// Whether `detach` and `restart` may detach CUPTI from gpuspy's thread: only under
/// `GPUSPY_CUPTI=detach`. `cuptiFinalize` there races with the CUDA calls of the program's
/// other threads: PyTorch training loops died of SIGSEGV in their backward pass on the
/// H200, 1 run in 3, never with CUPTI attached all run (bench/results/gpu-2026-12-02-reallib-2;
/// Kineto met the same race, pytorch/kineto#686).
pub fn may_detach_between_slots() -> bool {
    DETACH_BETWEEN_SLOTS.load(Relaxed) && may_detach()
}

/// Attaches CUPTI again after `detach`, as `start` left it: our callbacks, the OVERHEAD
/// kind, and the unified-memory counters configured when `unified_memory`. Nothing once
/// the program has its own client. True when gpuspy holds CUPTI after it.
fn attach(api: &Api, unified_memory: bool) -> bool {
    // Checked before the lock too: `start` switches the counters on under it.
    if !DETACHED.load(Acquire) {
        return REGISTERED.load(Acquire);
    }
    let _no_program_registration_meanwhile = STARTING.lock();
    if !DETACHED.load(Acquire) || PROGRAM_CLIENT.load(Acquire) {
        return REGISTERED.load(Acquire);
    }
    let before = crate::clock::monotonic_ns();
    // SAFETY: our callbacks have the signatures CUPTI documents.
    if unsafe { (api.register_callbacks)(on_buffer_request, on_buffer_complete) } != 0 {
        return false;
    }
    if unified_memory {
        configure_unified_memory(api);
    }
    // SAFETY: plain CUPTI call.
    unsafe { (api.enable)(KIND_OVERHEAD) };
    // A new CUPTI session: its timestamps are mapped again.
    let to_unix = cupti_to_unix(api);
    with_aggregator(|agg| agg.set_to_unix(to_unix));
    DETACHED.store(false, Release);
    REGISTERED.store(true, Release);
    if !ATTACH_UNCOUNTED.swap(false, Relaxed) {
        ATTACH_NS.fetch_add(crate::clock::monotonic_ns() - before, Relaxed);
        ATTACHES.fetch_add(1, Relaxed);
    }
    true
}

/// Switches the unified-memory counters on or off, if CUPTI accepted their configuration
/// and gpuspy still holds CUPTI. On for good at start under `GPUSPY_CUPTI=full`; by
/// default in their own duty cycle once the program has allocated managed memory
/// (enabled late they show CPU faults and migrations, not GPU fault groups:
/// bench/results/gpu-2026-11-30-sampling-1).
pub fn switch_unified_memory(on: bool) {
    let Some(api) = API.get() else { return };
    if on && !attach(api, true) {
        return;
    }
    let Ok(_no_step_aside_meanwhile) = COLLECTING.lock() else {
        return;
    };
    if !UM_CONFIGURED.load(Acquire) || !REGISTERED.load(Acquire) {
        return;
    }
    // A switch takes 14-22 ms on the H200, and the counters start or stop somewhere in it:
    // its middle is the switch's time, wrong by at most half of it.
    let before = crate::clock::unix_ns();
    // SAFETY: plain CUPTI calls from a thread outside any CUPTI callback.
    let r = unsafe {
        if on {
            (api.enable)(KIND_UNIFIED_MEMORY_COUNTER)
        } else {
            (api.disable)(KIND_UNIFIED_MEMORY_COUNTER)
        }
    };
    let after = crate::clock::unix_ns();
    let at = before / 2 + after / 2;
    UM_SWITCHES.fetch_add(1, Relaxed);
    UM_SWITCH_MAX_NS.fetch_max(after.saturating_sub(before), Relaxed);
    if r == 0 {
        with_aggregator(|agg| agg.unified_memory_switched(on, at));
    }
}

/// Switches the traced kinds on or off (the duty cycle), and tells the aggregator, which
/// counts time as observed only while they are on; whether it did. Nothing once gpuspy
/// has stepped aside (the program's own client manages those kinds then), nor while the
/// program's calls in flight do not end within `HOLD_PATIENCE_NS`: the switch is made with
/// the program's calls held (`record::with_calls_held`).
pub fn switch_traced_kinds(on: bool) -> bool {
    let Some(api) = API.get() else { return false };
    if on && !attach(api, false) {
        return false;
    }
    let Ok(_no_step_aside_meanwhile) = COLLECTING.lock() else {
        return false;
    };
    if !REGISTERED.load(Acquire) {
        return false;
    }
    // The host's launches counted, and the period's end timed, with the program's calls
    // held: a launch held back at a switch off comes after it, unrecorded, and must not be
    // counted in the period; one held back at a switch on comes after it, recorded.
    let started = crate::clock::unix_ns();
    let Some((at, launches)) = crate::record::with_calls_held(HOLD_PATIENCE_NS, || {
        let launches_before = on.then(crate::timeline::launches_so_far);
        let before = crate::clock::unix_ns();
        for kind in TRACED_KINDS {
            // SAFETY: plain CUPTI calls from a thread outside any CUPTI callback.
            unsafe {
                if on {
                    (api.enable)(kind);
                } else {
                    (api.disable)(kind);
                }
            }
        }
        let after = crate::clock::unix_ns();
        match launches_before {
            Some(launches) => (before, launches),
            None => (after, crate::timeline::launches_so_far()),
        }
    }) else {
        return false;
    };
    let (switches, took) = if on {
        (&KINDS_ON, &KINDS_ON_NS)
    } else {
        (&KINDS_OFF, &KINDS_OFF_NS)
    };
    switches.fetch_add(1, Relaxed);
    took.fetch_add(crate::clock::unix_ns().saturating_sub(started), Relaxed);
    with_aggregator(|agg| {
        if on {
            agg.period_on(at, launches)
        } else {
            agg.period_off(at, launches)
        }
    });
    true
}

/// How long a switch of the traced kinds waits for the program's calls in flight (a launch
/// takes microseconds; a blocking copy can wait for the whole queue) before it is tried
/// again later. Program threads entering a call meanwhile wait as long.
const HOLD_PATIENCE_NS: u64 = 2_000_000;

/// A slot of the duty cycle begins at `at` with the kinds left on (the last was within
/// budget): the recording period goes on, only the slot's count starts again.
pub fn next_slot(at: u64) {
    let launches = crate::timeline::launches_so_far();
    with_aggregator(|agg| agg.next_slot(at, launches));
}

/// Kernel records awaited: of the launches made while recording, those whose record has
/// not come (kernels still queued or running).
pub fn awaited_records() -> u64 {
    let launches = crate::timeline::launches_so_far();
    let mut awaited = 0;
    with_aggregator(|agg| awaited = agg.awaited_records(launches));
    awaited
}

/// What the duty cycle's slot now on (or last) cost, counted in records, and the host's
/// kernel launches since it began (`Aggregator::this_slot`).
pub fn this_slot() -> (u64, u64) {
    let launches = crate::timeline::launches_so_far();
    let mut counts = (0, 0);
    with_aggregator(|agg| counts = agg.this_slot(launches));
    counts
}

/// 12.x (API versions 18 to 28) and 13.x keep the record prefixes gpuspy reads.
fn layout_known(version: u32) -> bool {
    (18..=28).contains(&version) || (130_000..140_000).contains(&version)
}

/// The libcupti the process already has (using another beside it would give the process
/// two CUPTIs), else `GPUSPY_CUPTI_PATH`, else the first found where the process's
/// framework could load one from (`cupti_places`): beside its libcudart, its Python
/// environment's CUDA wheels, the toolkits, the loader's search path. Found nowhere, the
/// note names the places searched.
fn find_library() -> Result<(*mut c_void, String), String> {
    for soname in SONAMES {
        let Ok(c_soname) = std::ffi::CString::new(soname) else {
            continue;
        };
        // SAFETY: a valid C string; RTLD_NOLOAD only returns an already loaded object.
        let h = unsafe { libc::dlopen(c_soname.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            return Ok((h, soname.to_string()));
        }
    }
    if let Some(path) = &crate::config::load().cupti_path {
        return open_path(path).ok_or(format!(
            "GPUSPY_CUPTI_PATH={} could not be loaded",
            path.display()
        ));
    }
    let env = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    let process = cupti_places::Process {
        loaded: loaded_objects(),
        virtual_env: env("VIRTUAL_ENV"),
        conda_prefix: env("CONDA_PREFIX"),
        cuda_home: env("CUDA_HOME"),
        cuda_path: env("CUDA_PATH"),
        exe: std::fs::read_link("/proc/self/exe").ok(),
    };
    let driver_major = super::cuda_driver_version().map(|v| v / 1000);
    let places = cupti_places::places(&process);
    let mut searched = Vec::new();
    for place in &places {
        if *place == cupti_places::Place::Loader {
            let sonames = cupti_places::ranked(SONAMES.map(String::from), driver_major);
            if let Some(found) = sonames
                .iter()
                .find_map(|s| open_path(std::path::Path::new(s)))
            {
                return Ok(found);
            }
            continue;
        }
        for folder in cupti_places::folders(place) {
            if searched.contains(&folder) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&folder) else {
                searched.push(folder);
                continue;
            };
            let names = entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok());
            let found = cupti_places::ranked(names, driver_major)
                .iter()
                .find_map(|name| open_path(&folder.join(name)));
            if let Some(found) = found {
                return Ok(found);
            }
            searched.push(folder);
        }
    }
    let looked: Vec<String> = places.iter().map(cupti_places::describe).collect();
    Err(format!(
        "no libcupti loaded, nor found in: {} (set GPUSPY_CUPTI_PATH)",
        looked.join(", ")
    ))
}

/// dlopen's search for a bare soname, or the file at a path.
fn open_path(path: &std::path::Path) -> Option<(*mut c_void, String)> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: a valid C string path.
    let h = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    (!h.is_null()).then(|| (h, path.display().to_string()))
}

/// The paths of the process's loaded objects, in load order.
fn loaded_objects() -> Vec<std::path::PathBuf> {
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and our own data pointer.
        let (info, found) = unsafe { (&*info, &mut *(data as *mut Vec<std::path::PathBuf>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a C string.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                let name = std::ffi::OsStr::from_bytes(name.to_bytes());
                found.push(std::path::PathBuf::from(name));
            }
        }
        0
    }
    let mut found: Vec<std::path::PathBuf> = Vec::new();
    // SAFETY: the callback only reads the entries and writes into `found`.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut found as *mut Vec<_>).cast()) };
    found
}

/// Unix ns minus CUPTI's timestamp: a `CLOCK_REALTIME` read between two CUPTI reads, the
/// tightest of a few tries. The first `cuptiGetTimestamp` of a process is slow (about
/// 0.7 ms on the H200: an unguarded pair put every record 0.7 ms early, so no GPU idle gap
/// opened when the sync before it returned).
fn cupti_to_unix(api: &Api) -> i64 {
    now(api);
    (0..16)
        .map(|_| {
            let before = now(api);
            let unix = crate::clock::unix_ns();
            let after = now(api);
            (
                after.wrapping_sub(before),
                unix as i64 - (before / 2 + after / 2) as i64,
            )
        })
        .min_by_key(|&(spread, _)| spread)
        .map_or(0, |(_, offset)| offset)
}

fn now(api: &Api) -> u64 {
    let mut t = 0u64;
    // SAFETY: cuptiGetTimestamp(uint64_t*).
    unsafe { (api.timestamp)(&mut t) };
    t
}

fn with_aggregator(f: impl FnOnce(&mut Aggregator)) {
    if let Ok(mut guard) = AGGREGATOR.lock() {
        if let Some(agg) = guard.as_mut() {
            f(agg);
        }
    }
}

/// Asks CUPTI for completed buffers (all buffers when `forced`, at exit) and reduces them.
/// Intervals older than `settle_margin_ns` are settled: records of still-running work,
/// held back in incomplete buffers, rarely arrive later than that.
pub fn collect(forced: bool, settle_margin_ns: u64) {
    let Some(api) = API.get() else { return };
    let Ok(_one_at_a_time) = COLLECTING.lock() else {
        return;
    };
    let now = crate::clock::unix_ns();
    // Outside the aggregator's lock, as in `switch_traced_kinds`.
    let launches = crate::timeline::launches_so_far();
    if REGISTERED.load(Acquire) {
        // SAFETY: plain CUPTI call, from a thread that is not in a CUPTI callback.
        unsafe { (api.flush_all)(if forced { FLUSH_FORCED } else { 0 }) };
    }
    let yielded = YIELDED_AT.load(Relaxed);
    // The last flush, or gpuspy stepped aside: recording ended then (the launches counted
    // now, a little late for a step aside).
    let ended = (forced || yielded > 0).then_some(if yielded > 0 { yielded } else { now });
    drain(api, |agg| {
        if let Some(at) = ended {
            agg.period_off(at, launches);
        }
        let horizon = if forced {
            u64::MAX
        } else {
            agg.held_horizon(now.saturating_sub(settle_margin_ns), now, launches)
        };
        agg.settle(horizon, now, &mut crate::events::between);
    });
}

/// Reads the buffers CUPTI completed into the aggregator, then `then` with it; the
/// buffers go back to the pool. Under COLLECTING.
fn drain(api: &Api, then: impl FnOnce(&mut Aggregator)) {
    // At most MAX_BUFFERS entries: only our own buffers are queued.
    let filled: Vec<(usize, usize)> = match POOL.lock() {
        Ok(mut pool) => pool.filled.drain(..).collect(),
        Err(_) => return,
    };
    with_aggregator(|agg| {
        for &(buffer, valid) in &filled {
            // SAFETY: a buffer of ours that CUPTI completed with `valid` bytes.
            unsafe { reduce(api, agg, buffer as *mut u8, valid) };
        }
        then(agg);
    });
    if let Ok(mut pool) = POOL.lock() {
        pool.free.extend(filled.iter().map(|&(b, _)| b));
    }
}

static COLLECTING: Mutex<()> = Mutex::new(());

/// Whether the program registered its own CUPTI activity callbacks.
pub fn program_client() -> bool {
    PROGRAM_CLIENT.load(Acquire)
}

/// What the dump reports about CUPTI besides the per-device activity: records dropped,
/// buffers refused, and when gpuspy stepped aside for the program's own client.
pub fn counters() -> (u64, u64, Option<u64>) {
    let yielded = YIELDED_AT.load(Relaxed);
    (
        DROPPED.load(Relaxed),
        REFUSED.load(Relaxed),
        (yielded > 0).then_some(yielded),
    )
}

/// The mean time of `total` over `n` events, in ns; 0 before the first.
fn mean_ns(total: &AtomicU64, n: &AtomicU64) -> u64 {
    total.load(Relaxed) / n.load(Relaxed).max(1)
}

/// What attaching and detaching are taken to cost until this process has done each once:
/// the H200's (attach 8-11 ms, detach ~2 ms: bench/results/gpu-2026-11-30-run8-detach).
/// Counted as free instead, the first slot of a 1.4 s launch-bound loop got a short cycle,
/// and CUPTI attached again within the loop, the launching thread stalled ~7 ms
/// (bench/results/gpu-2026-11-30-run9-probe).
const ASSUMED_ATTACH_NS: u64 = 10_000_000;
const ASSUMED_DETACH_NS: u64 = 2_000_000;

/// What detaching CUPTI after a slot and attaching it again for the next take on average,
/// in ns: each part as measured so far, or as assumed before its first time.
pub fn switch_cost_ns() -> u64 {
    let mean_or = |total, n: &AtomicU64, assumed| match n.load(Relaxed) {
        0 => assumed,
        _ => mean_ns(total, n),
    };
    mean_or(&DETACH_NS, &DETACHES, ASSUMED_DETACH_NS)
        + mean_or(&ATTACH_NS, &ATTACHES, ASSUMED_ATTACH_NS)
}

/// For the dump's note: how often gpuspy switched the traced kinds off (between slots),
/// detached CUPTI and switched the unified-memory counters, and what the switches took;
/// None when it did none of these. Each is time gpuspy's thread spent in CUPTI, which
/// may hold the program's calls too.
pub fn switch_summary() -> Option<String> {
    let ms = |total, n| mean_ns(total, n) as f64 / 1e6;
    let mut parts = Vec::new();
    let offs = KINDS_OFF.load(Relaxed);
    if offs > 0 {
        parts.push(format!(
            "switched the traced kinds off {offs} times and on {} times ({:.1} and {:.1} ms on average)",
            KINDS_ON.load(Relaxed),
            ms(&KINDS_OFF_NS, &KINDS_OFF),
            ms(&KINDS_ON_NS, &KINDS_ON)
        ));
    }
    let holds = crate::record::hold_counts();
    if holds.held > 0 || holds.given_up > 0 {
        parts.push(format!(
            "held {} of the program's calls {:.2} ms in all while switching ({} went on after the 5 ms limit), put off {} switches for calls in flight",
            holds.held,
            holds.held_ns as f64 / 1e6,
            holds.outwaited,
            holds.given_up
        ));
    }
    let detaches = DETACHES.load(Relaxed);
    if detaches > 0 {
        parts.push(format!(
            "detached between recording slots {detaches} times (attaching took {:.1} ms, detaching {:.1} ms on average)",
            ms(&ATTACH_NS, &ATTACHES),
            ms(&DETACH_NS, &DETACHES)
        ));
    }
    let restarts = RESTARTS.load(Relaxed);
    if restarts > 0 {
        parts.push(format!(
            "detached {restarts} times because kernel records had stopped coming"
        ));
    }
    // Switched on once only, the counters are on for good (`GPUSPY_CUPTI=full`).
    let um = UM_SWITCHES.load(Relaxed);
    if um > 1 {
        parts.push(format!(
            "switched the unified-memory counters {um} times (the longest took {:.1} ms)",
            UM_SWITCH_MAX_NS.load(Relaxed) as f64 / 1e6
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Reads every record of a completed buffer into the aggregator.
///
/// # Safety
/// `buffer` holds `valid` bytes of CUPTI activity records.
unsafe fn reduce(api: &Api, agg: &mut Aggregator, buffer: *mut u8, valid: usize) {
    let mut record: *mut u8 = null_mut();
    // SAFETY: CUPTI walks its own buffer; a non-zero status ends it (end or invalid kind).
    while unsafe { (api.next_record)(buffer, valid, &mut record) } == 0 && !record.is_null() {
        // SAFETY: CUPTI returned a pointer to a complete record.
        if let Some(r) = unsafe { decode(record) } {
            agg.add(r);
        }
    }
}

/// # Safety
/// `p` points to a whole record that stays valid while the result is used.
unsafe fn read<T: Copy>(p: *const u8, offset: usize) -> T {
    // SAFETY: the caller vouches for the record; offsets are inside its struct.
    unsafe { p.add(offset).cast::<T>().read_unaligned() }
}

/// The fields gpuspy needs, at the offsets shared by `Kernel9`..`Kernel13`, `Memcpy6`,
/// `Memset4`, `UnifiedMemoryCounter3` and `Overhead3` (cupti_activity.h, CUDA 12 and 13).
///
/// # Safety
/// `p` points to a complete activity record.
unsafe fn decode<'a>(p: *const u8) -> Option<Record<'a>> {
    // SAFETY (all reads): offsets lie inside the struct of the record's kind.
    unsafe {
        match read::<u32>(p, 0) {
            KIND_KERNEL | KIND_CONCURRENT_KERNEL => {
                let dim = |o| u64::from(read::<i32>(p, o).max(0) as u32);
                let name: *const c_char = read(p, 104);
                Some(Record::Kernel {
                    start: read(p, 16),
                    end: read(p, 24),
                    device: read(p, 40),
                    blocks: dim(52) * dim(56) * dim(60),
                    name: (!name.is_null()).then(|| CStr::from_ptr(name)),
                })
            }
            KIND_MEMCPY => Some(Record::Copy {
                kind: read(p, 4),
                src_memory: read(p, 5),
                dst_memory: read(p, 6),
                bytes: read(p, 8),
                start: read(p, 16),
                end: read(p, 24),
                device: read(p, 32),
            }),
            KIND_MEMSET => Some(Record::Memset {
                bytes: read(p, 8),
                start: read(p, 16),
                end: read(p, 24),
                device: read(p, 32),
            }),
            KIND_UNIFIED_MEMORY_COUNTER => Some(Record::UnifiedMemory {
                counter: read(p, 4),
                value: read(p, 8),
                start: read(p, 16),
            }),
            KIND_OVERHEAD => Some(Record::Overhead {
                kind: read(p, 4),
                start: read(p, 24),
                end: read(p, 32),
            }),
            _ => None,
        }
    }
}

unsafe extern "C" fn on_buffer_request(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let mut given = null_mut();
    if let Ok(mut pool) = POOL.lock() {
        given = match pool.free.pop() {
            Some(b) => b as *mut u8,
            None if pool.owned.len() < MAX_BUFFERS => {
                // SAFETY: malloc of a constant size; CUPTI needs 8-byte alignment, which
                // malloc gives.
                let b = unsafe { libc::malloc(BUFFER_BYTES) } as *mut u8;
                if !b.is_null() {
                    pool.owned.push(b as usize);
                }
                b
            }
            None => null_mut(),
        };
    }
    if given.is_null() {
        REFUSED.fetch_add(1, Relaxed);
    }
    // SAFETY: CUPTI passes valid out-pointers.
    unsafe {
        *buffer = given;
        *size = if given.is_null() { 0 } else { BUFFER_BYTES };
        *max_records = 0;
    }
}

unsafe extern "C" fn on_buffer_complete(
    context: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if let Some(api) = API.get() {
        let mut dropped = 0usize;
        // SAFETY: plain CUPTI query, allowed in the completion callback.
        if unsafe { (api.dropped_records)(context, stream, &mut dropped) } == 0 {
            DROPPED.fetch_add(dropped as u64, Relaxed);
        }
    }
    if buffer.is_null() {
        return;
    }
    if let Ok(mut pool) = POOL.lock() {
        if pool.owned.contains(&(buffer as usize)) {
            pool.filled.push((buffer as usize, valid));
        }
    }
}

/// libcupti's own definition of `name`, for the exported tees below: from the library
/// gpuspy uses, else the next in the global scope, else a loaded one found by soname (a
/// dependency of a module opened with RTLD_LOCAL is not in the global scope).
fn real(name: &CStr) -> Option<*mut c_void> {
    let handle = LIBRARY.load(Acquire);
    let f = if handle.is_null() {
        let next = lookup(libc::RTLD_NEXT, name);
        if next.is_null() {
            find_library().map_or(null_mut(), |(h, _)| lookup(h, name))
        } else {
            next
        }
    } else {
        lookup(handle, name)
    };
    (!f.is_null()).then_some(f)
}

const CUPTI_ERROR_NOT_INITIALIZED: CuptiResult = 15;

/// Held while gpuspy sets CUPTI up, so that a program registering meanwhile waits.
static STARTING: Mutex<()> = Mutex::new(());

/// Steps aside for the program's own client, leaving CUPTI as the client would find it
/// without gpuspy: gpuspy's kinds switched off, except those the program enabled itself,
/// our buffers flushed back to us and read (so that its completion callback never sees a
/// buffer it did not allocate), then CUPTI finalized, so that the program's call
/// initialises it afresh, as in a process where nothing used it before. Not finalized
/// where the program enabled kinds of its own (they would go) or used CUDA graphs
/// (`keep_attached`).
///
/// With the unified-memory and OVERHEAD kinds left on, PyTorch's first cuBLAS call under
/// torch.profiler hung on the H200. With only the kinds switched off and our buffers
/// flushed, a torch.profiler started mid-run failed an internal assert at its stop
/// (`inserted.second`, profiler/collection.cpp: two CPU-side records with one correlation
/// id) in 2 of 14 runs, and in 2 of 4 before the kinds went off first; finalized, 0 of 18
/// (bench/results/gpu-2026-12-01-run11-step-aside, -run11-phases-3,
/// -run10-check).
fn step_aside() {
    let _after_start = STARTING.lock();
    // A flush of ours still in flight would deliver our buffers to the program's callback.
    let _after_collecting = COLLECTING.lock();
    if let (Some(api), true) = (API.get(), REGISTERED.swap(false, AcqRel)) {
        let programs = PROGRAM_KINDS.load(Acquire);
        // SAFETY: plain CUPTI calls from an application thread outside any callback.
        unsafe {
            for kind in TRACED_KINDS
                .into_iter()
                .chain([KIND_UNIFIED_MEMORY_COUNTER, KIND_OVERHEAD])
                .filter(|&k| programs >> k & 1 == 0)
            {
                (api.disable)(kind);
            }
        }
        if programs == 0 && may_detach() {
            finalize(api);
        } else {
            // SAFETY: as above.
            unsafe { (api.flush_all)(FLUSH_FORCED) };
        }
        YIELDED_AT.store(crate::clock::unix_ns(), Relaxed);
    } else if DETACHED.swap(false, AcqRel) {
        YIELDED_AT.store(crate::clock::unix_ns(), Relaxed);
    }
}

/// The program registering its own activity callbacks: gpuspy steps aside, then forwards.
///
/// # Safety
/// Same contract as `cuptiActivityRegisterCallbacks`.
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    request: Option<RequestFn>,
    complete: Option<CompleteFn>,
) -> CuptiResult {
    PROGRAM_CLIENT.store(true, Release);
    step_aside();
    let Some(real) = real(c"cuptiActivityRegisterCallbacks") else {
        return CUPTI_ERROR_NOT_INITIALIZED;
    };
    type Real = unsafe extern "C" fn(Option<RequestFn>, Option<CompleteFn>) -> CuptiResult;
    // SAFETY: libcupti's function of this name and signature.
    unsafe { std::mem::transmute::<*mut c_void, Real>(real)(request, complete) }
}

/// The program subscribing to CUPTI's callbacks (Kineto does so before it registers its
/// activity callbacks): gpuspy steps aside first, as for a registration, since finalizing
/// CUPTI after it would end the program's subscription.
///
/// # Safety
/// Same contract as `cuptiSubscribe`.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut c_void,
    callback: *mut c_void,
    userdata: *mut c_void,
) -> CuptiResult {
    PROGRAM_CLIENT.store(true, Release);
    step_aside();
    let Some(real) = real(c"cuptiSubscribe") else {
        return CUPTI_ERROR_NOT_INITIALIZED;
    };
    type Real = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> CuptiResult;
    // SAFETY: libcupti's function of this name and signature.
    unsafe { std::mem::transmute::<*mut c_void, Real>(real)(subscriber, callback, userdata) }
}

/// The program enabling an activity kind: noted, so that stepping aside leaves it on, then
/// forwarded.
///
/// # Safety
/// Same contract as `cuptiActivityEnable`.
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityEnable(kind: u32) -> CuptiResult {
    if kind < 64 {
        PROGRAM_KINDS.fetch_or(1 << kind, AcqRel);
    }
    let Some(real) = real(c"cuptiActivityEnable") else {
        return CUPTI_ERROR_NOT_INITIALIZED;
    };
    type Real = unsafe extern "C" fn(u32) -> CuptiResult;
    // SAFETY: libcupti's function of this name and signature.
    unsafe { std::mem::transmute::<*mut c_void, Real>(real)(kind) }
}

/// A program that finalizes CUPTI ends our collection too. Nothing is flushed here:
/// Kineto finalizes from inside a CUPTI callback, where flushing is not allowed.
///
/// # Safety
/// Same contract as `cuptiFinalize`.
#[no_mangle]
pub unsafe extern "C" fn cuptiFinalize() -> CuptiResult {
    PROGRAM_CLIENT.store(true, Release);
    if REGISTERED.swap(false, AcqRel) || DETACHED.swap(false, AcqRel) {
        YIELDED_AT.store(crate::clock::unix_ns(), Relaxed);
    }
    let Some(real) = real(c"cuptiFinalize") else {
        return CUPTI_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: libcupti's function of this name and signature.
    unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> CuptiResult>(real)() }
}

/// The tee for a CUPTI name looked up through `dlsym`: ours in place of libcupti's.
pub fn dlsym_wrapper(found: *mut c_void, name: &CStr) -> *mut c_void {
    match name.to_bytes() {
        b"cuptiActivityRegisterCallbacks" => cuptiActivityRegisterCallbacks as *mut c_void,
        b"cuptiFinalize" => cuptiFinalize as *mut c_void,
        b"cuptiActivityEnable" => cuptiActivityEnable as *mut c_void,
        b"cuptiSubscribe" => cuptiSubscribe as *mut c_void,
        _ => found,
    }
}

/// Stops using CUPTI's shared state in a forked child: the parent's registration does not
/// carry over, and our locks may have been held by a thread that does not exist here.
pub fn forget_after_fork() {
    REGISTERED.store(false, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_at_the_documented_offsets() {
        // A Kernel10 prefix: kind 10, start 16, end 24, device 40, grid 52/56/60, name 104.
        let mut k = [0u8; 112];
        k[0..4].copy_from_slice(&10u32.to_le_bytes());
        k[16..24].copy_from_slice(&1000u64.to_le_bytes());
        k[24..32].copy_from_slice(&1900u64.to_le_bytes());
        k[40..44].copy_from_slice(&3u32.to_le_bytes());
        for (o, v) in [(52, 8i32), (56, 2), (60, 1)] {
            k[o..o + 4].copy_from_slice(&v.to_le_bytes());
        }
        let name = c"_Z4stepv";
        k[104..112].copy_from_slice(&(name.as_ptr() as usize).to_le_bytes());
        // SAFETY: a whole record.
        match unsafe { decode(k.as_ptr()) } {
            Some(Record::Kernel {
                device,
                start,
                end,
                name: Some(n),
                blocks,
            }) => assert_eq!((device, start, end, n, blocks), (3, 1000, 1900, name, 16)),
            _ => panic!("not decoded as a kernel"),
        }
        // A Memcpy6 prefix: kind 1, copyKind HtoD, src pageable, dst device, 4 KiB.
        let mut m = [0u8; 48];
        m[0..4].copy_from_slice(&1u32.to_le_bytes());
        m[4..7].copy_from_slice(&[1, 1, 3]);
        m[8..16].copy_from_slice(&4096u64.to_le_bytes());
        m[16..24].copy_from_slice(&5u64.to_le_bytes());
        m[24..32].copy_from_slice(&9u64.to_le_bytes());
        m[32..36].copy_from_slice(&1u32.to_le_bytes());
        // SAFETY: a whole record.
        match unsafe { decode(m.as_ptr()) } {
            Some(Record::Copy {
                device: 1,
                kind: 1,
                src_memory: 1,
                dst_memory: 3,
                bytes: 4096,
                start: 5,
                end: 9,
            }) => {}
            _ => panic!("not decoded as a copy"),
        }
        let mut unknown = [0u8; 8];
        unknown[0..4].copy_from_slice(&99u32.to_le_bytes());
        // SAFETY: a record of an unknown kind is not read past its kind.
        assert!(unsafe { decode(unknown.as_ptr()) }.is_none());
    }

    #[test]
    fn only_known_layouts_are_read() {
        assert!(layout_known(130001));
        assert!(layout_known(26));
        assert!(!layout_known(140000));
        assert!(!layout_known(17));
    }
}
