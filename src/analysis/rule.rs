//! A diagnosis rule and what it finds: the `Rule` trait, its `Input` (the profile and the
//! time axis, computed once for every rule), the `Outcome` of a check and the `Finding` it
//! reports, placed in a layer with a severity. The rules (`rules/`) implement it and
//! `diagnose` runs them; neither imports the other's internals.

use crate::analysis::phases::{time_axis, SteadyGpu, SteadyState, TimeAxis};
use crate::analysis::profile::Profile;
use gpuspy_format::callsites::{CallSite, Frame};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What every rule judges: the profile, and its time axis (phases and steady state),
/// computed once per diagnosis rather than by each rule that needs it.
pub struct Input<'a> {
    pub profile: &'a Profile,
    /// None when no dump has a timeline (schema 1): the rules keep their whole-run model.
    pub axis: Option<TimeAxis>,
}

impl<'a> Input<'a> {
    pub fn new(profile: &'a Profile) -> Input<'a> {
        Input {
            profile,
            axis: time_axis(profile),
        }
    }

    /// The steady state, where the timelines reached one.
    pub fn steady(&self) -> Option<&SteadyState> {
        self.axis.as_ref()?.steady.as_ref()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Driver,
    Runtime,
    Memory,
    Compute,
    Pipeline,
    Framework,
}

impl Layer {
    /// Bottom up: the order in which the article checks them.
    pub const ALL: [Layer; 6] = [
        Layer::Driver,
        Layer::Runtime,
        Layer::Memory,
        Layer::Compute,
        Layer::Pipeline,
        Layer::Framework,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Layer::Driver => "driver",
            Layer::Runtime => "runtime",
            Layer::Memory => "memory",
            Layer::Compute => "compute",
            Layer::Pipeline => "pipeline",
            Layer::Framework => "framework",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
}

/// Findings below this share of the time they are measured against are informational.
pub const WARNING_IMPACT: f64 = 0.05;

/// The queue's refill after waits of `waited` that no longer keep the host `freed` (shares
/// of the steady state), once the fix is in: counted only where the waits warn by
/// themselves, so it sizes a finding and never makes one (`SteadyGpu::refill_share`).
pub fn refill_of_warning(g: &SteadyGpu, waited: f64, freed: f64) -> f64 {
    if waited >= WARNING_IMPACT {
        g.refill_share(freed)
    } else {
        0.0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub id: &'static str,
    pub layer: Layer,
    pub severity: Severity,
    /// Estimated share of the run's time lost to this problem, so also the predicted
    /// speed-up if it is fixed (0.3 means about 30 % less time).
    pub impact: f64,
    /// One sentence with the key numbers.
    pub summary: String,
    /// The numbers that triggered the finding.
    pub evidence: Map<String, Value>,
    pub fix: &'static str,
    /// Drawn from host-side data where GPU-side data would settle it.
    pub heuristic: bool,
    /// The Python lines that made the calls behind the finding, most blocked time first
    /// (empty without Python or without captured calls).
    pub call_sites: Vec<SiteShare>,
}

/// One Python line's part in a finding: the captured calls whose innermost user frame it
/// is (estimates where sampled calls contribute; see docs/dump-format.md).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SiteShare {
    pub file: String,
    pub line: u32,
    pub function: String,
    pub calls: u64,
    pub blocked_ns: u64,
    /// Of the finding's whole blocked time (its syncs, copies or allocations).
    pub share: f64,
}

/// Lines a finding names.
const SITES_PER_FINDING: usize = 5;

impl Finding {
    /// A finding whose severity follows from its impact. An impact is a share of time: a
    /// rule's estimate past the whole of its span (records that came late, a span shorter
    /// than the work measured in it) is capped at all of it, and one that is not a number
    /// counts as none.
    pub fn new(rule: &dyn Rule, impact: f64, summary: String, fix: &'static str) -> Finding {
        let impact = if impact.is_nan() {
            0.0
        } else {
            impact.clamp(0.0, 1.0)
        };
        Finding {
            id: rule.id(),
            layer: rule.layer(),
            severity: if impact >= WARNING_IMPACT {
                Severity::Warning
            } else {
                Severity::Info
            },
            impact,
            summary,
            evidence: Map::new(),
            fix,
            heuristic: false,
            call_sites: Vec::new(),
        }
    }

    pub fn evidence(mut self, key: &str, value: impl Into<Value>) -> Finding {
        self.evidence.insert(key.to_string(), value.into());
        self
    }

    /// Names the Python lines behind the profile's captured calls that `behind` picks,
    /// grouped by their innermost user frame, each with its share of `blocked_ns`, the
    /// finding's whole blocked time (captured or not).
    pub fn call_sites(
        mut self,
        p: &Profile,
        blocked_ns: u64,
        behind: impl Fn(&CallSite) -> bool,
    ) -> Finding {
        let mut lines: BTreeMap<&Frame, (u64, u64)> = BTreeMap::new();
        for site in p.call_sites.iter().filter(|s| behind(s)) {
            if let Some(frame) = site.user_frame() {
                let (calls, ns) = lines.entry(frame).or_default();
                *calls = calls.saturating_add(site.calls);
                *ns = ns.saturating_add(site.blocked_ns);
            }
        }
        let mut shares: Vec<SiteShare> = lines
            .into_iter()
            .map(|(f, (calls, ns))| SiteShare {
                file: f.file.clone(),
                line: f.line,
                function: f.function.clone(),
                calls,
                blocked_ns: ns,
                // Sampled calls make the sites' time an estimate: it may overshoot.
                share: (ns as f64 / blocked_ns.max(1) as f64).min(1.0),
            })
            .collect();
        shares.sort_by_key(|s| std::cmp::Reverse(s.blocked_ns));
        shares.truncate(SITES_PER_FINDING);
        self.call_sites = shares;
        self
    }

    pub fn heuristic(mut self) -> Finding {
        self.heuristic = true;
        self
    }
}

/// What a rule's check finds.
pub enum Outcome {
    Found(Finding),
    Clear,
    /// The rule cannot judge: this data is missing.
    NoData(&'static str),
}

pub trait Rule: Sync {
    fn id(&self) -> &'static str;
    fn layer(&self) -> Layer;
    /// Markdown. The first line is the one-line summary used in tables.
    fn doc(&self) -> &'static str;
    fn check(&self, input: &Input) -> Outcome;
    /// Whether the rule judges the start-up rather than the steady state: where a timeline
    /// gives a steady state, its warnings come after the steady state's.
    fn judges_startup(&self) -> bool {
        false
    }
}

/// Milliseconds with one decimal, for evidence.
pub fn ms(ns: u64) -> f64 {
    (ns as f64 / 1e5).round() / 10.0
}
