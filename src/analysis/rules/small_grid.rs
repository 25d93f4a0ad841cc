use super::gpu_data::*;
use crate::analysis::gpm::device_shares;
use crate::analysis::kernels::small_grid;
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule};
use crate::units::share;
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
run one block per channel by design and are left out. Impact, over the steady-state time
(or the working span, if longer; a run of one tiny kernel has a span of microseconds):
where NVML GPM measured SM activity, measured: the busy time in which SMs sat idle (busy
time less SM-active time), the small grids' share of it; elsewhere an upper bound: for
each top kernel with small grids, its time times the share of SMs it left idle, as if the
work spread over the whole GPU.

With a timeline (dumps of schema 2) and its GPU side, the impact is the share of the
steady state the GPU was busy, times the share of the run's busy time with SMs idle that
the small grids account for (as above): the whole run's span holds start-up and JIT
compiles (a Triton loop's first step), which would dilute it. On the H200's 4-block
Triton loop, 93 % busy and 97 % of it with SMs idle: 90 %, where the span gave 6 %.

Fix: larger batches, or fuse work into fewer, larger kernels. Split-K and persistent
kernels for matrix work."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let mut any = false;
        let mut estimated = false;
        let (mut small, mut kernel, mut busy, mut saving, mut span) = (0u64, 0u64, 0u64, 0.0, 0u64);
        for (_, d, a) in p.gpu_activity() {
            let Some(sms) = d.facts.as_ref().and_then(|f| f.sm_count) else {
                continue;
            };
            any = true;
            let small_ns = small_grid(a, sms).1;
            small += small_ns;
            kernel += a.kernel_ns;
            busy += a.busy_ns;
            span += a.working_span_ns();
            saving += match device_shares(d).and_then(|s| s.sm_active_share) {
                Some(active) if a.kernel_ns > 0 => {
                    let idle_sm_ns = a.busy_ns as f64 - active * a.working_span_ns() as f64;
                    idle_sm_ns.max(0.0) * small_ns as f64 / a.kernel_ns as f64
                }
                _ => {
                    estimated = true;
                    a.top_kernels
                        .iter()
                        .filter(|k| k.max_blocks > 0 && k.max_blocks < u64::from(sms))
                        .filter(|k| nccl_collective(&k.name).is_none())
                        .map(|k| k.total_ns as f64 * (1.0 - k.max_blocks as f64 / f64::from(sms)))
                        .sum::<f64>()
                }
            };
        }
        if !any {
            return Outcome::NoData(NO_ACTIVITY);
        }
        let small_share = share(small, kernel);
        if small_share < SMALL_GRID_SHARE {
            return Outcome::Clear;
        }
        // With a steady state, the busy share of it whose SMs the small grids left idle;
        // the whole run's span holds start-up and JIT compiles, which would dilute it.
        let impact = match input.steady().and_then(|s| s.gpu.as_ref()) {
            Some(g) => share(g.busy_ns, g.ns) * (saving / busy.max(1) as f64).min(1.0),
            None => saving / span.max(p.steady_ns()) as f64,
        };
        let finding = Finding::new(
            self,
            impact,
            format!(
                "Grids with fewer blocks than the GPU has SMs ran {} of kernel time.",
                pct(small_share)
            ),
            "Larger batches; fuse small kernels; split-K or persistent kernels for matrix work.",
        )
        .evidence("small_grid_ns", small)
        .evidence("kernel_ns", kernel)
        .evidence(
            "impact_from",
            if estimated {
                "grid sizes"
            } else {
                "sm activity"
            },
        );
        Outcome::Found(if estimated {
            finding.heuristic()
        } else {
            finding
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::{Activity, GridBlocks, KernelStat};
    use gpuspy_format::hist::bucket_index;

    #[test]
    fn small_grids_are_named_with_an_upper_bound() {
        let mut a = activity(4.0);
        a.small_grid_kernels = Some(100);
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
    fn with_gpm_the_impact_is_the_measured_idle_sm_time() {
        // The H200's 4-block loop: kernels run 9.98 s of 10, on 4 of 132 SMs (3 % active).
        let mut a = activity(9.98);
        a.grid_blocks = vec![GridBlocks {
            bucket: 4,
            kernels: 1000,
            ns: a.kernel_ns,
        }];
        let f = found(check(
            &SmallGrid,
            gpu(h200(), Some(gpm_telemetry(3.0, 0.0, 1.0)), Some(a.clone())),
        ));
        // 9.98 s busy less 0.3 s of SM-active time, over the 10 s span.
        assert!((f.impact - 0.968).abs() < 1e-6, "{}", f.impact);
        assert!(!f.heuristic);
        assert_eq!(f.evidence["impact_from"], "sm activity");
        // Half of the kernel time in small grids: half of the idle SM time.
        a.grid_blocks.push(GridBlocks {
            bucket: bucket_index(1024) as u32,
            kernels: 1000,
            ns: a.kernel_ns,
        });
        a.kernel_ns *= 2;
        let f = found(check(
            &SmallGrid,
            gpu(h200(), Some(gpm_telemetry(3.0, 0.0, 1.0)), Some(a)),
        ));
        assert!((f.impact - 0.484).abs() < 1e-6, "{}", f.impact);
    }

    #[test]
    fn with_a_timeline_the_impact_is_the_steady_busy_time_with_sms_idle() {
        use crate::analysis::diagnose::synthetic::run;
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        // The 4-block loop of `with_gpm_...` (97 % of its busy time with SMs idle), whose
        // steady state is 20 windows busy 9 ms of every 10.
        let mut a = activity(9.98);
        a.grid_blocks = vec![GridBlocks {
            bucket: 4,
            kernels: 1000,
            ns: a.kernel_ns,
        }];
        let mut p = run(10.0)
            .gpu(gpu(h200(), Some(gpm_telemetry(3.0, 0.0, 1.0)), Some(a)))
            .build();
        let w = W {
            launches: 2,
            busy_ns: 9 * MS,
            idle_host: MS,
            ..W::default()
        };
        attach(&mut p, timeline(&times(20, w), true));
        let f = found(SmallGrid.check(&Input::new(&p)));
        let expected = 0.9 * (9.98 - 0.3) / 9.98;
        assert!((f.impact - expected).abs() < 1e-6, "{}", f.impact);
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
