//! `gpuspy report`: load and analyse the dumps, build the report, render it: on stdout, or
//! as an HTML page and a Perfetto trace where asked (then stdout says what was written).

use crate::analysis::analyse::{self, Analysed};
use crate::analysis::load;
use crate::analysis::report::Report;
use crate::render::json::JsonTo;
use crate::render::{html, perfetto, text};
use crate::{atomic_file, side_files};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;

/// Files `report` writes besides stdout.
pub struct Views {
    pub html: Option<PathBuf>,
    pub perfetto: Option<PathBuf>,
}

pub fn report(
    paths: &[PathBuf],
    runs: load::Runs,
    json: Option<&JsonTo>,
    per_process: bool,
    views: &Views,
) -> Result<()> {
    // The directories named, and the run directories in them.
    let mut dirs: Vec<PathBuf> = paths.iter().filter(|p| p.is_dir()).cloned().collect();
    dirs.extend(load::run_paths(paths).unwrap_or_default());
    for dir in load::distinct(dirs).iter().filter(|p| p.is_dir()) {
        side_files::remove_stale_temps(dir);
    }
    let analysed = analyse::load(paths, runs)?;
    let report = Report::new(&analysed);
    if let Some(path) = &views.html {
        atomic_file::write(path, |w| html::write_report(&report, w))?;
    }
    if let Some(path) = &views.perfetto {
        atomic_file::write(path, |w| perfetto::write(&report, w))?;
    }
    let files: Vec<&PathBuf> = views.html.iter().chain(&views.perfetto).collect();
    // The text report is for a terminal; asked for files, the user reads those.
    if files.is_empty() || json.is_some() {
        print_report(&report, json, per_process)?;
    }
    for path in files {
        super::wrote(path, json.is_some());
    }
    Ok(())
}

/// The report as JSON where `json` says, else as text on stdout.
pub fn print(analysed: &Analysed, json: Option<&JsonTo>, per_process: bool) -> Result<()> {
    print_report(&Report::new(analysed), json, per_process)
}

fn print_report(report: &Report, json: Option<&JsonTo>, per_process: bool) -> Result<()> {
    match json {
        Some(to) => to.write(report),
        None => write!(
            std::io::stdout().lock(),
            "{}",
            text::render(report, per_process)
        )
        .context("cannot write the report"),
    }
}
