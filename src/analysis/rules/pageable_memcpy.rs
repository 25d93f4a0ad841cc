use super::gpu_data::link_peak_bytes_per_s;
use super::recurrence::Recurrence;
use crate::analysis::phases::{at, in_steady, IdleKind};
use crate::analysis::rule::{ms, Finding, Input, Layer, Outcome, Rule};
use crate::units::share;
use gpuspy_format::{Direction, HostKind, SyncCause};

/// Asynchronous copies from pageable memory, which the driver performs synchronously.
pub struct PageableMemcpy;

const MIN_CALLS: u64 = 10;
const MIN_SHARE: f64 = 0.05;

/// The copies a finding counts, with the run's total where the steady state holds fewer:
/// the sync table beside it counts the whole run.
fn copies_named(counted: u64, run: u64, span: &str) -> String {
    if counted == run {
        format!("{counted} async copies")
    } else {
        format!("{counted} async copies in {span} (of the run's {run})")
    }
}

impl Rule for PageableMemcpy {
    fn id(&self) -> &'static str {
        "pageable-memcpy"
    }
    fn layer(&self) -> Layer {
        Layer::Memory
    }
    fn doc(&self) -> &'static str {
        "`*Async` copies whose host side is pageable memory block the host, so copies cannot overlap compute.

Evidence: the `pageable-async-copy` implicit syncs. These are async copies whose host
buffer the shim did not see allocated or registered as pinned; the driver stages such
copies through a pinned buffer and returns only when it is done. The rule reports their
count, the time the host was blocked, the bytes, and that time's share of the steady-state
time. It fires at 10 or more such copies that take 5 % or more of that time.

Impact: the blocked share. With pinned memory the same copies run asynchronously and
overlap the GPU's work.

With a timeline (dumps of schema 2), the blocked time and the copies are the steady
state's, and the impact is the time the fix removes: pinned, the copies overlap the step,
and the loop takes as long as the slower of its sides. At least the GPU time without a
kernel that the copies took comes back (idle time that began while the host was inside a
pageable copy, plus the time a copy ran and no kernel did; without the GPU side, the
host's blocked time), less the time the same bytes take to cross the link pinned (the
steady state's pageable bytes at the PCIe link's peak rate, gen4 x16's 31.5 GB/s where
NVML did not read it), each as a share of its span (the device time sampling recorded,
the whole steady state). Transfer time from other copies in the same windows counts too:
in a loop whose copies are pageable it is theirs. On the H200 (`examples/staged.py
pageable-memcpy`, 16 MiB a step), from dumps recorded before transfer time was: 93 % idle
in the copies (over the time accounted), 20 % the pinned copies' share, impact 73 %
against 71-73 % saved. Where the host is the slower side, its time blocked in copies to
the device comes back instead (the blocked time in the bytes' proportion), up to all the
GPU's time without a kernel less the pinned copies: a small CNN fed from a NumPy array
(`examples/reallib.py numpy-pageable`), host blocked 48-52 % in the copies and the GPU
idle 34-44 % besides its 40-47 % of copying, mostly launching into the queue each copy
drained: predicted 48-52 %, pinning saved 52-61 %. A copy to the host gives nothing
there: the host waits for the bytes it reads, and the queue before them, whatever their
memory. Where host and GPU take about as long, they do not overlap perfectly once
pinned, and the impact overstates.

Copies that come in fewer than 8 bursts filling under a quarter of the steady windows are
not a per-step cost and do not fire the rule: a model moved to the GPU, a checkpoint, the
copy back to the host that ends Lightning's `fit()` (`rules::recurrence`).

Fix: pin the host buffers. In PyTorch, `DataLoader(..., pin_memory=True)` and
`tensor.to('cuda', non_blocking=True)`; `tensor.pin_memory()` for buffers you reuse. In
CuPy, `cupyx.empty_pinned`/`cupyx.zeros_pinned`. For an existing buffer,
`cudaHostRegister`."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let Some(s) = p.sync(SyncCause::PageableAsyncCopy) else {
            return Outcome::Clear;
        };
        let (mut calls, mut blocked, mut steady) = (s.calls, s.total_ns, p.steady_ns());
        let mut of_steady = "the steady-state time";
        let blocked_share;
        let impact;
        let mut pinned_ns = 0;
        // With the GPU side: the share its time in the copies gives back, and the host's.
        let mut sides = None;
        if let Some((a, st)) = (input.axis.as_ref()).and_then(|a| Some((a, a.steady.as_ref()?))) {
            let cause = [SyncCause::PageableAsyncCopy];
            let copies = Recurrence::of(p, a, |t, w| {
                let blocked = t
                    .host
                    .blocked_ns
                    .iter()
                    .filter(|s| cause.contains(&s.cause));
                Some(blocked.map(|s| at(&s.ns, w)).sum())
            });
            if copies.one_off() {
                // A model moved to the GPU, a checkpoint, a teardown: not a per-step cost.
                return Outcome::Clear;
            }
            let (part, whole) = (st.host.blocked_ns(&cause), st.whole.blocked_ns(&cause));
            (calls, blocked, steady) = (in_steady(calls, part, whole), part, st.ns);
            of_steady = "the steady state";
            blocked_share = share(blocked, steady);
            // Pinned, the same bytes still cross the link, at its peak rate.
            pinned_ns = (st.host.pageable_bytes as f64 / link_peak_bytes_per_s(p) * 1e9) as u64;
            impact = match &st.gpu {
                // Pinned, the copies overlap the step: at least the GPU's time in them
                // comes back, and where the host is the slower side its time blocked in
                // copies to the device, up to all the GPU's time without a kernel (bytes
                // it reads it waits for anyway; bench/results/gpu-2026-12-04-reallib-8).
                // The GPU side covers the windows sampling recorded, the bytes all of
                // them: each as a share of its own span.
                Some(g) => {
                    let pinned_share = share(pinned_ns, steady);
                    let in_copies = (share(
                        g.idle.get(&IdleKind::PageableCopy).copied().unwrap_or(0) + g.transfer_ns,
                        g.ns,
                    ) - pinned_share)
                        .max(0.0);
                    let to_device = 1.0
                        - share(
                            st.host.pageable_to_host_bytes,
                            st.host.pageable_bytes.max(1),
                        );
                    let host_side = (blocked_share * to_device)
                        .min(1.0 - share(g.busy_ns, g.ns) - pinned_share)
                        .max(0.0);
                    sides = Some((in_copies, host_side));
                    in_copies.max(host_side)
                }
                None => share(blocked.saturating_sub(pinned_ns), steady),
            };
        } else {
            blocked_share = share(blocked, steady);
            impact = blocked_share;
        }
        if calls < MIN_CALLS || impact < MIN_SHARE {
            return Outcome::Clear;
        }
        let (h2d_calls, h2d_bytes) = p.copied(Direction::HtoD, HostKind::Pageable);
        let (d2h_calls, d2h_bytes) = p.copied(Direction::DtoH, HostKind::Pageable);
        let f = Finding::new(
                self,
                impact,
                format!(
                    "Copies from pageable memory blocked the host {:.1} % of {of_steady}. They were {}.",
                    blocked_share * 100.0,
                    copies_named(calls, s.calls, of_steady)
                ),
                "Pin the host buffers: DataLoader(pin_memory=True) and .to('cuda', non_blocking=True); tensor.pin_memory() for reused buffers; CuPy: cupyx.empty_pinned.",
            )
            .evidence("pageable_async_copies", calls)
            .evidence("blocked_ms", ms(blocked))
            .evidence("steady_ms", ms(steady))
            .evidence("pinned_copy_ms", ms(pinned_ns))
            .evidence("htod_pageable_copies", h2d_calls)
            .evidence("htod_pageable_bytes", h2d_bytes)
            .evidence("dtoh_pageable_copies", d2h_calls)
            .evidence("dtoh_pageable_bytes", d2h_bytes)
            .call_sites(p, s.total_ns, |site| site.cause == Some(SyncCause::PageableAsyncCopy));
        Outcome::Found(match sides {
            Some((gpu, host)) => f
                .evidence("gpu_in_copies_share", gpu)
                .evidence("host_blocked_to_device_share", host),
            None => f,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::rule::Severity;

    #[test]
    fn blocking_pageable_copies_fire() {
        let p = run(2.0)
            .sync(SyncCause::PageableAsyncCopy, 200, 600.0)
            .copy(Direction::HtoD, HostKind::Pageable, 200, 800 << 20)
            .build();
        let Outcome::Found(f) = PageableMemcpy.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert_eq!(f.layer, Layer::Memory);
        assert_eq!(f.severity, Severity::Warning);
        assert!((f.impact - 0.3).abs() < 0.01);
        assert_eq!(f.evidence["htod_pageable_bytes"], 800u64 << 20);
        assert!(!f.heuristic);
    }

    #[test]
    fn with_a_timeline_the_fix_gives_back_the_idle_time_beyond_a_pinned_copy() {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        use crate::analysis::rules::gpu_data::fixtures::{gpu, h200};
        use gpuspy_format::timeline::{CauseSeries, CopySeries, IdleCause, IdleSeries};
        // 50 windows of 10 ms, each copying 63.016 MB from pageable memory (1 ms at gen5
        // x16's peak) with the host blocked 8 ms in the copies, and the GPU busy 1 ms and
        // idle 9 ms from gaps that opened in a copy.
        const BYTES: u64 = 63_016_000;
        let profile = |with_gpu: bool| {
            let mut t = timeline(
                &times(
                    50,
                    W {
                        launches: 2,
                        busy_ns: MS,
                        ..W::default()
                    },
                ),
                with_gpu,
            );
            t.host.blocked_ns = vec![CauseSeries {
                cause: SyncCause::PageableAsyncCopy,
                ns: vec![8 * MS; 50],
            }];
            t.host.copy_bytes = vec![CopySeries {
                direction: Direction::HtoD,
                host: HostKind::Pageable,
                bytes: vec![BYTES; 50],
            }];
            if with_gpu {
                // Of the 9 ms, the copy itself ran 2 ms (transfer) and the GPU idled 7.
                t.devices[0].idle_ns = vec![IdleSeries {
                    cause: IdleCause::PageableCopy,
                    ns: vec![7 * MS; 50],
                }];
                t.devices[0].transfer_ns = vec![2 * MS; 50];
            }
            let mut p = run(0.5)
                .sync(SyncCause::PageableAsyncCopy, 50, 400.0)
                .copy(Direction::HtoD, HostKind::Pageable, 50, 50 * BYTES)
                .gpu(gpu(h200(), None, None))
                .build();
            attach(&mut p, t);
            p
        };
        // 450 ms without a kernel in the copies (350 idle, 100 copying), less the 50 ms the
        // pinned copies take, of 500 ms.
        let Outcome::Found(f) = PageableMemcpy.check(&Input::new(&profile(true))) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.8).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.evidence["pinned_copy_ms"], 50.0);
        // Sampled: the GPU side recorded only the first 25 windows. Their share of
        // kernel-free copy time (90 %) less the pinned copies' share of the whole (10 %).
        let mut sampled = profile(true);
        let t = sampled.processes[0].timeline.as_mut().unwrap();
        let d = &mut t.devices[0];
        for series in [&mut d.busy_ns, &mut d.transfer_ns, &mut d.idle_ns[0].ns] {
            series[25..].fill(0);
        }
        let Outcome::Found(f) = PageableMemcpy.check(&Input::new(&sampled)) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.8).abs() < 1e-9, "{}", f.impact);
        // Without the GPU side: 400 ms blocked, less the same 50 ms.
        let Outcome::Found(f) = PageableMemcpy.check(&Input::new(&profile(false))) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.7).abs() < 1e-9, "{}", f.impact);
    }

    #[test]
    fn a_host_blocked_in_copies_to_the_device_gets_that_time_back_where_it_is_the_slower_side() {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        use crate::analysis::rules::gpu_data::fixtures::{gpu, h200};
        use gpuspy_format::timeline::{IdleCause, IdleSeries};
        // 50 windows of 10 ms, each copying 63.016 MB from pageable memory (1 ms at gen5
        // x16's peak) with the host blocked 5 ms in the copy; the GPU runs kernels 2 ms,
        // the copy 4 ms, idles 0.5 ms in it and 3.5 ms while the host launches.
        const BYTES: u64 = 63_016_000;
        let profile = |direction: Direction| {
            let (htod_bytes, dtoh_bytes) = match direction {
                Direction::HtoD => (BYTES, 0),
                _ => (0, BYTES),
            };
            let w = W {
                launches: 100,
                busy_ns: 2 * MS,
                copy_ns: 5 * MS,
                idle_host: 3 * MS + MS / 2,
                htod_bytes,
                dtoh_bytes,
                ..W::default()
            };
            let mut t = timeline(&times(50, w), true);
            t.devices[0].idle_ns.push(IdleSeries {
                cause: IdleCause::PageableCopy,
                ns: vec![MS / 2; 50],
            });
            t.devices[0].transfer_ns = vec![4 * MS; 50];
            let mut p = run(0.5)
                .sync(SyncCause::PageableAsyncCopy, 50, 250.0)
                .copy(direction, HostKind::Pageable, 50, 50 * BYTES)
                .gpu(gpu(h200(), None, None))
                .build();
            attach(&mut p, t);
            p
        };
        // Pinned, the copies overlap the step: the host's 5 ms come back, which the GPU
        // allows (kernels 2 ms and the pinned copy 1 ms of the 10), not only the 4.5 ms
        // the GPU spent in the copies less the pinned copy's 1 ms.
        let Outcome::Found(f) = PageableMemcpy.check(&Input::new(&profile(Direction::HtoD))) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.5).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.evidence["gpu_in_copies_share"], 0.35);
        assert_eq!(f.evidence["host_blocked_to_device_share"], 0.5);
        // The host waits for bytes it reads whatever their memory: copies to the host give
        // back only the GPU's time in them.
        let Outcome::Found(f) = PageableMemcpy.check(&Input::new(&profile(Direction::DtoH))) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.35).abs() < 1e-9, "{}", f.impact);
        assert_eq!(f.evidence["host_blocked_to_device_share"], 0.0);
    }

    #[test]
    fn one_off_bursts_of_copies_are_not_a_per_step_cost() {
        use crate::analysis::phases::fixtures::{attach, timeline, times, MS, W};
        use gpuspy_format::timeline::CauseSeries;
        // 100 windows of a loop that launches every window; its first 4 windows copy
        // 240 ms in all from pageable memory (the model moved to the GPU), then never.
        let burst = |first: usize| {
            let mut t = timeline(
                &times(
                    100,
                    W {
                        launches: 20,
                        busy_ns: 9 * MS,
                        ..W::default()
                    },
                ),
                false,
            );
            let mut ns = vec![0; 100];
            ns[first..first + 4].fill(6 * MS);
            t.host.blocked_ns = vec![CauseSeries {
                cause: SyncCause::PageableAsyncCopy,
                ns,
            }];
            let mut p = run(1.0)
                .sync(SyncCause::PageableAsyncCopy, 12, 24.0)
                .copy(Direction::HtoD, HostKind::Pageable, 12, 600 << 20)
                .build();
            attach(&mut p, t);
            p
        };
        assert!(matches!(
            PageableMemcpy.check(&Input::new(&burst(40))),
            Outcome::Clear
        ));
        // The same copies spread over every fourth window recur: the rule fires.
        let mut spread = burst(40);
        let t = spread.processes[0].timeline.as_mut().unwrap();
        t.host.blocked_ns[0].ns = (0..100)
            .map(|w| if w % 4 == 0 { 4 * MS } else { 0 })
            .collect();
        assert!(matches!(
            PageableMemcpy.check(&Input::new(&spread)),
            Outcome::Found(_)
        ));
    }

    #[test]
    fn pinned_copies_and_a_few_small_pageable_ones_do_not() {
        let pinned = run(2.0)
            .copy(Direction::HtoD, HostKind::Pinned, 200, 800 << 20)
            .build();
        assert!(matches!(
            PageableMemcpy.check(&Input::new(&pinned)),
            Outcome::Clear
        ));
        let few = run(2.0)
            .sync(SyncCause::PageableAsyncCopy, 3, 500.0)
            .build();
        assert!(matches!(
            PageableMemcpy.check(&Input::new(&few)),
            Outcome::Clear
        ));
        let quick = run(2.0)
            .sync(SyncCause::PageableAsyncCopy, 100, 5.0)
            .build();
        assert!(matches!(
            PageableMemcpy.check(&Input::new(&quick)),
            Outcome::Clear
        ));
    }
}
