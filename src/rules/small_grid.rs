use super::gpu_data::*;
use crate::diagnose::{share, Finding, Layer, Outcome, Rule};
use crate::profile::Profile;

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
            span += a.span_ns();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::KernelStat;

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
}
