//! Loading dumps and merging them into one profile: per API family (base name) with its
//! exact variants, implicit syncs, copies, and the processes they came from.

use anyhow::{bail, Context, Result};
use gpuspy_format::gpu::{Activity, Device, Gpu};
use gpuspy_format::hist::{add_count, Histogram};
use gpuspy_format::{
    base_name, parse_dump, redact_cmdline, Direction, Dump, Ending, HostKind, SyncCause,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// `CUDA_ERROR_NOT_READY`: what `cuStreamQuery`/`cuEventQuery` return while work is pending.
/// A status, not an error, so it is not counted as one.
pub const CUDA_ERROR_NOT_READY: u32 = 600;

/// The largest dump a reader accepts (README, docs/dump-format.md). A dump holds one record
/// per hooked symbol, sync cause and copy kind: kilobytes, a few MB with GPU-side data. A
/// larger file is not one of ours, and reading it would cost memory.
pub const MAX_DUMP_BYTES: u64 = 256 << 20;

/// Expands PATHs (dump files or directories of dumps) into dump files, in a stable order,
/// each file once however many PATHs name it (`report base base`, a link to a dump beside
/// the dump).
pub fn dump_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let found = if meta.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("{}: cannot list directory", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| is_dump_name(p))
                .collect();
            if found.is_empty() {
                bail!("{}: no gpuspy dumps in this directory", path.display());
            }
            found.sort();
            found
        } else {
            vec![path.clone()]
        };
        files.extend(found);
    }
    Ok(distinct(files))
}

/// `paths` with each file or directory (device and inode) once, in order. A path that
/// vanished since it was listed keeps its place: reading it says so.
pub fn distinct(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let identity = |p: &Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    paths
        .into_iter()
        .filter(|p| identity(p).is_none_or(|id| seen.insert(id)))
        .collect()
}

/// `gpuspy-*.json`; temp files being written start with a dot and are skipped.
pub fn is_dump_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("gpuspy-") && n.ends_with(".json"))
}

/// Reads and parses one dump, with the metadata of the file it was read from.
///
/// Only a regular file is read: it is opened with `O_NONBLOCK`, so that opening a FIFO
/// named like a dump cannot wait for a writer, and the opened file is checked (`fstat`), so
/// that a link to `/dev/zero` or a FIFO is refused before a byte is read. The size limit
/// bounds memory: parsing costs at most a few times the file's size.
pub fn load(path: &Path) -> Result<(Dump, Metadata)> {
    let cannot_read = || format!("{}: cannot read", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(cannot_read)?;
    let meta = file.metadata().with_context(cannot_read)?;
    if !meta.is_file() {
        bail!(
            "{}: not a regular file (a FIFO, device or directory); gpuspy reads only dump files",
            path.display()
        );
    }
    let too_large = |size: u64| {
        anyhow::anyhow!(
            "{}: {} MiB, larger than a gpuspy dump can be ({} MiB)",
            path.display(),
            size >> 20,
            MAX_DUMP_BYTES >> 20
        )
    };
    if meta.len() > MAX_DUMP_BYTES {
        return Err(too_large(meta.len()));
    }
    // The file may grow while it is read: read one byte past the limit to see that.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_DUMP_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(cannot_read)?;
    if bytes.len() as u64 > MAX_DUMP_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: not JSON (not UTF-8 text)", path.display()))?;
    let dump = parse_dump(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((dump, meta))
}

/// Whether a dump's owner is one the reader trusts: the owner of the directory it is in
/// (who created the output directory), the reader itself, or root. Anyone else could only
/// have put it there through a directory writable by others, such as a shared `/tmp`, to
/// plant or replace counts (docs/dump-format.md).
fn trusted_owner(path: &Path, meta: &Metadata) -> bool {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let dir_owner = std::fs::metadata(dir).map(|m| m.uid()).ok();
    meta.uid() == 0 || meta.uid() == me || Some(meta.uid()) == dir_owner
}

/// A latency distribution merged over dumps. Counts saturate (see `Profile::saturated`).
#[derive(Debug, Clone, Default)]
pub struct Latency {
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub hist: Histogram,
}

impl Latency {
    /// Adds one record's figures; returns whether a count saturated.
    fn add(&mut self, calls: u64, total_ns: u64, max_ns: u64, h: &Histogram) -> bool {
        self.total_ns = self.total_ns.saturating_add(total_ns);
        self.max_ns = self.max_ns.max(max_ns);
        add_count(&mut self.calls, calls) | self.hist.merge(h)
    }

    pub fn quantile(&self, q: f64) -> u64 {
        self.hist.quantile(q, self.max_ns)
    }

    fn merge(&mut self, other: &Latency) -> bool {
        self.add(other.calls, other.total_ns, other.max_ns, &other.hist)
    }
}

#[derive(Debug, Default, Clone)]
pub struct Api {
    pub latency: Latency,
    pub nested: u64,
    pub bytes: u64,
    /// Non-zero results by code, NOT_READY included.
    pub results: BTreeMap<u32, u64>,
    /// Exact exported variants and their outermost call counts, by name. A sorted list
    /// rather than a map: most families have one variant, and a map's first node costs
    /// 384 bytes, more than the dump's record of it.
    pub symbols: Vec<(String, u64)>,
}

impl Api {
    /// Adds `calls` of the exact variant `symbol`; returns whether its count saturated.
    pub fn add_symbol(&mut self, symbol: &str, calls: u64) -> bool {
        match self
            .symbols
            .binary_search_by(|(s, _)| s.as_str().cmp(symbol))
        {
            Ok(i) => add_count(&mut self.symbols[i].1, calls),
            Err(i) => {
                self.symbols.insert(i, (symbol.to_string(), calls));
                false
            }
        }
    }

    pub fn errors(&self) -> u64 {
        total(
            self.results
                .iter()
                .filter(|(&code, _)| code != CUDA_ERROR_NOT_READY)
                .map(|(_, &n)| n),
        )
    }
}

/// One process: the dumps of all its program images (`exec` keeps the pid), merged.
#[derive(Debug, Clone)]
pub struct ProcessInfo {
    /// The dump of its latest image.
    pub path: PathBuf,
    pub pid: u32,
    pub host: String,
    /// The latest image's program and command line (secret option values redacted).
    pub exe: String,
    pub cmdline: Vec<String>,
    /// Wall-clock start and the latest dump, Unix ns: with host and pid, the start tells a
    /// process from a later one that reused its pid.
    pub start_unix_ns: u64,
    pub stop_unix_ns: u64,
    pub wall_ns: u64,
    /// From the first driver call to the dump: the part of the run that used the GPU.
    pub active_ns: u64,
    pub driver_ns: u64,
    pub calls: u64,
    pub threads: u32,
    pub complete: bool,
    /// How the latest image ended where it did not simply exit (exec, a signal).
    pub ended_by: Option<Ending>,
    /// The latest image's index (0 before any exec) and how many images' dumps were read.
    pub image: u32,
    pub images: u32,
    /// The launcher's rank, if the process ran in a distributed job.
    pub rank: Option<u32>,
    /// This process's steady-state time: active time less start-up calls.
    pub steady_ns: u64,
    /// Time this process's host threads spent blocked in explicit syncs and sync copies.
    pub blocked_ns: u64,
    pub launches: u64,
    /// Bytes this process copied, all directions.
    pub copied_bytes: u64,
    /// The verdict of this process's own diagnosis, if it had a warning.
    pub verdict: Option<&'static str>,
    /// Every finding of that diagnosis, warnings and below (`rank_verdicts` compares them).
    pub findings: Vec<&'static str>,
    /// What the GPU itself reported to this process (NVML, CUPTI), if the shim collected it.
    pub gpu: Option<Box<Gpu>>,
}

/// One communicator as its members saw it.
#[derive(Debug, Default, Clone)]
pub struct CommunicatorView {
    pub bytes: u64,
    /// Its size, as its members reported it.
    pub nranks: u32,
    /// Per member process (`rank N`, or `pid N` outside a launcher): operations issued.
    pub members: Vec<(String, u64)>,
}

impl CommunicatorView {
    pub fn operations(&self) -> u64 {
        total(self.members.iter().map(|&(_, n)| n))
    }

    /// The operation count most members issued (the larger on a tie), and the members
    /// that issued another: in a collective every member must issue the same sequence, so
    /// a job whose members disagree hangs at the next collective or has one in flight.
    pub fn disagreement(&self) -> Option<(u64, Vec<(String, u64)>)> {
        let mut tally: BTreeMap<u64, usize> = BTreeMap::new();
        for &(_, n) in &self.members {
            *tally.entry(n).or_default() += 1;
        }
        let (&common, _) = tally.iter().max_by_key(|&(&n, &k)| (k, n))?;
        let odd: Vec<(String, u64)> = self
            .members
            .iter()
            .filter(|&&(_, n)| n != common)
            .cloned()
            .collect();
        (!odd.is_empty()).then_some((common, odd))
    }
}

impl ProcessInfo {
    /// Whether `other` is a dump of this same process (another image of it).
    fn same_process(&self, other: &ProcessInfo) -> bool {
        (self.pid, self.start_unix_ns, &self.host) == (other.pid, other.start_unix_ns, &other.host)
    }

    /// Adds another image of this process: its calls and times are summed, and the latest
    /// image names the program and says how the process ended. Returns whether a count
    /// saturated.
    fn absorb_image(&mut self, other: ProcessInfo) -> bool {
        let mut clipped = false;
        for (mine, theirs) in [
            (&mut self.active_ns, other.active_ns),
            (&mut self.driver_ns, other.driver_ns),
            (&mut self.calls, other.calls),
            (&mut self.steady_ns, other.steady_ns),
            (&mut self.blocked_ns, other.blocked_ns),
            (&mut self.launches, other.launches),
            (&mut self.copied_bytes, other.copied_bytes),
        ] {
            clipped |= add_count(mine, theirs);
        }
        self.threads = self.threads.saturating_add(other.threads);
        self.images += other.images;
        self.stop_unix_ns = self.stop_unix_ns.max(other.stop_unix_ns);
        self.wall_ns = self.stop_unix_ns.saturating_sub(self.start_unix_ns);
        self.verdict = self.verdict.or(other.verdict);
        if self.gpu.is_none() {
            self.gpu = other.gpu;
        }
        if other.image > self.image {
            self.path = other.path;
            self.exe = other.exe;
            self.cmdline = other.cmdline;
            self.complete = other.complete;
            self.ended_by = other.ended_by;
            self.image = other.image;
        }
        clipped
    }

    /// The share of its steady-state time the process spent waiting for the GPU.
    pub fn wait_share(&self) -> f64 {
        self.blocked_ns as f64 / self.steady_ns.max(1) as f64
    }

    /// GPU time of this process's NCCL kernels (CUPTI), None without CUPTI activity.
    pub fn nccl_kernel_ns(&self) -> Option<u64> {
        let activities: Vec<&Activity> = self
            .gpu
            .as_deref()?
            .devices
            .iter()
            .filter_map(|d| d.activity.as_ref())
            .collect();
        (!activities.is_empty()).then(|| {
            total(
                activities
                    .iter()
                    .flat_map(|a| &a.collectives)
                    .map(|c| c.total_ns),
            )
        })
    }
}

#[derive(Debug, Default, Clone)]
pub struct Profile {
    pub processes: Vec<ProcessInfo>,
    pub apis: BTreeMap<String, Api>,
    pub syncs: BTreeMap<SyncCause, Latency>,
    pub copies: BTreeMap<(Direction, HostKind), (u64, u64)>,
    pub unwrapped: Vec<String>,
    /// NCCL `(op, datatype)` -> `(calls, bytes)`, over all processes.
    pub nccl_ops: BTreeMap<(String, String), (u64, u64)>,
    /// Communicator key -> what its members (over all processes) issued on it.
    pub communicators: BTreeMap<String, CommunicatorView>,
    /// A merged count reached u64::MAX and stopped there instead of wrapping around: the
    /// figures that show it are lower bounds, and the report says so.
    pub saturated: bool,
}

impl Profile {
    /// Loads and merges every dump under `paths` one at a time, so memory stays bounded by
    /// the merged profile however many rank dumps there are. Warns, in one line, about
    /// dumps owned by someone the reader does not trust (`trusted_owner`).
    pub fn load(paths: &[PathBuf]) -> Result<Profile> {
        let mut p = Profile::default();
        let mut untrusted = Vec::new();
        for file in dump_files(paths)? {
            let (dump, meta) = load(&file)?;
            if !trusted_owner(&file, &meta) {
                untrusted.push(format!("{} (uid {})", file.display(), meta.uid()));
            }
            let mut one = Profile::from_dump(&file, dump);
            let diagnosis = crate::diagnose::diagnose(&one);
            if let Some(me) = one.processes.first_mut() {
                me.verdict = diagnosis.verdict().map(|f| f.id);
                me.findings = diagnosis.findings.iter().map(|f| f.id).collect();
            }
            p.absorb(one);
        }
        if !untrusted.is_empty() {
            eprintln!(
                "gpuspy: warning: dumps not owned by their directory's owner, you or root (another user may have planted or replaced them): {}",
                untrusted.join(", ")
            );
        }
        Ok(p)
    }

    /// One dump's profile. It takes the dump, so that its larger parts (the GPU section,
    /// the names looked up) move rather than being copied.
    fn from_dump(path: &Path, d: Dump) -> Profile {
        let mut p = Profile::default();
        let active_ns = d.stop_unix_ns.saturating_sub(match d.first_call_unix_ns {
            0 => d.start_unix_ns,
            first => first,
        });
        p.processes.push(ProcessInfo {
            path: path.to_path_buf(),
            pid: d.process.pid,
            host: d.process.host,
            exe: d.process.exe,
            // Dumps written before the shim redacted secrets still hold them.
            cmdline: redact_cmdline(&d.process.cmdline),
            start_unix_ns: d.start_unix_ns,
            stop_unix_ns: d.stop_unix_ns,
            wall_ns: d.stop_unix_ns.saturating_sub(d.start_unix_ns),
            active_ns,
            driver_ns: d.driver_ns,
            calls: 0,
            threads: d.threads,
            complete: d.complete,
            ended_by: d.ended_by,
            image: d.process.image,
            images: 1,
            rank: d.process.rank.as_ref().map(|r| r.rank),
            steady_ns: 0,
            blocked_ns: 0,
            launches: 0,
            copied_bytes: 0,
            verdict: None,
            findings: Vec::new(),
            gpu: d.gpu.map(Box::new),
        });
        let clipped = &mut p.saturated;
        let (mut calls, mut copied) = (0, 0);
        for a in &d.apis {
            let api = p.apis.entry(base_name(&a.symbol).to_string()).or_default();
            *clipped |= api.latency.add(a.calls, a.total_ns, a.max_ns, &a.hist)
                | add_count(&mut api.nested, a.nested)
                | add_count(&mut api.bytes, a.bytes)
                | api.add_symbol(&a.symbol, a.calls)
                | add_count(&mut calls, a.calls);
            for &(code, n) in &a.results {
                *clipped |= add_count(api.results.entry(code).or_default(), n);
            }
        }
        for s in &d.syncs {
            *clipped |= p
                .syncs
                .entry(s.cause)
                .or_default()
                .add(s.calls, s.total_ns, s.max_ns, &s.hist);
        }
        for c in &d.copies {
            let cell = p.copies.entry((c.direction, c.host)).or_default();
            *clipped |= add_count(&mut cell.0, c.calls)
                | add_count(&mut cell.1, c.bytes)
                | add_count(&mut copied, c.bytes);
        }
        p.unwrapped = d.unwrapped_symbols;
        if let Some(n) = &d.nccl {
            for o in &n.ops {
                let cell = p
                    .nccl_ops
                    .entry((o.op.clone(), o.datatype.clone()))
                    .or_default();
                *clipped |= add_count(&mut cell.0, o.calls) | add_count(&mut cell.1, o.bytes);
            }
            let member = match &d.process.rank {
                Some(r) => format!("rank {}", r.rank),
                None => format!("pid {}", d.process.pid),
            };
            for c in &n.communicators {
                let mine = p.communicators.entry(c.key.clone()).or_default();
                *clipped |= add_count(&mut mine.bytes, c.bytes);
                mine.nranks = mine.nranks.max(u32::try_from(c.nranks).unwrap_or(0));
                mine.members.push((member.clone(), c.operations));
            }
        }
        let steady = p.steady_ns();
        let blocked = total(
            [SyncCause::Explicit, SyncCause::SyncCopy]
                .iter()
                .filter_map(|&c| p.sync(c))
                .map(|l| l.total_ns),
        );
        let launches = total(LAUNCH_APIS.iter().map(|a| p.calls(a)));
        if let Some(me) = p.processes.first_mut() {
            me.calls = calls;
            me.copied_bytes = copied;
            me.steady_ns = steady;
            me.blocked_ns = blocked;
            me.launches = launches;
        }
        p
    }

    /// Every device of every process that reported GPU-side data.
    pub fn gpu_devices(&self) -> impl Iterator<Item = (&ProcessInfo, &Device)> {
        self.processes
            .iter()
            .filter_map(|p| p.gpu.as_deref().map(|g| (p, g)))
            .flat_map(|(p, g)| g.devices.iter().map(move |d| (p, d)))
    }

    /// Every device's CUPTI activity, with its process.
    pub fn gpu_activity(&self) -> impl Iterator<Item = (&ProcessInfo, &Device, &Activity)> {
        self.gpu_devices()
            .filter_map(|(p, d)| d.activity.as_ref().map(|a| (p, d, a)))
    }

    /// The share of the GPU activity span in which no kernel ran, over every device with
    /// CUPTI activity; None without any.
    pub fn gpu_idle_share(&self) -> Option<f64> {
        let (busy, span) = self.gpu_activity().fold((0u64, 0u64), |(b, s), (_, _, a)| {
            (
                b.saturating_add(a.busy_ns),
                s.saturating_add(a.working_span_ns()),
            )
        });
        (span > 0).then(|| 1.0 - busy as f64 / span as f64)
    }

    /// Per-rank imbalance: for each measure, the largest rank's value against the median,
    /// with the rank that has it. Empty outside a distributed job.
    pub fn rank_imbalance(&self) -> Vec<Imbalance> {
        let ranked: Vec<&ProcessInfo> =
            self.processes.iter().filter(|p| p.rank.is_some()).collect();
        if ranked.len() < 2 {
            return Vec::new();
        }
        let measures: [(&'static str, Measure); 4] = [
            ("launches", |p| p.launches as f64),
            ("blocked_ns", |p| p.blocked_ns as f64),
            ("steady_ns", |p| p.steady_ns as f64),
            ("copied_bytes", |p| p.copied_bytes as f64),
        ];
        measures
            .iter()
            .map(|&(measure, value)| {
                let median = crate::stats::median(ranked.iter().map(|p| value(p)).collect());
                let top = ranked
                    .iter()
                    .max_by(|a, b| value(a).total_cmp(&value(b)))
                    .copied();
                let max = top.map_or(0.0, value);
                Imbalance {
                    measure,
                    max,
                    median,
                    ratio: if median > 0.0 { max / median } else { 0.0 },
                    rank: top.and_then(|p| p.rank).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Ranks whose own verdict differs from the most common verdict among the ranks, as
    /// `(rank, verdict)`; the common verdict first. Empty outside a distributed job.
    ///
    /// A difference in severity alone is not a difference. Ranks staged alike still differ a
    /// little (a sleep that overshot, a preempted thread), so a problem that sits near the
    /// warning level (`WARNING_IMPACT`) is a warning on some ranks and informational on
    /// others; naming those ranks would send the user looking for a difference that is not
    /// there. So a rank without a warning agrees when its own findings include the common
    /// verdict, and a rank with a warning agrees with ranks that have none when at least
    /// half of them find the same problem below the warning level. Two different warnings
    /// are a difference, however close their impacts.
    pub fn rank_verdicts(&self) -> (Option<&'static str>, Vec<(u32, Option<&'static str>)>) {
        let ranked: Vec<&ProcessInfo> =
            self.processes.iter().filter(|p| p.rank.is_some()).collect();
        let mut tally: BTreeMap<Option<&'static str>, usize> = BTreeMap::new();
        for p in &ranked {
            *tally.entry(p.verdict).or_default() += 1;
        }
        let common = tally.iter().max_by_key(|(_, n)| **n).and_then(|(v, _)| *v);
        let holders: Vec<&&ProcessInfo> = ranked.iter().filter(|p| p.verdict == common).collect();
        let agrees = |p: &ProcessInfo| match (p.verdict, common) {
            (None, None) => true,
            (None, Some(common)) => p.findings.contains(&common),
            (Some(mine), None) => {
                2 * holders
                    .iter()
                    .filter(|h| h.findings.contains(&mine))
                    .count()
                    >= holders.len()
            }
            (Some(mine), Some(common)) => mine == common,
        };
        let mut differ: Vec<(u32, Option<&'static str>)> = ranked
            .iter()
            .filter(|p| !agrees(p))
            .map(|p| (p.rank.unwrap_or_default(), p.verdict))
            .collect();
        differ.sort_unstable();
        (common, differ)
    }

    /// Adds another profile's processes and counts to this one (several dumps or runs
    /// merged). The images of one process (an `exec` keeps the pid) become one process.
    pub fn absorb(&mut self, other: Profile) {
        let clipped = &mut self.saturated;
        *clipped |= other.saturated;
        for process in other.processes {
            match self.processes.iter_mut().find(|p| p.same_process(&process)) {
                Some(mine) => *clipped |= mine.absorb_image(process),
                None => self.processes.push(process),
            }
        }
        for (name, api) in other.apis {
            let mine = self.apis.entry(name).or_default();
            *clipped |= mine.latency.merge(&api.latency)
                | add_count(&mut mine.nested, api.nested)
                | add_count(&mut mine.bytes, api.bytes);
            for (code, n) in api.results {
                *clipped |= add_count(mine.results.entry(code).or_default(), n);
            }
            for (symbol, n) in &api.symbols {
                *clipped |= mine.add_symbol(symbol, *n);
            }
        }
        for (cause, l) in &other.syncs {
            *clipped |= self.syncs.entry(*cause).or_default().merge(l);
        }
        for (key, (calls, bytes)) in other.copies {
            let mine = self.copies.entry(key).or_default();
            *clipped |= add_count(&mut mine.0, calls) | add_count(&mut mine.1, bytes);
        }
        self.unwrapped.extend(other.unwrapped);
        self.unwrapped.sort();
        self.unwrapped.dedup();
        for (key, (calls, bytes)) in other.nccl_ops {
            let mine = self.nccl_ops.entry(key).or_default();
            *clipped |= add_count(&mut mine.0, calls) | add_count(&mut mine.1, bytes);
        }
        for (key, c) in other.communicators {
            let mine = self.communicators.entry(key).or_default();
            *clipped |= add_count(&mut mine.bytes, c.bytes);
            mine.nranks = mine.nranks.max(c.nranks);
            mine.members.extend(c.members);
        }
        // The sums over processes are made when asked for; they saturate too.
        let sums = [self.process_wall_ns(), self.driver_ns(), self.active_ns()];
        self.saturated |= sums.contains(&u64::MAX);
    }

    /// The job's wall time: from the earliest process start to the latest dump.
    pub fn span_ns(&self) -> u64 {
        let start = self.processes.iter().map(|p| p.start_unix_ns).min();
        let stop = self.processes.iter().map(|p| p.stop_unix_ns).max();
        stop.zip(start)
            .map_or(0, |(stop, start)| stop.saturating_sub(start))
    }

    /// Wall time summed over the processes: the base of "share of time" figures, since
    /// driver and sync times are summed over the processes too.
    pub fn process_wall_ns(&self) -> u64 {
        total(self.processes.iter().map(|p| p.wall_ns))
    }

    /// Time inside the driver, summed over the processes.
    pub fn driver_ns(&self) -> u64 {
        total(self.processes.iter().map(|p| p.driver_ns))
    }

    /// Time from each process's first driver call to its dump, summed.
    pub fn active_ns(&self) -> u64 {
        total(self.processes.iter().map(|p| p.active_ns))
    }

    /// Time inside start-up calls: driver init, contexts, module and library loading, JIT.
    pub fn startup_ns(&self) -> u64 {
        total(STARTUP_APIS.iter().map(|name| self.total_ns(name)))
    }

    /// The active time less start-up: the steady state that per-step problems are measured
    /// against. Never zero.
    pub fn steady_ns(&self) -> u64 {
        self.active_ns().saturating_sub(self.startup_ns()).max(1)
    }

    pub fn api(&self, name: &str) -> Option<&Api> {
        self.apis.get(name)
    }

    pub fn calls(&self, name: &str) -> u64 {
        self.api(name).map_or(0, |a| a.latency.calls)
    }

    pub fn total_ns(&self, name: &str) -> u64 {
        self.api(name).map_or(0, |a| a.latency.total_ns)
    }

    pub fn sync(&self, cause: SyncCause) -> Option<&Latency> {
        self.syncs.get(&cause)
    }

    /// `(calls, bytes)` of copies in one direction from one kind of host memory.
    pub fn copied(&self, direction: Direction, host: HostKind) -> (u64, u64) {
        self.copies
            .get(&(direction, host))
            .copied()
            .unwrap_or((0, 0))
    }

    /// APIs by total time, largest first.
    pub fn by_total_time(&self) -> Vec<(&String, &Api)> {
        let mut v: Vec<_> = self.apis.iter().collect();
        v.sort_by(|a, b| {
            b.1.latency
                .total_ns
                .cmp(&a.1.latency.total_ns)
                .then(a.0.cmp(b.0))
        });
        v
    }
}

/// A sum of counts or times that saturates instead of wrapping around (see `add_count`).
pub fn total(values: impl Iterator<Item = u64>) -> u64 {
    values.fold(0, u64::saturating_add)
}

/// One per-process quantity compared across ranks.
type Measure = fn(&ProcessInfo) -> f64;

/// How far the largest rank is from the median rank on one measure.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Imbalance {
    pub measure: &'static str,
    pub max: f64,
    pub median: f64,
    /// max / median; 0 when the median is 0.
    pub ratio: f64,
    /// The rank with the largest value.
    pub rank: u32,
}

/// API families whose time is start-up (or tear-down) cost rather than steady-state work.
pub const STARTUP_APIS: &[&str] = &[
    "cuInit",
    "cuCtxCreate",
    "cuDevicePrimaryCtxRetain",
    "cuModuleLoad",
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuModuleLoadFatBinary",
    "cuLibraryLoadData",
    "cuLibraryLoadFromFile",
    "cuLinkCreate",
    "cuLinkAddData",
    "cuLinkAddFile",
    "cuLinkComplete",
    // NCCL communicators: setting one up took 0.4 s per rank on the H200 DDP run.
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "ncclCommSplit",
    "ncclCommDestroy",
    "ncclCommAbort",
];

/// Kernel launch APIs (graph launches are counted apart).
pub const LAUNCH_APIS: &[&str] = &[
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn view(members: &[(&str, u64)]) -> CommunicatorView {
        CommunicatorView {
            members: members.iter().map(|&(m, n)| (m.to_string(), n)).collect(),
            ..CommunicatorView::default()
        }
    }

    #[test]
    fn sums_over_processes_saturate_and_say_so() {
        let one = |pid: u32, driver_ns: u64| {
            let mut p = crate::diagnose::synthetic::run(1.0).build();
            p.processes[0].pid = pid;
            p.processes[0].driver_ns = driver_ns;
            p
        };
        let mut merged = one(1, 1 << 62);
        merged.absorb(one(2, 1 << 62));
        assert_eq!((merged.driver_ns(), merged.saturated), (1 << 63, false));
        merged.absorb(one(3, 1 << 63));
        assert_eq!((merged.driver_ns(), merged.saturated), (u64::MAX, true));
    }

    #[test]
    fn communicator_members_that_issued_another_count_are_named() {
        let agree = view(&[("rank 0", 7), ("rank 1", 7)]);
        assert_eq!(agree.disagreement(), None);
        assert_eq!(agree.operations(), 14);
        let one_short = view(&[("rank 0", 7), ("rank 1", 6), ("rank 2", 7)]);
        assert_eq!(
            one_short.disagreement(),
            Some((7, vec![("rank 1".to_string(), 6)]))
        );
        // Two members, two counts: the larger is taken as the common one.
        let tie = view(&[("rank 0", 5), ("rank 1", 4)]);
        assert_eq!(
            tie.disagreement(),
            Some((5, vec![("rank 1".to_string(), 4)]))
        );
        assert_eq!(view(&[("rank 0", 3)]).disagreement(), None);
    }

    /// A profile of ranks 0.., each with its verdict and its findings.
    fn ranks(each: &[(Option<&'static str>, &[&'static str])]) -> Profile {
        let mut p = crate::diagnose::synthetic::run(1.0).build();
        let template = p.processes.pop().unwrap();
        for (rank, &(verdict, findings)) in each.iter().enumerate() {
            p.processes.push(ProcessInfo {
                rank: Some(rank as u32),
                verdict,
                findings: findings.to_vec(),
                ..template.clone()
            });
        }
        p
    }

    #[test]
    fn a_rank_differs_by_its_problem_not_by_its_severity() {
        const SYNC: &str = "sync-stalled";
        const LAUNCH: &str = "launch-bound";
        // Rank 1 alone is launch-bound: named.
        let one = ranks(&[
            (Some(SYNC), &[SYNC]),
            (Some(LAUNCH), &[LAUNCH, SYNC]),
            (Some(SYNC), &[SYNC]),
        ]);
        assert_eq!(one.rank_verdicts(), (Some(SYNC), vec![(1, Some(LAUNCH))]));
        // Ranks whose sync stall is just under the warning level, or just over it while
        // most are under: the same diagnosis.
        let under = ranks(&[
            (Some(SYNC), &[SYNC]),
            (None, &[SYNC]),
            (Some(SYNC), &[SYNC]),
        ]);
        assert_eq!(under.rank_verdicts(), (Some(SYNC), vec![]));
        let over = ranks(&[(None, &[SYNC]), (Some(SYNC), &[SYNC]), (None, &[SYNC])]);
        assert_eq!(over.rank_verdicts(), (None, vec![]));
        // A rank without the common problem at all, or with a warning the others lack, is
        // named.
        let clean = ranks(&[(Some(SYNC), &[SYNC]), (None, &[]), (Some(SYNC), &[SYNC])]);
        assert_eq!(clean.rank_verdicts(), (Some(SYNC), vec![(1, None)]));
        let alone = ranks(&[(None, &[SYNC]), (Some(LAUNCH), &[LAUNCH]), (None, &[])]);
        assert_eq!(alone.rank_verdicts(), (None, vec![(1, Some(LAUNCH))]));
        // Outside a distributed job: nothing.
        assert_eq!(ranks(&[]).rank_verdicts(), (None, vec![]));
    }
}
