//! `gpuspy report`: load and analyse the dumps, build the report, render it: on stdout,
//! and as an HTML page and a Perfetto trace where asked.

use crate::analyse::{self, Analysed};
use crate::render_json::JsonTo;
use crate::report::Report;
use crate::{render_html, render_perfetto, render_text};
use anyhow::{Context, Result};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Files `report` writes besides stdout.
pub struct Views {
    pub html: Option<PathBuf>,
    pub perfetto: Option<PathBuf>,
}

pub fn report(
    paths: &[PathBuf],
    json: Option<&JsonTo>,
    per_process: bool,
    views: &Views,
) -> Result<()> {
    let analysed = analyse::load(paths)?;
    let report = Report::new(&analysed);
    if let Some(path) = &views.html {
        write_file(path, |w| render_html::write_report(&report, w))?;
    }
    if let Some(path) = &views.perfetto {
        write_file(path, |w| render_perfetto::write(&report, w))?;
    }
    print_report(&report, json, per_process)
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
            render_text::render(report, per_process)
        )
        .context("cannot write the report"),
    }
}

/// Writes `path` through `render`; the error names the file, and a file that could not
/// be written whole is removed.
pub fn write_file(
    path: &Path,
    render: impl FnOnce(&mut BufWriter<std::fs::File>) -> Result<()>,
) -> Result<()> {
    let cannot = || format!("{}: cannot write", path.display());
    let mut w = BufWriter::new(std::fs::File::create(path).with_context(cannot)?);
    let written = render(&mut w).and_then(|()| w.flush().map_err(Into::into));
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written.with_context(cannot)
}
