//! The report's time axis, plot-ready (`Report::timelines`): every process's timeline
//! (dump schema 2), its CUPTI busy series and its NVML telemetry series put on one grid of
//! the job, as rates and shares, plus the sampled events with their times. The HTML
//! report and the Perfetto trace draw these and compute nothing.
//!
//! Each source slot's amount (calls, ns) is spread over the grid slots it overlaps in
//! proportion to the overlap, so sums are kept whatever the source's window; a share is
//! such a spread numerator over a spread denominator; a sampled gauge (watts, MHz) is a
//! time-weighted mean.
//!
//! Bounded whatever the job: the job grid has at most `JOB_SLOTS` slots; the processes'
//! grids together at most `PROCESS_SLOTS` (a grid per process coarser by a power of two
//! when there are many), and their sampled events at most `PROCESS_EVENTS` in all.

use crate::analysis::profile::ProcessInfo;
use gpuspy_format::gpu::Device;
use gpuspy_format::timeline::{HostEvent, HostEventKind, IdleCause, IdleGap, Timeline};
use gpuspy_format::SyncCause;
use serde::Serialize;
use std::collections::BTreeMap;

/// The most slots of the job's grid.
pub const JOB_SLOTS: usize = 256;
/// The most slots of all processes' grids together (1,000 ranks get 8 each).
pub const PROCESS_SLOTS: usize = 8_192;
/// The most sampled events (blocking calls, idle gaps) kept over all processes.
pub const PROCESS_EVENTS: usize = 16_384;

/// Slot `i` of a grid covers `[start_unix_ns + i * step_ns, start_unix_ns + (i + 1) * step_ns)`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Grid {
    pub start_unix_ns: u64,
    pub step_ns: u64,
    pub slots: usize,
}

#[derive(Serialize)]
pub struct Timelines {
    /// The job: all processes summed (rates) or pooled (shares, means).
    pub grid: Grid,
    pub job: Series,
    /// One per process, in the report's process order, on `process_grid`: the job's grid,
    /// or one coarser by a power of two when many processes share `PROCESS_SLOTS`.
    pub process_grid: Grid,
    pub processes: Vec<ProcessSeries>,
}

/// Quantities per slot. A share is None where nothing measured it (no device observed,
/// no telemetry sample).
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Series {
    /// Outermost driver calls and kernel launches per second, all threads.
    pub calls_per_s: Vec<f64>,
    pub launches_per_s: Vec<f64>,
    /// Host threads blocked per sync cause: seconds blocked per second (can pass 1 with
    /// several threads). Only causes that occurred.
    pub blocked: Vec<CauseSeries<SyncCause, f64>>,
    /// Kernel busy time over the time observed (CUPTI), pooled over devices.
    pub gpu_busy_share: Vec<Option<f64>>,
    /// GPU idle time per cause over the time observed. Only causes that occurred.
    pub gpu_idle: Vec<CauseSeries<IdleCause, Option<f64>>>,
    /// NVML telemetry, time-weighted means over the devices' samples.
    pub gpu_util_pct: Vec<Option<f64>>,
    pub sm_clock_mhz: Vec<Option<f64>>,
    pub power_w: Vec<Option<f64>>,
    pub gpu_temp_c: Vec<Option<f64>>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct CauseSeries<C, V> {
    pub cause: C,
    pub values: Vec<V>,
}

#[derive(Serialize)]
pub struct ProcessSeries {
    pub pid: u32,
    pub rank: Option<u32>,
    pub series: Series,
    /// Per device with telemetry: its own NVML series.
    pub devices: Vec<DeviceSeries>,
    /// Sampled blocking host calls (longest and most recent), by start.
    pub blocking: Vec<HostEvent>,
    /// Sampled GPU idle gaps of 1 ms or more (longest and most recent), by start.
    pub idle_gaps: Vec<DeviceGap>,
}

#[derive(Serialize)]
pub struct DeviceSeries {
    pub ordinal: u32,
    pub gpu_util_pct: Vec<Option<f64>>,
    pub sm_clock_mhz: Vec<Option<f64>>,
    pub power_w: Vec<Option<f64>>,
    pub gpu_temp_c: Vec<Option<f64>>,
}

#[derive(Serialize)]
pub struct DeviceGap {
    pub ordinal: u32,
    #[serde(flatten)]
    pub gap: IdleGap,
}

impl Grid {
    /// The grid of `[start, end)` in at most `JOB_SLOTS` slots of whole nanoseconds.
    fn covering(start: u64, end: u64) -> Grid {
        let span = end.saturating_sub(start).max(1);
        let step_ns = span.div_ceil(JOB_SLOTS as u64);
        Grid {
            start_unix_ns: start,
            step_ns,
            slots: span.div_ceil(step_ns) as usize,
        }
    }

    /// This grid with slots `factor` times wider.
    fn coarser(self, factor: usize) -> Grid {
        Grid {
            start_unix_ns: self.start_unix_ns,
            step_ns: self.step_ns * factor as u64,
            slots: self.slots.div_ceil(factor),
        }
    }

    fn zeros(&self) -> Vec<f64> {
        vec![0.0; self.slots]
    }

    /// Adds `amounts` (slot `i` covering `[start + i * step, start + (i + 1) * step)`) to
    /// `into`, each in proportion to its overlap with each slot of this grid.
    fn spread(&self, into: &mut [f64], start: u64, step: u64, amounts: impl Iterator<Item = f64>) {
        if step == 0 {
            return;
        }
        let end_of_grid = self.start_unix_ns + self.step_ns * self.slots as u64;
        for (i, amount) in amounts.enumerate() {
            let lo = start.saturating_add(i as u64 * step);
            let hi = lo.saturating_add(step);
            let mut at = lo.max(self.start_unix_ns);
            while at < hi.min(end_of_grid) {
                let slot = ((at - self.start_unix_ns) / self.step_ns) as usize;
                let slot_end = self.start_unix_ns + (slot as u64 + 1) * self.step_ns;
                let part = slot_end.min(hi) - at;
                into[slot] += amount * part as f64 / step as f64;
                at = slot_end;
            }
        }
    }
}

/// A process's amounts on a grid, before they become rates and shares; summed over
/// processes for the job.
struct Amounts {
    calls: Vec<f64>,
    launches: Vec<f64>,
    blocked: BTreeMap<SyncCause, Vec<f64>>,
    busy: Vec<f64>,
    observed: Vec<f64>,
    idle: BTreeMap<IdleCause, Vec<f64>>,
    /// Per telemetry quantity: value times time, and time sampled.
    telemetry: [(Vec<f64>, Vec<f64>); 4],
}

impl Amounts {
    fn new(g: &Grid) -> Amounts {
        Amounts {
            calls: g.zeros(),
            launches: g.zeros(),
            blocked: BTreeMap::new(),
            busy: g.zeros(),
            observed: g.zeros(),
            idle: BTreeMap::new(),
            telemetry: std::array::from_fn(|_| (g.zeros(), g.zeros())),
        }
    }

    fn of(pr: &ProcessInfo, g: &Grid) -> Amounts {
        let mut a = Amounts::new(g);
        let counts = |s: &[u64]| s.iter().map(|&v| v as f64).collect::<Vec<f64>>();
        if let Some(t) = &pr.timeline {
            let on = |into: &mut Vec<f64>, s: &[u64]| {
                g.spread(into, t.start_unix_ns, t.window_ns, counts(s).into_iter())
            };
            on(&mut a.calls, &t.host.calls);
            on(&mut a.launches, &t.host.launches);
            for (cause, ns) in blocked_windows(t, pr.threads, pr.stop_unix_ns) {
                let into = a.blocked.entry(cause).or_insert_with(|| g.zeros());
                g.spread(into, t.start_unix_ns, t.window_ns, ns.into_iter());
            }
            for d in &t.devices {
                on(&mut a.busy, &d.busy_ns);
                let accounted: Vec<u64> = (0..d.observed_ns.len())
                    .map(|i| crate::analysis::phases::accounted_ns(d, i))
                    .collect();
                on(&mut a.observed, &accounted);
                for c in &d.idle_ns {
                    on(a.idle.entry(c.cause).or_insert_with(|| g.zeros()), &c.ns);
                }
            }
        }
        for dev in pr.gpu.iter().flat_map(|gpu| &gpu.devices) {
            a.add_device(dev, g, pr.timeline.as_deref());
        }
        a
    }

    /// A device's NVML series, and its CUPTI busy series where the timeline has no
    /// window of its own for the device (dumps of schema 1).
    fn add_device(&mut self, dev: &Device, g: &Grid, timeline: Option<&Timeline>) {
        if let Some(t) = &dev.telemetry {
            let s = &t.series;
            let step = s.step_ms * 1_000_000;
            for ((weighted, sampled), values) in self.telemetry.iter_mut().zip([
                &s.gpu_util_pct,
                &s.sm_clock_mhz,
                &s.power_w,
                &s.gpu_temp_c,
            ]) {
                let v = values.iter().map(|&v| f64::from(v) * step as f64);
                g.spread(weighted, s.start_unix_ns, step, v);
                let time = values.iter().map(|_| step as f64);
                g.spread(sampled, s.start_unix_ns, step, time);
            }
        }
        let windowed = timeline.is_some_and(|t| t.devices.iter().any(|d| d.ordinal == dev.ordinal));
        if let (Some(b), false) = (
            dev.activity.as_ref().and_then(|a| a.busy_series.as_ref()),
            windowed,
        ) {
            let busy = b.busy_ns.iter().map(|&v| v as f64);
            g.spread(&mut self.busy, b.start_unix_ns, b.step_ns, busy);
            let observed = b.busy_ns.iter().map(|_| b.step_ns as f64);
            g.spread(&mut self.observed, b.start_unix_ns, b.step_ns, observed);
        }
    }

    fn add(&mut self, other: Amounts) {
        let add = |into: &mut Vec<f64>, from: Vec<f64>| {
            for (x, y) in into.iter_mut().zip(from) {
                *x += y;
            }
        };
        add(&mut self.calls, other.calls);
        add(&mut self.launches, other.launches);
        add(&mut self.busy, other.busy);
        add(&mut self.observed, other.observed);
        for (cause, s) in other.blocked {
            match self.blocked.get_mut(&cause) {
                Some(mine) => add(mine, s),
                None => drop(self.blocked.insert(cause, s)),
            }
        }
        for (cause, s) in other.idle {
            match self.idle.get_mut(&cause) {
                Some(mine) => add(mine, s),
                None => drop(self.idle.insert(cause, s)),
            }
        }
        for (mine, (weighted, sampled)) in self.telemetry.iter_mut().zip(other.telemetry) {
            add(&mut mine.0, weighted);
            add(&mut mine.1, sampled);
        }
    }

    fn series(self, g: &Grid) -> Series {
        let per_s = |v: Vec<f64>| -> Vec<f64> {
            v.into_iter()
                .map(|x| significant(x * 1e9 / g.step_ns as f64))
                .collect()
        };
        let observed = &self.observed;
        let of_observed = |v: Vec<f64>| ratio(&v, observed);
        let [util, clock, power, temp] = self.telemetry.map(|(w, s)| ratio(&w, &s));
        Series {
            calls_per_s: per_s(self.calls),
            launches_per_s: per_s(self.launches),
            blocked: self
                .blocked
                .into_iter()
                .map(|(cause, ns)| CauseSeries {
                    cause,
                    values: ns
                        .iter()
                        .map(|&x| significant(x / g.step_ns as f64))
                        .collect(),
                })
                .collect(),
            gpu_busy_share: of_observed(self.busy),
            gpu_idle: self
                .idle
                .into_iter()
                .map(|(cause, ns)| CauseSeries {
                    cause,
                    values: of_observed(ns),
                })
                .collect(),
            gpu_util_pct: util,
            sm_clock_mhz: clock,
            power_w: power,
            gpu_temp_c: temp,
        }
    }
}

/// A timeline's blocked time per cause and window, each window holding at most what the
/// process's `threads` can block in it. The shim files a call in the window it ended in, so
/// a sync longer than a window lands whole in its last one (a 1.8 s sync is 22 thread-s/s in
/// one 80 ms window): the sampled blocking calls go back over the windows they span, and
/// what still passes a window's bound moves to the windows before it, where those calls
/// began. Every cause keeps its total.
fn blocked_windows(t: &Timeline, threads: u32, stop: u64) -> Vec<(SyncCause, Vec<f64>)> {
    let width = t.window_ns.max(1);
    let n = t
        .host
        .blocked_ns
        .iter()
        .map(|c| c.ns.len())
        .max()
        .unwrap_or(0);
    let mut causes: Vec<(SyncCause, Vec<f64>)> = t
        .host
        .blocked_ns
        .iter()
        .map(|c| {
            let mut ns: Vec<f64> = c.ns.iter().map(|&v| v as f64).collect();
            ns.resize(n, 0.0);
            (c.cause, ns)
        })
        .collect();
    let series_end = t
        .start_unix_ns
        .saturating_add(width.saturating_mul(n as u64));
    let mut sampled: Vec<&HostEvent> = t
        .longest_blocking
        .iter()
        .chain(&t.recent_blocking)
        .collect();
    sampled.sort_unstable_by_key(|e| (e.start_unix_ns, e.end_unix_ns, kind_order(e.kind)));
    sampled.dedup();
    for e in sampled {
        let HostEventKind::Sync(cause) = e.kind else {
            continue;
        };
        let Some((_, ns)) = causes.iter_mut().find(|(c, _)| *c == cause) else {
            continue;
        };
        // A call is spread over the windows the series has, never past them: a dump's end
        // time may be anything.
        let (start, end) = (
            e.start_unix_ns.max(t.start_unix_ns),
            e.end_unix_ns.min(series_end),
        );
        let last = (end.saturating_sub(t.start_unix_ns) / width) as usize;
        let (Some(filed), true) = (ns.get_mut(last.min(n.saturating_sub(1))), end > start) else {
            continue;
        };
        // The part of the call its window still holds (a window merged or cut may hold less).
        let moved = filed.min((end - start) as f64);
        *filed -= moved;
        let per_ns = moved / (end - start) as f64;
        let mut at = start;
        while at < end {
            let w = ((at - t.start_unix_ns) / width) as usize;
            let w_end = t
                .start_unix_ns
                .saturating_add((w as u64 + 1).saturating_mul(width));
            ns[w.min(n - 1)] += (w_end.min(end) - at) as f64 * per_ns;
            at = w_end;
        }
    }
    let bound = |i: usize| {
        let start = t.start_unix_ns.saturating_add(i as u64 * width);
        let len = start.saturating_add(width).min(stop.max(start + 1)) - start;
        f64::from(threads.max(1)) * len as f64
    };
    // Excess goes back to earlier windows; what reaches the first goes forward.
    let order: Vec<(usize, usize)> = (1..n)
        .rev()
        .map(|i| (i, i - 1))
        .chain((1..n).map(|i| (i - 1, i)))
        .collect();
    for (from, to) in order {
        let total: f64 = causes.iter().map(|(_, ns)| ns[from]).sum();
        let bound = bound(from);
        if total > bound {
            let keep = bound / total;
            for (_, ns) in &mut causes {
                let excess = ns[from] * (1.0 - keep);
                ns[from] -= excess;
                ns[to] += excess;
            }
        }
    }
    causes
}

/// `part[i] / whole[i]`, None where `whole[i]` is 0.
fn ratio(part: &[f64], whole: &[f64]) -> Vec<Option<f64>> {
    part.iter()
        .zip(whole)
        .map(|(&p, &w)| (w > 0.0).then(|| significant(p / w)))
        .collect()
}

/// Four significant digits: a plotted value needs no more, and each digit is a byte of
/// every view (a 1,000-rank page's series shrink to a third).
pub fn significant(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return 0.0;
    }
    let scale = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// The sampled events of a timeline, longest and most recent merged, by start, at most
/// `keep` of each kind (the longest first when cut).
fn events(t: &Timeline, keep: usize) -> (Vec<HostEvent>, Vec<DeviceGap>) {
    let mut blocking: Vec<HostEvent> = t
        .longest_blocking
        .iter()
        .chain(&t.recent_blocking)
        .cloned()
        .collect();
    let mut gaps: Vec<DeviceGap> = t
        .devices
        .iter()
        .flat_map(|d| {
            d.longest_gaps
                .iter()
                .chain(&d.recent_gaps)
                .map(|gap| DeviceGap {
                    ordinal: d.ordinal,
                    gap: gap.clone(),
                })
        })
        .collect();
    let key = |s: u64, e: u64| (std::cmp::Reverse(e.saturating_sub(s)), s, e);
    blocking.sort_by_key(|e| (key(e.start_unix_ns, e.end_unix_ns), kind_order(e.kind)));
    blocking.dedup();
    blocking.truncate(keep);
    blocking.sort_by_key(|e| (e.start_unix_ns, e.end_unix_ns));
    gaps.sort_by_key(|d| (key(d.gap.start_unix_ns, d.gap.end_unix_ns), d.ordinal));
    gaps.dedup_by(|a, b| a.ordinal == b.ordinal && a.gap == b.gap);
    gaps.truncate(keep);
    gaps.sort_by_key(|d| (d.gap.start_unix_ns, d.ordinal));
    (blocking, gaps)
}

fn kind_order(k: HostEventKind) -> (u8, Option<SyncCause>) {
    match k {
        HostEventKind::Sync(c) => (0, Some(c)),
        HostEventKind::Alloc => (1, None),
        HostEventKind::Collective => (2, None),
    }
}

/// The job's timelines; None when no process has anything on a time axis.
pub fn timelines(processes: &[ProcessInfo]) -> Option<Timelines> {
    let has_axis = |pr: &ProcessInfo| {
        pr.timeline.is_some()
            || pr.gpu.as_ref().is_some_and(|g| {
                g.devices.iter().any(|d| {
                    d.telemetry
                        .as_ref()
                        .is_some_and(|t| !t.series.gpu_util_pct.is_empty())
                        || d.activity
                            .as_ref()
                            .and_then(|a| a.busy_series.as_ref())
                            .is_some_and(|b| !b.busy_ns.is_empty())
                })
            })
    };
    if !processes.iter().any(has_axis) {
        return None;
    }
    let start = processes.iter().map(|p| p.start_unix_ns).min()?;
    let end = processes.iter().map(|p| p.stop_unix_ns).max()?;
    let grid = Grid::covering(start, end);
    let mut factor = 1;
    while processes.len() * grid.slots.div_ceil(factor) > PROCESS_SLOTS && factor < grid.slots {
        factor *= 2;
    }
    let process_grid = grid.coarser(factor);
    let keep = PROCESS_EVENTS / processes.len().max(1);
    let mut job = Amounts::new(&grid);
    let processes = processes
        .iter()
        .map(|pr| {
            job.add(Amounts::of(pr, &grid));
            let devices = pr
                .gpu
                .iter()
                .flat_map(|g| &g.devices)
                .filter(|d| d.telemetry.is_some())
                .map(|d| {
                    let mut a = Amounts::new(&process_grid);
                    a.add_device(d, &process_grid, None);
                    let s = a.series(&process_grid);
                    DeviceSeries {
                        ordinal: d.ordinal,
                        gpu_util_pct: s.gpu_util_pct,
                        sm_clock_mhz: s.sm_clock_mhz,
                        power_w: s.power_w,
                        gpu_temp_c: s.gpu_temp_c,
                    }
                })
                .collect();
            let (blocking, idle_gaps) = pr
                .timeline
                .as_deref()
                .map_or_else(Default::default, |t| events(t, keep / 2));
            ProcessSeries {
                pid: pr.pid,
                rank: pr.rank,
                series: Amounts::of(pr, &process_grid).series(&process_grid),
                devices,
                blocking,
                idle_gaps,
            }
        })
        .collect();
    Some(Timelines {
        grid,
        job: job.series(&grid),
        process_grid,
        processes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_spread_in_proportion_to_overlap_and_kept() {
        let g = Grid {
            start_unix_ns: 100,
            step_ns: 10,
            slots: 3,
        };
        let mut into = g.zeros();
        // Source windows of 4 ns from 96: [96,100) falls before the grid, [128,132) half
        // after it.
        g.spread(
            &mut into,
            96,
            4,
            [4.0, 8.0, 8.0, 4.0, 4.0, 4.0, 4.0, 4.0, 8.0].into_iter(),
        );
        assert_eq!(
            into,
            vec![8.0 + 8.0 + 2.0, 2.0 + 4.0 + 4.0, 4.0 + 4.0 + 4.0]
        );
        // The 48 given less the 4 before the grid and the 4 after it.
        assert_eq!(into.iter().sum::<f64>(), 40.0);
    }

    fn blocked_timeline(column: Vec<u64>, sampled: Vec<HostEvent>) -> Timeline {
        Timeline {
            start_unix_ns: 1_000,
            window_ns: 10 * MS,
            host: gpuspy_format::timeline::HostWindows {
                blocked_ns: vec![gpuspy_format::timeline::CauseSeries {
                    cause: SyncCause::Explicit,
                    ns: column,
                }],
                ..Default::default()
            },
            longest_blocking: sampled,
            ..Timeline::default()
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_sampled_sync_longer_than_a_window_goes_back_over_the_windows_it_spans() {
        // 11.9 ms from 5 ms into window 0 to 6.9 ms into window 1, all filed in window 1.
        let sync = HostEvent {
            start_unix_ns: 1_000 + 5 * MS,
            end_unix_ns: 1_000 + 16_900_000,
            kind: HostEventKind::Sync(SyncCause::Explicit),
        };
        let t = blocked_timeline(vec![0, 11_900_000, 2 * MS], vec![sync.clone(), sync]);
        let spread = blocked_windows(&t, 1, 1_000 + 30 * MS);
        assert_eq!(spread, [(SyncCause::Explicit, vec![5e6, 6.9e6, 2e6])]);
    }

    #[test]
    fn a_sampled_sync_ending_past_the_windows_is_spread_over_them_only() {
        // A planted end time (u64::MAX) once made the spreading walk 10 ms windows to the
        // end of time.
        let sync = HostEvent {
            start_unix_ns: 1_000 + 25 * MS,
            end_unix_ns: u64::MAX,
            kind: HostEventKind::Sync(SyncCause::Explicit),
        };
        let t = blocked_timeline(vec![0, 0, 8 * MS], vec![sync]);
        let spread = blocked_windows(&t, 1, 1_000 + 30 * MS);
        assert_eq!(spread, [(SyncCause::Explicit, vec![0.0, 0.0, 8e6])]);
    }

    #[test]
    fn blocking_past_the_thread_count_moves_to_the_windows_before() {
        // 25 ms filed in window 2 by one thread: the calls began in windows 0 and 1.
        let t = blocked_timeline(vec![0, 4 * MS, 25 * MS], vec![]);
        let one = blocked_windows(&t, 1, 1_000 + 30 * MS);
        assert_eq!(one, [(SyncCause::Explicit, vec![9e6, 10e6, 10e6])]);
        // Two threads can block 20 ms in each window.
        let two = blocked_windows(&t, 2, 1_000 + 30 * MS);
        assert_eq!(two, [(SyncCause::Explicit, vec![0.0, 9e6, 20e6])]);
        // The last window ends with the process: 5 ms of it.
        let cut = blocked_windows(
            &blocked_timeline(vec![0, 0, 8 * MS], vec![]),
            1,
            1_000 + 25 * MS,
        );
        assert_eq!(cut, [(SyncCause::Explicit, vec![0.0, 3e6, 5e6])]);
    }

    #[test]
    fn values_keep_four_significant_digits() {
        assert_eq!(significant(0.123456), 0.1235);
        assert_eq!(significant(123456.0), 123500.0);
        assert_eq!(significant(-0.0012345), -0.001235);
        assert_eq!(significant(0.0), 0.0);
    }

    #[test]
    fn a_grid_covers_the_span_in_at_most_256_slots() {
        let g = Grid::covering(1_000, 1_000 + 10_000_000_001);
        assert_eq!(g.slots, 256);
        assert!(g.step_ns * 256 >= 10_000_000_001);
        let short = Grid::covering(5, 105);
        assert_eq!((short.step_ns, short.slots), (1, 100));
        let coarse = g.coarser(16);
        assert_eq!((coarse.step_ns, coarse.slots), (g.step_ns * 16, 16));
    }
}
