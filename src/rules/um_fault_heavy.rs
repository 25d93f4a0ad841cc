use super::gpu_data::*;
use crate::diagnose::{share, Finding, Layer, Outcome, Rule};
use crate::phases::IdleKind;
use crate::profile::Profile;

/// Unified memory that migrates on page faults.
pub struct UmFaultHeavy;

/// Rough costs for the impact estimate: a GPU fault group and a CPU fault serviced.
const GPU_FAULT_GROUP_NS: f64 = 50_000.0;
const CPU_FAULT_NS: f64 = 10_000.0;

impl Rule for UmFaultHeavy {
    fn id(&self) -> &'static str {
        "um-fault-heavy"
    }
    fn layer(&self) -> Layer {
        Layer::Memory
    }
    fn doc(&self) -> &'static str {
        "Unified (managed) memory migrates page by page on faults instead of in bulk, stalling kernels and the host.

Evidence (CUPTI unified-memory counters): CPU page faults, GPU page-fault groups and
bytes migrated each way. Without managed allocations (`cuMemAllocManaged`) no faults are
possible and the rule is clear. Impact, a heuristic: migrated bytes at the PCIe link's
peak plus 50 us per GPU fault group and 10 us per CPU fault, over the working span; and
at least the GPU's idle time that the host's faults can explain, up to 200 us per CPU
fault (the GPU waiting while the host pulled pages back; on the H200, 16,100 CPU faults
went with 1.8 s of such gaps): with a timeline's GPU side, the steady state's idle that
opened with the host working, over the steady device time (`input-starved` leaves it to
this rule); with a steady state but no GPU side (sampled, a loop of a few long kernels
can launch none while recording), at most its time outside the driver; else the idle
gaps of 1 ms or more, over the working span. Read it as an upper bound: on the H200's
staged CuPy loop (256 MiB touched by the GPU and the host each step) it predicted 60-68 %
of the steady state where prefetching saved 36-50 %, as the fixed loop still moves its
pages, in bulk, and touches them (bench/results/calib-2026-12-01-session11.txt).

Fix: prefetch managed memory to where it is used next (`cudaMemPrefetchAsync`), give
placement hints (`cudaMemAdvise` with `SetPreferredLocation`/`SetReadMostly`), or use
explicit device allocations and copies."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let counters: Vec<_> = p
            .processes
            .iter()
            .filter_map(|x| x.gpu.as_ref()?.unified_memory.clone())
            .collect();
        if counters.is_empty() {
            return if p.calls("cuMemAllocManaged") == 0 {
                Outcome::Clear
            } else {
                Outcome::NoData("the run allocated managed memory; its faults need CUPTI unified-memory counters (none in the dumps)")
            };
        }
        let sum = |f: fn(&gpuspy_format::gpu::UnifiedMemory) -> u64| -> u64 {
            counters.iter().map(f).sum()
        };
        let (cpu, gpu) = (sum(|u| u.cpu_page_faults), sum(|u| u.gpu_page_fault_groups));
        let migrated = sum(|u| u.bytes_htod + u.bytes_dtoh);
        if cpu + gpu == 0 {
            return Outcome::Clear;
        }
        let peak = link_peak_bytes_per_s(p);
        let span: u64 = p.gpu_activity().map(|(_, _, a)| a.working_span_ns()).sum();
        let cost_ns = migrated as f64 / peak * 1e9
            + gpu as f64 * GPU_FAULT_GROUP_NS
            + cpu as f64 * CPU_FAULT_NS;
        // The GPU's idle time that the host's faults explain: in the steady state's idle that
        // opened with the host working, where the timeline has its GPU side (the long gaps
        // of sampled activity are only those inside its slots); without it, at most the
        // steady state's time outside the driver (sampled, a loop of a few long kernels can
        // launch none inside a slot); without a steady state, in the long gaps.
        let faults_ns = um_fault_wait_ns(p);
        let host_wait = match crate::phases::steady(p) {
            Some(s) => {
                let working = match &s.gpu {
                    Some(g) => {
                        let idle: u64 = [IdleKind::Host, IdleKind::AfterSync]
                            .iter()
                            .filter_map(|k| g.idle.get(k))
                            .sum();
                        // A share, as the recorded device time can be a sample of the
                        // steady state.
                        share(idle, g.ns)
                    }
                    None => share(s.ns.saturating_sub(s.host.driver_ns), s.ns),
                };
                working.min(share(faults_ns, s.ns))
            }
            None => share(long_gap_ns(p).min(faults_ns), span),
        };
        let impact = if span == 0 {
            host_wait
        } else {
            (cost_ns / span as f64).max(host_wait).min(1.0)
        };
        Outcome::Found(
            Finding::new(
                self,
                impact,
                format!(
                    "unified memory faulted {cpu} times on the CPU and in {gpu} fault groups on the GPU, migrating {} MiB",
                    migrated >> 20
                ),
                "cudaMemPrefetchAsync managed data to where it is used next; cudaMemAdvise placement hints; or explicit device memory and copies.",
            )
            .evidence("cpu_page_faults", cpu)
            .evidence("gpu_page_fault_groups", gpu)
            .evidence("migrated_bytes", migrated)
            .heuristic(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::synthetic::run;
    use crate::rules::gpu_data::fixtures::*;
    use crate::rules::input_starved::InputStarved;
    use gpuspy_format::gpu::UnifiedMemory;

    #[test]
    fn unified_memory_faults_are_found_and_zero_faults_are_clear() {
        let um = |cpu, gpu_groups, bytes| UnifiedMemory {
            cpu_page_faults: cpu,
            gpu_page_fault_groups: gpu_groups,
            bytes_htod: bytes,
            ..UnifiedMemory::default()
        };
        let mut g = gpu(h200(), None, Some(activity(1.0)));
        g.unified_memory = Some(um(10_000, 2_000, 4 << 30));
        let f = found(UmFaultHeavy.check(&run(10.0).gpu(g.clone()).build()));
        // 4 GiB at gen5 x16's 63 GB/s, 2000 x 50 us and 10000 x 10 us, over 10 s.
        let expected = ((4u64 << 30) as f64 / 63.016e9 + 0.1 + 0.1) / 10.0;
        assert!(
            (f.impact - expected).abs() < 1e-9 && f.heuristic,
            "{}",
            f.impact
        );
        assert_eq!(f.evidence["cpu_page_faults"].as_u64(), Some(10_000));
        // The host faulting while the GPU waits in 5 s of long gaps: 30,000 faults (up to
        // 6 s) explain them all; they are the cost, and not input starvation.
        let mut waiting = activity(1.0);
        waiting.gap_hist = gaps(100, 50_000_000);
        let mut h = gpu(h200(), None, Some(waiting));
        h.unified_memory = Some(um(30_000, 2_000, 4 << 30));
        let f = found(UmFaultHeavy.check(&run(10.0).gpu(h.clone()).build()));
        assert!((f.impact - 0.5).abs() < 0.04, "{}", f.impact);
        assert!(matches!(
            InputStarved.check(&run(10.0).gpu(h.clone()).build()),
            Outcome::Clear
        ));
        // Two faults explain 0.4 ms of those gaps at most: the rest is input starvation.
        h.unified_memory = Some(um(2, 1, 1 << 20));
        let f = found(UmFaultHeavy.check(&run(10.0).gpu(h.clone()).build()));
        assert!(f.impact < 0.001, "{}", f.impact);
        let Outcome::Found(starved) = InputStarved.check(&run(10.0).gpu(h).build()) else {
            panic!("not input-starved")
        };
        assert!((starved.impact - 0.5).abs() < 0.04, "{}", starved.impact);
        g.unified_memory = Some(um(0, 0, 0));
        assert!(matches!(
            UmFaultHeavy.check(&run(10.0).gpu(g).build()),
            Outcome::Clear
        ));
        assert!(matches!(
            UmFaultHeavy.check(&run(1.0).build()),
            Outcome::Clear
        ));
        let managed = run(1.0).api("cuMemAllocManaged", 1, 0.1, 1 << 20).build();
        assert!(matches!(UmFaultHeavy.check(&managed), Outcome::NoData(_)));
    }

    /// A run of 200 ms whose host faulted `cpu_faults` times, with the activity `a`.
    fn faulting(cpu_faults: u64, a: Option<gpuspy_format::gpu::Activity>) -> Profile {
        let mut g = gpu(h200(), None, a);
        g.unified_memory = Some(UnifiedMemory {
            cpu_page_faults: cpu_faults,
            ..UnifiedMemory::default()
        });
        run(0.2).gpu(g).build()
    }

    #[test]
    fn with_a_timeline_the_faults_claim_the_idle_that_opened_with_the_host_working() {
        use crate::phases::fixtures::{attach, timeline, times, MS, W};
        // A 200 ms steady state of 10 ms steps: the GPU busy 3 ms, idle 2 ms after the
        // sync and 5 ms in host work; `observed` of each window recorded (sampled below 10).
        let profile = |cpu_faults, observed: u64| {
            let mut p = faulting(cpu_faults, Some(activity(1.0)));
            let w = W {
                launches: 20,
                blocked_ns: 2 * MS,
                busy_ns: 3 * observed / 10,
                idle_after_sync: 2 * observed / 10,
                idle_host: 5 * observed / 10,
                ..W::default()
            };
            let mut t = timeline(&times(20, w), true);
            t.devices[0].observed_ns = vec![observed; 20];
            attach(&mut p, t);
            p
        };
        // 500 faults of up to 200 us: 100 ms, half the steady state, within the 70 % idle
        // that opened with the host working. What is left of the host-work idle is not
        // input starvation.
        for observed in [10 * MS, 2 * MS] {
            let p = profile(500, observed);
            let f = found(UmFaultHeavy.check(&p));
            assert!((f.impact - 0.5).abs() < 1e-9, "{observed}: {}", f.impact);
            assert!(matches!(InputStarved.check(&p), Outcome::Clear));
        }
        // 100 faults explain 10 % of it; 40 of the 50 % host-work idle is input starvation.
        let p = profile(100, 2 * MS);
        assert!((found(UmFaultHeavy.check(&p)).impact - 0.1).abs() < 1e-9);
        let starved = found(InputStarved.check(&p));
        assert!((starved.impact - 0.4).abs() < 1e-9, "{}", starved.impact);
    }

    #[test]
    fn without_the_gpu_side_the_faults_claim_at_most_the_host_time_outside_the_driver() {
        use crate::phases::fixtures::{attach, timeline, times, MS, W};
        // Sampled, no kernel of the loop was recorded: a 200 ms steady state whose host
        // spends 3 ms of each 10 ms step in the driver (a sync).
        let profile = |cpu_faults| {
            let mut p = faulting(cpu_faults, None);
            let w = W {
                launches: 20,
                driver_ns: 3 * MS,
                blocked_ns: 3 * MS,
                ..W::default()
            };
            attach(&mut p, timeline(&times(20, w), false));
            p
        };
        // 2,000 faults of up to 200 us (400 ms) could explain all of it: 70 % at most.
        let f = found(UmFaultHeavy.check(&profile(2_000)));
        assert!((f.impact - 0.7).abs() < 1e-9, "{}", f.impact);
        // 200 faults, 40 ms: 20 %.
        let f = found(UmFaultHeavy.check(&profile(200)));
        assert!((f.impact - 0.2).abs() < 1e-9, "{}", f.impact);
    }
}
