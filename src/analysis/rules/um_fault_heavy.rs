use super::gpu_data::*;
use crate::analysis::phases::{IdleKind, SteadyState, SteadyUnifiedMemory};
use crate::analysis::profile::Profile;
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule};
use crate::units::share;

/// Unified memory that migrates on page faults.
pub struct UmFaultHeavy;

/// Rough costs for the impact estimate of dumps without the counters' windows: a GPU fault
/// group and a CPU fault serviced.
const GPU_FAULT_GROUP_NS: f64 = 50_000.0;
const CPU_FAULT_NS: f64 = 10_000.0;

const GIB: f64 = (1u64 << 30) as f64;
/// Pages migrated on faults, either way. On the H200 the staged loop (256 MiB faulted over
/// to the GPU and back each step) took 84-108 ms a step and 47-64 ms prefetched, of which
/// 28 ms is the bulk migration: the median step saved, 41.5 ms in five runs, puts 512 MiB
/// on faults at ~70 ms (bench/results/calib-2026-12-01-run12.txt and
/// bench/results/gpu-2026-12-01-run13-um-probe).
const FAULT_MIGRATION_BYTES_PER_S: f64 = 7.0 * GIB;
/// The host's time on its faults per byte pulled back: its part of the loop's step, 71-76
/// ms for 256 MiB on the H200 (bench/results/gpu-2026-12-01-run13-um-probe), is all
/// faulting: the migration, and the page-table work that makes the prefetched loop's
/// touches still take 30 ms.
const HOST_FAULTS_BYTES_PER_S: f64 = 3.5 * GIB;
/// The same pages prefetched in bulk, as shares of the link's peak: 256 MiB went to the GPU
/// at 44 GiB/s and back at 11 GiB/s on the H200's PCIe gen5 x16 (63 GB/s).
const PREFETCH_TO_GPU_OF_PEAK: f64 = 0.75;
const PREFETCH_TO_HOST_OF_PEAK: f64 = 0.19;

/// Sampled bytes at least this share of the managed memory each step are read as all of it
/// each step: the H200's staged loop moves its 256 MiB each way every step, and 20-40 ms
/// glimpses of its 100 ms steps put that at 0.32-1.55 times the truth in 8 runs
/// (bench/results/gpu-2026-12-01-run13-phases-5).
const ALL_MANAGED_SHARE: f64 = 0.25;

/// The steady state's migrations and what prefetching them saves. A loop that faults pages
/// over again every step must have moved them back meanwhile, so the larger direction
/// counted is taken for both: the sampled counters' slot often covers only one side of a
/// step (the kernel's faults, or the host's). Near the managed memory's size each step
/// (within the sampling's spread), it is taken as all of it each step.
struct Migrations {
    /// Bytes each way.
    bytes: f64,
    /// The host's time on its faults, pulling the pages back: the GPU idles meanwhile.
    host_on_faults_ns: f64,
    /// Both ways on faults, less both ways prefetched.
    saved_ns: f64,
}

impl Migrations {
    fn of(p: &Profile, s: &SteadyState, um: &SteadyUnifiedMemory) -> Migrations {
        // Without faults, what moved was prefetched.
        let faulted = um.cpu_page_faults + um.gpu_page_fault_groups > 0;
        let sampled = if faulted {
            um.bytes_htod.max(um.bytes_dtoh) as f64
        } else {
            0.0
        };
        // Per process: its managed memory over its steps (ranks alike; the dumps' managed
        // bytes and steady times are both summed, a step is one process's).
        let managed = p.api("cuMemAllocManaged").map_or(0, |a| a.bytes) as f64;
        let per_process = managed / f64::from(um.processes.max(1));
        let all_each_step =
            (s.step.as_ref()).map(|step| per_process * s.ns as f64 / step.ns.max(1) as f64);
        let bytes = match all_each_step {
            Some(all) if all > 0.0 && sampled >= ALL_MANAGED_SHARE * all => all,
            _ => sampled,
        };
        let peak = link_peak_bytes_per_s(p);
        let on_faults = bytes / FAULT_MIGRATION_BYTES_PER_S * 1e9;
        let prefetched = (bytes / (PREFETCH_TO_GPU_OF_PEAK * peak)
            + bytes / (PREFETCH_TO_HOST_OF_PEAK * peak))
            * 1e9;
        Migrations {
            bytes,
            host_on_faults_ns: bytes / HOST_FAULTS_BYTES_PER_S * 1e9,
            saved_ns: (2.0 * on_faults - prefetched).max(0.0),
        }
    }
}

/// The steady state's host time waiting on unified-memory faults, which `input-starved`
/// leaves to this rule: with the counters' windows, the host's faults pulling pages back;
/// in older dumps, up to 200 us per CPU fault of the run (`um_fault_wait_ns`).
pub fn fault_host_wait_ns(p: &Profile, s: &SteadyState) -> u64 {
    match &s.unified_memory {
        Some(um) if um.observed_ns > 0 => Migrations::of(p, s, um).host_on_faults_ns as u64,
        _ => um_fault_wait_ns(p),
    }
}

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
possible and the rule is clear. The counters are sampled: on from the first kernel launch
after a managed allocation, then one slot in 64.

Judged on the steady state where the dump has the counters' windows (dumps of 0.2 on):
the faults and bytes seen while the counters were on in the steady state
(else between start-up and teardown), at least 10 ms of it, scaled to it. Faults only
while the host filled the memory in set-up are no finding. A run shorter than the
counters' cycle (1.28 s) is judged by its first slot, at its first launch: a program that
faults its data over once and then keeps it resident reads as faulting every step. Impact, a heuristic: what prefetching saves. A loop that faults
pages over each step moves them back each step, so the larger direction counted is taken
for both; on faults a byte costs 1/7 GiB/s, prefetched 1/(75 % of the link's peak) to the
GPU and 1/(19 %) back (the H200's staged CuPy loop, 256 MiB each way a step:
bench/results/gpu-2026-12-01-run13-um-probe). The host's faults, at 3.5 GiB/s, are
GPU idle time `input-starved` leaves to this rule.

Older dumps (counters whole-run only, scaled from slots that began at the allocation and
often saw only the host filling the memory): migrated bytes at the PCIe link's peak plus
50 us per GPU fault group and 10 us per CPU fault, over the working span; and at least the
GPU's idle time that the host's faults can explain, up to 200 us per CPU fault: with a
timeline's GPU side, the steady state's idle that opened with the host working; with a
steady state but no GPU side, at most its time outside the driver; else the idle gaps of
1 ms or more. An upper bound: on the staged loop it predicted 60-68 % where prefetching
saved 36-50 % (bench/results/calib-2026-12-01-run12.txt).

Fix: prefetch managed memory to where it is used next (`cudaMemPrefetchAsync`), give
placement hints (`cudaMemAdvise` with `SetPreferredLocation`/`SetReadMostly`), or use
explicit device allocations and copies."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
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
        if let Some((s, um)) = input
            .steady()
            .and_then(|s| Some((s, s.unified_memory.as_ref()?)))
        {
            return self.on_steady(p, s, um);
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
        let host_wait = match input.steady() {
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
                    "Unified memory migrated {} MiB. It faulted {cpu} times on the CPU and in {gpu} fault groups on the GPU.",
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

impl UmFaultHeavy {
    /// The judgement on a steady state with the counters' windows: its faults and
    /// migrations, and what prefetching would save of its time.
    fn on_steady(&self, p: &Profile, s: &SteadyState, um: &SteadyUnifiedMemory) -> Outcome {
        if um.observed_ns == 0 {
            return Outcome::NoData("the unified-memory counters were never on after start-up (they come on at the first kernel launch after a managed allocation)");
        }
        // Faults only while the host filled the memory, before any launch, are set-up.
        if um.cpu_page_faults + um.gpu_page_fault_groups == 0 {
            return Outcome::Clear;
        }
        let m = Migrations::of(p, s, um);
        Outcome::Found(
            Finding::new(
                self,
                share(m.saved_ns as u64, s.ns).min(1.0),
                format!(
                    "In the steady state unified memory migrated about {} MiB each way. It faulted about {} times on the CPU and in {} fault groups on the GPU. The counters were on {} ms.",
                    m.bytes as u64 >> 20,
                    um.cpu_page_faults,
                    um.gpu_page_fault_groups,
                    um.observed_ns / 1_000_000
                ),
                "cudaMemPrefetchAsync managed data to where it is used next; cudaMemAdvise placement hints; or explicit device memory and copies.",
            )
            .evidence("cpu_page_faults", um.cpu_page_faults)
            .evidence("gpu_page_fault_groups", um.gpu_page_fault_groups)
            .evidence("sampled_migrated_bytes", um.bytes_htod + um.bytes_dtoh)
            .evidence("migrated_bytes_each_way", m.bytes as u64)
            .evidence("counters_on_ns", um.observed_ns)
            .heuristic(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::rules::gpu_data::fixtures::*;
    use crate::analysis::rules::input_starved::InputStarved;
    use gpuspy_format::gpu::UnifiedMemory;
    use gpuspy_format::timeline::UnifiedMemoryWindows;

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
        let f = found(UmFaultHeavy.check(&Input::new(&run(10.0).gpu(g.clone()).build())));
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
        let f = found(UmFaultHeavy.check(&Input::new(&run(10.0).gpu(h.clone()).build())));
        assert!((f.impact - 0.5).abs() < 0.04, "{}", f.impact);
        assert!(matches!(
            InputStarved.check(&Input::new(&run(10.0).gpu(h.clone()).build())),
            Outcome::Clear
        ));
        // Two faults explain 0.4 ms of those gaps at most: the rest is input starvation.
        h.unified_memory = Some(um(2, 1, 1 << 20));
        let f = found(UmFaultHeavy.check(&Input::new(&run(10.0).gpu(h.clone()).build())));
        assert!(f.impact < 0.001, "{}", f.impact);
        let Outcome::Found(starved) = InputStarved.check(&Input::new(&run(10.0).gpu(h).build()))
        else {
            panic!("not input-starved")
        };
        assert!((starved.impact - 0.5).abs() < 0.04, "{}", starved.impact);
        g.unified_memory = Some(um(0, 0, 0));
        assert!(matches!(
            UmFaultHeavy.check(&Input::new(&run(10.0).gpu(g).build())),
            Outcome::Clear
        ));
        assert!(matches!(
            UmFaultHeavy.check(&Input::new(&run(1.0).build())),
            Outcome::Clear
        ));
        let managed = run(1.0).api("cuMemAllocManaged", 1, 0.1, 1 << 20).build();
        assert!(matches!(
            UmFaultHeavy.check(&Input::new(&managed)),
            Outcome::NoData(_)
        ));
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
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
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
            let f = found(UmFaultHeavy.check(&Input::new(&p)));
            assert!((f.impact - 0.5).abs() < 1e-9, "{observed}: {}", f.impact);
            assert!(matches!(
                InputStarved.check(&Input::new(&p)),
                Outcome::Clear
            ));
        }
        // 100 faults explain 10 % of it; 40 of the 50 % host-work idle is input starvation.
        let p = profile(100, 2 * MS);
        assert!((found(UmFaultHeavy.check(&Input::new(&p))).impact - 0.1).abs() < 1e-9);
        let starved = found(InputStarved.check(&Input::new(&p)));
        assert!((starved.impact - 0.4).abs() < 1e-9, "{}", starved.impact);
    }

    #[test]
    fn without_the_gpu_side_the_faults_claim_at_most_the_host_time_outside_the_driver() {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
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
        let f = found(UmFaultHeavy.check(&Input::new(&profile(2_000))));
        assert!((f.impact - 0.7).abs() < 1e-9, "{}", f.impact);
        // 200 faults, 40 ms: 20 %.
        let f = found(UmFaultHeavy.check(&Input::new(&profile(200))));
        assert!((f.impact - 0.2).abs() < 1e-9, "{}", f.impact);
    }

    /// A run of 5 set-up windows without a launch, 2 warm-up windows, a 200 ms loop of
    /// 10 ms steps (GPU busy 3 ms, idle 2 ms after the sync and 5 ms in host work) and 2
    /// teardown windows, whose whole-run counters hold `cpu_faults` CPU faults, with the
    /// counters' windows `um`.
    fn counted(cpu_faults: u64, um: UnifiedMemoryWindows) -> Profile {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        let mut p = faulting(cpu_faults, Some(activity(1.0)));
        let step = W {
            launches: 20,
            blocked_ns: 2 * MS,
            busy_ns: 3 * MS,
            idle_after_sync: 2 * MS,
            idle_host: 5 * MS,
            ..W::default()
        };
        let warm_up = W {
            launches: 2,
            ..step
        };
        let windows = [
            times(5, W::default()),
            times(2, warm_up),
            times(20, step),
            times(2, W::default()),
        ];
        let mut t = timeline(&windows.concat(), true);
        t.unified_memory = Some(um);
        attach(&mut p, t);
        p
    }

    /// Counters' windows for `counted`: on `on` ns in the windows `at`, each holding
    /// `cpu` CPU faults, `gpu` fault groups and `mib` MiB migrated to the GPU.
    fn on_in(at: &[usize], on: u64, cpu: u64, gpu: u64, mib: u64) -> UnifiedMemoryWindows {
        let col = |v: u64| {
            (0..29)
                .map(|i| if at.contains(&i) { v } else { 0 })
                .collect()
        };
        UnifiedMemoryWindows {
            observed_ns: col(on),
            cpu_page_faults: col(cpu),
            gpu_page_fault_groups: col(gpu),
            bytes_htod: col(mib << 20),
            bytes_dtoh: col(0),
        }
    }

    #[test]
    fn the_steady_states_migrations_less_their_bulk_cost_are_the_impact() {
        use crate::analysis::phases::fixtures::MS;
        // The host filled the memory in set-up (500 CPU faults, the whole run's count), and
        // the counters were on 10 ms of one loop window: 40 fault groups moving 16 MiB to
        // the GPU. Over the 200 ms steady state: 800 groups and 320 MiB, and as many back
        // (a loop faulting pages over each step moved them back each step). On faults,
        // 640 MiB at 7 GiB/s take 89.29 ms; prefetched, 320 MiB each way take 7.10 ms at
        // 75 % of gen5 x16's 63.016 GB/s and 28.03 ms at 19 %: 54.16 ms saved, 27.08 %.
        let mut set_up = on_in(&[2, 12], 10 * MS, 0, 40, 16);
        set_up.cpu_page_faults[2] = 500;
        set_up.gpu_page_fault_groups[2] = 0;
        set_up.bytes_htod[2] = 0;
        let p = counted(500, set_up);
        let f = found(UmFaultHeavy.check(&Input::new(&p)));
        assert!((f.impact - 0.2708).abs() < 1e-3, "{}", f.impact);
        assert_eq!(f.evidence["gpu_page_fault_groups"].as_u64(), Some(800));
        assert_eq!(f.evidence["cpu_page_faults"].as_u64(), Some(0));
        assert_eq!(
            f.evidence["sampled_migrated_bytes"].as_u64(),
            Some(320 << 20)
        );
        assert_eq!(
            f.evidence["migrated_bytes_each_way"].as_u64(),
            Some(320 << 20)
        );
        // The host's faults pulling 320 MiB back take 89.29 ms at 3.5 GiB/s, 44.64 % of
        // the loop: of its 50 % idle in host work, 5.36 % is left to input starvation.
        let starved = found(InputStarved.check(&Input::new(&p)));
        assert!((starved.impact - 0.0536).abs() < 1e-3, "{}", starved.impact);
        // Counters on in the loop that saw no fault: the set-up's faults are no finding,
        // however many the whole run counted.
        assert!(matches!(
            UmFaultHeavy.check(&Input::new(&counted(
                500,
                on_in(&[2, 12], 10 * MS, 0, 0, 0)
            ))),
            Outcome::Clear
        ));
        // On in set-up only, or in teardown only, or 5 ms in the loop: nothing stands for
        // the loop (5 ms of faults scaled to 200 ms would be a guess 40 times over).
        for (at, on) in [(2, 10 * MS), (28, 10 * MS), (12, 5 * MS)] {
            let p = counted(500, on_in(&[at], on, 500, 40, 16));
            assert!(
                matches!(UmFaultHeavy.check(&Input::new(&p)), Outcome::NoData(_)),
                "{at}"
            );
        }
        // With nothing known of the loop, input-starved still leaves what the run's 500 CPU
        // faults can explain (up to 200 us each: 100 ms, all of the loop's 50 % host idle).
        let set_up_only = counted(500, on_in(&[2], 10 * MS, 500, 0, 0));
        assert!(matches!(
            InputStarved.check(&Input::new(&set_up_only)),
            Outcome::Clear
        ));
        // On only in the warm-up (a short run's one slot, at its first launch): that stands
        // for the steady state. 10 ms with 4 MiB: 80 MiB over 200 ms.
        let f =
            found(UmFaultHeavy.check(&Input::new(&counted(500, on_in(&[5], 10 * MS, 0, 10, 4)))));
        assert_eq!(
            f.evidence["sampled_migrated_bytes"].as_u64(),
            Some(80 << 20)
        );
        assert_eq!(f.evidence["gpu_page_fault_groups"].as_u64(), Some(200));
    }

    #[test]
    fn near_the_managed_memory_each_step_the_migrations_are_all_of_it_per_process() {
        use crate::analysis::phases::fixtures::MS;
        use gpuspy_format::timeline::{HostEvent, HostEventKind};
        use gpuspy_format::SyncCause;
        // `counted` with a sync every 10 ms of its loop (a 10 ms step, 20 in the steady
        // state), `processes` copies of the process, and 16 MiB of managed memory each.
        let job = |processes: u32, managed: bool| {
            let mut p = counted(500, on_in(&[12], 10 * MS, 0, 40, 8));
            let t = p.processes[0].timeline.as_mut().unwrap();
            t.recent_blocking = (7..27)
                .map(|i| HostEvent {
                    start_unix_ns: t.start_unix_ns + i * 10 * MS,
                    end_unix_ns: t.start_unix_ns + i * 10 * MS + 2 * MS,
                    kind: HostEventKind::Sync(SyncCause::Explicit),
                })
                .collect();
            for pid in 1..processes {
                let mut other = p.processes[0].clone();
                other.pid += pid;
                p.processes.push(other);
            }
            if managed {
                let api = p.apis.entry("cuMemAllocManaged".into()).or_default();
                api.bytes = u64::from(processes) * (16 << 20);
            }
            p
        };
        // Sampled, 8 MiB in 10 ms: 160 MiB each way over 200 ms, half the 320 MiB of moving
        // all 16 MiB every step: read as all of it, the impact of 320 MiB each way
        // (the_steady_states_migrations_less_their_bulk_cost_are_the_impact): 27.08 %.
        for processes in [1, 2] {
            let f = found(UmFaultHeavy.check(&Input::new(&job(processes, true))));
            assert!(
                (f.impact - 0.2708).abs() < 1e-3,
                "{processes}: {}",
                f.impact
            );
            let each_way = u64::from(processes) * (320 << 20);
            assert_eq!(
                f.evidence["migrated_bytes_each_way"].as_u64(),
                Some(each_way)
            );
        }
        // No managed allocation in the dumps: the sampled 160 MiB, half the impact.
        let f = found(UmFaultHeavy.check(&Input::new(&job(1, false))));
        assert!((f.impact - 0.1354).abs() < 1e-3, "{}", f.impact);
    }
}
