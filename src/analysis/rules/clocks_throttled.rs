use super::gpu_data::*;
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule};
use crate::units::share;
use gpuspy_format::gpu::{ClockEvent, Gauge};

/// Clock-event reasons that mean the GPU was held back, not merely idle or configured.
const THROTTLE_REASONS: [&str; 5] = [
    POWER_CAP,
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
deficit, weighted by how busy the GPU was (a slower clock only costs time while kernels
run).

`sw-power-cap` alone, with the enforced power limit at the board's default, is how dense
math runs on current data-centre GPUs (a bf16 matmul loop on the H200 drew 699 of 700 W at
a 24 % lower clock): reported as information with no impact, since nothing short of a
higher limit would give that time back. With a lowered limit, or any thermal or hardware
slowdown, it is a finding.

Fix: cooling and airflow, the power limit (`nvidia-smi -pl`, back to the default),
persistence mode, and application clocks where the operator allows them."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let busy = p.gpu_idle_share().map_or(1.0, |idle| 1.0 - idle);
        let mut any = false;
        let mut worst: Option<Finding> = None;
        for (d, t) in telemetries(p) {
            any = true;
            if t.samples == 0 {
                continue;
            }
            let events: Vec<&ClockEvent> = t
                .clock_events
                .iter()
                .filter(|e| THROTTLE_REASONS.contains(&e.reason.as_str()))
                .collect();
            let Some(throttled) = events.iter().map(|e| e.samples).max() else {
                continue;
            };
            let max_clock = d.facts.as_ref().and_then(|f| f.max_sm_clock_mhz);
            let deficit = match (t.sm_clock_mhz, max_clock) {
                (Some(Gauge { mean, .. }), Some(max)) if max > 0 => {
                    (1.0 - mean / f64::from(max)).max(0.0)
                }
                _ => 0.0,
            };
            let limits = d
                .facts
                .as_ref()
                .map(|f| (f.power_limit_mw, f.default_power_limit_mw));
            let lowered = match limits {
                Some((Some(enforced), Some(default))) => enforced < default,
                _ => false,
            };
            let power_bound = !lowered && events.iter().all(|e| e.reason == POWER_CAP);
            let reasons: Vec<String> = events
                .iter()
                .map(|e| format!("{} in {} of {} samples", e.reason, e.samples, t.samples))
                .collect();
            let mut summary = format!(
                "GPU {} was clock-throttled in {} of samples ({}). Its mean SM clock was {} of its maximum.",
                d.ordinal,
                pct(share(throttled, t.samples)),
                reasons.join(", "),
                pct(1.0 - deficit)
            );
            match limits {
                Some((Some(enforced), Some(default))) if lowered => summary.push_str(&format!(
                    " The power limit is lowered to {} W, from a default of {} W.",
                    enforced / 1000,
                    default / 1000
                )),
                _ if power_bound => summary.push_str(
                    " The GPU drew its power limit, as dense math does at the default limit: no fault.",
                ),
                _ => {}
            }
            let f = Finding::new(
                self,
                if power_bound { 0.0 } else { deficit * busy },
                summary,
                "Check cooling and the power limit (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE).",
            )
            .evidence("device", d.ordinal)
            .evidence("throttled_samples", throttled)
            .evidence("samples", t.samples)
            .evidence("sm_clock_deficit", deficit)
            .evidence("power_bound", power_bound);
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
    use crate::analysis::rule::Severity;
    use crate::analysis::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::{DeviceFacts, Telemetry};

    /// 100 samples at a mean SM clock 20 % below the maximum, `reason` in 60 of them.
    fn throttled(reason: &str) -> Telemetry {
        Telemetry {
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
                    reason: reason.into(),
                    samples: 60,
                },
            ],
            ..Telemetry::default()
        }
    }

    fn with_power_limit(enforced_w: u32) -> DeviceFacts {
        DeviceFacts {
            power_limit_mw: Some(enforced_w * 1000),
            default_power_limit_mw: Some(700_000),
            ..h200()
        }
    }

    #[test]
    fn thermal_throttling_costs_the_clock_deficit_while_busy() {
        let t = throttled("hw-thermal-slowdown");
        let f = found(check(
            &ClocksThrottled,
            gpu(with_power_limit(700), Some(t), Some(activity(5.0))),
        ));
        // 20 % clock deficit while the GPU was busy half the time.
        assert!((f.impact - 0.1).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.severity, Severity::Warning);
        assert!(f
            .summary
            .contains("hw-thermal-slowdown in 60 of 100 samples"));
    }

    #[test]
    fn the_power_cap_at_the_default_limit_is_information() {
        for facts in [with_power_limit(700), h200()] {
            let f = found(check(
                &ClocksThrottled,
                gpu(facts, Some(throttled("sw-power-cap")), Some(activity(5.0))),
            ));
            assert_eq!((f.impact, f.severity), (0.0, Severity::Info));
            assert!(f.summary.contains("drew its power limit"), "{}", f.summary);
            assert_eq!(f.evidence["power_bound"], true);
        }
    }

    #[test]
    fn the_power_cap_under_a_lowered_limit_is_a_finding() {
        let f = found(check(
            &ClocksThrottled,
            gpu(
                with_power_limit(500),
                Some(throttled("sw-power-cap")),
                Some(activity(5.0)),
            ),
        ));
        assert!((f.impact - 0.1).abs() < 1e-9, "{}", f.impact);
        assert!(
            f.summary
                .contains("The power limit is lowered to 500 W, from a default of 700 W."),
            "{}",
            f.summary
        );
    }

    #[test]
    fn an_idle_gpu_is_not_throttled() {
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
