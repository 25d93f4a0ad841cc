//! The loaded model: one profile merged from dumps, per API family (base name) with its
//! exact variants, implicit syncs, copies, and the processes they came from. `load` builds
//! it; it holds measurements only (judgements are made in `analyse`).

use gpuspy_format::callsites::CallSite;
use gpuspy_format::cap::cut_args;
use gpuspy_format::gpu::{Activity, Device, Gpu};
use gpuspy_format::hist::{add_count, Histogram};
use gpuspy_format::{base_name, redact_cmdline, Direction, Dump, Ending, HostKind, SyncCause};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `CUDA_ERROR_NOT_READY`: what `cuStreamQuery`/`cuEventQuery` return while work is pending.
/// A status, not an error, so it is not counted as one.
pub const CUDA_ERROR_NOT_READY: u32 = 600;

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
    /// Time creating contexts where `CUDA_MODULE_LOADING=EAGER` was set: creating a
    /// context then loads every module registered so far, so this is module loading too.
    pub eager_context_ns: u64,
    /// Time this process's host threads spent blocked in explicit syncs and sync copies.
    pub blocked_ns: u64,
    pub launches: u64,
    /// Bytes this process copied, all directions.
    pub copied_bytes: u64,
    /// Calls from threads beyond those the shim records at once: forwarded, not recorded.
    pub unrecorded_calls: u64,
    /// What the GPU itself reported to this process (NVML, CUPTI), if the shim collected it.
    pub gpu: Option<Box<Gpu>>,
    /// The token of the `gpuspy run` that started it (`runs`).
    pub run_token: Option<String>,
    /// The time axis of the latest image (dumps of schema 2 on).
    pub timeline: Option<Box<gpuspy_format::timeline::Timeline>>,
    /// Calls of the latest image in flight past the hang threshold when it was dumped.
    pub hangs: Vec<gpuspy_format::Hang>,
    /// It called the fake driver (tools/fakecuda): its figures were simulated.
    pub simulated: bool,
}

/// One communicator as its members saw it.
#[derive(Debug, Default, Clone)]
pub struct CommunicatorView {
    pub bytes: u64,
    /// Its size, as its members reported it.
    pub nranks: u32,
    /// Per member process (`rank N`, or `pid N` outside a launcher): operations issued.
    pub members: Vec<(String, u64)>,
    /// The last operation a member issued (`AllReduce`, ...), by that member's count.
    pub last_ops: BTreeMap<u64, String>,
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
    pub fn same_process(&self, other: &ProcessInfo) -> bool {
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
            (&mut self.eager_context_ns, other.eager_context_ns),
            (&mut self.blocked_ns, other.blocked_ns),
            (&mut self.launches, other.launches),
            (&mut self.copied_bytes, other.copied_bytes),
            (&mut self.unrecorded_calls, other.unrecorded_calls),
        ] {
            clipped |= add_count(mine, theirs);
        }
        self.threads = self.threads.saturating_add(other.threads);
        self.images += other.images;
        self.simulated |= other.simulated;
        self.stop_unix_ns = self.stop_unix_ns.max(other.stop_unix_ns);
        self.wall_ns = self.stop_unix_ns.saturating_sub(self.start_unix_ns);
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
            self.hangs = other.hangs;
        }
        clipped
    }

    /// The share of its steady-state time the process spent waiting for the GPU.
    pub fn wait_share(&self) -> f64 {
        self.blocked_ns as f64 / self.steady_ns.max(1) as f64
    }

    /// The CUPTI activity of each of this process's devices that has one.
    pub fn activities(&self) -> impl Iterator<Item = &Activity> {
        (self.gpu.iter().flat_map(|g| &g.devices)).filter_map(|d| d.activity.as_ref())
    }

    /// GPU time of this process's NCCL kernels (CUPTI), None without CUPTI activity.
    pub fn nccl_kernel_ns(&self) -> Option<u64> {
        let activities: Vec<&Activity> = self.activities().collect();
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
    /// Python call sites of the calls that blocked the host, over all processes: a site
    /// seen by several processes (the same function, cause and stack) is summed.
    pub call_sites: Vec<CallSite>,
}

impl Profile {
    /// One dump's profile. It takes the dump, so that its larger parts (the GPU section,
    /// the names looked up) move rather than being copied.
    pub fn from_dump(path: &Path, d: Dump) -> Profile {
        let mut p = Profile::default();
        let eager = d
            .process
            .cuda_env
            .iter()
            .any(|(k, v)| k == "CUDA_MODULE_LOADING" && v.eq_ignore_ascii_case("EAGER"));
        let eager_context_ns = if eager {
            total(
                d.apis
                    .iter()
                    .filter(|a| CONTEXT_APIS.contains(&base_name(&a.symbol)))
                    .map(|a| a.total_ns),
            )
        } else {
            0
        };
        let active_ns = d.stop_unix_ns.saturating_sub(match d.first_call_unix_ns {
            0 => d.start_unix_ns,
            first => first,
        });
        p.processes.push(ProcessInfo {
            path: path.to_path_buf(),
            pid: d.process.pid,
            host: d.process.host,
            exe: d.process.exe,
            // Dumps written before the shim redacted secrets still hold them. Each argument
            // is cut already (`parse_dump`); any number of them is cut to one string's size.
            cmdline: cut_args(redact_cmdline(&d.process.cmdline)),
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
            eager_context_ns,
            blocked_ns: 0,
            launches: 0,
            copied_bytes: 0,
            unrecorded_calls: d.unrecorded_calls,
            gpu: d.gpu.map(|mut g| {
                crate::analysis::kernels::demangle_names(&mut g);
                Box::new(g)
            }),
            run_token: d.process.run_token,
            timeline: d.timeline.map(Box::new),
            hangs: d.hangs,
            simulated: d.simulated,
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
        p.call_sites = d.call_sites.map(|c| c.sites).unwrap_or_default();
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
                if let Some(op) = &c.last_op {
                    mine.last_ops.insert(c.operations, op.clone());
                }
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
        for site in other.call_sites {
            match self
                .call_sites
                .iter_mut()
                .find(|s| (&s.api, s.cause, &s.frames) == (&site.api, site.cause, &site.frames))
            {
                Some(mine) => {
                    *clipped |= add_count(&mut mine.calls, site.calls)
                        | add_count(&mut mine.blocked_ns, site.blocked_ns);
                    mine.max_ns = mine.max_ns.max(site.max_ns);
                }
                None => self.call_sites.push(site),
            }
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
            mine.last_ops.extend(c.last_ops);
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

    /// Calls the shim forwarded without recording them, summed over the processes.
    pub fn unrecorded_calls(&self) -> u64 {
        total(self.processes.iter().map(|p| p.unrecorded_calls))
    }

    /// Whether any process called the fake driver: then the report's figures are simulated.
    pub fn simulated(&self) -> bool {
        self.processes.iter().any(|p| p.simulated)
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

/// The calls that create a context (base names).
pub const CONTEXT_APIS: &[&str] = &["cuCtxCreate", "cuDevicePrimaryCtxRetain"];

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
            let mut p = crate::analysis::profile::synthetic::run(1.0).build();
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
}

/// Synthetic profiles for the rules' unit tests.
#[cfg(test)]
pub mod synthetic {
    use crate::analysis::profile::{Latency, ProcessInfo, Profile};
    use gpuspy_format::{Direction, HostKind, SyncCause};

    pub struct Builder(Profile);

    /// One process whose first driver call came `active_s` seconds before its dump.
    pub fn run(active_s: f64) -> Builder {
        let mut p = Profile::default();
        p.processes.push(ProcessInfo {
            path: "synthetic.json".into(),
            pid: 1,
            host: "test".into(),
            exe: "test".into(),
            cmdline: vec![],
            start_unix_ns: 0,
            stop_unix_ns: (active_s * 1e9) as u64,
            wall_ns: (active_s * 1e9) as u64,
            active_ns: (active_s * 1e9) as u64,
            driver_ns: 0,
            calls: 0,
            threads: 1,
            complete: true,
            ended_by: None,
            image: 0,
            images: 1,
            rank: None,
            steady_ns: (active_s * 1e9) as u64,
            eager_context_ns: 0,
            blocked_ns: 0,
            launches: 0,
            copied_bytes: 0,
            unrecorded_calls: 0,
            gpu: None,
            run_token: None,
            timeline: None,
            hangs: Vec::new(),
            simulated: false,
        });
        Builder(p)
    }

    fn latency(calls: u64, total_ns: u64) -> Latency {
        let mean = total_ns.checked_div(calls).unwrap_or(0);
        let mut l = Latency {
            calls,
            total_ns,
            max_ns: mean,
            ..Default::default()
        };
        if calls > 0 {
            l.hist = gpuspy_format::Histogram(vec![(
                gpuspy_format::hist::bucket_index(mean) as u32,
                calls,
            )]);
        }
        l
    }

    impl Builder {
        /// `calls` calls of `api` taking `total_ms` in all, `bytes` named.
        pub fn api(mut self, api: &str, calls: u64, total_ms: f64, bytes: u64) -> Builder {
            let entry = self.0.apis.entry(api.to_string()).or_default();
            entry.latency = latency(calls, (total_ms * 1e6) as u64);
            entry.bytes = bytes;
            entry.add_symbol(api, calls);
            self
        }

        pub fn sync(mut self, cause: SyncCause, calls: u64, total_ms: f64) -> Builder {
            self.0
                .syncs
                .insert(cause, latency(calls, (total_ms * 1e6) as u64));
            self
        }

        pub fn copy(mut self, dir: Direction, host: HostKind, calls: u64, bytes: u64) -> Builder {
            self.0.copies.insert((dir, host), (calls, bytes));
            self
        }

        /// Adds a rank: a process with its own steady time and time blocked in syncs.
        pub fn rank(mut self, rank: u32, steady_s: f64, blocked_s: f64) -> Builder {
            let mut p = self.0.processes[0].clone();
            p.rank = Some(rank);
            p.pid = 100 + rank;
            p.steady_ns = (steady_s * 1e9) as u64;
            p.blocked_ns = (blocked_s * 1e9) as u64;
            self.0.processes.push(p);
            self
        }

        /// GPU-side data for the (first) process.
        pub fn gpu(mut self, gpu: gpuspy_format::gpu::Gpu) -> Builder {
            self.0.processes[0].gpu = Some(Box::new(gpu));
            self
        }

        pub fn build(self) -> Profile {
            self.0
        }
    }
}
