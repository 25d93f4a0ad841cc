//! The GPU's own view of the run: NVML telemetry and CUPTI activity, reduced by the shim
//! into bounded aggregates. All times are Unix-epoch nanoseconds (CUPTI's timebase is
//! `CLOCK_REALTIME`), so they line up with the dump's `start_unix_ns`.

use crate::hist::Histogram;
use serde::{Deserialize, Serialize};

/// Everything GPU-side one process collected; absent from dumps of shims that predate it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Gpu {
    pub nvml: SourceStatus,
    pub cupti: SourceStatus,
    /// One entry per CUDA device the process created a context on.
    pub devices: Vec<Device>,
    /// Unified-memory counters, process-wide; None when they were not collected.
    pub unified_memory: Option<UnifiedMemory>,
    /// CUPTI's own overhead records, per kind.
    pub cupti_overhead: Vec<Overhead>,
    /// Records CUPTI dropped for lack of a buffer, plus buffers gpuspy refused because
    /// its pool was full (each one loses the records CUPTI would have written to it).
    pub dropped_records: u64,
    pub refused_buffers: u64,
    /// CPU time of gpuspy's own collector thread (NVML sampling, CUPTI parsing); CUPTI's
    /// internal threads are not included.
    #[serde(default)]
    pub collector_cpu_ns: u64,
    /// How long the program's first `cuInit` was held, after its own time was recorded,
    /// while the gpuspy thread started CUPTI (at most 1 s).
    #[serde(default)]
    pub start_wait_ns: u64,
}

/// Whether a source delivered data, and if not (or only in part) why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SourceStatus {
    pub active: bool,
    /// What was used ("libcupti.so.13, CUPTI 130001") or why nothing was.
    pub note: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Device {
    /// The CUDA device ordinal as this process saw it (after `CUDA_VISIBLE_DEVICES`).
    pub ordinal: u32,
    pub facts: Option<DeviceFacts>,
    pub telemetry: Option<Telemetry>,
    pub activity: Option<Activity>,
}

/// Read once per device from NVML (and the SM count from the driver).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceFacts {
    pub name: String,
    pub uuid: String,
    pub pci_bus_id: String,
    pub driver_version: String,
    /// `cuDriverGetVersion` form: 13000 is CUDA 13.0.
    pub cuda_driver_version: Option<u32>,
    pub vbios_version: String,
    pub sm_count: Option<u32>,
    pub pcie: PcieLink,
    pub ecc_enabled: Option<bool>,
    pub ecc_pending: Option<bool>,
    pub persistence_mode: Option<bool>,
    pub mig_mode: Option<bool>,
    /// The enforced power limit, and the board's default one.
    pub power_limit_mw: Option<u32>,
    #[serde(default)]
    pub default_power_limit_mw: Option<u32>,
    pub max_sm_clock_mhz: Option<u32>,
    pub max_mem_clock_mhz: Option<u32>,
    /// Other processes with a compute context on this GPU when gpuspy started.
    pub other_processes: Vec<GpuProcess>,
    /// Active NVLink links; None when the GPU has none (or NVML cannot tell).
    #[serde(default)]
    pub nvlink: Option<NvLink>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct NvLink {
    pub active_links: u32,
    /// The common speed of the active links, one direction, in MB/s (NVML field 90).
    pub link_mbytes_per_s: Option<u32>,
}

impl NvLink {
    /// Peak one-direction bandwidth of all active links together, in bytes per second.
    pub fn peak_bytes_per_s(&self) -> Option<f64> {
        let per_link = self.link_mbytes_per_s?;
        (self.active_links > 0).then(|| f64::from(per_link) * 1e6 * f64::from(self.active_links))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PcieLink {
    pub gen_current: Option<u32>,
    /// The most the GPU and its slot together allow.
    pub gen_max: Option<u32>,
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
}

impl PcieLink {
    /// Peak one-direction bandwidth of the link as it runs now, in bytes per second
    /// (per-lane rates after line coding: gen1/2 8b/10b, gen3+ 128b/130b).
    pub fn peak_bytes_per_s(&self) -> Option<f64> {
        let per_lane_gbit = match self.gen_current? {
            1 => 2.0,
            2 => 4.0,
            3 => 7.877,
            4 => 15.754,
            5 => 31.508,
            6 => 60.5,
            _ => return None,
        };
        Some(per_lane_gbit * 1e9 / 8.0 * f64::from(self.width_current?))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GpuProcess {
    pub pid: u32,
    pub used_bytes: Option<u64>,
}

/// NVML samples, every `interval_ms`, reduced to fixed-size summaries and a capped series.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Telemetry {
    pub interval_ms: u64,
    pub samples: u64,
    pub gpu_util_pct: Option<Gauge>,
    pub mem_util_pct: Option<Gauge>,
    pub sm_clock_mhz: Option<Gauge>,
    pub mem_clock_mhz: Option<Gauge>,
    pub power_mw: Option<Gauge>,
    pub gpu_temp_c: Option<Gauge>,
    pub mem_temp_c: Option<Gauge>,
    pub pcie_tx_kib_per_s: Option<Gauge>,
    pub pcie_rx_kib_per_s: Option<Gauge>,
    /// In how many samples each clock-event (throttle) reason was active.
    pub clock_events: Vec<ClockEvent>,
    /// Volatile ECC error counts at the first and the last sample.
    pub ecc_corrected: Option<[u64; 2]>,
    pub ecc_uncorrected: Option<[u64; 2]>,
    /// The most other compute processes seen on the GPU at once.
    pub other_processes_max: u32,
    pub series: TelemetrySeries,
    /// What the SMs did, from NVML GPM; None in dumps of shims that predate it.
    #[serde(default)]
    pub gpm: Option<Gpm>,
}

impl Telemetry {
    /// ECC errors counted between the first and the last sample: (corrected, uncorrected).
    pub fn new_ecc_errors(&self) -> (u64, u64) {
        let new = |c: Option<[u64; 2]>| c.map_or(0, |[first, last]| last.saturating_sub(first));
        (new(self.ecc_corrected), new(self.ecc_uncorrected))
    }
}

/// NVML GPU Performance Monitoring (Hopper and later), sampled with the other telemetry:
/// each value is the mean over the interval since the previous sample (at least 100 ms).
/// Percentages are of the whole GPU (or of the MIG instance): SM active is the share of SM
/// cycles with at least one warp resident; occupancy the resident warps over the most an
/// SM can hold; the tensor figures the share of cycles the tensor pipes worked (any
/// precision, and per kind: DFMA fp64, HMMA fp16/bf16/tf32/fp8, IMMA integer); DRAM
/// bandwidth the share of its peak.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Gpm {
    /// Whether GPM sampled, and what (`nvmlGpmSampleGet`, `nvmlGpmMigSampleGet` of GPU
    /// instance 3) or why not (`not supported by this GPU`).
    pub active: bool,
    pub note: String,
    #[serde(default, deserialize_with = "gauge")]
    pub sm_active_pct: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub sm_occupancy_pct: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub tensor_active_pct: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub dfma_tensor_pct: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub hmma_tensor_pct: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub imma_tensor_pct: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub dram_bw_util_pct: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub pcie_tx_mib_per_s: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub pcie_rx_mib_per_s: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub nvlink_tx_mib_per_s: Option<Gauge>,
    #[serde(default, deserialize_with = "gauge")]
    pub nvlink_rx_mib_per_s: Option<Gauge>,
}

/// A GPM gauge, None where a figure of it is `null`: the shim of 2026-11-30 summed NVML's
/// NaN answers into the mean, which serde_json writes as null.
fn gauge<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Gauge>, D::Error> {
    #[derive(Deserialize)]
    struct Written {
        samples: u64,
        min: Option<f64>,
        mean: Option<f64>,
        max: Option<f64>,
        last: Option<f64>,
    }
    let w: Option<Written> = Deserialize::deserialize(d)?;
    Ok(w.and_then(|w| {
        Some(Gauge {
            samples: w.samples,
            min: w.min?,
            mean: w.mean?,
            max: w.max?,
            last: w.last?,
        })
    }))
}

/// A sampled quantity: min, mean, max and the last value.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Gauge {
    pub samples: u64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
    pub last: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClockEvent {
    /// NVML's name for the reason bit (`sw-power-cap`, `hw-thermal-slowdown`, ...).
    pub reason: String,
    pub samples: u64,
}

/// Telemetry over time for plotting: at most `SERIES_POINTS` points, each the mean over
/// `step_ms`; when full, neighbours are merged and the step doubles.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TelemetrySeries {
    pub start_unix_ns: u64,
    pub step_ms: u64,
    pub gpu_util_pct: Vec<f32>,
    pub sm_clock_mhz: Vec<f32>,
    pub power_w: Vec<f32>,
    pub gpu_temp_c: Vec<f32>,
    /// GPM figures (`Gpm`); empty where GPM did not sample. A slot without a GPM reading
    /// holds `NO_READING`.
    #[serde(default, deserialize_with = "readings")]
    pub sm_active_pct: Vec<f32>,
    #[serde(default, deserialize_with = "readings")]
    pub sm_occupancy_pct: Vec<f32>,
    #[serde(default, deserialize_with = "readings")]
    pub tensor_active_pct: Vec<f32>,
    #[serde(default, deserialize_with = "readings")]
    pub dram_bw_util_pct: Vec<f32>,
}

/// A GPM series slot without a reading.
pub const NO_READING: f32 = -1.0;

/// A GPM column, where `null` is a slot without a reading: the shim of 2026-11-30 wrote
/// NVML's NaN answers so (serde_json writes NaN as null) and its dumps must still load.
fn readings<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    let slots: Vec<Option<f32>> = Deserialize::deserialize(d)?;
    Ok(slots.into_iter().map(|v| v.unwrap_or(NO_READING)).collect())
}

impl TelemetrySeries {
    /// The mean of `column` over `spans`, each span's mean (`mean_in`) weighted by its
    /// length; spans without a reading do not count. None when none has one.
    pub fn mean_over(&self, column: &[f32], spans: &[(u64, u64)]) -> Option<f64> {
        let (sum, weight) = spans
            .iter()
            .filter_map(|&(from, to)| {
                let ns = to.saturating_sub(from) as f64;
                Some((self.mean_in(column, from, to)? * ns, ns))
            })
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        (weight > 0.0).then(|| sum / weight)
    }

    /// The mean of `column` (one of this series' columns) over `[from, to)` (Unix ns):
    /// slots the range only partly covers weigh in proportion to the part covered, slots
    /// without a reading (`NO_READING`) not at all. None when no slot with a reading is
    /// covered.
    pub fn mean_in(&self, column: &[f32], from: u64, to: u64) -> Option<f64> {
        let step = self.step_ms * 1_000_000;
        let (mut sum, mut weight) = (0.0, 0u64);
        for (i, &v) in column.iter().enumerate().filter(|&(_, &v)| v >= 0.0) {
            let lo = self.start_unix_ns + i as u64 * step;
            let overlap = (lo + step).min(to).saturating_sub(lo.max(from));
            sum += f64::from(v) * overlap as f64;
            weight += overlap;
        }
        (weight > 0).then(|| sum / weight as f64)
    }
}

/// The most points a series keeps.
pub const SERIES_POINTS: usize = 240;

/// CUPTI activity on one device.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Activity {
    /// When gpuspy started collecting; work before it is not seen.
    pub since_unix_ns: u64,
    /// Start of the first and end of the last activity seen.
    pub first_unix_ns: u64,
    pub last_unix_ns: u64,
    /// Kernel records, untimed ones included (untimed ones missing in older 0.1 dumps).
    pub kernels: u64,
    /// Sum of kernel durations (concurrent kernels counted each).
    pub kernel_ns: u64,
    /// Union of kernel intervals: time at least one kernel ran.
    pub busy_ns: u64,
    /// Union of kernel, copy and memset intervals.
    pub active_ns: u64,
    pub kernel_hist: Histogram,
    /// Idle gaps between consecutive stretches of activity (any kind).
    pub gap_hist: Histogram,
    /// Schema 1 only: the shim's own count of kernels whose grid had fewer blocks than
    /// the GPU has SMs, and their time. Schema 2 dumps hold `grid_blocks` instead and the
    /// reader judges against the SM count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_grid_kernels: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_grid_ns: Option<u64>,
    /// Kernels by grid size, NCCL's left out (they run one block per channel by design).
    #[serde(default)]
    pub grid_blocks: Vec<GridBlocks>,
    /// The kernels with the most total time, at most `TOP_KERNELS`. Names as CUDA gave
    /// them (mangled); schema 1 dumps hold them demangled.
    pub top_kernels: Vec<KernelStat>,
    pub copies: Vec<GpuCopy>,
    pub memsets: u64,
    pub memset_bytes: u64,
    pub memset_ns: u64,
    /// Schema 1 only: kernel busy time per slot, which the timeline's `devices` replaced.
    /// Read so that the views can still plot old dumps; never written.
    #[serde(default, skip_serializing)]
    pub busy_series: Option<BusySeries>,
    /// Records that arrived after the time they cover had been settled; their overlap
    /// with settled time is not counted (see docs/dump-format.md).
    pub late_records: u64,
    pub late_ns: u64,
    /// Recording periods closed with fewer kernel records than the host launched in them
    /// (CUPTI discards the records of kernels still queued when its kinds go off), and their
    /// time left unobserved: from each one's last record to its close, and the gap before a
    /// copy or memset that ran behind the lost kernels. Absent (0) in older 0.1
    /// dumps, whose such time counts as idle.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub lost_tails: u64,
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub lost_tail_ns: u64,
    /// Kernel records without timestamps (CUPTI ran out of timing memory).
    pub untimed_records: u64,
    /// NCCL kernels per collective, complete (not limited to the top kernels).
    #[serde(default)]
    pub collectives: Vec<CollectiveKernels>,
    /// Present when CUPTI recorded only part of the time (the default, `GPUSPY_CUPTI`
    /// unset): the counts and times above are then what was seen, multiplied by `factor`.
    /// Absent under `GPUSPY_CUPTI=full` and in dumps before sampling existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<Sampled>,
}

/// How much of the run CUPTI recorded, when activity was sampled in duty cycles.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Sampled {
    /// Time recorded, and the time from the first recording period to the last one's end.
    pub observed_ns: u64,
    pub covered_ns: u64,
    /// `covered_ns / observed_ns`: what the recorded copies and memsets were multiplied by,
    /// and everything else where `kernel_factor` is absent.
    pub factor: f64,
    /// The host's kernel launches over those made while activity was recorded: what the
    /// recorded kernel statistics were multiplied by. Absent without launches recorded,
    /// and in older 0.1 dumps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_factor: Option<f64>,
}

/// GPU idle gaps this long are pauses between phases of a run (set-up such as a model
/// initialised on the host, evaluation, checkpoints), not waiting within its steps.
pub const PAUSE_NS: u64 = 1_000_000_000;

impl Activity {
    /// From the start of the first activity to the end of the last.
    pub fn span_ns(&self) -> u64 {
        self.last_unix_ns.saturating_sub(self.first_unix_ns)
    }

    /// Idle gaps of `PAUSE_NS` or more: how many, and their approximate total, at most the
    /// span's time without activity (bucket midpoints can overshoot it, and older 0.1 dumps
    /// extrapolated pauses under sampling: a torch.compile run's
    /// 6.5 s pause, counted twice, left a working span of 0 in an 8.6 s span).
    pub fn pauses(&self) -> (u64, u64) {
        let (count, ns) = self.gap_hist.at_least(PAUSE_NS);
        (count, ns.min(self.span_ns().saturating_sub(self.active_ns)))
    }

    /// The span less its pauses: the time the GPU was working or waiting within steps,
    /// which shares of GPU time are measured against. A DDP job whose model was built on
    /// the host after NCCL's first kernels had 6 s of pauses in an 11 s span.
    pub fn working_span_ns(&self) -> u64 {
        self.span_ns().saturating_sub(self.pauses().1)
    }

    /// Kernel busy time over the working span.
    pub fn busy_share(&self) -> Option<f64> {
        let span = self.working_span_ns();
        (span > 0).then(|| self.busy_ns as f64 / span as f64)
    }
}

pub const TOP_KERNELS: usize = 20;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelStat {
    pub name: String,
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Fewest and most blocks in a grid of this kernel.
    pub min_blocks: u64,
    pub max_blocks: u64,
}

/// Kernels whose grids had a number of blocks in one bucket of the log-linear layout of
/// `hist` (exact below 32 blocks; above, buckets 1/16 of their lower bound wide).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GridBlocks {
    /// The bucket's index (`hist::bucket_bounds` gives its blocks).
    pub bucket: u32,
    pub kernels: u64,
    pub ns: u64,
}

/// GPU time of one collective's NCCL kernels. The time includes waiting inside the
/// kernel for the other ranks to arrive.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CollectiveKernels {
    /// As in the kernel's name and the dump's `nccl.ops`: `AllReduce`, `AllGather`,
    /// `ReduceScatter`, `Broadcast`, `Reduce`, `SendRecv`; `Generic` for NCCL's
    /// kernels that serve several collectives.
    pub op: String,
    pub calls: u64,
    pub total_ns: u64,
}

/// The collective an NCCL kernel serves, from its name (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`,
/// mangled or not; `ncclKernel_` in NCCL before 2.19).
pub fn nccl_collective(kernel: &str) -> Option<&str> {
    let at = ["ncclDevKernel_", "ncclKernel_"]
        .iter()
        .find_map(|p| kernel.find(p).map(|i| i + p.len()))?;
    let rest = &kernel[at..];
    let end = rest
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Copies CUPTI saw, per direction and host memory kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuCopy {
    /// `HtoD`, `DtoH`, `DtoD`, `PtoP`, `HtoH` or `other`.
    pub kind: String,
    /// `pageable`, `pinned`, `managed`, `device` or `other`: the host side's memory kind
    /// (for device-to-device copies, the source's).
    pub memory: String,
    pub count: u64,
    pub bytes: u64,
    pub ns: u64,
}

impl GpuCopy {
    /// Achieved throughput while copying, bytes per second.
    pub fn bytes_per_s(&self) -> Option<f64> {
        (self.ns > 0).then(|| self.bytes as f64 * 1e9 / self.ns as f64)
    }
}

/// Kernel busy nanoseconds per slot of `step_ns` from `start_unix_ns` (schema 1 dumps).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BusySeries {
    pub start_unix_ns: u64,
    pub step_ns: u64,
    pub busy_ns: Vec<u64>,
}

/// CUPTI unified-memory counters, summed over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnifiedMemory {
    /// CPU page faults on managed memory (one per record).
    pub cpu_page_faults: u64,
    /// GPU page-fault groups (records; each groups faults serviced together).
    pub gpu_page_fault_groups: u64,
    pub bytes_htod: u64,
    pub bytes_dtoh: u64,
    pub bytes_dtod: u64,
    pub thrashing_bytes: u64,
    pub throttling_events: u64,
    pub remote_map_bytes: u64,
}

impl UnifiedMemory {
    pub fn faults(&self) -> u64 {
        self.cpu_page_faults + self.gpu_page_fault_groups
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Overhead {
    /// `driver-compiler`, `cupti-buffer-flush`, `cupti-instrumentation`, ...
    pub kind: String,
    pub count: u64,
    pub ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_kernels_are_named_by_their_collective() {
        for (name, op) in [
            (
                "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
                Some("AllReduce"),
            ),
            (
                "ncclDevKernel_ReduceScatter_Sum_bf16_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
                Some("ReduceScatter"),
            ),
            ("ncclDevKernel_Generic_4", Some("Generic")),
            ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", Some("SendRecv")),
            ("ncclDevKernel_", None),
            ("void at::native::vectorized_elementwise_kernel<4>", None),
        ] {
            assert_eq!(nccl_collective(name), op, "{name}");
        }
    }

    #[test]
    fn pauses_take_at_most_the_span_without_activity() {
        // A 10 s span with 1 s of activity and two gaps of about 6.5 s in the histogram
        // (one pause, extrapolated twice by an older 0.1 dump).
        let six_and_a_half = crate::hist::bucket_index(6_500_000_000);
        let mut a = Activity {
            first_unix_ns: 0,
            last_unix_ns: 10_000_000_000,
            busy_ns: 900_000_000,
            active_ns: 1_000_000_000,
            gap_hist: Histogram(vec![(six_and_a_half as u32, 2)]),
            ..Activity::default()
        };
        assert_eq!(a.pauses(), (2, 9_000_000_000));
        assert_eq!(a.working_span_ns(), 1_000_000_000);
        assert_eq!(a.busy_share(), Some(0.9));
        // One such pause: its bucket's midpoint, within the bound.
        a.gap_hist = Histogram(vec![(six_and_a_half as u32, 1)]);
        let (count, ns) = a.pauses();
        assert_eq!(count, 1);
        assert!(ns.abs_diff(6_500_000_000) < 300_000_000, "{ns}");
    }

    #[test]
    fn nvlink_peak_is_links_times_the_link_speed() {
        let l = NvLink {
            active_links: 18,
            link_mbytes_per_s: Some(26_562),
        };
        assert_eq!(l.peak_bytes_per_s(), Some(18.0 * 26_562e6));
        let none = NvLink {
            active_links: 0,
            link_mbytes_per_s: Some(26_562),
        };
        assert_eq!(none.peak_bytes_per_s(), None);
    }
}
