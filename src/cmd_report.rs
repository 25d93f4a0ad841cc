//! `gpuspy report`: load and analyse the dumps, build the report, render it.

use crate::analyse::{self, Analysed};
use crate::render_json::JsonTo;
use crate::render_text;
use crate::report::Report;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;

pub fn report(paths: &[PathBuf], json: Option<&JsonTo>, per_process: bool) -> Result<()> {
    print(&analyse::load(paths)?, json, per_process)
}

/// The report as JSON where `json` says, else as text on stdout.
pub fn print(analysed: &Analysed, json: Option<&JsonTo>, per_process: bool) -> Result<()> {
    let report = Report::new(analysed);
    match json {
        Some(to) => to.write(&report),
        None => write!(
            std::io::stdout().lock(),
            "{}",
            render_text::render(&report, per_process)
        )
        .context("cannot write the report"),
    }
}
