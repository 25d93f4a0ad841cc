use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn gpu_section(run: &Run) -> Value {
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let dump: Value = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    dump["gpu"].clone()
}

#[test]
fn without_nvml_and_cupti_the_dump_says_why() {
    // The fake driver's machine has neither libnvidia-ml.so.1 nor a libcupti.
    let run = run("linked", &[], &[]);
    let g = gpu_section(&run);
    assert_eq!(g["nvml"]["active"], false);
    assert_eq!(g["nvml"]["note"], "libnvidia-ml.so.1 not found");
    assert_eq!(g["cupti"]["active"], false);
    assert!(
        g["cupti"]["note"]
            .as_str()
            .unwrap()
            .starts_with("no libcupti loaded"),
        "{g}"
    );
    assert_eq!(g["unified_memory"], Value::Null);
    // Everything host-side is recorded as before.
    assert_eq!(count(&run.report(), "cuLaunchKernel"), 1000);
}

#[test]
fn each_source_can_be_switched_off() {
    let run = run(
        "linked",
        &[],
        &[("GPUSPY_CUPTI", "0"), ("GPUSPY_NVML_MS", "0")],
    );
    let g = gpu_section(&run);
    assert_eq!(g["nvml"]["note"], "off (GPUSPY_NVML_MS=0)");
    assert_eq!(g["cupti"]["note"], "off (GPUSPY_CUPTI=0)");
}

#[test]
fn a_cupti_path_that_does_not_load_is_named() {
    let run = run(
        "linked",
        &[],
        &[("GPUSPY_CUPTI_PATH", "/nonexistent/libcupti.so.13")],
    );
    assert_eq!(
        gpu_section(&run)["cupti"]["note"],
        "GPUSPY_CUPTI_PATH=/nonexistent/libcupti.so.13 could not be loaded"
    );
}

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn unified_memory_recorded_on_the_h200_is_the_verdict() {
    // bench/gpu/truth.sh step 4: CuPy, host and GPU touching 256 MiB of managed memory.
    let dump = data("h200-cupy-managed.json");
    let r = report_json(&[&dump]);
    assert_eq!(r["verdict"], "um-fault-heavy");
    let g = &r["gpu"][0];
    assert_eq!(g["unified_memory"]["cpu_page_faults"], 16100);
    assert_eq!(g["unified_memory"]["gpu_page_fault_groups"], 1757);
    let device = &g["devices"][0];
    assert_eq!(device["facts"]["name"], "NVIDIA H200");
    assert_eq!(device["facts"]["pcie"]["gen_max"], 5);
    assert_eq!(device["activity"]["kernels"], 20);
    let busy = device["activity"]["busy_share"].as_f64().unwrap();
    assert!((busy - 0.4596).abs() < 1e-3, "{busy}");
    let text = Command::new(gpuspy())
        .arg("report")
        .arg(&dump)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("GPU 0  ·  NVIDIA H200  ·  driver 580.159.04  ·  CUDA 13.0  ·  PCIe gen5 x16 (max gen5 x16)"), "{text}");
    assert!(
        text.contains("unified memory: 16100 CPU page faults, 1757 GPU fault groups"),
        "{text}"
    );
}

#[test]
fn a_dump_that_stepped_aside_for_torch_profiler_says_so() {
    // bench/gpu/truth.sh step 3(d): torch.profiler over the second half of the loop.
    let r = report_json(&[&data("h200-torch-paced-late.json")]);
    let g = &r["gpu"][0];
    assert!(
        g["cupti"]["note"]
            .as_str()
            .unwrap()
            .contains("stepped aside"),
        "{g}"
    );
    assert_eq!(g["devices"][0]["activity"]["kernels"], 802);
    assert_eq!(g["devices"][0]["telemetry"]["samples"], 71);
    // The loop sleeps 1 ms between steps: the GPU waits on the host.
    assert_eq!(r["verdict"], "input-starved");
}
