//! The judged time axis of a profile: every process's phases, the job's phases (where
//! every process is steady) and its steady state.

use super::phase::{stretch, Phase, PhaseKind};
use super::process::{process_axis, ProcessAxis};
use super::steady::{steady_state, SteadyState};
use crate::analysis::profile::Profile;

/// The judged time axis of a profile: one entry per process (None without a timeline), the
/// job's phases, and its steady state (None when no process reached one).
#[derive(Debug, Clone)]
pub struct TimeAxis {
    pub processes: Vec<Option<ProcessAxis>>,
    pub phases: Vec<Phase>,
    pub steady: Option<SteadyState>,
    /// The same axis with the loop judged as a whole, where a process that did GPU work
    /// has a steady state short next to its warm-up (`short_next_to_warmup`): its warm-up
    /// and unnamed pauses are steady there. The rules judge both (`diagnose`).
    pub whole_loop: Option<Box<TimeAxis>>,
}

impl TimeAxis {
    /// The processes the job is judged by, with their index in the profile: those that
    /// used a GPU, or every one with a timeline where none did. A compile worker or a
    /// launcher's agent beside the program is neither the job's start-up nor its wall time.
    pub fn judged(&self) -> impl Iterator<Item = (usize, &ProcessAxis)> {
        let any_gpu = self.processes.iter().flatten().any(|a| a.gpu_work);
        self.processes
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some((i, a.as_ref()?)))
            .filter(move |(_, a)| a.gpu_work || !any_gpu)
    }
}

/// The time axis of `p`; None when no dump has a timeline (schema 1), where every judgement
/// keeps the whole-run model.
pub fn time_axis(p: &Profile) -> Option<TimeAxis> {
    let processes: Vec<Option<ProcessAxis>> = p.processes.iter().map(process_axis).collect();
    if processes.iter().all(Option::is_none) {
        return None;
    }
    let short = (processes.iter().flatten()).any(|a| a.gpu_work && a.whole_loop.is_some());
    let whole_loop = short.then(|| {
        let whole: Vec<Option<ProcessAxis>> = (processes.iter())
            .map(|a| {
                a.as_ref()
                    .map(|a| a.as_whole_loop().unwrap_or_else(|| a.clone()))
            })
            .collect();
        Box::new(axis_of(p, whole))
    });
    Some(TimeAxis {
        whole_loop,
        ..axis_of(p, processes)
    })
}

/// The time axis made of these processes' phases (without `whole_loop`).
fn axis_of(p: &Profile, processes: Vec<Option<ProcessAxis>>) -> TimeAxis {
    // A launcher's agent or a compile worker makes driver calls but no GPU work: it never
    // holds the job back.
    let working: Vec<&ProcessAxis> = processes.iter().flatten().filter(|a| a.gpu_work).collect();
    let steady_spans: Vec<Vec<(u64, u64)>> = working
        .iter()
        .map(|a| spans(&a.phases, PhaseKind::Steady))
        .filter(|s| !s.is_empty())
        .collect();
    let together = steady_spans.iter().skip(1).fold(
        steady_spans.first().cloned().unwrap_or_default(),
        |acc, s| intersect(&acc, s),
    );
    let start = p
        .processes
        .iter()
        .map(|x| x.start_unix_ns)
        .min()
        .unwrap_or(0);
    let stop = p
        .processes
        .iter()
        .map(|x| x.stop_unix_ns)
        .max()
        .unwrap_or(0);
    let phases = match (&processes[..], &working[..]) {
        ([Some(only)], _) => only.phases.clone(),
        // One process did the GPU work: the job's phases are its phases, named, from the
        // first process's start to the last one's dump.
        (_, [one]) => {
            let mut phases = one.phases.clone();
            stretch(&mut phases, start, stop);
            phases
        }
        _ => named(job_phases(&together, start, stop), &working),
    };
    // Processes that never ran steadily together (clocks apart by more than their overlap,
    // or ranks run one after another) are each judged on their own steady state.
    let clip = (steady_spans.len() > 1 && !together.is_empty()).then_some(&together[..]);
    let steady = (!steady_spans.is_empty()).then(|| steady_state(p, &processes, clip));
    TimeAxis {
        processes,
        phases,
        steady,
        whole_loop: None,
    }
}

/// The `[start, end)` spans of the phases of one kind.
fn spans(phases: &[Phase], kind: PhaseKind) -> Vec<(u64, u64)> {
    phases
        .iter()
        .filter(|p| p.kind == kind)
        .map(|p| (p.start_unix_ns, p.end_unix_ns))
        .collect()
}

/// Where both sorted span lists hold.
fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(a0, a1) in a {
        for &(b0, b1) in b {
            let (s, e) = (a0.max(b0), a1.min(b1));
            if s < e {
                out.push((s, e));
            }
        }
    }
    out
}

/// A job's phases from the spans where all its processes were steady: start-up before the
/// first, pauses between them, teardown after the last.
fn job_phases(steady: &[(u64, u64)], start: u64, stop: u64) -> Vec<Phase> {
    let phase = |kind, start_unix_ns, end_unix_ns| Phase {
        kind,
        name: None,
        start_unix_ns,
        end_unix_ns,
        copies: None,
    };
    let Some((&(first, _), &(_, last))) = steady.first().zip(steady.last()) else {
        return vec![phase(PhaseKind::Startup, start, stop)];
    };
    let mut phases = vec![phase(PhaseKind::Startup, start, first)];
    for (i, &(s, e)) in steady.iter().enumerate() {
        if i > 0 {
            phases.push(phase(PhaseKind::Pause, steady[i - 1].1, s));
        }
        phases.push(phase(PhaseKind::Steady, s, e));
    }
    phases.push(phase(PhaseKind::Teardown, last, stop));
    phases.retain(|p| p.end_unix_ns > p.start_unix_ns);
    phases
}

/// The job's pauses named after a process's named pause (a JIT compile, an NVTX
/// evaluation range) that covers at least half of one.
fn named(mut phases: Vec<Phase>, processes: &[&ProcessAxis]) -> Vec<Phase> {
    for job in phases.iter_mut().filter(|ph| ph.kind == PhaseKind::Pause) {
        let overlap = |ph: &Phase| {
            ph.end_unix_ns
                .min(job.end_unix_ns)
                .saturating_sub(ph.start_unix_ns.max(job.start_unix_ns))
        };
        job.name = processes
            .iter()
            .flat_map(|a| &a.phases)
            .filter(|ph| ph.kind == PhaseKind::Pause && ph.name.is_some())
            .find(|ph| 2 * overlap(ph) >= job.end_unix_ns - job.start_unix_ns)
            .and_then(|ph| ph.name.clone());
    }
    phases
}
