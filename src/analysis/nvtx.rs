//! What the report says about the program's NVTX ranges (the shim is its NVTX injection
//! library, docs/design.md, "NVTX"); which ranges mark steps and pauses is the time axis's
//! judgement (`phases::ranges`).

use crate::analysis::phases::{Phase, PhaseKind, Step, StepSource};
use crate::analysis::profile::Profile;
use gpuspy_format::timeline::Timeline;
use serde::Serialize;
use std::collections::BTreeSet;

/// What the report says about NVTX.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Ranges that ended, summed over the processes, and their distinct names.
    pub ranges: u64,
    pub names: usize,
    /// Ranges not recorded in full (too deep, ring overflow).
    pub lost: u64,
    /// The range name that gave the steady state's step, and the pauses named by ranges.
    pub steps: Vec<String>,
    pub pauses: Vec<String>,
    /// `NVTX_INJECTION64_PATH` as another tool set it, where one did: gpuspy saw no ranges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_tool: Option<String>,
}

/// The summary of `p`'s NVTX ranges; None when no process saw any and none had another
/// tool as its injection library (most programs).
pub fn summary(p: &Profile, phases: &[Phase], step: Option<&Step>) -> Option<Summary> {
    let timelines: Vec<&Timeline> = p
        .processes
        .iter()
        .filter_map(|x| x.timeline.as_deref())
        .collect();
    let all = || timelines.iter().flat_map(|t| &t.nvtx);
    let names: BTreeSet<&str> = all().map(|r| r.name.as_str()).collect();
    let other_tool = timelines.iter().find_map(|t| t.nvtx_other_tool.clone());
    if names.is_empty() && other_tool.is_none() {
        return None;
    }
    let mut pauses: Vec<String> = Vec::new();
    for ph in phases.iter().filter(|ph| ph.kind == PhaseKind::Pause) {
        if let Some(name) = ph.name.as_ref().filter(|n| names.contains(n.as_str())) {
            if !pauses.contains(name) {
                pauses.push(name.clone());
            }
        }
    }
    Some(Summary {
        ranges: crate::analysis::profile::total(all().map(|r| r.count)),
        names: names.len(),
        lost: crate::analysis::profile::total(timelines.iter().map(|t| t.nvtx_lost)),
        steps: match step.map(|s| &s.source) {
            Some(StepSource::Nvtx(name)) => vec![name.clone()],
            _ => Vec::new(),
        },
        pauses,
        other_tool,
    })
}
