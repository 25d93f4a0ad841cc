//! The report, the third stage of the pipeline (docs/design.md): one typed value holding
//! everything any view shows, built once from the analysed profile. `report --json` is this
//! value serialised (schema: docs/report-json.md); the text report formats the same value.
//! A renderer reads only this type: a figure it needs and cannot find here belongs here,
//! computed in `Report::new`, not in the renderer.

use crate::analysis::analyse::{rank_imbalance, rank_verdicts, Analysed, BusyBase, Imbalance, Job};
use crate::analysis::collectives::{collectives, link_peak};
use crate::analysis::diagnose::LayerStatus;
use crate::analysis::gpm::{GpmShares, GpuUse};
use crate::analysis::phases::{
    IdleKind, Phase, PhaseCopies, PhaseKind, RecordsMissing, Startup, SteadyState, Step,
    HOST_BLOCKED_CAUSES,
};
use crate::analysis::profile::{Api, Latency, ProcessInfo};
use crate::analysis::rule::Finding;
use crate::analysis::runs::{runs, Run};
use crate::analysis::timelines::{timelines, Timelines};
use crate::units::percent;
use gpuspy_format::gpu::{Device, Gpu};
use gpuspy_format::{Direction, Ending, HostKind, SyncCause};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

/// The version of the report's JSON schema. Raised when a key changes meaning or goes
/// away; new keys do not raise it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct Report<'a> {
    pub schema_version: u32,
    /// Some process called the fake driver (`gpuspy demo`, tools/fakecuda): no GPU measured
    /// these figures. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// The runs the dumps come from, earliest first; more than one when a directory held
    /// several (`runs`).
    pub runs: Vec<Run>,
    /// The earliest process start, Unix ns: the origin of every phase's `start_ns` and
    /// `end_ns`.
    pub start_unix_ns: u64,
    /// The job's phases (empty for dumps without a timeline).
    pub phases: Vec<PhaseRow>,
    /// The start-up of the process whose start-up took longest.
    pub startup: Option<Startup>,
    /// The job's steady state, where the timelines reached one.
    pub steady_state: Option<SteadyRow>,
    /// Host time blocked in syncs over the steady state: the figure `gpuspy check`'s
    /// `max_blocked_share` gates and the text report shows.
    pub host_blocked: HostBlocked,
    /// The steady state's GPU idle share where it is large and no warning explains it.
    pub unexplained_idle: Option<f64>,
    /// The verdict's sentence where no warning gives one (`calm_verdict`), without the
    /// "Verdict: " prefix: the text report and the page show this one wording.
    pub verdict_text: Option<String>,
    pub processes: Vec<ProcessRow>,
    pub gpu: Vec<GpuRow<'a>>,
    /// The job's span: earliest start to latest dump.
    pub wall_ns: u64,
    pub process_wall_ns: u64,
    pub driver_ns: u64,
    /// `driver_ns` over `process_wall_ns`; None when the latter is 0.
    pub driver_share: Option<f64>,
    /// Threads summed over the processes.
    pub threads: u32,
    pub saturated: bool,
    /// Calls forwarded without being recorded, summed over the processes.
    pub unrecorded_calls: u64,
    /// Dumps from a periodic flush (process killed or still running).
    pub incomplete_processes: usize,
    /// Calls the processes' watchdogs found in flight past `GPUSPY_HANG_S`, longest first.
    pub hangs: Vec<crate::analysis::hangs::Hang>,
    /// Where some processes hung: the collectives some members of a communicator wait in
    /// and the members that never entered them.
    pub hang_waits: Vec<crate::analysis::hangs::Wait>,
    pub syncs: Vec<SyncRow>,
    pub copies: Vec<CopyRow>,
    pub nccl: Nccl,
    pub rank_imbalance: Vec<Imbalance>,
    pub rank_verdicts: RankVerdicts,
    pub active_ns: u64,
    pub steady_ns: u64,
    pub verdict: Option<&'static str>,
    /// No warning and the GPU busy (analyse::GPU_BOUND_IDLE).
    pub gpu_bound: bool,
    pub gpu_busy_share: Option<f64>,
    /// What `gpu_busy_share` is a share of: `steady-state`, `steady-state-by-nvml` or
    /// `working-span`.
    pub gpu_busy_of: Option<BusyBase>,
    /// How much of the GPU the kernels used, from GPM (analyse::Job::gpu_use).
    pub gpu_use: Option<GpuUse>,
    pub findings: Vec<Finding>,
    pub layers: Vec<LayerStatus>,
    /// Largest `total_ns` first.
    pub apis: Apis<'a>,
    pub unwrapped_symbols: &'a [String],
    /// The time axis, plot-ready (src/analysis/timelines.rs); None when no dump has one.
    pub timelines: Option<Timelines>,
    /// The program's NVTX ranges as phases see them; None without NVTX (src/analysis/nvtx.rs).
    pub nvtx: Option<crate::analysis::nvtx::Summary>,
}

/// The per-API rows, made as they are written or read (`rows`) rather than held: a hostile
/// dump can hold as many APIs as it likes, and a row costs several times its record.
pub struct Apis<'a> {
    by_total_time: Vec<(&'a String, &'a Api)>,
    driver_ns: u64,
    process_wall_ns: u64,
}

impl<'a> Apis<'a> {
    pub fn is_empty(&self) -> bool {
        self.by_total_time.is_empty()
    }

    pub fn rows(&self) -> impl Iterator<Item = ApiRow<'a>> + '_ {
        self.by_total_time.iter().map(|&(name, api)| ApiRow {
            api: name,
            latency: LatencyRow::of(&api.latency),
            errors: api.errors(),
            nested: api.nested,
            bytes: api.bytes,
            results: api
                .results
                .iter()
                .map(|(&code, &count)| ResultRow { code, count })
                .collect(),
            symbols: api
                .symbols
                .iter()
                .map(|(symbol, count)| SymbolRow {
                    symbol,
                    count: *count,
                })
                .collect(),
            driver_share: share(api.latency.total_ns, self.driver_ns),
            wall_share: share(api.latency.total_ns, self.process_wall_ns),
        })
    }
}

impl Serialize for Apis<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.rows())
    }
}

#[derive(Serialize)]
pub struct ProcessRow {
    pub path: std::path::PathBuf,
    pub pid: u32,
    pub host: String,
    pub exe: String,
    pub cmdline: Vec<String>,
    pub wall_ns: u64,
    pub driver_ns: u64,
    pub calls: u64,
    pub threads: u32,
    pub complete: bool,
    pub ended_by: Option<Ending>,
    pub images: u32,
    pub rank: Option<u32>,
    pub steady_ns: u64,
    pub blocked_ns: u64,
    pub wait_share: f64,
    pub nccl_kernel_ns: Option<u64>,
    /// `nccl_kernel_ns` over `steady_ns`, rounded to 0.1 %.
    pub nccl_share: Option<f64>,
    pub launches: u64,
    pub unrecorded_calls: u64,
    pub verdict: Option<&'static str>,
    pub start_unix_ns: u64,
    /// Its own phases (empty without a timeline), times from the report's `start_unix_ns`.
    pub phases: Vec<PhaseRow>,
    pub startup: Option<Startup>,
}

/// One phase, its times in ns from the report's `start_unix_ns`.
#[derive(Serialize)]
pub struct PhaseRow {
    pub kind: PhaseKind,
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its one-off copies (a model moved, a checkpoint), outside the steady state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies: Option<PhaseCopies>,
}

impl PhaseRow {
    fn of(p: &Phase, origin: u64) -> PhaseRow {
        PhaseRow {
            kind: p.kind,
            start_ns: p.start_unix_ns.saturating_sub(origin),
            end_ns: p.end_unix_ns.saturating_sub(origin),
            name: p.name.clone(),
            copies: p.copies,
        }
    }
}

/// What the steady state was made of, and where its GPU idle time went.
#[derive(Serialize)]
pub struct SteadyRow {
    /// Steady time summed over the processes.
    pub ns: u64,
    pub launches: u64,
    pub launches_per_s: f64,
    /// Host time blocked in explicit syncs and sync copies, and its share of `ns`.
    pub blocked_ns: u64,
    pub blocked_share: f64,
    /// Device time of the steady state with CUPTI windows (summed over devices, what
    /// sampling recorded brought to it), the busy part, the transfer part (a copy ran, no
    /// kernel did), and the idle part's share; null without the GPU side.
    pub gpu_ns: Option<u64>,
    pub gpu_busy_ns: Option<u64>,
    pub gpu_transfer_ns: Option<u64>,
    pub gpu_transfer_share: Option<f64>,
    pub gpu_idle_share: Option<f64>,
    /// Idle time per cause, largest first.
    pub idle: Vec<IdleRow>,
    pub step: Option<Step>,
    /// The share of a device's kernel time whose CUPTI records came late, where it left
    /// the GPU side out (`SteadyState::records_late`), else null.
    pub gpu_records_late: Option<f64>,
    /// CUPTI's busy share and GPM's SM activity over the steady state, where the gap between
    /// them says records are missing (`SteadyState::records_missing`), else null.
    pub gpu_records_missing: Option<RecordsMissing>,
}

/// Host time blocked in explicit syncs and sync copies (`HOST_BLOCKED_CAUSES`), and what
/// it is a share of: the timelines' steady state where they reached one (the
/// `steady_state` row's figures), else the active time less start-up calls.
#[derive(Serialize)]
pub struct HostBlocked {
    pub ns: u64,
    pub steady_ns: u64,
    pub share: f64,
}

impl HostBlocked {
    fn of(p: &crate::analysis::profile::Profile, steady: Option<&SteadyRow>) -> HostBlocked {
        match steady {
            Some(s) => HostBlocked {
                ns: s.blocked_ns,
                steady_ns: s.ns,
                share: s.blocked_share,
            },
            None => {
                let steady_ns = p.steady_ns();
                let ns = crate::analysis::profile::total(
                    HOST_BLOCKED_CAUSES
                        .iter()
                        .filter_map(|&c| p.sync(c))
                        .map(|l| l.total_ns),
                )
                .min(steady_ns);
                HostBlocked {
                    ns,
                    steady_ns,
                    share: crate::units::share(ns, steady_ns),
                }
            }
        }
    }
}

#[derive(Serialize)]
pub struct IdleRow {
    pub cause: IdleKind,
    /// The rule whose fix gives it back.
    pub rule: Option<&'static str>,
    pub ns: u64,
    /// `ns` over `gpu_ns`.
    pub share: f64,
}

fn steady_row(s: &SteadyState) -> SteadyRow {
    let blocked = s.host_blocked_ns();
    let g = s.gpu.as_ref();
    let mut idle: Vec<IdleRow> = g
        .map(|g| {
            g.idle
                .iter()
                .map(|(&cause, &ns)| IdleRow {
                    cause,
                    rule: cause.rule(),
                    ns,
                    share: g.share(cause),
                })
                .collect()
        })
        .unwrap_or_default();
    idle.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.cause.cmp(&b.cause)));
    SteadyRow {
        ns: s.ns,
        launches: s.host.launches,
        launches_per_s: s.per_s(s.host.launches).round(),
        blocked_ns: blocked,
        blocked_share: crate::units::share(blocked, s.ns),
        gpu_ns: g.map(|g| g.ns),
        gpu_busy_ns: g.map(|g| g.busy_ns),
        gpu_transfer_ns: g.map(|g| g.transfer_ns),
        gpu_transfer_share: g.map(|g| crate::units::share(g.transfer_ns, g.ns)),
        gpu_idle_share: g.map(|g| crate::units::share(g.idle_ns(), g.ns)),
        idle,
        step: s.step.clone(),
        gpu_records_late: s.records_late,
        gpu_records_missing: s.records_missing,
    }
}

#[derive(Serialize)]
pub struct LatencyRow {
    pub count: u64,
    pub total_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// The latency histogram's non-empty buckets: `[low_ns, high_ns, count]`, by latency.
    pub buckets: Vec<[u64; 3]>,
}

impl LatencyRow {
    pub fn of(l: &Latency) -> LatencyRow {
        LatencyRow {
            count: l.calls,
            total_ns: l.total_ns,
            p50_ns: l.quantile(0.50),
            p90_ns: l.quantile(0.90),
            p99_ns: l.quantile(0.99),
            max_ns: l.max_ns,
            buckets: l
                .hist
                .0
                .iter()
                .map(|&(i, count)| {
                    let (low, high) = gpuspy_format::hist::bucket_bounds(i as usize);
                    [low, high, count]
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
pub struct ApiRow<'a> {
    pub api: &'a str,
    #[serde(flatten)]
    pub latency: LatencyRow,
    pub errors: u64,
    pub nested: u64,
    pub bytes: u64,
    pub results: Vec<ResultRow>,
    pub symbols: Vec<SymbolRow<'a>>,
    /// `total_ns` over the job's time inside the driver, and over `process_wall_ns`.
    pub driver_share: Option<f64>,
    pub wall_share: Option<f64>,
}

#[derive(Serialize)]
pub struct ResultRow {
    pub code: u32,
    pub count: u64,
}

#[derive(Serialize)]
pub struct SymbolRow<'a> {
    pub symbol: &'a str,
    pub count: u64,
}

#[derive(Serialize)]
pub struct SyncRow {
    pub cause: SyncCause,
    #[serde(flatten)]
    pub latency: LatencyRow,
    /// `total_ns` over `process_wall_ns`.
    pub wall_share: Option<f64>,
}

#[derive(Serialize)]
pub struct CopyRow {
    pub direction: Direction,
    pub host: HostKind,
    pub count: u64,
    pub bytes: u64,
}

#[derive(Serialize)]
pub struct Nccl {
    pub ops: Vec<NcclOpRow>,
    pub collectives: Vec<CollectiveRow>,
    pub link_peak: Option<LinkPeak>,
    pub communicators: Vec<CommunicatorRow>,
}

#[derive(Serialize)]
pub struct NcclOpRow {
    pub op: String,
    pub datatype: String,
    pub calls: u64,
    pub bytes: u64,
}

#[derive(Serialize)]
pub struct CollectiveRow {
    pub op: String,
    pub kernels: u64,
    pub kernel_ns: u64,
    pub least_rank_kernel_ns: u64,
    pub bytes: u64,
    pub ranks: u32,
    pub algbw_bytes_per_s: Option<f64>,
    pub busbw_bytes_per_s: Option<f64>,
    /// `busbw_bytes_per_s` over the link peak.
    pub busbw_peak_share: Option<f64>,
    pub saturated: bool,
}

#[derive(Serialize)]
pub struct LinkPeak {
    pub link: &'static str,
    pub bytes_per_s: f64,
}

#[derive(Serialize)]
pub struct CommunicatorRow {
    pub key: String,
    pub operations: u64,
    pub bytes: u64,
    pub members_seen: usize,
    pub disagreement: Option<Disagreement>,
}

#[derive(Serialize)]
pub struct Disagreement {
    pub common_operations: u64,
    pub members: Vec<MemberOps>,
}

#[derive(Serialize)]
pub struct MemberOps {
    pub member: String,
    pub operations: u64,
}

#[derive(Serialize)]
pub struct RankVerdicts {
    pub common: Option<&'static str>,
    pub differ: Vec<RankVerdict>,
}

#[derive(Serialize)]
pub struct RankVerdict {
    pub rank: u32,
    pub verdict: Option<&'static str>,
}

/// What every view of a simulated run says first (`Report::simulated`).
pub const SIMULATED: &str =
    "SIMULATED: these figures come from gpuspy's fake CUDA driver; no GPU measured them";

/// The SIMULATED line, first among a gate's or a comparison's notes, when any of the runs
/// called the fake driver: no GPU measured what they judge.
pub fn simulated_note<'a>(mut runs: impl Iterator<Item = &'a Analysed>) -> Option<String> {
    runs.any(|a| a.profile.simulated())
        .then(|| SIMULATED.to_string())
}

/// What the text report's GPU section and the page's say when no dump has a GPU section.
pub const NO_GPU_DATA: &str = "no GPU-side data in the dumps (written by a shim without NVML/CUPTI support, or the process never initialised CUDA)";

/// One process's GPU-side data: its dump's `gpu` object with `pid` and `rank` added, and
/// the figures drawn from each device (`DeviceFigures`) added to that device. Serialised
/// as one object, so the dump's keys keep their place (docs/report-json.md).
pub struct GpuRow<'a> {
    pub pid: u32,
    pub rank: Option<u32>,
    pub gpu: &'a Gpu,
    /// One per `gpu.devices`, in order.
    pub devices: Vec<DeviceFigures>,
}

/// What the report draws from one device's data.
#[derive(Serialize)]
pub struct DeviceFigures {
    /// `analyse::device_warnings`.
    pub warnings: Vec<String>,
    /// The CUDA driver version as `major.minor`.
    pub cuda_version: Option<String>,
    /// Merged into the device's `activity`.
    #[serde(skip)]
    pub activity: Option<ActivityFigures>,
}

#[derive(Serialize)]
pub struct ActivityFigures {
    pub busy_share: Option<f64>,
    /// What the SMs did over the same working span, from GPM; null without GPM.
    #[serde(flatten)]
    pub gpm: GpmShares,
    /// Kernels in grids of fewer blocks than the device has SMs (`kernels::small_grid`),
    /// and their time; None without the SM count.
    pub small_grid_kernels: Option<u64>,
    pub small_grid_ns: Option<u64>,
    /// The activity span less pauses of 1 s or more.
    pub working_span_ns: u64,
    pub pauses: u64,
    pub pause_ns: u64,
    pub gaps: Option<Gaps>,
    /// Per `copies` entry, merged into it.
    #[serde(skip)]
    pub copies: Vec<CopyFigures>,
    /// Per `top_kernels` entry, its share of `kernel_ns`, merged into it as `share`.
    #[serde(skip)]
    pub top_kernel_shares: Vec<Option<f64>>,
}

/// The idle gaps between kernels: how many, two quantiles and the upper bound of the
/// longest's bucket.
#[derive(Serialize)]
pub struct Gaps {
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub longest_below_ns: u64,
}

#[derive(Serialize)]
pub struct CopyFigures {
    pub bytes_per_s: Option<f64>,
    /// The rate over the PCIe link's peak, for host-device copies of 1 MiB or more on
    /// average (smaller ones are bound by latency).
    pub pcie_peak_share: Option<f64>,
}

impl Serialize for GpuRow<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = serde_json::to_value(self.gpu).map_err(serde::ser::Error::custom)?;
        v["pid"] = json!(self.pid);
        v["rank"] = json!(self.rank);
        let merge = |into: &mut Value, from: Value| {
            if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
                into.extend(from);
            }
        };
        if let Some(devices) = v["devices"].as_array_mut() {
            for (dv, figures) in devices.iter_mut().zip(&self.devices) {
                merge(dv, json!(figures));
                let Some(a) = &figures.activity else { continue };
                merge(&mut dv["activity"], json!(a));
                if let Some(copies) = dv["activity"]["copies"].as_array_mut() {
                    for (cv, c) in copies.iter_mut().zip(&a.copies) {
                        merge(cv, json!(c));
                    }
                }
                if let Some(kernels) = dv["activity"]["top_kernels"].as_array_mut() {
                    for (kv, share) in kernels.iter_mut().zip(&a.top_kernel_shares) {
                        kv["share"] = json!(share);
                    }
                }
            }
        }
        v.serialize(s)
    }
}

/// `part` over `whole`, None when `whole` is 0.
fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

impl<'a> Report<'a> {
    pub fn new(a: &'a Analysed) -> Report<'a> {
        let p = &a.profile;
        let d = &a.job.diagnosis;
        let wall = p.process_wall_ns();
        let driver = p.driver_ns();
        let (common, differ) = rank_verdicts(&a.processes);
        let peak = link_peak(p);
        let origin = p
            .processes
            .iter()
            .map(|pr| pr.start_unix_ns)
            .min()
            .unwrap_or(0);
        let axis = a.job.time_axis.as_ref();
        let process_axis = |i: usize| axis.and_then(|x| x.processes.get(i)?.as_ref());
        let steady_state = axis.and_then(|x| x.steady.as_ref()).map(steady_row);
        let verdict_text = calm_verdict(&a.job, steady_state.as_ref());
        let host_blocked = HostBlocked::of(p, steady_state.as_ref());
        Report {
            schema_version: SCHEMA_VERSION,
            simulated: p.simulated(),
            runs: runs(p),
            start_unix_ns: origin,
            phases: axis.map_or_else(Vec::new, |x| {
                x.phases.iter().map(|ph| PhaseRow::of(ph, origin)).collect()
            }),
            // The longest start-up of the processes the job is judged by.
            startup: axis.and_then(|x| {
                x.judged()
                    .map(|(_, pa)| &pa.startup)
                    .max_by_key(|st| st.ns)
                    .cloned()
            }),
            steady_state,
            host_blocked,
            unexplained_idle: a.job.unexplained_idle,
            verdict_text,
            processes: p
                .processes
                .iter()
                .enumerate()
                .map(|(i, pr)| {
                    let mut row = process_row(pr, a.process_verdict(pr).and_then(|v| v.verdict));
                    if let Some(pa) = process_axis(i) {
                        row.phases = pa
                            .phases
                            .iter()
                            .map(|ph| PhaseRow::of(ph, origin))
                            .collect();
                        row.startup = Some(pa.startup.clone());
                    }
                    row
                })
                .collect(),
            gpu: p
                .processes
                .iter()
                .filter_map(|pr| {
                    let g = pr.gpu.as_deref()?;
                    Some(GpuRow {
                        pid: pr.pid,
                        rank: pr.rank,
                        gpu: g,
                        devices: g.devices.iter().map(device_figures).collect(),
                    })
                })
                .collect(),
            wall_ns: p.span_ns(),
            process_wall_ns: wall,
            driver_ns: driver,
            driver_share: share(driver, wall),
            threads: p
                .processes
                .iter()
                .fold(0u32, |n, pr| n.saturating_add(pr.threads)),
            saturated: p.saturated,
            unrecorded_calls: p.unrecorded_calls(),
            incomplete_processes: p.processes.iter().filter(|pr| !pr.complete).count(),
            hangs: crate::analysis::hangs::hangs(p),
            hang_waits: crate::analysis::hangs::waits(p),
            syncs: p
                .syncs
                .iter()
                .map(|(&cause, l)| SyncRow {
                    cause,
                    latency: LatencyRow::of(l),
                    wall_share: share(l.total_ns, wall),
                })
                .collect(),
            copies: p
                .copies
                .iter()
                .map(|(&(direction, host), &(count, bytes))| CopyRow {
                    direction,
                    host,
                    count,
                    bytes,
                })
                .collect(),
            nccl: Nccl {
                ops: p
                    .nccl_ops
                    .iter()
                    .map(|((op, datatype), &(calls, bytes))| NcclOpRow {
                        op: op.clone(),
                        datatype: datatype.clone(),
                        calls,
                        bytes,
                    })
                    .collect(),
                collectives: collectives(p)
                    .into_iter()
                    .map(|c| CollectiveRow {
                        busbw_peak_share: c.busbw.zip(peak).map(|(bus, (bps, _))| bus / bps),
                        op: c.op,
                        kernels: c.kernels,
                        kernel_ns: c.kernel_ns,
                        least_rank_kernel_ns: c.least_rank_kernel_ns,
                        bytes: c.bytes,
                        ranks: c.ranks,
                        algbw_bytes_per_s: c.algbw,
                        busbw_bytes_per_s: c.busbw,
                        saturated: c.saturated,
                    })
                    .collect(),
                link_peak: peak.map(|(bytes_per_s, link)| LinkPeak { link, bytes_per_s }),
                communicators: p
                    .communicators
                    .iter()
                    .map(|(key, c)| CommunicatorRow {
                        key: key.clone(),
                        operations: c.operations(),
                        bytes: c.bytes,
                        members_seen: c.members.len(),
                        disagreement: c.disagreement().map(|(common, odd)| Disagreement {
                            common_operations: common,
                            members: odd
                                .into_iter()
                                .map(|(member, operations)| MemberOps { member, operations })
                                .collect(),
                        }),
                    })
                    .collect(),
            },
            rank_imbalance: rank_imbalance(p),
            rank_verdicts: RankVerdicts {
                common,
                differ: differ
                    .into_iter()
                    .map(|(rank, verdict)| RankVerdict { rank, verdict })
                    .collect(),
            },
            active_ns: p.active_ns(),
            steady_ns: p.steady_ns(),
            verdict: d.verdict().map(|f| f.id),
            gpu_bound: a.job.gpu_bound,
            gpu_busy_share: a.job.gpu_busy_share,
            gpu_busy_of: a.job.gpu_busy_of,
            gpu_use: a.job.gpu_use,
            findings: d.findings.clone(),
            layers: d.layers.clone(),
            apis: Apis {
                by_total_time: p.by_total_time(),
                driver_ns: driver,
                process_wall_ns: wall,
            },
            unwrapped_symbols: &p.unwrapped,
            timelines: timelines(&p.processes),
            nvtx: axis.and_then(|x| {
                let step = x.steady.as_ref().and_then(|s| s.step.as_ref());
                crate::analysis::nvtx::summary(p, &x.phases, step)
            }),
        }
    }
}

/// The verdict where no warning gives one; None where one does.
fn calm_verdict(job: &Job, steady: Option<&SteadyRow>) -> Option<String> {
    if job.diagnosis.verdict().is_some() {
        return None;
    }
    let of = job.gpu_busy_of.map_or("", BusyBase::describe);
    Some(match (job.unexplained_idle, job.gpu_busy_share) {
        (Some(idle), _) => idle_verdict(idle, steady.map_or(&[], |s| &s.idle)),
        (None, Some(busy)) if job.gpu_bound => format!(
            "GPU-bound. Kernels ran {} of {of} and nothing blocks: only faster (or fewer) kernels make this run faster.",
            percent(Some(busy))
        ),
        (None, Some(busy)) => format!(
            "no blocking problem found. Kernels ran {} of {of}.",
            percent(Some(busy))
        ),
        (None, None) => "no blocking problem in the host-side data. The dumps have no GPU busy time (see the GPU section), so a GPU-bound run cannot be confirmed.".into(),
    })
}

/// A large idle share no warning explains. Where the timelines attributed some of it, its
/// causes are listed: calling it "not identified" would contradict the steady-state line.
fn idle_verdict(idle: f64, causes: &[IdleRow]) -> String {
    let idle = percent(Some(idle));
    if causes.iter().all(|c| c.cause == IdleKind::Unknown) {
        return format!("GPU idle {idle} of the steady state; cause not identified.");
    }
    let causes: Vec<String> = causes
        .iter()
        .map(|c| format!("{} {}", c.cause.describe(), percent(Some(c.share))))
        .collect();
    format!(
        "GPU idle {idle} of the steady state; no rule explains it ({} of it).",
        causes.join(", ")
    )
}

fn process_row(pr: &ProcessInfo, verdict: Option<&'static str>) -> ProcessRow {
    let nccl_kernel_ns = pr.nccl_kernel_ns();
    ProcessRow {
        path: pr.path.clone(),
        pid: pr.pid,
        host: pr.host.clone(),
        exe: pr.exe.clone(),
        cmdline: pr.cmdline.clone(),
        wall_ns: pr.wall_ns,
        driver_ns: pr.driver_ns,
        calls: pr.calls,
        threads: pr.threads,
        complete: pr.complete,
        ended_by: pr.ended_by,
        images: pr.images,
        rank: pr.rank,
        steady_ns: pr.steady_ns,
        blocked_ns: pr.blocked_ns,
        wait_share: pr.wait_share(),
        nccl_kernel_ns,
        nccl_share: nccl_kernel_ns.map(|ns| crate::units::share(ns, pr.steady_ns)),
        launches: pr.launches,
        unrecorded_calls: pr.unrecorded_calls,
        verdict,
        start_unix_ns: pr.start_unix_ns,
        phases: Vec::new(),
        startup: None,
    }
}

fn device_figures(dev: &Device) -> DeviceFigures {
    let cuda = dev.facts.as_ref().and_then(|f| f.cuda_driver_version);
    let pcie_peak = dev.facts.as_ref().and_then(|f| f.pcie.peak_bytes_per_s());
    DeviceFigures {
        warnings: crate::analysis::analyse::device_warnings(dev),
        cuda_version: cuda.map(|v| format!("{}.{}", v / 1000, v % 1000 / 10)),
        activity: dev.activity.as_ref().map(|a| {
            let (pauses, pause_ns) = a.pauses();
            let h = &a.gap_hist;
            let gaps = (h.count() > 0).then(|| {
                let max = h.0.last().map_or(0, |&(i, _)| {
                    gpuspy_format::hist::bucket_bounds(i as usize).1
                });
                Gaps {
                    count: h.count(),
                    p50_ns: h.quantile(0.5, max),
                    p99_ns: h.quantile(0.99, max),
                    longest_below_ns: max,
                }
            });
            let small_grid = dev
                .facts
                .as_ref()
                .and_then(|f| f.sm_count)
                .map(|sms| crate::analysis::kernels::small_grid(a, sms));
            ActivityFigures {
                busy_share: a.busy_share(),
                gpm: crate::analysis::gpm::device_shares(dev).unwrap_or_default(),
                small_grid_kernels: small_grid.map(|s| s.0),
                small_grid_ns: small_grid.map(|s| s.1),
                working_span_ns: a.working_span_ns(),
                pauses,
                pause_ns,
                gaps,
                copies: a
                    .copies
                    .iter()
                    .map(|c| {
                        let large = c.bytes >= c.count.saturating_mul(1 << 20);
                        let host = matches!(c.kind.as_str(), "HtoD" | "DtoH");
                        CopyFigures {
                            bytes_per_s: c.bytes_per_s(),
                            pcie_peak_share: c
                                .bytes_per_s()
                                .zip(pcie_peak)
                                .filter(|_| large && host)
                                .map(|(r, peak)| r / peak),
                        }
                    })
                    .collect(),
                top_kernel_shares: a
                    .top_kernels
                    .iter()
                    .map(|k| share(k.total_ns, a.kernel_ns))
                    .collect(),
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::phases::{IdleKind, SteadyGpu};
    use std::collections::BTreeMap;

    #[test]
    fn the_steady_row_gives_each_part_of_the_device_time_its_share() {
        let s = SteadyState {
            ns: 100,
            gpu: Some(SteadyGpu {
                ns: 100,
                busy_ns: 20,
                transfer_ns: 30,
                idle: BTreeMap::from([(IdleKind::Host, 50)]),
                ..SteadyGpu::default()
            }),
            ..SteadyState::default()
        };
        let row = steady_row(&s);
        assert_eq!((row.gpu_ns, row.gpu_busy_ns), (Some(100), Some(20)));
        assert_eq!(
            (row.gpu_transfer_ns, row.gpu_transfer_share),
            (Some(30), Some(0.3))
        );
        assert_eq!(row.gpu_idle_share, Some(0.5));
        assert_eq!(row.idle[0].share, 0.5);
    }

    #[test]
    fn an_unexplained_idle_verdict_lists_the_known_causes_else_says_not_identified() {
        let row = |cause, share| IdleRow {
            cause,
            rule: cause.rule(),
            ns: 0,
            share,
        };
        let known = [
            row(IdleKind::Launch, 0.197),
            row(IdleKind::PageableCopy, 0.049),
            row(IdleKind::Host, 0.026),
            row(IdleKind::Unknown, 0.001),
        ];
        assert_eq!(
            idle_verdict(0.273, &known),
            "GPU idle 27.3 % of the steady state; no rule explains it (launching 19.7 %, pageable copies 4.9 %, host work 2.6 %, unknown 0.1 % of it)."
        );
        let unknown = [row(IdleKind::Unknown, 0.45)];
        for causes in [&unknown[..], &[]] {
            assert_eq!(
                idle_verdict(0.45, causes),
                "GPU idle 45.0 % of the steady state; cause not identified."
            );
        }
    }
}
