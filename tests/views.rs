//! The views: `report --html` and `diff --html` pages loaded in the system's headless
//! Chromium (tools/browser/check.mjs), and `report --perfetto` traces checked against the
//! trace-event format's rules and against the dumps' own times.

use crate::support::*;
use gpuspy_format::timeline::{
    CauseSeries, DeviceWindows, HostEvent, HostEventKind, HostWindows, IdleCause, IdleGap,
    IdleSeries, Timeline, WINDOWS,
};
use gpuspy_format::{Dump, SyncCause};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A schema-2 dump of rank `rank` running `run_s` seconds from `EPOCH_NS`, with the H200
/// run's NVML and CUPTI data and a full timeline: `WINDOWS` windows that tile the run
/// exactly (so the report's job grid is the timeline's own), launches, a blocked host and
/// an idle GPU that vary by window, and a full sample of blocking calls and idle gaps.
fn timeline_dump(rank: u32, run_s: u64) -> Dump {
    let template: Dump =
        serde_json::from_slice(&std::fs::read(data("h200-torch-paced-late.json")).unwrap())
            .unwrap();
    let mut d = crafted_dump(20_000 + rank, 0, run_s, 1_000_000);
    d.schema_version = 2;
    d.process.rank = Some(gpuspy_format::Rank {
        rank,
        world_size: Some(1000),
        source: "RANK".into(),
        ..Default::default()
    });
    let mut gpu = template.gpu.clone().unwrap();
    for dev in &mut gpu.devices {
        if let Some(t) = &mut dev.telemetry {
            t.series.start_unix_ns = d.start_unix_ns;
            t.series.step_ms = run_s * 1000 / t.series.gpu_util_pct.len().max(1) as u64;
        }
    }
    d.gpu = Some(gpu);
    let window_ns = run_s * 1_000_000_000 / WINDOWS as u64;
    let n = WINDOWS;
    let wave = |i: usize, k: u64| (i as u64 * 7 + rank as u64 * 3) % k;
    let at = |i: usize, offset: u64| d.start_unix_ns + i as u64 * window_ns + offset;
    let events = |offset: u64, kind: HostEventKind| -> Vec<HostEvent> {
        (0..16)
            .map(|k| HostEvent {
                start_unix_ns: at(k * 16, offset),
                end_unix_ns: at(k * 16, offset + 1_000 + k as u64 * 1_000),
                kind,
            })
            .collect()
    };
    let gaps = |offset: u64, cause: IdleCause| -> Vec<IdleGap> {
        (0..16)
            .map(|k| IdleGap {
                start_unix_ns: at(k * 16 + 8, offset),
                end_unix_ns: at(k * 16 + 8, offset + 2_000_000),
                cause,
            })
            .collect()
    };
    d.timeline = Some(Timeline {
        start_unix_ns: d.start_unix_ns,
        window_ns,
        host: HostWindows {
            calls: (0..n).map(|i| 100 + wave(i, 50)).collect(),
            launches: (0..n).map(|i| 80 + wave(i, 40)).collect(),
            graph_launches: vec![0; n],
            driver_ns: vec![window_ns / 10; n],
            launch_ns: vec![window_ns / 20; n],
            module_ns: vec![0; n],
            init_ns: vec![0; n],
            blocked_ns: vec![CauseSeries {
                cause: SyncCause::Explicit,
                ns: (0..n).map(|i| window_ns * wave(i, 5) / 10).collect(),
            }],
            copy_bytes: vec![],
            allocs: vec![0; n],
            frees: vec![0; n],
        },
        devices: vec![DeviceWindows {
            ordinal: 0,
            observed_ns: vec![window_ns; n],
            busy_ns: (0..n).map(|i| window_ns * (5 + wave(i, 5)) / 10).collect(),
            kernels: vec![80; n],
            transfer_ns: vec![0; n],
            copy_bytes: vec![0; n],
            idle_ns: vec![
                IdleSeries {
                    cause: IdleCause::AfterSync,
                    ns: (0..n).map(|i| window_ns * (4 - wave(i, 5)) / 20).collect(),
                },
                IdleSeries {
                    cause: IdleCause::Host,
                    ns: (0..n).map(|i| window_ns * (4 - wave(i, 5)) / 20).collect(),
                },
            ],
            longest_gaps: gaps(1_000, IdleCause::AfterSync),
            recent_gaps: gaps(window_ns / 2, IdleCause::Host),
            ..DeviceWindows::default()
        }],
        longest_blocking: events(0, HostEventKind::Sync(SyncCause::Explicit)),
        recent_blocking: events(window_ns / 2, HostEventKind::Alloc),
        nvtx: vec![],
        ..Timeline::default()
    });
    d
}

fn timeline_run(dir: &Path, ranks: u32, run_s: u64) {
    for r in 0..ranks {
        write_dump(
            dir,
            &format!("gpuspy-r{r}-node{}-{}.json", r / 8, 20_000 + r),
            &timeline_dump(r, run_s),
        );
    }
}

/// One load of a page as tools/browser/check.mjs saw it.
struct Load {
    file: String,
    load_ms: f64,
    verdict: String,
    charts: u64,
    line: Value,
}

/// Loads each page `times` times in one headless Chromium, one browser at a time: on the
/// 2-core CI machine a second browser would stretch the load times measured.
fn browse(pages: &[&Path], times: u32) -> Vec<Load> {
    static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/browser/check.mjs");
    let out = Command::new("node")
        .arg(&harness)
        .args(["--loads", &times.to_string()])
        .args(pages)
        .output()
        .expect("node (`tools/ensure-deps.sh test` installs it, with Chromium and puppeteer-core)");
    assert!(
        out.status.success(),
        "{} failed (`tools/ensure-deps.sh test` installs Chromium and tools/browser's packages): {}",
        harness.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let loads: Vec<Load> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Load {
                file: v["file"].as_str().unwrap().to_string(),
                load_ms: v["load_ms"].as_f64().unwrap(),
                verdict: v["verdict"].as_str().unwrap().to_string(),
                charts: v["charts"].as_u64().unwrap(),
                line: v,
            }
        })
        .collect();
    assert_eq!(loads.len(), pages.len() * times as usize);
    loads
}

/// No console error, exception or request; every chart and canvas drawn, its labels inside
/// it and apart; nothing drawn across a stretch CUPTI did not observe; host threads blocked
/// at most as many as there are; a timeline, if any, zooms in on a drag and back out on a
/// double click.
fn assert_clean(l: &Load) {
    assert_eq!(l.line["errors"], serde_json::json!([]), "{}", l.line);
    assert_eq!(l.line["empty_charts"], serde_json::json!([]), "{}", l.line);
    assert_eq!(l.line["empty_canvases"], 0, "{}", l.line);
    for key in ["labels_outside", "labels_overlapping", "gaps_crossed"] {
        assert_eq!(l.line[key], serde_json::json!([]), "{key}: {}", l.line);
    }
    if let Some(blocked) = l.line["blocked_max"].as_f64() {
        // Four significant digits per cause in the page's data.
        let threads = l.line["threads"].as_f64().unwrap();
        assert!(
            blocked <= threads * 1.001,
            "{blocked} > {threads} threads: {}",
            l.line
        );
    }
    let z = &l.line["zoom"];
    if !z.is_null() {
        assert!(
            z["before"]
                .as_str()
                .unwrap()
                .starts_with("showing 0.00 s to "),
            "{z}"
        );
        assert_ne!(z["zoomed"], z["before"], "{z}");
        assert_eq!(z["reset"], z["before"], "{z}");
    }
}

/// The page's GPU section, which the verdict and the layers refer to ("see the GPU
/// section"): each listed process's NVML and CUPTI notes, or why there is no GPU data.
fn assert_gpu_section(l: &Load, r: &Value) {
    let text = l.line["gpu"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", l.line));
    let rows = r["gpu"].as_array().unwrap();
    if rows.is_empty() {
        assert!(text.contains("no GPU-side data in the dumps"), "{text}");
    }
    for row in rows.iter().take(8) {
        for source in ["nvml", "cupti"] {
            let note = row[source]["note"].as_str().unwrap();
            assert!(text.contains(note), "{source} note {note:?} not in {text}");
        }
    }
}

/// The charts a report page draws outside its timeline: a histogram per API shown (12 at
/// most), the syncs' bar chart and a histogram per cause, the copies' bar chart, a kernel
/// chart per device with kernels (8 at most), the straggler view.
fn charts_besides_the_timeline(r: &Value) -> u64 {
    let len = |k: &str| r[k].as_array().unwrap().len() as u64;
    let syncs = len("syncs");
    let devices_with_kernels = r["gpu"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["devices"].as_array().unwrap())
        .take(8)
        .filter(|d| {
            d["activity"]["top_kernels"]
                .as_array()
                .is_some_and(|k| !k.is_empty())
        })
        .count() as u64;
    let ranks = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["rank"].is_u64())
        .count();
    len("apis").min(12)
        + if syncs > 0 { 1 + syncs } else { 0 }
        + u64::from(len("copies") > 0)
        + devices_with_kernels
        + u64::from(ranks >= 2)
}

/// The page's verdict, or its beginning: the report's own sentence for a run with no
/// finding.
fn expected_verdict(r: &Value) -> String {
    match (r["verdict"].as_str(), r["verdict_text"].as_str()) {
        (Some(id), _) => format!("Verdict: {id} ("),
        (None, Some(text)) => format!("Verdict: {text}"),
        (None, None) => panic!("no verdict and no verdict_text: {r}"),
    }
}

fn html_of(inputs: &[&Path], out: &Path) -> Value {
    let mut args = vec!["report", "--json", "--html", s(out)];
    args.extend(inputs.iter().map(|p| s(p)));
    let o = gpuspy_cmd(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn report_and_diff_pages_load_in_chromium_with_the_verdict_and_every_chart_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let crafted = dir.path().join("crafted");
    std::fs::create_dir(&crafted).unwrap();
    timeline_run(&crafted, 2, 60);
    let unexplained = dir.path().join("unexplained");
    std::fs::create_dir(&unexplained).unwrap();
    write_dump(
        &unexplained,
        "gpuspy-1.json",
        &crate::phases::unexplained_idle_dump(),
    );
    let mut inputs: Vec<PathBuf> = [
        "h200-cupy-managed.json",
        "h200-matmul-late-records.json",
        "h200-torch-paced-late.json",
        "h200-um-fault-heavy-windows.json",
        "h200-torch-pageable.json",
        "h200-ddp-comm",
        "h200-ddp-even",
        "h200-ddp-slow",
    ]
    .iter()
    .map(|n| data(n))
    .collect();
    let crafted_at = inputs.len();
    inputs.push(crafted.clone());
    inputs.push(unexplained);
    let mut pages = Vec::new();
    let mut reports = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let page = dir.path().join(format!("report-{i}.html"));
        reports.push(html_of(&[input], &page));
        pages.push(page);
    }
    let diff_page = dir.path().join("diff.html");
    let o = gpuspy_cmd(&[
        "diff",
        "--json",
        "--html",
        s(&diff_page),
        s(&data("h200-ddp-even")),
        s(&data("h200-ddp-slow")),
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{o:?}");
    let diff: Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<&Path> = pages
        .iter()
        .map(PathBuf::as_path)
        .chain([diff_page.as_path()])
        .collect();
    let loads = browse(&paths, 1);
    // The checks of assert_clean have something to check: CUPTI's duty cycles leave
    // unobserved slots between observed ones (um-fault-heavy), and one thread's syncs
    // longer than a window were filed whole in the window they ended in (matmul-late).
    let unobserved_between = |r: &Value| {
        let busy = r["timelines"]["job"]["gpu_busy_share"].as_array().unwrap();
        let seen: Vec<usize> = (0..busy.len()).filter(|&i| !busy[i].is_null()).collect();
        seen.windows(2).any(|w| w[1] > w[0] + 1)
    };
    let at = |name: &str| inputs.iter().position(|p| p.ends_with(name)).unwrap();
    let fault_heavy = at("h200-um-fault-heavy-windows.json");
    assert!(
        unobserved_between(&reports[fault_heavy]),
        "{}",
        loads[fault_heavy].line
    );
    let matmul = at("h200-matmul-late-records.json");
    let dump: gpuspy_format::Dump =
        serde_json::from_slice(&std::fs::read(&inputs[matmul]).unwrap()).unwrap();
    let t = dump.timeline.unwrap();
    assert_eq!(dump.threads, 1);
    assert!(t.host.blocked_ns[0]
        .ns
        .iter()
        .any(|&ns| ns > 2 * t.window_ns));
    let blocked_max = loads[matmul].line["blocked_max"].as_f64().unwrap();
    assert!(blocked_max > 0.5, "{}", loads[matmul].line);
    for (l, r) in loads.iter().zip(&reports) {
        assert_clean(l);
        assert_gpu_section(l, r);
        assert!(
            l.verdict.starts_with(&expected_verdict(r)),
            "{}: {}",
            l.file,
            l.verdict
        );
        let besides = charts_besides_the_timeline(r);
        assert_eq!(
            l.line["zoom"].is_null(),
            r["timelines"].is_null(),
            "{}",
            l.line
        );
        if r["timelines"].is_null() {
            assert_eq!(l.charts, besides, "{}", l.line);
        } else {
            assert!(
                l.charts > besides,
                "{}: no timeline chart: {}",
                l.file,
                l.line
            );
        }
    }
    // The crafted run's timeline: GPU busy and idle, launches, host blocked, and the four
    // NVML quantities per device; its one API is cuLaunchKernel; two ranks.
    let crafted_load = &loads[crafted_at];
    let besides = charts_besides_the_timeline(&reports[crafted_at]);
    assert_eq!(crafted_load.charts, 7 + besides, "{}", crafted_load.line);
    assert_eq!(crafted_load.line["canvases"], 1, "{}", crafted_load.line);
    let d = loads.last().unwrap();
    assert_clean(d);
    let result = match diff["regressions"].as_u64().unwrap() {
        0 => "Result: no significant regression".to_string(),
        n => format!("Result: {n} regression(s)"),
    };
    assert_eq!(d.verdict, result);
    let pairs = diff["latencies"].as_array().unwrap().len() as u64;
    assert!(pairs > 0);
    assert_eq!(d.charts, 2 * pairs, "{}", d.line);
}

#[test]
fn the_harness_reports_a_script_error_an_empty_chart_and_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.html");
    html_of(&[&data("h200-torch-paced-late.json")], &good);
    let html = std::fs::read_to_string(&good).unwrap();
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        html.replacen("\"layers\":[", "\"layers\":null,\"x\":[", 1),
    )
    .unwrap();
    let empty = dir.path().join("empty.html");
    let blank = "<main id=\"app\">";
    std::fs::write(
        &empty,
        html.replacen(
            blank,
            "<svg class=\"chart\"><text>blank</text></svg><main id=\"app\">",
            1,
        ),
    )
    .unwrap();
    let fetching = dir.path().join("fetching.html");
    std::fs::write(
        &fetching,
        html.replacen(
            "</body>",
            "<img src=\"https://example.invalid/x.png\"></body>",
            1,
        ),
    )
    .unwrap();
    let cut = dir.path().join("cut.html");
    std::fs::write(
        &cut,
        html.replacen(
            blank,
            "<svg class=\"chart\" viewBox=\"0 0 100 20\"><text x=\"90\" y=\"12\">cut</text><rect width=\"9\" height=\"9\"/></svg><main id=\"app\">",
            1,
        ),
    )
    .unwrap();
    // The stacked areas joined across the slots CUPTI did not observe, as they once were.
    let fault_heavy = dir.path().join("fault-heavy.html");
    html_of(&[&data("h200-um-fault-heavy-windows.json")], &fault_heavy);
    let joined = dir.path().join("joined.html");
    let run_ends_at_a_gap = "while (j + 1 < last && top[j + 1] != null) j++;";
    let page = std::fs::read_to_string(&fault_heavy).unwrap();
    assert!(page.contains(run_ends_at_a_gap));
    std::fs::write(
        &joined,
        page.replace(run_ends_at_a_gap, "while (j + 1 < last) j++;"),
    )
    .unwrap();
    let loads = browse(&[&good, &broken, &empty, &fetching, &cut, &joined], 1);
    assert_clean(&loads[0]);
    let errors = |l: &Load| l.line["errors"].as_array().unwrap().clone();
    assert!(
        errors(&loads[1])
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("exception: ")),
        "{}",
        loads[1].line
    );
    assert_eq!(
        loads[2].line["empty_charts"],
        serde_json::json!(["blank"]),
        "{}",
        loads[2].line
    );
    // The aborted request also shows as a console error ("Failed to load resource").
    assert_eq!(
        errors(&loads[3])[0],
        "request: https://example.invalid/x.png",
        "{}",
        loads[3].line
    );
    assert_eq!(
        loads[4].line["labels_outside"],
        serde_json::json!(["cut: cut"])
    );
    let crossed = loads[5].line["gaps_crossed"].as_array().unwrap();
    assert!(
        crossed[0]
            .as_str()
            .unwrap()
            .starts_with("GPU busy and idle by cause (share of the time observed): slot "),
        "{}",
        loads[5].line
    );
}

/// The median of three loads of a merged 1,000-rank page, each from navigation start to
/// its load event (the browser's start excluded), stays under 2 s on the 2-core CI
/// machine. The trace of the same week-long job stays under 10 MB.
#[test]
fn a_thousand_rank_week_long_job_loads_in_under_two_seconds_and_traces_in_under_10_mb() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = dir.path().join("dumps");
    std::fs::create_dir(&dumps).unwrap();
    timeline_run(&dumps, 1000, 7 * 24 * 3600);
    let page = dir.path().join("ranks.html");
    let trace = dir.path().join("ranks.trace.json");
    let o = gpuspy_cmd(&[
        "report",
        "--html",
        s(&page),
        "--perfetto",
        s(&trace),
        s(&dumps),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let trace_bytes = std::fs::metadata(&trace).unwrap().len();
    let page_bytes = std::fs::metadata(&page).unwrap().len();
    let loads = browse(&[&page], 3);
    let mut ms: Vec<f64> = loads.iter().map(|l| l.load_ms).collect();
    ms.sort_by(f64::total_cmp);
    eprintln!("1,000 ranks: page {page_bytes} B, loads {ms:?} ms; trace {trace_bytes} B");
    for l in &loads {
        assert_clean(l);
        assert!(l.verdict.starts_with("Verdict: "), "{}", l.verdict);
    }
    assert!(ms[1] < 2000.0, "median load {} ms: {ms:?}", ms[1]);
    assert!(trace_bytes < 10_000_000, "{trace_bytes} B");
    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    check_trace_rules(&t);
    assert_eq!(rank_groups(&t), (0..1000).collect::<Vec<u32>>());
}

/// The trace-event format's rules, as the Perfetto UI's JSON importer and chrome://tracing
/// apply them: an object with `traceEvents`; every event a phase we write (`M`, `C`, `X`)
/// with an integer pid and a name; complete events with a thread, a start and a duration
/// of at least 0, nested (or apart) within each thread; counters with numeric arguments
/// and times that never go back per counter; every group named.
fn check_trace_rules(t: &Value) {
    assert_eq!(t["displayTimeUnit"], "ms");
    assert!(t["otherData"]["origin_unix_ns"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .is_ok());
    let events = t["traceEvents"].as_array().unwrap();
    let mut named = std::collections::BTreeSet::new();
    let mut used = std::collections::BTreeSet::new();
    let mut slices: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut counters: BTreeMap<(u64, String), f64> = BTreeMap::new();
    for e in events {
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("pid: {e}"));
        let name = e["name"].as_str().unwrap_or_else(|| panic!("name: {e}"));
        match e["ph"].as_str().unwrap() {
            "M" => {
                if name == "process_name" {
                    assert!(e["args"]["name"].is_string(), "{e}");
                    named.insert(pid);
                }
            }
            "X" => {
                used.insert(pid);
                let ts = e["ts"].as_f64().unwrap();
                let dur = e["dur"].as_f64().unwrap();
                assert!(ts >= 0.0 && dur >= 0.0, "{e}");
                slices
                    .entry((pid, e["tid"].as_u64().unwrap()))
                    .or_default()
                    .push((ts, ts + dur));
            }
            "C" => {
                used.insert(pid);
                let ts = e["ts"].as_f64().unwrap();
                let args = e["args"].as_object().unwrap();
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
                let last = counters.insert((pid, name.to_string()), ts);
                assert!(last.is_none_or(|l| l < ts), "counter time went back: {e}");
            }
            other => panic!("phase {other}: {e}"),
        }
    }
    assert!(
        used.is_subset(&named),
        "unnamed groups: {:?}",
        used.difference(&named)
    );
    for ((pid, tid), mut s) in slices {
        s.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut open: Vec<f64> = Vec::new();
        for (start, end) in s {
            while open.last().is_some_and(|&e| e <= start) {
                open.pop();
            }
            if let Some(&outer) = open.last() {
                assert!(
                    end <= outer,
                    "pid {pid} tid {tid}: [{start}, {end}) overlaps one ending at {outer}"
                );
            }
            open.push(end);
        }
    }
}

/// The ranks that have a group of their own, in the groups' order.
fn rank_groups(t: &Value) -> Vec<u32> {
    let mut groups: Vec<(u64, u32)> = Vec::new();
    let names: BTreeMap<u64, String> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for e in t["traceEvents"].as_array().unwrap() {
        if e["name"] == "process_sort_index" {
            let pid = e["pid"].as_u64().unwrap();
            let name = &names[&pid];
            if let Some(rank) = name.strip_prefix("rank ").and_then(|r| r.split(' ').next()) {
                groups.push((
                    e["args"]["sort_index"].as_u64().unwrap(),
                    rank.parse().unwrap(),
                ));
            }
        }
    }
    groups.sort();
    groups.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn a_trace_keeps_the_dumps_times_and_window_series() {
    let dir = tempfile::tempdir().unwrap();
    timeline_run(dir.path(), 2, 60);
    let trace = dir.path().join("t.json");
    let o = gpuspy_cmd(&["report", "--perfetto", s(&trace), s(dir.path())]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    check_trace_rules(&t);
    assert_eq!(rank_groups(&t), [0, 1]);
    let origin: u64 = t["otherData"]["origin_unix_ns"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let dump = timeline_dump(1, 60);
    let tl = dump.timeline.as_ref().unwrap();
    assert_eq!(origin, tl.start_unix_ns);
    let us = |ns: u64| (ns - origin) as f64 / 1e3;
    let events = t["traceEvents"].as_array().unwrap();
    let rank1 = events
        .iter()
        .find(|e| {
            e["name"] == "process_name"
                && e["args"]["name"].as_str().unwrap().starts_with("rank 1 ")
        })
        .unwrap()["pid"]
        .as_u64()
        .unwrap();
    let slices: Vec<(String, f64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == rank1)
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    // Every sampled blocking call and idle gap of the dump, at the dump's times.
    let mut want: Vec<(String, f64, f64)> = tl
        .longest_blocking
        .iter()
        .chain(&tl.recent_blocking)
        .map(|e| {
            let what = match e.kind {
                HostEventKind::Sync(c) => format!("sync: {}", c.name()),
                _ => "alloc/free".to_string(),
            };
            (
                what,
                us(e.start_unix_ns),
                (e.end_unix_ns - e.start_unix_ns) as f64 / 1e3,
            )
        })
        .chain(
            tl.devices[0]
                .longest_gaps
                .iter()
                .chain(&tl.devices[0].recent_gaps)
                .map(|g| {
                    let cause = if g.cause == IdleCause::Host {
                        "host"
                    } else {
                        "after-sync"
                    };
                    (
                        format!("idle: {cause}"),
                        us(g.start_unix_ns),
                        (g.end_unix_ns - g.start_unix_ns) as f64 / 1e3,
                    )
                }),
        )
        .collect();
    // The process's phases are slices too, on their own track: here the whole run is steady.
    let (phases, mut got): (Vec<_>, Vec<_>) = slices.iter().cloned().partition(|s| {
        ["start-up", "warm-up", "steady", "pause", "teardown"].contains(&s.0.as_str())
    });
    assert_eq!(phases, [("steady".to_string(), 0.0, 60_000_000.0)]);
    let key =
        |a: &(String, f64, f64), b: &(String, f64, f64)| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0));
    want.sort_by(key);
    got.sort_by(key);
    assert_eq!(got, want);
    // The window series: rank 1's launches per second in its first window, and the job's
    // (both ranks summed) in the same window.
    let launches = |pid: u64| -> f64 {
        events
            .iter()
            .find(|e| e["ph"] == "C" && e["pid"] == pid && e["name"] == "launches/s")
            .unwrap()["args"]["value"]
            .as_f64()
            .unwrap()
    };
    let per_s = |n: u64| n as f64 * 1e9 / tl.window_ns as f64;
    let first = |r: u32| timeline_dump(r, 60).timeline.unwrap().host.launches[0];
    assert_eq!(launches(rank1), round4(per_s(first(1))));
    assert_eq!(launches(0), round4(per_s(first(0) + first(1))));
}

/// Four significant digits, as the trace writes values.
fn round4(v: f64) -> f64 {
    let scale = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

#[test]
fn views_of_bad_input_fail_with_report_s_one_line_errors_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = data("h200-torch-paced-late.json");
    let unwritable = dir.path().join("missing-dir/page.html");
    for (flag, file) in [("--html", &unwritable), ("--perfetto", &unwritable)] {
        let o = gpuspy_cmd(&["report", flag, s(file), s(&fixture)]);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(
            err.starts_with(&format!("gpuspy: {}: cannot write", unwritable.display())),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(o.stdout.is_empty());
    }
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let plain = gpuspy_cmd(&["report", s(&empty)]);
    let page = dir.path().join("page.html");
    let o = gpuspy_cmd(&["report", "--html", s(&page), s(&empty)]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(o.stderr, plain.stderr);
    assert!(!page.exists());
    // A dump with nothing on a time axis has nothing to trace.
    let o = gpuspy_cmd(&[
        "report",
        "--perfetto",
        s(&page),
        s(&data("h200-torch-pageable.json")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no time axis in these dumps"), "{err}");
    let o = gpuspy_cmd(&["diff", "--html", s(&unwritable), s(&fixture), s(&fixture)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8(o.stderr)
        .unwrap()
        .starts_with(&format!("gpuspy: {}: cannot write", unwritable.display())));
}

/// `gpuspy ARGS` under a file-size limit of `limit` bytes, with SIGXFSZ ignored so that a
/// write past it fails instead of killing gpuspy: exit code and stderr.
fn under_file_size_limit(args: &[&str], limit: u64) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(gpuspy());
    cmd.args(args).env_remove("GITHUB_ACTIONS");
    // SAFETY: setrlimit and signal are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A page, trace or CI file that cannot be written whole (here: over `ulimit -f`) leaves
/// no file, or the one that was there untouched, and no temp file; the error is one line.
#[test]
fn an_output_file_that_cannot_be_written_whole_is_left_as_it_was() {
    let fixture = data("h200-sync-records-missing.json");
    let dir = tempfile::tempdir().unwrap();
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuLaunchKernel]\nmax_per_run = 1\n").unwrap();
    let (page, trace, junit) = (
        dir.path().join("page.html"),
        dir.path().join("trace.json"),
        dir.path().join("gate.xml"),
    );
    std::fs::write(&trace, "old trace").unwrap();
    let entries = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    for (args, file) in [
        (vec!["report", "--html", s(&page), s(&fixture)], &page),
        (vec!["report", "--perfetto", s(&trace), s(&fixture)], &trace),
        (
            vec![
                "check",
                s(&fixture),
                "--budget",
                s(&budget),
                "--junit",
                s(&junit),
            ],
            &junit,
        ),
    ] {
        let (code, stderr) = under_file_size_limit(&args, 200);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr,
            format!(
                "gpuspy: {}: cannot write: File too large (os error 27)\n",
                file.display()
            )
        );
        assert_eq!(entries(), ["budget.toml", "trace.json"], "{args:?}");
        assert_eq!(std::fs::read_to_string(&trace).unwrap(), "old trace");
    }
    // Within the limit, each is written.
    let (code, stderr) =
        under_file_size_limit(&["report", "--html", s(&page), s(&fixture)], 64 << 20);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .ends_with("</html>\n"));
}

/// A dump whose kernel name is 32 MiB long and whose host, program and argument are 1 MiB
/// each: every string is cut to `MAX_STRING_BYTES` as the dump is read, so the page and the
/// trace are exactly as large as for the dump with short names plus the cut strings'
/// length wherever they appear, and memory stays within 4 times the dump plus 64 MiB.
#[test]
fn strings_of_megabytes_are_cut_in_the_page_and_the_trace() {
    use gpuspy_format::cap::{CUT_MARKER, MAX_STRING_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let template: Value =
        serde_json::from_slice(&std::fs::read(data("h200-sync-records-missing.json")).unwrap())
            .unwrap();
    // (name in the short dump, bytes in the long one, the cut name the views show)
    let pad = |head: &str, len: usize| format!("{head}{}", "x".repeat(len - head.len()));
    let names = [
        ("KERNELX", 32 << 20, pad("KERNELX", MAX_STRING_BYTES)),
        ("HOSTX", 1 << 20, pad("HOSTX", MAX_STRING_BYTES)),
        ("/EXEX", 1 << 20, pad("/EXEX", MAX_STRING_BYTES)),
        // The command line is cut in all: `python3` took 7 of its bytes.
        ("ARGX", 1 << 20, pad("ARGX", MAX_STRING_BYTES - 7)),
    ];
    let mut d = template;
    d["gpu"]["devices"][0]["activity"]["top_kernels"][0]["name"] = names[0].0.into();
    d["process"]["host"] = names[1].0.into();
    d["process"]["exe"] = names[2].0.into();
    d["process"]["cmdline"] = serde_json::json!(["python3", names[3].0]);
    let text = serde_json::to_string(&d).unwrap();
    drop(d);
    let short = dir.path().join("short/gpuspy-short.json");
    // Paths of one length: the views name the dump.
    let long = dir.path().join("large/gpuspy-large.json");
    for path in [&short, &long] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    }
    std::fs::write(&short, &text).unwrap();
    // The long dump streamed to its file, each name padded as it is written, so that this
    // process stays small while gpuspy runs (see `run_with_peak_rss`).
    let mut w = std::io::BufWriter::new(std::fs::File::create(&long).unwrap());
    let mut rest = text.as_str();
    while let Some((at, &(name, len, _))) = names
        .iter()
        .filter_map(|n| rest.find(&format!("\"{}\"", n.0)).map(|at| (at, n)))
        .min_by_key(|&(at, _)| at)
    {
        use std::io::{Read, Write};
        let end = at + 1 + name.len();
        w.write_all(&rest.as_bytes()[..end]).unwrap();
        let padding = (len - name.len()) as u64;
        std::io::copy(&mut std::io::repeat(b'x').take(padding), &mut w).unwrap();
        rest = &rest[end..];
    }
    std::io::Write::write_all(&mut w, rest.as_bytes()).unwrap();
    drop(w);
    for flag in ["--html", "--perfetto"] {
        let view = |dump: &Path, name: &str| {
            let out = dir.path().join(name);
            let mut cmd = Command::new(gpuspy());
            cmd.args(["report", flag, s(&out), "--json", s(dump)]);
            let measured = run_with_peak_rss(&mut cmd);
            assert_eq!(measured.status.code(), Some(0), "{flag}");
            // The bound is on how memory grows with the dump: a release build's baseline
            // for a dump of kilobytes (about 77 MiB with --html) is over its fixed part.
            let limit_kib = (4 * std::fs::metadata(dump).unwrap().len() + (96 << 20)) / 1024;
            assert!(
                measured.max_rss_kib < limit_kib,
                "{flag}: peak {} KiB, limit {limit_kib} KiB",
                measured.max_rss_kib
            );
            std::fs::read_to_string(out).unwrap()
        };
        let (small, large) = (view(&short, "short.view"), view(&long, "long.view"));
        let mut grown = 0;
        for (name, _, cut) in &names {
            let shown = small.matches(name).count();
            let cut = format!("{cut}{CUT_MARKER}");
            assert_eq!(large.matches(&cut).count(), shown, "{flag} {name}");
            grown += shown * (cut.len() - name.len());
        }
        // The page lists the kernels; the trace names its process by host and program.
        let shown: &[&str] = match flag {
            "--html" => &["KERNELX", "HOSTX", "/EXEX", "ARGX"],
            _ => &["HOSTX", "/EXEX"],
        };
        assert!(shown.iter().all(|name| small.contains(name)), "{flag}");
        assert_eq!(large.len(), small.len() + grown, "{flag}");
        assert!(large.len() < small.len() + 200 * MAX_STRING_BYTES, "{flag}");
    }
}

#[test]
fn a_report_asked_for_files_says_what_it_wrote_instead_of_printing_the_text() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = data("h200-um-fault-heavy-windows.json");
    let page = dir.path().join("page.html");
    let trace = dir.path().join("trace.json");
    let wrote = format!("wrote {}\nwrote {}\n", page.display(), trace.display());
    let args = ["--html", s(&page), "--perfetto", s(&trace), s(&fixture)];
    let o = gpuspy_cmd(&[&["report"][..], &args].concat());
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(o.stderr.is_empty(), "{o:?}");
    assert_eq!(String::from_utf8(o.stdout).unwrap(), wrote);
    // With --json, stdout holds the JSON alone.
    let o = gpuspy_cmd(&[&["report", "--json"][..], &args].concat());
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report["verdict"].is_string());
    assert_eq!(String::from_utf8(o.stderr).unwrap(), wrote);
    // diff prints its result, then the page it wrote.
    let o = gpuspy_cmd(&["diff", "--html", s(&page), s(&fixture), s(&fixture)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.starts_with("gpuspy diff: 1 base run(s), 1 new run(s)"),
        "{out}"
    );
    assert!(
        out.ends_with(&format!("\nwrote {}\n", page.display())),
        "{out}"
    );
}
