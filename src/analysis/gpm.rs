//! What the SMs did while kernels ran, from NVML GPM (docs/diagnosis.md, "How much of the
//! GPU the kernels used"): each device's figures as shares of its working span, beside
//! its busy share, and the job's.

use crate::analysis::kernels;
use crate::analysis::profile::Profile;
use gpuspy_format::gpu::Device;
use serde::Serialize;

/// GPM figures as shares (0 to 1) of a working span; None where GPM did not measure one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct GpmShares {
    /// SM cycles with at least one warp resident.
    pub sm_active_share: Option<f64>,
    /// Resident warps over the most the SMs can hold.
    pub sm_occupancy_share: Option<f64>,
    /// Cycles the tensor pipes worked, any precision.
    pub tensor_active_share: Option<f64>,
    /// DRAM bandwidth used over its peak.
    pub dram_bw_share: Option<f64>,
}

/// A device's GPM shares over `[from, to)` (Unix ns), of which `working_ns` is working
/// time: the means of the telemetry series over the range, scaled from the range to its
/// working time (GPM reads about 0 in pauses), so that they compare with the busy share.
/// None without a GPM series.
pub fn shares_in(d: &Device, from: u64, to: u64, working_ns: u64) -> Option<GpmShares> {
    let s = &d.telemetry.as_ref()?.series;
    if s.sm_active_pct.is_empty() || working_ns == 0 {
        return None;
    }
    let scale = to.saturating_sub(from) as f64 / working_ns as f64;
    let share = |column: &[f32]| {
        s.mean_in(column, from, to)
            .map(|pct| (pct / 100.0 * scale).min(1.0))
    };
    Some(GpmShares {
        sm_active_share: share(&s.sm_active_pct),
        sm_occupancy_share: share(&s.sm_occupancy_pct),
        tensor_active_share: share(&s.tensor_active_pct),
        dram_bw_share: share(&s.dram_bw_util_pct),
    })
}

/// A device's GPM shares over its whole activity span.
pub fn device_shares(d: &Device) -> Option<GpmShares> {
    let a = d.activity.as_ref()?;
    shares_in(d, a.first_unix_ns, a.last_unix_ns, a.working_span_ns())
}

/// DRAM bandwidth at or above this share of its peak, over the working span, makes a
/// GPU-bound run memory-bandwidth-bound: an fp32 elementwise loop on the H200 read
/// (bench/results/gpu-2026-11-30-gpm) well above it, a bf16 matmul loop far below.
pub const MEMORY_BOUND_DRAM: f64 = 0.70;
/// Matmul kernels holding at least this share of kernel time make the work matmul-heavy.
pub const MATMUL_HEAVY: f64 = 0.5;
/// Tensor pipes active less than this share of the working span, on matmul-heavy work,
/// is low: matmuls in fp32 without TF32, or shapes the tensor-core kernels cannot take.
pub const LOW_TENSOR: f64 = 0.10;

/// How much of the GPU the job's kernels used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuUse {
    #[serde(flatten)]
    pub shares: GpmShares,
    /// Matmul kernels' share of kernel time (`kernels::is_matmul` on the top kernels).
    pub matmul_share: Option<f64>,
    /// DRAM bandwidth at or above `MEMORY_BOUND_DRAM`.
    pub memory_bound: bool,
    /// Matmul-heavy work (`MATMUL_HEAVY`) with tensor pipes below `LOW_TENSOR`.
    pub low_tensor_use: bool,
}

/// Over every device with GPM figures and CUPTI activity, each share weighted by the
/// device's working span; None where no device has them.
pub fn gpu_use(p: &Profile) -> Option<GpuUse> {
    let mut sums = [(0.0, 0u64); 4];
    let (mut matmul_ns, mut kernel_ns) = (0.0, 0u64);
    let mut any = false;
    for (_, d, a) in p.gpu_activity() {
        kernel_ns += a.kernel_ns;
        matmul_ns += kernels::matmul_share(a).unwrap_or(0.0) * a.kernel_ns as f64;
        let Some(s) = device_shares(d) else { continue };
        any = true;
        let span = a.working_span_ns();
        let fields = [
            s.sm_active_share,
            s.sm_occupancy_share,
            s.tensor_active_share,
            s.dram_bw_share,
        ];
        for ((sum, weight), v) in sums.iter_mut().zip(fields) {
            if let Some(v) = v {
                *sum += v * span as f64;
                *weight += span;
            }
        }
    }
    if !any {
        return None;
    }
    let [sm_active, sm_occupancy, tensor_active, dram_bw] =
        sums.map(|(sum, weight)| (weight > 0).then(|| sum / weight as f64));
    let matmul_share = (kernel_ns > 0).then(|| matmul_ns / kernel_ns as f64);
    Some(GpuUse {
        shares: GpmShares {
            sm_active_share: sm_active,
            sm_occupancy_share: sm_occupancy,
            tensor_active_share: tensor_active,
            dram_bw_share: dram_bw,
        },
        matmul_share,
        memory_bound: dram_bw.is_some_and(|d| d >= MEMORY_BOUND_DRAM),
        low_tensor_use: matmul_share.is_some_and(|m| m >= MATMUL_HEAVY)
            && tensor_active.is_some_and(|t| t < LOW_TENSOR),
    })
}
