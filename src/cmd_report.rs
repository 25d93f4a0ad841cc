//! `gpuspy report`: load and analyse the dumps, build the report, render it.

use crate::analyse::{self, Analysed};
use crate::report::Report;
use crate::{render_json, render_text};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;

pub fn report(paths: &[PathBuf], json: bool, per_process: bool) -> Result<()> {
    print(&analyse::load(paths)?, json, per_process)
}

pub fn print(analysed: &Analysed, json: bool, per_process: bool) -> Result<()> {
    let report = Report::new(analysed);
    let mut out = std::io::stdout().lock();
    if json {
        render_json::write(&report, &mut out)
    } else {
        write!(out, "{}", render_text::render(&report, per_process)).map_err(Into::into)
    }
    .context("cannot write the report")
}
