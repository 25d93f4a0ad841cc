//! The `gpuspy` CLI as a library: src/main.rs parses the command line and hands it to
//! `cmd::execute`; the integration tests call the analysis directly.
//!
//! Layers, each using only those below it (docs/design.md, "The CLI's layers";
//! tools/check-layers.py keeps them free of cycles):
//! - `cli` (the clap definitions) and `cmd` (one file per verb) on top;
//! - `render`: formats a report (text, JSON, HTML, Perfetto, CI outputs), computes nothing;
//! - `analysis`: `load` (read, validate, merge into a `profile`) -> `analyse` (every
//!   judgement once, with `diagnose` and `rules`) -> `report` (one typed `Report`);
//! - `units`, `safe_text`, `atomic_file`, `side_files`, `did_you_mean`: helpers that know
//!   no report.

pub mod cli;
pub mod cmd;

mod analysis;
mod atomic_file;
mod did_you_mean;
mod render;
mod safe_text;
mod side_files;
mod units;

/// What a dump file is called, for the tests that look for the dumps a run left.
pub use analysis::load::is_dump_name;
