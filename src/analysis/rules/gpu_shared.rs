use super::gpu_data::*;
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule};
use crate::units::share;

/// Other processes use the same GPU.
pub struct GpuShared;

/// How many other processes used the device: the most NVML listed when gpuspy started or
/// saw in any telemetry sample. This rule's test, also the device warning beside each
/// device in the report (`analyse::device_warnings`).
pub fn others_seen(
    f: &gpuspy_format::gpu::DeviceFacts,
    t: Option<&gpuspy_format::gpu::Telemetry>,
) -> u32 {
    (f.other_processes.len() as u32).max(t.map_or(0, |t| t.other_processes_max))
}

impl Rule for GpuShared {
    fn id(&self) -> &'static str {
        "gpu-shared"
    }
    fn layer(&self) -> Layer {
        Layer::Runtime
    }
    fn doc(&self) -> &'static str {
        "Other processes use the same GPU, competing for its time and memory.

Evidence (NVML): the other compute processes on the GPU and their memory, and NVML's
utilisation (kernels of every process) against this process's own kernel busy share from
CUPTI. Impact: the utilisation the others added, when both are known; otherwise the
finding is informational.

Fix: give the job its own GPU (`CUDA_VISIBLE_DEVICES`), MIG partitions, or MPS for
cooperating processes."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let mut any = false;
        for (_, d) in p.gpu_devices() {
            let (Some(f), t) = (d.facts.as_ref(), d.telemetry.as_ref()) else {
                continue;
            };
            any = true;
            let seen = others_seen(f, t);
            if seen == 0 {
                continue;
            }
            let util = t.and_then(|t| t.gpu_util_pct).map(|g| g.mean / 100.0);
            let own = d
                .activity
                .as_ref()
                .map(|a| share(a.busy_ns, a.working_span_ns()));
            let impact = match (util, own) {
                (Some(u), Some(o)) => (u - o).max(0.0),
                _ => 0.0,
            };
            let pids: Vec<String> = f
                .other_processes
                .iter()
                .map(|o| o.pid.to_string())
                .collect();
            return Outcome::Found(
                Finding::new(
                    self,
                    impact,
                    format!(
                        "GPU {} is shared with {seen} other process(es){}.",
                        d.ordinal,
                        if pids.is_empty() {
                            String::new()
                        } else {
                            format!(" (pid {})", pids.join(", "))
                        }
                    ),
                    "Give the job its own GPU (CUDA_VISIBLE_DEVICES), a MIG slice, or MPS.",
                )
                .evidence("device", d.ordinal)
                .evidence("other_processes", seen)
                .evidence("nvml_util", util.unwrap_or(f64::NAN))
                .evidence("own_busy_share", own.unwrap_or(f64::NAN)),
            );
        }
        if any {
            Outcome::Clear
        } else {
            Outcome::NoData(NO_FACTS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::{Gauge, GpuProcess, Telemetry};

    #[test]
    fn a_shared_gpu_costs_what_the_others_add_to_utilisation() {
        let mut facts = h200();
        facts.other_processes.push(GpuProcess {
            pid: 4242,
            used_bytes: Some(1 << 30),
        });
        let t = Telemetry {
            samples: 10,
            gpu_util_pct: Some(Gauge {
                samples: 10,
                min: 60.0,
                mean: 70.0,
                max: 80.0,
                last: 70.0,
            }),
            ..Telemetry::default()
        };
        let f = found(check(&GpuShared, gpu(facts, Some(t), Some(activity(3.0)))));
        assert!((f.impact - 0.4).abs() < 1e-9, "{}", f.impact);
        assert!(f.summary.contains("pid 4242"));
        assert!(matches!(
            check(&GpuShared, gpu(h200(), None, None)),
            Outcome::Clear
        ));
    }
}
