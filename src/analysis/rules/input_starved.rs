use super::gpu_data::*;
use super::um_fault_heavy::fault_host_wait_ns;
use crate::analysis::phases::{IdleKind, SteadyGpu, SteadyState};
use crate::analysis::profile::Profile;
use crate::analysis::rule::{refill_of_warning, Finding, Input, Layer, Outcome, Rule};
use crate::units::share;
use gpuspy_format::timeline::IdleCause;

/// The GPU waits for input data.
pub struct InputStarved;

/// The host's share of its steady time inside driver calls, below which it was busy
/// elsewhere (data loading) rather than launching or waiting.
const HOST_IN_DRIVER_MAX: f64 = 0.5;

impl Rule for InputStarved {
    fn id(&self) -> &'static str {
        "input-starved"
    }
    fn layer(&self) -> Layer {
        Layer::Pipeline
    }
    fn doc(&self) -> &'static str {
        "The GPU sits idle while the host is outside the driver, typically loading and preparing the next batch.

Evidence (CUPTI activity and host-side timing): GPU idle gaps from 1 ms to 1 s between
stretches of activity, against the working span (the activity span less pauses of 1 s or
more: set-up, evaluation, checkpoints), while the host spent less than half
its steady time inside driver calls (so it was neither launching nor waiting on the
GPU). Impact: the time in those long gaps over the working span, less the part the host's unified-memory page faults can explain (up to
200 us each), which `um-fault-heavy` claims: that host was faulting pages in, not
loading data.

With a timeline whose GPU side is there (dumps of schema 2), one-off gaps (a JIT compile,
an evaluation, a checkpoint) are pauses, not starvation (docs/diagnosis.md, \"Phases\"): the
impact is the GPU idle time of the steady state that began with the host outside the driver
(or launching at under 10,000 launches a second, or in a gap of 1 ms or more, or in a
window CUPTI missed without a launch) and nothing queued, over the steady device
time, while the host spent less than half the steady state inside driver calls. Where
those waits warn (5 % or more), the queue's refill counts too: after each wait of 1 ms or
more the GPU idles while the host launches into the emptied queue, and that launching idle
comes back, up to the waits in such gaps and the GPU's busy share. A one-off
stall is not counted either: where one steady window holds twice as much of that idle as
all the others together (in a steady state of three windows or more), it is the host
stalling once (a garbage collection, a compile's tail: 21 ms in a torch.compile'd loop's
0.36 s on the H200), not waiting for data every step.

Fix: `DataLoader(num_workers=N, persistent_workers=True, prefetch_factor=...)`, pinned
memory, prefetch to the GPU on a side stream, decode on the GPU, and cache preprocessed data."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        if let Some(s) = input.steady() {
            if let Some(g) = &s.gpu {
                return self.on_steady(p, s, g);
            }
        }
        let mut any = false;
        let (mut gaps, mut gap_ns, mut span) = (0u64, 0u64, 0u64);
        for (_, _, a) in p.gpu_activity() {
            any = true;
            let (n, ns) = long_gaps(a);
            gaps += n;
            gap_ns += ns;
            span += a.working_span_ns();
        }
        if !any {
            return Outcome::NoData(NO_ACTIVITY);
        }
        // Gaps the host's unified-memory faults explain belong to um-fault-heavy.
        let gap_ns = gap_ns.saturating_sub(um_fault_wait_ns(p));
        let driver: u64 = p.processes.iter().map(|x| x.driver_ns).sum();
        let steady: u64 = p.processes.iter().map(|x| x.steady_ns).sum();
        let in_driver = share(driver, steady);
        // Gaps are summed per device and so is the span; a device whose records came late
        // can still have more gap than span: the share is capped at all of it.
        let impact = share(gap_ns, span).min(1.0);
        if gaps == 0 || in_driver >= HOST_IN_DRIVER_MAX || impact < 0.01 {
            return Outcome::Clear;
        }
        Outcome::Found(
            Finding::new(
                self,
                impact,
                format!(
                    "The GPU sat idle in gaps of 1 ms or more {} of the working span. There were {gaps} such gaps. The host spent {} of its time inside the driver.",
                    pct(impact),
                    pct(in_driver)
                ),
                FIX,
            )
            .evidence("long_gaps", gaps)
            .evidence("long_gap_ns", gap_ns)
            .evidence("span_ns", span)
            .evidence("host_in_driver_share", in_driver),
        )
    }
}

impl InputStarved {
    /// The judgement on the steady state of a timeline with its GPU side.
    fn on_steady(&self, p: &Profile, s: &SteadyState, g: &SteadyGpu) -> Outcome {
        let in_driver = share(s.host.driver_ns, s.ns);
        // Idle time the host's unified-memory page faults explain belongs to um-fault-heavy,
        // as on the whole-run path.
        // Shares: the device time is what was recorded (sampled, a part of the steady
        // state); the host's wait on faults is the steady state's (over the run in older
        // dumps).
        // A one-off stall is not starvation, as a one-off pause is not (issue 13).
        let host_idle = g
            .idle
            .get(&IdleKind::Host)
            .copied()
            .unwrap_or(0)
            .saturating_sub(g.host_stall_ns);
        // The host cannot have worked outside the driver for longer than it was outside it:
        // where it was blocked in a sync, the GPU ran work CUPTI does not show (managed
        // memory prefetched back, 22 ms of a 57 ms step on the H200, read as idle).
        let waited = share(host_idle, g.ns) - share(fault_host_wait_ns(p, s), s.ns);
        // After each wait of a millisecond or more the GPU idles while the host launches
        // into the emptied queue: fed in time, the host launches ahead instead
        // (`SteadyGpu::refill_share`). A DataLoader too slow for a ResNet-50 left 45.2 %
        // host idle and 18.1 % launching, and batches kept on the GPU saved 72 %
        // (bench/results/gpu-2026-12-03-reallib-7). The microsecond bubbles of a busy loop
        // drain nothing. The refill sizes the fix of waits the rule warns about, and finds
        // none by itself: a healthy loop with checkpoints, GPU busy 88 %, idled 4.8 % with
        // the host working and 4.2 % launching (tests/data/reallib4-healthy-checkpoint.json).
        let refill = refill_of_warning(g, waited, waited.min(g.long_share(IdleCause::Host)));
        let impact = (waited + refill).min(1.0 - in_driver).max(0.0);
        if in_driver >= HOST_IN_DRIVER_MAX || impact < 0.01 {
            return Outcome::Clear;
        }
        Outcome::Found(
            Finding::new(
                self,
                impact,
                format!(
                    "The GPU sat idle with nothing queued {} of the steady state, while the host worked outside the driver. The host spent {} of it inside the driver.{}",
                    pct(waited.max(0.0)),
                    pct(in_driver),
                    if refill >= 0.01 {
                        format!(
                            " After each wait the GPU also idled {} of it while the host launched into the emptied queue.",
                            pct(refill)
                        )
                    } else {
                        String::new()
                    }
                ),
                FIX,
            )
            .evidence("host_idle_ns", host_idle)
            .evidence("host_stall_ns", g.host_stall_ns)
            .evidence("refill_share", refill)
            .evidence("steady_device_ns", g.ns)
            .evidence("host_in_driver_share", in_driver),
        )
    }
}

const FIX: &str = "DataLoader(num_workers=N, persistent_workers=True, pin_memory=True, prefetch_factor=2+); prefetch batches to the GPU on a side stream.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::rules::gpu_data::fixtures::*;

    #[test]
    fn long_idle_gaps_with_the_host_elsewhere_are_input_starvation() {
        let mut a = activity(4.0);
        a.gap_hist = gaps(100, 50_000_000);
        let f = found(check(&InputStarved, gpu(h200(), None, Some(a.clone()))));
        // 100 gaps of ~50 ms in a 10 s span.
        assert!((f.impact - 0.5).abs() < 0.04, "{}", f.impact);
        // The same gaps while the host sat in the driver (waiting) are not starvation.
        let mut busy_host = run(10.0).gpu(gpu(h200(), None, Some(a))).build();
        busy_host.processes[0].driver_ns = 8 * S;
        assert!(matches!(
            InputStarved.check(&Input::new(&busy_host)),
            Outcome::Clear
        ));
        // Microsecond gaps (launch overhead) are not either.
        let mut short = activity(4.0);
        short.gap_hist = gaps(100_000, 20_000);
        assert!(matches!(
            check(&InputStarved, gpu(h200(), None, Some(short))),
            Outcome::Clear
        ));
    }

    #[test]
    fn pauses_of_a_second_or_more_are_not_starvation() {
        // 100 gaps of 50 ms, and a 4 s pause (a model built on the host) in a 10 s span:
        // the gaps are 5 s of a 6 s working span.
        let mut a = activity(1.0);
        let mut dense = gaps(100, 50_000_000).to_dense();
        dense[gpuspy_format::hist::bucket_index(4 * S)] = 1;
        a.gap_hist = gpuspy_format::hist::Histogram::from_dense(&dense);
        let f = found(check(&InputStarved, gpu(h200(), None, Some(a))));
        assert!((f.impact - 5.0 / 6.0).abs() < 0.05, "{}", f.impact);
        assert_eq!(f.evidence["long_gaps"], 100);
    }

    #[test]
    fn the_host_works_outside_the_driver_only_while_it_is_outside_it() {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        // A 200 ms loop of 10 ms steps: the GPU runs 1 ms of kernels and reads idle 9 ms
        // with the host working, while the host is blocked in a sync 4 of the 10 ms (on
        // work CUPTI does not show: managed memory prefetched back). The host worked
        // outside the driver 60 % of the loop at most.
        let step = W {
            launches: 20,
            driver_ns: 4 * MS,
            blocked_ns: 4 * MS,
            busy_ns: MS,
            idle_host: 9 * MS,
            ..W::default()
        };
        let mut p = run(0.2).gpu(gpu(h200(), None, Some(activity(1.0)))).build();
        attach(&mut p, timeline(&times(20, step), true));
        let f = found(InputStarved.check(&Input::new(&p)));
        assert!((f.impact - 0.6).abs() < 1e-3, "{}", f.impact);
    }

    #[test]
    fn the_queue_refilling_after_each_wait_is_the_input_pipelines_up_to_the_wait() {
        use crate::analysis::phases::fixtures::{attach, timeline, MS, W};
        use gpuspy_format::timeline::{GapEnd, LongIdleSeries};
        // Steps of 10 ms (100 launches, the GPU busy `busy` ms, idle the rest while the
        // host launched into the queue the wait emptied), each after a 10 ms wait for its
        // batch (GPU idle 9 ms with the host outside the driver).
        let loop_of = |busy: u64| {
            let step = W {
                launches: 100,
                busy_ns: busy * MS,
                idle_host: (10 - busy) * MS,
                ..W::default()
            };
            let wait = W {
                launches: 5,
                busy_ns: MS,
                idle_host: 9 * MS,
                ..W::default()
            };
            let mut w: Vec<W> = (0..20).flat_map(|_| [step, wait]).collect();
            w.push(step);
            let mut t = timeline(&w, true);
            // Each wait is one gap of 9 ms, ended by the batch's copy.
            t.devices[0].long_idle_ns = vec![LongIdleSeries {
                cause: IdleCause::Host,
                ended_by: GapEnd::CopyToDevice,
                ns: w
                    .iter()
                    .map(|w| if w.launches == 5 { w.idle_host } else { 0 })
                    .collect(),
            }];
            let mut p = run(0.41)
                .gpu(gpu(h200(), None, Some(activity(1.0))))
                .build();
            attach(&mut p, t.clone());
            let waits = found(InputStarved.check(&Input::new(&p)));
            // The same idle in microsecond bubbles drains no queue: nothing to refill.
            t.devices[0].long_idle_ns.clear();
            attach(&mut p, t);
            let bubbles = found(InputStarved.check(&Input::new(&p)));
            assert_eq!(bubbles.evidence["refill_share"], 0.0);
            waits
        };
        // Waits 9 of every 20 ms, launching idle 3: fed in time, the host launches ahead
        // and the 3 ms come back too.
        let f = loop_of(7);
        assert!((f.impact - 0.6).abs() < 0.02, "{}", f.impact);
        assert!((f.evidence["refill_share"].as_f64().unwrap() - 0.15).abs() < 0.01);
        // A GPU busy 2 of every 20 ms has almost no queue to refill: the launching idle
        // (8 ms) is the host's dispatch, and only the GPU's busy share of it comes back.
        let f = loop_of(1);
        assert!((f.evidence["refill_share"].as_f64().unwrap() - 0.1).abs() < 0.01);
        assert!((f.impact - 0.55).abs() < 0.02, "{}", f.impact);
    }
}
