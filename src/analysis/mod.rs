//! From dumps to one typed report: `load` reads and merges them into a `profile`,
//! `analyse` makes every judgement once (`phases`, `diagnose` and the `rules`, and the
//! figures of `kernels`, `gpm`, `collectives`, `hangs`, `nvtx`, `runs`, `timelines`), and
//! `report` holds everything a view shows. Nothing here formats or writes output.

pub mod analyse;
pub mod collectives;
pub mod diagnose;
pub mod diff;
pub mod gpm;
pub mod hangs;
pub mod kernels;
pub mod load;
pub mod nvtx;
pub mod phases;
pub mod profile;
pub mod report;
pub mod rule;
pub mod rules;
pub mod runs;
pub mod stats;
pub mod timelines;
