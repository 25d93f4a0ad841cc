//! `gpuspy run -- CMD ARGS...`: the one-step way to profile a program.

use crate::ci_output::Output;
use crate::profile::{dump_files, Profile};
use crate::{cmd_check, cmd_report};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::SystemTime;

/// libgpuspy.so beside this binary, or `GPUSPY_SHIM`.
fn shim_path() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("GPUSPY_SHIM") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot locate the gpuspy binary")?;
    let shim = exe.with_file_name("libgpuspy.so");
    if !shim.exists() {
        bail!(
            "{} not found: libgpuspy.so must sit beside the gpuspy binary (or set GPUSPY_SHIM)",
            shim.display()
        );
    }
    Ok(shim)
}

pub fn run(
    out: &Path,
    json: bool,
    budget: Option<&Path>,
    ci: &Output,
    command: &[String],
) -> Result<ExitCode> {
    let shim = shim_path()?;
    let shim = std::fs::canonicalize(&shim).unwrap_or(shim);
    let Some((program, args)) = command.split_first() else {
        bail!("no command given");
    };
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(existing) if !existing.is_empty() => format!("{}:{existing}", shim.display()),
        _ => shim.display().to_string(),
    };
    let out = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    let before = existing_dumps(&out);
    let status = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", preload)
        .env("GPUSPY_OUT", &out)
        .status()
        .with_context(|| format!("cannot run {program}"))?;
    let code = exit_code(&status);

    // Only this run's dumps: the directory may hold older ones.
    let mine: Vec<PathBuf> = existing_dumps(&out)
        .into_iter()
        .filter(|(path, mtime)| before.get(path) != Some(mtime))
        .map(|(path, _)| path)
        .collect();
    if mine.is_empty() {
        eprintln!(
            "gpuspy: {program} wrote no dump: it made no CUDA driver call that gpuspy saw. \
             It may have run on the CPU only, a launcher may have removed LD_PRELOAD, the \
             binary may be setuid, or it may link the driver statically."
        );
        return Ok(code);
    }
    eprintln!("gpuspy: {} dump(s) in {}", mine.len(), out.display());
    let profile = Profile::load(&mine)?;
    let Some(budget) = budget else {
        cmd_report::print(&profile, json, mine.len() > 1)?;
        return Ok(code);
    };
    // A failing command keeps its own exit code; a passing one takes the gate's.
    let passed = cmd_check::check_profile(&profile, budget, ci)?;
    Ok(if code != ExitCode::SUCCESS || passed {
        code
    } else {
        ExitCode::from(1)
    })
}

/// Dumps in `dir` with their modification times. A dump is this run's if it is new or
/// was rewritten (file times are too coarse to compare with the start of the run).
fn existing_dumps(dir: &Path) -> BTreeMap<PathBuf, Option<SystemTime>> {
    dump_files(&[dir.to_path_buf()])
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let mtime = std::fs::metadata(&p).and_then(|m| m.modified()).ok();
            (p, mtime)
        })
        .collect()
}

/// The child's exit code; 128 + signal number when a signal ended it, as shells report.
fn exit_code(status: &std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
