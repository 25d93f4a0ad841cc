use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const SIMULATED: &str =
    "SIMULATED: these figures come from gpuspy's fake CUDA driver; no GPU measured them";

/// `gpuspy demo -o DIR` with `exe`, in an environment that has none of the variables it sets.
pub fn demo(exe: &Path, out: &Path) -> Output {
    Command::new(exe)
        .args(["demo", "-o", s(out)])
        .env_remove("LD_PRELOAD")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("FAKECUDA_DELAY_NS")
        .env_remove("FAKECUDA_FAIL")
        .env_remove("GPUSPY_SHIM")
        .output()
        .unwrap()
}

/// The demo from the build tree (the fakes beside target/release/libgpuspy.so): the job's
/// exact calls, NVML and CUPTI on so that no rule lacks data, and SIMULATED in the report it
/// prints and in every view of its dumps made later. A recorded GPU dump says none of it.
#[test]
fn the_demo_has_data_for_every_rule_and_every_view_says_simulated() {
    artifacts();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dumps");
    let run = demo(&gpuspy(), &out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "simulated training: 1000 steps");
    assert!(
        lines[1].starts_with("gpuspy report: 1 process, 1 thread, "),
        "{stdout}"
    );
    assert_eq!(lines[2], SIMULATED);
    assert!(!stdout.contains("needs "), "{stdout}");
    assert_eq!(report_text(&out).lines().nth(1), Some(SIMULATED));

    let dumps = dumps_in(&out);
    assert_eq!(dumps.len(), 1);
    let dump: Value = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    assert_eq!(dump["simulated"], true);

    let r = report_json(&[&out]);
    assert_eq!(r["simulated"], true);
    assert_eq!(count(&r, "cuMemcpyHtoDAsync"), 1000);
    assert_eq!(count(&r, "cuLaunchKernel"), 40_000);
    assert_eq!(count(&r, "cuMemcpyDtoHAsync"), 1000);
    assert_eq!(count(&r, "cuStreamSynchronize"), 1000);
    for layer in r["layers"].as_array().unwrap() {
        assert_eq!(layer["no_data"], serde_json::json!([]), "{layer}");
        assert_ne!(layer["status"], "no-data", "{layer}");
    }
    let gpu = &r["gpu"][0];
    assert_eq!(
        (&gpu["nvml"]["active"], &gpu["cupti"]["active"]),
        (&Value::Bool(true), &Value::Bool(true)),
        "{gpu}"
    );

    let (html, trace) = (dir.path().join("demo.html"), dir.path().join("trace.json"));
    let views = gpuspy_cmd(&[
        "report",
        "--html",
        s(&html),
        "--perfetto",
        s(&trace),
        s(&out),
    ]);
    assert!(views.status.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<title>gpuspy report: SIMULATED</title>"),
        "{page}"
    );
    assert!(page.contains(&format!("\"simulated\":\"{SIMULATED}\"")));
    let trace: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert_eq!(trace["otherData"]["simulated"], true);
    let job = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["pid"] == 0 && e["name"] == "process_name")
        .unwrap();
    assert_eq!(job["args"]["name"], "SIMULATED job (1 processes)");

    // Measured on a GPU: no view says SIMULATED.
    let recorded = data("h200-triton-deep-queue.json");
    assert!(!report_text(&recorded).contains("SIMULATED"));
    assert_eq!(report_json(&[&recorded]).get("simulated"), None);
    let views = gpuspy_cmd(&[
        "report",
        "--html",
        s(&html),
        "--perfetto",
        s(&dir.path().join("trace.json")),
        s(&recorded),
    ]);
    assert!(views.status.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<title>gpuspy report</title>") && !page.contains("SIMULATED"));
    let trace: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("trace.json")).unwrap()).unwrap();
    assert_eq!(trace["otherData"].get("simulated"), None);
}

/// `diff` and `check` of a simulated run put the SIMULATED line first among their notes
/// (text, JSON and the CI outputs read the same notes); a recorded dump gets none of it.
#[test]
fn diff_and_check_of_a_simulated_run_say_so_first() {
    artifacts();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dumps");
    assert!(demo(&gpuspy(), &out).status.success());
    let recorded = data("h200-triton-deep-queue.json");
    let note = format!("note: {SIMULATED}");

    let diff = gpuspy_cmd(&["diff", s(&recorded), s(&out)]);
    let text = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(text.lines().nth(1), Some(note.as_str()), "{text}");
    let json: Value =
        serde_json::from_slice(&gpuspy_cmd(&["diff", "--json", s(&recorded), s(&out)]).stdout)
            .unwrap();
    assert_eq!(json["simulated"], true);
    assert_eq!(json["notes"][0], SIMULATED);
    assert_eq!(json["incomplete"], false);

    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuLaunchKernel]\nmax_per_run = 40000\n").unwrap();
    let check = gpuspy_cmd(&["check", s(&out), "--budget", s(&budget)]);
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{text}");
    assert!(text.lines().any(|l| l == note), "{text}");
    let json: Value = serde_json::from_slice(
        &gpuspy_cmd(&["check", s(&out), "--budget", s(&budget), "--json"]).stdout,
    )
    .unwrap();
    assert_eq!(
        (&json["simulated"], &json["incomplete"]),
        (&Value::Bool(true), &Value::Bool(false))
    );
    assert_eq!(json["notes"], serde_json::json!([SIMULATED]));

    let recorded_check = gpuspy_cmd(&["check", s(&recorded), "--budget", s(&budget), "--json"]);
    let json: Value = serde_json::from_slice(&recorded_check.stdout).unwrap();
    assert_eq!(json.get("simulated"), None);
    assert_eq!(json["notes"], serde_json::json!([]));
}
