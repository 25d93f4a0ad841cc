//! The phases a time axis is cut into (start-up, warm-up, steady state, pause, teardown),
//! for one process or for the job.

use serde::Serialize;

/// A stretch without GPU work at least this long, inside the loop, is a pause (unless such
/// stretches recur: `RECURRING_GAPS`).
pub const PAUSE_MIN_NS: u64 = 100_000_000;

/// The name of a pause in which modules were loaded (a JIT compile, lazy loading).
pub const LOADING: &str = "module loading or JIT";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Startup,
    Warmup,
    Steady,
    Pause,
    Teardown,
}

impl PhaseKind {
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Startup => "start-up",
            PhaseKind::Warmup => "warm-up",
            PhaseKind::Steady => "steady",
            PhaseKind::Pause => "pause",
            PhaseKind::Teardown => "teardown",
        }
    }
}

/// Copies outside the steady state that blocked the host at least this long are a phase's
/// one-off copies (`Phase::copies`): a model moved to the GPU, a checkpoint, a model moved
/// back to the host. A tenth of a pause: a loss read back now and then blocks microseconds.
pub const COPY_BURST_MIN_NS: u64 = PAUSE_MIN_NS / 10;

/// The one-off copies of a phase outside the steady state: what they moved and how long
/// the host waited in them. They are this phase's cost, not a share of the steady state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PhaseCopies {
    pub htod_bytes: u64,
    pub dtoh_bytes: u64,
    /// Host time blocked in synchronous copies and in async copies from pageable memory.
    pub blocked_ns: u64,
}

/// One phase, in Unix ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub name: Option<String>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// Its one-off copies, where they blocked the host `COPY_BURST_MIN_NS` or more (never
    /// in a steady phase); None in a job's phases made from several processes'.
    pub copies: Option<PhaseCopies>,
}

/// Stretches `phases` over `[start, stop)`: start-up from `start`, teardown (or the
/// start-up of a process that never worked) to `stop`, each added where the phases begin
/// later or end earlier with another kind.
pub(super) fn stretch(phases: &mut Vec<Phase>, start: u64, stop: u64) {
    let phase = |kind, start_unix_ns, end_unix_ns| Phase {
        kind,
        name: None,
        start_unix_ns,
        end_unix_ns,
        copies: None,
    };
    match phases.first_mut() {
        Some(f) if f.kind == PhaseKind::Startup => f.start_unix_ns = start,
        Some(f) if f.start_unix_ns > start => {
            let first = f.start_unix_ns;
            phases.insert(0, phase(PhaseKind::Startup, start, first))
        }
        _ => {}
    }
    match phases.last_mut() {
        Some(l) if l.kind == PhaseKind::Teardown || l.kind == PhaseKind::Startup => {
            l.end_unix_ns = stop
        }
        Some(l) if l.end_unix_ns < stop => {
            let last = l.end_unix_ns;
            phases.push(phase(PhaseKind::Teardown, last, stop))
        }
        _ => {}
    }
}
