//! The program's NVTX ranges (the shim is its NVTX injection library, docs/design.md,
//! "NVTX"): which names mark one-off phases inside the loop, and what the report says
//! about the ranges seen.

use crate::analysis::phases::{
    is_pause_name, is_step_name, Phase, PhaseKind, Step, StepSource, PAUSE_MIN_NS,
};
use crate::analysis::profile::Profile;
use gpuspy_format::timeline::{NvtxRanges, Timeline};
use serde::Serialize;
use std::collections::BTreeSet;

/// A range name repeated at least this many times as often as another marks the loop's
/// steps, and the other, rarer one an exception inside the loop.
const RARITY: u64 = 10;

/// Whether ranges `r` of timeline `t` mark one-off phases: a name that says so
/// (evaluation, checkpoint, compile), or a rare long outermost range among repeated
/// outermost ones (Megatron's "forward-backward" 1,000 times, one "validation" of 2 s)
/// whose name does not say it is a step.
pub fn is_pause(t: &Timeline, r: &NvtxRanges) -> bool {
    is_pause_name(&r.name) || is_rare_and_long(t, r)
}

fn is_rare_and_long(t: &Timeline, r: &NvtxRanges) -> bool {
    r.count > 0
        && !is_step_name(&r.name)
        && r.outermost == r.count
        && r.total_ns / r.count >= PAUSE_MIN_NS
        && t.nvtx
            .iter()
            .any(|s| s.name != r.name && s.outermost >= RARITY * r.count)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(name: &str, count: u64, outermost: u64, mean_ns: u64) -> NvtxRanges {
        NvtxRanges {
            name: name.into(),
            count,
            outermost,
            total_ns: count * mean_ns,
            ..NvtxRanges::default()
        }
    }

    #[test]
    fn a_rare_long_outermost_range_among_repeated_ones_is_a_pause() {
        let ms = 1_000_000;
        let mut t = Timeline {
            nvtx: vec![
                ranges("forward-backward", 1_000, 1_000, 50 * ms),
                ranges("validation", 2, 2, 2_000 * ms),
                // Nested: not an exception to the loop, part of a step.
                ranges("allreduce", 2, 0, 500 * ms),
                // Short: a marker, not a phase.
                ranges("log", 3, 3, ms),
                // Named so: a pause however often it occurs.
                ranges("checkpoint", 500, 500, 10 * ms),
                // Long steps among many short outermost ranges stay steps.
                ranges("train_step", 20, 20, 400 * ms),
            ],
            ..Timeline::default()
        };
        let pauses: Vec<&str> = t
            .nvtx
            .iter()
            .filter(|r| is_pause(&t, r))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(pauses, vec!["validation", "checkpoint"]);
        // Without the repeated steps around it, one long range is the whole program's.
        t.nvtx = vec![
            ranges("main", 1, 1, 9_000 * ms),
            ranges("epoch", 3, 3, 3_000 * ms),
        ];
        assert!(t.nvtx.iter().all(|r| !is_pause(&t, r)));
    }
}
