use super::gpu_data::*;
use crate::analysis::collectives::{collectives, link_peak};
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule};
use crate::units::share;

/// Collectives dominate the step.
pub struct CommBound;

/// NCCL kernel time over the working span from which the rule speaks.
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

Evidence (CUPTI kernel records): the time of NCCL kernels (`ncclDevKernel_*`, all of them,
by collective) net of waiting for a straggler (each collective's least time on one rank,
once per rank: an NCCL kernel spins until every rank has arrived, and that wait is
`rank-straggler`'s), against the working span (the activity span less pauses of 1 s or
more; the rule speaks from 30 %), the bytes the NCCL
calls moved, and the bus bandwidth of the busiest collective against the link's peak
(NVLink or PCIe, from NVML). A low share of the peak means the time goes to waiting for
other ranks (see `rank-straggler`) or to small messages, not to the link. Impact: the
NCCL kernel time's share of the working span.

Fix: overlap communication with backward compute (DDP bucketing, `bucket_cap_mb`), use
gradient accumulation to communicate less often, compress (bf16 gradients), check the
topology (`NCCL_DEBUG=INFO`, NVLink vs PCIe)."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let mut any = false;
        let mut span = 0u64;
        for (_, _, a) in p.gpu_activity() {
            any = true;
            span += a.working_span_ns();
        }
        if !any {
            return Outcome::NoData(NO_ACTIVITY);
        }
        let collectives = collectives(p);
        let nccl: u64 = collectives.iter().map(|c| c.transfer_ns).sum();
        let waited: u64 = collectives.iter().map(|c| c.kernel_ns).sum::<u64>() - nccl;
        let comm = share(nccl, span);
        if comm < COMM_SHARE {
            return Outcome::Clear;
        }
        let bytes: u64 = p.nccl_ops.values().map(|&(_, b)| b).sum();
        let mut f = Finding::new(
            self,
            comm,
            format!("NCCL kernels took {} of the GPU working span.", pct(comm)),
            "Overlap communication with compute (DDP bucket_cap_mb), communicate less often (gradient accumulation), compress gradients.",
        )
        .evidence("nccl_kernel_ns", nccl)
        .evidence("nccl_wait_ns", waited)
        .evidence("span_ns", span)
        .evidence("nccl_bytes", bytes);
        let busiest = collectives.into_iter().max_by_key(|c| c.kernel_ns);
        if let Some((c, busbw)) = busiest.and_then(|c| c.busbw.map(|b| (c, b))) {
            f = f
                .evidence("busiest_collective", c.op)
                .evidence("busbw_bytes_per_s", busbw.round());
            if let Some((peak, link)) = link_peak(p) {
                f.summary += &format!(
                    " The busiest, {}, reached {} of the {link} peak.",
                    f.evidence["busiest_collective"]
                        .as_str()
                        .unwrap_or_default(),
                    pct(busbw / peak)
                );
                f = f.evidence("link_peak_bytes_per_s", peak.round());
            }
        }
        Outcome::Found(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rules::gpu_data::fixtures::*;

    use crate::analysis::diagnose::synthetic::run;
    use gpuspy_format::gpu::CollectiveKernels;

    #[test]
    fn nccl_kernels_that_dominate_make_the_run_comm_bound() {
        let mut a = activity(6.0);
        a.collectives = vec![CollectiveKernels {
            op: "AllReduce".into(),
            calls: 10,
            total_ns: 4 * S,
        }];
        let mut p = run(10.0).gpu(gpu(h200(), None, Some(a))).build();
        // 4 GiB in 4 s of kernels on one rank of two: 1.07 GB/s, about 2 % of PCIe gen5 x16.
        p.nccl_ops
            .insert(("AllReduce".into(), "float32".into()), (10, 4 << 30));
        p.communicators.entry("c".into()).or_default().nranks = 2;
        let Outcome::Found(f) = CommBound.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.4).abs() < 1e-9);
        assert_eq!(f.evidence["busbw_bytes_per_s"], (4u64 << 30) as f64 / 4.0);
        assert!(
            f.summary
                .ends_with("The busiest, AllReduce, reached 1.7 % of the PCIe peak."),
            "{}",
            f.summary
        );
        assert!(matches!(
            check(&CommBound, gpu(h200(), None, Some(activity(6.0)))),
            Outcome::Clear
        ));
        // Two ranks: 4 s of all-reduce kernels on one, 0.5 s on the other. The 3.5 s the
        // first spent waiting for the second is not communication: 1 s of 20 s is 5 %.
        let mut waiting = activity(6.0);
        waiting.collectives = vec![CollectiveKernels {
            op: "AllReduce".into(),
            calls: 10,
            total_ns: 4 * S,
        }];
        let mut p = run(10.0).gpu(gpu(h200(), None, Some(waiting))).build();
        let mut other = p.processes[0].clone();
        other.gpu.as_mut().unwrap().devices[0]
            .activity
            .as_mut()
            .unwrap()
            .collectives[0]
            .total_ns = S / 2;
        p.processes.push(other);
        assert!(matches!(CommBound.check(&Input::new(&p)), Outcome::Clear));
    }
}
