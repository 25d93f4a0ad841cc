//! `gpuspy diff BASE NEW`: what changed between two sets of runs, and whether it is a
//! regression.
//!
//! Counts are deterministic, so they are compared exactly (per run, averaged over runs).
//! Latencies are compared with Mann-Whitney U: across runs on the per-run medians when each
//! side has at least three runs, otherwise on the two pooled histograms, where every call is
//! a sample. A change is a regression only if it is significant, at least `--threshold`
//! relative, at least `--floor-ns` absolute, and the API holds at least `--min-share` of
//! the time inside the driver, so that tiny APIs and noise do not raise an alarm.

use crate::ci_output::{Case, Gate};
use crate::diagnose::{diagnose, Severity};
use crate::profile::{Latency, Profile};
use crate::render_text::{bytes, duration};
use crate::runs::{load_runs, Run};
use crate::stats;
use anyhow::{bail, Result};
use gpuspy_format::{Direction, HostKind, SyncCause};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

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

impl Change {
    fn case(&self) -> Case {
        Case {
            name: self.what.clone(),
            passed: self.kind != Kind::Regression,
            message: format!("{} -> {} ({})", self.base, self.new, self.detail),
        }
    }
}

struct Side<'a> {
    runs: &'a [Run],
    merged: Profile,
}

impl<'a> Side<'a> {
    fn new(runs: &'a [Run]) -> Side<'a> {
        let mut merged = Profile::default();
        for r in runs {
            merged.absorb(&r.profile);
        }
        Side { runs, merged }
    }

    fn per_run(&self, value: impl Fn(&Profile) -> f64) -> f64 {
        self.runs.iter().map(|r| value(&r.profile)).sum::<f64>() / self.runs.len() as f64
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
        let test = if base.runs.len() >= 3 && new.runs.len() >= 3 {
            let p50s = |s: &Side| -> Vec<f64> {
                s.runs
                    .iter()
                    .filter_map(|r| r.profile.api(name))
                    .map(|a| a.latency.quantile(0.5) as f64)
                    .collect()
            };
            stats::samples(&p50s(base), &p50s(new))
        } else {
            stats::histograms(&b.latency.dense, &n.latency.dense)
        };
        for (label, q, min_calls) in [("p50", 0.5, 1), ("p99", 0.99, 100)] {
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
    let kind = if significant && material && rel >= o.threshold && test.direction > 0.0 {
        Kind::Regression
    } else if significant && material && rel <= -o.threshold && test.direction < 0.0 {
        Kind::Improvement
    } else {
        Kind::Unchanged
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
        let material = (n - b).abs() >= 1e6;
        let kind = if material && rel >= o.threshold {
            Kind::Regression
        } else if material && rel <= -o.threshold {
            Kind::Improvement
        } else {
            Kind::Unchanged
        };
        let name = serde_json::to_value(cause)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        out.push(Change {
            kind,
            what: format!("{name} syncs: blocked per run"),
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

/// Warnings that appeared or went away.
fn finding_changes(base: &Side, new: &Side, out: &mut Vec<Change>) {
    let warnings = |p: &Profile| -> BTreeSet<&'static str> {
        diagnose(p)
            .findings
            .into_iter()
            .filter(|f| f.severity == Severity::Warning)
            .map(|f| f.id)
            .collect()
    };
    let (b, n) = (warnings(&base.merged), warnings(&new.merged));
    for id in n.difference(&b) {
        out.push(Change {
            kind: Kind::Regression,
            what: format!("finding {id}"),
            base: "absent".into(),
            new: "warning".into(),
            detail: format!("appeared; `gpuspy explain {id}`"),
        });
    }
    for id in b.difference(&n) {
        out.push(Change {
            kind: Kind::Improvement,
            what: format!("finding {id}"),
            base: "warning".into(),
            new: "absent".into(),
            detail: "went away".into(),
        });
    }
}

#[derive(Serialize)]
pub struct DiffReport {
    pub base_runs: usize,
    pub new_runs: usize,
    pub regressions: usize,
    pub changes: Vec<Change>,
}

pub fn compare(base_runs: &[Run], new_runs: &[Run], o: &Options) -> DiffReport {
    let (base, new) = (Side::new(base_runs), Side::new(new_runs));
    let mut changes = Vec::new();
    latency_changes(&base, &new, o, &mut changes);
    count_changes(&base, &new, o, &mut changes);
    sync_changes(&base, &new, o, &mut changes);
    copy_changes(&base, &new, o, &mut changes);
    finding_changes(&base, &new, &mut changes);
    changes.sort_by_key(|c| match c.kind {
        Kind::Regression => 0,
        Kind::Improvement => 1,
        Kind::Changed => 2,
        Kind::Unchanged => 3,
    });
    DiffReport {
        base_runs: base_runs.len(),
        new_runs: new_runs.len(),
        regressions: changes
            .iter()
            .filter(|c| c.kind == Kind::Regression)
            .count(),
        changes,
    }
}

pub struct Output {
    pub json: bool,
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
}

pub fn diff(base: &[PathBuf], new: &[PathBuf], o: &Options, out: &Output) -> Result<bool> {
    if !(o.threshold > 0.0 && o.alpha > 0.0 && o.alpha < 1.0 && o.min_share >= 0.0) {
        bail!("--threshold must be > 0, --alpha in (0, 1), --min-share >= 0");
    }
    let report = compare(&load_runs(base)?, &load_runs(new)?, o);
    let cases: Vec<Case> = report.changes.iter().map(Change::case).collect();
    Gate {
        tool: "gpuspy diff",
        cases: &cases,
    }
    .emit(out.junit.as_deref(), out.markdown.as_deref())?;
    if out.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report, o));
    }
    Ok(report.regressions == 0)
}

fn render(r: &DiffReport, o: &Options) -> String {
    let mut out = format!(
        "gpuspy diff: {} base run(s), {} new run(s); threshold {:.0} %, floor {}, alpha {}\n",
        r.base_runs,
        r.new_runs,
        o.threshold * 100.0,
        duration(o.floor_ns),
        o.alpha
    );
    let mut unchanged = 0;
    for c in &r.changes {
        let label = match c.kind {
            Kind::Regression => "REGRESSION",
            Kind::Improvement => "improved",
            Kind::Changed => "changed",
            Kind::Unchanged => {
                unchanged += 1;
                continue;
            }
        };
        out.push_str(&format!(
            "  {label:<11} {:<44} {:>10} -> {:<10} {}\n",
            c.what, c.base, c.new, c.detail
        ));
    }
    out.push_str(&format!(
        "  {unchanged} comparison(s) unchanged\nresult: {}\n",
        match r.regressions {
            0 => "no significant regression".to_string(),
            n => format!("{n} regression(s)"),
        }
    ));
    out
}
