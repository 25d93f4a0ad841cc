//! NVTX ranges that mark the loop's steps, or one-off phases inside it (evaluation,
//! checkpoint, compile): by their name, or by how rarely a long outermost range recurs.

use super::phase::PAUSE_MIN_NS;
use gpuspy_format::timeline::{NvtxRanges, Timeline};

/// NVTX range names that mark one-off phases inside the loop.
pub fn is_pause_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "eval",
        "valid",
        "test",
        "checkpoint",
        "ckpt",
        "save",
        "compile",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// NVTX range names that mark one training or inference step.
pub fn is_step_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    !is_pause_name(name) && ["step", "iter", "batch"].iter().any(|w| n.contains(w))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use gpuspy_format::timeline::{NvtxRanges, Timeline};

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
