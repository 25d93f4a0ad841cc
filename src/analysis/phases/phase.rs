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

/// One phase, in Unix ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub name: Option<String>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
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
