//! Shared by the rules whose evidence is GPU-side: NVML telemetry (link, clocks, ECC,
//! other processes) and CUPTI activity (busy time, idle gaps, grid sizes, unified-memory
//! faults, NCCL kernels). Where a dump has none (no NVML library, CUPTI off or held by the
//! program's own profiler), those rules say so instead of guessing; the report's GPU
//! section says why.

use crate::analysis::profile::Profile;
use gpuspy_format::gpu::{Activity, Device, Telemetry};

pub const NO_FACTS: &str = "needs NVML device facts (none in the dumps; see the GPU section)";
pub const NO_TELEMETRY: &str = "needs NVML telemetry (none in the dumps; see the GPU section)";
pub const NO_ACTIVITY: &str = "needs CUPTI activity (none in the dumps; see the GPU section)";

pub fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

pub fn telemetries(p: &Profile) -> impl Iterator<Item = (&Device, &Telemetry)> {
    p.gpu_devices()
        .filter_map(|(_, d)| d.telemetry.as_ref().map(|t| (d, t)))
}

/// The host link's peak one-direction bandwidth where NVML read the PCIe link: on the
/// first device that has it.
pub fn measured_link_peak_bytes_per_s(p: &Profile) -> Option<f64> {
    p.gpu_devices()
        .find_map(|(_, d)| d.facts.as_ref()?.pcie.peak_bytes_per_s())
}

/// The link rate assumed where NVML did not read it: the peak of PCIe gen4 x16, a peak
/// like the measured ones (`PcieLink::peak_bytes_per_s`).
pub const ASSUMED_LINK_BYTES_PER_S: f64 = 31.508e9;

/// The host link's peak one-direction bandwidth, measured or else assumed.
pub fn link_peak_bytes_per_s(p: &Profile) -> f64 {
    measured_link_peak_bytes_per_s(p).unwrap_or(ASSUMED_LINK_BYTES_PER_S)
}

/// The GPU drawing its power limit: how dense math runs on an H100 or H200 at the board's
/// default limit, a problem only when someone lowered the limit.
pub const POWER_CAP: &str = "sw-power-cap";

/// A GPU held at its power limit spends the same power on more work when a fix keeps it
/// busier, so it runs at lower clocks and its kernels take longer: about this factor times
/// ln(busy share after / before), once the clocks have come down. Measured on the H200:
/// the staged bf16 matmul loop with a sync per step (busy 0.80-0.86, `sw-power-cap` in
/// 84-96 % of its samples) ran its kernels 2.3-4.6 % longer without the sync (busy
/// 0.94-0.95, SM clock 5.6-9.8 % lower), 0.25 times that logarithm over a 5 s loop
/// (docs/diagnosis.md).
const POWER_CAPPED_STRETCH: f64 = 0.25;
/// How long the clocks take to come down once a GPU works harder: in the twenty fixed
/// matmul loops of rounds 1-10 (0.4 s and 5 s), NVML's SM clock read 1.96-1.98 GHz (its
/// maximum) 10-100 ms into the loop in 17 of the 18 valid samples, and 1.8-1.94 GHz, 2-8 %
/// lower, in all twenty 110-200 ms in. NVML's power reading, a 1 s average, ramps far
/// slower and cannot time this.
const POWER_RAMP_NS: u64 = 100_000_000;
/// The share of a steady state's NVML samples with `sw-power-cap` from which a busier GPU
/// is taken to run at the limit: the staged sync loop was capped in 17-33 % of its samples
/// in most rounds, and its fix, busier, ran 6 % lower clocks (SM clock 1849-1864 MHz
/// against 1975-1977) and saved 9-12 % where its idle after the syncs read 12-16 %
/// (bench/results/gpu-2026-12-01-run17-long-b); at half the samples, the earlier gate,
/// those runs were not corrected. `sync-host`'s loop, never capped, still is not.
const POWER_CAPPED_SHARE: f64 = 0.1;

/// The share of a steady state that a fix raising the GPU's busy share from `before` to
/// `after` loses to slower kernels: where a GPU drew its power limit in `POWER_CAPPED_SHARE`
/// of the samples a steady state of `steady_ns` (one process's) holds, and for the part of
/// it past the clocks' ramp. 0 elsewhere.
pub fn power_capped_loss(p: &Profile, steady_ns: u64, before: f64, after: f64) -> f64 {
    let capped = telemetries(p).any(|(_, t)| {
        let samples = t
            .clock_events
            .iter()
            .find(|e| e.reason == POWER_CAP)
            .map_or(0, |e| e.samples);
        let capped_ns = samples * t.interval_ms * 1_000_000;
        t.interval_ms > 0 && capped_ns as f64 >= POWER_CAPPED_SHARE * steady_ns as f64
    });
    if !capped || before <= 0.0 || after <= before || steady_ns <= POWER_RAMP_NS {
        return 0.0;
    }
    let settled = (steady_ns - POWER_RAMP_NS) as f64 / steady_ns as f64;
    before * POWER_CAPPED_STRETCH * (after / before).ln() * settled
}

/// Idle gaps at least this long count as the GPU waiting for the host's next batch.
pub const STARVED_GAP_NS: u64 = 1_000_000;

/// Idle gaps from `STARVED_GAP_NS` up to a pause (`PAUSE_NS`): (count, approximate ns).
pub fn long_gaps(a: &Activity) -> (u64, u64) {
    let (n, ns) = a.gap_hist.at_least(STARVED_GAP_NS);
    let (pauses, pause_ns) = a.pauses();
    (n - pauses, ns - pause_ns)
}

/// The share of the working span in which no kernel ran, less the long gaps (1 ms to 1 s):
/// the idle time a host-side overhead (a sync's round trip, a launch) can explain and
/// removing it can give back. Long gaps are the host busy elsewhere (`input-starved`).
/// None without CUPTI activity.
pub fn short_idle_share(p: &Profile) -> Option<f64> {
    let (idle, span) = p.gpu_activity().fold((0u64, 0u64), |(i, s), (_, _, a)| {
        let span = a.working_span_ns();
        let idle = span
            .saturating_sub(a.busy_ns)
            .saturating_sub(long_gaps(a).1);
        (i + idle, s + span)
    });
    (span > 0).then(|| idle as f64 / span as f64)
}

/// Time in long GPU idle gaps over every device with CUPTI activity.
pub fn long_gap_ns(p: &Profile) -> u64 {
    p.gpu_activity().map(|(_, _, a)| long_gaps(a).1).sum()
}

/// The most a host-side unified-memory page fault is taken to cost: a fault on managed
/// memory that lives on the GPU migrates 64 KiB to 2 MiB back. On the H200, 16,100 CPU
/// faults went with 1.8 s of long GPU idle gaps, about 110 us each.
const CPU_FAULT_MAX_NS: u64 = 200_000;

/// The most time the host's unified-memory page faults can have kept the GPU waiting
/// while the host pulled pages back: `CPU_FAULT_MAX_NS` each. It explains GPU idle time
/// that opened with the host working (the long gaps, or the steady state's idle after a
/// sync or with the host outside the driver), up to that idle time.
pub fn um_fault_wait_ns(p: &Profile) -> u64 {
    let cpu_faults: u64 = p
        .processes
        .iter()
        .filter_map(|x| x.gpu.as_ref()?.unified_memory.as_ref())
        .map(|u| u.cpu_page_faults)
        .sum();
    cpu_faults.saturating_mul(CPU_FAULT_MAX_NS)
}

/// Profiles with GPU-side data for the rules' unit tests.
#[cfg(test)]
pub mod fixtures {
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::rule::{Finding, Input, Outcome, Rule};
    use gpuspy_format::gpu::{
        Activity, CollectiveKernels, Device, DeviceFacts, Gpu, PcieLink, Telemetry, TelemetrySeries,
    };
    use gpuspy_format::hist;

    pub const S: u64 = 1_000_000_000;
    pub const T0: u64 = 1_800_000_000 * S;

    pub fn h200() -> DeviceFacts {
        DeviceFacts {
            name: "NVIDIA H200".into(),
            sm_count: Some(132),
            pcie: PcieLink {
                gen_current: Some(5),
                gen_max: Some(5),
                width_current: Some(16),
                width_max: Some(16),
            },
            ecc_enabled: Some(true),
            max_sm_clock_mhz: Some(1980),
            ..DeviceFacts::default()
        }
    }

    /// A 10 s activity span with `busy_s` of kernels.
    pub fn activity(busy_s: f64) -> Activity {
        let busy = (busy_s * S as f64) as u64;
        Activity {
            first_unix_ns: T0,
            last_unix_ns: T0 + 10 * S,
            kernels: 1000,
            kernel_ns: busy,
            busy_ns: busy,
            active_ns: busy,
            ..Activity::default()
        }
    }

    /// Telemetry whose GPM series reads the same all over the 10 s span of `activity`:
    /// SM active, tensor-pipe and DRAM-bandwidth percentages (occupancy half SM active).
    pub fn gpm_telemetry(sm_active: f32, tensor: f32, dram: f32) -> Telemetry {
        let slots = 100;
        Telemetry {
            interval_ms: 100,
            series: TelemetrySeries {
                start_unix_ns: T0,
                step_ms: 100,
                sm_active_pct: vec![sm_active; slots],
                sm_occupancy_pct: vec![sm_active / 2.0; slots],
                tensor_active_pct: vec![tensor; slots],
                dram_bw_util_pct: vec![dram; slots],
                ..TelemetrySeries::default()
            },
            ..Telemetry::default()
        }
    }

    pub fn gpu(
        facts: DeviceFacts,
        telemetry: Option<Telemetry>,
        activity: Option<Activity>,
    ) -> Gpu {
        Gpu {
            devices: vec![Device {
                ordinal: 0,
                facts: Some(facts),
                telemetry,
                activity,
            }],
            ..Gpu::default()
        }
    }

    /// GPU data whose only activity is NCCL kernels: `(op, calls, ns)` each.
    pub fn nccl_only(collectives: &[(&str, u64, u64)]) -> Gpu {
        let activity = Activity {
            collectives: collectives
                .iter()
                .map(|&(op, calls, total_ns)| CollectiveKernels {
                    op: op.into(),
                    calls,
                    total_ns,
                })
                .collect(),
            ..Activity::default()
        };
        Gpu {
            devices: vec![Device {
                activity: Some(activity),
                ..Device::default()
            }],
            ..Gpu::default()
        }
    }

    pub fn check(rule: &dyn Rule, g: Gpu) -> Outcome {
        rule.check(&Input::new(&run(10.0).gpu(g).build()))
    }

    pub fn found(o: Outcome) -> Finding {
        match o {
            Outcome::Found(f) => f,
            Outcome::Clear => panic!("clear"),
            Outcome::NoData(m) => panic!("no data: {m}"),
        }
    }

    pub fn gaps(count: u64, each_ns: u64) -> hist::Histogram {
        let mut dense = vec![0; hist::BUCKETS];
        dense[hist::bucket_index(each_ns)] = count;
        hist::Histogram::from_dense(&dense)
    }
}

#[cfg(test)]
mod tests {
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::rule::{Input, Outcome, Rule};
    use crate::analysis::rules::{
        clocks_throttled::ClocksThrottled,
        comm_bound::CommBound,
        ecc::{EccErrors, EccOff},
        gpu_shared::GpuShared,
        input_starved::InputStarved,
        pcie_link_degraded::PcieLinkDegraded,
        small_grid::SmallGrid,
    };

    #[test]
    fn without_gpu_data_each_rule_says_what_it_lacks() {
        let p = run(1.0).build();
        for rule in [
            &PcieLinkDegraded as &dyn Rule,
            &ClocksThrottled,
            &EccOff,
            &EccErrors,
            &GpuShared,
            &SmallGrid,
            &InputStarved,
            &CommBound,
        ] {
            assert!(
                matches!(rule.check(&Input::new(&p)), Outcome::NoData(_)),
                "{}",
                rule.id()
            );
        }
    }
}
