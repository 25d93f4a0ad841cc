//! `gpuspy report`.

use crate::diagnose::diagnose;
use crate::profile::Profile;
use crate::{render_json, render_text};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;

pub fn report(paths: &[PathBuf], json: bool, per_process: bool) -> Result<()> {
    print(&Profile::load(paths)?, json, per_process)
}

pub fn print(profile: &Profile, json: bool, per_process: bool) -> Result<()> {
    let diagnosis = diagnose(profile);
    let mut out = std::io::stdout().lock();
    if json {
        // Written as it is serialised: see render_json::Report.
        serde_json::to_writer(&mut out, &render_json::render(profile, &diagnosis))
            .context("cannot write the report")?;
        writeln!(out)
    } else {
        write!(
            out,
            "{}",
            render_text::render(profile, &diagnosis, per_process)
        )
    }
    .context("cannot write the report")
}
