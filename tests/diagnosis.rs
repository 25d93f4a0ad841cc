use crate::support::*;
use serde_json::Value;

fn findings(r: &Value) -> Vec<(String, String)> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_string(),
                f["layer"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_run_blocked_in_syncs_gets_sync_stalled_first() {
    // 200 steps, each launching 40 kernels at 20 us of host time, then waiting 4 ms. The
    // fake driver's delays are minimums (a loaded machine stretches spins and sleeps), so
    // each step takes 4.8 ms or more: under 10,000 launches a second, so never
    // launch-bound, on any machine. The host works 0.8 ms and waits 4 ms a step:
    // sync-stalled's impact, min(work, wait) / step, is 0.17 here and stays between the
    // warning level (0.05) and 0.5 unless sleeps overshoot by 10 ms a step.
    let r = run(
        "simulated_step",
        &["200"],
        &[(
            "FAKECUDA_DELAY_NS",
            "cuStreamSynchronize=4000000,cuLaunchKernel=20000",
        )],
    )
    .report();
    let f = findings(&r);
    assert_eq!(f[0], ("sync-stalled".into(), "framework".into()), "{f:?}");
    assert_eq!(r["verdict"], "sync-stalled");
    let stalled = &r["findings"][0];
    assert_eq!(stalled["severity"], "warning");
    let evidence = &stalled["evidence"];
    assert_eq!(evidence["sync_calls"], 200);
    // At most the smaller of working and waiting is saved, from this run's own figures.
    let blocked = evidence["blocked_ms"].as_f64().unwrap();
    let steady = evidence["steady_ms"].as_f64().unwrap();
    assert!(blocked >= 200.0 * 4.0, "{evidence}");
    let bound = blocked.min(steady - blocked) / steady;
    let impact = stalled["impact"].as_f64().unwrap();
    assert!(
        (impact - bound).abs() < 0.002,
        "{impact} vs {bound}: {evidence}"
    );
    assert!((0.05..=0.5).contains(&impact), "{impact}");
    let framework = r["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layer"] == "framework")
        .unwrap();
    assert_eq!(framework["status"], "warning");
}

#[test]
fn blocking_pageable_copies_get_pageable_memcpy() {
    // Each step's 4 MiB batch comes from pageable memory and takes 1 ms (at least: so
    // under 4.2 GB/s, never h2d-bound); nothing else waits.
    let r = run(
        "simulated_step",
        &["200"],
        &[("FAKECUDA_DELAY_NS", "cuMemcpyHtoDAsync_v2=1000000")],
    )
    .report();
    let f = findings(&r);
    assert_eq!(f[0], ("pageable-memcpy".into(), "memory".into()), "{f:?}");
    assert_eq!(r["findings"][0]["evidence"]["htod_pageable_copies"], 200);
    assert!(!f.iter().any(|(id, _)| id == "sync-stalled"), "{f:?}");
}

#[test]
fn a_quiet_run_gets_neither() {
    // The host is busy launching (40 x 20 us a step) and never waits: at least 160 ms of
    // host work, so that no preemption landing in one of its (instant) syncs or copies can
    // make them 5 % of the run.
    let r = run(
        "simulated_step",
        &["200"],
        &[("FAKECUDA_DELAY_NS", "cuLaunchKernel=20000")],
    )
    .report();
    let f = findings(&r);
    assert!(
        !f.iter()
            .any(|(id, _)| id == "sync-stalled" || id == "pageable-memcpy"),
        "{f:?}"
    );
}

#[test]
fn explain_prints_a_rule_and_rejects_unknown_ids() {
    use std::process::Command;
    let out = Command::new(gpuspy())
        .args(["explain", "pageable-memcpy"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("pageable-memcpy (layer: memory)"),
        "{text}"
    );
    assert!(text.contains("pin_memory=True"), "{text}");
    let bad = Command::new(gpuspy())
        .args(["explain", "no-such-rule"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no rule named no-such-rule"));
}
