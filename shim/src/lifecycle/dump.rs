//! Turning the arena into a dump file. Cold: runs on the flusher thread or at exit, may
//! allocate, never calls the driver.

use crate::config::config;
use crate::hooks::{ALL_HOOKS, HOOK_COUNT};
use crate::record::{self, Series, ThreadStats};
use crate::{clock, unwrapped};
use gpuspy_format::trust::{self, Writers};
use gpuspy_format::{
    hist, prom, ApiRecord, CopyRecord, Direction, Dump, Ending, HostKind, Process, Rank, SyncCause,
    SyncRecord, SCHEMA_NAME, SCHEMA_VERSION,
};
use std::ffi::{CStr, CString};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::OnceLock;

/// The parts of the header that do not change over a process's life.
struct Identity {
    host: String,
    exe: String,
    cmdline: Vec<String>,
    rank_env: Vec<(String, String)>,
    cuda_env: Vec<(String, String)>,
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
                let args: Vec<String> = raw
                    .split(|&b| b == 0)
                    .filter(|arg| !arg.is_empty())
                    .take(if config().is_none_or(|c| c.record_args) {
                        usize::MAX
                    } else {
                        1
                    })
                    .map(|arg| String::from_utf8_lossy(arg).into_owned())
                    .collect();
                gpuspy_format::redact_cmdline(&args)
            })
            .unwrap_or_default(),
        rank_env: set_variables(gpuspy_format::rank_variables()),
        cuda_env: set_variables(gpuspy_format::CUDA_VARIABLES.iter().copied()),
    });
}

/// `(name, value)` of those of `names` that are set.
fn set_variables(names: impl IntoIterator<Item = &'static str>) -> Vec<(String, String)> {
    names
        .into_iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_string(), v)))
        .collect()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let name = buf.split(|&b| b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(name).into_owned()
}

fn sum_series<'a>(series: impl Iterator<Item = &'a Series>) -> (u64, u64, hist::Histogram) {
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
    // Held across the read, so that the timeline's last window closes on these totals.
    let table = crate::timeline::lock();
    let (apis, syncs, copies) = record::with_blocks(|blocks| {
        (
            api_records(blocks),
            sync_records(blocks),
            copy_records(blocks),
        )
    });
    let driver_ns = apis.iter().map(|a| a.total_ns).sum();
    let launches = crate::timeline::launches_in(&apis);
    let identity = IDENTITY.get();
    let mut dump = Dump {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        tool_build: Some(env!("GPUSPY_BUILD").into()),
        // The fake driver (tools/fakecuda) exports this marker, no real one does: no GPU
        // measured these figures. One lookup per dump, never per call; asked at each dump
        // since programs load the driver late.
        simulated: crate::resolve::driver_symbol(c"fakecuda_simulated").is_some(),
        process: Process {
            // SAFETY: getpid/getppid have no preconditions.
            pid: unsafe { libc::getpid() } as u32,
            ppid: unsafe { libc::getppid() } as u32,
            host: identity.map(|i| i.host.clone()).unwrap_or_default(),
            exe: identity.map(|i| i.exe.clone()).unwrap_or_default(),
            cmdline: identity.map(|i| i.cmdline.clone()).unwrap_or_default(),
            rank_env: identity.map(|i| i.rank_env.clone()).unwrap_or_default(),
            rank: identity.and_then(|i| Rank::from_env(&i.rank_env)),
            cuda_env: identity.map(|i| i.cuda_env.clone()).unwrap_or_default(),
            run_token: config().and_then(|c| c.run_token.clone()),
            image: config().and_then(|c| c.image).map_or(0, |i| i.number),
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
        gpu: crate::gpu::snapshot(launches, table.launch_span_unix_ns(launches)),
        timeline: None,
        call_sites: crate::pystack::snapshot(),
        hangs: crate::watchdog::hangs(),
    };
    dump.timeline = crate::timeline::assemble(table, &dump, crate::gpu::timeline_gpu);
    dump
}

fn api_records(blocks: &[ThreadStats]) -> Vec<ApiRecord> {
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
        let mut codes = results.get_mut(i).map(std::mem::take).unwrap_or_default();
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
    apis
}

fn sync_records(blocks: &[ThreadStats]) -> Vec<SyncRecord> {
    SyncCause::ALL
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
        .collect()
}

fn copy_records(blocks: &[ThreadStats]) -> Vec<CopyRecord> {
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
    copies
}

static WRITE_SEQ: AtomicU32 = AtomicU32::new(0);

/// Writes the dump atomically: a private temp file (never following a symlink, never
/// world-writable), flushed to disk, renamed to its name (`publish_dump`). With
/// `GPUSPY_PROM_DIR`, the Prometheus textfile too, the same way; the `last` write of the
/// process removes it instead, so that no file outlives its process as if it were live.
///
/// Out of memory (the program's own limit reached), it writes from the reserve or, where
/// that is too small, not at all: one warning, and the program's exit is its own.
pub fn write(times: Times, complete: bool, ended_by: Option<Ending>, last: bool) {
    let Some(config) = config() else {
        return;
    };
    let written =
        crate::reserve::with_room(|| write_files(config, times, complete, ended_by, last));
    if written.is_none() {
        warn_once("out of memory: the dump was not written; the program runs on unaffected");
    }
}

fn write_files(
    config: &crate::config::Config,
    times: Times,
    complete: bool,
    ended_by: Option<Ending>,
    last: bool,
) {
    let mut dump = snapshot(times, complete);
    dump.ended_by = ended_by;
    let written = serde_json::to_vec(&dump)
        .map_err(io::Error::other)
        .and_then(|json| {
            write_to(
                &config.out_dir,
                Holds::Dumps,
                &json,
                config.fsync,
                |dir, tmp| publish_dump(dir, tmp, &dump.process),
            )
        });
    if let Err(e) = written {
        warn_once(&format!(
            "cannot write dumps to {}: {e}; the program runs on unaffected",
            config.out_dir.display()
        ));
        if let Some(token) = &config.run_token {
            mark_unwritten(&config.out_dir, token, dump.process.pid, &e);
        }
    }
    if let Some(dir) = &config.prom_dir {
        let identity = prom::Identity::of(&dump, crate::switch::forked());
        let name = identity.file_name();
        let done = if last {
            remove_from(dir, &name)
        } else {
            let text = prom::render(&dump, &identity);
            write_to(dir, Holds::Metrics, text.as_bytes(), false, |dir, tmp| {
                rename_over(dir, tmp, &c_name(&name)?)
            })
        };
        if let Err(e) = done {
            warn_once(&format!(
                "cannot write Prometheus metrics to {}: {e}; the program runs on unaffected",
                dir.display()
            ));
        }
    }
}

/// Leaves the empty marker that tells `gpuspy run` this process's dump could not be
/// written, and why (`side_files::unwritten_name`): the shim's warning goes to the
/// program's stderr, which gpuspy does not see. Best effort: where not even an empty file
/// can be created, gpuspy finds that out by itself.
fn mark_unwritten(dir: &Path, token: &str, pid: u32, e: &io::Error) {
    let errno = match e.raw_os_error() {
        Some(n) => n,
        None if e.kind() == io::ErrorKind::FileTooLarge => libc::EFBIG,
        None => 0,
    };
    let Ok(dir) = open_out_dir(dir, Holds::Dumps) else {
        return;
    };
    let Ok(name) = c_name(gpuspy_format::side_files::unwritten_name(token, pid, errno)) else {
        return;
    };
    // SAFETY: a NUL-terminated name relative to an open directory; the descriptor is
    // closed at once.
    unsafe {
        let fd = libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        );
        if fd >= 0 {
            libc::close(fd);
        }
    }
}

/// Removes `name` from `dir` (a trusted directory of metrics), if it is there.
fn remove_from(dir: &Path, name: &str) -> io::Result<()> {
    let dir = open_out_dir(dir, Holds::Metrics)?;
    let name = c_name(name)?;
    // SAFETY: a NUL-terminated name relative to the directory we hold open.
    match cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) }) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes `bytes` to a temp file in `dir` and hands it to `publish`, which gives it its
/// name (so no reader sees it half written).
fn write_to(
    dir: &Path,
    holds: Holds,
    bytes: &[u8],
    fsync: bool,
    publish: impl FnOnce(&OwnedFd, &CStr) -> io::Result<()>,
) -> io::Result<()> {
    within_file_size_limit(bytes.len())?;
    let dir = open_out_dir(dir, holds)?;
    let (tmp, mut file) = create_temp(&dir, holds.mode())?;
    let written = file
        .write_all(bytes)
        .and_then(|_| if fsync { file.sync_all() } else { Ok(()) });
    // `file` stays open, and so locked (`create_temp`), until the temp name is gone.
    if let Err(e) = written.and_then(|_| publish(&dir, &tmp)) {
        // SAFETY: a NUL-terminated name relative to the directory we hold open.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        return Err(e);
    }
    if fsync {
        // The rename itself is durable only once the directory is.
        // SAFETY: our own open descriptor.
        cvt(unsafe { libc::fsync(dir.as_raw_fd()) })?;
    }
    Ok(())
}

/// Renames `tmp` to `name` in `dir`, over whatever is there.
fn rename_over(dir: &OwnedFd, tmp: &CStr, name: &CStr) -> io::Result<()> {
    let dir = dir.as_raw_fd();
    // SAFETY: both names are NUL-terminated and relative to the directory we hold open.
    cvt(unsafe { libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) }).map(drop)
}

/// The dump name this process claimed with its first dump: its pid in the high half, in
/// the low which of its names (`dump_name`'s `copy`); 0 before. An image after `exec` has
/// new memory and a fork child another pid: each claims its own.
static CLAIMED: AtomicU64 = AtomicU64::new(0);
/// How many names a process tries before it gives up on writing its dump.
const MAX_COPIES: u32 = 1_000;

/// Gives the temp file its dump name: the one this process claimed, else the first of
/// `dump_name`'s copies that is free, which it claims. A dump this process did not write
/// is never replaced: the image after an `exec` that no wrapper saw has the same pid and
/// knows no better name, and the pid of a process long gone comes round again.
fn publish_dump(dir: &OwnedFd, tmp: &CStr, process: &Process) -> io::Result<()> {
    let pid = u64::from(process.pid);
    let claimed = CLAIMED.load(Relaxed);
    if claimed >> 32 == pid {
        return rename_over(dir, tmp, &c_name(dump_name(process, claimed as u32))?);
    }
    for copy in 1..=MAX_COPIES {
        match rename_unless_taken(dir, tmp, &c_name(dump_name(process, copy))?) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
            Ok(()) => {
                CLAIMED.store(pid << 32 | u64::from(copy), Relaxed);
                return Ok(());
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} and the next {} names after it are taken",
            dump_name(process, 1),
            MAX_COPIES - 1
        ),
    ))
}

/// Renames `tmp` to `name` in `dir` unless `name` exists (`EEXIST`): `renameat2` with
/// `RENAME_NOREPLACE`, or where the file system or kernel has no such rename (NFS, Linux
/// before 3.15), a hard link, which fails the same way, and the temp name's removal.
fn rename_unless_taken(dir: &OwnedFd, tmp: &CStr, name: &CStr) -> io::Result<()> {
    let dir = dir.as_raw_fd();
    // SAFETY: both names are NUL-terminated and relative to the directory we hold open.
    let renamed = cvt(unsafe {
        libc::renameat2(
            dir,
            tmp.as_ptr(),
            dir,
            name.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    });
    match renamed {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
            // SAFETY: as above.
            cvt(unsafe { libc::linkat(dir, tmp.as_ptr(), dir, name.as_ptr(), 0) })?;
            // The dump is in place: a temp name left behind is removed by the CLI.
            // SAFETY: as above.
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
            Ok(())
        }
        other => other.map(drop),
    }
}

/// A write past `ulimit -f` would raise SIGXFSZ, which kills the program: refuse it first.
fn within_file_size_limit(len: usize) -> io::Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: limit is a valid rlimit to write.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) })?;
    if limit.rlim_cur != libc::RLIM_INFINITY && len as u64 > limit.rlim_cur {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "the file ({len} bytes) is over the file-size limit (ulimit -f: {} bytes)",
                limit.rlim_cur
            ),
        ));
    }
    Ok(())
}

/// What an output directory holds: who else may write to it and read its files.
#[derive(Clone, Copy)]
enum Holds {
    Dumps,
    /// Prometheus textfiles, under names anyone can guess.
    Metrics,
}

impl Holds {
    fn writers(self) -> Writers {
        match self {
            Holds::Dumps => Writers::GroupOrSticky,
            Holds::Metrics => Writers::Nobody,
        }
    }

    /// A dump carries the run token that `gpuspy run` trusts and the command line: the
    /// user's alone. The metrics are for node_exporter, often another user.
    fn mode(self) -> libc::mode_t {
        match self {
            Holds::Dumps => 0o600,
            Holds::Metrics => 0o644,
        }
    }

    /// The error for a directory `trust` refused, saying what to do.
    fn untrusted(self, why: String) -> io::Error {
        let variable = match self {
            Holds::Dumps => "GPUSPY_OUT (gpuspy run -o)",
            Holds::Metrics => "GPUSPY_PROM_DIR (gpuspy run --prom)",
        };
        io::Error::other(format!("{why}; set {variable} to a directory of your own"))
    }
}

/// Opens the output directory, creating it if need be, and vets it and the directories
/// above it (`gpuspy_format::trust`: another user's directory, or one others may write to,
/// could hold planted or replaced files, or be swapped for one that does). Everything after
/// this is done relative to the descriptor, so the path cannot be swapped underneath.
fn open_out_dir(dir: &Path, holds: Holds) -> io::Result<OwnedFd> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // Before anything is made there.
    if let Some(why) = trust::untrusted_parents(dir, me) {
        return Err(holds.untrusted(why));
    }
    if let Some(parent) = dir.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)?;
    }
    let created = match std::fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e),
    };
    let link = std::fs::symlink_metadata(dir)?;
    let path = c_name(dir.as_os_str())?;
    // SAFETY: a NUL-terminated path; the descriptor is owned below.
    let fd = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: a descriptor we just opened and own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if !created {
        let meta = std::fs::File::from(fd.try_clone()?).metadata()?;
        if let Some(why) = trust::untrusted_out_dir(&link, &meta, me, holds.writers()) {
            return Err(holds.untrusted(why));
        }
    }
    Ok(fd)
}

/// A new private temp file in `dir`, named after this process and host
/// (`side_files::temp_name`) and locked (`flock`) for as long as it is open: the CLI removes
/// a temp file left by a writer that died (SIGKILL during a write) only when nobody holds
/// its lock and the pid it names is gone from this host. Anything already at a temp name (a
/// file left by a killed process with the same pid, or a planted symlink) is neither
/// followed nor overwritten: the next name is tried.
fn create_temp(dir: &OwnedFd, mode: libc::mode_t) -> io::Result<(CString, std::fs::File)> {
    let host = IDENTITY.get().map_or_else(hostname, |i| i.host.clone());
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..16 {
        let n = WRITE_SEQ.fetch_add(1, Relaxed);
        let tmp = c_name(gpuspy_format::side_files::temp_name(&host, pid, n))?;
        // SAFETY: a NUL-terminated name relative to an open directory.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode,
            )
        };
        match cvt(fd) {
            Ok(fd) => {
                // Where the file system has no locks, the CLI cannot take one either, and
                // so never removes the file.
                // SAFETY: a descriptor we just opened.
                unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) };
                // SAFETY: a descriptor we just opened and own.
                return Ok((tmp, unsafe { std::fs::File::from_raw_fd(fd) }));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

fn c_name(name: impl AsRef<std::ffi::OsStr>) -> io::Result<CString> {
    CString::new(name.as_ref().as_bytes()).map_err(io::Error::other)
}

/// -1 from a libc call as the `io::Error` of errno.
fn cvt(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// `gpuspy-<host>-<pid>.json` (the host as `gpuspy_format::file_safe` spells it), or
/// `gpuspy-r<rank>-<host>-<pid>.json` in a distributed job
/// (the pid stays: DataLoader workers inherit their rank's variables), with `-exec<n>` after
/// the pid for the image after the n-th `exec`, and `-restart<n>` added after a
/// torchelastic restart. Its `copy` from 2 on ends in `.<copy>.json` (`publish_dump`).
fn dump_name(p: &Process, copy: u32) -> String {
    let host = gpuspy_format::file_safe(&p.host);
    let pid = match p.image {
        0 => p.pid.to_string(),
        n => format!("{}-exec{n}", p.pid),
    };
    let copy = if copy > 1 {
        format!(".{copy}")
    } else {
        String::new()
    };
    match &p.rank {
        Some(r) => {
            let restart = r
                .restart
                .filter(|&n| n > 0)
                .map(|n| format!("-restart{n}"))
                .unwrap_or_default();
            format!("gpuspy-r{}-{host}-{pid}{restart}{copy}.json", r.rank)
        }
        None => format!("gpuspy-{host}-{pid}{copy}.json"),
    }
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// One line on stderr, once per process: the program's own output stays clean.
pub fn warn_once(message: &str) {
    if !WARNED.swap(true, Relaxed) {
        eprintln!("gpuspy: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The temp file names its writer for the CLI, and stays locked while it is open, so
    /// that the CLI never takes it for the leftover of a writer that died.
    #[test]
    fn a_temp_file_names_its_writer_and_is_locked_while_open() {
        let out = std::env::temp_dir().join(format!("gpuspy-temp-lock-{}", std::process::id()));
        let dir = open_out_dir(&out, Holds::Dumps).unwrap();
        let (tmp, file) = create_temp(&dir, Holds::Dumps.mode()).unwrap();
        let name = tmp.to_str().unwrap();
        let pid = std::process::id();
        assert_eq!(
            gpuspy_format::side_files::temp_writer(name, &hostname()),
            Some(pid),
            "{name}"
        );
        let other = std::fs::File::open(out.join(name)).unwrap();
        let try_lock = || {
            // SAFETY: flock on a descriptor we own.
            unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }
        };
        assert_eq!(try_lock(), -1, "the writer holds the lock");
        drop(file);
        assert_eq!(try_lock(), 0, "released when the writer closes it");
        std::fs::remove_dir_all(&out).unwrap();
    }
}
