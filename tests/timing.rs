//! Timing-sensitive tests, in a test binary of their own: cargo runs test binaries one
//! after another, so these never compete for the CPU with the other tests (the fake
//! driver's delays are real sleeps, and a loaded 2-core machine stretches them).
//!
//! Even so, right after the main test binary (which writes and deletes thousands of dumps)
//! a 2-vCPU machine can stall a sleep by more than a millisecond. Each check therefore gets
//! up to three attempts, a second apart: a wrong bucket or a diff that false-alarms on
//! every attempt still fails, with every attempt's evidence.

// Shared with the main test binary; each uses part of it.
#[allow(dead_code)]
#[path = "support.rs"]
mod support;

use support::*;

/// Runs `check` until it passes, at most three times.
fn within_three_attempts(mut check: impl FnMut() -> Result<(), String>) {
    let mut failures = Vec::new();
    for attempt in 1..=3 {
        match check() {
            Ok(()) => return,
            Err(why) => failures.push(format!("attempt {attempt}: {why}")),
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    panic!("{}", failures.join("\n"));
}

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

    // Three repeated runs of the unchanged configuration, then the same three as a set of
    // runs: no false alarm.
    let mut attempt = 0;
    within_three_attempts(|| {
        attempt += 1;
        for i in 0..3 {
            let again = dir.path().join(format!("again{attempt}-{i}"));
            step_run(&again, 1000);
            let out = gpuspy_cmd(&["diff", s(&base), s(&again)]);
            if out.status.code() != Some(0) {
                return Err(String::from_utf8_lossy(&out.stdout).into_owned());
            }
        }
        let set = dir.path().join(format!("set{attempt}"));
        step_runs(&set, 3, 1000);
        let out = gpuspy_cmd(&["diff", "--json", s(&base), s(&set)]);
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (r["base_runs"].as_u64(), r["new_runs"].as_u64()),
            (Some(3), Some(3))
        );
        match (out.status.code(), r["regressions"].as_u64()) {
            (Some(0), Some(0)) => Ok(()),
            _ => Err(String::from_utf8_lossy(&out.stdout).into_owned()),
        }
    });
}

#[test]
fn a_2ms_delay_lands_in_the_2ms_bucket() {
    within_three_attempts(|| {
        let r = run(
            "linked",
            &["10", "5"],
            &[("FAKECUDA_DELAY_NS", "cuStreamSynchronize=2000000")],
        )
        .report();
        let s = api(&r, "cuStreamSynchronize");
        assert_eq!(s["count"], 5);
        assert!(s["total_ns"].as_u64().unwrap() >= 5 * 2_000_000);
        for q in ["p50_ns", "p99_ns"] {
            let v = s[q].as_u64().unwrap();
            // Sleep overshoot stays well under a millisecond; a bucket is 1/16 wide.
            if !(1_900_000..3_000_000).contains(&v) {
                return Err(format!("{q} = {v}"));
            }
        }
        Ok(())
    });
}
