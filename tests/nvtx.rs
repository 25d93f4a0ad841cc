use crate::support::*;
use gpuspy_format::timeline::{NvtxRanges, Timeline};
use gpuspy_format::Dump;
use serde_json::Value;
use std::path::Path;

const STEPS: u64 = 40;

fn timeline_of(dir: &Path) -> Timeline {
    let dumps = dumps_in(dir);
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let d: Dump = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    d.timeline.expect("a timeline")
}

fn ranges<'a>(t: &'a Timeline, name: &str) -> &'a NvtxRanges {
    t.nvtx
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no NVTX ranges named {name}: {:?}", t.nvtx))
}

fn phases(report: &Value) -> Vec<(String, Option<String>, u64, u64)> {
    report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["kind"].as_str().unwrap().to_string(),
                p["name"].as_str().map(str::to_string),
                p["start_ns"].as_u64().unwrap(),
                p["end_ns"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A bare `LD_PRELOAD` run: the shim sets NVTX_INJECTION64_PATH to itself, the program's
/// NVTX loader finds it and both copies of nvtx3 get the handlers; the steps, the
/// evaluation and the rest are counted exactly, and the evaluation is a named pause.
#[test]
fn the_shim_injects_itself_and_names_the_evaluation() {
    let run = run("nvtx", &[&STEPS.to_string()], &[]);
    let own = std::fs::canonicalize(shim()).unwrap();
    assert_eq!(
        run.stdout(),
        format!("injection {}\nloaded 1\n", own.display())
    );
    let t = timeline_of(run.out_dir.path());
    let counts: Vec<(&str, u64, u64)> = t
        .nvtx
        .iter()
        .map(|r| (r.name.as_str(), r.count, r.outermost))
        .collect();
    assert_eq!(
        counts,
        vec![
            ("forward", 2 * STEPS, 0),
            ("data", 2 * STEPS, 2 * STEPS),
            ("step", 2 * STEPS, 2 * STEPS),
            ("eval", 1, 1),
            ("wide", 1, 1),
        ]
    );
    assert_eq!(t.nvtx_lost, 0);
    assert_eq!(t.nvtx_other_tool, None);
    // Each step sleeps 4 ms, the evaluation 30 x 5 ms.
    let step = ranges(&t, "step");
    assert!(step.total_ns >= 2 * STEPS * 4_000_000, "{step:?}");
    let eval = ranges(&t, "eval");
    assert!(eval.total_ns >= 150_000_000, "{eval:?}");
    assert_eq!(eval.ns.iter().sum::<u64>(), eval.total_ns);
    assert_eq!(eval.ns.len(), t.host.calls.len());
    // Windows and totals convert ticks to ns per range and once: 1 ns of rounding a range.
    // "forward" is at depth 1: it has windows too.
    for r in [step, ranges(&t, "forward")] {
        let windows: u64 = r.ns.iter().sum();
        assert!(windows.abs_diff(r.total_ns) <= r.count, "{r:?}");
        // Every range at depth 0 or 1 ended in one window.
        assert_eq!(r.ends.iter().sum::<u64>(), r.count, "{r:?}");
        assert_eq!(r.ends.len(), t.host.calls.len());
    }
    assert!(step.first_start_unix_ns < eval.first_start_unix_ns);
    assert!(eval.last_end_unix_ns < step.last_end_unix_ns);
    // The samples: the evaluation is the longest outermost range, "wide" the last.
    assert_eq!(t.nvtx_longest.len(), 16);
    assert_eq!(t.nvtx_longest[0].name, "eval");
    assert_eq!(
        t.nvtx_longest[0].end_unix_ns - t.nvtx_longest[0].start_unix_ns,
        eval.total_ns
    );
    assert_eq!(t.nvtx_recent.len(), 16);
    assert_eq!(t.nvtx_recent.last().unwrap().name, "wide");

    let report = run.report();
    let phases = phases(&report);
    let at = phases
        .iter()
        .position(|p| p.0 == "pause" && p.1.as_deref() == Some("eval"))
        .unwrap_or_else(|| panic!("no pause named eval: {phases:?}"));
    let (before, pause, after) = (&phases[at - 1], &phases[at], &phases[at + 1]);
    assert_eq!(
        (before.0.as_str(), before.3),
        ("steady", pause.2),
        "{phases:?}"
    );
    assert_eq!(
        (after.0.as_str(), after.2),
        ("steady", pause.3),
        "{phases:?}"
    );
    // The pause is the evaluation, to a window (10 ms) either side.
    let start = t.start_unix_ns;
    let eval_ns = (
        eval.first_start_unix_ns - start,
        eval.last_end_unix_ns - start,
    );
    assert!(
        pause.2.abs_diff(eval_ns.0) <= t.window_ns,
        "{pause:?} {eval_ns:?}"
    );
    assert!(
        pause.3.abs_diff(eval_ns.1) <= t.window_ns,
        "{pause:?} {eval_ns:?}"
    );
    assert_eq!(report["steady_state"]["step"]["source"], "nvtx");
    assert_eq!(report["steady_state"]["step"]["name"], "step");
    assert_eq!(report["nvtx"]["ranges"], 2 * STEPS * 3 + 2);
    assert_eq!(report["nvtx"]["names"], 5);
    assert!(
        report_text(&run.dumps()[0]).contains(&format!(
            "NVTX: {} ranges of 5 names; steps \"step\", pauses \"eval\"",
            2 * STEPS * 3 + 2
        )),
        "{}",
        report_text(&run.dumps()[0])
    );
}

/// A program whose NVTX_INJECTION64_PATH names another tool keeps it: the shim records no
/// ranges, and the dump and the report say which tool has them.
#[test]
fn another_tools_injection_library_is_kept() {
    let other = "/opt/nsight-systems/target-linux-x64/libToolsInjection64.so";
    let taken = run("nvtx", &["2"], &[("NVTX_INJECTION64_PATH", other)]);
    assert_eq!(taken.stdout(), format!("injection {other}\nloaded 0\n"));
    let t = timeline_of(taken.out_dir.path());
    assert!(t.nvtx.is_empty(), "{:?}", t.nvtx);
    assert_eq!(t.nvtx_other_tool.as_deref(), Some(other));
    let report = taken.report();
    assert_eq!(report["nvtx"]["other_tool"], other);
    assert!(report_text(&taken.dumps()[0]).contains(&format!(
        "NVTX: none recorded: NVTX_INJECTION64_PATH names another tool ({other})"
    )));
    // GPUSPY_DISABLE=1: the shim claims nothing either.
    let off = run("nvtx", &["2"], &[("GPUSPY_DISABLE", "1")]);
    assert_eq!(off.stdout(), "injection none\nloaded 0\n");
}

/// A child whose launcher dropped LD_PRELOAD but kept NVTX_INJECTION64_PATH loads the shim
/// only as NVTX's library: it installs nothing, so nothing starts recording.
#[test]
fn a_shim_loaded_only_for_nvtx_installs_nothing() {
    let own = std::fs::canonicalize(shim()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let output = command(&program("nvtx"), &["2"], &[], out.path())
        .env_remove("LD_PRELOAD")
        .env("NVTX_INJECTION64_PATH", &own)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("injection {}\nloaded 0\n", own.display())
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

/// `gpuspy run` passes the shim in NVTX_INJECTION64_PATH when it is unset, and keeps a
/// value another tool set.
#[test]
fn gpuspy_run_sets_the_injection_path_only_when_unset() {
    let own = std::fs::canonicalize(shim()).unwrap().display().to_string();
    for (set, disable, expected) in [
        (None, "0", own.as_str()),
        (
            Some("/elsewhere/libother.so"),
            "0",
            "/elsewhere/libother.so",
        ),
        // GPUSPY_DISABLE=1: the shim records nothing, so it claims nothing.
        (None, "1", "none"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = std::process::Command::new(gpuspy());
        cmd.args(["run", "-o"])
            .arg(dir.path().join("out"))
            .arg("--")
            .arg(program("nvtx"))
            .arg("1")
            .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
            .env("GPUSPY_SHIM", shim())
            .env("GPUSPY_DISABLE", disable)
            .env_remove("LD_PRELOAD")
            .env_remove("GITHUB_ACTIONS")
            .env_remove("NVTX_INJECTION64_PATH");
        if let Some(v) = set {
            cmd.env("NVTX_INJECTION64_PATH", v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with(&format!("injection {expected}\n")),
            "{stdout}"
        );
    }
}
