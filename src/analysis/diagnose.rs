//! The six-layer diagnosis: rules turn a loaded profile into findings, and the findings into
//! a verdict and a status for each layer, bottom up (driver, runtime, memory, compute,
//! pipeline, framework), as in the article gpuspy comes from.
//!
//! Each rule is a unit struct in `rules/` with its documentation and tests beside it, and
//! is a pure function of its `rule::Input`: the profile and its time axis, computed once
//! here for all of them. A rule either finds something, finds the layer clear,
//! or says which data it lacks. It never guesses silently: findings drawn from host-side
//! data alone, where GPU-side data would settle the question, are marked `heuristic`.

use crate::analysis::rule::{Finding, Input, Layer, Outcome, Severity};
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
#[cfg(test)]
pub use crate::analysis::profile::synthetic;
