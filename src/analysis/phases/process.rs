//! One process's phases: its windows labelled (docs/diagnosis.md, "Phases"), and where
//! its start-up time went.

use super::phase::{
    stretch, Phase, PhaseCopies, PhaseKind, COPY_BURST_MIN_NS, LOADING, PAUSE_MIN_NS,
};
use super::windows::{at, Windows};
use crate::analysis::profile::{total, ProcessInfo};
use gpuspy_format::timeline::Timeline;
use serde::Serialize;

/// Long stretches without work recur, and belong to the steady state (a loop that waits
/// for its data every step), when they take at least `RECURRING_SHARE` of the time between
/// the first and last window with work and either there are more than `RARE_GAPS` of them
/// or the windows with work between two of them are one, or last less than
/// `STEPS_BETWEEN_PAUSES_NS` (one step per gap); more than `RARE_GAPS` that copy nothing
/// are the loop's too, whatever their share. A few long gaps with much regular work between them are pauses
/// (checkpoints, evaluations). A time, not a count of windows: windows widen with the run,
/// and at 40 ms a short loop's 70-110 ms of matmul steps between its checkpoints took 2-3
/// windows (bench/results/gpu-2026-12-01-run13-phases-5, healthy-pauses).
const RECURRING_SHARE: f64 = 0.25;
const RARE_GAPS: usize = 4;
const STEPS_BETWEEN_PAUSES_NS: u64 = 40_000_000;

/// Where a process's start-up time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Startup {
    /// From the process start to the first window with work and a launch (a call, where
    /// the process launched nothing).
    pub ns: u64,
    /// `cuInit` and context creation; module loading, linking and JIT; other driver calls;
    /// the rest (imports, host set-up: outside the driver).
    pub init_ns: u64,
    pub module_ns: u64,
    pub other_driver_ns: u64,
    pub outside_driver_ns: u64,
}

/// One process's phases.
#[derive(Debug, Clone)]
pub struct ProcessAxis {
    pub phases: Vec<Phase>,
    pub startup: Startup,
    /// Whether it launched kernels or kept a GPU busy (`gpu_work`); a launcher's agent or
    /// a compile worker does not (its phases follow its calls), and is left out of the
    /// job's phases and steady state.
    pub gpu_work: bool,
    /// Per window of its timeline: whether it is in the steady state.
    pub(super) steady: Vec<bool>,
    /// Its windows between start-up and teardown.
    pub(super) loop_windows: std::ops::Range<usize>,
    /// Per window, whether the loop judged as a whole holds it (`as_whole_loop`); None
    /// where its steady state is not short next to its warm-up.
    pub(super) whole_loop: Option<Vec<bool>>,
}

impl ProcessAxis {
    /// Whether window `w` of its timeline is in its steady state.
    pub fn is_steady(&self, w: usize) -> bool {
        self.steady.get(w) == Some(&true)
    }

    /// This process judged over its loop as a whole, where its steady state is short next
    /// to its warm-up: the warm-up and the unnamed pauses without one-off copies are
    /// steady too.
    pub(super) fn as_whole_loop(&self) -> Option<ProcessAxis> {
        let flags = self.whole_loop.clone()?;
        let mut phases: Vec<Phase> = Vec::new();
        for ph in &self.phases {
            let mut ph = ph.clone();
            if judged_whole(&ph) {
                ph.kind = PhaseKind::Steady;
                (ph.name, ph.copies) = (None, None);
            }
            match phases.last_mut() {
                Some(last) if last.kind == PhaseKind::Steady && ph.kind == PhaseKind::Steady => {
                    last.end_unix_ns = ph.end_unix_ns
                }
                _ => phases.push(ph),
            }
        }
        Some(ProcessAxis {
            phases,
            steady: flags,
            whole_loop: None,
            ..self.clone()
        })
    }
}

/// Whether a phase of the loop counts when the loop is judged as a whole: the steady
/// state, the warm-up, and the pauses that are neither named (module loading or JIT, an
/// NVTX evaluation) nor one-off copies: the stretches a slow start leaves (a DataLoader's
/// workers starting, the first batches awaited).
fn judged_whole(ph: &Phase) -> bool {
    match ph.kind {
        PhaseKind::Steady | PhaseKind::Warmup => true,
        PhaseKind::Pause => ph.name.is_none() && ph.copies.is_none(),
        PhaseKind::Startup | PhaseKind::Teardown => false,
    }
}

/// A steady state is short next to its warm-up when it lasts less than the loop's warm-up
/// and unnamed pauses together (the phases `judged_whole` counts that are not steady):
/// judged on its steady state alone, a 30-step run whose first seconds starve would lose
/// them.
pub fn short_next_to_warmup(phases: &[Phase]) -> bool {
    let length = |steady: bool| {
        total(
            phases
                .iter()
                .filter(|ph| judged_whole(ph) && (ph.kind == PhaseKind::Steady) == steady)
                .map(|ph| ph.end_unix_ns - ph.start_unix_ns),
        )
    };
    let steady = length(true);
    steady > 0 && steady < length(false)
}

/// Whether a timeline shows GPU work: a kernel or graph launch, or GPU busy time.
fn gpu_work(t: &Timeline) -> bool {
    t.host
        .launches
        .iter()
        .chain(&t.host.graph_launches)
        .any(|&n| n > 0)
        || t.devices.iter().any(|d| d.busy_ns.iter().any(|&n| n > 0))
}

#[derive(Debug, Clone, PartialEq)]
enum Label {
    Startup,
    Warmup,
    Steady,
    Pause(Option<String>),
    Teardown,
}

/// Splits one process's timeline into labelled windows: see docs/diagnosis.md, "Phases".
fn labels(w: &Windows) -> Vec<Label> {
    let h = &w.t.host;
    // A graph replay is work without a kernel launch.
    let launches: Vec<u64> = (0..w.n)
        .map(|i| at(&h.launches, i) + at(&h.graph_launches, i))
        .collect();
    let metric: &[u64] = if launches.iter().any(|&n| n > 0) {
        &launches
    } else {
        &h.calls
    };
    // Windows whose only work is copies are not the loop's steps: a checkpoint in the
    // middle of it (a pause), a model moved back to the host after it (teardown; Lightning's
    // `fit()` ends with 2.28 GB in 32 pageable copies).
    let working: Vec<bool> = (0..w.n)
        .map(|i| !w.loading(i) && w.working(i, metric) && !w.copies_only(i, metric))
        .collect();
    // Start-up lasts until the first launch: before it the GPU can only have copied (a
    // model's weights) or waited in a barrier, and a host pause ended by the first kernels'
    // lazy loading is set-up, not a JIT compile (a DDP rank built its model on the host for
    // 5 s after NCCL's first calls; bench/results/gpu-2026-12-01-run12-ddp).
    let (Some(first), Some(last)) = (
        (0..w.n).position(|i| working[i] && at(metric, i) > 0),
        working.iter().rposition(|&x| x),
    ) else {
        return vec![Label::Startup; w.n];
    };
    let mut labels = vec![Label::Steady; w.n];
    labels[..first].fill(Label::Startup);
    labels[last + 1..].fill(Label::Teardown);
    // Stretches without work between the first and the last window with work.
    let mut gaps: Vec<(usize, usize)> = Vec::new();
    let mut i = first;
    while i <= last {
        if working[i] {
            i += 1;
            continue;
        }
        let a = i;
        while !working[i] {
            i += 1;
        }
        gaps.push((a, i - 1));
    }
    let length = |(a, b): (usize, usize)| total((a..=b).map(|i| w.len(i)));
    // Module loading in the gap or as work resumes: a JIT compile (host time that ends in a
    // load) or lazy loading. Loading that took most of the gap names it; one that only ends
    // it names a few long gaps (a compile: the host's work, then its module loaded). Many
    // long gaps that each end in a load are the loop's own waits: a DataLoader that cannot
    // keep up with a ResNet-50 left 56 gaps of 0.4-1.1 s, each ended by cuDNN's lazy
    // loading of a kernel, 9.1 s of "pauses" against 0.45 s of loading in the whole run
    // (bench/results/gpu-2026-12-03-reallib-5-long, loader-slow). A gap shorter than a
    // pause is the loop's unless loading took most of it.
    let module_ns = |(a, b): (usize, usize)| total((a..=b + 1).map(|i| at(&h.module_ns, i)));
    let ends_in_load = |g: (usize, usize)| module_ns(g) > 0;
    let rare_loads = gaps
        .iter()
        .filter(|&&g| ends_in_load(g) && length(g) >= PAUSE_MIN_NS)
        .count()
        <= RARE_GAPS;
    let loads = |g: (usize, usize)| {
        2 * module_ns(g) >= length(g)
            || (ends_in_load(g) && rare_loads && length(g) >= PAUSE_MIN_NS)
    };
    let long: Vec<(usize, usize)> = gaps
        .iter()
        .copied()
        .filter(|&g| !loads(g) && length(g) >= PAUSE_MIN_NS)
        .collect();
    let rare = long.len() <= RARE_GAPS
        && long.windows(2).all(|p| {
            let between: Vec<usize> = (p[0].1 + 1..p[1].0).filter(|&i| working[i]).collect();
            between.len() >= 2
                && total(between.iter().map(|&i| w.len(i))) >= STEPS_BETWEEN_PAUSES_NS
        });
    let recurring = !rare
        && total(long.iter().map(|&g| length(g))) as f64
            >= RECURRING_SHARE * length((first, last)) as f64;
    // Without copies, frequent gaps are the loop's however little of it they take: a
    // checkpoint copies and an evaluation launches, but a loop waiting for its batches
    // does neither. A DataLoader that could not keep up with a ResNet-50 left 6 gaps of
    // 0.16-0.64 s, 11 % of its span, between 0.3-3.4 s of steps; cut out as pauses, they
    // took the input-starved share from 72 % saved to 30 % predicted
    // (bench/results/gpu-2026-12-03-reallib-7, loader-slow long).
    let copies_in =
        |(a, b): (usize, usize)| (a..=b).any(|i| w.copied(i) != (0, 0) || w.copy_blocked(i) > 0);
    for &g in &gaps {
        let name = if loads(g) {
            Some(LOADING.to_string())
        } else if length(g) >= PAUSE_MIN_NS && !recurring && (rare || copies_in(g)) {
            None
        } else {
            continue;
        };
        labels[g.0..=g.1].fill(Label::Pause(name));
    }
    for (i, label) in labels.iter_mut().enumerate().take(last + 1).skip(first) {
        if let Some(name) = w.nvtx_pause(i) {
            *label = Label::Pause(Some(name.to_string()));
        }
    }
    // Warm-up: the windows with work before the first at the loop's usual rate: half the
    // median launches of the windows with work or more, and a quarter or more of the
    // rate of the window that made the median launch. The second holds where a set-up
    // slower than the loop outlasts it, and its windows are most of the median: cuDNN's
    // autotune and 8 workers starting took 9 s at 20-250 launches a window before a short
    // DataLoader loop of 2.6 s at 1,400-5,000 (bench/results/gpu-2026-12-03-reallib-7,
    // loader-slow).
    let mut rates: Vec<u64> = (first..=last)
        .filter(|&i| working[i])
        .map(|i| at(metric, i))
        .collect();
    rates.sort_unstable();
    let usual = rates[rates.len() / 2];
    let launch_median = median_weighted(&rates);
    let settled = (first..=last)
        .find(|&i| {
            let rate = at(metric, i);
            labels[i] == Label::Steady && 2 * rate >= usual && 4 * rate >= launch_median
        })
        .unwrap_or(first);
    for label in &mut labels[first..settled] {
        if *label == Label::Steady {
            *label = Label::Warmup;
        }
    }
    // The loop ends inside its last window with work: below half the usual rate, that
    // window is mostly what follows the loop, and teardown. A short loop's last window held
    // 16 of its usual 250 launches and the GPU's idle after the final sync, 15 % of the
    // steady state's recorded device time (bench/results/gpu-2026-12-01-run13-phases-6,
    // sync-stalled). A slower stretch of several windows is the loop's. So is a window
    // that spent a quarter of it or more blocked in copies, with more copies after it:
    // the teardown's copies began in it. Lightning's `fit()` ended its short loop with a
    // window of 186 launches (of the usual 310) and 36 ms of the 684 ms its host waited
    // for the model's copy back (bench/results/gpu-2026-12-03-reallib-6, lightning-fit).
    let teardown_copies =
        4 * w.copy_blocked(last) >= w.len(last) && (last + 1..w.n).any(|i| w.copy_blocked(i) > 0);
    if last > settled
        && labels[last] == Label::Steady
        && (2 * at(metric, last) < usual || teardown_copies)
    {
        labels[last] = Label::Teardown;
    }
    labels
}

/// The value of `sorted` (ascending) at which half their sum is reached: the median of the
/// events they count (launches) rather than of the values (windows); 0 for none.
fn median_weighted(sorted: &[u64]) -> u64 {
    let half = total(sorted.iter().copied()).div_ceil(2);
    let mut sum = 0u64;
    let reached = sorted.iter().find(|&&v| {
        sum = sum.saturating_add(v);
        sum >= half
    });
    reached.copied().unwrap_or(0)
}

/// The one-off copies in `[start, end)`: those of the windows whose middle lies in it,
/// where they blocked the host `COPY_BURST_MIN_NS` or more.
fn copies(w: &Windows, start: u64, end: u64) -> Option<PhaseCopies> {
    let mut c = PhaseCopies::default();
    for i in (0..w.n).filter(|&i| {
        let (a, b) = w.span(i);
        (start..end).contains(&(a + (b - a) / 2))
    }) {
        let (htod, dtoh) = w.copied(i);
        c.htod_bytes += htod;
        c.dtoh_bytes += dtoh;
        c.blocked_ns += w.copy_blocked(i);
    }
    (c.blocked_ns >= COPY_BURST_MIN_NS).then_some(c)
}

pub(super) fn process_axis(p: &ProcessInfo) -> Option<ProcessAxis> {
    let t = p.timeline.as_deref()?;
    if t.window_ns == 0 {
        return None;
    }
    let w = Windows::new(t, p.stop_unix_ns);
    let labels = labels(&w);
    let mut phases: Vec<Phase> = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        let (start, end) = w.span(i);
        let (kind, name) = match label {
            Label::Startup => (PhaseKind::Startup, None),
            Label::Warmup => (PhaseKind::Warmup, None),
            Label::Steady => (PhaseKind::Steady, None),
            Label::Pause(name) => (PhaseKind::Pause, name.clone()),
            Label::Teardown => (PhaseKind::Teardown, None),
        };
        match phases.last_mut() {
            Some(last) if last.kind == kind && last.name == name => last.end_unix_ns = end,
            _ => phases.push(Phase {
                kind,
                name,
                start_unix_ns: start,
                end_unix_ns: end,
                copies: None,
            }),
        }
    }
    stretch(&mut phases, p.start_unix_ns, p.stop_unix_ns);
    for ph in phases.iter_mut().filter(|ph| ph.kind != PhaseKind::Steady) {
        ph.copies = copies(&w, ph.start_unix_ns, ph.end_unix_ns);
    }
    let h = &t.host;
    let in_startup: Vec<usize> = (0..w.n).filter(|&i| labels[i] == Label::Startup).collect();
    let sum = |s: &[u64]| total(in_startup.iter().map(|&i| at(s, i)));
    let ns = phases
        .first()
        .filter(|f| f.kind == PhaseKind::Startup)
        .map_or(0, |f| f.end_unix_ns - f.start_unix_ns);
    let (init_ns, module_ns, driver_ns) = (sum(&h.init_ns), sum(&h.module_ns), sum(&h.driver_ns));
    let startup = Startup {
        ns,
        init_ns,
        module_ns,
        other_driver_ns: driver_ns.saturating_sub(init_ns + module_ns),
        outside_driver_ns: ns.saturating_sub(driver_ns),
    };
    // The windows the loop judged as a whole holds: those in its phases that count.
    let whole_loop = short_next_to_warmup(&phases).then(|| {
        (0..w.n)
            .map(|i| {
                let (a, b) = w.span(i);
                let middle = a + (b - a) / 2;
                phases.iter().any(|ph| {
                    judged_whole(ph) && (ph.start_unix_ns..ph.end_unix_ns).contains(&middle)
                })
            })
            .collect()
    });
    Some(ProcessAxis {
        whole_loop,
        steady: labels.iter().map(|l| *l == Label::Steady).collect(),
        loop_windows: labels
            .iter()
            .position(|l| *l != Label::Startup)
            .unwrap_or(labels.len())
            ..labels
                .iter()
                .rposition(|l| *l != Label::Teardown)
                .map_or(0, |i| i + 1),
        phases,
        startup,
        gpu_work: gpu_work(t),
    })
}
