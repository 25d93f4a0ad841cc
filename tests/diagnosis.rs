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
    // 200 steps, each launching 40 kernels at 20 us of host time, then waiting 1 ms.
    let r = run(
        "simulated_step",
        &["200"],
        &[(
            "FAKECUDA_DELAY_NS",
            "cuStreamSynchronize=1000000,cuLaunchKernel=20000",
        )],
    )
    .report();
    let f = findings(&r);
    assert_eq!(f[0], ("sync-stalled".into(), "framework".into()), "{f:?}");
    assert_eq!(r["verdict"], "sync-stalled");
    assert_eq!(r["findings"][0]["severity"], "warning");
    // The host works 0.8 ms and waits 1 ms a step: at most 0.8 / 1.8 is saved.
    let impact = r["findings"][0]["impact"].as_f64().unwrap();
    assert!((0.35..0.5).contains(&impact), "{impact}");
    assert_eq!(r["findings"][0]["evidence"]["sync_calls"], 200);
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
    // Each step's 4 MiB batch comes from pageable memory and takes 1 ms.
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
    let r = run("simulated_step", &["200"], &[]).report();
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
