//! Rules whose evidence is GPU-side: NVML telemetry (link, clocks, ECC, other processes) and
//! CUPTI activity (busy time, idle gaps, grid sizes, unified-memory faults, NCCL kernels).
//! Where a dump has none (no NVML library, CUPTI off or held by the program's own
//! profiler), the rule says so instead of guessing; the report's GPU section says why.

use crate::diagnose::{Finding, Layer, Outcome, Rule, Severity};
use crate::profile::Profile;
use gpuspy_format::gpu::{Activity, Device, Gauge, Telemetry};
use gpuspy_format::hist;

const NO_FACTS: &str = "needs NVML device facts (none in the dumps; see the GPU section)";
const NO_TELEMETRY: &str = "needs NVML telemetry (none in the dumps; see the GPU section)";
const NO_ACTIVITY: &str = "needs CUPTI activity (none in the dumps; see the GPU section)";

fn span_ns(a: &Activity) -> u64 {
    a.last_unix_ns.saturating_sub(a.first_unix_ns)
}

/// Totals over every device with CUPTI activity: (busy, active, span) in ns.
fn activity_totals(p: &Profile) -> Option<(u64, u64, u64)> {
    let mut any = false;
    let mut t = (0, 0, 0);
    for (_, _, a) in p.gpu_activity() {
        any = true;
        t.0 += a.busy_ns;
        t.1 += a.active_ns;
        t.2 += span_ns(a);
    }
    (any && t.2 > 0).then_some(t)
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

fn telemetries(p: &Profile) -> impl Iterator<Item = (&Device, &Telemetry)> {
    p.gpu_devices()
        .filter_map(|(_, d)| d.telemetry.as_ref().map(|t| (d, t)))
}

/// The PCIe link trained below its maximum.
pub struct PcieLinkDegraded;

impl Rule for PcieLinkDegraded {
    fn id(&self) -> &'static str {
        "pcie-link-degraded"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "The GPU's PCIe link runs below its maximum generation or width, which caps every host-device copy.

Evidence (NVML, read when gpuspy starts): the current and maximum link generation and
width. Impact: the time CUPTI saw host-device copies take, times the share of bandwidth
the narrower link loses. GPUs may lower the link generation while idle to save power, so
a degraded link with no copies is reported for information only.

Fix: reseat the card or move it to a full x16 slot, check the BIOS PCIe settings and
risers, and make sure the link is not held in a power-saving state."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut facts = p
            .gpu_devices()
            .filter_map(|(_, d)| d.facts.as_ref().map(|f| (d, f)))
            .peekable();
        if facts.peek().is_none() {
            return Outcome::NoData(NO_FACTS);
        }
        for (d, f) in facts {
            let l = &f.pcie;
            let (Some(gen), Some(gen_max), Some(width), Some(width_max)) =
                (l.gen_current, l.gen_max, l.width_current, l.width_max)
            else {
                continue;
            };
            if gen >= gen_max && width >= width_max {
                continue;
            }
            let full = gpuspy_format::gpu::PcieLink {
                gen_current: Some(gen_max),
                width_current: Some(width_max),
                ..l.clone()
            };
            let lost = match (l.peak_bytes_per_s(), full.peak_bytes_per_s()) {
                (Some(now), Some(max)) if max > 0.0 => 1.0 - now / max,
                _ => 0.0,
            };
            let (copy_ns, span) = d.activity.as_ref().map_or((0, 0), |a| {
                let host = a
                    .copies
                    .iter()
                    .filter(|c| c.kind == "HtoD" || c.kind == "DtoH")
                    .map(|c| c.ns)
                    .sum();
                (host, span_ns(a))
            });
            let impact = share(copy_ns, span) * lost;
            return Outcome::Found(
                Finding::new(
                    self,
                    impact,
                    format!(
                        "GPU {} link runs at gen {gen} x{width}, below its gen {gen_max} x{width_max}",
                        d.ordinal
                    ),
                    "Reseat the card or use a full x16 slot; check BIOS PCIe settings and risers.",
                )
                .evidence("device", d.ordinal)
                .evidence("gen", gen)
                .evidence("gen_max", gen_max)
                .evidence("width", width)
                .evidence("width_max", width_max)
                .evidence("host_copy_ns", copy_ns),
            );
        }
        Outcome::Clear
    }
}

/// Clock-event reasons that mean the GPU was held back, not merely idle or configured.
const THROTTLE_REASONS: [&str; 5] = [
    "sw-power-cap",
    "hw-slowdown",
    "sw-thermal-slowdown",
    "hw-thermal-slowdown",
    "hw-power-brake-slowdown",
];

/// Clocks held down by thermal or power limits.
pub struct ClocksThrottled;

impl Rule for ClocksThrottled {
    fn id(&self) -> &'static str {
        "clocks-throttled"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "The GPU's SM clock is held below its maximum by thermal or power limits.

Evidence (NVML samples): the share of samples with a power or thermal clock-event reason
active (`sw-power-cap`, `hw-slowdown`, `sw-thermal-slowdown`, `hw-thermal-slowdown`,
`hw-power-brake-slowdown`), and the mean SM clock against its maximum. Impact: the clock
deficit over the throttled samples, weighted by how busy the GPU was (a slower clock only
costs time while kernels run).

Fix: cooling and airflow, the power limit (`nvidia-smi -pl`), persistence mode, and
application clocks where the operator allows them."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let busy = activity_totals(p).map_or(1.0, |(b, _, s)| share(b, s));
        let mut any = false;
        let mut worst: Option<Finding> = None;
        for (d, t) in telemetries(p) {
            any = true;
            if t.samples == 0 {
                continue;
            }
            let throttled: u64 = t
                .clock_events
                .iter()
                .filter(|e| THROTTLE_REASONS.contains(&e.reason.as_str()))
                .map(|e| e.samples)
                .max()
                .unwrap_or(0);
            if throttled == 0 {
                continue;
            }
            let max_clock = d.facts.as_ref().and_then(|f| f.max_sm_clock_mhz);
            let deficit = match (t.sm_clock_mhz, max_clock) {
                (Some(Gauge { mean, .. }), Some(max)) if max > 0 => {
                    (1.0 - mean / f64::from(max)).max(0.0)
                }
                _ => 0.0,
            };
            let throttled_share = share(throttled, t.samples);
            let impact = deficit * busy;
            let reasons: Vec<String> = t
                .clock_events
                .iter()
                .filter(|e| THROTTLE_REASONS.contains(&e.reason.as_str()))
                .map(|e| format!("{} in {} of {} samples", e.reason, e.samples, t.samples))
                .collect();
            let f = Finding::new(
                self,
                impact,
                format!(
                    "GPU {} was clock-throttled in {} of samples ({}); mean SM clock {} below its maximum",
                    d.ordinal,
                    pct(throttled_share),
                    reasons.join(", "),
                    pct(deficit)
                ),
                "Check cooling and the power limit (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE).",
            )
            .evidence("device", d.ordinal)
            .evidence("throttled_samples", throttled)
            .evidence("samples", t.samples)
            .evidence("sm_clock_deficit", deficit);
            if worst.as_ref().is_none_or(|w| w.impact < f.impact) {
                worst = Some(f);
            }
        }
        match (any, worst) {
            (false, _) => Outcome::NoData(NO_TELEMETRY),
            (true, Some(f)) => Outcome::Found(f),
            (true, None) => Outcome::Clear,
        }
    }
}

/// ECC disabled.
pub struct EccOff;

impl Rule for EccOff {
    fn id(&self) -> &'static str {
        "ecc-off"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "ECC is disabled on a GPU that supports it: silent memory errors can corrupt results.

Evidence (NVML): the current ECC mode. A correctness risk, not a speed problem, so the
finding is informational.

Fix: `nvidia-smi -e 1` and a reboot of the GPU, unless the operator chose otherwise."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut modes = p
            .gpu_devices()
            .filter_map(|(_, d)| d.facts.as_ref()?.ecc_enabled.map(|on| (d.ordinal, on)))
            .peekable();
        if modes.peek().is_none() {
            return Outcome::NoData(NO_FACTS);
        }
        match modes.find(|&(_, on)| !on) {
            Some((ordinal, _)) => Outcome::Found(
                Finding::new(
                    self,
                    0.0,
                    format!("ECC is off on GPU {ordinal}"),
                    "nvidia-smi -e 1, then reset the GPU (if the operator agrees).",
                )
                .evidence("device", ordinal),
            ),
            None => Outcome::Clear,
        }
    }
}

/// ECC errors counted during the run.
pub struct EccErrors;

impl Rule for EccErrors {
    fn id(&self) -> &'static str {
        "ecc-errors"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "The GPU counted ECC errors during the run: a failing memory part, retired pages or a coming failure.

Evidence (NVML samples): volatile corrected and uncorrected error counts at the first and
the last sample. Uncorrected errors make this a warning whatever the time lost.

Fix: report to the operator; check retired pages and row remapping (`nvidia-smi -q -d ROW_REMAPPER`)."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut any = false;
        for (d, t) in telemetries(p) {
            let delta = |c: Option<[u64; 2]>| c.map_or(0, |[a, b]| b.saturating_sub(a));
            if t.ecc_corrected.is_some() || t.ecc_uncorrected.is_some() {
                any = true;
            }
            let (corrected, uncorrected) = (delta(t.ecc_corrected), delta(t.ecc_uncorrected));
            if corrected + uncorrected > 0 {
                let mut f = Finding::new(
                    self,
                    0.0,
                    format!(
                        "GPU {} counted {corrected} corrected and {uncorrected} uncorrected ECC errors during the run",
                        d.ordinal
                    ),
                    "Report to the operator; check nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT.",
                )
                .evidence("device", d.ordinal)
                .evidence("corrected", corrected)
                .evidence("uncorrected", uncorrected);
                if uncorrected > 0 {
                    f.severity = Severity::Warning;
                }
                return Outcome::Found(f);
            }
        }
        if any {
            Outcome::Clear
        } else {
            Outcome::NoData(NO_TELEMETRY)
        }
    }
}

/// Other processes use the same GPU.
pub struct GpuShared;

impl Rule for GpuShared {
    fn id(&self) -> &'static str {
        "gpu-shared"
    }
    fn layer(&self) -> Layer {
        Layer::Runtime
    }
    fn doc(&self) -> &'static str {
        "Other processes use the same GPU, competing for its time and memory.

Evidence (NVML): the other compute processes on the GPU and their memory, and NVML's
utilisation (kernels of every process) against this process's own kernel busy share from
CUPTI. Impact: the utilisation the others added, when both are known; otherwise the
finding is informational.

Fix: give the job its own GPU (`CUDA_VISIBLE_DEVICES`), MIG partitions, or MPS for
cooperating processes."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut any = false;
        for (_, d) in p.gpu_devices() {
            let (Some(f), t) = (d.facts.as_ref(), d.telemetry.as_ref()) else {
                continue;
            };
            any = true;
            let seen = (f.other_processes.len() as u32).max(t.map_or(0, |t| t.other_processes_max));
            if seen == 0 {
                continue;
            }
            let util = t.and_then(|t| t.gpu_util_pct).map(|g| g.mean / 100.0);
            let own = d.activity.as_ref().map(|a| share(a.busy_ns, span_ns(a)));
            let impact = match (util, own) {
                (Some(u), Some(o)) => (u - o).max(0.0),
                _ => 0.0,
            };
            let pids: Vec<String> = f
                .other_processes
                .iter()
                .map(|o| o.pid.to_string())
                .collect();
            return Outcome::Found(
                Finding::new(
                    self,
                    impact,
                    format!(
                        "GPU {} is shared with {seen} other process(es){}",
                        d.ordinal,
                        if pids.is_empty() {
                            String::new()
                        } else {
                            format!(" (pid {})", pids.join(", "))
                        }
                    ),
                    "Give the job its own GPU (CUDA_VISIBLE_DEVICES), a MIG slice, or MPS.",
                )
                .evidence("device", d.ordinal)
                .evidence("other_processes", seen)
                .evidence("nvml_util", util.unwrap_or(f64::NAN))
                .evidence("own_busy_share", own.unwrap_or(f64::NAN)),
            );
        }
        if any {
            Outcome::Clear
        } else {
            Outcome::NoData(NO_FACTS)
        }
    }
}

/// Grids smaller than the GPU.
pub struct SmallGrid;

/// Kernel time in small grids, as a share of all kernel time, from which the rule speaks.
const SMALL_GRID_SHARE: f64 = 0.5;

impl Rule for SmallGrid {
    fn id(&self) -> &'static str {
        "small-grid"
    }
    fn layer(&self) -> Layer {
        Layer::Compute
    }
    fn doc(&self) -> &'static str {
        "Kernels launch grids with fewer blocks than the GPU has SMs, leaving most of it idle.

Evidence (CUPTI kernel records): kernel time in grids with fewer blocks than SMs, against
all kernel time (the rule speaks from half); the top kernels' grid sizes. Impact, an upper
bound: for each top kernel with small grids, its time times the share of SMs it left
idle, over the activity span, as if the work spread over the whole GPU.

Fix: larger batches, or fuse work into fewer, larger kernels. Split-K and persistent
kernels for matrix work."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut any = false;
        let (mut small, mut kernel, mut saving, mut span) = (0u64, 0u64, 0.0, 0u64);
        for (_, d, a) in p.gpu_activity() {
            let Some(sms) = d.facts.as_ref().and_then(|f| f.sm_count) else {
                continue;
            };
            any = true;
            small += a.small_grid_ns;
            kernel += a.kernel_ns;
            span += span_ns(a);
            saving += a
                .top_kernels
                .iter()
                .filter(|k| k.max_blocks > 0 && k.max_blocks < u64::from(sms))
                .map(|k| k.total_ns as f64 * (1.0 - k.max_blocks as f64 / f64::from(sms)))
                .sum::<f64>();
        }
        if !any {
            return Outcome::NoData(NO_ACTIVITY);
        }
        let small_share = share(small, kernel);
        if small_share < SMALL_GRID_SHARE {
            return Outcome::Clear;
        }
        let impact = if span == 0 { 0.0 } else { saving / span as f64 };
        Outcome::Found(
            Finding::new(
                self,
                impact,
                format!(
                    "{} of kernel time ran in grids with fewer blocks than the GPU has SMs",
                    pct(small_share)
                ),
                "Larger batches; fuse small kernels; split-K or persistent kernels for matrix work.",
            )
            .evidence("small_grid_ns", small)
            .evidence("kernel_ns", kernel)
            .heuristic(),
        )
    }
}

/// Gaps of at least `min_ns` in a gap histogram: (count, approximate total ns).
fn long_gaps(h: &hist::Histogram, min_ns: u64) -> (u64, u64) {
    h.0.iter()
        .map(|&(i, n)| (hist::bucket_bounds(i as usize), n))
        .filter(|&((low, _), _)| low >= min_ns)
        .fold((0, 0), |(count, ns), ((low, high), n)| {
            (count + n, ns + n * (low / 2 + high / 2))
        })
}

/// The GPU waits for input data.
pub struct InputStarved;

/// Idle gaps at least this long count as the GPU waiting for the host's next batch.
const STARVED_GAP_NS: u64 = 1_000_000;
/// The host's share of its steady time inside driver calls, below which it was busy
/// elsewhere (data loading) rather than launching or waiting.
const HOST_IN_DRIVER_MAX: f64 = 0.5;

impl Rule for InputStarved {
    fn id(&self) -> &'static str {
        "input-starved"
    }
    fn layer(&self) -> Layer {
        Layer::Pipeline
    }
    fn doc(&self) -> &'static str {
        "The GPU sits idle while the host is outside the driver, typically loading and preparing the next batch.

Evidence (CUPTI activity and host-side timing): GPU idle gaps of 1 ms or more between
stretches of activity, against the activity span, while the host spent less than half
its steady time inside driver calls (so it was neither launching nor waiting on the
GPU). Impact: the time in those long gaps over the span. A run whose host took
unified-memory page faults is left to `um-fault-heavy`: its host was faulting pages in,
not loading data.

Fix: `DataLoader(num_workers=N, persistent_workers=True, prefetch_factor=...)`, pinned
memory, prefetch to the GPU on a side stream, decode on the GPU, and cache preprocessed data."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut any = false;
        let (mut gaps, mut gap_ns, mut span) = (0u64, 0u64, 0u64);
        for (_, _, a) in p.gpu_activity() {
            any = true;
            let (n, ns) = long_gaps(&a.gap_hist, STARVED_GAP_NS);
            gaps += n;
            gap_ns += ns;
            span += span_ns(a);
        }
        if !any {
            return Outcome::NoData(NO_ACTIVITY);
        }
        if cpu_page_faults(p) > 0 {
            return Outcome::Clear;
        }
        let driver: u64 = p.processes.iter().map(|x| x.driver_ns).sum();
        let steady: u64 = p.processes.iter().map(|x| x.steady_ns).sum();
        let in_driver = share(driver, steady);
        let impact = share(gap_ns, span);
        if gaps == 0 || in_driver >= HOST_IN_DRIVER_MAX || impact < 0.01 {
            return Outcome::Clear;
        }
        Outcome::Found(
            Finding::new(
                self,
                impact,
                format!(
                    "the GPU sat idle in {gaps} gaps of 1 ms or more ({} of the activity span) while the host spent {} of its time inside the driver",
                    pct(impact),
                    pct(in_driver)
                ),
                "DataLoader(num_workers=N, persistent_workers=True, pin_memory=True, prefetch_factor=2+); prefetch batches to the GPU on a side stream.",
            )
            .evidence("long_gaps", gaps)
            .evidence("long_gap_ns", gap_ns)
            .evidence("span_ns", span)
            .evidence("host_in_driver_share", in_driver),
        )
    }
}

fn cpu_page_faults(p: &Profile) -> u64 {
    p.processes
        .iter()
        .filter_map(|x| x.gpu.as_ref()?.unified_memory.as_ref())
        .map(|u| u.cpu_page_faults)
        .sum()
}

/// Unified memory that migrates on page faults.
pub struct UmFaultHeavy;

/// Rough costs for the impact estimate: a GPU fault group and a CPU fault serviced.
const GPU_FAULT_GROUP_NS: f64 = 50_000.0;
const CPU_FAULT_NS: f64 = 10_000.0;

impl Rule for UmFaultHeavy {
    fn id(&self) -> &'static str {
        "um-fault-heavy"
    }
    fn layer(&self) -> Layer {
        Layer::Memory
    }
    fn doc(&self) -> &'static str {
        "Unified (managed) memory migrates page by page on faults instead of in bulk, stalling kernels and the host.

Evidence (CUPTI unified-memory counters): CPU page faults, GPU page-fault groups and
bytes migrated each way. Without managed allocations (`cuMemAllocManaged`) no faults are
possible and the rule is clear. Impact, a heuristic: migrated bytes at the PCIe link's
peak plus 50 us per GPU fault group and 10 us per CPU fault, over the activity span; and
when the host faulted, at least the GPU's idle gaps of 1 ms or more (the GPU waiting
while the host pulled pages back).

Fix: prefetch managed memory to where it is used next (`cudaMemPrefetchAsync`), give
placement hints (`cudaMemAdvise` with `SetPreferredLocation`/`SetReadMostly`), or use
explicit device allocations and copies."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let counters: Vec<_> = p
            .processes
            .iter()
            .filter_map(|x| x.gpu.as_ref()?.unified_memory.clone())
            .collect();
        if counters.is_empty() {
            return if p.calls("cuMemAllocManaged") == 0 {
                Outcome::Clear
            } else {
                Outcome::NoData("the run allocated managed memory; its faults need CUPTI unified-memory counters (none in the dumps)")
            };
        }
        let sum = |f: fn(&gpuspy_format::gpu::UnifiedMemory) -> u64| -> u64 {
            counters.iter().map(f).sum()
        };
        let (cpu, gpu) = (sum(|u| u.cpu_page_faults), sum(|u| u.gpu_page_fault_groups));
        let migrated = sum(|u| u.bytes_htod + u.bytes_dtoh);
        if cpu + gpu == 0 {
            return Outcome::Clear;
        }
        let peak = p
            .gpu_devices()
            .find_map(|(_, d)| d.facts.as_ref()?.pcie.peak_bytes_per_s())
            .unwrap_or(25e9);
        let span: u64 = p.gpu_activity().map(|(_, _, a)| span_ns(a)).sum();
        let cost_ns = migrated as f64 / peak * 1e9
            + gpu as f64 * GPU_FAULT_GROUP_NS
            + cpu as f64 * CPU_FAULT_NS;
        let gap_ns: u64 = p
            .gpu_activity()
            .map(|(_, _, a)| long_gaps(&a.gap_hist, STARVED_GAP_NS).1)
            .sum();
        let host_wait = if cpu > 0 { share(gap_ns, span) } else { 0.0 };
        let impact = if span == 0 {
            0.0
        } else {
            (cost_ns / span as f64).max(host_wait).min(1.0)
        };
        Outcome::Found(
            Finding::new(
                self,
                impact,
                format!(
                    "unified memory faulted {cpu} times on the CPU and in {gpu} fault groups on the GPU, migrating {} MiB",
                    migrated >> 20
                ),
                "cudaMemPrefetchAsync managed data to where it is used next; cudaMemAdvise placement hints; or explicit device memory and copies.",
            )
            .evidence("cpu_page_faults", cpu)
            .evidence("gpu_page_fault_groups", gpu)
            .evidence("migrated_bytes", migrated)
            .heuristic(),
        )
    }
}

/// Collectives dominate the step.
pub struct CommBound;

/// NCCL kernel time over the activity span from which the rule speaks.
const COMM_SHARE: f64 = 0.3;

impl Rule for CommBound {
    fn id(&self) -> &'static str {
        "comm-bound"
    }
    fn layer(&self) -> Layer {
        Layer::Framework
    }
    fn doc(&self) -> &'static str {
        "Collective communication (NCCL all-reduce, all-gather, ...) takes most of the GPU's time and is not overlapped with compute.

Evidence (CUPTI kernel records): the time of NCCL kernels (names starting with `nccl`)
among the top kernels, against the activity span (the rule speaks from 30 %), and the
bytes the NCCL calls moved. Impact: the NCCL kernel time not overlapped by other kernels,
bounded by kernel time minus busy time.

Fix: overlap communication with backward compute (DDP bucketing, `bucket_cap_mb`), use
gradient accumulation to communicate less often, compress (bf16 gradients), check the
topology (`NCCL_DEBUG=INFO`, NVLink vs PCIe)."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut any = false;
        let (mut nccl, mut span) = (0u64, 0u64);
        for (_, _, a) in p.gpu_activity() {
            any = true;
            span += span_ns(a);
            nccl += a
                .top_kernels
                .iter()
                .filter(|k| k.name.starts_with("nccl"))
                .map(|k| k.total_ns)
                .sum::<u64>();
        }
        if !any {
            return Outcome::NoData(NO_ACTIVITY);
        }
        let comm = share(nccl, span);
        if comm < COMM_SHARE {
            return Outcome::Clear;
        }
        let bytes: u64 = p.nccl_ops.values().map(|&(_, b)| b).sum();
        Outcome::Found(
            Finding::new(
                self,
                comm,
                format!("NCCL kernels took {} of the GPU activity span", pct(comm)),
                "Overlap communication with compute (DDP bucket_cap_mb), communicate less often (gradient accumulation), compress gradients.",
            )
            .evidence("nccl_kernel_ns", nccl)
            .evidence("span_ns", span)
            .evidence("nccl_bytes", bytes),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::synthetic::run;
    use gpuspy_format::gpu::{
        Activity, ClockEvent, DeviceFacts, Gpu, GpuProcess, KernelStat, PcieLink, UnifiedMemory,
    };

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_800_000_000 * S;

    fn h200() -> DeviceFacts {
        DeviceFacts {
            name: "NVIDIA H200".into(),
            sm_count: Some(132),
            pcie: PcieLink {
                gen_current: Some(5),
                gen_max: Some(5),
                width_current: Some(16),
                width_max: Some(16),
            },
            ecc_enabled: Some(true),
            max_sm_clock_mhz: Some(1980),
            ..DeviceFacts::default()
        }
    }

    /// A 10 s activity span with `busy_s` of kernels.
    fn activity(busy_s: f64) -> Activity {
        let busy = (busy_s * S as f64) as u64;
        Activity {
            first_unix_ns: T0,
            last_unix_ns: T0 + 10 * S,
            kernels: 1000,
            kernel_ns: busy,
            busy_ns: busy,
            active_ns: busy,
            ..Activity::default()
        }
    }

    fn gpu(facts: DeviceFacts, telemetry: Option<Telemetry>, activity: Option<Activity>) -> Gpu {
        Gpu {
            devices: vec![Device {
                ordinal: 0,
                facts: Some(facts),
                telemetry,
                activity,
            }],
            ..Gpu::default()
        }
    }

    fn check(rule: &dyn Rule, g: Gpu) -> Outcome {
        rule.check(&run(10.0).gpu(g).build())
    }

    fn found(o: Outcome) -> Finding {
        match o {
            Outcome::Found(f) => f,
            Outcome::Clear => panic!("clear"),
            Outcome::NoData(m) => panic!("no data: {m}"),
        }
    }

    #[test]
    fn without_gpu_data_each_rule_says_what_it_lacks() {
        let p = run(1.0).build();
        for rule in [
            &PcieLinkDegraded as &dyn Rule,
            &ClocksThrottled,
            &EccOff,
            &EccErrors,
            &GpuShared,
            &SmallGrid,
            &InputStarved,
            &CommBound,
        ] {
            assert!(
                matches!(rule.check(&p), Outcome::NoData(_)),
                "{}",
                rule.id()
            );
        }
    }

    #[test]
    fn a_narrow_link_costs_the_copy_time_it_slows() {
        let mut facts = h200();
        facts.pcie.gen_current = Some(4);
        let mut a = activity(1.0);
        a.copies.push(gpuspy_format::gpu::GpuCopy {
            kind: "HtoD".into(),
            memory: "pinned".into(),
            count: 10,
            bytes: 1 << 30,
            ns: 2 * S,
        });
        let f = found(check(&PcieLinkDegraded, gpu(facts, None, Some(a))));
        // 2 s of copies in a 10 s span, at half the bandwidth: 10 % lost.
        assert!((f.impact - 0.1).abs() < 1e-3, "{}", f.impact);
        assert!(matches!(
            check(&PcieLinkDegraded, gpu(h200(), None, Some(activity(1.0)))),
            Outcome::Clear
        ));
    }

    #[test]
    fn throttling_costs_the_clock_deficit_while_busy() {
        let t = Telemetry {
            samples: 100,
            sm_clock_mhz: Some(Gauge {
                samples: 100,
                min: 1400.0,
                mean: 1584.0,
                max: 1980.0,
                last: 1584.0,
            }),
            clock_events: vec![
                ClockEvent {
                    reason: "gpu-idle".into(),
                    samples: 10,
                },
                ClockEvent {
                    reason: "sw-power-cap".into(),
                    samples: 60,
                },
            ],
            ..Telemetry::default()
        };
        let f = found(check(
            &ClocksThrottled,
            gpu(h200(), Some(t), Some(activity(5.0))),
        ));
        // 20 % clock deficit while the GPU was busy half the time.
        assert!((f.impact - 0.1).abs() < 1e-9, "{}", f.impact);
        assert!(f.summary.contains("sw-power-cap in 60 of 100 samples"));
        let idle_only = Telemetry {
            samples: 100,
            clock_events: vec![ClockEvent {
                reason: "gpu-idle".into(),
                samples: 90,
            }],
            ..Telemetry::default()
        };
        assert!(matches!(
            check(&ClocksThrottled, gpu(h200(), Some(idle_only), None)),
            Outcome::Clear
        ));
    }

    #[test]
    fn ecc_mode_and_errors() {
        let mut off = h200();
        off.ecc_enabled = Some(false);
        assert_eq!(
            found(check(&EccOff, gpu(off, None, None))).severity,
            Severity::Info
        );
        assert!(matches!(
            check(&EccOff, gpu(h200(), None, None)),
            Outcome::Clear
        ));
        let t = |first: u64, last: u64| Telemetry {
            samples: 2,
            ecc_corrected: Some([3, 3]),
            ecc_uncorrected: Some([first, last]),
            ..Telemetry::default()
        };
        let f = found(check(&EccErrors, gpu(h200(), Some(t(0, 2)), None)));
        assert_eq!(
            (f.severity, f.evidence["uncorrected"].as_u64()),
            (Severity::Warning, Some(2))
        );
        assert!(matches!(
            check(&EccErrors, gpu(h200(), Some(t(1, 1)), None)),
            Outcome::Clear
        ));
    }

    #[test]
    fn a_shared_gpu_costs_what_the_others_add_to_utilisation() {
        let mut facts = h200();
        facts.other_processes.push(GpuProcess {
            pid: 4242,
            used_bytes: Some(1 << 30),
        });
        let t = Telemetry {
            samples: 10,
            gpu_util_pct: Some(Gauge {
                samples: 10,
                min: 60.0,
                mean: 70.0,
                max: 80.0,
                last: 70.0,
            }),
            ..Telemetry::default()
        };
        let f = found(check(&GpuShared, gpu(facts, Some(t), Some(activity(3.0)))));
        assert!((f.impact - 0.4).abs() < 1e-9, "{}", f.impact);
        assert!(f.summary.contains("pid 4242"));
        assert!(matches!(
            check(&GpuShared, gpu(h200(), None, None)),
            Outcome::Clear
        ));
    }

    #[test]
    fn small_grids_are_named_with_an_upper_bound() {
        let mut a = activity(4.0);
        a.small_grid_ns = 3 * S;
        a.top_kernels = vec![KernelStat {
            name: "tiny".into(),
            calls: 100,
            total_ns: 3 * S,
            max_ns: 1,
            min_blocks: 33,
            max_blocks: 33,
        }];
        let f = found(check(&SmallGrid, gpu(h200(), None, Some(a))));
        // 3 s of kernels using a quarter of the SMs, in a 10 s span.
        assert!((f.impact - 0.225).abs() < 1e-9, "{}", f.impact);
        assert!(matches!(
            check(&SmallGrid, gpu(h200(), None, Some(activity(4.0)))),
            Outcome::Clear
        ));
    }

    fn gaps(count: u64, each_ns: u64) -> hist::Histogram {
        let mut dense = vec![0; hist::BUCKETS];
        dense[hist::bucket_index(each_ns)] = count;
        hist::Histogram::from_dense(&dense)
    }

    #[test]
    fn long_idle_gaps_with_the_host_elsewhere_are_input_starvation() {
        let mut a = activity(4.0);
        a.gap_hist = gaps(100, 50_000_000);
        let f = found(check(&InputStarved, gpu(h200(), None, Some(a.clone()))));
        // 100 gaps of ~50 ms in a 10 s span.
        assert!((f.impact - 0.5).abs() < 0.04, "{}", f.impact);
        // The same gaps while the host sat in the driver (waiting) are not starvation.
        let mut busy_host = run(10.0).gpu(gpu(h200(), None, Some(a))).build();
        busy_host.processes[0].driver_ns = 8 * S;
        assert!(matches!(InputStarved.check(&busy_host), Outcome::Clear));
        // Microsecond gaps (launch overhead) are not either.
        let mut short = activity(4.0);
        short.gap_hist = gaps(100_000, 20_000);
        assert!(matches!(
            check(&InputStarved, gpu(h200(), None, Some(short))),
            Outcome::Clear
        ));
    }

    #[test]
    fn unified_memory_faults_are_found_and_zero_faults_are_clear() {
        let um = |cpu, gpu_groups, bytes| UnifiedMemory {
            cpu_page_faults: cpu,
            gpu_page_fault_groups: gpu_groups,
            bytes_htod: bytes,
            ..UnifiedMemory::default()
        };
        let mut g = gpu(h200(), None, Some(activity(1.0)));
        g.unified_memory = Some(um(10_000, 2_000, 4 << 30));
        let f = found(UmFaultHeavy.check(&run(10.0).gpu(g.clone()).build()));
        // 4 GiB at gen5 x16's 63 GB/s, 2000 x 50 us and 10000 x 10 us, over 10 s.
        let expected = ((4u64 << 30) as f64 / 63.016e9 + 0.1 + 0.1) / 10.0;
        assert!(
            (f.impact - expected).abs() < 1e-9 && f.heuristic,
            "{}",
            f.impact
        );
        assert_eq!(f.evidence["cpu_page_faults"].as_u64(), Some(10_000));
        // The host faulting while the GPU waits in long gaps: those gaps are the cost, and
        // they are not input starvation.
        let mut waiting = activity(1.0);
        waiting.gap_hist = gaps(100, 50_000_000);
        let mut h = gpu(h200(), None, Some(waiting));
        h.unified_memory = Some(um(10_000, 2_000, 4 << 30));
        let f = found(UmFaultHeavy.check(&run(10.0).gpu(h.clone()).build()));
        assert!((f.impact - 0.5).abs() < 0.04, "{}", f.impact);
        assert!(matches!(
            InputStarved.check(&run(10.0).gpu(h).build()),
            Outcome::Clear
        ));
        g.unified_memory = Some(um(0, 0, 0));
        assert!(matches!(
            UmFaultHeavy.check(&run(10.0).gpu(g).build()),
            Outcome::Clear
        ));
        assert!(matches!(
            UmFaultHeavy.check(&run(1.0).build()),
            Outcome::Clear
        ));
        let managed = run(1.0).api("cuMemAllocManaged", 1, 0.1, 1 << 20).build();
        assert!(matches!(UmFaultHeavy.check(&managed), Outcome::NoData(_)));
    }

    #[test]
    fn nccl_kernels_that_dominate_make_the_run_comm_bound() {
        let mut a = activity(6.0);
        a.top_kernels = vec![KernelStat {
            name: "ncclDevKernel_AllReduce_Sum_f32_RING_LL".into(),
            calls: 10,
            total_ns: 4 * S,
            ..KernelStat::default()
        }];
        let f = found(check(&CommBound, gpu(h200(), None, Some(a))));
        assert!((f.impact - 0.4).abs() < 1e-9);
        assert!(matches!(
            check(&CommBound, gpu(h200(), None, Some(activity(6.0)))),
            Outcome::Clear
        ));
    }
}
