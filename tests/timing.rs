//! Timing-sensitive tests, in a test binary of their own: cargo runs test binaries one
//! after another, so these never compete for the CPU with the other tests (the fake
//! driver's delays are real sleeps, and a loaded 2-core machine stretches them).

// Shared with the main test binary; each uses part of it.
#[allow(dead_code)]
#[path = "support.rs"]
mod support;

use support::*;

#[test]
fn diff_names_a_40_percent_slower_sync_and_passes_unchanged_runs() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    step_runs(&base, 3, 1000);

    let slower = dir.path().join("slower");
    step_run(&slower, 1400);
    let out = gpuspy_cmd(&["diff", s(&base), s(&slower)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("REGRESSION") && l.contains("cuStreamSynchronize p50"));
    assert!(line.is_some(), "{text}");

    // Three repeated runs of the unchanged configuration: no false alarm.
    for i in 0..3 {
        let again = dir.path().join(format!("again{i}"));
        step_run(&again, 1000);
        let out = gpuspy_cmd(&["diff", s(&base), s(&again)]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // And the same three as a set of runs.
    let set = dir.path().join("set");
    step_runs(&set, 3, 1000);
    let out = gpuspy_cmd(&["diff", "--json", s(&base), s(&set)]);
    assert_eq!(out.status.code(), Some(0));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["regressions"], 0);
    assert_eq!(r["base_runs"], 3);
    assert_eq!(r["new_runs"], 3);
}

#[test]
fn a_2ms_delay_lands_in_the_2ms_bucket() {
    let r = run(
        "linked",
        &["10", "5"],
        &[("FAKECUDA_DELAY_NS", "cuStreamSynchronize=2000000")],
    )
    .report();
    let s = api(&r, "cuStreamSynchronize");
    assert_eq!(s["count"], 5);
    for q in ["p50_ns", "p99_ns"] {
        let v = s[q].as_u64().unwrap();
        // Sleep overshoot stays well under a millisecond; a bucket is 1/16 wide.
        assert!((1_900_000..3_000_000).contains(&v), "{q} = {v}");
    }
    assert!(s["total_ns"].as_u64().unwrap() >= 5 * 2_000_000);
}
