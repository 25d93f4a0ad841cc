//! The time axis judged: each process's timeline (`format::timeline`) split into phases
//! (start-up, warm-up, steady state, pauses, teardown), the job's steady state (where every
//! process is steady), and what the GPU's idle time in it is due to. The rules measure
//! per-step problems against this steady state; dumps without a timeline have none, and
//! the rules keep their whole-run model. docs/diagnosis.md, "Phases", gives the method and
//! where it fails.
//!
//! Bottom up: `phase` (the kinds of phase), `ranges` (NVTX ranges that mark steps and
//! pauses), `windows` (a timeline's windows and what each held), `process` (one process's
//! phases), `steady` (the steady state summed, and its GPU idle by cause), `axis` (the job's
//! phases and steady state, from every process's).

mod axis;
mod phase;
mod process;
mod ranges;
mod steady;
mod windows;

#[cfg(test)]
pub mod fixtures;
#[cfg(test)]
mod tests;

pub use axis::*;
pub use phase::*;
pub use process::*;
pub use steady::*;
pub use windows::*;
