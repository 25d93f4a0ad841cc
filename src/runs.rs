//! One side of a comparison: one or more runs, each a merged profile.
//!
//! A PATH is a run when it is a dump file, or a directory with dumps in it (all processes of
//! one run, merged). A directory whose subdirectories hold the dumps is several runs, one per
//! subdirectory.

use crate::profile::{distinct, is_dump_name, Profile};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

pub struct Run {
    pub name: String,
    pub profile: Profile,
}

/// The runs under `paths`, each once however many PATHs name it.
pub fn load_runs(paths: &[PathBuf]) -> Result<Vec<Run>> {
    let mut run_dirs = Vec::new();
    for path in paths {
        run_dirs.extend(run_paths(path)?);
    }
    distinct(run_dirs)
        .into_iter()
        .map(|run_path| {
            Ok(Run {
                name: run_path.display().to_string(),
                profile: Profile::load(std::slice::from_ref(&run_path))?,
            })
        })
        .collect()
}

fn run_paths(path: &Path) -> Result<Vec<PathBuf>> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("{}: cannot list directory", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    if entries.iter().any(|p| is_dump_name(p)) {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut subdirs: Vec<PathBuf> = entries
        .into_iter()
        .filter(|p| {
            p.is_dir()
                && std::fs::read_dir(p)
                    .map(|rd| rd.filter_map(|e| e.ok()).any(|e| is_dump_name(&e.path())))
                    .unwrap_or(false)
        })
        .collect();
    if subdirs.is_empty() {
        bail!("{}: no gpuspy dumps in this directory", path.display());
    }
    subdirs.sort();
    Ok(subdirs)
}
