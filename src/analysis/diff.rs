//! What changed between two sets of runs (`gpuspy diff BASE NEW`), and whether it is a
//! regression: the `DiffReport` that the diff's text, JSON and HTML page show.
//!
//! Counts are deterministic, so they are compared exactly (per run, averaged over runs).
//! Latencies are compared with Mann-Whitney U: across runs on the per-run medians when each
//! side has at least four runs (with three a side the exact test cannot go below p = 0.1),
//! otherwise on the two pooled histograms, where every call is a sample. A change is a regression only if it is significant, at least `--threshold`
//! relative, at least `--floor-ns` absolute, and the API holds at least `--min-share` of
//! the time inside the driver, so that tiny APIs and noise do not raise an alarm.

use crate::analysis::analyse::{self, Job, Run};
use crate::analysis::collectives::collectives;
use crate::analysis::phases::PhaseKind;
use crate::analysis::profile::{Latency, Profile};
use crate::analysis::report::{self, LatencyRow};
use crate::analysis::rule::WARNING_IMPACT;
use crate::analysis::stats;
use crate::units::{bytes, duration, whole_percent};
use gpuspy_format::{Direction, HostKind, SyncCause};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub struct Options {
    pub threshold: f64,
    pub floor_ns: u64,
    pub min_share: f64,
    pub alpha: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Regression,
    Improvement,
    Changed,
    /// A latency the test tells apart (p < alpha) that moved less than the threshold or
    /// the floor, or of an API with too small a share of the driver time, to be judged.
    Minor,
    /// What the test did not tell apart, or did not move.
    Unchanged,
}

#[derive(Debug, Serialize)]
pub struct Change {
    pub kind: Kind,
    /// What is compared, e.g. `cuStreamSynchronize p50`.
    pub what: String,
    pub base: String,
    pub new: String,
    pub detail: String,
}

struct Side<'a> {
    runs: &'a [Run],
    merged: Profile,
    /// The judgements on the runs merged (analyse::job), made once.
    job: Job,
}

impl<'a> Side<'a> {
    fn new(runs: &'a [Run]) -> Side<'a> {
        let mut merged = Profile::default();
        for r in runs {
            merged.absorb(r.analysed.profile.clone());
        }
        let job = analyse::job(&merged);
        Side { runs, merged, job }
    }

    fn per_run(&self, value: impl Fn(&Profile) -> f64) -> f64 {
        self.runs
            .iter()
            .map(|r| value(&r.analysed.profile))
            .sum::<f64>()
            / self.runs.len() as f64
    }
}

fn relative(base: f64, new: f64) -> f64 {
    if base == 0.0 {
        if new == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (new - base) / base
    }
}

fn percent(rel: f64) -> String {
    if rel.is_infinite() {
        "new".into()
    } else {
        format!("{:+.1} %", rel * 100.0)
    }
}

/// Runs per side from which runs, not calls, are the samples of the latency test.
const MIN_RUNS_ACROSS: usize = 4;

fn latency_changes(base: &Side, new: &Side, o: &Options, out: &mut Vec<Change>) {
    let names: BTreeSet<&String> = base
        .merged
        .apis
        .keys()
        .filter(|n| new.merged.apis.contains_key(*n))
        .collect();
    let driver_ns = base.merged.driver_ns().max(new.merged.driver_ns()).max(1);
    for name in names {
        let (Some(b), Some(n)) = (base.merged.api(name), new.merged.api(name)) else {
            continue;
        };
        if b.latency.calls == 0 || n.latency.calls == 0 {
            continue;
        }
        let share = b.latency.total_ns.max(n.latency.total_ns) as f64 / driver_ns as f64;
        let test = if base.runs.len() >= MIN_RUNS_ACROSS && new.runs.len() >= MIN_RUNS_ACROSS {
            let p50s = |s: &Side| -> Vec<f64> {
                s.runs
                    .iter()
                    .filter_map(|r| r.analysed.profile.api(name))
                    .map(|a| a.latency.quantile(0.5) as f64)
                    .collect()
            };
            stats::samples(&p50s(base), &p50s(new))
        } else {
            stats::histograms(&b.latency.hist.to_dense(), &n.latency.hist.to_dense())
        };
        // A p99 needs enough calls above it to be stable (10 from 1,000 calls).
        for (label, q, min_calls) in [("p50", 0.5, 1), ("p99", 0.99, 1000)] {
            if b.latency.calls < min_calls || n.latency.calls < min_calls {
                continue;
            }
            out.push(judge_latency(
                format!("{name} {label}"),
                &b.latency,
                &n.latency,
                q,
                test,
                share,
                o,
            ));
        }
    }
}

fn judge_latency(
    what: String,
    b: &Latency,
    n: &Latency,
    q: f64,
    test: stats::Test,
    share: f64,
    o: &Options,
) -> Change {
    let (bq, nq) = (b.quantile(q), n.quantile(q));
    let rel = relative(bq as f64, nq as f64);
    let significant = test.p_value < o.alpha;
    let material = share >= o.min_share && bq.abs_diff(nq) >= o.floor_ns;
    // A significant shift too small to matter, or whose quantile moved against the
    // distribution, is `minor`: `unchanged` is kept for what the test did not tell apart,
    // so that its p-value says so.
    let kind = if !significant {
        Kind::Unchanged
    } else if material && rel >= o.threshold && test.direction > 0.0 {
        Kind::Regression
    } else if material && rel <= -o.threshold && test.direction < 0.0 {
        Kind::Improvement
    } else {
        Kind::Minor
    };
    Change {
        kind,
        what,
        base: duration(bq),
        new: duration(nq),
        detail: format!(
            "{}, p = {:.3}, {:.1} % of driver time",
            percent(rel),
            test.p_value,
            share * 100.0
        ),
    }
}

/// Calls per run compared exactly: more calls of an API that matters is a regression.
fn count_changes(base: &Side, new: &Side, o: &Options, out: &mut Vec<Change>) {
    let names: BTreeSet<&String> = base
        .merged
        .apis
        .keys()
        .chain(new.merged.apis.keys())
        .collect();
    for name in names {
        let b = base.per_run(|p| p.calls(name) as f64);
        let n = new.per_run(|p| p.calls(name) as f64);
        if b == n {
            continue;
        }
        let rel = relative(b, n);
        let kind = if (n - b).abs() < 10.0 || rel.abs() < o.threshold {
            Kind::Changed
        } else if n > b {
            Kind::Regression
        } else {
            Kind::Improvement
        };
        out.push(Change {
            kind,
            what: format!("{name} calls per run"),
            base: format!("{b:.1}"),
            new: format!("{n:.1}"),
            detail: percent(rel),
        });
    }
}

/// Time blocked per run in each kind of implicit sync.
fn sync_changes(base: &Side, new: &Side, o: &Options, out: &mut Vec<Change>) {
    for cause in SyncCause::ALL {
        let blocked = |p: &Profile| p.sync(cause).map_or(0.0, |l| l.total_ns as f64);
        let (b, n) = (base.per_run(blocked), new.per_run(blocked));
        if b == 0.0 && n == 0.0 {
            continue;
        }
        let rel = relative(b, n);
        // Longer waits must also be a significant shift of the waits' distribution, not
        // scheduling noise; a cause that appears or vanishes needs no test.
        let significant = match (base.merged.sync(cause), new.merged.sync(cause)) {
            (Some(bl), Some(nl)) => {
                stats::histograms(&bl.hist.to_dense(), &nl.hist.to_dense()).p_value < o.alpha
            }
            _ => true,
        };
        let material = significant && (n - b).abs() >= 1e6;
        let kind = if material && rel >= o.threshold {
            Kind::Regression
        } else if material && rel <= -o.threshold {
            Kind::Improvement
        } else {
            Kind::Unchanged
        };
        out.push(Change {
            kind,
            what: format!("{} syncs: blocked per run", cause.name()),
            base: duration(b as u64),
            new: duration(n as u64),
            detail: percent(rel),
        });
    }
}

/// Bytes per run copied from or to pageable memory.
fn copy_changes(base: &Side, new: &Side, o: &Options, out: &mut Vec<Change>) {
    for dir in Direction::ALL {
        let moved = |p: &Profile| p.copied(dir, HostKind::Pageable).1 as f64;
        let (b, n) = (base.per_run(moved), new.per_run(moved));
        if b == n {
            continue;
        }
        let rel = relative(b, n);
        let material = (n - b).abs() >= (1 << 20) as f64;
        let kind = if material && rel >= o.threshold {
            Kind::Regression
        } else if material && rel <= -o.threshold {
            Kind::Improvement
        } else {
            Kind::Changed
        };
        out.push(Change {
            kind,
            what: format!("{dir:?} bytes per run from pageable memory"),
            base: bytes(b as u64),
            new: bytes(n as u64),
            detail: percent(rel),
        });
    }
}

/// A drop in a share of GPU time (busy, SM active, tensor pipes) smaller than this (in
/// points) is noise whatever its relative size.
const SHARE_FLOOR: f64 = 0.02;

/// The change of a share of GPU time, averaged over each side's runs that have it: a drop
/// of at least `SHARE_FLOOR` and the threshold is a regression (the GPU did less of it in
/// each second), a rise as large an improvement. None unless both sides have it.
fn share_change(
    base: &Side,
    new: &Side,
    o: &Options,
    what: &str,
    share: impl Fn(&Job) -> Option<f64>,
) -> Option<Change> {
    let mean = |side: &Side| -> Option<f64> {
        let shares: Vec<f64> = side
            .runs
            .iter()
            .filter_map(|r| share(&r.analysed.job))
            .collect();
        (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64)
    };
    let (b, n) = (mean(base)?, mean(new)?);
    let moved = n - b;
    let kind = if -moved >= SHARE_FLOOR && relative(b, n) <= -o.threshold {
        Kind::Regression
    } else if moved >= SHARE_FLOOR && relative(b, n) >= o.threshold {
        Kind::Improvement
    } else {
        Kind::Unchanged
    };
    Some(Change {
        kind,
        what: what.into(),
        base: format!("{:.1} %", b * 100.0),
        new: format!("{:.1} %", n * 100.0),
        detail: format!("{:+.1} points", moved * 100.0),
    })
}

/// GPU-side changes, where both sides have CUPTI activity: the GPU's busy share per run,
/// its SM-active and tensor-active shares where both sides have GPM, and the mean GPU
/// time per call of each top kernel (by demangled name) that holds at least `--min-share`
/// of kernel time.
fn gpu_changes(base: &Side, new: &Side, o: &Options, out: &mut Vec<Change>) {
    let Some(mut busy) = share_change(base, new, o, "GPU busy share", |j| j.gpu_busy_share) else {
        return;
    };
    // Shares of different wholes (the steady state's GPU time, NVML's utilisation where
    // CUPTI's records came late or are missing, the activity span) do not compare.
    let wholes: Vec<_> = (base.runs.iter().chain(new.runs.iter()))
        .map(|r| r.analysed.job.gpu_busy_of)
        .collect();
    if wholes.windows(2).any(|w| w[0] != w[1]) {
        busy.kind = Kind::Unchanged;
        busy.detail = "not compared: shares of different wholes".into();
    }
    out.push(busy);
    let gpm = |j: &Job| j.gpu_use.map(|u| u.shares);
    out.extend(share_change(base, new, o, "GPU SM-active share", |j| {
        gpm(j)?.sm_active_share
    }));
    out.extend(share_change(base, new, o, "GPU tensor-active share", |j| {
        gpm(j)?.tensor_active_share
    }));
    // name -> (calls, total ns), over all runs of a side.
    let kernels = |side: &Side| -> BTreeMap<String, (u64, u64)> {
        let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (_, _, a) in side.merged.gpu_activity() {
            for k in &a.top_kernels {
                let e = m.entry(k.name.clone()).or_default();
                e.0 += k.calls;
                e.1 += k.total_ns;
            }
        }
        m
    };
    let (bk, nk) = (kernels(base), kernels(new));
    let new_total: u64 = nk.values().map(|&(_, t)| t).sum();
    for (name, &(n_calls, n_ns)) in &nk {
        let Some(&(b_calls, b_ns)) = bk.get(name) else {
            continue;
        };
        if b_calls == 0 || n_calls == 0 || (n_ns as f64) < o.min_share * new_total as f64 {
            continue;
        }
        let (b_mean, n_mean) = (b_ns as f64 / b_calls as f64, n_ns as f64 / n_calls as f64);
        let rel = relative(b_mean, n_mean);
        let material = (n_mean - b_mean).abs() >= o.floor_ns as f64;
        let kind = if material && rel >= o.threshold {
            Kind::Regression
        } else if material && rel <= -o.threshold {
            Kind::Improvement
        } else {
            continue;
        };
        out.push(Change {
            kind,
            what: format!("kernel {name} mean GPU time"),
            base: duration(b_mean as u64),
            new: duration(n_mean as u64),
            detail: percent(rel),
        });
    }
}

/// Each collective's bus bandwidth (CUPTI kernel time and NCCL bytes, docs/multi-rank.md)
/// where both sides measured it and it holds at least `--min-share` of the new side's NCCL
/// kernel time (a few start-up broadcasts are noise): a drop of at least the threshold is
/// a regression, as when a new NCCL or a changed topology moves the same bytes more slowly.
fn collective_changes(base: &Side, new: &Side, o: &Options, out: &mut Vec<Change>) {
    let busbw = |side: &Side| -> BTreeMap<String, (f64, u64)> {
        collectives(&side.merged)
            .into_iter()
            .filter_map(|c| Some((c.op, (c.busbw?, c.kernel_ns))))
            .collect()
    };
    let (b, n) = (busbw(base), busbw(new));
    let new_total: u64 = n.values().map(|&(_, ns)| ns).sum();
    for (op, &(n_bw, n_ns)) in &n {
        let Some(&(b_bw, _)) = b.get(op) else {
            continue;
        };
        if (n_ns as f64) < o.min_share * new_total as f64 {
            continue;
        }
        let rel = relative(b_bw, n_bw);
        out.push(Change {
            kind: if rel <= -o.threshold {
                Kind::Regression
            } else if rel >= o.threshold {
                Kind::Improvement
            } else {
                Kind::Unchanged
            },
            what: format!("{op} bus bandwidth"),
            base: format!("{:.1} GB/s", b_bw / 1e9),
            new: format!("{:.1} GB/s", n_bw / 1e9),
            detail: percent(rel),
        });
    }
}

/// Findings whose impact moved by at least the threshold, in points of the run's time. A
/// finding near the warning line flips between warning and info from run to run; only a
/// material change in its impact counts. Its word follows the time it loses per run
/// (impact times the wall time per run), not the points: a sync that doubles makes the run
/// slower and sync-stalled's share smaller (the host's work is a smaller part of a longer
/// step), which is no improvement. Points and time lost that disagree, or time lost that
/// moved less than the threshold, read `changed`.
fn finding_changes(base: &Side, new: &Side, o: &Options, out: &mut Vec<Change>) {
    let impacts = |side: &Side| -> BTreeMap<&'static str, f64> {
        side.job
            .diagnosis
            .findings
            .iter()
            .map(|f| (f.id, f.impact))
            .collect()
    };
    let (b, n) = (impacts(base), impacts(new));
    let wall = |side: &Side| side.per_run(|p| p.span_ns() as f64);
    let (b_wall, n_wall) = (wall(base), wall(new));
    let ids: BTreeSet<&&str> = b.keys().chain(n.keys()).collect();
    for id in ids {
        let (bi, ni) = (
            b.get(id).copied().unwrap_or(0.0),
            n.get(id).copied().unwrap_or(0.0),
        );
        let moved = ni - bi;
        if moved.abs() < o.threshold {
            continue;
        }
        let (b_lost, n_lost) = (bi * b_wall, ni * n_wall);
        let lost = relative(b_lost, n_lost);
        let kind = if moved > 0.0 && lost >= o.threshold && ni >= WARNING_IMPACT {
            Kind::Regression
        } else if moved < 0.0 && lost <= -o.threshold {
            Kind::Improvement
        } else {
            Kind::Changed
        };
        out.push(Change {
            kind,
            what: format!("finding {id} impact"),
            base: whole_percent(bi),
            new: whole_percent(ni),
            detail: format!(
                "{:+.0} points, time lost {} -> {} per run; `gpuspy explain {id}`",
                moved * 100.0,
                duration(b_lost as u64),
                duration(n_lost as u64)
            ),
        });
    }
}

/// The overall changes, shown first: wall time, steady-state step time, and the time in
/// each kind of phase, per run (averaged over the runs that have it). Informational: timing
/// noise is judged by the latency tests and the findings, never here. A phase kind neither
/// side has is left out.
fn overall_changes(base: &Side, new: &Side, o: &Options) -> Vec<Change> {
    let mut out = Vec::new();
    let mut compare = |what: &str, value: &dyn Fn(&Run) -> Option<u64>| {
        let mean = |side: &Side| -> Option<f64> {
            let values: Vec<f64> = side
                .runs
                .iter()
                .filter_map(value)
                .map(|v| v as f64)
                .collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        };
        let (Some(b), Some(n)) = (mean(base), mean(new)) else {
            return;
        };
        if b == 0.0 && n == 0.0 {
            return;
        }
        let rel = relative(b, n);
        out.push(Change {
            kind: if rel.abs() >= o.threshold {
                Kind::Changed
            } else {
                Kind::Unchanged
            },
            what: what.to_string(),
            base: duration(b as u64),
            new: duration(n as u64),
            detail: percent(rel),
        });
    };
    compare("wall time per run", &|r| Some(r.analysed.profile.span_ns()));
    compare("steady-state step time", &|r| {
        Some(
            r.analysed
                .job
                .time_axis
                .as_ref()?
                .steady
                .as_ref()?
                .step
                .as_ref()?
                .ns,
        )
    });
    for kind in [
        PhaseKind::Startup,
        PhaseKind::Warmup,
        PhaseKind::Steady,
        PhaseKind::Pause,
        PhaseKind::Teardown,
    ] {
        compare(&format!("{} time per run", kind.name()), &|r| {
            let axis = r.analysed.job.time_axis.as_ref()?;
            let spent = axis
                .phases
                .iter()
                .filter(|ph| ph.kind == kind)
                .map(|ph| ph.end_unix_ns - ph.start_unix_ns);
            Some(crate::analysis::profile::total(spent))
        });
    }
    out
}

#[derive(Serialize)]
pub struct DiffReport {
    /// Some run on either side called the fake driver. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    pub base_runs: usize,
    pub new_runs: usize,
    /// Wall time, steady-state step time and time per phase kind (`overall_changes`).
    pub overall: Vec<Change>,
    pub regressions: usize,
    pub changes: Vec<Change>,
    /// Whether either side's data is incomplete (calls the shim did not record), and why.
    pub incomplete: bool,
    pub notes: Vec<String>,
    /// Both sides' latency of the APIs both called, by the larger total time, at most
    /// `LATENCIES_SHOWN`: the histograms `diff --html` sets side by side.
    pub latencies: Vec<LatencyPair>,
}

#[derive(Serialize)]
pub struct LatencyPair {
    pub api: String,
    pub base: LatencyRow,
    pub new: LatencyRow,
}

pub const LATENCIES_SHOWN: usize = 12;

fn latency_pairs(base: &Side, new: &Side) -> Vec<LatencyPair> {
    let mut pairs: Vec<(u64, LatencyPair)> = base
        .merged
        .apis
        .iter()
        .filter_map(|(name, b)| {
            let n = new.merged.api(name)?;
            (b.latency.calls > 0 && n.latency.calls > 0).then(|| {
                let pair = LatencyPair {
                    api: name.clone(),
                    base: LatencyRow::of(&b.latency),
                    new: LatencyRow::of(&n.latency),
                };
                (b.latency.total_ns.max(n.latency.total_ns), pair)
            })
        })
        .collect();
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.api.cmp(&b.1.api)));
    pairs
        .into_iter()
        .take(LATENCIES_SHOWN)
        .map(|(_, p)| p)
        .collect()
}

pub fn compare(base_runs: &[Run], new_runs: &[Run], o: &Options) -> DiffReport {
    let (base, new) = (Side::new(base_runs), Side::new(new_runs));
    let overall = overall_changes(&base, &new, o);
    let mut changes = Vec::new();
    latency_changes(&base, &new, o, &mut changes);
    count_changes(&base, &new, o, &mut changes);
    sync_changes(&base, &new, o, &mut changes);
    copy_changes(&base, &new, o, &mut changes);
    gpu_changes(&base, &new, o, &mut changes);
    collective_changes(&base, &new, o, &mut changes);
    finding_changes(&base, &new, o, &mut changes);
    changes.sort_by_key(|c| match c.kind {
        Kind::Regression => 0,
        Kind::Improvement => 1,
        Kind::Changed => 2,
        Kind::Minor => 3,
        Kind::Unchanged => 4,
    });
    let simulated = report::simulated_note(base_runs.iter().chain(new_runs).map(|r| &r.analysed));
    let incomplete: Vec<String> = [("base", base_runs), ("new", new_runs)]
        .iter()
        .flat_map(|(side, runs)| {
            runs.iter().filter_map(move |r| {
                analyse::incomplete(&r.analysed, &format!("{side} {}", r.name))
            })
        })
        .collect();
    DiffReport {
        simulated: simulated.is_some(),
        incomplete: !incomplete.is_empty(),
        notes: simulated.into_iter().chain(incomplete).collect(),
        latencies: latency_pairs(&base, &new),
        base_runs: base_runs.len(),
        new_runs: new_runs.len(),
        overall,
        regressions: changes
            .iter()
            .filter(|c| c.kind == Kind::Regression)
            .count(),
        changes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;

    fn runs(launch_ms: f64) -> Vec<Run> {
        (0..3)
            .map(|i| Run {
                name: format!("run{i}"),
                analysed: analyse::merged(
                    run(1.0).api("cuLaunchKernel", 20_000, launch_ms, 0).build(),
                ),
            })
            .collect()
    }

    fn options() -> Options {
        Options {
            threshold: 0.10,
            floor_ns: 200,
            min_share: 0.01,
            alpha: 0.05,
        }
    }

    #[test]
    fn a_finding_flickering_at_the_warning_line_is_no_regression() {
        // launch-bound at 4.9 % (info) in the base and 5.1 % (warning) in the new runs.
        let r = compare(&runs(49.0), &runs(51.0), &options());
        assert_eq!(r.regressions, 0, "{:?}", r.changes);
    }

    #[test]
    fn a_finding_that_grows_materially_is_a_regression() {
        let r = compare(&runs(20.0), &runs(300.0), &options());
        let names: Vec<&str> = r
            .changes
            .iter()
            .filter(|c| c.kind == Kind::Regression)
            .map(|c| c.what.as_str())
            .collect();
        assert!(names.contains(&"finding launch-bound impact"), "{names:?}");
        assert!(names.contains(&"cuLaunchKernel p50"), "{names:?}");
    }

    /// Runs of `wall_s` whose host waits `blocked_ms` in 200 explicit syncs and works the
    /// rest: sync-stalled's time lost is the work, min(work, wait).
    fn stalled_runs(wall_s: f64, blocked_ms: f64) -> Vec<Run> {
        (0..3)
            .map(|i| Run {
                name: format!("run{i}"),
                analysed: analyse::merged(
                    run(wall_s)
                        .sync(SyncCause::Explicit, 200, blocked_ms)
                        .build(),
                ),
            })
            .collect()
    }

    #[test]
    fn a_slower_run_is_never_improved_though_its_findings_share_falls() {
        // 300 ms of work a run throughout; the syncs grow, so the run gets slower and
        // sync-stalled's share of it falls from 30 % to 15 % and below.
        let base = stalled_runs(1.0, 700.0);
        for wall_s in [2.0, 3.0, 6.0] {
            let r = compare(
                &base,
                &stalled_runs(wall_s, wall_s * 1e3 - 300.0),
                &options(),
            );
            let improved: Vec<&Change> = r
                .changes
                .iter()
                .filter(|c| c.kind == Kind::Improvement)
                .collect();
            assert!(improved.is_empty(), "{wall_s} s: {improved:?}");
            let f = r
                .changes
                .iter()
                .find(|c| c.what == "finding sync-stalled impact")
                .unwrap();
            assert_eq!(f.kind, Kind::Changed, "{f:?}");
            assert!(
                f.detail.contains("time lost 300 ms -> 300 ms per run"),
                "{f:?}"
            );
        }
        // The same share of a run twice as long is listed by the overall wall time and
        // the syncs' blocked time, not as a finding whose impact moved.
        let r = compare(&base, &stalled_runs(2.0, 1400.0), &options());
        assert!(
            !r.changes
                .iter()
                .any(|c| c.what == "finding sync-stalled impact"),
            "an unmoved share is not listed: {:?}",
            r.changes
        );
        // Fewer syncs in a run as long: the finding's time lost falls, improved.
        let r = compare(&base, &stalled_runs(1.0, 150.0), &options());
        let f = r
            .changes
            .iter()
            .find(|c| c.what == "finding sync-stalled impact")
            .unwrap();
        assert_eq!(f.kind, Kind::Improvement, "{f:?}");
    }

    fn gpu_runs(busy_ms: u64, gemm_us: u64) -> Vec<Run> {
        use gpuspy_format::gpu::{Activity, Device, Gpu, KernelStat};
        (0..3)
            .map(|i| {
                let a = Activity {
                    first_unix_ns: 1,
                    last_unix_ns: 1 + 1_000_000_000,
                    busy_ns: busy_ms * 1_000_000,
                    top_kernels: vec![KernelStat {
                        name: "gemm".into(),
                        calls: 1000,
                        total_ns: 1000 * gemm_us * 1000,
                        ..KernelStat::default()
                    }],
                    ..Activity::default()
                };
                let gpu = Gpu {
                    devices: vec![Device {
                        activity: Some(a),
                        ..Device::default()
                    }],
                    ..Gpu::default()
                };
                Run {
                    name: format!("run{i}"),
                    analysed: analyse::merged(run(1.0).gpu(gpu).build()),
                }
            })
            .collect()
    }

    /// `gpu_runs(900, 100)` with GPM figures: SM active and tensor pipes, in percent.
    fn gpm_runs(sm_active: f32, tensor: f32) -> Vec<Run> {
        use gpuspy_format::gpu::{Telemetry, TelemetrySeries};
        let mut runs = gpu_runs(900, 100);
        for r in &mut runs {
            let mut p = r.analysed.profile.clone();
            let device = &mut p.processes[0].gpu.as_mut().unwrap().devices[0];
            device.telemetry = Some(Telemetry {
                series: TelemetrySeries {
                    start_unix_ns: 1,
                    step_ms: 100,
                    sm_active_pct: vec![sm_active; 10],
                    sm_occupancy_pct: vec![20.0; 10],
                    tensor_active_pct: vec![tensor; 10],
                    dram_bw_util_pct: vec![10.0; 10],
                    ..TelemetrySeries::default()
                },
                ..Telemetry::default()
            });
            r.analysed = analyse::merged(p);
        }
        runs
    }

    #[test]
    fn sm_and_tensor_activity_are_compared_where_both_sides_have_gpm() {
        // The same busy GPU, its tensor pipes idle in the new runs (TF32 switched off).
        // Regressions come first.
        let r = compare(&gpm_runs(90.0, 80.0), &gpm_runs(88.0, 10.0), &options());
        let gpm: Vec<(&str, Kind, &str, &str)> = r
            .changes
            .iter()
            .filter(|c| c.what.starts_with("GPU SM") || c.what.starts_with("GPU tensor"))
            .map(|c| (c.what.as_str(), c.kind, c.base.as_str(), c.new.as_str()))
            .collect();
        assert_eq!(
            gpm,
            [
                (
                    "GPU tensor-active share",
                    Kind::Regression,
                    "80.0 %",
                    "10.0 %"
                ),
                ("GPU SM-active share", Kind::Unchanged, "90.0 %", "88.0 %")
            ]
        );
        // Without GPM on one side, nothing is said about it.
        let r = compare(&gpu_runs(900, 100), &gpm_runs(90.0, 10.0), &options());
        assert!(!r.changes.iter().any(|c| c.what.starts_with("GPU tensor")));
    }

    #[test]
    fn a_slower_kernel_and_a_less_busy_gpu_are_regressions() {
        let r = compare(&gpu_runs(900, 100), &gpu_runs(600, 130), &options());
        let regressions: Vec<(&str, &str, &str)> = r
            .changes
            .iter()
            .filter(|c| c.kind == Kind::Regression)
            .map(|c| (c.what.as_str(), c.base.as_str(), c.new.as_str()))
            .collect();
        assert_eq!(
            regressions,
            [
                ("GPU busy share", "90.0 %", "60.0 %"),
                ("kernel gemm mean GPU time", "100 us", "130 us")
            ]
        );
        let same = compare(&gpu_runs(900, 100), &gpu_runs(895, 102), &options());
        assert_eq!(same.regressions, 0, "{:?}", same.changes);
        // The new runs' share is NVML's (CUPTI's records came late): no verdict on it.
        let mut by_nvml = gpu_runs(600, 100);
        for r in &mut by_nvml {
            r.analysed.job.gpu_busy_of = Some(analyse::BusyBase::SteadyStateByNvml);
        }
        let r = compare(&gpu_runs(900, 100), &by_nvml, &options());
        let busy = r
            .changes
            .iter()
            .find(|c| c.what == "GPU busy share")
            .unwrap();
        assert_eq!(
            (busy.kind, busy.detail.as_str()),
            (Kind::Unchanged, "not compared: shares of different wholes")
        );
        assert_eq!(r.regressions, 0, "{:?}", r.changes);
    }

    /// Two-rank runs whose all-reduces moved 1 GiB per rank in `ms` of kernel time, with
    /// a broadcast of 1 MiB per rank in `bcast_us`.
    fn nccl_runs(ms: u64, bcast_us: u64) -> Vec<Run> {
        use crate::analysis::rules::gpu_data::fixtures::nccl_only;
        (0..2)
            .map(|i| {
                let mut profile = run(1.0).build();
                let mut rank = profile.processes[0].clone();
                // Another process (merging keeps the images of one process together), and
                // each run ten seconds after the last.
                rank.pid += 1;
                profile.processes.push(rank);
                for p in &mut profile.processes {
                    p.start_unix_ns = i * 10_000_000_000;
                    p.gpu = Some(Box::new(nccl_only(&[
                        ("AllReduce", 10, ms * 1_000_000),
                        ("Broadcast", 1, bcast_us * 1_000),
                    ])));
                }
                profile
                    .nccl_ops
                    .insert(("AllReduce".into(), "float32".into()), (20, 2 << 30));
                profile
                    .nccl_ops
                    .insert(("Broadcast".into(), "float32".into()), (2, 2 << 20));
                profile.communicators.entry("c".into()).or_default().nranks = 2;
                Run {
                    name: format!("run{i}"),
                    analysed: analyse::merged(profile),
                }
            })
            .collect()
    }

    #[test]
    fn slower_collectives_are_a_regression() {
        // 1 GiB per rank in 10 ms: 107.4 GB/s of bus bandwidth with two ranks; in 20 ms, half.
        // The broadcast, three times slower, holds under 1 % of the NCCL time: not judged.
        let r = compare(&nccl_runs(10, 20), &nccl_runs(20, 60), &options());
        assert!(r.changes.iter().all(|c| !c.what.starts_with("Broadcast")));
        let c = r
            .changes
            .iter()
            .find(|c| c.what == "AllReduce bus bandwidth")
            .unwrap();
        assert_eq!(
            (c.kind, c.base.as_str(), c.new.as_str()),
            (Kind::Regression, "107.4 GB/s", "53.7 GB/s")
        );
        let same = compare(&nccl_runs(10, 20), &nccl_runs(10, 20), &options());
        assert_eq!(same.regressions, 0, "{:?}", same.changes);
    }

    /// Three runs of one process: `startup_windows` windows of init, then `loop_windows`
    /// of a loop with 20 launches and an NVTX step range ending every `step_ms`.
    fn timed_runs(startup_windows: usize, loop_windows: usize, step_ms: u64) -> Vec<Run> {
        use crate::analysis::phases::fixtures::{timeline, times, MS, T0, W};
        use gpuspy_format::timeline::NvtxRanges;
        (0..3)
            .map(|i| {
                let mut w = times(
                    startup_windows,
                    W {
                        init_ns: 10 * MS,
                        ..W::default()
                    },
                );
                w.extend(times(
                    loop_windows,
                    W {
                        launches: 20,
                        ..W::default()
                    },
                ));
                let mut t = timeline(&w, false);
                let ended = |k: usize| k as u64 * 10 / step_ms;
                let ends: Vec<u64> = (0..w.len())
                    .map(|i| match i.checked_sub(startup_windows) {
                        Some(k) => ended(k + 1) - ended(k),
                        None => 0,
                    })
                    .collect();
                t.nvtx = vec![NvtxRanges {
                    name: "step".into(),
                    count: ends.iter().sum(),
                    total_ns: ends.iter().sum::<u64>() * step_ms * MS,
                    ends,
                    ..NvtxRanges::default()
                }];
                let mut p = run(1.0).build();
                let me = &mut p.processes[0];
                me.start_unix_ns = T0;
                me.stop_unix_ns = T0 + w.len() as u64 * 10 * MS;
                me.timeline = Some(Box::new(t));
                Run {
                    name: format!("run{i}"),
                    analysed: analyse::merged(p),
                }
            })
            .collect()
    }

    #[test]
    fn wall_time_step_time_and_phases_come_first() {
        // Start-up 300 ms -> 100 ms, the loop 1 s either way, the step 5 ms -> 4 ms.
        let r = compare(&timed_runs(30, 100, 5), &timed_runs(10, 100, 4), &options());
        let overall: Vec<(&str, &str, &str, &str)> = r
            .overall
            .iter()
            .map(|c| {
                (
                    c.what.as_str(),
                    c.base.as_str(),
                    c.new.as_str(),
                    c.detail.as_str(),
                )
            })
            .collect();
        assert_eq!(
            overall,
            [
                ("wall time per run", "1.30 s", "1.10 s", "-15.4 %"),
                ("steady-state step time", "5.00 ms", "4.00 ms", "-20.0 %"),
                ("start-up time per run", "300 ms", "100 ms", "-66.7 %"),
                ("steady time per run", "1.00 s", "1.00 s", "+0.0 %"),
            ]
        );
        assert_eq!(r.overall[3].kind, Kind::Unchanged);
    }

    #[test]
    fn identical_runs_change_nothing() {
        let r = compare(&runs(100.0), &runs(100.0), &options());
        assert_eq!(r.regressions, 0);
        assert!(
            r.changes.iter().all(|c| c.kind == Kind::Unchanged),
            "{:?}",
            r.changes
        );
    }
}
