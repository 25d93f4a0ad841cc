//! `gpuspy report`.

use crate::diagnose::diagnose;
use crate::profile::Profile;
use crate::{render_json, render_text};
use anyhow::Result;
use std::path::PathBuf;

pub fn report(paths: &[PathBuf], json: bool, per_process: bool) -> Result<()> {
    print(&Profile::load(paths)?, json, per_process);
    Ok(())
}

pub fn print(profile: &Profile, json: bool, per_process: bool) {
    let diagnosis = diagnose(profile);
    if json {
        println!("{}", render_json::render(profile, &diagnosis));
    } else {
        print!("{}", render_text::render(profile, &diagnosis, per_process));
    }
}
