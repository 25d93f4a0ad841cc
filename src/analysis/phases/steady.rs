//! The steady state, summed over the processes: host counters, the GPU side and the causes
//! of its idle time, unified memory, the step, and whether CUPTI's records are complete.

use super::phase::PhaseKind;
use super::process::ProcessAxis;
use super::ranges::is_step_name;
use super::windows::{accounted_ns, at, scale, Windows};
use crate::analysis::profile::{total, Profile};
use gpuspy_format::timeline::{
    DeviceWindows, GapEnd, HostEventKind, HostWindows, IdleCause, IdleSeries, UnifiedMemoryWindows,
};
use gpuspy_format::{Direction, HostKind, SyncCause};
use serde::Serialize;
use std::collections::BTreeMap;

/// Host idle time in a window that launches at least once per this much time (10,000
/// launches a second, the launch-bound rule's rate), or spends half of it launching, is
/// launch overhead; otherwise host work (data loading, Python).
pub const LAUNCH_GAP_NS: u64 = 100_000;

/// A loop launching this many kernels a window on average runs no kernel that lasts a
/// window, so a window without a launch is one the GPU had nothing to run (unless work
/// queued before it still ran, which a GPU busy most of the observed time may have).
const LAUNCHES_PER_WINDOW_MIN: u64 = 10;

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
        crate::units::share(self.idle.get(&kind).copied().unwrap_or(0), self.ns)
    }

    /// The share of the steady device time the GPU ran kernels or transfers.
    pub fn busy_share(&self) -> f64 {
        crate::units::share(self.busy_ns + self.transfer_ns, self.ns)
    }

    /// The share of the steady device time idle in gaps of `timeline::LONG_GAP_NS` or more
    /// that began with the host in `cause`.
    pub fn long_share(&self, cause: IdleCause) -> f64 {
        let ns = self.long_idle.iter().filter(|((c, _), _)| *c == cause);
        crate::units::share(total(ns.map(|(_, &ns)| ns)), self.ns)
    }

    /// The share of launching idle that comes back once the host no longer waits `freed`
    /// (a share of the steady state) in gaps long enough to drain the queue: after each
    /// such wait the GPU idles between the first launches of the next step until the host
    /// gets ahead of it. The host gets ahead by at most the time it no longer waits, and
    /// only while the GPU runs something longer than a launch: the refill's idle comes
    /// back up to both. A per-op dispatch loop (JAX without `jit`, GPU busy 1 %) has no
    /// queue to refill, and its launching idle stays `launch-bound`'s.
    pub fn refill_share(&self, freed: f64) -> f64 {
        self.share(IdleKind::Launch)
            .min(freed.max(0.0))
            .min(self.busy_share())
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
    /// Of them, the bytes copied to the host.
    pub pageable_to_host_bytes: u64,
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
        let pageable = || h.copy_bytes.iter().filter(|c| c.host == HostKind::Pageable);
        self.pageable_bytes += total(pageable().map(|c| at(&c.bytes, i)));
        self.pageable_to_host_bytes += total(
            pageable()
                .filter(|c| c.direction == Direction::DtoH)
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

/// The causes of "host blocked in syncs", the one figure every view and `gpuspy check`
/// show: the calls that wait for the GPU's queue to drain. Pageable copies and frees block
/// too, but each has its own rule and its own row in the sync table.
pub const HOST_BLOCKED_CAUSES: [SyncCause; 2] = [SyncCause::Explicit, SyncCause::SyncCopy];

impl SteadyState {
    /// Host time blocked in `HOST_BLOCKED_CAUSES`. Syncs are filed into the window where
    /// the writer saw them end, so the steady windows can hold a little more blocked time
    /// than their length: capped at it, so that the share is never over 1.
    pub fn host_blocked_ns(&self) -> u64 {
        self.host.blocked_ns(&HOST_BLOCKED_CAUSES).min(self.ns)
    }

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
/// not identified" at 91 % by NVML, bench/results/gpu-2026-12-01-run15-phases-14);
/// every other staged run under 8 %.
pub const LATE_RECORDS_SHARE: f64 = 0.10;

/// GPM's SM activity (cycles with a warp resident, averaged over the SMs) over the steady
/// state at least this far above CUPTI's busy share means that the records of kernels that
/// ran are missing: an SM is active only while a kernel runs. CUPTI
/// discards the records of kernels still queued when a recording period closes (gpu-truth-
/// facts.md, A.6); a loop that queues matmuls far ahead then leaves periods that read idle.
/// In the 594 staged runs of rounds 1-17 on the H200 with GPM and a steady GPU side
/// (bench/results/calib-2026-12-01-run16.txt) GPM read at most 0.33 above CUPTI (0.37
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
        .then(|| crate::units::share(kernels, process.launches))
}

/// The largest share of a device's recorded kernel time, among `process`'s devices, whose
/// records came late.
fn late_share(process: &crate::analysis::profile::ProcessInfo) -> f64 {
    let shares =
        (process.activities()).map(|a| crate::units::share(a.late_ns, a.busy_ns + a.late_ns));
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

/// Sums the steady windows of every process (those inside `clip`, where given).
pub(super) fn steady_state(
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
    // Steady windows CUPTI did not observe, without a launch or a blocking call, in
    // processes whose loop launches in every window (`LAUNCHES_PER_WINDOW_MIN`).
    let mut launchless_ns = 0u64;
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
        // (input-starved 38 %, bench/results/gpu-2026-12-01-run11-phases-3).
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
        let (mut windows, mut launches, mut process_launchless) = (0u64, 0u64, 0u64);
        for i in (0..w.n).filter(|&i| counted(i)) {
            let (start, end) = w.span(i);
            let len = end - start;
            steady_ns += len;
            windows += 1;
            launches += at(&h.launches, i) + at(&h.graph_launches, i);
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
            // CUPTI, sampled, may have been off for a whole window in which the host launched
            // nothing and waited on nothing: the GPU had nothing to run, whatever CUPTI saw.
            if let [d] = &t.devices[..] {
                if accounted_ns(d, i) == 0
                    && at(&h.launches, i) == 0
                    && at(&h.graph_launches, i) == 0
                    && w.blocked(i) == 0
                {
                    process_launchless += len;
                }
            }
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
                // Launch overhead opens gaps of microseconds: in a window launching at the
                // launch-bound rate, the host's idle in gaps of `LONG_GAP_NS` or more is still
                // host work (a batch awaited between steps), not dispatch.
                let long_host = if edges.contains(&Some(IdleCause::Host)) {
                    0
                } else {
                    total(
                        (d.long_idle_ns.iter())
                            .filter(|l| l.cause == IdleCause::Host)
                            .map(|l| at(&l.ns, i)),
                    )
                };
                for series in &d.idle_ns {
                    let ns = kept(series);
                    // The part of `ns` that is host work although the window launches fast.
                    let (kind, waited) = match series.cause {
                        IdleCause::AfterSync => (IdleKind::AfterSync, 0),
                        IdleCause::PageableCopy => (IdleKind::PageableCopy, 0),
                        IdleCause::Alloc => (IdleKind::Alloc, 0),
                        IdleCause::Collective => (IdleKind::Collective, 0),
                        IdleCause::Host if launching => (IdleKind::Launch, long_host.min(ns)),
                        IdleCause::Host => (IdleKind::Host, 0),
                        IdleCause::Unknown => (IdleKind::Unknown, 0),
                    };
                    for (kind, ns) in [(kind, ns - waited), (IdleKind::Host, waited)] {
                        if ns > 0 {
                            *g.idle.entry(kind).or_default() += ns;
                        }
                        if kind == IdleKind::Host {
                            *host += ns;
                        }
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
        if launches >= LAUNCHES_PER_WINDOW_MIN * windows {
            launchless_ns += process_launchless;
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
    let gpu = gpu.map(|g| {
        let mut g = g.scaled(accounted_total);
        // Unless the GPU was busy most of the time observed, when work queued before such a
        // window may have run through it, a launchless window is idle host time.
        if 2 * g.busy_ns < g.ns && launchless_ns > 0 {
            g.ns += launchless_ns;
            *g.idle.entry(IdleKind::Host).or_default() += launchless_ns;
        }
        g
    });
    if let Some(g) = &gpu {
        let busy_share = crate::units::share(g.busy_ns, g.ns);
        let sm_active_share = (sm_ns > 0)
            .then(|| crate::units::share(sm_active_ns, sm_ns))
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
