//! Turning the arena into a dump file. Cold: runs on the flusher thread or at exit, may
//! allocate, never calls the driver.

use crate::hooks::{ALL_HOOKS, HOOK_COUNT};
use crate::lifecycle::config;
use crate::record::{self, Series, ThreadStats};
use crate::{clock, unwrapped};
use gpuspy_format::{
    hist, ApiRecord, CopyRecord, Direction, Dump, HostKind, Process, Rank, SyncCause, SyncRecord,
    SCHEMA_NAME, SCHEMA_VERSION,
};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
use std::sync::OnceLock;

/// The parts of the header that do not change over a process's life.
struct Identity {
    host: String,
    exe: String,
    cmdline: Vec<String>,
    rank_env: Vec<(String, String)>,
}

static IDENTITY: OnceLock<Identity> = OnceLock::new();

/// Reads the identity once, on the thread that made the first driver call.
pub fn capture_process_info() {
    IDENTITY.get_or_init(|| Identity {
        host: hostname(),
        exe: std::fs::read_link("/proc/self/exe")
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        cmdline: std::fs::read("/proc/self/cmdline")
            .map(|raw| {
                raw.split(|&b| b == 0)
                    .filter(|arg| !arg.is_empty())
                    .map(|arg| String::from_utf8_lossy(arg).into_owned())
                    .collect()
            })
            .unwrap_or_default(),
        rank_env: gpuspy_format::rank_variables()
            .into_iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_string(), v)))
            .collect(),
    });
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn sum_series(series: impl Iterator<Item = &'static Series>) -> (u64, u64, hist::Histogram) {
    let mut dense = [0u64; hist::BUCKETS];
    let (mut total, mut max) = (0u64, 0u64);
    for s in series {
        total = total.saturating_add(s.total_ns.load(Relaxed));
        max = max.max(s.max_ns.load(Relaxed));
        for (sum, bucket) in dense.iter_mut().zip(s.hist.iter()) {
            *sum += bucket.load(Relaxed);
        }
    }
    (total, max, hist::Histogram::from_dense(&dense))
}

/// When the process started and when it first called the driver.
#[derive(Clone, Copy, Default)]
pub struct Times {
    pub start_unix_ns: u64,
    pub first_call_unix_ns: u64,
}

/// Builds the dump from the live arena.
pub fn snapshot(times: Times, complete: bool) -> Dump {
    let blocks: &'static [ThreadStats] = record::blocks();
    let mut results: Vec<Vec<(u32, u64)>> = vec![Vec::new(); HOOK_COUNT];
    for (hook, code, count) in record::errors() {
        if let Some(r) = results.get_mut(hook) {
            r.push((code, count));
        }
    }
    let mut apis = Vec::new();
    for (i, hook) in ALL_HOOKS.iter().enumerate() {
        let cells = || blocks.iter().filter_map(move |b| b.apis.get(i));
        let nested: u64 = cells().map(|c| c.nested.load(Relaxed)).sum();
        let (total_ns, max_ns, hist) = sum_series(cells().map(|c| &c.series));
        let calls = hist.count();
        if calls == 0 && nested == 0 {
            continue;
        }
        let mut codes = std::mem::take(&mut results[i]);
        codes.sort_unstable();
        apis.push(ApiRecord {
            symbol: hook.name().to_string(),
            calls,
            nested,
            total_ns,
            max_ns,
            bytes: cells().map(|c| c.bytes.load(Relaxed)).sum(),
            results: codes,
            hist,
        });
    }
    let driver_ns = apis.iter().map(|a| a.total_ns).sum();
    let syncs = SyncCause::ALL
        .iter()
        .enumerate()
        .filter_map(|(i, &cause)| {
            let (total_ns, max_ns, hist) =
                sum_series(blocks.iter().filter_map(move |b| b.syncs.get(i)));
            let calls = hist.count();
            (calls > 0).then_some(SyncRecord {
                cause,
                calls,
                total_ns,
                max_ns,
                hist,
            })
        })
        .collect();
    let mut copies = Vec::new();
    for (d, &direction) in Direction::ALL.iter().enumerate() {
        for (k, &host) in HostKind::ALL.iter().enumerate() {
            let cells = || {
                blocks
                    .iter()
                    .filter_map(move |b| b.copies.get(d).and_then(|row| row.get(k)))
            };
            let calls: u64 = cells().map(|c| c.calls.load(Relaxed)).sum();
            if calls > 0 {
                copies.push(CopyRecord {
                    direction,
                    host,
                    calls,
                    bytes: cells().map(|c| c.bytes.load(Relaxed)).sum(),
                });
            }
        }
    }
    let identity = IDENTITY.get();
    Dump {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        process: Process {
            // SAFETY: getpid/getppid have no preconditions.
            pid: unsafe { libc::getpid() } as u32,
            ppid: unsafe { libc::getppid() } as u32,
            host: identity.map(|i| i.host.clone()).unwrap_or_default(),
            exe: identity.map(|i| i.exe.clone()).unwrap_or_default(),
            cmdline: identity.map(|i| i.cmdline.clone()).unwrap_or_default(),
            rank_env: identity.map(|i| i.rank_env.clone()).unwrap_or_default(),
            rank: identity.and_then(|i| Rank::from_env(&i.rank_env)),
            run_token: config().and_then(|c| c.run_token.clone()),
            image: config().map_or(0, |c| c.image),
        },
        start_unix_ns: times.start_unix_ns,
        stop_unix_ns: clock::unix_ns(),
        first_call_unix_ns: times.first_call_unix_ns,
        complete,
        ended_by: None,
        clock: clock::source().into(),
        histogram: hist::Layout::current(),
        threads: record::threads_seen(),
        unrecorded_calls: record::unrecorded_calls(),
        driver_ns,
        apis,
        syncs,
        copies,
        unwrapped_symbols: unwrapped::names(),
        nccl: crate::nccl::snapshot(),
        gpu: crate::gpu::snapshot(),
    }
}

static WRITE_SEQ: AtomicU32 = AtomicU32::new(0);

/// Writes the dump atomically: a private temp file (never following a symlink, never
/// world-writable) renamed over `gpuspy-<host>-<pid>.json`.
pub fn write(times: Times, complete: bool) {
    let Some(dir) = config().map(|c| c.out_dir.as_path()) else {
        return;
    };
    let dump = snapshot(times, complete);
    if let Err(e) = write_to(dir, &dump) {
        warn_once(&format!(
            "cannot write dumps to {}: {e}; the program runs on unaffected",
            dir.display()
        ));
    }
}

fn write_to(dir: &Path, dump: &Dump) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    let name = dump_name(&dump.process);
    let json = serde_json::to_vec(dump).map_err(std::io::Error::other)?;
    let (tmp, mut file) = create_temp(dir, &name)?;
    let written = file.write_all(&json).and_then(|_| file.flush());
    drop(file);
    match written.and_then(|_| std::fs::rename(&tmp, dir.join(&name))) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// A new private temp file beside the dump. Anything already at a temp name (a file left by
/// a killed process with the same pid, or a planted symlink) is neither followed nor
/// overwritten: the next name is tried.
fn create_temp(dir: &Path, name: &str) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let mut last = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
    for _ in 0..16 {
        let tmp = dir.join(format!(".{name}.{}.tmp", WRITE_SEQ.fetch_add(1, Relaxed)));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// `gpuspy-<host>-<pid>.json`, or `gpuspy-r<rank>-<host>-<pid>.json` in a distributed job
/// (the pid stays: DataLoader workers inherit their rank's variables), with `-restart<n>`
/// added after a torchelastic restart.
fn dump_name(p: &Process) -> String {
    let host = &p.host;
    let pid = p.pid;
    match &p.rank {
        Some(r) => {
            let restart = r
                .restart
                .filter(|&n| n > 0)
                .map(|n| format!("-restart{n}"))
                .unwrap_or_default();
            format!("gpuspy-r{}-{host}-{pid}{restart}.json", r.rank)
        }
        None => format!("gpuspy-{host}-{pid}.json"),
    }
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// One line on stderr, once per process: the program's own output stays clean.
pub fn warn_once(message: &str) {
    if !WARNED.swap(true, Relaxed) {
        eprintln!("gpuspy: {message}");
    }
}
