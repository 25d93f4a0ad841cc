//! `gpuspy check PATH --budget FILE`: assertions from a TOML budget, one pass/fail case each.
//! The budget format is in docs/ci.md.

use crate::analysis::analyse::{self, Analysed};
use crate::analysis::report::{self, Report};
use crate::analysis::rule::Severity;
use crate::analysis::rules;
use crate::render::ci_output::{Case, Gate, Output};
use crate::safe_text::Escaped;
use crate::units::{duration, percent};
use anyhow::{Context, Result};
use gpuspy_format::apis::{is_hooked_api, HOOKED_APIS};
use gpuspy_format::base_name;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Steps per run, for the per-step limits.
    steps: Option<u64>,
    #[serde(default)]
    api: BTreeMap<String, ApiBudget>,
    syncs: Option<SyncBudget>,
    findings: Option<FindingsBudget>,
    gpu: Option<GpuBudget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiBudget {
    p50_max_us: Option<f64>,
    p99_max_us: Option<f64>,
    max_per_run: Option<u64>,
    max_per_step: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SyncBudget {
    /// Largest share of the steady-state time the host may spend blocked in implicit syncs.
    max_blocked_share: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FindingsBudget {
    /// Rule ids that must not produce a warning.
    forbid: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuBudget {
    min_busy: f64,
}

/// Reads and validates a budget. Everything that would make the gate meaningless is an
/// error here, before any run is loaded or any job started: an API gpuspy does not record
/// (it would always pass with 0 calls), a table or a whole budget that asserts nothing, and
/// limits that no measurement can be compared with (NaN, infinite, negative, shares
/// outside 0..=1).
pub fn load_budget(path: &Path) -> Result<Budget> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("budget {}: cannot read", path.display()))?;
    parse_budget(&text).map_err(|e| anyhow::anyhow!("budget {}: {e}", path.display()))
}

fn parse_budget(text: &str) -> Result<Budget, String> {
    let budget: Budget = toml::from_str(text).map_err(|e| {
        let first = e
            .message()
            .lines()
            .next()
            .unwrap_or("invalid TOML")
            .to_string();
        let at = e
            .span()
            .map(|s| format!(" (line {})", text[..s.start].lines().count().max(1)))
            .unwrap_or_default();
        format!("{first}{at}")
    })?;
    if budget.steps == Some(0) {
        return Err("steps = 0: a run has at least 1 step".into());
    }
    for (name, a) in &budget.api {
        check_api_name(name)?;
        if a.max_per_step.is_some() && budget.steps.is_none() {
            return Err(format!(
                "api.{name}.max_per_step needs `steps = N` at the top"
            ));
        }
        for (field, limit) in [
            ("p50_max_us", a.p50_max_us),
            ("p99_max_us", a.p99_max_us),
            ("max_per_step", a.max_per_step),
        ] {
            if let Some(v) = limit.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(format!(
                    "api.{name}.{field} = {v}: a limit is a finite number >= 0"
                ));
            }
        }
    }
    let share = |field: &str, v: f64| {
        if (0.0..=1.0).contains(&v) {
            Ok(())
        } else {
            Err(format!("{field} = {v}: a share is a number from 0 to 1"))
        }
    };
    if let Some(s) = &budget.syncs {
        share("syncs.max_blocked_share", s.max_blocked_share)?;
    }
    if let Some(g) = &budget.gpu {
        share("gpu.min_busy", g.min_busy)?;
    }
    if let Some(f) = &budget.findings {
        for id in &f.forbid {
            if rules::find(id).is_none() {
                return Err(format!(
                    "findings.forbid names no rule {id} (see `gpuspy explain`)"
                ));
            }
        }
    }
    if let Some((name, _)) = budget.api.iter().find(|(_, a)| a.assertions() == 0) {
        return Err(format!(
            "[api.{name}] sets no limit (p50_max_us, p99_max_us, max_per_run or max_per_step)"
        ));
    }
    if budget.assertions() == 0 {
        return Err(
            "asserts nothing, and an empty gate passes any run; see docs/ci.md for the limits \
             a budget can set"
                .into(),
        );
    }
    Ok(budget)
}

/// An `[api.NAME]` table must name an API family gpuspy records (the hook list's base names),
/// or it would pass with "0 calls" forever.
fn check_api_name(name: &str) -> Result<(), String> {
    if is_hooked_api(name) {
        return Ok(());
    }
    let base = base_name(name);
    if base != name && is_hooked_api(base) {
        return Err(format!(
            "[api.{name}]: budgets name API families, not variants: use [api.{base}] \
             (it counts all of its variants)"
        ));
    }
    let closest = crate::did_you_mean::closest(name, HOOKED_APIS.iter().copied());
    Err(match closest {
        Some(known) => {
            format!("[api.{name}]: gpuspy records no API {name}; did you mean {known}?")
        }
        None => format!(
            "[api.{name}]: gpuspy records no API {name} (budgets name driver or NCCL API \
             families such as cuLaunchKernel; `gpuspy report` lists a run's)"
        ),
    })
}

impl ApiBudget {
    fn assertions(&self) -> usize {
        [
            self.p50_max_us.is_some(),
            self.p99_max_us.is_some(),
            self.max_per_run.is_some(),
            self.max_per_step.is_some(),
        ]
        .into_iter()
        .filter(|&set| set)
        .count()
    }
}

impl Budget {
    /// How many pass/fail cases the budget makes per run.
    fn assertions(&self) -> usize {
        self.api.values().map(ApiBudget::assertions).sum::<usize>()
            + usize::from(self.syncs.is_some())
            + self.findings.as_ref().map_or(0, |f| f.forbid.len())
            + usize::from(self.gpu.is_some())
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// Every assertion of the budget against one analysed run.
pub fn evaluate(b: &Budget, a: &Analysed, run: &str) -> Vec<Case> {
    let p = &a.profile;
    let mut cases = Vec::new();
    let mut case = |name: String, passed: bool, message: String| {
        let name = if run.is_empty() {
            name
        } else {
            format!("{run}: {name}")
        };
        cases.push(Case {
            name,
            passed,
            message,
        });
    };
    for (name, a) in &b.api {
        let calls = p.calls(name);
        let latency = p.api(name).map(|api| &api.latency);
        for (label, q, limit) in [("p50", 0.5, a.p50_max_us), ("p99", 0.99, a.p99_max_us)] {
            if let Some(limit) = limit {
                let value = latency.map_or(0, |l| l.quantile(q));
                case(
                    format!("{name} {label} <= {limit} us"),
                    us(value) <= limit,
                    format!("{label} {} over {calls} calls", duration(value)),
                );
            }
        }
        if let Some(limit) = a.max_per_run {
            case(
                format!("{name} calls <= {limit} per run"),
                calls <= limit,
                format!("{calls} calls"),
            );
        }
        if let (Some(limit), Some(steps)) = (a.max_per_step, b.steps) {
            let per_step = calls as f64 / steps.max(1) as f64;
            case(
                format!("{name} calls <= {limit} per step"),
                per_step <= limit,
                format!("{calls} calls over {steps} steps = {per_step:.2} per step"),
            );
        }
    }
    if let Some(s) = &b.syncs {
        let blocked = Report::new(a).host_blocked;
        case(
            format!(
                "host blocked in syncs <= {} of the steady state",
                percent(Some(s.max_blocked_share))
            ),
            blocked.share <= s.max_blocked_share,
            format!(
                "{} blocked, {} of {}",
                duration(blocked.ns),
                percent(Some(blocked.share)),
                duration(blocked.steady_ns)
            ),
        );
    }
    if let Some(f) = &b.findings {
        for id in &f.forbid {
            let found = a
                .job
                .diagnosis
                .findings
                .iter()
                .find(|x| x.id == id && x.severity == Severity::Warning);
            case(
                format!("no {id} finding"),
                found.is_none(),
                found.map_or_else(|| "absent".to_string(), |x| x.summary.clone()),
            );
        }
    }
    if let Some(g) = &b.gpu {
        let name = format!("GPU busy >= {:.0} %", g.min_busy * 100.0);
        // Every device of every process must meet it: the least busy one decides.
        let least = p
            .gpu_activity()
            .filter_map(|(_, d, a)| a.busy_share().map(|s| (d.ordinal, s)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match least {
            Some((ordinal, busy)) => case(
                name,
                busy >= g.min_busy,
                format!("least busy GPU {ordinal}: {:.1} % (CUPTI kernel time over the activity span)", busy * 100.0),
            ),
            None => case(
                name,
                false,
                "cannot check: the dumps have no CUPTI activity (see the report's GPU section for why)".into(),
            ),
        }
    }
    cases
}

pub fn check(paths: &[PathBuf], budget: &Path, out: &Output) -> Result<bool> {
    let budget = load_budget(budget)?;
    let runs = analyse::runs(paths)?;
    let mut incomplete = Vec::new();
    let cases: Vec<Case> = runs
        .iter()
        .flat_map(|r| {
            let label = if runs.len() > 1 { r.name.as_str() } else { "" };
            incomplete.extend(analyse::incomplete(&r.analysed, label));
            evaluate(&budget, &r.analysed, label)
        })
        .collect();
    let simulated = report::simulated_note(runs.iter().map(|r| &r.analysed));
    report(&cases, simulated, &incomplete, out)
}

/// `gpuspy run --check`: the run just made, against the budget (loaded before the run).
pub fn check_profile(analysed: &Analysed, budget: &Budget, out: &Output) -> Result<bool> {
    let incomplete: Vec<String> = analyse::incomplete(analysed, "").into_iter().collect();
    let simulated = report::simulated_note(std::iter::once(analysed));
    report(&evaluate(budget, analysed, ""), simulated, &incomplete, out)
}

/// Emits the cases with their notes: the SIMULATED line first, then what the shim did not
/// record.
fn report(
    cases: &[Case],
    simulated: Option<String>,
    incomplete: &[String],
    out: &Output,
) -> Result<bool> {
    let is_simulated = simulated.is_some();
    let notes: Vec<String> = simulated
        .into_iter()
        .chain(incomplete.iter().cloned())
        .collect();
    Gate {
        tool: "gpuspy check",
        cases,
        notes: &notes,
    }
    .emit(out)?;
    let failed = cases.iter().filter(|c| !c.passed).count();
    if let Some(to) = &out.json {
        let mut json = serde_json::json!({
            "failed": failed,
            "cases": cases,
            "incomplete": !incomplete.is_empty(),
            "notes": notes,
        });
        if is_simulated {
            json["simulated"] = true.into();
        }
        to.write(&json)?;
    } else {
        for note in &notes {
            println!("note: {}", Escaped(note));
        }
        for c in cases {
            println!(
                "  {} {:<48} {}",
                if c.passed { "ok  " } else { "FAIL" },
                Escaped(&c.name),
                Escaped(&c.message)
            );
        }
        println!(
            "result: {}",
            if failed == 0 {
                format!("all {} assertion(s) hold", cases.len())
            } else {
                format!("{failed} of {} assertion(s) failed", cases.len())
            }
        );
    }
    Ok(failed == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use gpuspy_format::SyncCause;

    fn budget(text: &str) -> Budget {
        toml::from_str(text).unwrap()
    }

    fn passed(cases: &[Case]) -> Vec<bool> {
        cases.iter().map(|c| c.passed).collect()
    }

    #[test]
    fn latency_and_count_limits() {
        let p = run(1.0).api("cuStreamSynchronize", 100, 200.0, 0).build();
        let b = budget(
            "steps = 100\n[api.cuStreamSynchronize]\np50_max_us = 2500\np99_max_us = 1000\nmax_per_run = 100\nmax_per_step = 0.5\n",
        );
        // p50 of 2 ms passes 2.5 ms, fails 1 ms; 100 calls pass 100 per run, fail 0.5 per step.
        assert_eq!(
            passed(&evaluate(&b, &analyse::merged(p.clone()), "")),
            [true, false, true, false]
        );
    }

    #[test]
    fn the_blocked_share_counts_syncs_not_pageable_copies_and_forbidden_findings() {
        let b = budget("[syncs]\nmax_blocked_share = 0.5\n[findings]\nforbid = [\"pageable-memcpy\", \"sync-stalled\"]\n");
        // Pageable copies block the host too, but are gated by their own rule.
        let pageable = run(1.0)
            .sync(SyncCause::PageableAsyncCopy, 200, 600.0)
            .build();
        let cases = evaluate(&b, &analyse::merged(pageable), "");
        assert_eq!(passed(&cases), [true, false, true]);
        assert_eq!(cases[0].message, "0 ns blocked, 0.0 % of 1.00 s");
        let syncs = run(1.0).sync(SyncCause::Explicit, 200, 600.0).build();
        let cases = evaluate(&b, &analyse::merged(syncs), "");
        assert_eq!(
            cases[0].name,
            "host blocked in syncs <= 50.0 % of the steady state"
        );
        assert_eq!(cases[0].message, "600 ms blocked, 60.0 % of 1.00 s");
        assert!(!cases[0].passed);
        let quiet = run(1.0).build();
        assert_eq!(
            passed(&evaluate(&b, &analyse::merged(quiet), "")),
            [true, true, true]
        );
    }

    #[test]
    fn gpu_busy_is_checked_on_the_least_busy_device() {
        let b = budget("[gpu]\nmin_busy = 0.9\n");
        let cases = evaluate(&b, &analyse::merged(run(1.0).build()), "");
        assert!(!cases[0].passed);
        assert!(cases[0].message.contains("no CUPTI activity"));
        let busy = |share: f64| {
            let a = gpuspy_format::gpu::Activity {
                first_unix_ns: 1,
                last_unix_ns: 1 + 1_000_000,
                busy_ns: (share * 1e6) as u64,
                ..Default::default()
            };
            run(1.0)
                .gpu(gpuspy_format::gpu::Gpu {
                    devices: vec![gpuspy_format::gpu::Device {
                        ordinal: 0,
                        activity: Some(a),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .build()
        };
        assert!(evaluate(&b, &analyse::merged(busy(0.95)), "")[0].passed);
        let low = &evaluate(&b, &analyse::merged(busy(0.5)), "")[0];
        assert!(!low.passed);
        assert_eq!(
            low.message,
            "least busy GPU 0: 50.0 % (CUPTI kernel time over the activity span)"
        );
    }

    #[test]
    fn malformed_budgets_get_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            let p = dir.path().join("b.toml");
            std::fs::write(&p, text).unwrap();
            p
        };
        let e = load_budget(&write("[api.cuInit]\np50_max = 3\n")).unwrap_err();
        assert!(e.to_string().contains("unknown field `p50_max`"), "{e}");
        let e = load_budget(&write("steps = \"many\"\n")).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = load_budget(&write("[api.cuInit]\nmax_per_step = 1\n")).unwrap_err();
        assert!(e.to_string().contains("needs `steps = N`"), "{e}");
        let e = load_budget(&write("[findings]\nforbid = [\"no-such\"]\n")).unwrap_err();
        assert!(e.to_string().contains("names no rule no-such"), "{e}");
        let e = load_budget(&dir.path().join("missing.toml")).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    #[test]
    fn an_api_gpuspy_does_not_record_is_an_error_with_a_suggestion() {
        assert_eq!(
            parse_budget("[api.cuLaunchKernelz]\nmax_per_run = 1\n").unwrap_err(),
            "[api.cuLaunchKernelz]: gpuspy records no API cuLaunchKernelz; did you mean \
             cuLaunchKernel?"
        );
        assert_eq!(
            parse_budget("[api.custreamsynchronize]\nmax_per_run = 1\n").unwrap_err(),
            "[api.custreamsynchronize]: gpuspy records no API custreamsynchronize; did you \
             mean cuStreamSynchronize?"
        );
        assert_eq!(
            parse_budget("[api.cuMemcpyHtoDAsync_v2_ptsz]\nmax_per_run = 1\n").unwrap_err(),
            "[api.cuMemcpyHtoDAsync_v2_ptsz]: budgets name API families, not variants: use \
             [api.cuMemcpyHtoDAsync] (it counts all of its variants)"
        );
        let far = parse_budget("[api.nvtxRangePushA]\nmax_per_run = 1\n").unwrap_err();
        assert!(
            far.starts_with(
                "[api.nvtxRangePushA]: gpuspy records no API nvtxRangePushA (budgets name"
            ),
            "{far}"
        );
        // Driver and NCCL families are both known.
        parse_budget("[api.ncclAllReduce]\nmax_per_run = 1\n[api.cuMemcpy]\np99_max_us = 5\n")
            .unwrap();
    }

    #[test]
    fn a_budget_or_table_that_asserts_nothing_is_an_error() {
        for text in ["", "steps = 10\n", "[findings]\nforbid = []\n"] {
            let e = parse_budget(text).unwrap_err();
            assert!(
                e.starts_with("asserts nothing, and an empty gate passes any run"),
                "{text:?}: {e}"
            );
        }
        assert_eq!(
            parse_budget("[api.cuInit]\n[api.cuLaunchKernel]\nmax_per_run = 1\n").unwrap_err(),
            "[api.cuInit] sets no limit (p50_max_us, p99_max_us, max_per_run or max_per_step)"
        );
    }

    #[test]
    fn limits_are_finite_non_negative_and_shares_within_0_and_1() {
        for (text, error) in [
            (
                "[api.cuInit]\np50_max_us = nan\n",
                "api.cuInit.p50_max_us = NaN: a limit is a finite number >= 0",
            ),
            (
                "[api.cuInit]\np99_max_us = inf\n",
                "api.cuInit.p99_max_us = inf: a limit is a finite number >= 0",
            ),
            (
                "steps = 3\n[api.cuInit]\nmax_per_step = -0.5\n",
                "api.cuInit.max_per_step = -0.5: a limit is a finite number >= 0",
            ),
            (
                "[syncs]\nmax_blocked_share = 1.5\n",
                "syncs.max_blocked_share = 1.5: a share is a number from 0 to 1",
            ),
            (
                "[syncs]\nmax_blocked_share = nan\n",
                "syncs.max_blocked_share = NaN: a share is a number from 0 to 1",
            ),
            (
                "[gpu]\nmin_busy = -0.1\n",
                "gpu.min_busy = -0.1: a share is a number from 0 to 1",
            ),
            (
                "steps = 0\n[api.cuInit]\nmax_per_step = 1\n",
                "steps = 0: a run has at least 1 step",
            ),
        ] {
            assert_eq!(parse_budget(text).unwrap_err(), error, "{text:?}");
        }
        let e = parse_budget("[api.cuInit]\nmax_per_run = -1\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        // The edges are limits like any other.
        parse_budget(
            "[api.cuInit]\np50_max_us = 0\n[syncs]\nmax_blocked_share = 1\n[gpu]\nmin_busy = 0\n",
        )
        .unwrap();
    }
}
