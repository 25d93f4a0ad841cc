use super::gpu_data::*;
use crate::diagnose::{share, Finding, Layer, Outcome, Rule};
use crate::profile::Profile;
use gpuspy_format::gpu::Gauge;

/// Clock-event reasons that mean the GPU was held back, not merely idle or configured.
const THROTTLE_REASONS: [&str; 5] = [
    "sw-power-cap",
    "hw-slowdown",
    "sw-thermal-slowdown",
    "hw-thermal-slowdown",
    "hw-power-brake-slowdown",
];

/// Clocks held down by thermal or power limits.
pub struct ClocksThrottled;

impl Rule for ClocksThrottled {
    fn id(&self) -> &'static str {
        "clocks-throttled"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "The GPU's SM clock is held below its maximum by thermal or power limits.

Evidence (NVML samples): the share of samples with a power or thermal clock-event reason
active (`sw-power-cap`, `hw-slowdown`, `sw-thermal-slowdown`, `hw-thermal-slowdown`,
`hw-power-brake-slowdown`), and the mean SM clock against its maximum. Impact: the clock
deficit over the throttled samples, weighted by how busy the GPU was (a slower clock only
costs time while kernels run).

Fix: cooling and airflow, the power limit (`nvidia-smi -pl`), persistence mode, and
application clocks where the operator allows them."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let busy = p.gpu_idle_share().map_or(1.0, |idle| 1.0 - idle);
        let mut any = false;
        let mut worst: Option<Finding> = None;
        for (d, t) in telemetries(p) {
            any = true;
            if t.samples == 0 {
                continue;
            }
            let throttled: u64 = t
                .clock_events
                .iter()
                .filter(|e| THROTTLE_REASONS.contains(&e.reason.as_str()))
                .map(|e| e.samples)
                .max()
                .unwrap_or(0);
            if throttled == 0 {
                continue;
            }
            let max_clock = d.facts.as_ref().and_then(|f| f.max_sm_clock_mhz);
            let deficit = match (t.sm_clock_mhz, max_clock) {
                (Some(Gauge { mean, .. }), Some(max)) if max > 0 => {
                    (1.0 - mean / f64::from(max)).max(0.0)
                }
                _ => 0.0,
            };
            let throttled_share = share(throttled, t.samples);
            let impact = deficit * busy;
            let reasons: Vec<String> = t
                .clock_events
                .iter()
                .filter(|e| THROTTLE_REASONS.contains(&e.reason.as_str()))
                .map(|e| format!("{} in {} of {} samples", e.reason, e.samples, t.samples))
                .collect();
            let f = Finding::new(
                self,
                impact,
                format!(
                    "GPU {} was clock-throttled in {} of samples ({}); mean SM clock {} below its maximum",
                    d.ordinal,
                    pct(throttled_share),
                    reasons.join(", "),
                    pct(deficit)
                ),
                "Check cooling and the power limit (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE).",
            )
            .evidence("device", d.ordinal)
            .evidence("throttled_samples", throttled)
            .evidence("samples", t.samples)
            .evidence("sm_clock_deficit", deficit);
            if worst.as_ref().is_none_or(|w| w.impact < f.impact) {
                worst = Some(f);
            }
        }
        match (any, worst) {
            (false, _) => Outcome::NoData(NO_TELEMETRY),
            (true, Some(f)) => Outcome::Found(f),
            (true, None) => Outcome::Clear,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::{ClockEvent, Gauge, Telemetry};

    #[test]
    fn throttling_costs_the_clock_deficit_while_busy() {
        let t = Telemetry {
            samples: 100,
            sm_clock_mhz: Some(Gauge {
                samples: 100,
                min: 1400.0,
                mean: 1584.0,
                max: 1980.0,
                last: 1584.0,
            }),
            clock_events: vec![
                ClockEvent {
                    reason: "gpu-idle".into(),
                    samples: 10,
                },
                ClockEvent {
                    reason: "sw-power-cap".into(),
                    samples: 60,
                },
            ],
            ..Telemetry::default()
        };
        let f = found(check(
            &ClocksThrottled,
            gpu(h200(), Some(t), Some(activity(5.0))),
        ));
        // 20 % clock deficit while the GPU was busy half the time.
        assert!((f.impact - 0.1).abs() < 1e-9, "{}", f.impact);
        assert!(f.summary.contains("sw-power-cap in 60 of 100 samples"));
        let idle_only = Telemetry {
            samples: 100,
            clock_events: vec![ClockEvent {
                reason: "gpu-idle".into(),
                samples: 90,
            }],
            ..Telemetry::default()
        };
        assert!(matches!(
            check(&ClocksThrottled, gpu(h200(), Some(idle_only), None)),
            Outcome::Clear
        ));
    }
}
