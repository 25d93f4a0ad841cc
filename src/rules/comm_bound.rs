use super::gpu_data::*;
use crate::diagnose::{share, Finding, Layer, Outcome, Rule};
use crate::profile::Profile;

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
            span += a.span_ns();
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
    use crate::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::KernelStat;

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
