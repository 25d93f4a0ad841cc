use super::framework::{framework, Framework};
use super::gpu_data::short_idle_share;
use crate::analysis::phases::{at, IdleKind, SteadyGpu, SteadyState};
use crate::analysis::profile::{Profile, LAUNCH_APIS};
use crate::analysis::rule::{ms, Finding, Input, Layer, Outcome, Rule, Severity};
use crate::units::share;
use gpuspy_format::timeline::IdleCause;
use gpuspy_format::SyncCause;

/// So many small kernels that launching them is the bottleneck.
pub struct LaunchBound;

const MIN_LAUNCHES: u64 = 1000;
/// A launch every 100 us or more often.
const MIN_PER_S: f64 = 10_000.0;
/// The least GPU idle time a launch leaves, on average, for the GPU to have waited on
/// launches: about the cost of launching an empty kernel. Shorter gaps are the bubbles
/// between kernels already queued (the shim's `BUBBLE_NS`).
const MIN_WAIT_PER_LAUNCH_NS: f64 = 5_000.0;
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

Impact: what the printed fix saves, and the fix is the framework's own. The framework is
the one whose installed package (`jax`, `cupy`, `torch`) holds the innermost frame of most
captured Python calls; a transformers or Lightning loop is PyTorch's.
- JAX and CuPy: fuse or compile the step (`jax.jit`, `cupy.fuse`). With a timeline whose
  GPU side is there, the impact is the GPU idle time in gaps under 1 ms that began while the
  host launched or did the framework's per-op work between launches, plus the kernels' fixed
  cost (up to 1 µs a launch, what an elementwise kernel of a few thousand elements takes on
  the H200), over the steady device time: a fused step dispatches a few kernels, not one per
  op.
- PyTorch, and a program without Python call sites: capture the step in a CUDA graph. The
  impact is the GPU idle time that began while the host was launching or between launches,
  in gaps under 1 ms, in windows launching 10,000 or more a second (or spending half the
  window in launch calls), over the steady device time: the launches a graph replays.

The GPU waits on launches only if the idle between launches comes to 5 µs or more a launch,
about what launching an empty kernel costs (2.9-3.7 µs on the H200): below it the gaps are
the bubbles a GPU leaves between kernels already queued, and a CUDA graph would not fill
them. A training step of large matmuls at 24,000 launches a second, its GPU busy 91-94 %,
read 6-7 % launch-bound on the H200 from gaps of 2.5-3 µs a launch (p50 1.6 µs).
Launching is the loop's bottleneck only if the GPU waits between launches at least half as
long as it runs kernels. Below that the GPU is busy first, and the finding is information,
not a warning: a training loop of matmuls that checkpoints, busy 82 % and idle between
launches 12 % at 5.7 µs a launch on the H200, keeps ahead of its GPU on average.

Where it fails: a host that launches faster than one every 5 µs (C++, not Python) can wait
on launches in shorter gaps; a framework called through C++ extensions only gets the CUDA
graph fix. Sampling can leave a short loop's own windows unrecorded (a loop that began as a
recording slot ended); then the kernels CUPTI recorded in windows launching at the rule's
rate (100 kernels or more) give the GPU time per launch, and the impact is the larger of the
launch calls' share and the idle those kernels leave, less the host's other driver time (a
heuristic). Without a GPU side, the impact is the share of the steady-state time spent
inside launch calls, but no more than the time the host was not blocked (a heuristic: large
kernels at a high rate would keep the GPU busy).

Fix: JAX, `jax.jit` of the step; CuPy, `cupy.fuse` or `cupy.ElementwiseKernel`; PyTorch, a
CUDA graph (`torch.cuda.CUDAGraph`, `torch.compile(mode=\"reduce-overhead\")`); elsewhere, a
CUDA graph or fewer, larger kernels."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        if let Some(s) = input.steady() {
            return self.on_steady(p, s);
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
                    "The host launched a kernel every {:.1} us. Launching took {:.1} % of the steady state.",
                    1e6 / per_s,
                    launch_share * 100.0
                ),
                Fix::for_framework(framework(p)).text,
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
        // Only a steady state without its GPU side needs the kernels recorded elsewhere.
        let kernel_ns = s
            .gpu
            .is_none()
            .then(|| busy_per_kernel_at_launch_rate(p))
            .flatten();
        let fix = Fix::for_framework(framework(p));
        let (impact, said, waiting) = match &s.gpu {
            Some(g) => {
                let idle = g.share(IdleKind::Launch);
                // The idle per launch, as a rate over the device time recorded.
                let per_launch = idle * s.ns as f64 / h.launches as f64;
                if per_launch < MIN_WAIT_PER_LAUNCH_NS {
                    return Outcome::Clear;
                }
                let waiting = idle >= MIN_IDLE_OVER_BUSY * share(g.busy_ns, g.ns);
                let saves = fix.saves(s, g);
                let mut said = format!(
                    "The GPU sat idle between launches {:.1} % of the steady state.",
                    idle * 100.0
                );
                if saves > idle {
                    said.push_str(&format!(
                        " Per-op dispatch and the kernels' fixed cost took another {:.1} % of it.",
                        (saves - idle) * 100.0
                    ));
                }
                (saves, said, waiting)
            }
            None if share(blocked, s.ns) >= 0.5 => return Outcome::Clear,
            None => {
                let (impact, said) = without_gpu_side(s, blocked, kernel_ns);
                (impact, said, true)
            }
        };
        let mut f = Finding::new(
            self,
            impact,
            format!(
                "The host launched a kernel every {:.1} us. {said}",
                1e6 / per_s
            ),
            fix.text,
        )
        .evidence("launches", h.launches)
        .evidence("launches_per_s", per_s.round())
        .evidence("launch_ms", ms(h.launch_ns))
        .evidence("steady_ms", ms(s.ns))
        .evidence("graph_launches", p.calls("cuGraphLaunch"))
        .evidence("fix", fix.kind.name());
        if !waiting {
            f.severity = Severity::Info;
        }
        Outcome::Found(match &s.gpu {
            Some(g) => f.evidence("gpu_launch_idle_share", g.share(IdleKind::Launch)),
            None => f
                .evidence(
                    "kernel_us_at_launch_rate",
                    kernel_ns.map_or(f64::NAN, |k| k / 1e3),
                )
                .heuristic(),
        })
    }
}

/// The impact, and what it is, of a steady state without its GPU side: the launch calls'
/// share of the time the host was not `blocked`, or where CUPTI recorded kernels at the
/// loop's rate elsewhere (`kernel_ns` each), the idle the steady state's launches leave at
/// that, less the host's other driver time (syncs, allocations, copies: other rules'), if
/// larger.
fn without_gpu_side(s: &SteadyState, blocked: u64, kernel_ns: Option<f64>) -> (f64, String) {
    let h = &s.host;
    let launching = share(h.launch_ns.min(s.ns.saturating_sub(blocked)), s.ns);
    let said = format!(
        "Launching took {:.1} % of the steady state.",
        launching * 100.0
    );
    let Some(k) = kernel_ns else {
        return (launching, said);
    };
    let busy = k * h.launches as f64 / s.ns.max(1) as f64;
    let other = share(h.driver_ns.saturating_sub(h.launch_ns), s.ns);
    let idle = (1.0 - busy).min(1.0 - other).max(0.0);
    if idle <= launching {
        return (launching, said);
    }
    let said = format!(
        "Where CUPTI recorded this rate, a kernel took {:.2} us. At that, the GPU sat idle about {:.1} % of the steady state.",
        k / 1e3,
        idle * 100.0
    );
    (idle, said)
}

/// Kernels CUPTI recorded in windows launching at the rule's rate, fewer than this, say
/// too little about the loop's kernels.
const MIN_KERNELS_AT_RATE: u64 = 100;

/// The GPU's busy time per kernel in the windows where CUPTI recorded and the host
/// launched `MIN_PER_S` or more a second: what a launch-bound loop's kernels take. Sampling
/// can leave a short loop's own windows unrecorded: on the H200 a 0.3 s launch-bound loop
/// that began as a recording slot ended had 10-16 ms of its first window recorded, then
/// none (bench/results/gpu-2026-12-01-run15-phases-12).
fn busy_per_kernel_at_launch_rate(p: &Profile) -> Option<f64> {
    let windows = p
        .processes
        .iter()
        .filter_map(|x| x.timeline.as_deref())
        .flat_map(|t| {
            let floor = MIN_PER_S * t.window_ns as f64 / 1e9;
            let launching = move |i: usize| at(&t.host.launches, i) as f64 >= floor;
            t.devices.iter().flat_map(move |d| {
                (0..d.kernels.len())
                    .filter(move |&i| launching(i) && at(&d.observed_ns, i) > 0)
                    .map(move |i| (at(&d.busy_ns, i), d.kernels[i]))
            })
        });
    let (busy, kernels) = windows.fold((0u64, 0u64), |(b, k), (x, y)| (b + x, k + y));
    (kernels >= MIN_KERNELS_AT_RATE).then(|| busy as f64 / kernels as f64)
}

/// A kernel's own fixed cost on the device: what a kernel of a few thousand elements takes
/// (0.8 us for CuPy's and XLA's elementwise kernels on the H200,
/// bench/results/gpu-2026-12-03-reallib-6). Fusing ops saves up to this much GPU time per
/// launch; the rest of a kernel's time is work the fused kernel still does.
const KERNEL_FIXED_NS: f64 = 1_000.0;

/// The GPU idle time between launches, as a share of the kernels' busy time, from which
/// launching is the loop's bottleneck: the GPU waits at least half as long for each launch
/// as it runs its kernel. Below it the GPU runs kernels two thirds or more of the time it
/// is not idle for other reasons; its gaps between launches are a host that keeps ahead on
/// average and falls behind at times (a training loop of matmuls that checkpoints, busy 82
/// %, idle between launches 12 %, on the H200), and the finding is informational.
const MIN_IDLE_OVER_BUSY: f64 = 0.5;

/// What the printed fix removes, so what the impact sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FixKind {
    /// A CUDA graph replays the launches without the host: it gives back the GPU's idle
    /// time between launches.
    Graph,
    /// Fusing or compiling the step (`jax.jit`, `cupy.fuse`) leaves a few kernels where
    /// there were many: it also gives back the framework's per-op dispatch between the
    /// launches and most of the tiny kernels' own time.
    Fusion,
}

impl FixKind {
    fn name(self) -> &'static str {
        match self {
            FixKind::Graph => "graph",
            FixKind::Fusion => "fusion",
        }
    }
}

/// The fix launch-bound prints, the framework's own.
struct Fix {
    kind: FixKind,
    text: &'static str,
}

impl Fix {
    fn for_framework(f: Option<Framework>) -> Fix {
        let (kind, text) = match f {
            Some(Framework::Jax) => (FixKind::Fusion, JAX_FIX),
            Some(Framework::CuPy) => (FixKind::Fusion, CUPY_FIX),
            Some(Framework::Torch) => (FixKind::Graph, TORCH_FIX),
            None => (FixKind::Graph, GRAPH_FIX),
        };
        Fix { kind, text }
    }

    /// The share of the steady device time the fix gives back.
    fn saves(&self, s: &SteadyState, g: &SteadyGpu) -> f64 {
        let launching = g.share(IdleKind::Launch);
        match self.kind {
            FixKind::Graph => launching,
            FixKind::Fusion => dispatch_idle(g).max(launching) + fixed_kernel_time(s, g),
        }
    }
}

/// The share of the steady device time the GPU sat idle in gaps under `LONG_GAP_NS` while
/// the host worked outside a sync (launching, or the framework's per-op work between
/// launches): the dispatch a fused step no longer does. Longer gaps are the host busy
/// elsewhere (`input-starved`). Dumps without the gap series give the launch idle alone.
fn dispatch_idle(g: &SteadyGpu) -> f64 {
    if g.short_gaps + g.long_gaps == 0 {
        return g.share(IdleKind::Launch);
    }
    let host = [IdleKind::Launch, IdleKind::Host]
        .iter()
        .filter_map(|k| g.idle.get(k))
        .sum::<u64>();
    let long: u64 = g
        .long_idle
        .iter()
        .filter(|((cause, _), _)| *cause == IdleCause::Host)
        .map(|(_, ns)| ns)
        .sum();
    share(host.saturating_sub(long), g.ns)
}

/// The share of the steady device time the kernels spent on their fixed cost, up to
/// `KERNEL_FIXED_NS` per launch in the recorded device time (the host's launches brought
/// to it), at most their busy time.
fn fixed_kernel_time(s: &SteadyState, g: &SteadyGpu) -> f64 {
    let kernels = s.host.launches as f64 * g.ns as f64 / s.ns.max(1) as f64;
    (kernels * KERNEL_FIXED_NS).min(g.busy_ns as f64) / g.ns.max(1) as f64
}

const JAX_FIX: &str = "Compile the step with jax.jit: XLA fuses its ops into a few kernels and dispatches them at once.";
const CUPY_FIX: &str =
    "Fuse the elementwise ops into one kernel: cupy.fuse or cupy.ElementwiseKernel.";
const TORCH_FIX: &str = "Capture the step in a CUDA graph: torch.cuda.CUDAGraph, or torch.compile(mode=\"reduce-overhead\").";
const GRAPH_FIX: &str = "Capture the step in a CUDA graph (cudaStreamBeginCapture, cudaGraphLaunch), or launch fewer, larger kernels.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use gpuspy_format::timeline::GapEnd;

    #[test]
    fn a_stream_of_small_launches_fires() {
        // 40,000 launches of 4 us each in 0.5 s: 80,000/s.
        let p = run(0.5).api("cuLaunchKernel", 40_000, 160.0, 0).build();
        let Outcome::Found(f) = LaunchBound.check(&Input::new(&p)) else {
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
        assert!(matches!(LaunchBound.check(&Input::new(&p)), Outcome::Clear));
    }

    /// A run of 300 ms of CUDA init, a last start-up window launching `at_start` kernels
    /// while CUPTI recorded it (1 us of GPU time each), then 40 windows of 10 ms launching
    /// 1,200 kernels each (120,000/s), 4 ms of them in launch calls and `other` in other
    /// driver calls, with no GPU record: its finding.
    fn loop_unrecorded(at_start: u64, other: u64) -> Finding {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        use gpuspy_format::timeline::DeviceWindows;
        let mut w = times(
            30,
            W {
                init_ns: 10 * MS,
                ..W::default()
            },
        );
        w.push(W {
            init_ns: 9 * MS,
            launches: at_start,
            ..W::default()
        });
        w.extend(times(
            40,
            W {
                launches: 1_200,
                launch_ns: 4 * MS,
                driver_ns: other,
                ..W::default()
            },
        ));
        let mut t = timeline(&w, false);
        let mut recorded = vec![0; w.len()];
        recorded[30] = 10 * MS;
        let at = |n: u64| {
            let mut v = vec![0; w.len()];
            v[30] = n;
            v
        };
        t.devices = vec![DeviceWindows {
            observed_ns: recorded,
            busy_ns: at(at_start * 1_000),
            kernels: at(at_start),
            ..DeviceWindows::default()
        }];
        let mut p = run(0.71).build();
        attach(&mut p, t);
        let s = crate::analysis::phases::fixtures::steady(&p).expect("a steady state");
        assert_eq!((s.ns, s.host.launches, s.gpu), (400 * MS, 48_000, None));
        let Outcome::Found(f) = LaunchBound.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert!(f.heuristic);
        f
    }

    #[test]
    fn a_loop_left_unrecorded_is_judged_by_the_kernels_recorded_at_its_rate() {
        // 1,200 kernels of 1 us recorded at the loop's rate: 48,000 of them keep the GPU busy
        // 12 % of the 400 ms, idle 88 %, more than the 40 % in launch calls.
        let f = loop_unrecorded(1_200, 0);
        assert!((f.impact - 0.88).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.evidence["kernel_us_at_launch_rate"], 1.0);
        assert!(
            f.summary.contains("idle about 88.0 % of the steady state"),
            "{}",
            f.summary
        );
        // The host's other driver calls (allocations, say) are another rule's time.
        let f = loop_unrecorded(1_200, 5 * crate::analysis::phases::fixtures::MS);
        assert!((f.impact - 0.5).abs() < 1e-9, "{}", f.impact);
        // 50 kernels recorded at 5,000 launches a second say nothing of the loop's: the
        // launch calls' time stands.
        let f = loop_unrecorded(50, 0);
        assert!((f.impact - 0.4).abs() < 1e-9, "{}", f.impact);
        assert!(
            f.evidence["kernel_us_at_launch_rate"].is_null(),
            "{}",
            f.evidence["kernel_us_at_launch_rate"]
        );
        assert!(
            f.summary
                .contains("Launching took 40.0 % of the steady state."),
            "{}",
            f.summary
        );
    }

    /// 40 windows of 10 ms launching 250 kernels each (25,000/s), the GPU busy in each
    /// but `idle` with the host outside a sync: its launch-bound outcome.
    fn launching_with_idle(idle: u64) -> Outcome {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        let w = W {
            launches: 250,
            launch_ns: MS,
            busy_ns: 10 * MS - idle,
            idle_host: idle,
            ..W::default()
        };
        let mut p = run(0.4).build();
        attach(&mut p, timeline(&times(40, w), true));
        LaunchBound.check(&Input::new(&p))
    }

    #[test]
    fn a_busy_gpu_is_not_launch_bound_for_the_bubbles_between_queued_kernels() {
        use crate::analysis::phases::fixtures::MS;
        // Idle 7 % at 25,000 launches a second: 2.8 µs a launch, the GPU's own gap between
        // kernels already queued, as a checkpointing training loop read on the H200.
        assert!(matches!(launching_with_idle(7 * MS / 10), Outcome::Clear));
        // Idle 40 %, 16 µs a launch, busy 60 %: the GPU waited on launches.
        let Outcome::Found(f) = launching_with_idle(4 * MS) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.4).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.evidence["fix"], "graph");
        // Idle 25 %, 10 µs a launch, but busy 75 %: the GPU ran kernels three times as
        // long as it waited between launches, and the loop is GPU-bound first.
        let Outcome::Found(f) = launching_with_idle(25 * MS / 10) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.25).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.severity, Severity::Info);
    }

    #[test]
    fn fusing_also_gives_back_the_dispatch_and_the_tiny_kernels_fixed_cost() {
        use crate::analysis::phases::fixtures::MS;
        // 1 s steady, 100,000 launches, the GPU recorded all of it: busy 100 ms (1 µs a
        // kernel), idle between launches 600 ms and in the host's per-op work 250 ms, 50
        // ms of which in gaps of 1 ms or more.
        let s = SteadyState {
            ns: 1_000 * MS,
            host: crate::analysis::phases::Counters {
                launches: 100_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut g = SteadyGpu {
            ns: 1_000 * MS,
            busy_ns: 100 * MS,
            idle: [(IdleKind::Launch, 600 * MS), (IdleKind::Host, 250 * MS)].into(),
            long_idle: [((IdleCause::Host, GapEnd::Kernel), 50 * MS)].into(),
            short_gaps: 100_000,
            long_gaps: 10,
            ..Default::default()
        };
        let graph = Fix::for_framework(Some(Framework::Torch));
        let fusion = Fix::for_framework(Some(Framework::Jax));
        assert_eq!((graph.kind, fusion.kind), (FixKind::Graph, FixKind::Fusion));
        assert!((graph.saves(&s, &g) - 0.6).abs() < 1e-9);
        // 800 ms of dispatch idle and 100 ms of kernels' fixed cost.
        assert!((fusion.saves(&s, &g) - 0.9).abs() < 1e-9);
        // Kernels of 4 µs keep 3 of them.
        g.busy_ns = 400 * MS;
        g.idle = [(IdleKind::Launch, 600 * MS)].into();
        g.long_idle.clear();
        assert!((fusion.saves(&s, &g) - 0.7).abs() < 1e-9);
        // Without the gap series, the launch idle alone is dispatch.
        g.short_gaps = 0;
        g.long_gaps = 0;
        g.idle.insert(IdleKind::Host, 300 * MS);
        assert!((fusion.saves(&s, &g) - 0.7).abs() < 1e-9);
        assert_eq!(Fix::for_framework(None).text, GRAPH_FIX);
        assert_eq!(Fix::for_framework(Some(Framework::CuPy)).text, CUPY_FIX);
    }

    #[test]
    fn few_large_launches_or_graph_replays_do_not() {
        let matmuls = run(5.0).api("cuLaunchKernelEx", 500, 2.0, 0).build();
        assert!(matches!(
            LaunchBound.check(&Input::new(&matmuls)),
            Outcome::Clear
        ));
        let graphs = run(1.0).api("cuGraphLaunch", 5_000, 20.0, 0).build();
        assert!(matches!(
            LaunchBound.check(&Input::new(&graphs)),
            Outcome::Clear
        ));
    }
}
