use crate::analysis::phases::{in_steady, IdleKind, SteadyState};
use crate::analysis::rule::{ms, Finding, Input, Layer, Outcome, Rule};
use crate::units::share;
use gpuspy_format::{base_name, SyncCause};

/// Device or pinned memory allocated and freed over and over.
pub struct AllocChurn;

/// Allocation and free calls that go to the driver each time. Stream-ordered pool calls
/// (`cuMemAllocAsync`, `cuMemFreeAsync`) are cheap by design and left out.
const ALLOCS: &[&str] = &[
    "cuMemAlloc",
    "cuMemAllocPitch",
    "cuMemAllocManaged",
    "cuMemAllocHost",
    "cuMemHostAlloc",
    "cuMemHostRegister",
    "cuMemCreate",
];
const FREES: &[&str] = &[
    "cuMemFree",
    "cuMemFreeHost",
    "cuMemHostUnregister",
    "cuMemRelease",
];
const MIN_CALLS: u64 = 100;
const MIN_PER_S: f64 = 10.0;
const MIN_SHARE: f64 = 0.02;

impl Rule for AllocChurn {
    fn id(&self) -> &'static str {
        "alloc-churn"
    }
    fn layer(&self) -> Layer {
        Layer::Memory
    }
    fn doc(&self) -> &'static str {
        "Memory is allocated and freed from the driver inside the loop; `cuMemFree` synchronises the device each time.

Evidence: calls to the driver's allocation functions (`cuMemAlloc`, `cuMemHostAlloc`,
`cuMemAllocManaged`, `cuMemCreate`, ...) and the matching frees, their rate per second, the
time spent in them, and the `free` implicit syncs. Stream-ordered pools (`cuMemAllocAsync`)
are left out. The rule fires at 100 or more such calls, 10 or more a second, taking 2 % or
more of the steady-state time.

Impact: the share of the steady-state time spent allocating and freeing.

With a timeline (dumps of schema 2), the calls are the steady state's (the run's calls in
the proportion of the timeline's allocations and frees that fell in it, and their time in
the same proportion), and where the GPU side is there the impact is the GPU idle time that
began while the host was allocating or freeing, over the steady device time.

Fix: let a caching allocator reuse memory. In PyTorch, keep the caching allocator on
(unset `PYTORCH_NO_CUDA_MEMORY_CACHING`), or use `PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`.
In CuPy, keep the default memory pool. Elsewhere, allocate buffers once outside the loop
and reuse them, or use `cudaMallocAsync` pools."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let sum = |names: &[&str]| -> (u64, u64) {
            names
                .iter()
                .fold((0, 0), |(n, t), a| (n + p.calls(a), t + p.total_ns(a)))
        };
        let (mut allocs, mut alloc_ns) = sum(ALLOCS);
        let (mut frees, mut free_ns) = sum(FREES);
        let (mut steady, mut of_steady) = (p.steady_ns(), "the steady-state time");
        if let Some(s) = input.steady() {
            let fraction = |n| {
                in_steady(
                    n,
                    s.host.allocs + s.host.frees,
                    s.whole.allocs + s.whole.frees,
                )
            };
            (allocs, alloc_ns, frees, free_ns) = (
                fraction(allocs),
                fraction(alloc_ns),
                fraction(frees),
                fraction(free_ns),
            );
            (steady, of_steady) = (s.ns, "the steady state");
        }
        let calls = allocs + frees;
        let per_s = calls as f64 / (steady.max(1) as f64 / 1e9);
        let time_share = share(alloc_ns + free_ns, steady);
        let gpu = input.steady().and_then(|s: &SteadyState| s.gpu.as_ref());
        let impact = gpu.map_or(time_share, |g| g.share(IdleKind::Alloc));
        if calls < MIN_CALLS || per_s < MIN_PER_S || impact < MIN_SHARE {
            return Outcome::Clear;
        }
        let free_syncs = p.sync(SyncCause::Free).map_or(0, |l| l.calls);
        let summary = match gpu {
            Some(_) => format!(
                "The GPU sat idle while the host allocated {:.1} % of {of_steady}. Allocations and frees went to the driver {per_s:.0} times a second. They took {:.1} % of it.",
                impact * 100.0,
                time_share * 100.0
            ),
            None => format!(
                "Allocations and frees went to the driver {per_s:.0} times a second. They took {:.1} % of {of_steady}.",
                time_share * 100.0
            ),
        };
        Outcome::Found(
            Finding::new(
                self,
                impact,
                summary,
                "Keep a caching allocator on (unset PYTORCH_NO_CUDA_MEMORY_CACHING; CuPy's memory pool); allocate buffers once and reuse them; or cudaMallocAsync pools.",
            )
            .evidence("allocations", allocs)
            .evidence("frees", frees)
            .evidence("calls_per_s", (per_s * 10.0).round() / 10.0)
            .evidence("alloc_ms", ms(alloc_ns))
            .evidence("free_ms", ms(free_ns))
            .evidence("free_syncs", free_syncs)
            .call_sites(p, alloc_ns + free_ns, |s| {
                let api = base_name(&s.api);
                ALLOCS.contains(&api) || FREES.contains(&api)
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;

    #[test]
    fn allocating_in_the_loop_fires() {
        let p = run(1.0)
            .api("cuMemAlloc", 1000, 100.0, 1 << 30)
            .api("cuMemFree", 1000, 150.0, 0)
            .sync(SyncCause::Free, 1000, 150.0)
            .build();
        let Outcome::Found(f) = AllocChurn.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert_eq!(f.layer, Layer::Memory);
        assert!((f.impact - 0.25).abs() < 0.01);
        assert_eq!(f.evidence["free_syncs"], 1000);
    }

    #[test]
    fn pools_and_one_time_allocations_do_not() {
        let pooled = run(1.0)
            .api("cuMemAllocAsync", 5000, 50.0, 0)
            .api("cuMemFreeAsync", 5000, 50.0, 0)
            .build();
        assert!(matches!(
            AllocChurn.check(&Input::new(&pooled)),
            Outcome::Clear
        ));
        let upfront = run(10.0).api("cuMemAlloc", 20, 200.0, 1 << 30).build();
        assert!(matches!(
            AllocChurn.check(&Input::new(&upfront)),
            Outcome::Clear
        ));
    }
}
