use crate::support::*;
use gpuspy_format::timeline::{HostEventKind, Timeline};
use gpuspy_format::{Direction, Dump, HostKind, SyncCause};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

const ROUNDS: u64 = 20;
/// Each stream sync 1 ms; the last cuCtxSynchronize 40 ms, the longest blocking call.
const DELAYS: &str = "cuStreamSynchronize=1000000,cuCtxSynchronize=40000000";

fn dump_of(dir: &std::path::Path) -> Dump {
    let dumps = dumps_in(dir);
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap()
}

/// `(label, Unix ns)` of each line the program printed.
fn stamps(stdout: &str) -> Vec<(String, u64)> {
    stdout
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(label, ns)| (label.to_string(), ns.parse().unwrap()))
        .collect()
}

fn stamp(stamps: &[(String, u64)], label: &str) -> u64 {
    stamps.iter().find(|(l, _)| l == label).unwrap().1
}

fn sum(series: &[u64]) -> u64 {
    series.iter().sum()
}

/// Calls and time of the APIs whose symbol starts with one of `prefixes`.
fn apis(d: &Dump, prefixes: &[&str]) -> (u64, u64) {
    d.apis
        .iter()
        .filter(|a| prefixes.iter().any(|p| a.symbol.starts_with(p)))
        .fold((0, 0), |(c, ns), a| (c + a.calls, ns + a.total_ns))
}

#[test]
fn every_column_sums_to_the_dump_and_work_lands_after_the_idle_start() {
    let run = run(
        "timeline",
        &[&ROUNDS.to_string()],
        &[("FAKECUDA_DELAY_NS", DELAYS)],
    );
    let stamps = stamps(&run.stdout());
    let d = dump_of(run.out_dir.path());
    let t: Timeline = d.timeline.clone().expect("a timeline in every dump");
    let h = &t.host;
    assert_eq!(t.start_unix_ns, d.start_unix_ns);
    let windows = h.calls.len();
    assert!(windows as u64 * t.window_ns >= d.stop_unix_ns - d.start_unix_ns);
    for s in [
        &h.launches,
        &h.graph_launches,
        &h.driver_ns,
        &h.launch_ns,
        &h.module_ns,
        &h.init_ns,
        &h.allocs,
    ] {
        assert_eq!(s.len(), windows);
    }

    // Three threads (two exited before the end) of ROUNDS rounds each.
    assert_eq!(d.threads, 3);
    let all = 3 * ROUNDS;
    assert_eq!(sum(&h.calls), d.apis.iter().map(|a| a.calls).sum::<u64>());
    assert_eq!(sum(&h.driver_ns), d.driver_ns);
    assert_eq!(sum(&h.launches), 3 * all);
    assert_eq!(sum(&h.graph_launches), all);
    assert_eq!(sum(&h.launch_ns), apis(&d, &["cuLaunch"]).1);
    assert_eq!(
        sum(&h.init_ns),
        apis(&d, &["cuInit", "cuDevicePrimaryCtxRetain"]).1
    );
    assert_eq!(sum(&h.module_ns), 0);
    // Device allocations and one pinned; their frees.
    assert_eq!(sum(&h.allocs), all + 1);
    assert_eq!(sum(&h.frees), all + 1);
    assert_eq!(h.blocked_ns.len(), d.syncs.len());
    for s in &d.syncs {
        let series = h.blocked_ns.iter().find(|c| c.cause == s.cause).unwrap();
        assert_eq!(sum(&series.ns), s.total_ns, "{:?}", s.cause);
    }
    let copied = |dir: Direction, host: HostKind| {
        let series = h
            .copy_bytes
            .iter()
            .find(|c| c.direction == dir && c.host == host)
            .unwrap();
        sum(&series.bytes)
    };
    assert_eq!(copied(Direction::HtoD, HostKind::Pageable), 1000 * all);
    assert_eq!(copied(Direction::DtoH, HostKind::Pinned), 512 * all);
    assert_eq!(h.copy_bytes.len(), d.copies.len());

    // Only cuInit and the context came before the idle 300 ms. A window's counts are
    // those of the writer's snapshot interval whose middle falls in it, so work may show
    // one window early when a snapshot ran late.
    let rounds_window = ((stamp(&stamps, "rounds") - t.start_unix_ns) / t.window_ns) as usize;
    assert!(rounds_window >= (300_000_000 / t.window_ns) as usize);
    assert_eq!(sum(&h.calls[..rounds_window - 1]), 2);
    let explicit = h
        .blocked_ns
        .iter()
        .find(|c| c.cause == SyncCause::Explicit)
        .unwrap();
    let first_blocked = explicit.ns.iter().position(|&ns| ns > 0).unwrap();
    assert!(
        first_blocked + 1 >= rounds_window,
        "{first_blocked} {rounds_window}"
    );

    // The longest blocking call is the cuCtxSynchronize: its duration exactly as recorded,
    // its times where the program saw it (within 1 ms: the TSC-to-Unix conversion).
    let sync = d
        .syncs
        .iter()
        .find(|s| s.cause == SyncCause::Explicit)
        .unwrap();
    assert_eq!(sync.calls, all + 1);
    let longest = &t.longest_blocking[0];
    assert_eq!(longest.kind, HostEventKind::Sync(SyncCause::Explicit));
    let ctx_sync = d
        .apis
        .iter()
        .find(|a| a.symbol == "cuCtxSynchronize")
        .unwrap();
    assert_eq!(longest.end_unix_ns - longest.start_unix_ns, ctx_sync.max_ns);
    assert_eq!(sync.max_ns, ctx_sync.max_ns);
    let (before, after) = (stamp(&stamps, "long"), stamp(&stamps, "done"));
    assert!(
        longest.start_unix_ns + 1_000_000 >= before,
        "{longest:?} {before}"
    );
    assert!(
        longest.end_unix_ns <= after + 1_000_000,
        "{longest:?} {after}"
    );
    // It was also the last one; every blocking call was kept.
    assert_eq!(t.recent_blocking.last(), Some(longest));
    assert_eq!(t.longest_blocking.len(), 16);
    assert_eq!(t.recent_blocking.len(), 16);
    assert_eq!(t.blocking_events_lost, 0);
    assert!(t.in_call.is_empty());
}

#[test]
fn a_dump_made_at_a_signal_says_which_call_the_thread_was_in_since_when() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = command(
        &program("timeline"),
        &["2"],
        &[("FAKECUDA_DELAY_NS", "cuCtxSynchronize=30000000000")],
        dir.path(),
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let before = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(ns) = line.strip_prefix("long ") {
            break ns.parse::<u64>().unwrap();
        }
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
    let t = dump_of(dir.path()).timeline.unwrap();
    assert_eq!(t.in_call.len(), 1, "{:?}", t.in_call);
    assert_eq!(t.in_call[0].symbol, "cuCtxSynchronize");
    let since = t.in_call[0].since_unix_ns;
    assert!(
        since + 1_000_000 >= before && since < before + 200_000_000,
        "{since} {before}"
    );
}
