use super::gpu_data::*;
use crate::diagnose::{share, Finding, Layer, Outcome, Rule};
use crate::profile::Profile;
use gpuspy_format::gpu::nccl_collective;

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
all kernel time (the rule speaks from half); the top kernels' grid sizes. NCCL kernels
run one block per channel by design and are left out. Impact, an upper bound: for each
top kernel with small grids, its time times the share of SMs it left idle, as if the work
spread over the whole GPU, over the steady-state time (or the working span, if longer;
a run of one tiny kernel has a span of microseconds).

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
            small += crate::kernels::small_grid(a, sms).1;
            kernel += a.kernel_ns;
            span += a.working_span_ns();
            saving += a
                .top_kernels
                .iter()
                .filter(|k| k.max_blocks > 0 && k.max_blocks < u64::from(sms))
                .filter(|k| nccl_collective(&k.name).is_none())
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
        let impact = saving / span.max(p.steady_ns()) as f64;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::{Activity, KernelStat};

    #[test]
    fn small_grids_are_named_with_an_upper_bound() {
        let mut a = activity(4.0);
        a.small_grid_ns = Some(3 * S);
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

    #[test]
    fn one_tiny_kernel_in_a_long_run_costs_little_and_nccl_kernels_none() {
        // examples/staged.py slow-startup: one 2 us kernel; its span is the kernel itself.
        let tiny = KernelStat {
            name: "vectorized_elementwise_kernel".into(),
            calls: 1,
            total_ns: 2_000,
            max_ns: 2_000,
            min_blocks: 1,
            max_blocks: 1,
        };
        let a = Activity {
            first_unix_ns: T0,
            last_unix_ns: T0 + 2_000,
            kernels: 1,
            kernel_ns: 2_000,
            busy_ns: 2_000,
            small_grid_kernels: Some(1),
            small_grid_ns: Some(2_000),
            top_kernels: vec![tiny.clone()],
            ..Activity::default()
        };
        let f = found(check(&SmallGrid, gpu(h200(), None, Some(a.clone()))));
        assert!(f.impact < 1e-6, "{}", f.impact);
        let nccl = Activity {
            top_kernels: vec![KernelStat {
                name: "ncclDevKernel_AllReduce_Sum_f32_RING_LL".into(),
                ..tiny
            }],
            ..a
        };
        assert_eq!(
            found(check(&SmallGrid, gpu(h200(), None, Some(nccl)))).impact,
            0.0
        );
    }
}
