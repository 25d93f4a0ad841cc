//! `gpuspy run -- CMD ARGS...`: the one-step way to profile a program.
//!
//! Everything that can be refused is refused before the job starts (the budget, the dump
//! directory, a shim path ld.so would split), so a long job never runs only to fail at the
//! end. While it runs, signals meant for the job are passed on (`signals`). Afterwards the
//! report covers the dumps of this run alone: the child gets a random `GPUSPY_RUN_TOKEN`,
//! the shim copies it into every dump, and only dumps carrying it are read into the report
//! or the gate, whatever else shares the directory. The exit status is the command's, the
//! gate's verdict under `--check`, or 128 + N when gpuspy was sent signal N.

mod preload;
mod signals;

use crate::analysis::analyse;
use crate::analysis::load::{is_dump_name, read_dump, Runs};
use crate::cmd::{check, report};
use crate::render::ci_output::Output;
use crate::render::json::JsonTo;
use crate::safe_text::eprint_line;
use crate::side_files::{remove_stale_temps, take_unwritten, unwritten_reason};
use anyhow::{anyhow, bail, Context, Result};
use gpuspy_format::trust::{self, Writers};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The variable through which NVTX finds its injection library (NVIDIA/NVTX nvtxInit.h).
const NVTX_INJECTION: &str = "NVTX_INJECTION64_PATH";

/// Where `gpuspy run` finds libgpuspy.so: `GPUSPY_SHIM`, else beside this binary (a cargo
/// build, a copied pair), else `<exe dir>/../lib/gpuspy/libgpuspy.so`, where the pip wheel
/// puts it: the wheel's data files install under the environment's root and its scripts
/// under `bin/` (sysconfig's `data` and `scripts` paths), in a venv, a `--user` install and
/// a system prefix alike. No Python is needed to find it at run time.
pub fn shim_path() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("GPUSPY_SHIM") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            // ld.so would only print an error and run the job unprofiled.
            bail!("GPUSPY_SHIM={}: no such file", path.display());
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().context("cannot locate the gpuspy binary")?;
    let beside = exe.with_file_name("libgpuspy.so");
    let installed = exe
        .parent()
        .and_then(Path::parent)
        .map(|root| root.join("lib/gpuspy/libgpuspy.so"));
    if beside.is_file() {
        return Ok(beside);
    }
    match installed {
        Some(shim) if shim.is_file() => Ok(shim),
        installed => bail!(
            "libgpuspy.so not found at {}{}: it must sit beside the gpuspy binary or where \
             the pip wheel installs it (or set GPUSPY_SHIM)",
            beside.display(),
            installed
                .map(|p| format!(" nor at {}", p.display()))
                .unwrap_or_default()
        ),
    }
}

/// `gpuspy shim-path`: the absolute path `gpuspy run` would preload, for
/// `LD_PRELOAD=$(gpuspy shim-path) python train.py`.
pub fn print_shim_path() -> Result<ExitCode> {
    let shim = shim_path()?;
    let shim = std::fs::canonicalize(&shim)
        .with_context(|| format!("cannot resolve {}", shim.display()))?;
    if !preload::taken_whole(&shim) {
        // ld.so would split it; `gpuspy run` works around that, a shell variable cannot.
        eprint_line(
            "ld.so splits LD_PRELOAD at spaces, colons and `$`, so this path cannot be \
             preloaded as it is; use `gpuspy run`, or a symlink to it from a plain path",
        );
    }
    println!("{}", shim.display());
    Ok(ExitCode::SUCCESS)
}

pub fn run(
    out: &Path,
    json: Option<&JsonTo>,
    budget: Option<&Path>,
    prom: Option<&Path>,
    ci: &Output,
    command: &[String],
) -> Result<ExitCode> {
    let Some((program, args)) = command.split_first() else {
        bail!("no command given");
    };
    let budget = budget.map(check::load_budget).transpose()?;
    let shim = shim_path()?;
    let shim = std::fs::canonicalize(&shim).unwrap_or(shim);
    let token = run_token();
    let out = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    check_out_dir(&out, Writers::GroupOrSticky, &token).map_err(|why| {
        anyhow!(
            "cannot write dumps to {}: {why}; choose another directory with -o",
            out.display()
        )
    })?;
    remove_stale_temps(&out);
    if let Some(json) = json {
        json.check()?;
    }
    let prom = prom
        .map(|dir| {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
            // Others who may create names there could pre-create the finding's (its name is
            // guessable) and serve their own metrics in its place.
            check_out_dir(&dir, Writers::Nobody, &token)
                .map(|()| dir.clone())
                .inspect(|dir| remove_stale_temps(dir))
                .map_err(|why| {
                    anyhow!(
                        "cannot write Prometheus files to {}: {why}; choose another directory with --prom",
                        dir.display()
                    )
                })
        })
        .transpose()?;
    let preload = preload::preload(&shim, std::env::var_os("LD_PRELOAD").as_deref())?;
    let before = file_ids(&out);

    let mut child = Command::new(program);
    child
        .args(args)
        .env("LD_PRELOAD", &preload)
        .env("GPUSPY_OUT", &out)
        .env("GPUSPY_RUN_TOKEN", &token);
    if let Some(dir) = &prom {
        child.env("GPUSPY_PROM_DIR", dir);
    }
    // NVTX ranges come to the shim as their injection library, unless another tool (nsys, a
    // user) owns the variable: that tool keeps them (docs/design.md, "NVTX").
    let disabled = std::env::var_os("GPUSPY_DISABLE").is_some_and(|v| !v.is_empty() && v != "0");
    if !disabled && std::env::var_os(NVTX_INJECTION).is_none_or(|v| v.is_empty()) {
        child.env(NVTX_INJECTION, &shim);
    }
    if let Some(JsonTo::Stdout) = json {
        // stdout is the JSON document's alone.
        let stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .context("cannot hand stderr to the command")?;
        child.stdout(stderr);
    }
    let forwarder = signals::Forwarder::install()?;
    let child = child
        .spawn()
        .with_context(|| format!("cannot run {program}"))?;
    let findings =
        prom.map(|dir| FindingWriter::start(dir, out.clone(), before.clone(), token.clone()));
    let (status, signal) = forwarder.wait(child)?;
    drop(findings);
    // From here a signal acts as it would on any tool: the job is over.
    drop(forwarder);
    let code = match signal {
        Some(n) => ExitCode::from(u8::try_from(128 + n).unwrap_or(1)),
        None => exit_code(&status),
    };
    let passed = code == ExitCode::SUCCESS;

    let found = this_runs_dumps(&out, &before, &token);
    let unwritten = Unwritten(take_unwritten(&out, &token));
    if found.mine.is_empty() {
        let why = match check_out_dir(&out, Writers::GroupOrSticky, &token) {
            Err(why) => format!("the dumps could not be written to {}: {why}", out.display()),
            Ok(()) if !unwritten.0.is_empty() => unwritten.describe(&out),
            Ok(()) if status.code() == Some(LOADER_FAILED) && !driver_library_found() => {
                format!(
                    "the driver library was not found: {DRIVER_LIBRARY} is in neither \
                     LD_LIBRARY_PATH, the loader's cache ({LD_SO_CACHE}) nor /lib, and the \
                     command exited {LOADER_FAILED}, as the dynamic loader does when a \
                     library is missing (its message is above). Install the NVIDIA driver, \
                     or add the directory holding {DRIVER_LIBRARY} to LD_LIBRARY_PATH"
                )
            }
            Ok(()) if disabled => "GPUSPY_DISABLE is set (and not 0), which turns the shim's \
                                   recording off: unset it to record"
                .to_string(),
            Ok(()) => "it made no CUDA driver call that gpuspy saw. It may have run on the CPU \
                       only, a launcher may have removed LD_PRELOAD or GPUSPY_RUN_TOKEN, the \
                       binary may be setuid, or it may link the driver statically"
                .to_string(),
        };
        eprint_line(format_args!(
            "{program} wrote no dump of this run{}: {why}.",
            found.left_out()
        ));
        // A gate with nothing to check does not pass.
        return Ok(if budget.is_some() && passed {
            eprint_line("--check: no dump to check the budget against");
            ExitCode::from(2)
        } else {
            code
        });
    }
    eprint_line(format_args!(
        "{} dump(s) of this run in {}{}",
        found.mine.len(),
        out.display(),
        found.left_out()
    ));
    if !unwritten.0.is_empty() {
        eprint_line(format_args!(
            "note: {}: the data of these stops at their last dump written, or is missing",
            unwritten.describe(&out)
        ));
    }
    let analysed = match analyse::load(&found.mine, Runs::All) {
        Ok(analysed) => analysed,
        // The command's status stands; a gate that cannot be evaluated does not pass.
        Err(e) => {
            eprint_line(format_args!("{e:#}"));
            return Ok(if budget.is_some() && passed {
                ExitCode::from(2)
            } else {
                code
            });
        }
    };
    let Some(budget) = budget else {
        report::print(&analysed, json, found.mine.len() > 1)?;
        if let Some(JsonTo::File(path)) = json {
            // On stderr: stdout belongs to the profiled command.
            super::wrote(path, true);
        }
        return Ok(code);
    };
    // A failing or signalled command keeps its own exit code; a passing one takes the gate's.
    let gate = check::check_profile(&analysed, &budget, ci)?;
    Ok(if !passed || gate {
        code
    } else {
        ExitCode::from(1)
    })
}

/// Processes of this run that could not write their dump: pid and errno (`take_unwritten`).
struct Unwritten(Vec<(u32, i32)>);

impl Unwritten {
    /// "1 process could not write its dump to DIR: REASON", the reasons each once.
    fn describe(&self, dir: &Path) -> String {
        let mut reasons: Vec<String> = self.0.iter().map(|&(_, e)| unwritten_reason(e)).collect();
        reasons.sort();
        reasons.dedup();
        match self.0.len() {
            1 => format!(
                "1 process could not write its dump to {}: {}",
                dir.display(),
                reasons.join("; ")
            ),
            n => format!(
                "{n} processes could not write their dumps to {}: {}",
                dir.display(),
                reasons.join("; ")
            ),
        }
    }
}

/// The exit status of a program that the dynamic loader could not start: a library it
/// needs is missing (and of a shell's "command not found").
const LOADER_FAILED: i32 = 127;
const DRIVER_LIBRARY: &str = "libcuda.so.1";
const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// Whether the dynamic loader could find the CUDA driver library: in a directory of
/// `LD_LIBRARY_PATH`, in the loader's cache (which names the libraries of the directories
/// `ldconfig` knows), or in a default directory. Looked for, never loaded: loading the
/// driver would run its initialisers in gpuspy.
fn driver_library_found() -> bool {
    // Unset is no directory; set but empty (or an empty entry) is the working directory,
    // to ld.so as to split_paths.
    let listed: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|dirs| std::env::split_paths(&dirs).collect())
        .unwrap_or_default();
    let in_dirs = listed
        .into_iter()
        .chain(["/lib64", "/usr/lib64", "/lib", "/usr/lib"].map(PathBuf::from))
        .any(|dir| dir.join(DRIVER_LIBRARY).exists());
    let name = format!("{DRIVER_LIBRARY}\0");
    let in_cache = std::fs::read(LD_SO_CACHE)
        .is_ok_and(|cache| cache.windows(name.len()).any(|w| w == name.as_bytes()));
    in_dirs || in_cache
}

/// The thread that diagnoses the run's dumps at every flush while it runs and keeps the
/// job's first finding in `DIR/gpuspy-run-<pid>-<host>.prom` (the shim never judges);
/// dropped when the job ends, which stops it and removes the file.
struct FindingWriter {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    file: PathBuf,
}

impl FindingWriter {
    fn start(dir: PathBuf, out: PathBuf, before: BTreeMap<PathBuf, FileId>, token: String) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        // The shim's flush period (the shim in CMD warns about a bad value); with periodic
        // dumps off, only a hang writes one before the end: looked for every 10 s.
        let every = (gpuspy_format::env::FLUSH_S.from_env().period)
            .unwrap_or(std::time::Duration::from_secs(10));
        let identity = gpuspy_format::prom::Identity {
            host: crate::side_files::hostname(),
            rank: None,
            job: None,
            pid: std::process::id(),
        };
        let file = dir.join(format!(
            "gpuspy-run-{}-{}.prom",
            identity.pid,
            gpuspy_format::file_safe(&identity.host)
        ));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (stopped, path) = (stop.clone(), file.clone());
        let thread = std::thread::spawn(move || {
            let mut next = std::time::Instant::now() + every;
            while !stopped.load(Relaxed) {
                if std::time::Instant::now() < next {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    continue;
                }
                next += every;
                let dumps = this_runs_dumps(&out, &before, &token).mine;
                let Ok(analysed) = analyse::load(&dumps, Runs::All) else {
                    continue;
                };
                let first = analysed.job.diagnosis.findings.first();
                let text =
                    gpuspy_format::prom::render_finding(&identity, first.map(|f| (f.id, f.impact)));
                let _ = crate::atomic_file::write(&path, |w| Ok(w.write_all(text.as_bytes())?));
            }
        });
        FindingWriter {
            stop,
            thread: Some(thread),
            file,
        }
    }
}

impl Drop for FindingWriter {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// 128 random bits in hex: unique to this run among everything sharing the directory.
fn run_token() -> String {
    let mut bytes = [0u8; 16];
    // SAFETY: getrandom writes at most `len` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        // No getrandom (old kernel, seccomp): still unique per run on this host.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (now ^ (u128::from(std::process::id()) << 96)).to_ne_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates the dump directory (as the shim would, mode 0755), vets it and the directories
/// above it as the shim does (`gpuspy_format::trust`, with `writers` the others it may let
/// write there), and proves it writable by creating and removing a file in it: a check of
/// what the shim will do, not a guess from a missing dump afterwards (permission bits lie
/// to root and on read-only mounts).
fn check_out_dir(dir: &Path, writers: Writers, token: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // Before anything is made there.
    if let Some(why) = trust::untrusted_parents(dir, me) {
        return Err(why);
    }
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => return Err("it is a file, not a directory".into()),
        Ok(_) => {}
        Err(_) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| format!("cannot create it: {e}"))?,
    }
    let link = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
    if let Some(why) = trust::untrusted_out_dir(&link, &meta, me, writers) {
        return Err(why);
    }
    let probe = dir.join(format!(".gpuspy-probe-{token}"));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&probe)
        .map_err(|e| format!("cannot create a file in it: {e}"))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// What identifies a file's content: a dump rewritten in place or replaced by rename changes
/// it.
type FileId = (u64, u64, i64, i64, u64);

fn file_ids(dir: &Path) -> BTreeMap<PathBuf, FileId> {
    dump_names(dir)
        .into_iter()
        .filter_map(|p| Some((file_id(&p)?, p)))
        .map(|(id, p)| (p, id))
        .collect()
}

fn file_id(path: &Path) -> Option<FileId> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.len()))
}

fn dump_names(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| is_dump_name(p))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The dumps in the directory after the run, sorted out.
struct Found {
    /// Carrying this run's token.
    mine: Vec<PathBuf>,
    /// Older dumps, and new ones of other processes (another run sharing the directory).
    others: usize,
    /// New or changed files that could not be read as dumps.
    unreadable: usize,
}

impl Found {
    /// What was left out, for the end of a line; empty when nothing was.
    fn left_out(&self) -> String {
        match (self.others, self.unreadable) {
            (0, 0) => String::new(),
            (n, 0) => format!("; left out {n} other dump(s) there"),
            (0, m) => format!("; left out {m} unreadable file(s) there"),
            (n, m) => format!("; left out {n} other dump(s) and {m} unreadable file(s) there"),
        }
    }
}

/// Files unchanged since before the run are not this run's and are not read; each other one
/// is this run's if it is a dump carrying `token`. A foreign or corrupt file is counted,
/// never an error: it must not change the exit status.
fn this_runs_dumps(dir: &Path, before: &BTreeMap<PathBuf, FileId>, token: &str) -> Found {
    let mut found = Found {
        mine: Vec::new(),
        others: 0,
        unreadable: 0,
    };
    for path in dump_names(dir) {
        if before
            .get(&path)
            .is_some_and(|id| file_id(&path) == Some(*id))
        {
            found.others += 1;
            continue;
        }
        // `load` reads regular files only: a planted FIFO or device link is unreadable.
        match read_dump(&path).ok() {
            Some((d, _)) if d.process.run_token.as_deref() == Some(token) => found.mine.push(path),
            Some(_) => found.others += 1,
            None => found.unreadable += 1,
        }
    }
    found
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_dumps_are_counted_with_each_reason_once() {
        let dir = Path::new("/out");
        assert_eq!(
            Unwritten(vec![(7, libc::ENOSPC)]).describe(dir),
            "1 process could not write its dump to /out: No space left on device (os error 28)"
        );
        assert_eq!(
            Unwritten(vec![(7, libc::EFBIG), (8, libc::ENOSPC), (9, libc::EFBIG)]).describe(dir),
            "3 processes could not write their dumps to /out: No space left on device (os error \
             28); a dump was larger than the file-size limit (ulimit -f)"
        );
    }
}
