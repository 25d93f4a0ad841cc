//! The six-layer diagnosis: rules turn a loaded profile into findings, and the findings into
//! a verdict and a status for each layer, bottom up (driver, runtime, memory, compute,
//! pipeline, framework), as in the article gpuspy comes from.
//!
//! Each rule is a unit struct in `rules/` with its documentation and tests beside it, and
//! is a pure function of its `rule::Input`: the profile and its time axis, computed once
//! here for all of them. A rule either finds something, finds the layer clear,
//! or says which data it lacks. It never guesses silently: findings drawn from host-side
//! data alone, where GPU-side data would settle the question, are marked `heuristic`.

use crate::analysis::rule::{ms, Finding, Input, Layer, Outcome, Severity};
use crate::units::duration;
use serde::Serialize;

/// One layer's result.
#[derive(Debug, Clone, Serialize)]
pub struct LayerStatus {
    pub layer: Layer,
    /// `warning`, `info`, `ok` or `no-data`.
    pub status: &'static str,
    pub findings: Vec<&'static str>,
    /// Rules of this layer that could not judge, with what they lack.
    pub no_data: Vec<(&'static str, &'static str)>,
}

#[derive(Debug, Serialize)]
pub struct Diagnosis {
    /// Ordered by impact, largest first: the first warning is the verdict.
    pub findings: Vec<Finding>,
    pub layers: Vec<LayerStatus>,
}

impl Diagnosis {
    pub fn verdict(&self) -> Option<&Finding> {
        self.findings
            .first()
            .filter(|f| f.severity == Severity::Warning)
    }
}

/// Runs every rule on `input`.
pub fn diagnose(input: &Input) -> Diagnosis {
    let mut findings = Vec::new();
    let mut no_data = Vec::new();
    for rule in crate::analysis::rules::ALL {
        match rule.check(input) {
            Outcome::Found(f) => findings.push(f),
            Outcome::Clear => {}
            Outcome::NoData(missing) => no_data.push((rule.layer(), rule.id(), missing)),
        }
    }
    judge_whole_loop(input, &mut findings);
    // The verdict is the loop's: with a steady state, start-up findings come after it.
    let steady = input.steady().is_some();
    let late = |f: &Finding| {
        steady && crate::analysis::rules::find(f.id).is_some_and(|r| r.judges_startup())
    };
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(late(a).cmp(&late(b)))
            .then(b.impact.total_cmp(&a.impact))
            .then(a.id.cmp(b.id))
    });
    let layers = Layer::ALL
        .iter()
        .map(|&layer| {
            let mine: Vec<&Finding> = findings.iter().filter(|f| f.layer == layer).collect();
            let missing: Vec<_> = no_data
                .iter()
                .filter(|(l, _, _)| *l == layer)
                .map(|&(_, id, what)| (id, what))
                .collect();
            let judged = crate::analysis::rules::ALL
                .iter()
                .filter(|r| r.layer() == layer)
                .count()
                > missing.len();
            let status = if mine.iter().any(|f| f.severity == Severity::Warning) {
                "warning"
            } else if !mine.is_empty() {
                "info"
            } else if judged {
                "ok"
            } else {
                "no-data"
            };
            LayerStatus {
                layer,
                status,
                findings: mine.iter().map(|f| f.id).collect(),
                no_data: missing,
            }
        })
        .collect();
    Diagnosis { findings, layers }
}

/// Synthetic profiles for the rules' unit tests (kept beside the model they build).
/// Where the steady state is short next to warm-up (`phases::short_next_to_warmup`), the
/// pipeline layer's rules (the GPU waiting for its input) judge the loop as a whole too,
/// so that starvation in a short run's first seconds is not lost: a warning found there
/// whose rule warned nothing in the steady state takes that rule's place, and says so.
/// What the steady state found keeps its steady impact, the per-step estimate, and the
/// other layers judge the steady state alone: a warm-up can also hold the set-up before a
/// timed loop (cuDNN autotuning a ResNet-50 for 14 s, with syncs and allocations, before
/// a DataLoader loop of 8 s read input-starved 87 % over the whole loop, 44 % in the
/// steady state, against 58 % saved; bench/results/gpu-2026-12-03-reallib-5-long,
/// loader-slow).
fn judge_whole_loop(input: &Input, findings: &mut Vec<Finding>) {
    let Some(whole) = input.axis.as_ref().and_then(|a| a.whole_loop.as_deref()) else {
        return;
    };
    let over_loop = Input {
        profile: input.profile,
        axis: Some(whole.clone()),
    };
    let (steady_ns, loop_ns) = (
        input.steady().map_or(0, |s| s.ns),
        over_loop.steady().map_or(0, |s| s.ns),
    );
    for rule in crate::analysis::rules::ALL
        .iter()
        .filter(|r| r.layer() == Layer::Pipeline)
    {
        let Outcome::Found(mut f) = rule.check(&over_loop) else {
            continue;
        };
        let mine = findings.iter().position(|g| g.id == f.id);
        if f.severity != Severity::Warning
            || mine.is_some_and(|i| findings[i].severity == Severity::Warning)
        {
            continue;
        }
        // The rule names the span it judged "the steady state": here, the loop.
        f.summary = format!(
            "Judged over the whole loop, {}: its steady state, {}, is short next to its warm-up. {}",
            duration(loop_ns),
            duration(steady_ns),
            f.summary.replace("the steady state", "the loop")
        );
        let f = f
            .evidence("judged_over", "whole-loop")
            .evidence("loop_ms", ms(loop_ns))
            .evidence("steady_state_ms", ms(steady_ns));
        match mine {
            Some(i) => findings[i] = f,
            None => findings.push(f),
        }
    }
}

#[cfg(test)]
pub use crate::analysis::profile::synthetic;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};

    #[test]
    fn a_short_run_whose_first_seconds_starve_is_judged_over_the_whole_loop() {
        // Three stretches of 5 windows with the GPU busy throughout, between them two
        // 300 ms waits with the host at work and the GPU idle (a DataLoader's workers
        // starting): 150 ms of steady state, 600 ms of pauses.
        let fed = W {
            launches: 20,
            driver_ns: MS,
            busy_ns: 10 * MS,
            ..W::default()
        };
        let wait = W {
            idle_host: 10 * MS,
            ..W::default()
        };
        let mut w = times(5, fed);
        for _ in 0..2 {
            w.extend(times(30, wait));
            w.extend(times(5, fed));
        }
        let mut p = synthetic::run(0.75).build();
        attach(&mut p, timeline(&w, true));
        let input = Input::new(&p);
        // The steady state alone never waited.
        assert_eq!(input.steady().map(|s| s.ns), Some(150 * MS));
        let steady_only = crate::analysis::rules::find("input-starved")
            .unwrap()
            .check(&input);
        assert!(matches!(steady_only, Outcome::Clear));
        let d = diagnose(&input);
        let f = d.verdict().unwrap();
        assert_eq!((f.id, f.impact), ("input-starved", 0.8));
        assert_eq!(f.evidence["judged_over"], "whole-loop");
        assert_eq!(
            f.summary,
            "Judged over the whole loop, 750 ms: its steady state, 150 ms, is short next to its warm-up. The GPU sat idle with nothing queued 80.0 % of the loop, while the host worked outside the driver. The host spent 2.0 % of it inside the driver."
        );
    }
}
