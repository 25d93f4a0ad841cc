use super::gpu_data::*;
use crate::diagnose::{share, Finding, Layer, Outcome, Rule};
use crate::profile::Profile;

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

Evidence (CUPTI activity and host-side timing): GPU idle gaps of 1 ms or more between
stretches of activity, against the activity span, while the host spent less than half
its steady time inside driver calls (so it was neither launching nor waiting on the
GPU). Impact: the time in those long gaps over the span, less the start-up calls the span
can hold (module loading, NCCL communicator set-up after the first kernel: the GPU waits
for those, not for data), and less the part the host's unified-memory page faults can explain (up to
200 us each), which `um-fault-heavy` claims: that host was faulting pages in, not
loading data.

Fix: `DataLoader(num_workers=N, persistent_workers=True, prefetch_factor=...)`, pinned
memory, prefetch to the GPU on a side stream, decode on the GPU, and cache preprocessed data."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let mut any = false;
        let (mut gaps, mut gap_ns, mut span) = (0u64, 0u64, 0u64);
        for (_, _, a) in p.gpu_activity() {
            any = true;
            let (n, ns) = long_gaps(&a.gap_hist, STARVED_GAP_NS);
            gaps += n;
            gap_ns += ns;
            span += a.span_ns();
        }
        if !any {
            return Outcome::NoData(NO_ACTIVITY);
        }
        // Gaps the host's unified-memory faults explain belong to um-fault-heavy; gaps
        // while it was in start-up calls are start-up.
        let gap_ns = gap_ns
            .saturating_sub(um_host_wait_ns(p))
            .saturating_sub(startup_within_activity_ns(p));
        let driver: u64 = p.processes.iter().map(|x| x.driver_ns).sum();
        let steady: u64 = p.processes.iter().map(|x| x.steady_ns).sum();
        let in_driver = share(driver, steady);
        let impact = share(gap_ns, span);
        if gaps == 0 || in_driver >= HOST_IN_DRIVER_MAX || impact < 0.01 {
            return Outcome::Clear;
        }
        Outcome::Found(
            Finding::new(
                self,
                impact,
                format!(
                    "the GPU sat idle in {gaps} gaps of 1 ms or more ({} of the activity span) while the host spent {} of its time inside the driver",
                    pct(impact),
                    pct(in_driver)
                ),
                "DataLoader(num_workers=N, persistent_workers=True, pin_memory=True, prefetch_factor=2+); prefetch batches to the GPU on a side stream.",
            )
            .evidence("long_gaps", gaps)
            .evidence("long_gap_ns", gap_ns)
            .evidence("span_ns", span)
            .evidence("host_in_driver_share", in_driver),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::synthetic::run;
    use crate::rules::gpu_data::fixtures::*;

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
        assert!(matches!(InputStarved.check(&busy_host), Outcome::Clear));
        // Microsecond gaps (launch overhead) are not either.
        let mut short = activity(4.0);
        short.gap_hist = gaps(100_000, 20_000);
        assert!(matches!(
            check(&InputStarved, gpu(h200(), None, Some(short))),
            Outcome::Clear
        ));
    }

    #[test]
    fn start_up_after_the_first_kernel_is_not_starvation() {
        // 2.5 s of start-up calls, of which 0.5 s ran before the first kernel (which came
        // 0.5 s after the first driver call): 2 s of the long gaps are start-up.
        let mut a = activity(4.0);
        a.gap_hist = gaps(100, 50_000_000);
        let mut p = run(10.0).gpu(gpu(h200(), None, Some(a))).build();
        let x = &mut p.processes[0];
        x.first_call_unix_ns = T0 - S / 2;
        x.steady_ns = x.active_ns - 5 * S / 2;
        let f = found(InputStarved.check(&p));
        assert!((f.impact - 0.3).abs() < 0.04, "{}", f.impact);
    }
}
