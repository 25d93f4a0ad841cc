//! Whether a cost recurs through the steady state or comes in a few one-off bursts. A
//! per-step problem shows in most steps; a model moved to the GPU once, a checkpoint every
//! quarter of the loop or a framework's teardown copy shows in a few runs of windows, and
//! its fix is not the per-step one (Lightning's `fit()` ends by moving the model and the
//! optimizer state back to the host: 2.28 GB in 32 copies, once).

use crate::analysis::phases::TimeAxis;
use crate::analysis::profile::Profile;
use gpuspy_format::timeline::Timeline;

/// A cost in this many separate runs of steady windows or more recurs, however few
/// windows it fills: a slow loop's step is longer than a window.
const MIN_BURSTS: usize = 8;
/// A cost in this share of the steady windows or more recurs, in however few runs: a
/// per-step cost of a loop whose steps are shorter than a window fills one run.
const MIN_WINDOW_SHARE: f64 = 0.25;

/// Where a per-window quantity was non-zero in the steady windows of the judged processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recurrence {
    /// Steady windows in all.
    pub windows: usize,
    /// Of them, those with the quantity.
    pub with: usize,
    /// Runs of consecutive windows with it.
    pub bursts: usize,
}

impl Recurrence {
    /// `value(timeline, window)` over the steady windows of every judged process; None
    /// for a window not observed (device time outside CUPTI's recording periods), which
    /// neither counts nor ends a burst.
    pub fn of(
        p: &Profile,
        axis: &TimeAxis,
        value: impl Fn(&Timeline, usize) -> Option<u64>,
    ) -> Self {
        let mut r = Recurrence::default();
        for (i, a) in axis.judged() {
            let Some(t) = p.processes.get(i).and_then(|d| d.timeline.as_deref()) else {
                continue;
            };
            let mut in_burst = false;
            for w in 0..t.host.calls.len() {
                if !a.is_steady(w) {
                    in_burst = false;
                    continue;
                }
                let Some(v) = value(t, w) else { continue };
                r.windows += 1;
                let has = v > 0;
                r.with += has as usize;
                r.bursts += (has && !in_burst) as usize;
                in_burst = has;
            }
        }
        r
    }

    /// In a few bursts that fill a small part of the steady state: not a per-step cost.
    pub fn one_off(&self) -> bool {
        self.with > 0
            && self.bursts < MIN_BURSTS
            && (self.with as f64) < MIN_WINDOW_SHARE * self.windows as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(windows: usize, with: usize, bursts: usize) -> Recurrence {
        Recurrence {
            windows,
            with,
            bursts,
        }
    }

    #[test]
    fn few_bursts_in_few_windows_are_one_off() {
        // A model moved to the GPU at the loop's start: one run of 4 of 150 windows.
        assert!(r(150, 4, 1).one_off());
        // Three checkpoints: three runs of 4.
        assert!(r(200, 12, 3).one_off());
        // A copy every step of a loop of 2 ms steps: every window.
        assert!(!r(150, 150, 1).one_off());
        // A copy every 50 ms step: one window in five, in 30 runs.
        assert!(!r(150, 30, 30).one_off());
        // Nothing at all is no burst either.
        assert!(!r(150, 0, 0).one_off());
    }
}
