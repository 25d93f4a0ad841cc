use super::gpu_data::{power_capped_loss, short_idle_share};
use super::recurrence::Recurrence;
use crate::analysis::phases::{
    accounted_ns, at, in_steady, IdleKind, SteadyState, TimeAxis, HOST_BLOCKED_CAUSES,
};
use crate::analysis::profile::Profile;
use crate::analysis::rule::{ms, refill_of_warning, Finding, Input, Layer, Outcome, Rule};
use crate::units::share;
use gpuspy_format::timeline::IdleCause;
use gpuspy_format::{Direction, HostKind, SyncCause};

/// The host keeps stopping to wait for the GPU.
pub struct SyncStalled;

/// Syncs more often than this per second are part of every step, not of the run's end.
const MIN_SYNCS_PER_S: f64 = 20.0;
/// A rate needs steps to be a per-step pattern: a 140 ms steady state of a CUDA-graph loop
/// on the H200 held 4 syncs (29/s), its timing harness's midpoint and final ones.
const MIN_SYNCS: u64 = 10;
const MIN_SHARE: f64 = 0.10;
/// With the GPU side of a timeline: the least share of the steady state the GPU must sit
/// idle after syncs.
const MIN_IDLE_SHARE: f64 = 0.01;
/// The syncs that block the host until the GPU has caught up.
const CAUSES: [SyncCause; 2] = HOST_BLOCKED_CAUSES;

impl Rule for SyncStalled {
    fn id(&self) -> &'static str {
        "sync-stalled"
    }
    fn layer(&self) -> Layer {
        Layer::Framework
    }
    fn doc(&self) -> &'static str {
        "The host blocks in synchronisations inside the loop (explicit syncs, `.item()`-style copies), draining the GPU's queue each time.

Evidence: the calls that blocked the host thread until the GPU caught up, that is
`cuStreamSynchronize`, `cuCtxSynchronize`, `cuEventSynchronize` and the synchronous copy
APIs, with their count per second and their share of the steady-state time (the time since
the first driver call, less start-up). The rule fires at 20 or more such waits a second,
10 or more in all, that take 10 % or more of that time. A wait at the end of a long GPU step is the GPU
working, not a stall, so rare syncs never fire it.

Impact: if the host works H and then waits W in each step, removing the wait lets host
and GPU overlap, and the step takes at least max(H, W) instead of H + W. The gain is
therefore at most min(H, W) / (H + W), summed over the run as
min(blocked, steady - blocked) / steady. A host that waits nearly all the time is held by
the GPU, not by the syncs, and this bound says so. Overlap can only give back time the GPU
spent idle in short gaps, so with CUPTI busy time the impact is also capped by the share
of the working span the GPU sat idle, less the gaps of 1 ms or more (the host busy
elsewhere: `input-starved`).
Without it the finding is a heuristic: the GPU may have been busy for all of H as well.

With a timeline (dumps of schema 2), every figure is the steady state's (docs/diagnosis.md,
\"Phases\"), and where the GPU side is there the impact is measured, not bounded: the idle
each sync opens, from its return, with the GPU drained, to the next launch (`after-sync`
idle, the shim's `IdleCause::AfterSync`), over the steady device time. That is the host
working on what the sync read: `.item()` then a formatted log record idles the GPU for the
formatting every step, and reading the value every N steps takes the sync and that work out
of N - 1 steps in N. The time blocked inside the sync does not size it: a loop whose host
lags its GPU finds the GPU drained when it syncs, blocks a few microseconds, and still
idles the GPU for all of its host work after the sync. What separates this from
`input-starved` is where the idle begins: a gap that opens as a sync returns is this rule's,
one that opens with no sync just before, while the host is outside the driver, is
`input-starved`'s. Where the host's work after the sync does not use the value (it stays
once the sync is gone), only the part of it the GPU's queue covers comes back, the time the
sync blocked: the impact then overstates (a staged step of 3 ms on the GPU and 3.5 ms of
host work after `.item()`: 48.5-50.5 % predicted, 44-47 % saved on the H200). Idle after syncs
that comes in a few bursts over a small part of the steady state (a checkpoint's copies and
the writing after them) is not a per-step cost and does not fire the rule
(`rules::recurrence`). Where that idle alone warns (5 % or more), the queue's refill counts
too: each sync drains the queue, and the GPU idles between the next step's first launches
until the host gets ahead again. That launching idle comes back up to the time blocked in
the syncs and the GPU's busy share (`SteadyGpu::refill_share`): per-step `.item()` logging
(`examples/reallib.py item-logging`), 16-23 % after syncs and 11-15 % refill, predicted
29-37 % against 26-37 % saved by logging every 50 steps.
The rule fires at 20 or more syncs a second, 10 or more in all, with 1 % or more of the
steady state idle after them.
On a GPU at its power limit (NVML's `sw-power-cap` in at least a tenth of the steady
state's samples) the fix saves less: the busier GPU spends the same power on more work, at lower
clocks, and its kernels take longer. The impact then loses 0.25 × busy × ln(busy after /
busy before) of the steady state past its first 100 ms (the clocks come down within
110-200 ms), calibrated on the H200 (a bf16 matmul loop: SM clock 5.6-9.8 % lower without
the sync, kernels 2.3-4.6 % longer; docs/diagnosis.md).

Fix: read values every N steps or keep them on the device. Drop `.item()`, `.cpu()`,
`.tolist()` and `print(tensor)` from the step (accumulate metrics on the GPU and read them
every N steps), avoid `torch.cuda.synchronize()` outside timing code, use
`non_blocking=True` copies with events, and in CuPy avoid `.get()` and implicit conversions inside the loop."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        if let Some(s) = input.steady() {
            return self.on_steady(p, input.axis.as_ref(), s);
        }
        let steady = p.steady_ns();
        let (calls, blocked) = run_syncs(p);
        let per_s = calls as f64 / (steady as f64 / 1e9);
        let blocked_share = share(blocked, steady);
        if !every_step(calls, per_s) || blocked_share < MIN_SHARE {
            return Outcome::Clear;
        }
        let working = steady.saturating_sub(blocked);
        let idle = short_idle_share(p);
        let bound = share(blocked.min(working), steady);
        let impact = idle.map_or(bound, |i| bound.min(i));
        let f = Finding::new(
                self,
                impact,
                format!(
                    "The host waited for the GPU {:.1} % of the steady state. It synced {per_s:.0} times a second.",
                    blocked_share * 100.0
                ),
                FIX,
            )
            .evidence("sync_calls", calls)
            .evidence("syncs_per_s", (per_s * 10.0).round() / 10.0)
            .evidence("blocked_ms", ms(blocked))
            .evidence("blocked_share", blocked_share)
            .evidence("steady_ms", ms(steady));
        let f = item_like(f, p).evidence("gpu_short_idle_share", idle.unwrap_or(f64::NAN));
        Outcome::Found(if idle.is_some() { f } else { f.heuristic() })
    }
}

impl SyncStalled {
    /// The judgement on the steady state of a timeline.
    fn on_steady(&self, p: &Profile, axis: Option<&TimeAxis>, s: &SteadyState) -> Outcome {
        let blocked = s.host.blocked_ns(&CAUSES);
        let (run_calls, _) = run_syncs(p);
        let calls = in_steady(run_calls, blocked, s.whole.blocked_ns(&CAUSES));
        let per_s = s.per_s(calls);
        let blocked_share = share(s.host_blocked_ns(), s.ns);
        let (impact, summary, slower, refill) = match &s.gpu {
            Some(g) => {
                // The idle a sync opens, from its return to the next launch, is the host
                // working on what it read (a log record, host-side math on a copied
                // tensor): reading the value every N steps takes both out of the step. The
                // time blocked in the sync does not size it: the GPU has often drained by
                // then.
                let idle = g.share(IdleKind::AfterSync);
                let after_sync = axis.map(|a| {
                    Recurrence::of(p, a, |t, w| {
                        // Only the windows CUPTI's recording periods covered.
                        let observed = || t.devices.iter().filter(|d| accounted_ns(d, w) > 0);
                        let idle = observed().flat_map(|d| &d.idle_ns);
                        let after_sync = idle.filter(|i| i.cause == IdleCause::AfterSync);
                        let ns = after_sync.map(|i| at(&i.ns, w)).sum();
                        observed().next().is_some().then_some(ns)
                    })
                });
                if after_sync.is_some_and(|r| r.one_off()) {
                    // A checkpoint's copies and the host's writing after them.
                    return Outcome::Clear;
                }
                // Each sync also drains the queue, and the GPU then idles between the
                // next step's first launches until the host gets ahead of it again: read
                // every N steps, the host launches ahead instead. A loop that read the loss
                // each step (`.item()` and a formatted log record) idled 16.4 % after its
                // syncs and 12.3 % launching, and logging every 50 steps saved 28 %
                // (bench/results/gpu-2026-12-04-reallib-8).
                let refill = refill_of_warning(g, idle, blocked_share);
                let busy = g.busy_share();
                let after = (busy / (1.0 - idle - refill)).min(1.0);
                let processes = p.processes.len().max(1) as u64;
                let slower = power_capped_loss(p, s.ns / processes, busy, after);
                let saved = (idle + refill - slower).max(0.0);
                if !every_step(calls, per_s) || saved < MIN_IDLE_SHARE {
                    return Outcome::Clear;
                }
                let mut summary = format!(
                    "The GPU sat idle after syncs {:.1} % of the steady state, while the host worked with nothing queued. The host synced about {per_s:.0} times a second. It was blocked in them {:.1} % of the steady state.",
                    idle * 100.0,
                    blocked_share * 100.0
                );
                if refill >= 0.01 {
                    summary.push_str(&format!(
                        " After each sync the GPU also idled {:.1} % of it while the host launched into the emptied queue.",
                        refill * 100.0
                    ));
                }
                if slower > 0.0 {
                    summary.push_str(&format!(
                        " The GPU draws its power limit, so kept busier it runs slower: that takes {:.1} % of the steady state back.",
                        slower * 100.0
                    ));
                }
                (saved, summary, slower, refill)
            }
            None => {
                if !every_step(calls, per_s) || blocked_share < MIN_SHARE {
                    return Outcome::Clear;
                }
                let bound = share(blocked.min(s.ns.saturating_sub(blocked)), s.ns);
                let summary = format!(
                    "The host waited for the GPU {:.1} % of the steady state. It synced about {per_s:.0} times a second.",
                    blocked_share * 100.0
                );
                (bound, summary, 0.0, 0.0)
            }
        };
        let f = Finding::new(self, impact, summary, FIX)
            .evidence("sync_calls", run_calls)
            .evidence("steady_sync_calls", calls)
            .evidence("syncs_per_s", (per_s * 10.0).round() / 10.0)
            .evidence("blocked_ms", ms(blocked))
            .evidence("blocked_share", blocked_share)
            .evidence("steady_ms", ms(s.ns))
            .evidence("power_capped_loss", slower)
            .evidence("refill_share", refill);
        let f = item_like(f, p);
        Outcome::Found(match &s.gpu {
            Some(g) => f
                .evidence("gpu_after_sync_idle_share", g.share(IdleKind::AfterSync))
                .evidence("gpu_busy_share", g.busy_share()),
            None => f.heuristic(),
        })
    }
}

const FIX: &str = "Read values every N steps or keep them on the device: accumulate metrics on the GPU and call .item()/.cpu()/print(tensor) every N steps; no torch.cuda.synchronize() in the loop; non_blocking copies with events.";

/// Whether `calls` syncs at `per_s` a second are part of every step.
fn every_step(calls: u64, per_s: f64) -> bool {
    calls >= MIN_SYNCS && per_s >= MIN_SYNCS_PER_S
}

/// The run's blocking syncs: (calls, time blocked).
fn run_syncs(p: &Profile) -> (u64, u64) {
    CAUSES
        .iter()
        .filter_map(|&c| p.sync(c))
        .fold((0, 0), |(n, t), l| (n + l.calls, t + l.total_ns))
}

/// The evidence of `.item()`-like reads (a small copy to the host, then a sync) and the
/// Python lines that waited, as shares of the run's blocking syncs.
fn item_like(f: Finding, p: &Profile) -> Finding {
    let (small_dtoh, _) = p.copied(Direction::DtoH, HostKind::Pinned);
    let pairs = p
        .calls("cuMemcpyDtoHAsync")
        .min(p.calls("cuStreamSynchronize"));
    let (_, blocked) = run_syncs(p);
    f.evidence("dtoh_copy_then_sync_pairs", pairs)
        .evidence("dtoh_copies_to_pinned", small_dtoh)
        .call_sites(p, blocked, |s| s.cause.is_some_and(|c| CAUSES.contains(&c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::rule::Severity;
    use gpuspy_format::gpu::Gpu;

    #[test]
    fn frequent_long_waits_fire() {
        // 500 .item()-like waits of 1 ms in a 1 s loop.
        let p = run(1.0)
            .api("cuStreamSynchronize", 500, 500.0, 0)
            .api("cuMemcpyDtoHAsync", 500, 1.0, 2000)
            .sync(SyncCause::Explicit, 500, 500.0)
            .build();
        let Outcome::Found(f) = SyncStalled.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert_eq!(f.layer, Layer::Framework);
        assert_eq!(f.severity, Severity::Warning);
        assert!((f.impact - 0.5).abs() < 0.01, "{}", f.impact);
        assert_eq!(f.evidence["sync_calls"], 500);
        assert_eq!(f.evidence["dtoh_copy_then_sync_pairs"], 500);
        assert!(f.heuristic);
    }

    #[test]
    fn the_finding_names_its_python_lines_by_the_innermost_user_frame() {
        use gpuspy_format::callsites::{CallSite, Frame};
        let frame = |file: &str, line| Frame {
            file: file.into(),
            line,
            function: "step".into(),
        };
        let site = |api: &str, cause, calls, ms: u64, frames: Vec<Frame>| CallSite {
            api: api.into(),
            cause: Some(cause),
            calls,
            blocked_ns: ms * 1_000_000,
            max_ns: 0,
            frames,
        };
        let torch = "/venv/lib/python3.12/site-packages/torch/_tensor.py";
        let mut p = run(1.0).sync(SyncCause::Explicit, 500, 500.0).build();
        p.call_sites = vec![
            // Two stacks through line 42 (one through torch): one line, summed.
            site(
                "cuStreamSynchronize",
                SyncCause::Explicit,
                300,
                300,
                vec![frame("/u/train.py", 42)],
            ),
            site(
                "cuMemcpyDtoH_v2",
                SyncCause::SyncCopy,
                100,
                100,
                vec![frame(torch, 7), frame("/u/train.py", 42)],
            ),
            site(
                "cuStreamSynchronize",
                SyncCause::Explicit,
                50,
                50,
                vec![frame("/u/eval.py", 9)],
            ),
            // Not a sync this rule counts.
            site(
                "cuMemcpyHtoDAsync_v2",
                SyncCause::PageableAsyncCopy,
                900,
                900,
                vec![frame("/u/data.py", 3)],
            ),
        ];
        let Outcome::Found(f) = SyncStalled.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        let named: Vec<(&str, u32, u64, u64)> = f
            .call_sites
            .iter()
            .map(|s| (s.file.as_str(), s.line, s.calls, s.blocked_ns))
            .collect();
        assert_eq!(
            named,
            [
                ("/u/train.py", 42, 400, 400_000_000),
                ("/u/eval.py", 9, 50, 50_000_000)
            ]
        );
        assert!((f.call_sites[0].share - 0.8).abs() < 1e-9);
    }

    #[test]
    fn one_sync_at_the_end_of_gpu_work_is_not_a_stall() {
        let p = run(10.0).sync(SyncCause::Explicit, 2, 9000.0).build();
        assert!(matches!(SyncStalled.check(&Input::new(&p)), Outcome::Clear));
    }

    #[test]
    fn a_host_that_only_waits_is_held_by_the_gpu() {
        // 98 % blocked: removing the syncs saves at most the 2 % of host work.
        let p = run(1.0).sync(SyncCause::Explicit, 500, 980.0).build();
        let Outcome::Found(f) = SyncStalled.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert_eq!(f.severity, Severity::Info);
        assert!((f.impact - 0.02).abs() < 0.005, "{}", f.impact);
    }

    #[test]
    fn long_gaps_are_not_the_syncs_to_give_back() {
        // Blocked half the time, the GPU busy 50 % of the span, but 40 % of it in 1000 gaps
        // of 4 ms (the host loading data): the syncs can give back at most the other 10 %.
        use crate::analysis::rules::gpu_data::fixtures::*;
        let mut a = activity(5.0);
        a.gap_hist = gaps(1000, 4_000_000);
        let p = run(10.0)
            .sync(SyncCause::Explicit, 5000, 5000.0)
            .gpu(gpu(h200(), None, Some(a)))
            .build();
        let Outcome::Found(f) = SyncStalled.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.1).abs() < 0.02, "{}", f.impact);
        assert!(!f.heuristic);
    }

    #[test]
    fn a_busy_gpu_caps_what_overlap_can_give_back() {
        // Blocked half the time (bound 50 %), but CUPTI saw the GPU busy 95 % of the span:
        // removing the syncs can give back at most the 5 % it idled.
        let busy_gpu = gpuspy_format::gpu::Gpu {
            devices: vec![gpuspy_format::gpu::Device {
                activity: Some(gpuspy_format::gpu::Activity {
                    first_unix_ns: 1,
                    last_unix_ns: 1 + 1_000_000_000,
                    busy_ns: 950_000_000,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let p = run(1.0)
            .sync(SyncCause::Explicit, 500, 500.0)
            .gpu(busy_gpu)
            .build();
        let Outcome::Found(f) = SyncStalled.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.05).abs() < 1e-9, "{}", f.impact);
        assert!(!f.heuristic);
    }

    /// A run of `windows` windows of 10 ms, in each two syncs blocking `blocked` in all,
    /// the GPU busy `busy` and idle `after` after the syncs returned, the rest in other host
    /// work; with `gpu` as its device's NVML data.
    fn stalled(windows: usize, blocked: u64, busy: u64, after: u64, gpu: Gpu) -> Finding {
        use crate::analysis::phases::fixtures::{MS, W};
        let w = W {
            launches: 20,
            blocked_ns: blocked,
            busy_ns: busy,
            idle_after_sync: after,
            idle_host: 10 * MS - busy - after,
            ..W::default()
        };
        stalled_in(windows, w, gpu)
    }

    /// `windows` copies of the 10 ms window `w`, in each two syncs blocking its
    /// `blocked_ns`; with `gpu` as its device's NVML data.
    fn stalled_in(windows: usize, w: crate::analysis::phases::fixtures::W, gpu: Gpu) -> Finding {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS};
        let syncs = 2 * windows as u64;
        let mut p = run(windows as f64 * 0.01)
            .sync(
                SyncCause::Explicit,
                syncs,
                (windows as u64 * w.blocked_ns / MS) as f64,
            )
            .gpu(gpu)
            .build();
        attach(&mut p, timeline(&times(windows, w), true));
        let Outcome::Found(f) = SyncStalled.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert!(!f.heuristic);
        f
    }

    /// NVML data of a GPU that drew its power limit in `capped` of its samples.
    fn power_capped(capped: u64) -> Gpu {
        use crate::analysis::rules::gpu_data::fixtures::{gpu, h200};
        use gpuspy_format::gpu::{ClockEvent, Telemetry};
        let t = Telemetry {
            interval_ms: 100,
            samples: 20,
            clock_events: vec![ClockEvent {
                reason: "sw-power-cap".into(),
                samples: capped,
            }],
            ..Telemetry::default()
        };
        gpu(h200(), Some(t), None)
    }

    #[test]
    fn with_a_timeline_the_idle_a_sync_opens_is_what_comes_back() {
        use crate::analysis::phases::fixtures::MS;
        let impact =
            |blocked, busy, after| stalled(20, blocked, busy, after, Gpu::default()).impact;
        // 8 ms of GPU work and 1 ms of host work after each sync: the 10 % idle comes back.
        assert!((impact(2 * MS, 8 * MS, MS) - 0.1).abs() < 1e-9);
        // 3 ms of GPU work and 6 ms of host work after the syncs (a log record formatted
        // from the value read), blocked 2 ms of each 10: reading the value every N steps
        // takes the work with the sync, and the 60 % idle comes back, not the 20 % wait.
        assert!((impact(2 * MS, 3 * MS, 6 * MS) - 0.6).abs() < 1e-9);
    }

    #[test]
    fn the_queue_refilling_after_each_sync_comes_back_up_to_the_time_blocked() {
        use crate::analysis::phases::fixtures::{MS, W};
        // Steps of 10 ms launching 100 kernels: blocked 2 ms in the syncs, the GPU busy 5,
        // idle `after` once they return and the rest while the host launched into the
        // drained queue. Read every N steps, the host gets ahead by the 2 ms it no longer
        // waits, and as much of the launching idle comes back.
        let step = |after: u64| W {
            launches: 100,
            blocked_ns: 2 * MS,
            busy_ns: 5 * MS,
            idle_after_sync: after,
            idle_host: 5 * MS - after,
            ..W::default()
        };
        let f = stalled_in(20, step(2 * MS), Gpu::default());
        assert!((f.impact - 0.4).abs() < 1e-9, "{}", f.impact);
        assert!((f.evidence["refill_share"].as_f64().unwrap() - 0.2).abs() < 1e-9);
        assert!(
            f.summary.contains(
                "After each sync the GPU also idled 20.0 % of it while the host launched into the emptied queue."
            ),
            "{}",
            f.summary
        );
        // Idle after the syncs that does not warn by itself (4 %) gets no refill: the
        // launching idle of a healthy loop stays launch-bound's.
        let f = stalled_in(20, step(MS * 2 / 5), Gpu::default());
        assert!((f.impact - 0.04).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.evidence["refill_share"], 0.0);
    }

    #[test]
    fn a_sync_that_finds_the_gpu_drained_still_owns_the_idle_it_opens() {
        use crate::analysis::phases::fixtures::MS;
        // The host lags its GPU (2 ms of kernels a step), so .item() blocks 20 µs; then 7 ms
        // of formatting with nothing queued: 70 % of the steady state idle after the syncs,
        // all of it the sync's, though the host was blocked 0.2 % of it.
        let f = stalled(20, MS / 50, 2 * MS, 7 * MS, Gpu::default());
        assert_eq!(f.severity, Severity::Warning);
        assert!((f.impact - 0.7).abs() < 1e-9, "{}", f.impact);
        assert!((f.evidence["blocked_share"].as_f64().unwrap() - 0.002).abs() < 1e-9);
        assert!(
            f.summary
                .starts_with("The GPU sat idle after syncs 70.0 % of the steady state"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_gpu_at_its_power_limit_gives_back_less_once_its_clocks_come_down() {
        use crate::analysis::phases::fixtures::MS;
        // Steps of GPU busy 80 %, idle 10 % after the syncs, capped in 20 of 20 samples, or
        // in 2 (a tenth of a 2 s steady state). Overlapped, the GPU is busy 0.8 / 0.9 of the
        // time, at lower clocks: past the clocks' first 100 ms, its kernels take
        // 0.25 ln(1 / 0.9) longer. Over 2 s that is 95 % of the steady state, over a short
        // script's 0.4 s 75 %.
        for (windows, settled, capped) in [(200, 0.95, 20), (200, 0.95, 2), (40, 0.75, 20)] {
            let f = stalled(windows, 2 * MS, 8 * MS, MS, power_capped(capped));
            assert_eq!(f.evidence["steady_ms"], windows as f64 * 10.0);
            let slower = 0.8 * 0.25 * (1.0_f64 / 0.9).ln() * settled;
            let loss = f.evidence["power_capped_loss"].as_f64().unwrap();
            assert!((loss - slower).abs() < 1e-9, "{windows}: {loss}");
            assert!((f.impact - (0.1 - slower)).abs() < 1e-9, "{}", f.impact);
            assert!(f.summary.contains("power limit"), "{}", f.summary);
        }
        // Capped in too few samples to span a tenth of the steady state (1 of the 20 its
        // 2 s hold), or a steady state within the clocks' ramp: all 10 % come back.
        for (windows, capped) in [(200, 1), (10, 20)] {
            let f = stalled(windows, 2 * MS, 8 * MS, MS, power_capped(capped));
            assert_eq!(f.evidence["power_capped_loss"], 0.0);
            assert!(
                (f.impact - 0.1).abs() < 1e-9,
                "{windows} {capped}: {}",
                f.impact
            );
        }
    }

    #[test]
    fn a_host_always_waiting_has_nothing_to_overlap_even_when_windows_hold_more_blocked_time() {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        // 20 ms syncs back to back, filed into 10 ms windows as the writer thread saw them
        // end: the steady windows hold a little more blocked time than their length. The
        // host does nothing else, so overlapping saves nothing (a wrapped subtraction once
        // made it 100 %).
        let mut p = run(0.2).sync(SyncCause::Explicit, 10, 210.0).build();
        let w = W {
            launches: 1,
            blocked_ns: 10 * MS + MS / 2,
            ..W::default()
        };
        attach(&mut p, timeline(&times(20, w), false));
        let Outcome::Found(f) = SyncStalled.check(&Input::new(&p)) else {
            panic!("a host blocked all the time is a finding")
        };
        assert_eq!(f.impact, 0.0, "{}", f.summary);
    }

    #[test]
    fn a_few_syncs_in_a_short_steady_state_are_not_a_per_step_pattern() {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        // 140 ms of a graph loop, blocked 92 % in a timing harness's syncs: 4 of them
        // (29/s) are no step's; 14 at the same share are.
        let finding = |syncs: u64| {
            let mut p = run(0.14).sync(SyncCause::Explicit, syncs, 129.0).build();
            let w = W {
                launches: 1,
                blocked_ns: 92 * MS / 10,
                ..W::default()
            };
            attach(&mut p, timeline(&times(14, w), false));
            SyncStalled.check(&Input::new(&p))
        };
        assert!(matches!(finding(4), Outcome::Clear));
        assert!(matches!(finding(14), Outcome::Found(_)));
    }

    #[test]
    fn frequent_but_short_waits_are_not_a_stall() {
        let p = run(1.0).sync(SyncCause::Explicit, 1000, 20.0).build();
        assert!(matches!(SyncStalled.check(&Input::new(&p)), Outcome::Clear));
    }
}
