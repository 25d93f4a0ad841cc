//! Rules whose evidence is GPU-side: NVML telemetry (link, clocks, ECC, other processes) or
//! CUPTI activity (kernel durations, grid sizes, GPU idle time, unified-memory faults).
//! gpuspy does not collect those yet, so these rules say what they lack rather than guess.

use crate::diagnose::{Layer, Outcome, Rule};
use crate::profile::Profile;

const NVML: &str = "needs NVML telemetry (not collected yet)";
const CUPTI: &str = "needs CUPTI kernel activity (not collected yet)";

macro_rules! needs_gpu_data {
    ($(#[doc = $summary:literal] $name:ident, $id:literal, $layer:ident, $missing:ident, $doc:literal;)*) => {
        $(
            #[doc = $summary]
            pub struct $name;

            impl Rule for $name {
                fn id(&self) -> &'static str {
                    $id
                }
                fn layer(&self) -> Layer {
                    Layer::$layer
                }
                fn doc(&self) -> &'static str {
                    $doc
                }
                fn check(&self, _: &Profile) -> Outcome {
                    Outcome::NoData($missing)
                }
            }
        )*

        #[cfg(test)]
        mod tests {
            use super::*;

            #[test]
            fn each_says_what_it_lacks() {
                let p = Profile::default();
                $(assert!(matches!($name.check(&p), Outcome::NoData(m) if m == $missing));)*
            }
        }
    };
}

needs_gpu_data! {
    /// The PCIe link trained below its maximum.
    PcieLinkDegraded, "pcie-link-degraded", Driver, NVML,
    "The GPU's PCIe link runs below its maximum generation or width, which caps every host-device copy.

Evidence (from NVML, not collected yet): the current and maximum link generation and width.

Fix: reseat the card or move it to a full x16 slot, check the BIOS PCIe settings and
risers, and make sure the link is not in a power-saving state.";

    /// Clocks held down by thermal or power limits.
    ClocksThrottled, "clocks-throttled", Driver, NVML,
    "The GPU's SM clock is held below its maximum by thermal, power or other clock-event reasons.

Evidence (from NVML, not collected yet): SM clock against its maximum, and the active
clock-event reasons over the run.

Fix: cooling and airflow, the power limit (`nvidia-smi -pl`), persistence mode, and
application clocks where the operator allows them.";

    /// ECC disabled.
    EccOff, "ecc-off", Driver, NVML,
    "ECC is disabled on a GPU that supports it: silent memory errors can corrupt results.

Evidence (from NVML, not collected yet): the current ECC mode.

Fix: `nvidia-smi -e 1` and a reboot of the GPU, unless the operator chose otherwise.";

    /// ECC errors counted during the run.
    EccErrors, "ecc-errors", Driver, NVML,
    "The GPU reported ECC errors during the run: a failing memory part, retired pages or a coming failure.

Evidence (from NVML, not collected yet): volatile corrected and uncorrected error counts.

Fix: report to the operator; check retired pages and row remapping (`nvidia-smi -q -d ROW_REMAPPER`).";

    /// Other processes use the same GPU.
    GpuShared, "gpu-shared", Runtime, NVML,
    "Other processes use the same GPU, competing for its time and memory.

Evidence (from NVML, not collected yet): the other processes on the GPU and their memory.

Fix: give the job its own GPU (`CUDA_VISIBLE_DEVICES`), MIG partitions, or MPS for
cooperating processes.";

    /// Grids smaller than the GPU.
    SmallGrid, "small-grid", Compute, CUPTI,
    "Kernels launch grids with fewer blocks than the GPU has SMs, leaving most of it idle.

Evidence (from CUPTI kernel records, not collected yet): grid size per kernel against the
SM count, weighted by kernel time.

Fix: larger batches, or fuse work into fewer, larger kernels. Split-K and persistent
kernels for matrix work.";

    /// Collectives dominate the step.
    CommBound, "comm-bound", Framework, CUPTI,
    "Collective communication (NCCL all-reduce, all-gather, ...) takes most of the step and is not overlapped with compute.

Evidence (from CUPTI records of the NCCL kernels, not collected yet): the GPU time of the
collectives against the step, and the bytes moved against the link's bus bandwidth.

Fix: overlap communication with backward compute (DDP bucketing, `bucket_cap_mb`), use
gradient accumulation to communicate less often, compress (bf16 gradients), check the
topology (`NCCL_DEBUG=INFO`, NVLink vs PCIe).";

    /// The GPU waits for input data.
    InputStarved, "input-starved", Pipeline, CUPTI,
    "The GPU sits idle while the host is outside the driver, typically loading and preparing the next batch.

Evidence (from CUPTI activity, not collected yet): GPU idle gaps between steps against the
host's time outside driver calls.

Fix: `DataLoader(num_workers=N, persistent_workers=True, prefetch_factor=...)`, prefetch
to the GPU on a side stream, decode on the GPU, and cache preprocessed data.";
}

/// Unified memory that migrates on page faults.
pub struct UmFaultHeavy;

impl Rule for UmFaultHeavy {
    fn id(&self) -> &'static str {
        "um-fault-heavy"
    }
    fn layer(&self) -> Layer {
        Layer::Memory
    }
    fn doc(&self) -> &'static str {
        "Unified (managed) memory migrates page by page on faults instead of in bulk, stalling kernels and the host.

Evidence: whether the run allocated managed memory (`cuMemAllocManaged`); without any, no
unified-memory faults are possible and the rule is clear. The fault and migration counts
themselves come from CUPTI's unified-memory counters, which are not collected yet.

Fix: prefetch managed memory to where it is used next (`cudaMemPrefetchAsync`), give
placement hints (`cudaMemAdvise` with `SetPreferredLocation`/`SetReadMostly`), or use
explicit device allocations and copies."
    }
    fn check(&self, p: &Profile) -> Outcome {
        if p.calls("cuMemAllocManaged") == 0 {
            Outcome::Clear
        } else {
            Outcome::NoData("the run allocated managed memory; its fault counts need CUPTI unified-memory counters (not collected yet)")
        }
    }
}

#[cfg(test)]
mod um_tests {
    use super::*;
    use crate::diagnose::synthetic::run;

    #[test]
    fn no_managed_memory_means_no_faults() {
        assert!(matches!(
            UmFaultHeavy.check(&run(1.0).build()),
            Outcome::Clear
        ));
        let managed = run(1.0).api("cuMemAllocManaged", 1, 0.1, 1 << 20).build();
        assert!(matches!(UmFaultHeavy.check(&managed), Outcome::NoData(_)));
    }
}
