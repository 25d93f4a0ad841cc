//! The time axis judged on crafted timelines: phases, the job's steady state, the causes
//! of GPU idle time in it.

use super::fixtures::{attach, steady, timeline, times, MS, T0, W};
use super::*;
use crate::analysis::diagnose::synthetic::run;
use crate::analysis::profile::Profile;
use gpuspy_format::timeline::{GapEnd, HostEvent, HostEventKind, IdleCause, Timeline};
use gpuspy_format::SyncCause;
use std::collections::BTreeMap;

/// A profile of one process running `windows` (started at the timeline's start,
/// dumped at its end).
fn profile(t: Timeline) -> Profile {
    let mut p = run(t.host.calls.len() as f64 * 0.01).build();
    attach(&mut p, t);
    p
}

#[test]
fn a_sampled_sync_spreads_over_the_windows_it_spans_once() {
    let event = |start: u64, end: u64, kind| HostEvent {
        start_unix_ns: T0 + start,
        end_unix_ns: T0 + end,
        kind,
    };
    let sync = event(5 * MS, 27 * MS, HostEventKind::Sync(SyncCause::Explicit));
    let t = Timeline {
        start_unix_ns: T0,
        window_ns: 10 * MS,
        // The same sync is among the longest and the most recent.
        longest_blocking: vec![sync.clone()],
        recent_blocking: vec![
            sync,
            event(31 * MS, 33 * MS, HostEventKind::Alloc),
            event(32 * MS, 34 * MS, HostEventKind::Sync(SyncCause::Free)),
            event(36 * MS, 45 * MS, HostEventKind::Sync(SyncCause::Explicit)),
        ],
        ..Timeline::default()
    };
    assert_eq!(syncs_spread(&t, 4), vec![5 * MS, 10 * MS, 7 * MS, 4 * MS]);
}

/// Each phase's kind and start (ms).
fn starts(a: &TimeAxis) -> Vec<(PhaseKind, u64)> {
    kinds(a)
        .iter()
        .map(|&(kind, _, start, _)| (kind, start))
        .collect()
}

fn kinds(a: &TimeAxis) -> Vec<(PhaseKind, Option<&str>, u64, u64)> {
    a.phases
        .iter()
        .map(|p| {
            (
                p.kind,
                p.name.as_deref(),
                (p.start_unix_ns - T0) / MS,
                (p.end_unix_ns - T0) / MS,
            )
        })
        .collect()
}

/// A window of the loop: 20 launches, blocked 2 ms, GPU busy 6 ms, idle 3 ms after the
/// sync and 1 ms in host work.
const LOOP: W = W {
    launches: 20,
    launch_ns: 100_000,
    driver_ns: 2 * MS,
    module_ns: 0,
    init_ns: 0,
    blocked_ns: 2 * MS,
    busy_ns: 6 * MS,
    idle_after_sync: 3 * MS,
    idle_host: MS,
    copy_ns: 0,
    htod_bytes: 0,
    dtoh_bytes: 0,
};
const QUIET: W = W {
    launches: 0,
    launch_ns: 0,
    driver_ns: 0,
    module_ns: 0,
    init_ns: 0,
    blocked_ns: 0,
    busy_ns: 0,
    idle_after_sync: 0,
    idle_host: 0,
    copy_ns: 0,
    htod_bytes: 0,
    dtoh_bytes: 0,
};

#[test]
fn records_late_for_a_tenth_of_the_kernel_time_leave_the_gpu_side_out() {
    use crate::analysis::rules::gpu_data::fixtures::{activity, gpu, h200};
    // 50 loop windows with their GPU side; CUPTI's activity 9 s busy, and `late` ns of
    // kernel time whose records came after it was settled.
    let steady = |late: u64| {
        let mut p = profile(timeline(&times(50, LOOP), true));
        let mut a = activity(9.0);
        a.late_ns = late;
        p.processes[0].gpu = Some(Box::new(gpu(h200(), None, Some(a))));
        time_axis(&p).unwrap().steady.unwrap()
    };
    let kept = steady(980_000_000);
    assert!(
        kept.gpu.is_some() && kept.records_late.is_none(),
        "{kept:?}"
    );
    let left_out = steady(1_000_000_000);
    assert_eq!((left_out.gpu, left_out.records_late), (None, Some(0.1)));
    assert_eq!(left_out.ns, kept.ns);
}

#[test]
fn start_up_loop_jit_pause_loop_teardown() {
    // 300 ms of init, 1.2 s of module loading, 5 windows of light warm-up, 50 loop
    // windows, a 690 ms gap ending in a module load (a JIT compile), 30 loop windows,
    // 20 ms of exit.
    let mut w = times(
        30,
        W {
            init_ns: 10 * MS,
            ..QUIET
        },
    );
    w.extend(times(
        120,
        W {
            module_ns: 9 * MS,
            ..QUIET
        },
    ));
    w.extend(times(
        5,
        W {
            launches: 2,
            ..QUIET
        },
    ));
    w.extend(times(50, LOOP));
    w.extend(times(69, QUIET));
    w.push(W {
        module_ns: MS,
        ..LOOP
    });
    w.extend(times(29, LOOP));
    w.extend(times(2, QUIET));
    let p = profile(timeline(&w, true));
    let a = time_axis(&p).unwrap();
    assert_eq!(
        kinds(&a),
        [
            (PhaseKind::Startup, None, 0, 1500),
            (PhaseKind::Warmup, None, 1500, 1550),
            (PhaseKind::Steady, None, 1550, 2050),
            (PhaseKind::Pause, Some("module loading or JIT"), 2050, 2740),
            (PhaseKind::Steady, None, 2740, 3040),
            (PhaseKind::Teardown, None, 3040, 3060),
        ]
    );
    let startup = &a.processes[0].as_ref().unwrap().startup;
    assert_eq!(
        (
            startup.ns,
            startup.init_ns,
            startup.module_ns,
            startup.outside_driver_ns
        ),
        (1500 * MS, 300 * MS, 1080 * MS, 120 * MS)
    );
    // 80 loop windows: exactly their idle time, by cause; the pause's is not counted.
    let s = a.steady.unwrap();
    assert_eq!(s.ns, 800 * MS);
    assert_eq!(s.host.launches, 80 * 20);
    assert_eq!(s.whole.launches, 80 * 20 + 5 * 2);
    let g = s.gpu.unwrap();
    assert_eq!((g.ns, g.busy_ns), (800 * MS, 480 * MS));
    assert_eq!(
        g.idle,
        BTreeMap::from([(IdleKind::AfterSync, 240 * MS), (IdleKind::Host, 80 * MS)])
    );
    assert!((g.share(IdleKind::AfterSync) - 0.3).abs() < 1e-9);
}

#[test]
fn a_host_pause_before_the_first_launch_is_start_up() {
    // 300 ms of init, a barrier (5 ms blocked, no launch), 500 ms of host work (a model
    // built on the host), then the first launches with the lazy loading of their
    // modules, and the loop: set-up until the first launch, no JIT pause.
    let mut w = times(
        30,
        W {
            init_ns: 10 * MS,
            ..QUIET
        },
    );
    w.push(W {
        driver_ns: 5 * MS,
        blocked_ns: 5 * MS,
        ..QUIET
    });
    w.extend(times(50, QUIET));
    w.push(W {
        module_ns: 2 * MS,
        ..LOOP
    });
    w.extend(times(30, LOOP));
    let a = time_axis(&profile(timeline(&w, true))).unwrap();
    assert_eq!(
        kinds(&a),
        [
            (PhaseKind::Startup, None, 0, 810),
            (PhaseKind::Steady, None, 810, 1120)
        ]
    );
    let startup = &a.processes[0].as_ref().unwrap().startup;
    assert_eq!(
        (
            startup.init_ns,
            startup.module_ns,
            startup.outside_driver_ns
        ),
        (300 * MS, 0, 505 * MS)
    );
}

#[test]
fn the_idle_a_stretch_begins_or_ends_in_is_the_pauses() {
    // 5 loop windows, 690 ms with the host at work and the GPU idle (a JIT compile),
    // the window in which the loop resumes (8 ms of the compile's idle, then 2 ms of
    // work), 20 loop windows.
    let mut w = times(5, LOOP);
    w.extend(times(
        69,
        W {
            idle_host: 10 * MS,
            ..QUIET
        },
    ));
    w.push(W {
        module_ns: MS,
        busy_ns: 2 * MS,
        idle_after_sync: 0,
        idle_host: 8 * MS,
        ..LOOP
    });
    w.extend(times(20, LOOP));
    let s = steady(&profile(timeline(&w, true))).unwrap();
    assert_eq!(s.ns, 260 * MS);
    let g = s.gpu.unwrap();
    // Not counted: the resumed window's 8 ms and the 1 ms of host idle of the window
    // before the pause (the pause's beginning); the first and last windows have
    // nothing beside them.
    assert_eq!((g.ns, g.busy_ns), (251 * MS, 152 * MS));
    assert_eq!(
        g.idle,
        BTreeMap::from([(IdleKind::AfterSync, 75 * MS), (IdleKind::Host, 24 * MS)])
    );
}

#[test]
fn one_window_holding_most_of_the_host_idle_is_a_stall() {
    // 5 loop windows (1 ms of host idle each), the middle one all host idle instead:
    // 10 ms against the others' 4 ms, over twice as much, is a one-off stall.
    let stalled = W {
        busy_ns: 0,
        idle_after_sync: 0,
        idle_host: 10 * MS,
        ..LOOP
    };
    let mut w = times(5, LOOP);
    w[2] = stalled;
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!(
        (g.idle[&IdleKind::Host], g.host_stall_ns),
        (14 * MS, 10 * MS)
    );
    // Two such windows recur: 10 ms against 13 ms.
    w[3] = stalled;
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!((g.idle[&IdleKind::Host], g.host_stall_ns), (23 * MS, 0));
    // One among ten loop windows: 10 ms against 9 ms is not twice as much.
    let mut w = times(10, LOOP);
    w[5] = stalled;
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!((g.idle[&IdleKind::Host], g.host_stall_ns), (19 * MS, 0));
}

#[test]
fn recurring_gaps_are_the_loop_and_a_single_one_is_a_pause() {
    // 12 ms of work, then 150 ms without: five times. The gaps recur, so they are the
    // steady state (a loop starved of data), not pauses.
    let mut w = Vec::new();
    for _ in 0..5 {
        w.extend(times(2, LOOP));
        w.extend(times(15, QUIET));
    }
    w.extend(times(2, LOOP));
    let a = time_axis(&profile(timeline(&w, false))).unwrap();
    assert_eq!(
        kinds(&a),
        [(PhaseKind::Steady, None, 0, 870)],
        "{:?}",
        a.phases
    );
    // Three 250 ms checkpoints, each after 140 ms of steps (a short loop of
    // examples/staged.py healthy-pauses): rare, with many steps between, so pauses,
    // though they take more than half the loop.
    let mut w = times(14, LOOP);
    for _ in 0..3 {
        w.extend(times(25, QUIET));
        w.extend(times(14, LOOP));
    }
    let a = time_axis(&profile(timeline(&w, false))).unwrap();
    assert_eq!(
        starts(&a),
        [
            (PhaseKind::Steady, 0),
            (PhaseKind::Pause, 140),
            (PhaseKind::Steady, 390),
            (PhaseKind::Pause, 530),
            (PhaseKind::Steady, 780),
            (PhaseKind::Pause, 920),
            (PhaseKind::Steady, 1170),
        ]
    );
    // The same at 40 ms windows (a longer start-up widened them): 2-3 windows of steps
    // between checkpoints of 7 windows are still many steps, so pauses.
    let wide = |w: W| W {
        launches: 4 * w.launches,
        launch_ns: 4 * w.launch_ns,
        driver_ns: 4 * w.driver_ns,
        blocked_ns: 4 * w.blocked_ns,
        busy_ns: 4 * w.busy_ns,
        idle_after_sync: 4 * w.idle_after_sync,
        idle_host: 4 * w.idle_host,
        ..w
    };
    let mut w = times(3, wide(LOOP));
    for steps in [2, 3, 2] {
        w.extend(times(7, wide(QUIET)));
        w.extend(times(steps, wide(LOOP)));
    }
    let mut t = timeline(&w, false);
    t.window_ns = 40 * MS;
    let a = time_axis(&profile(t)).unwrap();
    assert_eq!(
        starts(&a),
        [
            (PhaseKind::Steady, 0),
            (PhaseKind::Pause, 120),
            (PhaseKind::Steady, 400),
            (PhaseKind::Pause, 480),
            (PhaseKind::Steady, 760),
            (PhaseKind::Pause, 880),
            (PhaseKind::Steady, 1160),
        ]
    );
    // The same three gaps with one step (two windows) between them are the loop's.
    let mut w = times(2, LOOP);
    for _ in 0..3 {
        w.extend(times(25, QUIET));
        w.extend(times(2, LOOP));
    }
    let a = time_axis(&profile(timeline(&w, false))).unwrap();
    assert_eq!(kinds(&a), [(PhaseKind::Steady, None, 0, 830)]);
    // One such gap in a long loop is a pause without a name.
    let mut w = times(40, LOOP);
    w.extend(times(15, QUIET));
    w.extend(times(40, LOOP));
    let a = time_axis(&profile(timeline(&w, false))).unwrap();
    assert_eq!(
        kinds(&a),
        [
            (PhaseKind::Steady, None, 0, 400),
            (PhaseKind::Pause, None, 400, 550),
            (PhaseKind::Steady, None, 550, 950)
        ]
    );
    // Without the GPU side, the steady state's host counters still add up.
    let s = a.steady.unwrap();
    assert_eq!(
        (s.ns, s.host.blocked_ns(&[SyncCause::Explicit])),
        (800 * MS, 160 * MS)
    );
    assert_eq!(s.gpu, None);
}

#[test]
fn frequent_gaps_without_copies_are_the_loops_waits_and_with_copies_pauses() {
    // Six 160 ms gaps between 600 ms of steps: 19 % of the span, too little to recur by
    // their share, too many to be rare. Without copies they are the loop waiting for its
    // batches (a DataLoader that cannot keep up); each copying a checkpoint to the host,
    // they are pauses.
    let gaps = |gap: W| {
        let mut w = times(60, LOOP);
        for _ in 0..6 {
            w.extend(times(16, gap));
            w.extend(times(60, LOOP));
        }
        time_axis(&profile(timeline(&w, false))).unwrap()
    };
    let a = gaps(QUIET);
    assert_eq!(
        kinds(&a),
        [(PhaseKind::Steady, None, 0, 5160)],
        "{:?}",
        a.phases
    );
    let checkpoint = W {
        copy_ns: 8 * MS,
        dtoh_bytes: 16 << 20,
        ..QUIET
    };
    let a = gaps(checkpoint);
    let pauses: Vec<u64> = starts(&a)
        .into_iter()
        .filter(|&(kind, _)| kind == PhaseKind::Pause)
        .map(|(_, start)| start)
        .collect();
    assert_eq!(pauses, [600, 1360, 2120, 2880, 3640, 4400]);
}

#[test]
fn host_idle_at_a_high_launch_rate_is_launch_overhead() {
    // 200 launches in 10 ms (20,000/s): the host idle time is the launches'.
    let busy = W {
        launches: 200,
        idle_host: 7 * MS,
        busy_ns: 3 * MS,
        ..QUIET
    };
    let slow = W {
        launches: 20,
        idle_host: 7 * MS,
        busy_ns: 3 * MS,
        ..QUIET
    };
    let mut w = times(10, busy);
    w.extend(times(
        10,
        W {
            launches: 100,
            launch_ns: 6 * MS,
            ..slow
        },
    ));
    // Eleven slow windows: the last, below half the median rate, is where the loop
    // ended, teardown.
    w.extend(times(11, slow));
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!(
        g.idle,
        BTreeMap::from([(IdleKind::Launch, 140 * MS), (IdleKind::Host, 70 * MS)])
    );
}

#[test]
fn a_window_spent_waiting_on_work_cupti_did_not_show_is_not_the_loops_idle() {
    // 10 loop windows (busy 6 ms, idle 3 + 1 ms, the host blocked 2 ms), then 2 in
    // which the host waited 8 ms in syncs while the device recorded 0.1 ms of busy time
    // and 9.9 ms of idle after the syncs (prefetches it does not show, or a recording
    // period that opened as the loop ended): left out, the loop's shares stand.
    let unseen = W {
        blocked_ns: 8 * MS,
        busy_ns: MS / 10,
        idle_after_sync: 99 * MS / 10,
        idle_host: 0,
        ..LOOP
    };
    let mut w = times(10, LOOP);
    w.extend(times(2, unseen));
    w.extend(times(10, LOOP));
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!((g.ns, g.busy_ns), (200 * MS, 120 * MS));
    assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS);
    // The same with a second device, busy all along: the host may have waited on it
    // while the first idled, so the first's idle counts.
    let mut t = timeline(&w, true);
    let mut second = t.devices[0].clone();
    second.ordinal = 1;
    second.busy_ns = vec![10 * MS; w.len()];
    second
        .idle_ns
        .iter_mut()
        .for_each(|s| s.ns = vec![0; w.len()]);
    t.devices.push(second);
    let g = steady(&profile(t)).unwrap().gpu.unwrap();
    assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS + 2 * 99 * MS / 10);
}

#[test]
fn copies_between_steps_are_a_pause() {
    use gpuspy_format::timeline::CauseSeries;
    // A checkpoint: 15 windows of copies only (120 ms blocked in pageable copies to the
    // host, no launch, the GPU idle) between two stretches of the loop.
    let copies = W {
        blocked_ns: 8 * MS,
        ..W::default()
    };
    let mut w = times(20, LOOP);
    w.extend(times(15, copies));
    w.extend(times(20, LOOP));
    let mut t = timeline(&w, false);
    for i in 20..35 {
        t.host.blocked_ns[0].ns[i] = 0;
    }
    t.host.blocked_ns.push(CauseSeries {
        cause: SyncCause::PageableAsyncCopy,
        ns: (0..55)
            .map(|i| if (20..35).contains(&i) { 8 * MS } else { 0 })
            .collect(),
    });
    let a = time_axis(&profile(t)).unwrap();
    assert_eq!(
        starts(&a),
        [
            (PhaseKind::Steady, 0),
            (PhaseKind::Pause, 200),
            (PhaseKind::Steady, 350)
        ]
    );
    // The checkpoint's copies are the pause's.
    let copies: Vec<Option<u64>> = a
        .phases
        .iter()
        .map(|p| p.copies.map(|c| c.blocked_ns))
        .collect();
    assert_eq!(copies, [None, Some(120 * MS), None]);
}

#[test]
fn copies_after_the_last_step_are_teardown() {
    // 20 loop windows, then 5 in which the host only copies (blocked 8 ms in pageable
    // copies each, the GPU idle), the model moved back to the host: teardown.
    let mut w = times(20, LOOP);
    w.extend(times(
        5,
        W {
            blocked_ns: 8 * MS,
            ..W::default()
        },
    ));
    let mut t = timeline(&w, false);
    t.host.blocked_ns[0].cause = SyncCause::PageableAsyncCopy;
    let a = time_axis(&profile(t.clone())).unwrap();
    assert_eq!(
        starts(&a),
        [(PhaseKind::Steady, 0), (PhaseKind::Teardown, 200)]
    );
    // Blocked in explicit syncs instead, the host waited for the loop's GPU work: only
    // the last window, below half the usual rate, is teardown.
    t.host.blocked_ns[0].cause = SyncCause::Explicit;
    let a = time_axis(&profile(t)).unwrap();
    assert_eq!(
        starts(&a),
        [(PhaseKind::Steady, 0), (PhaseKind::Teardown, 240)]
    );
}

#[test]
fn one_off_copies_are_their_phases_and_not_the_steady_states() {
    const MIB: u64 = 1 << 20;
    // Lightning's `fit()`: the model moved to the GPU with the first launches (2 windows
    // of 1 launch, 6 ms blocked in pageable copies each), 20 loop windows, the window the
    // loop ends in (its steps, then 3 ms of the copy back), and 5 windows of copies back
    // to the host (8 ms blocked each).
    let mut w = times(
        2,
        W {
            launches: 1,
            copy_ns: 6 * MS,
            htod_bytes: 150 * MIB,
            ..QUIET
        },
    );
    w.extend(times(20, LOOP));
    w.push(W {
        copy_ns: 3 * MS,
        dtoh_bytes: 50 * MIB,
        ..LOOP
    });
    w.extend(times(
        5,
        W {
            copy_ns: 8 * MS,
            dtoh_bytes: 100 * MIB,
            ..QUIET
        },
    ));
    let a = time_axis(&profile(timeline(&w, true))).unwrap();
    assert_eq!(
        starts(&a),
        [
            (PhaseKind::Warmup, 0),
            (PhaseKind::Steady, 20),
            (PhaseKind::Teardown, 220)
        ]
    );
    let copies: Vec<Option<PhaseCopies>> = a.phases.iter().map(|p| p.copies).collect();
    assert_eq!(
        copies,
        [
            Some(PhaseCopies {
                htod_bytes: 300 * MIB,
                dtoh_bytes: 0,
                blocked_ns: 12 * MS
            }),
            None,
            Some(PhaseCopies {
                htod_bytes: 0,
                dtoh_bytes: 550 * MIB,
                blocked_ns: 43 * MS
            }),
        ]
    );
    // None of it is the steady state's.
    let s = a.steady.unwrap();
    assert_eq!(s.ns, 200 * MS);
    assert_eq!(s.host.blocked_ns(&[SyncCause::PageableAsyncCopy]), 0);
    assert_eq!(s.host.pageable_bytes, 0);
    // Under a quarter of the last window blocked in copies (2 ms), it is the loop's.
    w[22].copy_ns = 2 * MS;
    let a = time_axis(&profile(timeline(&w, true))).unwrap();
    assert_eq!(
        starts(&a),
        [
            (PhaseKind::Warmup, 0),
            (PhaseKind::Steady, 20),
            (PhaseKind::Teardown, 230)
        ]
    );
    assert_eq!(a.phases[2].copies.map(|c| c.blocked_ns), Some(40 * MS));
    // Copies that blocked under `COPY_BURST_MIN_NS` in all are not named.
    for x in &mut w[23..] {
        x.copy_ns = MS;
    }
    let a = time_axis(&profile(timeline(&w, true))).unwrap();
    assert_eq!(a.phases[2].copies, None);
}

#[test]
fn a_steady_state_is_short_next_to_warm_up_under_its_warm_up_and_unnamed_pauses() {
    let phase = |kind, name: Option<&str>, ms: u64, copies| Phase {
        kind,
        name: name.map(str::to_string),
        start_unix_ns: T0,
        end_unix_ns: T0 + ms * MS,
        copies,
    };
    let burst = Some(PhaseCopies {
        blocked_ns: 20 * MS,
        ..PhaseCopies::default()
    });
    // Start-up and teardown count for neither side.
    let edges = [
        phase(PhaseKind::Startup, None, 9_000, None),
        phase(PhaseKind::Teardown, None, 9_000, None),
    ];
    let with = |steady_ms: u64, others: &[Phase]| {
        let mut phases = edges.to_vec();
        phases.push(phase(PhaseKind::Steady, None, steady_ms, None));
        phases.extend_from_slice(others);
        short_next_to_warmup(&phases)
    };
    let loop_start = [
        phase(PhaseKind::Warmup, None, 300, None),
        phase(PhaseKind::Pause, None, 400, None),
    ];
    // 699 ms of steady state against 700 ms of warm-up and unnamed pause: short.
    assert!(with(699, &loop_start));
    assert!(!with(700, &loop_start));
    // Named pauses (loading, JIT, an NVTX evaluation) and one-off copies are neither.
    let named = [
        phase(PhaseKind::Warmup, None, 300, None),
        phase(PhaseKind::Pause, Some(LOADING), 4_000, None),
        phase(PhaseKind::Pause, None, 4_000, burst),
    ];
    assert!(!with(300, &named));
    assert!(with(299, &named));
    // Without a steady state there is nothing short.
    assert!(!with(0, &loop_start));
}

#[test]
fn the_whole_loop_holds_the_warm_up_and_unnamed_pauses_where_the_steady_state_is_short() {
    // 5 loop windows, a 300 ms wait (the host at work), 5 loop windows, a 300 ms gap in
    // which the host copies (a checkpoint: blocked 2 ms a window), 5 loop windows.
    let wait = W {
        idle_host: 10 * MS,
        ..QUIET
    };
    let mut w = times(5, LOOP);
    w.extend(times(30, wait));
    w.extend(times(5, LOOP));
    w.extend(times(
        30,
        W {
            copy_ns: 2 * MS,
            ..wait
        },
    ));
    w.extend(times(5, LOOP));
    let a = time_axis(&profile(timeline(&w, true))).unwrap();
    assert_eq!(
        starts(&a),
        [
            (PhaseKind::Steady, 0),
            (PhaseKind::Pause, 50),
            (PhaseKind::Steady, 350),
            (PhaseKind::Pause, 400),
            (PhaseKind::Steady, 700)
        ]
    );
    // 150 ms steady against a 300 ms unnamed pause: the loop is judged whole too, the
    // wait in it and the checkpoint not.
    let whole = a.whole_loop.as_deref().unwrap();
    assert_eq!(
        starts(whole),
        [
            (PhaseKind::Steady, 0),
            (PhaseKind::Pause, 400),
            (PhaseKind::Steady, 700)
        ]
    );
    assert!(whole.whole_loop.is_none());
    let (steady, over_loop) = (a.steady.unwrap(), whole.steady.clone().unwrap());
    assert_eq!((steady.ns, over_loop.ns), (150 * MS, 450 * MS));
    // The wait's idle is the loop's host work: 300 ms, with the loop windows' 1 ms each
    // but the two beside the checkpoint (its edges); the steady state also leaves out the
    // two beside the wait.
    let host = |s: &SteadyState| s.gpu.as_ref().unwrap().idle[&IdleKind::Host];
    assert_eq!(host(&over_loop), 300 * MS + 13 * MS);
    assert_eq!(host(&steady), 11 * MS);
    // A long steady state is judged alone.
    let mut long = w.clone();
    long.extend(times(40, LOOP));
    let a = time_axis(&profile(timeline(&long, true))).unwrap();
    assert!(a.whole_loop.is_none());
}

#[test]
fn a_pause_is_named_loading_only_where_loading_or_a_compile_ending_in_one_took_it() {
    // `count` gaps of `gap` windows (the host at work, the GPU idle), each window of them
    // with `loading` ns of module loading, each gap ended by a window of the loop that
    // loads `ends` ns, between stretches of 10 loop windows: the pauses' names.
    let names = |count: usize, gap: usize, loading: u64, ends: u64| {
        let mut w = times(10, LOOP);
        for _ in 0..count {
            w.extend(times(
                gap,
                W {
                    module_ns: loading,
                    idle_host: 10 * MS - loading,
                    ..QUIET
                },
            ));
            w.push(W {
                module_ns: ends,
                ..LOOP
            });
            w.extend(times(9, LOOP));
        }
        let a = time_axis(&profile(timeline(&w, true))).unwrap();
        let pauses: Vec<Option<String>> = (a.phases.iter())
            .filter(|p| p.kind == PhaseKind::Pause)
            .map(|p| p.name.clone())
            .collect();
        pauses
    };
    let loading = || Some(LOADING.to_string());
    // Loading took most of the gap (6 of each 10 ms): loading, however many such gaps.
    assert_eq!(names(1, 30, 6 * MS, 0), [loading()]);
    assert_eq!(names(6, 30, 6 * MS, 0), vec![loading(); 6]);
    // Host work ended by a load (a JIT compile: Inductor or Triton compiling, then the
    // module loaded), in at most `RARE_GAPS` such gaps: loading.
    assert_eq!(names(1, 30, 0, MS), [loading()]);
    assert_eq!(names(4, 30, 0, MS), vec![loading(); 4]);
    // Five or more: the loop's own waits (cuDNN's lazy loading ends each wait for a
    // batch), not compiles, and they recur: no pause at all.
    assert_eq!(names(5, 30, 0, MS), []);
    // Loading under half of each such gap (2 of 10 ms) does not name them either.
    assert_eq!(names(5, 30, 2 * MS, 0), []);
    // A gap shorter than a pause is the loop's unless loading took most of it.
    assert_eq!(names(6, 5, 0, MS), []);
    assert_eq!(names(1, 5, 0, MS), []);
    assert_eq!(names(6, 5, 6 * MS, 0), vec![loading(); 6]);
    // Without a load: a pause without a name, or, short, the loop's own.
    assert_eq!(names(1, 30, 0, 0), [None]);
    assert_eq!(names(6, 5, 0, 0), []);
}

#[test]
fn a_last_window_below_half_the_usual_rate_is_where_the_loop_ended() {
    // 20 loop windows of 20 launches, then one of 9 (the loop ended in it): teardown.
    let mut w = times(20, LOOP);
    w.push(W {
        launches: 9,
        ..LOOP
    });
    let a = time_axis(&profile(timeline(&w, false))).unwrap();
    assert_eq!(
        starts(&a),
        [(PhaseKind::Steady, 0), (PhaseKind::Teardown, 200)]
    );
    // One of 10, half the usual rate: still the loop's.
    w.last_mut().unwrap().launches = 10;
    let a = time_axis(&profile(timeline(&w, false))).unwrap();
    assert_eq!(starts(&a), [(PhaseKind::Steady, 0)]);
}

#[test]
fn shares_are_of_the_device_time_accounted_for() {
    // 10 loop windows (busy 6 ms, idle 3 + 1 ms); 4 more observed 10 ms but with
    // neither busy nor idle time (a sampling period that saw no record); 6 in which
    // CUPTI accounted for 1 ms of the 10 observed (busy 0.6, idle 0.3 + 0.1).
    let mut w = times(10, LOOP);
    w.extend(times(
        4,
        W {
            busy_ns: 0,
            idle_after_sync: 0,
            idle_host: 0,
            ..LOOP
        },
    ));
    w.extend(times(
        6,
        W {
            busy_ns: 600_000,
            idle_after_sync: 300_000,
            idle_host: 100_000,
            ..LOOP
        },
    ));
    let s = steady(&profile(timeline(&w, true))).unwrap();
    assert_eq!(s.ns, 200 * MS);
    let g = s.gpu.unwrap();
    // The 16 accounted windows, each scaled to its 10 ms: 96 ms busy, 48 + 16 ms idle.
    assert_eq!((g.ns, g.busy_ns), (160 * MS, 96 * MS));
    assert_eq!(
        g.idle,
        BTreeMap::from([(IdleKind::AfterSync, 48 * MS), (IdleKind::Host, 16 * MS)])
    );
    assert!((g.share(IdleKind::AfterSync) - 0.3).abs() < 1e-9);
}

#[test]
fn the_idle_the_loop_ends_in_is_not_the_steady_states() {
    // 20 loop windows, then the last one, whose final sync returns after 2 ms of work
    // and leaves the GPU idle for good: 8 ms of it is the end of the loop, as the
    // idle windows after it say.
    let mut w = times(20, LOOP);
    w.push(W {
        busy_ns: 2 * MS,
        idle_after_sync: 8 * MS,
        idle_host: 0,
        ..LOOP
    });
    w.extend(times(
        10,
        W {
            idle_after_sync: 10 * MS,
            ..QUIET
        },
    ));
    let s = steady(&profile(timeline(&w, true))).unwrap();
    assert_eq!(s.ns, 210 * MS);
    let g = s.gpu.unwrap();
    assert_eq!((g.ns, g.busy_ns), (202 * MS, 122 * MS));
    assert_eq!(
        g.idle,
        BTreeMap::from([(IdleKind::AfterSync, 60 * MS), (IdleKind::Host, 20 * MS)])
    );
    // Where the loop goes on after that window, its 8 ms are the loop's.
    w.truncate(21);
    w.push(LOOP);
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!(g.idle[&IdleKind::AfterSync], (21 * 3 + 8) * MS);
}

#[test]
fn long_gap_sums_follow_the_idle_they_are_part_of() {
    use gpuspy_format::timeline::LongIdleSeries;
    // The loop's end as above: 20 loop windows, then the one whose last 8 ms after the
    // final sync begin the idle after the loop. Per loop window, 2 of the 3 ms after
    // syncs lie in a long gap a kernel ended, the 1 ms of host work in one that a copy
    // to the device ended, between 5 short gaps.
    let mut w = times(20, LOOP);
    w.push(W {
        busy_ns: 2 * MS,
        idle_after_sync: 8 * MS,
        idle_host: 0,
        ..LOOP
    });
    w.extend(times(
        10,
        W {
            idle_after_sync: 10 * MS,
            ..QUIET
        },
    ));
    let mut t = timeline(&w, true);
    let in_loop = |ns: u64, edge: u64, after: u64| {
        let mut v = vec![ns; 20];
        v.push(edge);
        v.extend([after; 10]);
        v
    };
    let d = &mut t.devices[0];
    d.long_idle_ns = vec![
        LongIdleSeries {
            cause: IdleCause::AfterSync,
            ended_by: GapEnd::Kernel,
            ns: in_loop(2 * MS, 0, 0),
        },
        LongIdleSeries {
            cause: IdleCause::AfterSync,
            ended_by: GapEnd::NotObserved,
            ns: in_loop(0, 8 * MS, 10 * MS),
        },
        LongIdleSeries {
            cause: IdleCause::Host,
            ended_by: GapEnd::CopyToDevice,
            ns: in_loop(MS, 0, 0),
        },
    ];
    d.short_gaps_ended = in_loop(5, 1, 0);
    d.long_gaps_ended = in_loop(2, 0, 0);
    let g = steady(&profile(t.clone())).unwrap().gpu.unwrap();
    // The edge's idle after the sync leaves with its part in the long gap.
    assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS);
    assert_eq!(
        g.long_idle,
        BTreeMap::from([
            ((IdleCause::AfterSync, GapEnd::Kernel), 40 * MS),
            ((IdleCause::Host, GapEnd::CopyToDevice), 20 * MS),
        ])
    );
    assert_eq!((g.short_gaps, g.long_gaps), (101, 40));
    // A tenth of each window recorded, the same gaps ending in it: all scaled by 10.
    let d = &mut t.devices[0];
    let idle = d.idle_ns.iter_mut().map(|s| &mut s.ns);
    let long = d.long_idle_ns.iter_mut().map(|s| &mut s.ns);
    for s in idle.chain(long).chain([&mut d.busy_ns]) {
        s.iter_mut().for_each(|v| *v /= 10);
    }
    let g = steady(&profile(t)).unwrap().gpu.unwrap();
    assert_eq!(g.idle[&IdleKind::AfterSync], 60 * MS);
    assert_eq!(
        g.long_idle[&(IdleCause::Host, GapEnd::CopyToDevice)],
        20 * MS
    );
    assert_eq!((g.short_gaps, g.long_gaps), (1010, 400));
}

#[test]
fn a_window_with_little_recorded_weighs_little() {
    // 10 windows fully recorded with the GPU idle, 10 in which only a sampling period's
    // 10 µs tail of busy time was recorded: the GPU was busy 100 µs of the 100.1 ms
    // recorded, not half the time (scaling each window to its length would say 50 %).
    let mut w = times(
        10,
        W {
            busy_ns: 0,
            idle_after_sync: 0,
            idle_host: 10 * MS,
            ..LOOP
        },
    );
    w.extend(times(
        10,
        W {
            busy_ns: 10_000,
            idle_after_sync: 0,
            idle_host: 0,
            ..LOOP
        },
    ));
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!(g.ns, 200 * MS);
    assert_eq!(g.busy_ns, 199_800);
    assert_eq!(g.idle_ns(), 199_800_199);
}

#[test]
fn nvtx_names_pauses_and_steps() {
    use gpuspy_format::timeline::NvtxRanges;
    let mut t = timeline(&times(60, LOOP), false);
    let mut eval = vec![0; 60];
    eval[20..30].fill(10 * MS);
    // 100 steps of 2.5 ms of host time, one every 5 ms, around the evaluation.
    let mut ends = vec![2; 60];
    ends[20..30].fill(0);
    t.nvtx = vec![
        NvtxRanges {
            name: "train_step".into(),
            count: 100,
            total_ns: 250 * MS,
            ns: ends.iter().map(|n| n * 2_500_000).collect(),
            ends,
            ..NvtxRanges::default()
        },
        NvtxRanges {
            name: "evaluate".into(),
            count: 1,
            total_ns: 100 * MS,
            ns: eval,
            ..NvtxRanges::default()
        },
    ];
    let a = time_axis(&profile(t)).unwrap();
    assert_eq!(kinds(&a)[1], (PhaseKind::Pause, Some("evaluate"), 200, 300));
    let step = a.steady.unwrap().step.unwrap();
    assert_eq!(step.ns, 5 * MS);
    assert_eq!(step.source, StepSource::Nvtx("train_step".into()));
}

#[test]
fn a_checkpoint_range_waiting_for_queued_steps_is_the_loop_until_the_gpu_drains() {
    // The H200's healthy-pauses --nvtx: steps queue in window 20 (launches, a step
    // range); the checkpoint range opens there and its first copy waits in windows
    // 20-21 while the GPU runs the queued steps, then the host writes the checkpoint
    // (windows 22-29, GPU idle).
    use gpuspy_format::timeline::NvtxRanges;
    let mut w = times(20, LOOP);
    w.push(W {
        busy_ns: 8 * MS,
        idle_after_sync: 2 * MS,
        idle_host: 0,
        ..LOOP
    });
    w.push(W {
        launches: 0,
        busy_ns: 9 * MS,
        idle_after_sync: MS,
        idle_host: 0,
        ..LOOP
    });
    w.extend(times(8, QUIET));
    w.extend(times(30, LOOP));
    let mut t = timeline(&w, true);
    let mut step = vec![MS; 60];
    step[21..30].fill(0);
    let mut checkpoint = vec![0; 60];
    checkpoint[20] = 6 * MS;
    checkpoint[21..30].fill(10 * MS);
    t.nvtx = vec![
        NvtxRanges {
            name: "step".into(),
            count: 500,
            outermost: 500,
            total_ns: 50 * MS,
            ns: step,
            ..NvtxRanges::default()
        },
        NvtxRanges {
            name: "checkpoint".into(),
            count: 1,
            outermost: 1,
            total_ns: 96 * MS,
            ns: checkpoint,
            ..NvtxRanges::default()
        },
    ];
    let a = time_axis(&profile(t)).unwrap();
    assert_eq!(
        kinds(&a)[..3],
        [
            (PhaseKind::Steady, None, 0, 220),
            (PhaseKind::Pause, Some("checkpoint"), 220, 300),
            (PhaseKind::Steady, None, 300, 600)
        ]
    );
}

#[test]
fn the_job_is_steady_where_every_rank_is() {
    // Rank 1 starts its loop 100 ms after rank 0 and both stop together.
    let rank = |offset: usize, pid: u32| {
        let mut w = times(
            10 + offset,
            W {
                init_ns: 10 * MS,
                ..QUIET
            },
        );
        w.extend(times(50 - offset, LOOP));
        let mut p = profile(timeline(&w, true));
        p.processes[0].pid = pid;
        p
    };
    let mut p = rank(0, 1);
    p.absorb(rank(10, 2));
    let a = time_axis(&p).unwrap();
    assert_eq!(
        kinds(&a),
        [
            (PhaseKind::Startup, None, 0, 200),
            (PhaseKind::Steady, None, 200, 600)
        ]
    );
    // Both ranks' windows in the common span: 2 x 40.
    assert_eq!(a.steady.as_ref().unwrap().ns, 800 * MS);
    // A launcher's agent, making calls but no GPU work for 100 ms in the middle, changes
    // nothing.
    let mut agent = profile(timeline(&times(60, QUIET), false));
    agent.processes[0].pid = 3;
    agent.processes[0].timeline.as_mut().unwrap().host.calls[30..40].fill(5);
    p.absorb(agent);
    let with_agent = time_axis(&p).unwrap();
    assert_eq!(kinds(&with_agent), kinds(&a));
    assert_eq!(with_agent.steady, a.steady);
}

#[test]
fn a_process_without_work_is_all_start_up_and_old_dumps_have_no_axis() {
    let a = time_axis(&profile(timeline(&times(5, QUIET), false))).unwrap();
    assert_eq!(kinds(&a), [(PhaseKind::Startup, None, 0, 50)]);
    assert!(a.steady.is_none());
    assert!(time_axis(&run(1.0).build()).is_none());
}

/// A loop launching 20,000 kernels a second (200 a 10 ms window), the GPU busy 4 ms a
/// window and idle 6 ms with the host outside the driver.
const DISPATCH: W = W {
    launches: 200,
    launch_ns: MS,
    driver_ns: MS,
    busy_ns: 4 * MS,
    idle_host: 6 * MS,
    ..QUIET
};

#[test]
fn idle_in_long_gaps_of_a_fast_launching_loop_is_host_work_not_dispatch() {
    use gpuspy_format::timeline::LongIdleSeries;
    // Of each window's 6 ms, 4 ms lie in gaps of a millisecond or more that a copy to the
    // device ended (a batch awaited): launch overhead opens gaps of microseconds.
    let mut t = timeline(&times(30, DISPATCH), true);
    t.devices[0].long_idle_ns = vec![LongIdleSeries {
        cause: IdleCause::Host,
        ended_by: GapEnd::CopyToDevice,
        ns: vec![4 * MS; 30],
    }];
    let g = steady(&profile(t)).unwrap().gpu.unwrap();
    assert_eq!(g.ns, 300 * MS);
    assert_eq!(g.idle[&IdleKind::Launch], 30 * 2 * MS);
    assert_eq!(g.idle[&IdleKind::Host], 30 * 4 * MS);
}

#[test]
fn a_window_cupti_missed_without_a_launch_is_idle_host_time_in_a_fast_loop() {
    // Every third window launched nothing, waited on nothing and CUPTI (sampled) was off.
    let w: Vec<W> = (0..30)
        .map(|i| if i % 3 == 1 { QUIET } else { DISPATCH })
        .collect();
    let g = steady(&profile(timeline(&w, true))).unwrap().gpu.unwrap();
    assert_eq!(g.ns, 300 * MS);
    assert_eq!(g.idle[&IdleKind::Launch], 20 * 6 * MS);
    assert_eq!(g.idle[&IdleKind::Host], 10 * 10 * MS);
    // A loop of a few long kernels may run one through a window without a launch.
    let slow: Vec<W> = w
        .iter()
        .map(|x| W {
            launches: x.launches.min(2),
            ..*x
        })
        .collect();
    let g = steady(&profile(timeline(&slow, true)))
        .unwrap()
        .gpu
        .unwrap();
    // (200 a second: the observed windows' idle is host work, the unobserved ones unknown).
    assert_eq!(g.ns, 200 * MS);
    assert_eq!(g.idle[&IdleKind::Host], 20 * 6 * MS);
}

#[test]
fn many_long_gaps_that_each_end_in_a_load_are_the_loops_waits_not_jit() {
    // Ten 150 ms waits, each ended by a 1 ms lazy kernel load (cuDNN's, in a loop whose
    // DataLoader cannot keep up): the loop's own, not ten compiles.
    let mut w = times(5, LOOP);
    for _ in 0..10 {
        w.extend(times(15, QUIET));
        w.push(W {
            module_ns: MS,
            ..LOOP
        });
        w.extend(times(5, LOOP));
    }
    let a = time_axis(&profile(timeline(&w, true))).unwrap();
    assert!(
        a.phases.iter().all(|p| p.kind != PhaseKind::Pause),
        "{:?}",
        kinds(&a)
    );
    // Where loading took most of a gap, it is loading however many there are.
    for window in w.iter_mut().filter(|x| x.launches == 0) {
        window.module_ns = 6 * MS;
    }
    let a = time_axis(&profile(timeline(&w, true))).unwrap();
    let named = a
        .phases
        .iter()
        .filter(|p| p.name.as_deref() == Some(LOADING));
    assert_eq!(named.count(), 10, "{:?}", kinds(&a));
}

#[test]
fn a_set_up_slower_than_the_loop_that_outlasts_it_is_warm_up() {
    // 90 windows of autotuning at 2 launches each, GPU mostly idle with the host working,
    // then 30 windows of the loop at 20: the median window is the set-up's, the median
    // launch the loop's. The set-up is warm-up, and its idle is not the loop's.
    let autotune = W {
        launches: 2,
        busy_ns: MS,
        idle_host: 9 * MS,
        ..QUIET
    };
    let mut w = times(90, autotune);
    w.extend(times(30, LOOP));
    let p = profile(timeline(&w, true));
    let a = time_axis(&p).unwrap();
    assert_eq!(
        kinds(&a),
        [
            (PhaseKind::Warmup, None, 0, 900),
            (PhaseKind::Steady, None, 900, 1200)
        ],
        "{:?}",
        a.phases
    );
    let g = steady(&p).unwrap().gpu.unwrap();
    assert_eq!((g.ns, g.busy_ns), (300 * MS, 180 * MS));
}
