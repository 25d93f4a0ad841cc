use super::gpu_data::short_idle_share;
use crate::diagnose::{ms, share, Finding, Layer, Outcome, Rule};
use crate::phases::{IdleKind, SteadyState};
use crate::profile::{Profile, LAUNCH_APIS};
use gpuspy_format::SyncCause;

/// So many small kernels that launching them is the bottleneck.
pub struct LaunchBound;

const MIN_LAUNCHES: u64 = 1000;
/// A launch every 100 us or more often.
const MIN_PER_S: f64 = 10_000.0;
/// The syncs that block the host until the GPU has caught up.
const CAUSES: [SyncCause; 2] = [SyncCause::Explicit, SyncCause::SyncCopy];

impl Rule for LaunchBound {
    fn id(&self) -> &'static str {
        "launch-bound"
    }
    fn layer(&self) -> Layer {
        Layer::Compute
    }
    fn doc(&self) -> &'static str {
        "Kernels are launched one by one at a high rate; each launch costs microseconds of host time, so small kernels leave the GPU idle between them.

Evidence: kernel launches (`cuLaunchKernel`, `cuLaunchKernelEx`,
`cuLaunchCooperativeKernel`; graph launches are not counted), their rate per second of the
steady-state time, and the host time spent inside the launch calls. The rule fires at 1,000
or more launches at 10,000 or more a second, that is, a launch every 100 us or more often.
A PyTorch eager op costs 5–15 us of host time, so such a loop is launch-bound whatever the
GPU could do.

A host that spends half the steady-state time or more blocked in explicit syncs and
synchronous copies is waiting for a busy GPU, so the rule does not fire then. Waits inside
pageable `*Async` copies do not count towards that half (they are `pageable-memcpy`'s
evidence), so a run blocked mostly there can be found launch-bound too.

Impact: the share of the steady-state time spent inside launch calls, but no more than the
time the host was not blocked. It is a lower bound where the GPU idles: CUDA graphs also
remove the framework's per-op host work. Faster launching can only give back time the GPU
spent idle in short gaps, so with CUPTI busy time the impact is also capped by the share
of the working span the GPU sat idle, less the gaps of 1 ms or more (the host busy
elsewhere: `input-starved`).
Without it the finding is a heuristic: large kernels at a high rate would keep the GPU busy.

With a timeline (dumps of schema 2), the launches, their rate and their time are the
steady state's (docs/diagnosis.md, \"Phases\"), and where the GPU side is there the impact is
the GPU idle time that began while the host was launching or between launches in windows
launching 10,000 or more a second (or spending half the window in launch calls), over the
steady device time: the time a CUDA graph or fused kernels give back, including the
framework's per-op host work between launches.

Fix: launch fewer, larger units of work. Capture the step in a CUDA graph
(`torch.cuda.CUDAGraph`, `torch.compile(mode=\"reduce-overhead\")`), fuse elementwise ops
(`torch.compile`), or increase the batch size."
    }
    fn check(&self, p: &Profile) -> Outcome {
        if let Some(s) = crate::phases::steady(p) {
            return self.on_steady(p, &s);
        }
        let steady = p.steady_ns();
        let (launches, launch_ns) = LAUNCH_APIS
            .iter()
            .fold((0, 0), |(n, t), a| (n + p.calls(a), t + p.total_ns(a)));
        let per_s = launches as f64 / (steady as f64 / 1e9);
        let blocked: u64 = CAUSES
            .iter()
            .filter_map(|&c| p.sync(c))
            .map(|l| l.total_ns)
            .sum();
        if launches < MIN_LAUNCHES || per_s < MIN_PER_S || share(blocked, steady) >= 0.5 {
            return Outcome::Clear;
        }
        let idle = short_idle_share(p);
        let bound = share(launch_ns.min(steady.saturating_sub(blocked)), steady);
        let launch_share = idle.map_or(bound, |i| bound.min(i));
        let f = Finding::new(
                self,
                launch_share,
                format!(
                    "{launches} kernel launches at {per_s:.0}/s (one every {:.1} us); launching alone took {:.1} % of the steady-state time",
                    1e6 / per_s,
                    launch_share * 100.0
                ),
                FIX,
            )
            .evidence("launches", launches)
            .evidence("launches_per_s", per_s.round())
            .evidence("launch_ms", ms(launch_ns))
            .evidence("steady_ms", ms(steady))
            .evidence("graph_launches", p.calls("cuGraphLaunch"))
            .evidence("gpu_short_idle_share", idle.unwrap_or(f64::NAN));
        Outcome::Found(if idle.is_some() { f } else { f.heuristic() })
    }
}

impl LaunchBound {
    /// The judgement on the steady state of a timeline.
    fn on_steady(&self, p: &Profile, s: &SteadyState) -> Outcome {
        let h = &s.host;
        let per_s = s.per_s(h.launches);
        let blocked = h.blocked_ns(&CAUSES);
        if h.launches < MIN_LAUNCHES || per_s < MIN_PER_S {
            return Outcome::Clear;
        }
        let impact = match &s.gpu {
            Some(g) => g.share(IdleKind::Launch),
            None if share(blocked, s.ns) >= 0.5 => return Outcome::Clear,
            None => share(h.launch_ns.min(s.ns.saturating_sub(blocked)), s.ns),
        };
        let f = Finding::new(
            self,
            impact,
            format!(
                "{} kernel launches at {per_s:.0}/s (one every {:.1} us) in the steady state; {}",
                h.launches,
                1e6 / per_s,
                match s.gpu {
                    Some(_) => format!(
                        "the GPU sat idle between them {:.1} % of it",
                        impact * 100.0
                    ),
                    None => format!("launching alone took {:.1} % of it", impact * 100.0),
                }
            ),
            FIX,
        )
        .evidence("launches", h.launches)
        .evidence("launches_per_s", per_s.round())
        .evidence("launch_ms", ms(h.launch_ns))
        .evidence("steady_ms", ms(s.ns))
        .evidence("graph_launches", p.calls("cuGraphLaunch"));
        Outcome::Found(match &s.gpu {
            Some(g) => f.evidence("gpu_launch_idle_share", g.share(IdleKind::Launch)),
            None => f.heuristic(),
        })
    }
}

const FIX: &str = "Capture the step in a CUDA graph (torch.cuda.CUDAGraph, torch.compile(mode=\"reduce-overhead\")), fuse ops (torch.compile), or use larger batches.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::{synthetic::run, Severity};

    #[test]
    fn a_stream_of_small_launches_fires() {
        // 40,000 launches of 4 us each in 0.5 s: 80,000/s.
        let p = run(0.5).api("cuLaunchKernel", 40_000, 160.0, 0).build();
        let Outcome::Found(f) = LaunchBound.check(&p) else {
            panic!("no finding")
        };
        assert_eq!(f.layer, Layer::Compute);
        assert_eq!(f.severity, Severity::Warning);
        assert!((f.impact - 0.32).abs() < 0.01);
        assert!(f.heuristic);
    }

    #[test]
    fn a_host_waiting_on_a_busy_gpu_is_not_launch_bound() {
        let p = run(0.5)
            .api("cuLaunchKernel", 40_000, 100.0, 0)
            .sync(SyncCause::Explicit, 100, 300.0)
            .build();
        assert!(matches!(LaunchBound.check(&p), Outcome::Clear));
    }

    #[test]
    fn few_large_launches_or_graph_replays_do_not() {
        let matmuls = run(5.0).api("cuLaunchKernelEx", 500, 2.0, 0).build();
        assert!(matches!(LaunchBound.check(&matmuls), Outcome::Clear));
        let graphs = run(1.0).api("cuGraphLaunch", 5_000, 20.0, 0).build();
        assert!(matches!(LaunchBound.check(&graphs), Outcome::Clear));
    }
}
