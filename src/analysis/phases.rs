//! The time axis judged: each process's timeline (`format::timeline`) split into phases
//! (start-up, warm-up, steady state, pauses, teardown), the job's steady state (where every
//! process is steady), and what the GPU's idle time in it is due to. The rules measure
//! per-step problems against this steady state; dumps without a timeline have none, and
//! the rules keep their whole-run model. docs/diagnosis.md, "Phases", gives the method and
//! where it fails.

use crate::analysis::profile::{total, ProcessInfo, Profile};
use gpuspy_format::timeline::{
    self, DeviceWindows, GapEnd, HostEvent, HostEventKind, HostWindows, IdleCause, IdleSeries,
    Timeline, UnifiedMemoryWindows,
};
use gpuspy_format::{HostKind, SyncCause};
use serde::Serialize;
use std::collections::BTreeMap;

/// A stretch without GPU work at least this long, inside the loop, is a pause (unless such
/// stretches recur: `RECURRING_GAPS`).
pub const PAUSE_MIN_NS: u64 = 100_000_000;
/// Long stretches without work recur, and belong to the steady state (a loop that waits
/// for its data every step), when they take at least `RECURRING_SHARE` of the time between
/// the first and last window with work and either there are more than `RARE_GAPS` of them
/// or the windows with work between two of them are one, or last less than
/// `STEPS_BETWEEN_PAUSES_NS` (one step per gap). A few long gaps with much regular work between them are pauses
/// (checkpoints, evaluations). A time, not a count of windows: windows widen with the run,
/// and at 40 ms a short loop's 70-110 ms of matmul steps between its checkpoints took 2-3
/// windows (bench/results/gpu-2026-12-01-session13-phases-5, healthy-pauses).
const RECURRING_SHARE: f64 = 0.25;
const RARE_GAPS: usize = 4;
const STEPS_BETWEEN_PAUSES_NS: u64 = 40_000_000;
/// A window spent this share or more in module loading, JIT and driver init is loading.
const LOADING_SHARE: f64 = 0.25;
/// Blocked or GPU-busy time of at least this share makes a window one with work.
const WORK_SHARE: f64 = 0.1;
/// Host idle time in a window that launches at least once per this much time (10,000
/// launches a second, the launch-bound rule's rate), or spends half of it launching, is
/// launch overhead; otherwise host work (data loading, Python).
pub const LAUNCH_GAP_NS: u64 = 100_000;
/// The name of a pause in which modules were loaded (a JIT compile, lazy loading).
pub const LOADING: &str = "module loading or JIT";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Startup,
    Warmup,
    Steady,
    Pause,
    Teardown,
}

impl PhaseKind {
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Startup => "start-up",
            PhaseKind::Warmup => "warm-up",
            PhaseKind::Steady => "steady",
            PhaseKind::Pause => "pause",
            PhaseKind::Teardown => "teardown",
        }
    }
}

/// One phase, in Unix ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub name: Option<String>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
}

/// What the host was doing when GPU idle time began, as the rules see it: the timeline's
/// `IdleCause`, with `Host` split into launch overhead and other host work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleKind {
    AfterSync,
    Launch,
    Host,
    PageableCopy,
    Alloc,
    Collective,
    Unknown,
}

impl IdleKind {
    /// How the text report names it.
    pub fn describe(self) -> &'static str {
        match self {
            IdleKind::AfterSync => "after a sync",
            IdleKind::Launch => "launching",
            IdleKind::Host => "host work",
            IdleKind::PageableCopy => "pageable copies",
            IdleKind::Alloc => "allocating",
            IdleKind::Collective => "in collectives",
            IdleKind::Unknown => "unknown",
        }
    }

    /// The rule whose fix gives this idle time back.
    pub fn rule(self) -> Option<&'static str> {
        match self {
            IdleKind::AfterSync => Some("sync-stalled"),
            IdleKind::Launch => Some("launch-bound"),
            IdleKind::Host => Some("input-starved"),
            IdleKind::PageableCopy => Some("pageable-memcpy"),
            IdleKind::Alloc => Some("alloc-churn"),
            IdleKind::Collective => Some("rank-straggler"),
            IdleKind::Unknown => None,
        }
    }
}

/// Where a process's start-up time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Startup {
    /// From the process start to the first window with work and a launch (a call, where
    /// the process launched nothing).
    pub ns: u64,
    /// `cuInit` and context creation; module loading, linking and JIT; other driver calls;
    /// the rest (imports, host set-up: outside the driver).
    pub init_ns: u64,
    pub module_ns: u64,
    pub other_driver_ns: u64,
    pub outside_driver_ns: u64,
}

/// One process's phases.
#[derive(Debug, Clone)]
pub struct ProcessAxis {
    pub phases: Vec<Phase>,
    pub startup: Startup,
    /// Whether it launched kernels or kept a GPU busy (`gpu_work`); a launcher's agent or
    /// a compile worker does not (its phases follow its calls), and is left out of the
    /// job's phases and steady state.
    pub gpu_work: bool,
    /// Per window of its timeline: whether it is in the steady state.
    steady: Vec<bool>,
    /// Its windows between start-up and teardown.
    loop_windows: std::ops::Range<usize>,
}

impl ProcessAxis {
    /// Whether window `w` of its timeline is in its steady state.
    pub fn is_steady(&self, w: usize) -> bool {
        self.steady.get(w) == Some(&true)
    }
}

/// The steady state's GPU side, summed over devices: `ns`, the length of the windows in
/// which CUPTI accounted for some device time (busy, transfer or idle; sampling leaves the
/// others out), and the busy, transfer and idle time per cause recorded in them, scaled by
/// one ratio, `ns` over the time accounted for: a window with a few microseconds recorded
/// (a sampling period's tail) weighs as little as it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteadyGpu {
    pub ns: u64,
    pub busy_ns: u64,
    /// A copy or memset ran and no kernel did.
    pub transfer_ns: u64,
    pub idle: BTreeMap<IdleKind, u64>,
    /// Per process, the `Host` idle (over its devices) of one steady window that holds
    /// twice as much of it as all its other steady windows together, among three or more
    /// with device time: a one-off stall of the host (a garbage collection, a compile's
    /// tail), not a per-step wait; summed over the processes, 0 where none has one.
    pub host_stall_ns: u64,
    /// Of `idle`, the time in idle gaps of `timeline::LONG_GAP_NS` or more, per cause of
    /// its pieces (the timeline's `IdleCause`: `Host` is `IdleKind::Launch` and
    /// `IdleKind::Host` together) and what ended the gap (`GapEnd`: a copy to the device
    /// is the next batch arriving): the devices' `long_idle_ns` over the same windows, less
    /// the same edge causes, scaled alike. Per cause at most its `idle` (up to rounding);
    /// the rest of it lies in shorter gaps. Empty for dumps without the series.
    pub long_idle: BTreeMap<(IdleCause, GapEnd), u64>,
    /// The idle gaps that ended in those windows, shorter than `LONG_GAP_NS` and of it or
    /// more (`short_gaps_ended`, `long_gaps_ended`), scaled alike (a gap at an edge counts
    /// whatever its cause): the idle time outside and inside `long_idle` over these is
    /// about the mean gap length. A dispatch-bound loop has one short gap per launch, of
    /// 10-100 µs. 0 for dumps without the series.
    pub short_gaps: u64,
    pub long_gaps: u64,
}

impl SteadyGpu {
    /// Recorded times (of `accounted` ns in all) brought to `ns`.
    fn scaled(mut self, accounted: u64) -> SteadyGpu {
        self.busy_ns = scale(self.busy_ns, self.ns, accounted);
        self.transfer_ns = scale(self.transfer_ns, self.ns, accounted);
        self.host_stall_ns = scale(self.host_stall_ns, self.ns, accounted);
        self.short_gaps = scale(self.short_gaps, self.ns, accounted);
        self.long_gaps = scale(self.long_gaps, self.ns, accounted);
        for ns in self.idle.values_mut().chain(self.long_idle.values_mut()) {
            *ns = scale(*ns, self.ns, accounted);
        }
        self
    }

    pub fn idle_ns(&self) -> u64 {
        total(self.idle.values().copied())
    }

    /// The share of the steady device time idle for `kind`.
    pub fn share(&self, kind: IdleKind) -> f64 {
        crate::analysis::diagnose::share(self.idle.get(&kind).copied().unwrap_or(0), self.ns)
    }
}

/// How a step was found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "source", content = "name")]
pub enum StepSource {
    /// The steady state's time over the NVTX ranges of this name that ended in it: a range
    /// times the host's part of a step, and an asynchronous step's host part is only its
    /// launches.
    Nvtx(String),
    /// The median spacing of the blocking syncs sampled in the steady state.
    SyncPeriod,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub ns: u64,
    #[serde(flatten)]
    pub source: StepSource,
}

/// Host-side counters summed over windows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub calls: u64,
    pub launches: u64,
    pub driver_ns: u64,
    pub launch_ns: u64,
    pub allocs: u64,
    pub frees: u64,
    pub blocked: BTreeMap<SyncCause, u64>,
    /// Bytes copied between pageable host memory and a device, both directions.
    pub pageable_bytes: u64,
}

impl Counters {
    fn add(&mut self, h: &HostWindows, i: usize) {
        self.calls += at(&h.calls, i);
        self.launches += at(&h.launches, i);
        self.driver_ns += at(&h.driver_ns, i);
        self.launch_ns += at(&h.launch_ns, i);
        self.allocs += at(&h.allocs, i);
        self.frees += at(&h.frees, i);
        for c in &h.blocked_ns {
            *self.blocked.entry(c.cause).or_default() += at(&c.ns, i);
        }
        self.pageable_bytes += total(
            h.copy_bytes
                .iter()
                .filter(|c| c.host == HostKind::Pageable)
                .map(|c| at(&c.bytes, i)),
        );
    }

    pub fn blocked_ns(&self, causes: &[SyncCause]) -> u64 {
        total(
            causes
                .iter()
                .map(|c| self.blocked.get(c).copied().unwrap_or(0)),
        )
    }
}

/// The steady state of every process summed, with the GPU side where CUPTI reported it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteadyState {
    /// Host time: the steady windows' lengths, summed over the processes.
    pub ns: u64,
    pub host: Counters,
    /// The same counters over the whole timelines of the same processes: the timeline
    /// counts blocked time and allocations per window, not every kind of call, so a rule
    /// takes the steady share of a whole-run count in proportion (`in_steady`).
    pub whole: Counters,
    pub gpu: Option<SteadyGpu>,
    pub step: Option<Step>,
    /// What the unified-memory counters saw, scaled to the steady state; None where no
    /// dump has the counters' windows (older dumps, or no managed memory).
    pub unified_memory: Option<SteadyUnifiedMemory>,
    /// The share of a device's kernel time whose CUPTI records came late, where it is
    /// `LATE_RECORDS_SHARE` or more in a process of the steady state: `gpu` is None then.
    pub records_late: Option<f64>,
    /// Where GPM saw the SMs active far more of the steady state than CUPTI's records
    /// kept a kernel running (`SM_ACTIVE_OVER_BUSY`). `gpu` stays for the rules, whose
    /// thresholds on its idle causes held on these runs, but the verdict's busy share and
    /// idle do not come from it.
    pub records_missing: Option<RecordsMissing>,
}

/// CUPTI's busy share of the steady state, and the evidence that records are missing: GPM's
/// SM activity over the same windows (`SM_ACTIVE_OVER_BUSY`), or the fewest kernel records
/// per host launch of a process (`KERNELS_PER_LAUNCH_MIN`); null where it gave none.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RecordsMissing {
    pub busy_share: f64,
    pub sm_active_share: Option<f64>,
    pub kernels_per_launch: Option<f64>,
}

impl SteadyState {
    /// Whether CUPTI's records of the steady state are not all there (late, or missing).
    pub fn records_incomplete(&self) -> bool {
        self.records_late.is_some() || self.records_missing.is_some()
    }
}

/// The unified-memory counters' faults and migrations, per process over the time they were
/// on in its steady state (else between its start-up and teardown: short runs can have
/// their only slot in a warm-up), scaled to its steady time, and summed. The counters are
/// sampled (on one slot in 64, from the first launch after a managed allocation), so these
/// are estimates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteadyUnifiedMemory {
    /// The time the counters were on in the stretches judged; 0: under
    /// `UM_OBSERVED_MIN_NS` after start-up, nothing judged.
    pub observed_ns: u64,
    pub cpu_page_faults: u64,
    pub gpu_page_fault_groups: u64,
    pub bytes_htod: u64,
    pub bytes_dtoh: u64,
    /// The processes with the counters' windows: the run's managed allocations are theirs
    /// (the dumps of a job are summed, their steady times too, while a step is one rank's).
    pub processes: u32,
}

/// The least on-time of the counters that stands for a stretch: half their 20 ms slot.
/// A slot's edge (the middle of a 14-43 ms switch) can leave 0.5 ms in a phase, and its
/// faults scaled by the phase's length over that would be thousands of times too many.
const UM_OBSERVED_MIN_NS: u64 = 10_000_000;

/// The share of a device's recorded kernel time whose records came after the shim had
/// settled that time (`activity.late_ns`) at which the timeline's GPU side is left out:
/// that time reads idle. On the H200 the healthy loops with a launch queue seconds deep
/// had 40-84 % late in their long form (`healthy-matmul` read "GPU idle 36-42 %, cause
/// not identified" at 91 % by NVML, bench/results/gpu-2026-12-01-session15-phases-14);
/// every other staged run under 8 %.
pub const LATE_RECORDS_SHARE: f64 = 0.10;

/// GPM's SM activity (cycles with a warp resident, averaged over the SMs) over the steady
/// state at least this far above CUPTI's busy share means that the records of kernels that
/// ran are missing: an SM is active only while a kernel runs. CUPTI
/// discards the records of kernels still queued when a recording period closes (gpu-truth-
/// facts.md, A.6); a loop that queues matmuls far ahead then leaves periods that read idle.
/// In the 594 staged runs of rounds 1-17 on the H200 with GPM and a steady GPU side
/// (bench/results/calib-2026-12-01-session16.txt) GPM read at most 0.33 above CUPTI (0.37
/// where the records came late), except in 9 of the 17 long `healthy-pauses` runs,
/// 0.50-0.81 above, and 2 long `torch-compile` runs, 0.89-0.90: loops that queue matmuls
/// far ahead. Three of those `healthy-pauses` runs read "GPU idle 64-87 % of the steady
/// state; cause not identified" at 79-85 % SM activity.
pub const SM_ACTIVE_OVER_BUSY: f64 = 0.45;

/// Kernel records per host launch (the sampled counts are extrapolated by launches, so
/// about 1 where every record came) under which a process's records are missing. Over the
/// 555 sampled H200 runs of rounds 1-20 with 1,000 launches or more, most read 0.77-1.0,
/// runs that lost their periods' tails to a deep queue 0.27-0.62, and 14 runs 0.016-0.10:
/// mostly CUPTI attached and switched on and off 50-160 times, sending a few records per
/// period after its first (round 18's `sync-stalled` long: 2,098 kernels for 60,002
/// launches, its GPU side 64 % idle at 72 % SM activity; docs/diagnosis.md).
pub const KERNELS_PER_LAUNCH_MIN: f64 = 0.15;
/// Launches below which a process's records per launch say nothing (a few slots' worth).
const KERNELS_PER_LAUNCH_FROM: u64 = 1_000;

/// `process`'s kernel records per launch, where CUPTI recorded activity, the process
/// launched enough to tell, and it replayed no CUDA graph (whose kernels have no launch of
/// their own).
fn kernels_per_launch(process: &crate::analysis::profile::ProcessInfo) -> Option<f64> {
    let t = process.timeline.as_deref()?;
    let graphs: u64 = t.host.graph_launches.iter().sum();
    let recorded = process.activities().next().is_some();
    let kernels: u64 = process.activities().map(|a| a.kernels).sum();
    (recorded && graphs == 0 && process.launches >= KERNELS_PER_LAUNCH_FROM)
        .then(|| crate::analysis::diagnose::share(kernels, process.launches))
}

/// The largest share of a device's recorded kernel time, among `process`'s devices, whose
/// records came late.
fn late_share(process: &crate::analysis::profile::ProcessInfo) -> f64 {
    let shares = (process.activities())
        .map(|a| crate::analysis::diagnose::share(a.late_ns, a.busy_ns + a.late_ns));
    shares.fold(0.0, f64::max)
}

impl SteadyUnifiedMemory {
    /// Adds the counts of windows `in_window` of `um`, scaled from their on-time to
    /// `steady_ns`; false where the counters were on less than `UM_OBSERVED_MIN_NS` in them.
    fn add(
        &mut self,
        um: &UnifiedMemoryWindows,
        in_window: impl Fn(usize) -> bool,
        steady_ns: u64,
    ) -> bool {
        let sum = |s: &[u64]| total((0..s.len()).filter(|&i| in_window(i)).map(|i| s[i]));
        let observed = sum(&um.observed_ns);
        if observed < UM_OBSERVED_MIN_NS {
            return false;
        }
        self.observed_ns += observed;
        self.cpu_page_faults += scale(sum(&um.cpu_page_faults), steady_ns, observed);
        self.gpu_page_fault_groups += scale(sum(&um.gpu_page_fault_groups), steady_ns, observed);
        self.bytes_htod += scale(sum(&um.bytes_htod), steady_ns, observed);
        self.bytes_dtoh += scale(sum(&um.bytes_dtoh), steady_ns, observed);
        true
    }
}

impl SteadyState {
    /// Events per second of steady time.
    pub fn per_s(&self, n: u64) -> f64 {
        n as f64 / (self.ns.max(1) as f64 / 1e9)
    }
}

/// The part of a whole-run figure `run_value` that falls in the steady state, taken in
/// proportion to a quantity the timeline has both for the steady state and the whole run.
pub fn in_steady(run_value: u64, steady_part: u64, whole_part: u64) -> u64 {
    scale(run_value, steady_part, whole_part).min(run_value)
}

/// The judged time axis of a profile: one entry per process (None without a timeline), the
/// job's phases, and its steady state (None when no process reached one).
#[derive(Debug, Clone)]
pub struct TimeAxis {
    pub processes: Vec<Option<ProcessAxis>>,
    pub phases: Vec<Phase>,
    pub steady: Option<SteadyState>,
}

impl TimeAxis {
    /// The processes the job is judged by, with their index in the profile: those that
    /// used a GPU, or every one with a timeline where none did. A compile worker or a
    /// launcher's agent beside the program is neither the job's start-up nor its wall time.
    pub fn judged(&self) -> impl Iterator<Item = (usize, &ProcessAxis)> {
        let any_gpu = self.processes.iter().flatten().any(|a| a.gpu_work);
        self.processes
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some((i, a.as_ref()?)))
            .filter(move |(_, a)| a.gpu_work || !any_gpu)
    }
}

/// The time axis of `p`; None when no dump has a timeline (schema 1), where every judgement
/// keeps the whole-run model.
pub fn time_axis(p: &Profile) -> Option<TimeAxis> {
    let processes: Vec<Option<ProcessAxis>> = p.processes.iter().map(process_axis).collect();
    if processes.iter().all(Option::is_none) {
        return None;
    }
    // A launcher's agent or a compile worker makes driver calls but no GPU work: it never
    // holds the job back.
    let working: Vec<&ProcessAxis> = processes.iter().flatten().filter(|a| a.gpu_work).collect();
    let steady_spans: Vec<Vec<(u64, u64)>> = working
        .iter()
        .map(|a| spans(&a.phases, PhaseKind::Steady))
        .filter(|s| !s.is_empty())
        .collect();
    let together = steady_spans.iter().skip(1).fold(
        steady_spans.first().cloned().unwrap_or_default(),
        |acc, s| intersect(&acc, s),
    );
    let start = p
        .processes
        .iter()
        .map(|x| x.start_unix_ns)
        .min()
        .unwrap_or(0);
    let stop = p
        .processes
        .iter()
        .map(|x| x.stop_unix_ns)
        .max()
        .unwrap_or(0);
    let phases = match (&processes[..], &working[..]) {
        ([Some(only)], _) => only.phases.clone(),
        // One process did the GPU work: the job's phases are its phases, named, from the
        // first process's start to the last one's dump.
        (_, [one]) => {
            let mut phases = one.phases.clone();
            stretch(&mut phases, start, stop);
            phases
        }
        _ => named(job_phases(&together, start, stop), &working),
    };
    // Processes that never ran steadily together (clocks apart by more than their overlap,
    // or ranks run one after another) are each judged on their own steady state.
    let clip = (steady_spans.len() > 1 && !together.is_empty()).then_some(&together[..]);
    let steady = (!steady_spans.is_empty()).then(|| steady_state(p, &processes, clip));
    Some(TimeAxis {
        processes,
        phases,
        steady,
    })
}

/// The steady state of `p`, if its dumps have timelines and it reached one.
pub fn steady(p: &Profile) -> Option<SteadyState> {
    time_axis(p)?.steady
}

/// Whether a timeline shows GPU work: a kernel or graph launch, or GPU busy time.
fn gpu_work(t: &Timeline) -> bool {
    t.host
        .launches
        .iter()
        .chain(&t.host.graph_launches)
        .any(|&n| n > 0)
        || t.devices.iter().any(|d| d.busy_ns.iter().any(|&n| n > 0))
}

/// Window `i` of `series`, 0 past its end (older dumps lack some series).
pub fn at(series: &[u64], i: usize) -> u64 {
    series.get(i).copied().unwrap_or(0)
}

/// The device time of window `i` that CUPTI accounted for: busy, transfer and idle by
/// cause. The shim's `observed_ns` is exactly that since transfer time was recorded; in
/// older dumps it can also count time between sampling periods, so shares taken over it
/// come out too small. Shares are taken over this.
pub fn accounted_ns(d: &DeviceWindows, i: usize) -> u64 {
    at(&d.busy_ns, i) + at(&d.transfer_ns, i) + total(d.idle_ns.iter().map(|s| at(&s.ns, i)))
}

/// `value * num / den` without overflow, `value` where `den` is 0.
fn scale(value: u64, num: u64, den: u64) -> u64 {
    match den {
        0 => value,
        _ => u64::try_from(value as u128 * num as u128 / den as u128).unwrap_or(u64::MAX),
    }
}

/// Per window of `t` (`n` of them), the time its sampled explicit syncs (the longest and
/// the most recent blocking calls, each counted once) spent in it. The host table files a
/// call in the window it ended in: a 1.8 s sync on a Triton loop's deep queue is 1.8 s in
/// one 80 ms window and nothing in the 22 before, where the H200 ran kernels whose records
/// CUPTI discarded when the recording period closed (bench/results/gpu-2026-12-01-
/// session16-phases-15).
fn syncs_spread(t: &Timeline, n: usize) -> Vec<u64> {
    let mut spread = vec![0; n];
    let width = t.window_ns.max(1);
    let table_end = t.start_unix_ns + n as u64 * width;
    let mut syncs: Vec<&HostEvent> = (t.longest_blocking.iter().chain(&t.recent_blocking))
        .filter(|e| e.kind == HostEventKind::Sync(SyncCause::Explicit))
        .collect();
    syncs.sort_unstable_by_key(|e| (e.start_unix_ns, e.end_unix_ns));
    syncs.dedup_by_key(|e| (e.start_unix_ns, e.end_unix_ns));
    for e in syncs {
        let end = e.end_unix_ns.min(table_end);
        timeline::spread(&mut spread, t.start_unix_ns, width, e.start_unix_ns, end);
    }
    spread
}

/// The windows of one process's timeline, each clipped to the process's end.
struct Windows<'a> {
    t: &'a Timeline,
    stop: u64,
    n: usize,
    /// Per window, the time the sampled explicit syncs spent in it (`syncs_spread`).
    sync_spread: Vec<u64>,
}

impl<'a> Windows<'a> {
    fn new(t: &'a Timeline, stop: u64) -> Windows<'a> {
        let h = &t.host;
        let n = [
            &h.calls,
            &h.launches,
            &h.driver_ns,
            &h.module_ns,
            &h.init_ns,
        ]
        .iter()
        .map(|s| s.len())
        .chain(t.devices.iter().map(|d| d.observed_ns.len()))
        .max()
        .unwrap_or(0);
        // Windows past the dump (a flush taken mid-window) end there.
        let n = n.min(
            stop.saturating_sub(t.start_unix_ns)
                .div_ceil(t.window_ns.max(1))
                .try_into()
                .unwrap_or(usize::MAX),
        );
        let sync_spread = syncs_spread(t, n);
        Windows {
            t,
            stop,
            n,
            sync_spread,
        }
    }

    fn span(&self, i: usize) -> (u64, u64) {
        let start = self.t.start_unix_ns + i as u64 * self.t.window_ns;
        (start, (start + self.t.window_ns).min(self.stop).max(start))
    }

    fn len(&self, i: usize) -> u64 {
        let (a, b) = self.span(i);
        b - a
    }

    fn blocked(&self, i: usize) -> u64 {
        total(self.t.host.blocked_ns.iter().map(|c| at(&c.ns, i)))
    }

    /// Time blocked in explicit syncs (waiting for the GPU's queue) in window `i`: the
    /// window's column, which holds a call in the window it ended in, or, where more, the
    /// part of the sampled syncs that fell in it.
    fn explicit_blocked(&self, i: usize) -> u64 {
        let explicit = self
            .t
            .host
            .blocked_ns
            .iter()
            .filter(|c| c.cause == SyncCause::Explicit);
        total(explicit.map(|c| at(&c.ns, i))).max(at(&self.sync_spread, i))
    }

    /// GPU busy time in window `i`, summed over devices and scaled to the whole window.
    fn busy(&self, i: usize) -> u64 {
        total(
            self.t
                .devices
                .iter()
                .map(|d| scale(at(&d.busy_ns, i), self.len(i), accounted_ns(d, i))),
        )
    }

    /// Whether window `i`'s only work was copies: no launch, the GPU idle, and the host
    /// blocked mostly in copies.
    fn copies_only(&self, i: usize, metric: &[u64]) -> bool {
        let copying = self
            .t
            .host
            .blocked_ns
            .iter()
            .filter(|c| matches!(c.cause, SyncCause::SyncCopy | SyncCause::PageableAsyncCopy));
        at(metric, i) == 0
            && (self.busy(i) as f64) < WORK_SHARE * self.len(i) as f64
            && 2 * total(copying.map(|c| at(&c.ns, i))) >= self.blocked(i)
    }

    fn loading(&self, i: usize) -> bool {
        let h = &self.t.host;
        (at(&h.module_ns, i) + at(&h.init_ns, i)) as f64 >= LOADING_SHARE * self.len(i) as f64
    }

    /// Whether window `i` had work: launches (or, in a run without launches, calls), host
    /// time blocked on the GPU, or GPU busy time.
    fn working(&self, i: usize, metric: &[u64]) -> bool {
        let floor = WORK_SHARE * self.len(i) as f64;
        at(metric, i) > 0 || self.blocked(i) as f64 >= floor || self.busy(i) as f64 >= floor
    }

    /// The name of a pause-like NVTX range (evaluation, checkpoint, compile: `nvtx::is_pause`)
    /// covering at least half of window `i`, unless the GPU ran the loop's steps in it.
    fn nvtx_pause(&self, i: usize) -> Option<&'a str> {
        if self.runs_steps(i) {
            return None;
        }
        self.t
            .nvtx
            .iter()
            .filter(|r| crate::analysis::nvtx::is_pause(self.t, r))
            .find(|r| 2 * at(&r.ns, i) >= self.len(i))
            .map(|r| r.name.as_str())
    }

    /// Whether the GPU was busy at least half of window `i` with the loop's steps: a step
    /// range ran in it, or nothing was launched in it, so the GPU ran work queued before.
    /// A host range is not the GPU's time: a checkpoint's first copy waits while the GPU
    /// drains the steps queued ahead of it, and that time is the loop's.
    fn runs_steps(&self, i: usize) -> bool {
        let steps = self
            .t
            .nvtx
            .iter()
            .any(|r| is_step_name(&r.name) && at(&r.ns, i) > 0);
        2 * self.busy(i) >= self.len(i) && (steps || at(&self.t.host.launches, i) == 0)
    }
}

/// NVTX range names that mark one-off phases inside the loop.
pub fn is_pause_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "eval",
        "valid",
        "test",
        "checkpoint",
        "ckpt",
        "save",
        "compile",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// NVTX range names that mark one training or inference step.
pub fn is_step_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    !is_pause_name(name) && ["step", "iter", "batch"].iter().any(|w| n.contains(w))
}

#[derive(Debug, Clone, PartialEq)]
enum Label {
    Startup,
    Warmup,
    Steady,
    Pause(Option<String>),
    Teardown,
}

/// Splits one process's timeline into labelled windows: see docs/diagnosis.md, "Phases".
fn labels(w: &Windows) -> Vec<Label> {
    let h = &w.t.host;
    // A graph replay is work without a kernel launch.
    let launches: Vec<u64> = (0..w.n)
        .map(|i| at(&h.launches, i) + at(&h.graph_launches, i))
        .collect();
    let metric: &[u64] = if launches.iter().any(|&n| n > 0) {
        &launches
    } else {
        &h.calls
    };
    // Windows whose only work is copies are not the loop's steps: a checkpoint in the
    // middle of it (a pause), a model moved back to the host after it (teardown; Lightning's
    // `fit()` ends with 2.28 GB in 32 pageable copies).
    let working: Vec<bool> = (0..w.n)
        .map(|i| !w.loading(i) && w.working(i, metric) && !w.copies_only(i, metric))
        .collect();
    // Start-up lasts until the first launch: before it the GPU can only have copied (a
    // model's weights) or waited in a barrier, and a host pause ended by the first kernels'
    // lazy loading is set-up, not a JIT compile (a DDP rank built its model on the host for
    // 5 s after NCCL's first calls; bench/results/gpu-2026-12-01-session12-ddp).
    let (Some(first), Some(last)) = (
        (0..w.n).position(|i| working[i] && at(metric, i) > 0),
        working.iter().rposition(|&x| x),
    ) else {
        return vec![Label::Startup; w.n];
    };
    let mut labels = vec![Label::Steady; w.n];
    labels[..first].fill(Label::Startup);
    labels[last + 1..].fill(Label::Teardown);
    // Stretches without work between the first and the last window with work.
    let mut gaps: Vec<(usize, usize)> = Vec::new();
    let mut i = first;
    while i <= last {
        if working[i] {
            i += 1;
            continue;
        }
        let a = i;
        while !working[i] {
            i += 1;
        }
        gaps.push((a, i - 1));
    }
    let length = |(a, b): (usize, usize)| total((a..=b).map(|i| w.len(i)));
    // Module loading in the gap or as work resumes: a JIT compile or lazy loading.
    let loads = |(a, b): (usize, usize)| (a..=b + 1).any(|i| at(&h.module_ns, i) > 0);
    let long: Vec<(usize, usize)> = gaps
        .iter()
        .copied()
        .filter(|&g| !loads(g) && length(g) >= PAUSE_MIN_NS)
        .collect();
    let rare = long.len() <= RARE_GAPS
        && long.windows(2).all(|p| {
            let between: Vec<usize> = (p[0].1 + 1..p[1].0).filter(|&i| working[i]).collect();
            between.len() >= 2
                && total(between.iter().map(|&i| w.len(i))) >= STEPS_BETWEEN_PAUSES_NS
        });
    let recurring = !rare
        && total(long.iter().map(|&g| length(g))) as f64
            >= RECURRING_SHARE * length((first, last)) as f64;
    for &g in &gaps {
        let name = if loads(g) {
            Some(LOADING.to_string())
        } else if length(g) >= PAUSE_MIN_NS && !recurring {
            None
        } else {
            continue;
        };
        labels[g.0..=g.1].fill(Label::Pause(name));
    }
    for (i, label) in labels.iter_mut().enumerate().take(last + 1).skip(first) {
        if let Some(name) = w.nvtx_pause(i) {
            *label = Label::Pause(Some(name.to_string()));
        }
    }
    // Warm-up: the windows with work before the first at the loop's usual rate (half the
    // median launches of the windows with work, or more).
    let mut rates: Vec<u64> = (first..=last)
        .filter(|&i| working[i])
        .map(|i| at(metric, i))
        .collect();
    rates.sort_unstable();
    let usual = rates[rates.len() / 2];
    let settled = (first..=last)
        .find(|&i| labels[i] == Label::Steady && 2 * at(metric, i) >= usual)
        .unwrap_or(first);
    for label in &mut labels[first..settled] {
        if *label == Label::Steady {
            *label = Label::Warmup;
        }
    }
    // The loop ends inside its last window with work: below half the usual rate, that
    // window is mostly what follows the loop, and teardown. A short loop's last window held
    // 16 of its usual 250 launches and the GPU's idle after the final sync, 15 % of the
    // steady state's recorded device time (bench/results/gpu-2026-12-01-session13-phases-6,
    // sync-stalled). A slower stretch of several windows is the loop's.
    if last > settled && labels[last] == Label::Steady && 2 * at(metric, last) < usual {
        labels[last] = Label::Teardown;
    }
    labels
}

fn process_axis(p: &ProcessInfo) -> Option<ProcessAxis> {
    let t = p.timeline.as_deref()?;
    if t.window_ns == 0 {
        return None;
    }
    let w = Windows::new(t, p.stop_unix_ns);
    let labels = labels(&w);
    let mut phases: Vec<Phase> = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        let (start, end) = w.span(i);
        let (kind, name) = match label {
            Label::Startup => (PhaseKind::Startup, None),
            Label::Warmup => (PhaseKind::Warmup, None),
            Label::Steady => (PhaseKind::Steady, None),
            Label::Pause(name) => (PhaseKind::Pause, name.clone()),
            Label::Teardown => (PhaseKind::Teardown, None),
        };
        match phases.last_mut() {
            Some(last) if last.kind == kind && last.name == name => last.end_unix_ns = end,
            _ => phases.push(Phase {
                kind,
                name,
                start_unix_ns: start,
                end_unix_ns: end,
            }),
        }
    }
    stretch(&mut phases, p.start_unix_ns, p.stop_unix_ns);
    let h = &t.host;
    let in_startup: Vec<usize> = (0..w.n).filter(|&i| labels[i] == Label::Startup).collect();
    let sum = |s: &[u64]| total(in_startup.iter().map(|&i| at(s, i)));
    let ns = phases
        .first()
        .filter(|f| f.kind == PhaseKind::Startup)
        .map_or(0, |f| f.end_unix_ns - f.start_unix_ns);
    let (init_ns, module_ns, driver_ns) = (sum(&h.init_ns), sum(&h.module_ns), sum(&h.driver_ns));
    let startup = Startup {
        ns,
        init_ns,
        module_ns,
        other_driver_ns: driver_ns.saturating_sub(init_ns + module_ns),
        outside_driver_ns: ns.saturating_sub(driver_ns),
    };
    Some(ProcessAxis {
        steady: labels.iter().map(|l| *l == Label::Steady).collect(),
        loop_windows: labels
            .iter()
            .position(|l| *l != Label::Startup)
            .unwrap_or(labels.len())
            ..labels
                .iter()
                .rposition(|l| *l != Label::Teardown)
                .map_or(0, |i| i + 1),
        phases,
        startup,
        gpu_work: gpu_work(t),
    })
}

/// The `[start, end)` spans of the phases of one kind.
fn spans(phases: &[Phase], kind: PhaseKind) -> Vec<(u64, u64)> {
    phases
        .iter()
        .filter(|p| p.kind == kind)
        .map(|p| (p.start_unix_ns, p.end_unix_ns))
        .collect()
}

/// Where both sorted span lists hold.
fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(a0, a1) in a {
        for &(b0, b1) in b {
            let (s, e) = (a0.max(b0), a1.min(b1));
            if s < e {
                out.push((s, e));
            }
        }
    }
    out
}

/// A job's phases from the spans where all its processes were steady: start-up before the
/// first, pauses between them, teardown after the last.
fn job_phases(steady: &[(u64, u64)], start: u64, stop: u64) -> Vec<Phase> {
    let phase = |kind, start_unix_ns, end_unix_ns| Phase {
        kind,
        name: None,
        start_unix_ns,
        end_unix_ns,
    };
    let Some((&(first, _), &(_, last))) = steady.first().zip(steady.last()) else {
        return vec![phase(PhaseKind::Startup, start, stop)];
    };
    let mut phases = vec![phase(PhaseKind::Startup, start, first)];
    for (i, &(s, e)) in steady.iter().enumerate() {
        if i > 0 {
            phases.push(phase(PhaseKind::Pause, steady[i - 1].1, s));
        }
        phases.push(phase(PhaseKind::Steady, s, e));
    }
    phases.push(phase(PhaseKind::Teardown, last, stop));
    phases.retain(|p| p.end_unix_ns > p.start_unix_ns);
    phases
}

/// Stretches `phases` over `[start, stop)`: start-up from `start`, teardown (or the
/// start-up of a process that never worked) to `stop`, each added where the phases begin
/// later or end earlier with another kind.
fn stretch(phases: &mut Vec<Phase>, start: u64, stop: u64) {
    let phase = |kind, start_unix_ns, end_unix_ns| Phase {
        kind,
        name: None,
        start_unix_ns,
        end_unix_ns,
    };
    match phases.first_mut() {
        Some(f) if f.kind == PhaseKind::Startup => f.start_unix_ns = start,
        Some(f) if f.start_unix_ns > start => {
            let first = f.start_unix_ns;
            phases.insert(0, phase(PhaseKind::Startup, start, first))
        }
        _ => {}
    }
    match phases.last_mut() {
        Some(l) if l.kind == PhaseKind::Teardown || l.kind == PhaseKind::Startup => {
            l.end_unix_ns = stop
        }
        Some(l) if l.end_unix_ns < stop => {
            let last = l.end_unix_ns;
            phases.push(phase(PhaseKind::Teardown, last, stop))
        }
        _ => {}
    }
}

/// The job's pauses named after a process's named pause (a JIT compile, an NVTX
/// evaluation range) that covers at least half of one.
fn named(mut phases: Vec<Phase>, processes: &[&ProcessAxis]) -> Vec<Phase> {
    for job in phases.iter_mut().filter(|ph| ph.kind == PhaseKind::Pause) {
        let overlap = |ph: &Phase| {
            ph.end_unix_ns
                .min(job.end_unix_ns)
                .saturating_sub(ph.start_unix_ns.max(job.start_unix_ns))
        };
        job.name = processes
            .iter()
            .flat_map(|a| &a.phases)
            .filter(|ph| ph.kind == PhaseKind::Pause && ph.name.is_some())
            .find(|ph| 2 * overlap(ph) >= job.end_unix_ns - job.start_unix_ns)
            .and_then(|ph| ph.name.clone());
    }
    phases
}

/// Sums the steady windows of every process (those inside `clip`, where given).
fn steady_state(
    p: &Profile,
    axes: &[Option<ProcessAxis>],
    clip: Option<&[(u64, u64)]>,
) -> SteadyState {
    let mut s = SteadyState::default();
    let mut gpu: Option<SteadyGpu> = None;
    // GPM's SM activity over the steady windows, time-weighted, and the time it covers.
    let (mut sm_active_ns, mut sm_ns) = (0u64, 0u64);
    let mut host_stall = 0;
    let mut accounted_total = 0;
    // The spacing of each process's sampled blocking syncs, pooled: syncs of several ranks
    // merged into one sequence would be spaced by a fraction of a step.
    let mut sync_spacing: Vec<u64> = Vec::new();
    // The fewest kernel records per launch of a process, under `KERNELS_PER_LAUNCH_MIN`.
    let mut fewest_kernels_per_launch: Option<f64> = None;
    // Per step-like range name: the steps that ended in the steady state, and its time in
    // the processes that ran them.
    let mut nvtx: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (process, axis) in p.processes.iter().zip(axes) {
        let (Some(t), Some(axis)) = (process.timeline.as_deref(), axis) else {
            continue;
        };
        if !axis.gpu_work {
            continue;
        }
        let late = late_share(process);
        if late >= LATE_RECORDS_SHARE {
            s.records_late = Some(s.records_late.unwrap_or(0.0).max(late));
        }
        if let Some(ratio) = kernels_per_launch(process).filter(|&r| r < KERNELS_PER_LAUNCH_MIN) {
            fewest_kernels_per_launch = Some(fewest_kernels_per_launch.unwrap_or(1.0).min(ratio));
        }
        let w = Windows::new(t, process.stop_unix_ns);
        let inside = |at: u64| clip.is_none_or(|c| c.iter().any(|&(a, b)| (a..b).contains(&at)));
        let h = &t.host;
        for i in 0..w.n {
            s.whole.add(h, i);
        }
        let step_ranges: Vec<_> = t.nvtx.iter().filter(|r| is_step_name(&r.name)).collect();
        let counted = |i: usize| {
            let (start, end) = w.span(i);
            axis.steady.get(i) == Some(&true) && inside(start + (end - start) / 2)
        };
        // The cause of an idle gap that fills window `j` outside the process's steady state
        // (outside the job's common span it still ran its loop): idle under one cause,
        // without a kernel. A steady window beside it holds that gap's beginning (the
        // loop's end, a pause's start) or its end (the loop's start after set-up or a JIT
        // compile): its idle of that cause is the gap's, not an idle share of the loop. In a short run a window is 40-160 ms: the idle after a healthy
        // torch.compile loop's final sync filled half its last steady window (9.7 % idle
        // after syncs on the H200), and the idle of its compile, the first loop window
        // (input-starved 38 %, bench/results/gpu-2026-12-01-session11-phases-3).
        let gap = |d: &DeviceWindows, j: Option<usize>| {
            let j = j.filter(|&j| j < w.n && axis.steady.get(j) != Some(&true))?;
            let accounted = accounted_ns(d, j);
            if at(&d.busy_ns, j) > 0 || accounted == 0 {
                return None;
            }
            d.idle_ns
                .iter()
                .find(|s| 2 * at(&s.ns, j) >= accounted)
                .map(|s| s.cause)
        };
        let mut steady_ns = 0;
        let mut steady_spans: Vec<(u64, u64)> = Vec::new();
        let mut ended = vec![0u64; step_ranges.len()];
        // Per steady window with device time: its `Host` idle, over the devices.
        let mut host_idle: Vec<u64> = Vec::new();
        for i in (0..w.n).filter(|&i| counted(i)) {
            let (start, end) = w.span(i);
            let len = end - start;
            steady_ns += len;
            for (ns, r) in ended.iter_mut().zip(&step_ranges) {
                *ns += at(&r.ends, i);
            }
            s.host.add(h, i);
            let launching = at(&h.launches, i).saturating_mul(LAUNCH_GAP_NS) >= len
                || 2 * at(&h.launch_ns, i) >= len;
            let mut window_host = None;
            // A window the host spent mostly in explicit syncs, while its one device shows
            // under a tenth of that as activity in the part recorded, holds work CUPTI did
            // not show (managed memory prefetched; a recording period opened as a short
            // loop ended, 0.1 ms of copies against 14 ms blocked): its idle is not the loop's.
            // With several devices the host may wait on one while another idles.
            let blocked = w.explicit_blocked(i);
            let waited = t.devices.len() == 1 && 2 * blocked >= len;
            for d in &t.devices {
                let accounted = accounted_ns(d, i);
                let seen = at(&d.busy_ns, i) + at(&d.transfer_ns, i);
                if accounted == 0 || (waited && seen < scale(blocked, accounted, len) / 10) {
                    continue;
                }
                let host = window_host.get_or_insert(0);
                let edges = [gap(d, i.checked_sub(1)), gap(d, Some(i + 1))];
                let edge = |s: &&IdleSeries| edges.contains(&Some(s.cause));
                // The idle of a cause, less an edge's: all of it, or none.
                let kept = |s: &IdleSeries| if edge(&s) { 0 } else { at(&s.ns, i) };
                let removed = total(d.idle_ns.iter().filter(edge).map(|s| at(&s.ns, i)));
                let g = gpu.get_or_insert_with(SteadyGpu::default);
                g.ns += len - scale(removed, len, accounted);
                accounted_total += accounted - removed;
                g.busy_ns += at(&d.busy_ns, i);
                g.transfer_ns += at(&d.transfer_ns, i);
                for series in &d.idle_ns {
                    let kind = match series.cause {
                        IdleCause::AfterSync => IdleKind::AfterSync,
                        IdleCause::PageableCopy => IdleKind::PageableCopy,
                        IdleCause::Alloc => IdleKind::Alloc,
                        IdleCause::Collective => IdleKind::Collective,
                        IdleCause::Host if launching => IdleKind::Launch,
                        IdleCause::Host => IdleKind::Host,
                        IdleCause::Unknown => IdleKind::Unknown,
                    };
                    let ns = kept(series);
                    if ns > 0 {
                        *g.idle.entry(kind).or_default() += ns;
                    }
                    if kind == IdleKind::Host {
                        *host += ns;
                    }
                }
                for series in &d.long_idle_ns {
                    let ns = at(&series.ns, i);
                    if ns > 0 && !edges.contains(&Some(series.cause)) {
                        *g.long_idle
                            .entry((series.cause, series.ended_by))
                            .or_default() += ns;
                    }
                }
                g.short_gaps += at(&d.short_gaps_ended, i);
                g.long_gaps += at(&d.long_gaps_ended, i);
            }
            host_idle.extend(window_host);
            steady_spans.push((start, end));
        }
        // The devices CUPTI recorded, as the busy share pools them (NVML may also report
        // GPUs that another process drives).
        let recorded =
            (process.gpu.iter().flat_map(|g| &g.devices)).filter(|d| d.activity.is_some());
        for device in recorded {
            let active = (device.telemetry.as_ref())
                .and_then(|t| t.series.mean_over(&t.series.sm_active_pct, &steady_spans));
            if let Some(pct) = active {
                sm_active_ns += (pct / 100.0 * steady_ns as f64) as u64;
                sm_ns += steady_ns;
            }
        }
        host_stall += stall(&host_idle);
        if let Some(um) = &t.unified_memory {
            let u = s.unified_memory.get_or_insert_with(Default::default);
            if !u.add(um, counted, steady_ns) {
                u.add(um, |i| axis.loop_windows.contains(&i), steady_ns);
            }
            u.processes += 1;
        }
        let mut syncs: Vec<u64> = Vec::new();
        for e in &t.recent_blocking {
            let explicit = matches!(
                e.kind,
                HostEventKind::Sync(SyncCause::Explicit | SyncCause::SyncCopy)
            );
            let steady_at = axis.phases.iter().any(|ph| {
                ph.kind == PhaseKind::Steady
                    && (ph.start_unix_ns..ph.end_unix_ns).contains(&e.start_unix_ns)
            });
            if explicit && steady_at && inside(e.start_unix_ns) {
                syncs.push(e.start_unix_ns);
            }
        }
        syncs.sort_unstable();
        sync_spacing.extend(syncs.windows(2).map(|p| p[1] - p[0]));
        s.ns += steady_ns;
        for (r, steps) in step_ranges.iter().zip(ended) {
            if steps > 0 {
                let cell = nvtx.entry(&r.name).or_default();
                cell.0 += steps;
                cell.1 += steady_ns;
            }
        }
    }
    if let Some(g) = gpu.as_mut() {
        g.host_stall_ns = host_stall;
    }
    // A GPU never seen working in the steady state has no gaps that a host event opened:
    // its idle time is all one stretch, cut only where sampling periods begin, and a sync
    // that happens to return there would claim all of it. Judge from the host side then,
    // and where records came late, whose time the windows count idle.
    let gpu = gpu.map(|g| g.scaled(accounted_total));
    if let Some(g) = &gpu {
        let busy_share = crate::analysis::diagnose::share(g.busy_ns, g.ns);
        let sm_active_share = (sm_ns > 0)
            .then(|| crate::analysis::diagnose::share(sm_active_ns, sm_ns))
            .filter(|&sm| sm - busy_share >= SM_ACTIVE_OVER_BUSY);
        if sm_active_share.is_some() || fewest_kernels_per_launch.is_some() {
            s.records_missing = Some(RecordsMissing {
                busy_share,
                sm_active_share,
                kernels_per_launch: fewest_kernels_per_launch,
            });
        }
    }
    s.gpu = gpu.filter(|g| g.busy_ns > 0 && s.records_late.is_none());
    s.step = step(&nvtx, sync_spacing);
    s
}

/// A one-off stall in one process's `Host` idle per steady window (`SteadyGpu::host_stall_ns`):
/// the window's idle where it is over twice all the others' together, among three or more.
fn stall(host_idle: &[u64]) -> u64 {
    let largest = host_idle.iter().copied().max().unwrap_or(0);
    if host_idle.len() >= 3 && largest > 2 * (total(host_idle.iter().copied()) - largest) {
        largest
    } else {
        0
    }
}

/// The steady state's step: its time over the steps of the step-like NVTX range with the
/// most steps in it, else the median spacing of the sampled blocking syncs in the steady
/// state, within each process (at least three spacings).
fn step(nvtx: &BTreeMap<&str, (u64, u64)>, mut spacing: Vec<u64>) -> Option<Step> {
    if let Some((name, &(steps, ns))) = nvtx.iter().max_by_key(|(_, &(steps, _))| steps) {
        return Some(Step {
            ns: ns / steps,
            source: StepSource::Nvtx(name.to_string()),
        });
    }
    if spacing.len() < 3 {
        return None;
    }
    spacing.sort_unstable();
    Some(Step {
        ns: spacing[spacing.len() / 2],
        source: StepSource::SyncPeriod,
    })
}

/// Timelines for tests: a process whose windows are described one by one.
#[cfg(test)]
pub mod fixtures {
    use gpuspy_format::timeline::{CauseSeries, DeviceWindows, IdleCause, IdleSeries, Timeline};
    use gpuspy_format::SyncCause;

    pub const MS: u64 = 1_000_000;
    /// The timelines' window 0 starts here.
    pub const T0: u64 = 1_800_000_000_000_000_000;

    /// What one window holds.
    #[derive(Clone, Copy, Default)]
    pub struct W {
        pub launches: u64,
        pub launch_ns: u64,
        pub driver_ns: u64,
        pub module_ns: u64,
        pub init_ns: u64,
        pub blocked_ns: u64,
        pub busy_ns: u64,
        pub idle_after_sync: u64,
        pub idle_host: u64,
    }

    /// `n` copies of `w`.
    pub fn times(n: usize, w: W) -> Vec<W> {
        vec![w; n]
    }

    /// Gives `p`'s first process the timeline `t`, the process running from its first
    /// window to its last.
    pub fn attach(p: &mut crate::analysis::profile::Profile, t: Timeline) {
        let me = &mut p.processes[0];
        me.start_unix_ns = t.start_unix_ns;
        me.stop_unix_ns = t.start_unix_ns + t.host.calls.len() as u64 * t.window_ns;
        me.timeline = Some(Box::new(t));
    }

    /// A timeline of 10 ms windows; with `gpu`, one device observed all the time.
    pub fn timeline(windows: &[W], gpu: bool) -> Timeline {
        let col = |f: fn(&W) -> u64| windows.iter().map(f).collect::<Vec<u64>>();
        let mut t = Timeline {
            start_unix_ns: T0,
            window_ns: 10 * MS,
            ..Timeline::default()
        };
        t.host.calls = col(|w| w.launches);
        t.host.launches = col(|w| w.launches);
        t.host.driver_ns = col(|w| w.driver_ns + w.module_ns + w.init_ns + w.launch_ns);
        t.host.launch_ns = col(|w| w.launch_ns);
        t.host.module_ns = col(|w| w.module_ns);
        t.host.init_ns = col(|w| w.init_ns);
        t.host.blocked_ns = vec![CauseSeries {
            cause: SyncCause::Explicit,
            ns: col(|w| w.blocked_ns),
        }];
        if gpu {
            t.devices = vec![DeviceWindows {
                observed_ns: vec![10 * MS; windows.len()],
                busy_ns: col(|w| w.busy_ns),
                idle_ns: vec![
                    IdleSeries {
                        cause: IdleCause::AfterSync,
                        ns: col(|w| w.idle_after_sync),
                    },
                    IdleSeries {
                        cause: IdleCause::Host,
                        ns: col(|w| w.idle_host),
                    },
                ],
                ..DeviceWindows::default()
            }];
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::analysis::diagnose::synthetic::run;

    /// A profile of one process running `windows` (started at the timeline's start,
    /// dumped at its end).
    fn profile(t: Timeline) -> Profile {
        let mut p = run(t.host.calls.len() as f64 * 0.01).build();
        attach(&mut p, t);
        p
    }

    #[test]
    fn a_sampled_sync_spreads_over_the_windows_it_spans_once() {
        let event = |start: u64, end: u64, kind| HostEvent {
            start_unix_ns: T0 + start,
            end_unix_ns: T0 + end,
            kind,
        };
        let sync = event(5 * MS, 27 * MS, HostEventKind::Sync(SyncCause::Explicit));
        let t = Timeline {
            start_unix_ns: T0,
            window_ns: 10 * MS,
            // The same sync is among the longest and the most recent.
            longest_blocking: vec![sync.clone()],
            recent_blocking: vec![
                sync,
                event(31 * MS, 33 * MS, HostEventKind::Alloc),
                event(32 * MS, 34 * MS, HostEventKind::Sync(SyncCause::Free)),
                event(36 * MS, 45 * MS, HostEventKind::Sync(SyncCause::Explicit)),
            ],
            ..Timeline::default()
        };
        assert_eq!(syncs_spread(&t, 4), vec![5 * MS, 10 * MS, 7 * MS, 4 * MS]);
    }

    /// Each phase's kind and start (ms).
    fn starts(a: &TimeAxis) -> Vec<(PhaseKind, u64)> {
        kinds(a)
            .iter()
            .map(|&(kind, _, start, _)| (kind, start))
            .collect()
    }

    fn kinds(a: &TimeAxis) -> Vec<(PhaseKind, Option<&str>, u64, u64)> {
        a.phases
            .iter()
            .map(|p| {
                (
                    p.kind,
                    p.name.as_deref(),
                    (p.start_unix_ns - T0) / MS,
                    (p.end_unix_ns - T0) / MS,
                )
            })
            .collect()
    }

    /// A window of the loop: 20 launches, blocked 2 ms, GPU busy 6 ms, idle 3 ms after the
    /// sync and 1 ms in host work.
    const LOOP: W = W {
        launches: 20,
        launch_ns: 100_000,
        driver_ns: 2 * MS,
        module_ns: 0,
        init_ns: 0,
        blocked_ns: 2 * MS,
        busy_ns: 6 * MS,
        idle_after_sync: 3 * MS,
        idle_host: MS,
    };
    const QUIET: W = W {
        launches: 0,
        launch_ns: 0,
        driver_ns: 0,
        module_ns: 0,
        init_ns: 0,
        blocked_ns: 0,
        busy_ns: 0,
        idle_after_sync: 0,
        idle_host: 0,
    };

    #[test]
    fn records_late_for_a_tenth_of_the_kernel_time_leave_the_gpu_side_out() {
        use crate::analysis::rules::gpu_data::fixtures::{activity, gpu, h200};
        // 50 loop windows with their GPU side; CUPTI's activity 9 s busy, and `late` ns of
        // kernel time whose records came after it was settled.
        let steady = |late: u64| {
            let mut p = profile(timeline(&times(50, LOOP), true));
            let mut a = activity(9.0);
            a.late_ns = late;
            p.processes[0].gpu = Some(Box::new(gpu(h200(), None, Some(a))));
            time_axis(&p).unwrap().steady.unwrap()
        };
        let kept = steady(980_000_000);
        assert!(
            kept.gpu.is_some() && kept.records_late.is_none(),
            "{kept:?}"
        );
        let left_out = steady(1_000_000_000);
        assert_eq!((left_out.gpu, left_out.records_late), (None, Some(0.1)));
        assert_eq!(left_out.ns, kept.ns);
    }

    #[test]
    fn start_up_loop_jit_pause_loop_teardown() {
        // 300 ms of init, 1.2 s of module loading, 5 windows of light warm-up, 50 loop
        // windows, a 690 ms gap ending in a module load (a JIT compile), 30 loop windows,
        // 20 ms of exit.
        let mut w = times(
            30,
            W {
                init_ns: 10 * MS,
                ..QUIET
            },
        );
        w.extend(times(
            120,
            W {
                module_ns: 9 * MS,
                ..QUIET
            },
        ));
        w.extend(times(
            5,
            W {
                launches: 2,
                ..QUIET
            },
        ));
        w.extend(times(50, LOOP));
        w.extend(times(69, QUIET));
        w.push(W {
            module_ns: MS,
            ..LOOP
        });
        w.extend(times(29, LOOP));
        w.extend(times(2, QUIET));
        let p = profile(timeline(&w, true));
        let a = time_axis(&p).unwrap();
        assert_eq!(
            kinds(&a),
            [
                (PhaseKind::Startup, None, 0, 1500),
                (PhaseKind::Warmup, None, 1500, 1550),
                (PhaseKind::Steady, None, 1550, 2050),
                (PhaseKind::Pause, Some("module loading or JIT"), 2050, 2740),
                (PhaseKind::Steady, None, 2740, 3040),
                (PhaseKind::Teardown, None, 3040, 3060),
            ]
        );
        let startup = &a.processes[0].as_ref().unwrap().startup;
        assert_eq!(
            (
                startup.ns,
                startup.init_ns,
                startup.module_ns,
                startup.outside_driver_ns
            ),
            (1500 * MS, 300 * MS, 1080 * MS, 120 * MS)
        );
        // 80 loop windows: exactly their idle time, by cause; the pause's is not counted.
        let s = a.steady.unwrap();
        assert_eq!(s.ns, 800 * MS);
        assert_eq!(s.host.launches, 80 * 20);
        assert_eq!(s.whole.launches, 80 * 20 + 5 * 2);
        let g = s.gpu.unwrap();
        assert_eq!((g.ns, g.busy_ns), (800 * MS, 480 * MS));
        assert_eq!(
            g.idle,
            BTreeMap::from([(IdleKind::AfterSync, 240 * MS), (IdleKind::Host, 80 * MS)])
        );
        assert!((g.share(IdleKind::AfterSync) - 0.3).abs() < 1e-9);
    }

    #[test]
    fn a_host_pause_before_the_first_launch_is_start_up() {
        // 300 ms of init, a barrier (5 ms blocked, no launch), 500 ms of host work (a model
        // built on the host), then the first launches with the lazy loading of their
        // modules, and the loop: set-up until the first launch, no JIT pause.
        let mut w = times(
            30,
            W {
                init_ns: 10 * MS,
                ..QUIET
            },
        );
        w.push(W {
            driver_ns: 5 * MS,
            blocked_ns: 5 * MS,
            ..QUIET
        });
        w.extend(times(50, QUIET));
        w.push(W {
            module_ns: 2 * MS,
            ..LOOP
        });
        w.extend(times(30, LOOP));
        let a = time_axis(&profile(timeline(&w, true))).unwrap();
        assert_eq!(
            kinds(&a),
            [
                (PhaseKind::Startup, None, 0, 810),
                (PhaseKind::Steady, None, 810, 1120)
            ]
        );
        let startup = &a.processes[0].as_ref().unwrap().startup;
        assert_eq!(
            (
                startup.init_ns,
                startup.module_ns,
                startup.outside_driver_ns
            ),
            (300 * MS, 0, 505 * MS)
        );
    }

    #[test]
    fn the_idle_a_stretch_begins_or_ends_in_is_the_pauses() {
        // 5 loop windows, 690 ms with the host at work and the GPU idle (a JIT compile),
        // the window in which the loop resumes (8 ms of the compile's idle, then 2 ms of
        // work), 20 loop windows.
        let mut w = times(5, LOOP);
        w.extend(times(
            69,
            W {
                idle_host: 10 * MS,
                ..QUIET
            },
        ));
        w.push(W {
            module_ns: MS,
            busy_ns: 2 * MS,
            idle_after_sync: 0,
            idle_host: 8 * MS,
            ..LOOP
        });
        w.extend(times(20, LOOP));
        let s = steady(&profile(timeline(&w, true))).unwrap();
        assert_eq!(s.ns, 260 * MS);
        let g = s.gpu.unwrap();
        // Not counted: the resumed window's 8 ms and the 1 ms of host idle of the window
        // before the pause (the pause's beginning); the first and last windows have
        // nothing beside them.
        assert_eq!((g.ns, g.busy_ns), (251 * MS, 152 * MS));
        assert_eq!(
            g.idle,
            BTreeMap::from([(IdleKind::AfterSync, 75 * MS), (IdleKind::Host, 24 * MS)])
        );
    }

    #[test]
    fn one_window_holding_most_of_the_host_idle_is_a_stall() {
        // 5 loop windows (1 ms of host idle each), the middle one all host idle instead:
        // 10 ms against the others' 4 ms, over twice as much, is a one-off stall.
        let stalled = W {
            busy_ns: 0,
            idle_after_sync: 0,
            idle_host: 10 * MS,
            ..LOOP
        };
        let mut w = times(5, LOOP);
        w[2] = stalled;
        let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
        assert_eq!(
            (g.idle[&IdleKind::Host], g.host_stall_ns),
            (14 * MS, 10 * MS)
        );
        // Two such windows recur: 10 ms against 13 ms.
        w[3] = stalled;
        let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
        assert_eq!((g.idle[&IdleKind::Host], g.host_stall_ns), (23 * MS, 0));
        // One among ten loop windows: 10 ms against 9 ms is not twice as much.
        let mut w = times(10, LOOP);
        w[5] = stalled;
        let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
        assert_eq!((g.idle[&IdleKind::Host], g.host_stall_ns), (19 * MS, 0));
    }

    #[test]
    fn recurring_gaps_are_the_loop_and_a_single_one_is_a_pause() {
        // 12 ms of work, then 150 ms without: five times. The gaps recur, so they are the
        // steady state (a loop starved of data), not pauses.
        let mut w = Vec::new();
        for _ in 0..5 {
            w.extend(times(2, LOOP));
            w.extend(times(15, QUIET));
        }
        w.extend(times(2, LOOP));
        let a = time_axis(&profile(timeline(&w, false))).unwrap();
        assert_eq!(
            kinds(&a),
            [(PhaseKind::Steady, None, 0, 870)],
            "{:?}",
            a.phases
        );
        // Three 250 ms checkpoints, each after 140 ms of steps (a short loop of
        // examples/staged.py healthy-pauses): rare, with many steps between, so pauses,
        // though they take more than half the loop.
        let mut w = times(14, LOOP);
        for _ in 0..3 {
            w.extend(times(25, QUIET));
            w.extend(times(14, LOOP));
        }
        let a = time_axis(&profile(timeline(&w, false))).unwrap();
        assert_eq!(
            starts(&a),
            [
                (PhaseKind::Steady, 0),
                (PhaseKind::Pause, 140),
                (PhaseKind::Steady, 390),
                (PhaseKind::Pause, 530),
                (PhaseKind::Steady, 780),
                (PhaseKind::Pause, 920),
                (PhaseKind::Steady, 1170),
            ]
        );
        // The same at 40 ms windows (a longer start-up widened them): 2-3 windows of steps
        // between checkpoints of 7 windows are still many steps, so pauses.
        let wide = |w: W| W {
            launches: 4 * w.launches,
            launch_ns: 4 * w.launch_ns,
            driver_ns: 4 * w.driver_ns,
            blocked_ns: 4 * w.blocked_ns,
            busy_ns: 4 * w.busy_ns,
            idle_after_sync: 4 * w.idle_after_sync,
            idle_host: 4 * w.idle_host,
            ..w
        };
        let mut w = times(3, wide(LOOP));
        for steps in [2, 3, 2] {
            w.extend(times(7, wide(QUIET)));
            w.extend(times(steps, wide(LOOP)));
        }
        let mut t = timeline(&w, false);
        t.window_ns = 40 * MS;
        let a = time_axis(&profile(t)).unwrap();
        assert_eq!(
            starts(&a),
            [
                (PhaseKind::Steady, 0),
                (PhaseKind::Pause, 120),
                (PhaseKind::Steady, 400),
                (PhaseKind::Pause, 480),
                (PhaseKind::Steady, 760),
                (PhaseKind::Pause, 880),
                (PhaseKind::Steady, 1160),
            ]
        );
        // The same three gaps with one step (two windows) between them are the loop's.
        let mut w = times(2, LOOP);
        for _ in 0..3 {
            w.extend(times(25, QUIET));
            w.extend(times(2, LOOP));
        }
        let a = time_axis(&profile(timeline(&w, false))).unwrap();
        assert_eq!(kinds(&a), [(PhaseKind::Steady, None, 0, 830)]);
        // One such gap in a long loop is a pause without a name.
        let mut w = times(40, LOOP);
        w.extend(times(15, QUIET));
        w.extend(times(40, LOOP));
        let a = time_axis(&profile(timeline(&w, false))).unwrap();
        assert_eq!(
            kinds(&a),
            [
                (PhaseKind::Steady, None, 0, 400),
                (PhaseKind::Pause, None, 400, 550),
                (PhaseKind::Steady, None, 550, 950)
            ]
        );
        // Without the GPU side, the steady state's host counters still add up.
        let s = a.steady.unwrap();
        assert_eq!(
            (s.ns, s.host.blocked_ns(&[SyncCause::Explicit])),
            (800 * MS, 160 * MS)
        );
        assert_eq!(s.gpu, None);
    }

    #[test]
    fn host_idle_at_a_high_launch_rate_is_launch_overhead() {
        // 200 launches in 10 ms (20,000/s): the host idle time is the launches'.
        let busy = W {
            launches: 200,
            idle_host: 7 * MS,
            busy_ns: 3 * MS,
            ..QUIET
        };
        let slow = W {
            launches: 20,
            idle_host: 7 * MS,
            busy_ns: 3 * MS,
            ..QUIET
        };
        let mut w = times(10, busy);
        w.extend(times(
            10,
            W {
                launches: 100,
                launch_ns: 6 * MS,
                ..slow
            },
        ));
        // Eleven slow windows: the last, below half the median rate, is where the loop
        // ended, teardown.
        w.extend(times(11, slow));
        let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
        assert_eq!(
            g.idle,
            BTreeMap::from([(IdleKind::Launch, 140 * MS), (IdleKind::Host, 70 * MS)])
        );
    }

    #[test]
    fn a_window_spent_waiting_on_work_cupti_did_not_show_is_not_the_loops_idle() {
        // 10 loop windows (busy 6 ms, idle 3 + 1 ms, the host blocked 2 ms), then 2 in
        // which the host waited 8 ms in syncs while the device recorded 0.1 ms of busy time
        // and 9.9 ms of idle after the syncs (prefetches it does not show, or a recording
        // period that opened as the loop ended): left out, the loop's shares stand.
        let unseen = W {
            blocked_ns: 8 * MS,
            busy_ns: MS / 10,
            idle_after_sync: 99 * MS / 10,
            idle_host: 0,
            ..LOOP
        };
        let mut w = times(10, LOOP);
        w.extend(times(2, unseen));
        w.extend(times(10, LOOP));
        let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
        assert_eq!((g.ns, g.busy_ns), (200 * MS, 120 * MS));
        assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS);
        // The same with a second device, busy all along: the host may have waited on it
        // while the first idled, so the first's idle counts.
        let mut t = timeline(&w, true);
        let mut second = t.devices[0].clone();
        second.ordinal = 1;
        second.busy_ns = vec![10 * MS; w.len()];
        second
            .idle_ns
            .iter_mut()
            .for_each(|s| s.ns = vec![0; w.len()]);
        t.devices.push(second);
        let g = steady(&profile(t)).unwrap().gpu.unwrap();
        assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS + 2 * 99 * MS / 10);
    }

    #[test]
    fn copies_between_steps_are_a_pause() {
        use gpuspy_format::timeline::CauseSeries;
        // A checkpoint: 15 windows of copies only (120 ms blocked in pageable copies to the
        // host, no launch, the GPU idle) between two stretches of the loop.
        let copies = W {
            blocked_ns: 8 * MS,
            ..W::default()
        };
        let mut w = times(20, LOOP);
        w.extend(times(15, copies));
        w.extend(times(20, LOOP));
        let mut t = timeline(&w, false);
        for i in 20..35 {
            t.host.blocked_ns[0].ns[i] = 0;
        }
        t.host.blocked_ns.push(CauseSeries {
            cause: SyncCause::PageableAsyncCopy,
            ns: (0..55)
                .map(|i| if (20..35).contains(&i) { 8 * MS } else { 0 })
                .collect(),
        });
        let a = time_axis(&profile(t)).unwrap();
        assert_eq!(
            starts(&a),
            [
                (PhaseKind::Steady, 0),
                (PhaseKind::Pause, 200),
                (PhaseKind::Steady, 350)
            ]
        );
    }

    #[test]
    fn copies_after_the_last_step_are_teardown() {
        // 20 loop windows, then 5 in which the host only copies (blocked 8 ms in pageable
        // copies each, the GPU idle), the model moved back to the host: teardown.
        let mut w = times(20, LOOP);
        w.extend(times(
            5,
            W {
                blocked_ns: 8 * MS,
                ..W::default()
            },
        ));
        let mut t = timeline(&w, false);
        t.host.blocked_ns[0].cause = SyncCause::PageableAsyncCopy;
        let a = time_axis(&profile(t.clone())).unwrap();
        assert_eq!(
            starts(&a),
            [(PhaseKind::Steady, 0), (PhaseKind::Teardown, 200)]
        );
        // Blocked in explicit syncs instead, the host waited for the loop's GPU work: only
        // the last window, below half the usual rate, is teardown.
        t.host.blocked_ns[0].cause = SyncCause::Explicit;
        let a = time_axis(&profile(t)).unwrap();
        assert_eq!(
            starts(&a),
            [(PhaseKind::Steady, 0), (PhaseKind::Teardown, 240)]
        );
    }

    #[test]
    fn a_last_window_below_half_the_usual_rate_is_where_the_loop_ended() {
        // 20 loop windows of 20 launches, then one of 9 (the loop ended in it): teardown.
        let mut w = times(20, LOOP);
        w.push(W {
            launches: 9,
            ..LOOP
        });
        let a = time_axis(&profile(timeline(&w, false))).unwrap();
        assert_eq!(
            starts(&a),
            [(PhaseKind::Steady, 0), (PhaseKind::Teardown, 200)]
        );
        // One of 10, half the usual rate: still the loop's.
        w.last_mut().unwrap().launches = 10;
        let a = time_axis(&profile(timeline(&w, false))).unwrap();
        assert_eq!(starts(&a), [(PhaseKind::Steady, 0)]);
    }

    #[test]
    fn shares_are_of_the_device_time_accounted_for() {
        // 10 loop windows (busy 6 ms, idle 3 + 1 ms); 4 more observed 10 ms but with
        // neither busy nor idle time (a sampling period that saw no record); 6 in which
        // CUPTI accounted for 1 ms of the 10 observed (busy 0.6, idle 0.3 + 0.1).
        let mut w = times(10, LOOP);
        w.extend(times(
            4,
            W {
                busy_ns: 0,
                idle_after_sync: 0,
                idle_host: 0,
                ..LOOP
            },
        ));
        w.extend(times(
            6,
            W {
                busy_ns: 600_000,
                idle_after_sync: 300_000,
                idle_host: 100_000,
                ..LOOP
            },
        ));
        let s = steady(&profile(timeline(&w, true))).unwrap();
        assert_eq!(s.ns, 200 * MS);
        let g = s.gpu.unwrap();
        // The 16 accounted windows, each scaled to its 10 ms: 96 ms busy, 48 + 16 ms idle.
        assert_eq!((g.ns, g.busy_ns), (160 * MS, 96 * MS));
        assert_eq!(
            g.idle,
            BTreeMap::from([(IdleKind::AfterSync, 48 * MS), (IdleKind::Host, 16 * MS)])
        );
        assert!((g.share(IdleKind::AfterSync) - 0.3).abs() < 1e-9);
    }

    #[test]
    fn the_idle_the_loop_ends_in_is_not_the_steady_states() {
        // 20 loop windows, then the last one, whose final sync returns after 2 ms of work
        // and leaves the GPU idle for good: 8 ms of it is the end of the loop, as the
        // idle windows after it say.
        let mut w = times(20, LOOP);
        w.push(W {
            busy_ns: 2 * MS,
            idle_after_sync: 8 * MS,
            idle_host: 0,
            ..LOOP
        });
        w.extend(times(
            10,
            W {
                idle_after_sync: 10 * MS,
                ..QUIET
            },
        ));
        let s = steady(&profile(timeline(&w, true))).unwrap();
        assert_eq!(s.ns, 210 * MS);
        let g = s.gpu.unwrap();
        assert_eq!((g.ns, g.busy_ns), (202 * MS, 122 * MS));
        assert_eq!(
            g.idle,
            BTreeMap::from([(IdleKind::AfterSync, 60 * MS), (IdleKind::Host, 20 * MS)])
        );
        // Where the loop goes on after that window, its 8 ms are the loop's.
        w.truncate(21);
        w.push(LOOP);
        let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
        assert_eq!(g.idle[&IdleKind::AfterSync], (21 * 3 + 8) * MS);
    }

    #[test]
    fn long_gap_sums_follow_the_idle_they_are_part_of() {
        use gpuspy_format::timeline::LongIdleSeries;
        // The loop's end as above: 20 loop windows, then the one whose last 8 ms after the
        // final sync begin the idle after the loop. Per loop window, 2 of the 3 ms after
        // syncs lie in a long gap a kernel ended, the 1 ms of host work in one that a copy
        // to the device ended, between 5 short gaps.
        let mut w = times(20, LOOP);
        w.push(W {
            busy_ns: 2 * MS,
            idle_after_sync: 8 * MS,
            idle_host: 0,
            ..LOOP
        });
        w.extend(times(
            10,
            W {
                idle_after_sync: 10 * MS,
                ..QUIET
            },
        ));
        let mut t = timeline(&w, true);
        let in_loop = |ns: u64, edge: u64, after: u64| {
            let mut v = vec![ns; 20];
            v.push(edge);
            v.extend([after; 10]);
            v
        };
        let d = &mut t.devices[0];
        d.long_idle_ns = vec![
            LongIdleSeries {
                cause: IdleCause::AfterSync,
                ended_by: GapEnd::Kernel,
                ns: in_loop(2 * MS, 0, 0),
            },
            LongIdleSeries {
                cause: IdleCause::AfterSync,
                ended_by: GapEnd::NotObserved,
                ns: in_loop(0, 8 * MS, 10 * MS),
            },
            LongIdleSeries {
                cause: IdleCause::Host,
                ended_by: GapEnd::CopyToDevice,
                ns: in_loop(MS, 0, 0),
            },
        ];
        d.short_gaps_ended = in_loop(5, 1, 0);
        d.long_gaps_ended = in_loop(2, 0, 0);
        let g = steady(&profile(t.clone())).unwrap().gpu.unwrap();
        // The edge's idle after the sync leaves with its part in the long gap.
        assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS);
        assert_eq!(
            g.long_idle,
            BTreeMap::from([
                ((IdleCause::AfterSync, GapEnd::Kernel), 40 * MS),
                ((IdleCause::Host, GapEnd::CopyToDevice), 20 * MS),
            ])
        );
        assert_eq!((g.short_gaps, g.long_gaps), (101, 40));
        // A tenth of each window recorded, the same gaps ending in it: all scaled by 10.
        let d = &mut t.devices[0];
        let idle = d.idle_ns.iter_mut().map(|s| &mut s.ns);
        let long = d.long_idle_ns.iter_mut().map(|s| &mut s.ns);
        for s in idle.chain(long).chain([&mut d.busy_ns]) {
            s.iter_mut().for_each(|v| *v /= 10);
        }
        let g = steady(&profile(t)).unwrap().gpu.unwrap();
        assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS);
        assert_eq!(
            g.long_idle[&(IdleCause::Host, GapEnd::CopyToDevice)],
            20 * MS
        );
        assert_eq!((g.short_gaps, g.long_gaps), (1010, 400));
    }

    #[test]
    fn a_window_with_little_recorded_weighs_little() {
        // 10 windows fully recorded with the GPU idle, 10 in which only a sampling period's
        // 10 µs tail of busy time was recorded: the GPU was busy 100 µs of the 100.1 ms
        // recorded, not half the time (scaling each window to its length would say 50 %).
        let mut w = times(
            10,
            W {
                busy_ns: 0,
                idle_after_sync: 0,
                idle_host: 10 * MS,
                ..LOOP
            },
        );
        w.extend(times(
            10,
            W {
                busy_ns: 10_000,
                idle_after_sync: 0,
                idle_host: 0,
                ..LOOP
            },
        ));
        let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
        assert_eq!(g.ns, 200 * MS);
        assert_eq!(g.busy_ns, 199_800);
        assert_eq!(g.idle_ns(), 199_800_199);
    }

    #[test]
    fn nvtx_names_pauses_and_steps() {
        use gpuspy_format::timeline::NvtxRanges;
        let mut t = timeline(&times(60, LOOP), false);
        let mut eval = vec![0; 60];
        eval[20..30].fill(10 * MS);
        // 100 steps of 2.5 ms of host time, one every 5 ms, around the evaluation.
        let mut ends = vec![2; 60];
        ends[20..30].fill(0);
        t.nvtx = vec![
            NvtxRanges {
                name: "train_step".into(),
                count: 100,
                total_ns: 250 * MS,
                ns: ends.iter().map(|n| n * 2_500_000).collect(),
                ends,
                ..NvtxRanges::default()
            },
            NvtxRanges {
                name: "evaluate".into(),
                count: 1,
                total_ns: 100 * MS,
                ns: eval,
                ..NvtxRanges::default()
            },
        ];
        let a = time_axis(&profile(t)).unwrap();
        assert_eq!(kinds(&a)[1], (PhaseKind::Pause, Some("evaluate"), 200, 300));
        let step = a.steady.unwrap().step.unwrap();
        assert_eq!(step.ns, 5 * MS);
        assert_eq!(step.source, StepSource::Nvtx("train_step".into()));
    }

    #[test]
    fn a_checkpoint_range_waiting_for_queued_steps_is_the_loop_until_the_gpu_drains() {
        // The H200's healthy-pauses --nvtx: steps queue in window 20 (launches, a step
        // range); the checkpoint range opens there and its first copy waits in windows
        // 20-21 while the GPU runs the queued steps, then the host writes the checkpoint
        // (windows 22-29, GPU idle).
        use gpuspy_format::timeline::NvtxRanges;
        let mut w = times(20, LOOP);
        w.push(W {
            busy_ns: 8 * MS,
            idle_after_sync: 2 * MS,
            idle_host: 0,
            ..LOOP
        });
        w.push(W {
            launches: 0,
            busy_ns: 9 * MS,
            idle_after_sync: MS,
            idle_host: 0,
            ..LOOP
        });
        w.extend(times(8, QUIET));
        w.extend(times(30, LOOP));
        let mut t = timeline(&w, true);
        let mut step = vec![MS; 60];
        step[21..30].fill(0);
        let mut checkpoint = vec![0; 60];
        checkpoint[20] = 6 * MS;
        checkpoint[21..30].fill(10 * MS);
        t.nvtx = vec![
            NvtxRanges {
                name: "step".into(),
                count: 500,
                outermost: 500,
                total_ns: 50 * MS,
                ns: step,
                ..NvtxRanges::default()
            },
            NvtxRanges {
                name: "checkpoint".into(),
                count: 1,
                outermost: 1,
                total_ns: 96 * MS,
                ns: checkpoint,
                ..NvtxRanges::default()
            },
        ];
        let a = time_axis(&profile(t)).unwrap();
        assert_eq!(
            kinds(&a)[..3],
            [
                (PhaseKind::Steady, None, 0, 220),
                (PhaseKind::Pause, Some("checkpoint"), 220, 300),
                (PhaseKind::Steady, None, 300, 600)
            ]
        );
    }

    #[test]
    fn the_job_is_steady_where_every_rank_is() {
        // Rank 1 starts its loop 100 ms after rank 0 and both stop together.
        let rank = |offset: usize, pid: u32| {
            let mut w = times(
                10 + offset,
                W {
                    init_ns: 10 * MS,
                    ..QUIET
                },
            );
            w.extend(times(50 - offset, LOOP));
            let mut p = profile(timeline(&w, true));
            p.processes[0].pid = pid;
            p
        };
        let mut p = rank(0, 1);
        p.absorb(rank(10, 2));
        let a = time_axis(&p).unwrap();
        assert_eq!(
            kinds(&a),
            [
                (PhaseKind::Startup, None, 0, 200),
                (PhaseKind::Steady, None, 200, 600)
            ]
        );
        // Both ranks' windows in the common span: 2 x 40.
        assert_eq!(a.steady.as_ref().unwrap().ns, 800 * MS);
        // A launcher's agent, making calls but no GPU work for 100 ms in the middle, changes
        // nothing.
        let mut agent = profile(timeline(&times(60, QUIET), false));
        agent.processes[0].pid = 3;
        agent.processes[0].timeline.as_mut().unwrap().host.calls[30..40].fill(5);
        p.absorb(agent);
        let with_agent = time_axis(&p).unwrap();
        assert_eq!(kinds(&with_agent), kinds(&a));
        assert_eq!(with_agent.steady, a.steady);
    }

    #[test]
    fn a_process_without_work_is_all_start_up_and_old_dumps_have_no_axis() {
        let a = time_axis(&profile(timeline(&times(5, QUIET), false))).unwrap();
        assert_eq!(kinds(&a), [(PhaseKind::Startup, None, 0, 50)]);
        assert!(a.steady.is_none());
        assert!(time_axis(&run(1.0).build()).is_none());
    }
}
