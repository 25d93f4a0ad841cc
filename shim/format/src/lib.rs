//! The dump format: the one contract between `libgpuspy.so` (which writes dumps) and the
//! `gpuspy` CLI (which reads them). Everything both sides must agree on lives here: the
//! schema version, the JSON shape, the histogram layout and the API naming rules.
//!
//! docs/dump-format.md describes the same schema for people; keep the two in step.

use serde::{Deserialize, Serialize};

/// Bumped on any change to what a dump holds (CHANGELOG.md lists each version's change).
/// Version 2 added the timeline, version 3 `tool_build`; this reader still reads versions 1
/// and 2, which lack them.
pub const SCHEMA_VERSION: u32 = 3;
/// The oldest version this reader reads.
pub const OLDEST_SCHEMA_VERSION: u32 = 1;
/// The `schema` field of every dump, so that a stray JSON file is recognised as foreign.
pub const SCHEMA_NAME: &str = "gpuspy-dump";

pub mod apis;
pub mod callsites;
pub mod cap;
pub mod env;
pub mod gpu;
pub mod hist;
pub mod prom;
pub mod side_files;
pub mod timeline;
pub mod trust;
pub use hist::Histogram;

/// One dump: everything one process recorded, written by the shim.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Dump {
    pub schema: String,
    pub schema_version: u32,
    pub tool_version: String,
    /// The exact build of the shim that wrote the dump: `git describe --always --dirty` of
    /// its sources, or `unknown` where they were not a git checkout (a wheel built from an
    /// sdist). None in dumps of schema 1 and 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_build: Option<String>,
    /// The process called gpuspy's fake driver (tools/fakecuda, `gpuspy demo`), not a GPU:
    /// every figure was simulated. Absent (false) otherwise and in older dumps.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub simulated: bool,
    pub process: Process,
    /// Wall-clock (Unix epoch) nanoseconds at process start (or at fork, for a child) and at the
    /// moment this dump was taken.
    pub start_unix_ns: u64,
    pub stop_unix_ns: u64,
    /// When the process (or forked child) made its first intercepted call; 0 if unknown.
    #[serde(default)]
    pub first_call_unix_ns: u64,
    /// `true` when written at exit; `false` for a periodic flush of a still-running process.
    pub complete: bool,
    /// Why the image ended, where it did not simply exit: `exec` (the process replaced its
    /// image; the next image writes a dump of its own) or `signal` (SIGTERM, ...); None for a
    /// normal exit or a periodic flush.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<Ending>,
    /// Time source of every latency: `"tsc"` (invariant TSC, calibrated) or `"monotonic"`.
    pub clock: String,
    pub histogram: hist::Layout,
    /// Threads that made at least one intercepted call (at most 1024 are recorded).
    pub threads: u32,
    /// Calls from threads past the 1024th, forwarded but not recorded (0 in dumps before
    /// the field existed, whose shim recorded every thread's calls or dropped them silently).
    #[serde(default)]
    pub unrecorded_calls: u64,
    /// Sum of the time spent inside outermost intercepted driver calls, all threads.
    pub driver_ns: u64,
    pub apis: Vec<ApiRecord>,
    pub syncs: Vec<SyncRecord>,
    pub copies: Vec<CopyRecord>,
    /// Driver entry points the program looked up that gpuspy does not wrap (passed through).
    pub unwrapped_symbols: Vec<String>,
    /// NCCL traffic, when the process called NCCL (per-call latencies are in `apis`).
    #[serde(default)]
    pub nccl: Option<Nccl>,
    /// What the GPU itself reported (NVML, CUPTI); None where the shim never saw `cuInit`
    /// succeed.
    #[serde(default)]
    pub gpu: Option<gpu::Gpu>,
    /// The time axis (schema 2 on); None in older dumps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<timeline::Timeline>,
    /// Python call sites of the calls that blocked the host (schema 2 on); None where the
    /// process has no Python or never made such a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_sites: Option<callsites::CallSites>,
    /// Calls in flight for `GPUSPY_HANG_S` or longer when the dump was written (the hang
    /// watchdog's finding), longest first; empty in a dump of a process that was not stuck.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hangs: Vec<Hang>,
}

/// A driver or NCCL call that had not returned after the hang threshold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hang {
    /// The exact exported symbol (`cuStreamSynchronize`, `ncclAllReduce`).
    pub api: String,
    /// The Linux thread id of the thread in the call.
    pub thread: u32,
    pub since_unix_ns: u64,
    /// How long it had been in the call when the dump was written.
    pub elapsed_ns: u64,
    /// For an NCCL operation: the communicator's key (as in `nccl.communicators`) and the
    /// operation's sequence number on it (how many operations this rank issued on it
    /// before this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communicator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

/// What the process asked NCCL to do: host-side enqueue, not GPU time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Nccl {
    /// Per collective (`AllReduce`, `Send`, ...) and datatype (`float32`, ...).
    pub ops: Vec<NcclOps>,
    pub communicators: Vec<Communicator>,
    /// `ncclGroupStart` calls; the operations inside a group are launched at its end.
    pub groups: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NcclOps {
    pub op: String,
    pub datatype: String,
    pub calls: u64,
    pub bytes: u64,
}

/// A communicator this process was a member of.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Communicator {
    /// Equal on every rank of the communicator: a hash of the `ncclUniqueId` it was created
    /// from, or of its parent's key, split count and color for `ncclCommSplit`.
    pub key: String,
    pub rank: i32,
    pub nranks: i32,
    /// Operations issued on it: the sequence number its next operation would get.
    pub operations: u64,
    pub bytes: u64,
    /// The last operation issued on it (`AllReduce`, ...): with `operations`, the
    /// collective a rank that is ahead of the others waits in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_op: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub host: String,
    pub exe: String,
    pub cmdline: Vec<String>,
    /// Rank-identifying environment variables that were set (`RANK`, `LOCAL_RANK`, ...).
    pub rank_env: Vec<(String, String)>,
    /// The rank resolved from `rank_env`, if any launcher set one.
    #[serde(default)]
    pub rank: Option<Rank>,
    /// Settings of the CUDA driver, runtime and allocator that change how the program runs,
    /// where set (`CUDA_VARIABLES`: `CUDA_MODULE_LOADING=EAGER`, `CUDA_LAUNCH_BLOCKING=1`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuda_env: Vec<(String, String)>,
    /// `GPUSPY_RUN_TOKEN`: set by `gpuspy run` so that it reports only the processes it
    /// started, whatever else writes to the same directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_token: Option<String>,
    /// Which program image of this pid the dump holds: 0 for the first, n after n `exec`s.
    /// Images of one process share its pid and start time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub image: u32,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// How a process image ended, where it did not simply exit.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    /// It called `exec`: the dump was written just before the new image replaced it.
    Exec,
    /// A signal whose default action ends the process arrived (the number); the dump was
    /// written from the signal handler's request, then the process died of that signal.
    Signal(i32),
}

/// Which rank of a distributed job a process is, from its launcher's environment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rank {
    pub rank: u32,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    /// The variable the rank came from, e.g. `RANK` or `SLURM_PROCID`.
    pub source: String,
    pub job_id: Option<String>,
    pub restart: Option<u32>,
}

/// Launcher conventions, in precedence order: (rank, local rank, world size, job id).
/// `RANK` wins because under `srun torchrun` every worker inherits the agent's
/// `SLURM_PROCID` but gets its own `RANK`.
const RANK_SOURCES: &[(&str, &str, &str, &str)] = &[
    ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"),
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_MCA_ess_base_jobid",
    ),
    ("PMI_RANK", "PMI_LOCAL_RANK", "PMI_SIZE", "PMI_JOBID"),
    ("PMIX_RANK", "PMI_LOCAL_RANK", "PMI_SIZE", "PMI_JOBID"),
    ("PALS_RANKID", "PALS_LOCAL_RANKID", "PALS_SIZE", "PALS_APID"),
    (
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NTASKS",
        "SLURM_JOB_ID",
    ),
];

/// Every variable `Rank::from_env` may read, for the shim to capture.
/// The environment variables a dump records in `Process::cuda_env`, where set: each
/// changes how the driver or the framework's allocator behaves, and so what gpuspy sees.
pub const CUDA_VARIABLES: &[&str] = &[
    "CUDA_CACHE_DISABLE",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_FORCE_PTX_JIT",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
];

pub fn rank_variables() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = RANK_SOURCES
        .iter()
        .flat_map(|&(a, b, c, d)| [a, b, c, d])
        .chain([
            "TORCHELASTIC_RESTART_COUNT",
            "SLURM_JOB_ID",
            "LOCAL_WORLD_SIZE",
            "GROUP_RANK",
        ])
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

impl Rank {
    /// The rank from `(name, value)` pairs by launcher precedence; None outside a job.
    pub fn from_env(env: &[(String, String)]) -> Option<Rank> {
        let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let number = |name: &str| get(name).and_then(|v| v.trim().parse::<u32>().ok());
        RANK_SOURCES.iter().find_map(|&(rank, local, world, job)| {
            Some(Rank {
                rank: number(rank)?,
                local_rank: number(local),
                world_size: number(world),
                source: rank.to_string(),
                job_id: get(job).or_else(|| get("SLURM_JOB_ID")).map(str::to_string),
                restart: number("TORCHELASTIC_RESTART_COUNT"),
            })
        })
    }
}

/// Per exact exported symbol (`cuMemcpyHtoDAsync_v2_ptsz`, not the base name).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApiRecord {
    pub symbol: String,
    /// Outermost calls, each timed into `hist`.
    pub calls: u64,
    /// Calls made while another intercepted call was in progress on the same thread (the
    /// driver calling its own exports): forwarded and counted, not timed.
    pub nested: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Bytes named by the call: copy and memset sizes, allocation sizes.
    pub bytes: u64,
    /// Non-zero `CUresult` codes and how often each was returned.
    pub results: Vec<(u32, u64)>,
    pub hist: Histogram,
}

/// Calls that blocked the host thread until the GPU caught up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncCause {
    /// `cuStreamSynchronize`, `cuCtxSynchronize`, `cuEventSynchronize`.
    Explicit,
    /// A synchronous copy API (`cuMemcpyHtoD`, `cuMemcpyDtoH`, ...).
    SyncCopy,
    /// An `*Async` copy whose host side is pageable memory, which the driver stages and so
    /// performs synchronously.
    PageableAsyncCopy,
    /// Frees that synchronise the device (`cuMemFree`, `cuMemFreeHost`, `cuMemHostUnregister`).
    Free,
}

impl SyncCause {
    /// The name used in dumps and reports (`pageable-async-copy`).
    pub fn name(self) -> &'static str {
        match self {
            SyncCause::Explicit => "explicit",
            SyncCause::SyncCopy => "sync-copy",
            SyncCause::PageableAsyncCopy => "pageable-async-copy",
            SyncCause::Free => "free",
        }
    }

    pub const ALL: [SyncCause; 4] = [
        SyncCause::Explicit,
        SyncCause::SyncCopy,
        SyncCause::PageableAsyncCopy,
        SyncCause::Free,
    ];
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SyncRecord {
    pub cause: SyncCause,
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub hist: Histogram,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Direction {
    HtoD,
    DtoH,
    DtoD,
    Peer,
    /// Unified-addressing copies (`cuMemcpy`, batches) whose direction the shim cannot see
    /// without asking the driver.
    Unknown,
}

impl Direction {
    pub const ALL: [Direction; 5] = [
        Direction::HtoD,
        Direction::DtoH,
        Direction::DtoD,
        Direction::Peer,
        Direction::Unknown,
    ];
}

/// What kind of host memory a copy touched, judged from allocations the shim itself saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKind {
    /// `cuMemHostAlloc`, `cuMemAllocHost` or `cuMemHostRegister` memory.
    Pinned,
    /// Host memory the driver did not allocate or register.
    Pageable,
    /// `cuMemAllocManaged` memory.
    Managed,
    /// No host side (device-to-device, peer) or not known.
    None,
}

impl HostKind {
    /// The name used in dumps and reports (`pageable`).
    pub fn name(self) -> &'static str {
        match self {
            HostKind::Pinned => "pinned",
            HostKind::Pageable => "pageable",
            HostKind::Managed => "managed",
            HostKind::None => "none",
        }
    }

    pub const ALL: [HostKind; 4] = [
        HostKind::Pinned,
        HostKind::Pageable,
        HostKind::Managed,
        HostKind::None,
    ];
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CopyRecord {
    pub direction: Direction,
    pub host: HostKind,
    pub calls: u64,
    pub bytes: u64,
}

const NOT_A_DUMP: &str = "not a gpuspy dump (no \"schema\": \"gpuspy-dump\")";

/// The two fields that say whether a JSON file is a dump this reader can read; every other
/// field is skipped unread.
#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    schema: Option<HeaderField>,
    #[serde(default)]
    schema_version: Option<HeaderField>,
}

/// A header field's value when it is a string or an unsigned integer; any other value is
/// skipped without being built, so a hostile header costs no memory.
enum HeaderField {
    Str(String),
    U64(u64),
    Other,
}

impl<'de> Deserialize<'de> for HeaderField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(HeaderFieldVisitor)
    }
}

struct HeaderFieldVisitor;

impl<'de> serde::de::Visitor<'de> for HeaderFieldVisitor {
    type Value = HeaderField;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<HeaderField, E> {
        Ok(HeaderField::Str(v.to_string()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<HeaderField, E> {
        Ok(HeaderField::U64(v))
    }

    fn visit_i64<E>(self, _: i64) -> Result<HeaderField, E> {
        Ok(HeaderField::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<HeaderField, E> {
        Ok(HeaderField::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<HeaderField, E> {
        Ok(HeaderField::Other)
    }

    fn visit_unit<E>(self) -> Result<HeaderField, E> {
        Ok(HeaderField::Other)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<HeaderField, A::Error> {
        serde::de::Visitor::visit_seq(serde::de::IgnoredAny, seq).map(|_| HeaderField::Other)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<HeaderField, A::Error> {
        serde::de::Visitor::visit_map(serde::de::IgnoredAny, map).map(|_| HeaderField::Other)
    }
}

/// Parses a dump, turning every way it can be wrong into one line that says what is wrong.
/// Every string in it is cut to `cap::MAX_STRING_BYTES`.
///
/// Straight into the typed `Dump`: going through `serde_json::Value` first cost about 100
/// times the file's size. The header is read first, alone, so that a foreign or
/// future-version file is named as such rather than as a malformed dump.
pub fn parse_dump(text: &str) -> Result<Dump, String> {
    if text.trim().is_empty() {
        return Err("empty file".into());
    }
    let header: Header = cap::from_json(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Eof => format!("truncated JSON ({e})"),
        // Valid JSON, but not an object: not ours.
        serde_json::error::Category::Data => NOT_A_DUMP.to_string(),
        _ => format!("not JSON ({e})"),
    })?;
    if !matches!(&header.schema, Some(HeaderField::Str(s)) if s == SCHEMA_NAME) {
        return Err(NOT_A_DUMP.into());
    }
    let Some(HeaderField::U64(version)) = header.schema_version else {
        return Err("gpuspy dump without a schema_version".into());
    };
    if !(u64::from(OLDEST_SCHEMA_VERSION)..=u64::from(SCHEMA_VERSION)).contains(&version) {
        return Err(format!(
            "dump schema version {version} is not supported by this gpuspy (reads versions \
             {OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}); use the gpuspy that wrote it"
        ));
    }
    let dump: Dump = cap::from_json(text).map_err(|e| format!("malformed dump ({e})"))?;
    dump.histogram.check()?;
    for api in &dump.apis {
        api.hist.check(&dump.histogram)?;
    }
    for sync in &dump.syncs {
        sync.hist.check(&dump.histogram)?;
    }
    for activity in dump
        .gpu
        .iter()
        .flat_map(|g| &g.devices)
        .filter_map(|d| d.activity.as_ref())
    {
        activity.kernel_hist.check(&dump.histogram)?;
        activity.gap_hist.check(&dump.histogram)?;
    }
    Ok(dump)
}

/// A host name as part of a file name (dumps, temp files, Prometheus textfiles): anything
/// but letters, digits, `.`, `-` and `_` becomes `_`, so that a container's host name with
/// `/` or spaces still names one file in the directory meant. The dump keeps the real name.
pub fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// What stands in for a redacted argument value.
pub const REDACTED: &str = "<redacted>";

/// The command line with secrets replaced by `REDACTED`, in four forms: `--name=value`,
/// `--name value` (the next argument), `NAME=value` assignments (`env HF_TOKEN=...`,
/// Hydra's `db.password=...`), and the password of every URL's `user:password@`. A name is
/// secret when its last word (`secret_word`) is one of `SECRET_WORDS`: `--api-key`,
/// `--db-pass`, `--pwd`, `--auth`, `AWS_SECRET_ACCESS_KEY`, `hfToken`; not `--monkey`,
/// `--keyboard-layout`, `--tokenizer`, `--max-tokens` or `--pad_token_id`. The shim applies
/// it once, when it first records the process, never per call; the CLI applies it again to
/// dumps written before a form existed, and a second pass changes nothing.
pub fn redact_cmdline(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut value_follows = false;
    for arg in args {
        if std::mem::take(&mut value_follows) {
            out.push(REDACTED.to_string());
            continue;
        }
        out.push(match arg.split_once('=') {
            Some((name, _)) if is_secret_name(name) => format!("{name}={REDACTED}"),
            None if arg.starts_with('-') && is_secret_name(arg) => {
                value_follows = true;
                arg.clone()
            }
            _ => redact_url_passwords(arg).into_owned(),
        });
    }
    out
}

/// The words that make a name secret, compared without case.
const SECRET_WORDS: [&str; 17] = [
    "pass",
    "passwd",
    "password",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "credential",
    "credentials",
    "apikey",
    "apitoken",
    "authtoken",
    "accesstoken",
    "secretkey",
    "privatekey",
];

/// An option or variable name (`--api-key`, `HF_TOKEN`, `+db.password`) whose last word is
/// a secret word. Anything with other characters (a path, a URL) is no name.
fn is_secret_name(name: &str) -> bool {
    let name = name.trim_start_matches(['-', '+', '~']);
    let is_name = !name.is_empty()
        && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    is_name
        && SECRET_WORDS
            .iter()
            .any(|w| w.eq_ignore_ascii_case(last_word(name)))
}

/// The last word of a name: after its last `-`, `_` or `.`, and after its last change from
/// lower to upper case (`apiKey`: `Key`; `HF_TOKEN`: `TOKEN`; `APIKey`: `APIKey`). Only the
/// last word counts, as the thing an option names is its last word: `--pad-token-id` is an
/// id, `--key-dim` a size.
fn last_word(name: &str) -> &str {
    let word = name.rsplit(['-', '_', '.']).next().unwrap_or(name);
    let b = word.as_bytes();
    let start = (1..b.len())
        .rev()
        .find(|&i| b[i - 1].is_ascii_lowercase() && b[i].is_ascii_uppercase())
        .unwrap_or(0);
    &word[start..]
}

/// `arg` with the password of each URL's `scheme://user:password@host` replaced by
/// `REDACTED` (the user stays: `ssh://git@host` has no secret), borrowed when there is none.
fn redact_url_passwords(arg: &str) -> std::borrow::Cow<'_, str> {
    let mut redacted: Option<String> = None;
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = arg[from..].find("://") {
        let start = from + found + 3;
        // Resumed here, not after the authority: a list (`a://h1,b://u:p@h2`) has another
        // URL inside what looks like this one's authority.
        from = start;
        let rest = &arg[start..];
        let end = rest.find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace());
        let authority = &rest[..end.unwrap_or(rest.len())];
        let Some(at) = authority.rfind('@') else {
            continue;
        };
        let Some(colon) = authority[..at].find(':') else {
            continue;
        };
        if authority[colon + 1..at] == *REDACTED {
            continue;
        }
        let text = redacted.get_or_insert_with(|| String::with_capacity(arg.len()));
        text.push_str(&arg[copied..start + colon + 1]);
        text.push_str(REDACTED);
        copied = start + at;
    }
    match redacted {
        Some(mut text) => {
            text.push_str(&arg[copied..]);
            text.into()
        }
        None => arg.into(),
    }
}

/// The API family of an exact exported symbol: version and stream suffixes removed,
/// `cuMemcpyHtoDAsync_v2_ptsz` -> `cuMemcpyHtoDAsync`.
pub fn base_name(symbol: &str) -> &str {
    let mut name = symbol;
    loop {
        let stripped = name
            .strip_suffix("_ptsz")
            .or_else(|| name.strip_suffix("_ptds"))
            .or_else(|| strip_version(name));
        match stripped {
            Some(s) => name = s,
            None => return name,
        }
    }
}

fn strip_version(name: &str) -> Option<&str> {
    let (head, tail) = name.rsplit_once("_v")?;
    (!tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit())).then_some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn rank_precedence_follows_the_launchers() {
        // srun torchrun: every worker inherits SLURM_PROCID=0 but has its own RANK.
        let r = Rank::from_env(&env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_JOB_ID", "4242"),
            ("RANK", "5"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "8"),
            ("TORCHELASTIC_RESTART_COUNT", "2"),
        ]))
        .unwrap();
        assert_eq!(
            r,
            Rank {
                rank: 5,
                local_rank: Some(1),
                world_size: Some(8),
                source: "RANK".into(),
                job_id: Some("4242".into()),
                restart: Some(2),
            }
        );
        let mpi = Rank::from_env(&env(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("PMI_RANK", "9"),
        ]))
        .unwrap();
        assert_eq!(
            (mpi.rank, mpi.source.as_str(), mpi.world_size),
            (3, "OMPI_COMM_WORLD_RANK", Some(4))
        );
        let slurm = Rank::from_env(&env(&[("SLURM_PROCID", "7"), ("SLURM_NTASKS", "16")])).unwrap();
        assert_eq!((slurm.rank, slurm.world_size), (7, Some(16)));
        assert_eq!(Rank::from_env(&env(&[("RANK", "x")])), None);
        assert_eq!(Rank::from_env(&env(&[("HOME", "/root")])), None);
    }

    fn redacted(args: &[&str]) -> Vec<String> {
        redact_cmdline(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn secret_option_values_are_redacted_in_both_forms() {
        assert_eq!(
            redacted(&[
                "train.py",
                "--password=hunter2",
                "--api-key",
                "abc",
                "--HF_TOKEN=t",
                "-secret",
                "s",
                "--db-pass=p1",
                "--pwd=p2",
                "--auth=p3",
                "--db_passwd",
                "p4",
                "--apiKey=p5",
                "--accessToken",
                "p6",
                "--client-credentials=p7",
                "--token=",
                "--token",
            ]),
            [
                "train.py",
                "--password=<redacted>",
                "--api-key",
                "<redacted>",
                "--HF_TOKEN=<redacted>",
                "-secret",
                "<redacted>",
                "--db-pass=<redacted>",
                "--pwd=<redacted>",
                "--auth=<redacted>",
                "--db_passwd",
                "<redacted>",
                "--apiKey=<redacted>",
                "--accessToken",
                "<redacted>",
                "--client-credentials=<redacted>",
                "--token=<redacted>",
                "--token",
            ]
        );
    }

    #[test]
    fn assignments_are_redacted_by_their_name() {
        assert_eq!(
            redacted(&[
                "env",
                "HF_TOKEN=hf_abc",
                "AWS_SECRET_ACCESS_KEY=wJalr",
                "AWS_ACCESS_KEY_ID=AKIA1",
                "db.password=p",
                "+trainer.auth_token=t",
                "CUDA_VISIBLE_DEVICES=0,1",
                "python",
                "train.py",
                "lr=0.1",
            ]),
            [
                "env",
                "HF_TOKEN=<redacted>",
                "AWS_SECRET_ACCESS_KEY=<redacted>",
                "AWS_ACCESS_KEY_ID=AKIA1",
                "db.password=<redacted>",
                "+trainer.auth_token=<redacted>",
                "CUDA_VISIBLE_DEVICES=0,1",
                "python",
                "train.py",
                "lr=0.1",
            ]
        );
    }

    #[test]
    fn url_passwords_are_redacted_and_the_rest_of_the_url_kept() {
        for (arg, expected) in [
            (
                "postgres://admin:s3cr3t@db:5432/app",
                "postgres://admin:<redacted>@db:5432/app",
            ),
            (
                "--db-url=mysql://u:p@h/d?x=1",
                "--db-url=mysql://u:<redacted>@h/d?x=1",
            ),
            ("redis://:pw@cache", "redis://:<redacted>@cache"),
            // The last `@` ends the user info: the password may hold one.
            ("https://u:p@ss@host/x", "https://u:<redacted>@host/x"),
            (
                "a://u:p@h1,b://v:q@h2/x",
                "a://u:<redacted>@h1,b://v:<redacted>@h2/x",
            ),
            (
                "curl http://h1 http://v:q@h2",
                "curl http://h1 http://v:<redacted>@h2",
            ),
            // A user alone, a port, and a `@` after the authority are no password.
            ("ssh://git@github.com/o/r", "ssh://git@github.com/o/r"),
            ("http://host:8080/a@b:c", "http://host:8080/a@b:c"),
            (
                "http://host:8080 me@example.com",
                "http://host:8080 me@example.com",
            ),
            ("no url: a@b", "no url: a@b"),
            ("://:x@", "://:<redacted>@"),
            ("ünï://ü:ß@ħ", "ünï://ü:<redacted>@ħ"),
        ] {
            assert_eq!(redacted(&[arg]), [expected], "{arg}");
        }
    }

    #[test]
    fn look_alike_names_are_kept() {
        let kept = [
            "train.py",
            "--monkey=1",
            "--keyboard-layout",
            "us",
            "--tokenizer",
            "gpt2",
            "--max-tokens=5",
            "--max_new_tokens",
            "64",
            "--pad_token_id",
            "0",
            "--num-key-value-heads=8",
            "--keys=k",
            "--passes=3",
            "--author=me",
            "password",
            "monkey=1",
            "./out/key=1",
            "s3://bucket/secret=1",
        ];
        assert_eq!(redacted(&kept), kept);
    }

    #[test]
    fn a_second_pass_changes_nothing() {
        let args = [
            "--password=x",
            "--api-key",
            "y",
            "HF_TOKEN=z",
            "https://u:p@h",
            "--token",
        ];
        let once = redacted(&args);
        assert_eq!(redact_cmdline(&once), once);
    }

    #[test]
    fn file_safe_keeps_one_name_in_one_directory() {
        assert_eq!(file_safe("gpu-node_7.example"), "gpu-node_7.example");
        assert_eq!(file_safe("rack/7"), "rack_7");
        assert_eq!(file_safe("../../etc/x y"), ".._.._etc_x_y");
        assert_eq!(file_safe("ħost\n"), "_ost_");
    }

    #[test]
    fn base_name_strips_versions_and_stream_suffixes() {
        assert_eq!(base_name("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
        assert_eq!(base_name("cuMemcpyHtoD_v2_ptds"), "cuMemcpyHtoD");
        assert_eq!(base_name("cuLaunchKernel_ptsz"), "cuLaunchKernel");
        assert_eq!(base_name("cuCtxCreate_v4"), "cuCtxCreate");
        assert_eq!(
            base_name("cuMemPrefetchAsync_v2_ptsz"),
            "cuMemPrefetchAsync"
        );
        assert_eq!(base_name("cuLaunchKernel"), "cuLaunchKernel");
        // `_v` not followed by digits only is part of the name.
        assert_eq!(base_name("cuFoo_vx"), "cuFoo_vx");
        assert_eq!(base_name("cuFoo_v"), "cuFoo_v");
    }

    #[test]
    fn names_match_the_serialised_form() {
        for cause in SyncCause::ALL {
            assert_eq!(serde_json::to_value(cause).unwrap(), cause.name());
        }
        for kind in HostKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
    }

    #[test]
    fn parse_rejects_bad_input_with_a_reason() {
        assert_eq!(parse_dump("").unwrap_err(), "empty file");
        assert!(parse_dump("{\"schema\": \"gpu")
            .unwrap_err()
            .starts_with("truncated JSON"));
        assert!(parse_dump("\u{1}\u{2}garbage")
            .unwrap_err()
            .starts_with("not JSON"));
        assert!(parse_dump("{}")
            .unwrap_err()
            .starts_with("not a gpuspy dump"));
        let future = r#"{"schema":"gpuspy-dump","schema_version":99}"#;
        assert!(parse_dump(future)
            .unwrap_err()
            .contains("schema version 99"));
        let broken = r#"{"schema":"gpuspy-dump","schema_version":1,"pid":1}"#;
        assert!(parse_dump(broken)
            .unwrap_err()
            .starts_with("malformed dump"));
    }
}
