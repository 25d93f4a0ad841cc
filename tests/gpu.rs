use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// Every CUPTI record (the `cupti` program emits its records at once and checks exact
/// reductions); the sampled default has tests of its own.
const FULL: &[(&str, &str)] = &[("GPUSPY_CUPTI", "full")];

/// The run's one dump.
fn dump_of(run: &Run) -> Value {
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap()
}

fn gpu_section(run: &Run) -> Value {
    dump_of(run)["gpu"].clone()
}

/// The dump's CUPTI note: how CUPTI was used, switched and attached.
fn cupti_note(run: &Run) -> String {
    gpu_section(run)["cupti"]["note"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The report's finding `id`, if it has one.
fn finding(report: &Value, id: &str) -> Option<Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .cloned()
}

/// A timeline series.
fn series(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect()
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

/// The `cupti` program in `mode` (a CUPTI client of its own) under full capture: it
/// printed each of `lines`, and got every record emitted after it registered, with no
/// CUPTI call of gpuspy's in between.
fn program_client(mode: &str, lines: &[&str]) -> Run {
    let run = run("cupti", &[mode], FULL);
    let out = run.stdout();
    for line in lines {
        assert!(out.contains(line), "{line:?} not in {out}");
    }
    assert!(out.contains("program records 10 stray calls 0"), "{out}");
    run
}

#[test]
fn stepping_aside_leaves_on_the_kinds_the_program_enabled() {
    // Finalizing CUPTI would have switched the program's kind off.
    program_client(
        "profiler-early",
        &[
            "after registering: kernels 1 copies 0",
            "registering found CUPTI finalized: 0",
        ],
    );
}

#[test]
fn a_program_subscribing_to_cupti_finds_it_unused() {
    // Kineto subscribes to CUPTI's callbacks, then registers its activity callbacks:
    // gpuspy finalizes CUPTI before the subscription, which a finalize after would end.
    let run = program_client(
        "subscriber",
        &[
            "subscribing found CUPTI finalized: 1",
            "registering found CUPTI finalized: 0",
        ],
    );
    let g = gpu_section(&run);
    assert_stepped_aside(&g);
    // Read before the finalize: what gpuspy had stays in its dump.
    assert_eq!(g["devices"][0]["activity"]["kernels"], 1003);
}

#[test]
fn a_process_without_a_context_has_no_gpu_section() {
    // torchrun's agent initialises the driver and creates no context: its dump holds its
    // calls and no GPU section (it never opens NVML), so it does not show in the GPU view.
    let run = run("launcher", &[], &[]);
    assert_eq!(gpu_section(&run), Value::Null);
    assert_eq!(count(&run.report(), "cuInit"), 1);
}

#[test]
fn activity_from_a_context_the_hooks_missed_still_reaches_the_dump() {
    let run = run("cupti", &["no-context"], FULL);
    let g = gpu_section(&run);
    assert_eq!(g["devices"][0]["activity"]["kernels"], 1003, "{g}");
    assert_eq!(g["devices"][0]["facts"], Value::Null);
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

/// The environment of a program run to test where gpuspy looks for CUPTI: only the
/// variables given, none of the test machine's.
fn search_env<'a>(set: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<_> = ["VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH"]
        .into_iter()
        .filter(|v| !set.iter().any(|(k, _)| k == v))
        .map(|v| (v, ""))
        .collect();
    env.extend_from_slice(set);
    env.extend_from_slice(FULL);
    env
}

/// `linked` (which loads no CUPTI, as CuPy does not) with the fake libcupti.so.13 at
/// `wheel_dir` below the environment `prefix` named by `var`: CUPTI is on, from there.
fn cupti_found_in_an_environment(var: &str, wheel_dir: &str) {
    let prefix = tempfile::tempdir().unwrap();
    let dir = prefix.path().join(wheel_dir);
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libcupti.so.13");
    std::fs::copy(artifacts().cupti_dir.join("libcupti.so.13"), &lib).unwrap();
    let run = run(
        "linked",
        &[],
        &search_env(&[(var, prefix.path().to_str().unwrap())]),
    );
    let g = gpu_section(&run);
    assert_eq!(g["cupti"]["active"], true, "{g}");
    let note = format!("{}, CUPTI 130001", lib.display());
    assert_eq!(g["cupti"]["note"], note.as_str());
    let text = report_text(run.out_dir.path());
    assert!(text.contains(&format!("CUPTI: on, {note}")), "{text}");
}

#[test]
fn cupti_from_a_virtualenvs_cuda_wheel_is_found() {
    cupti_found_in_an_environment(
        "VIRTUAL_ENV",
        "lib/python3.12/site-packages/nvidia/cuda_cupti/lib",
    );
}

#[test]
fn cupti_from_a_conda_environments_cuda_13_wheels_is_found() {
    // CUDA 13's wheels share one folder, nvidia/cu13/lib.
    cupti_found_in_an_environment(
        "CONDA_PREFIX",
        "lib/python3.11/site-packages/nvidia/cu13/lib",
    );
}

#[test]
fn without_cupti_anywhere_the_note_names_the_places_searched() {
    let env = tempfile::tempdir().unwrap();
    let toolkit = tempfile::tempdir().unwrap();
    let (env, toolkit) = (
        env.path().to_str().unwrap(),
        toolkit.path().to_str().unwrap(),
    );
    let run = run(
        "linked",
        &[],
        &search_env(&[("VIRTUAL_ENV", env), ("CUDA_HOME", toolkit)]),
    );
    let g = gpu_section(&run);
    assert_eq!(g["cupti"]["active"], false);
    assert_eq!(
        g["cupti"]["note"],
        format!(
            "no libcupti loaded, nor found in: the environment {env}, the toolkit {toolkit}, \
             /usr/local/cuda*, the loader's search path (set GPUSPY_CUPTI_PATH)"
        )
        .as_str()
    );
}

fn assert_stepped_aside(gpu: &Value) {
    let note = gpu["cupti"]["note"].as_str().unwrap();
    assert!(note.contains("stepped aside"), "{note}");
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
    let text = report_text(&dump);
    assert!(text.contains("GPU 0  ·  NVIDIA H200  ·  driver 580.159.04  ·  CUDA 13.0  ·  PCIe gen5 x16 (max gen5 x16)"), "{text}");
    assert!(
        text.contains("unified memory: 16100 CPU page faults, 1757 GPU fault groups"),
        "{text}"
    );
}

#[test]
fn the_h200_managed_loop_and_its_prefetched_fix_read_from_the_counters_windows() {
    // bench/results/gpu-2026-12-01-run13-phases-7, long form: examples/staged.py's
    // managed loop (256 MiB faulted over to the GPU and back, 40 steps), then the same
    // loop prefetching both ways. With a shim that recorded no counters' windows both read
    // `um-fault-heavy`, from the host's set-up faults; the fix saved 46 % of the loop.
    let r = report_json(&[&data("h200-um-fault-heavy-windows.json")]);
    assert_eq!(r["verdict"], "um-fault-heavy");
    let f = finding(&r, "um-fault-heavy").unwrap();
    assert_eq!(f["impact"].as_f64(), Some(0.384));
    // All 256 MiB each way, every step: the sampled bytes were near it.
    let each_way = f["evidence"]["migrated_bytes_each_way"].as_f64().unwrap();
    assert!(
        (each_way / (40.0 * 268_435_456.0) - 1.0).abs() < 0.01,
        "{each_way}"
    );
    assert_eq!(f["evidence"]["counters_on_ns"], 99_596_159);
    // The host's faults on managed memory are not input starvation (1.9 % of the steady
    // state, below any finding, once the windows where the host waited on the migrations
    // are left out).
    assert!(finding(&r, "input-starved").is_none(), "{r}");
    // The prefetched loop moved as much, with no fault: no finding about faults.
    let r = report_json(&[&data("h200-um-prefetched-windows.json")]);
    let um = &r["gpu"][0]["unified_memory"];
    assert_eq!(
        (&um["cpu_page_faults"], &um["gpu_page_fault_groups"]),
        (&0.into(), &0.into())
    );
    assert!(um["bytes_htod"].as_u64().unwrap() > 10 << 30, "{um}");
    assert!(finding(&r, "um-fault-heavy").is_none(), "{r}");
}

#[test]
fn a_gpu_bound_loop_whose_records_came_late_is_judged_by_nvml() {
    // bench/results/gpu-2026-12-01-run15-phases-14, long healthy-matmul: bf16 matmuls
    // queued seconds ahead of the GPU, so CUPTI's buffers came after the shim had settled
    // their time (2,118 records, 1.75 s of 3.97 s of kernels), which read idle. The
    // verdict was "GPU idle 38.9 % of the steady state; cause not identified".
    let r = report_json(&[&data("h200-matmul-late-records.json")]);
    let s = &r["steady_state"];
    assert_eq!(s["gpu_records_late"].as_f64(), Some(0.441));
    assert!(
        s["gpu_ns"].is_null() && s["idle"] == serde_json::json!([]),
        "{s}"
    );
    assert!(r["unexplained_idle"].is_null());
    assert_eq!(r["verdict"], Value::Null);
    assert_eq!(r["gpu_bound"], true);
    assert_eq!(r["gpu_busy_of"], "steady-state-by-nvml");
    let busy = r["gpu_busy_share"].as_f64().unwrap();
    assert!((busy - 0.906).abs() < 0.0005, "{busy}");
    let text = report_text(&data("h200-matmul-late-records.json"));
    assert!(
        text.contains("Verdict: GPU-bound. Kernels ran 90.6 % of the steady state by NVML's utilisation (CUPTI's records incomplete)"),
        "{text}"
    );
    assert!(
        text.contains(
            "GPU side left out: CUPTI's records came late for 44.1 % of a device's kernel time"
        ),
        "{text}"
    );
}

#[test]
fn a_sync_longer_than_a_window_shows_the_work_cupti_did_not_record() {
    // bench/results/gpu-2026-12-01-run16-phases-16, long triton-small-grid: two syncs
    // of 1.82 s, each on 1,000 queued kernels of 4 blocks. The windows hold 582 of the
    // first sync's kernels: the rest had no record by the time the recording period closed,
    // with 1,000 more queued. The last 0.77 s of that sync read idle: GPU idle 40.2 % of the
    // steady state, and small-grid 58 % against the 98 % that a full grid saved. The host
    // table files each sync in the window it ended in; the sampled syncs say where the
    // host waited.
    let r = report_json(&[&data("h200-triton-deep-queue.json")]);
    let s = &r["steady_state"];
    assert_eq!(s["gpu_idle_share"].as_f64(), Some(0.001), "{s}");
    assert_eq!(s["gpu_ns"].as_u64(), Some(1_071_981_528), "{s}");
    let grid = finding(&r, "small-grid").expect("small-grid");
    let impact = grid["impact"].as_f64().unwrap();
    assert!((impact - 0.966).abs() < 0.0005, "{impact}");
    assert_eq!(r["verdict"], "small-grid");
    // Its windows hold the kernels that ran: GPM's SM activity is no reason to doubt them.
    assert!(s["gpu_records_missing"].is_null(), "{s}");
}

#[test]
fn a_loop_whose_queued_kernels_lost_their_records_is_judged_by_nvml() {
    // bench/results/gpu-2026-12-01-run16-phases-17, long healthy-pauses: bf16 matmuls
    // queued far ahead, recorded in 95 short periods that kept 1,553 kernels. The records
    // kept a kernel running 14.1 % of the steady state while GPM saw the SMs active 77.3 %
    // of it (windows of copies alone are pauses, not steady); none came late. The verdict was "GPU idle 79.0 % of the steady state; cause
    // not identified".
    let r = report_json(&[&data("h200-pauses-records-missing.json")]);
    let s = &r["steady_state"];
    assert_eq!(s["gpu_records_late"], Value::Null);
    assert_eq!(
        s["gpu_records_missing"],
        serde_json::json!({"busy_share": 0.141, "sm_active_share": 0.773, "kernels_per_launch": 0.062})
    );
    assert!(r["unexplained_idle"].is_null(), "{r}");
    assert_eq!(r["verdict"], Value::Null);
    assert_eq!(r["gpu_busy_of"], "steady-state-by-nvml");
    let busy = r["gpu_busy_share"].as_f64().unwrap();
    assert!((busy - 0.752).abs() < 0.0005, "{busy}");
    let text = report_text(&data("h200-pauses-records-missing.json"));
    assert!(
        text.contains("Verdict: no blocking problem found. Kernels ran 75.2 % of the steady state by NVML's utilisation (CUPTI's records incomplete)."),
        "{text}"
    );
    assert!(
        text.contains("CUPTI's records kept a kernel running 14.1 % of it, while GPM saw the SMs active 77.3 % of it"),
        "{text}"
    );
}

#[test]
fn a_loop_whose_records_stopped_coming_is_judged_by_nvml_and_keeps_its_finding() {
    // bench/results/gpu-2026-12-01-run17-phases-18, long sync-stalled: CUPTI, attached
    // and switched on and off 52 times, sent a few records per period after its first:
    // 2,098 kernels (extrapolated) for 60,002 launches. The steady state read 64 % idle, half
    // of it "host work", at 72 % SM activity: GPM 0.37 above CUPTI, under its own bar.
    let r = report_json(&[&data("h200-sync-records-missing.json")]);
    assert_eq!(
        r["steady_state"]["gpu_records_missing"],
        serde_json::json!({"busy_share": 0.352, "sm_active_share": null, "kernels_per_launch": 0.035})
    );
    // The rules judge the causes' shares, which held: the finding stays.
    assert_eq!(r["verdict"], "sync-stalled");
    assert_eq!(r["gpu_busy_of"], "steady-state-by-nvml");
    let text = report_text(&data("h200-sync-records-missing.json"));
    assert!(
        text.contains("CUPTI's records kept a kernel running 35.2 % of it, while kernel records came for 3.5 % of a process's launches: records of kernels that ran are missing"),
        "{text}"
    );
}

#[test]
fn a_dump_with_gpm_slots_written_as_null_loads() {
    // bench/results/gpu-2026-11-30-run7-phases-2, long um-fixed: NVML answered NaN for
    // DRAM bandwidth in one slot, and that build wrote it as null, and the gauge's mean too;
    // `report` called the whole dump malformed.
    let r = report_json(&[&data("h200-gpm-nan.json")]);
    let telemetry = &r["gpu"][0]["devices"][0]["telemetry"];
    let series = &telemetry["series"]["dram_bw_util_pct"];
    let slots = series.as_array().unwrap();
    // 4 slots without a reading, and the null one.
    assert_eq!(slots.len(), 24);
    assert_eq!(
        slots.iter().filter(|v| v.as_f64() == Some(-1.0)).count(),
        5,
        "{series}"
    );
    // The gauge without a mean is dropped; the others stay.
    assert!(
        telemetry["gpm"]["dram_bw_util_pct"].is_null(),
        "{telemetry}"
    );
    assert_eq!(
        telemetry["gpm"]["sm_active_pct"]["samples"], 22,
        "{telemetry}"
    );
}

#[test]
fn a_dump_that_stepped_aside_for_torch_profiler_says_so() {
    // bench/gpu/truth.sh step 3(d): torch.profiler over the second half of the loop.
    let r = report_json(&[&data("h200-torch-paced-late.json")]);
    let g = &r["gpu"][0];
    assert_stepped_aside(g);
    assert_eq!(g["devices"][0]["activity"]["kernels"], 802);
    assert_eq!(g["devices"][0]["telemetry"]["samples"], 71);
    // The loop sleeps 1 ms between steps: the GPU waits on the host.
    assert_eq!(r["verdict"], "input-starved");
}

#[test]
fn cupti_records_reduce_exactly() {
    let run = run("cupti", &[], FULL);
    let g = gpu_section(&run);
    assert_eq!(g["cupti"]["active"], true, "{g}");
    assert_eq!(g["cupti"]["note"], "libcupti.so.13, CUPTI 130001");
    // cuInit was held until CUPTI was on, and not for the 1 s cap.
    let wait = g["start_wait_ns"].as_u64().unwrap();
    assert!(wait > 0 && wait < 500_000_000, "{wait}");
    let a = &g["devices"][0]["activity"];
    assert_eq!(a["kernels"], 1003);
    // [0,20) and [30,40) ms, plus 1000 kernels of 1 us.
    assert_eq!(a["busy_ns"], 30_000_000 + 1_000_000);
    assert_eq!(a["kernel_ns"], 35_000_000 + 1_000_000);
    assert_eq!(a["late_records"], 0);
    // Gaps: 20-30 ms, 40-50 ms, then 999 of 1 us between the small kernels.
    assert_eq!(
        a["gap_hist"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b[1].as_u64().unwrap())
            .sum::<u64>(),
        1001
    );
    let top: Vec<(&str, u64)> = a["top_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["name"].as_str().unwrap(), k["calls"].as_u64().unwrap()))
        .collect();
    // The dump keeps CUDA's (mangled) names and the grid sizes: 3 grids of 4 blocks,
    // 1000 of 1024 (bucket 112, [1024, 1088)).
    assert_eq!(top, [("_Z6vecAddPfS_S_i", 3), ("gemm_kernel", 1000)]);
    assert_eq!(
        a["grid_blocks"],
        serde_json::json!([
            {"bucket": 4, "kernels": 3, "ns": 35_000_000},
            {"bucket": 112, "kernels": 1000, "ns": 1_000_000}
        ])
    );
    assert_eq!(a.get("small_grid_kernels"), None);
    assert_eq!(a["copies"][0]["bytes"], 64u64 << 20);
    assert_eq!(a["copies"][0]["memory"], "pageable");
    let um = &g["unified_memory"];
    assert_eq!(
        (
            um["cpu_page_faults"].as_u64(),
            um["gpu_page_fault_groups"].as_u64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(um["bytes_htod"], 1 << 20);
    // CUPTI's boot-based clock was shifted to Unix time: the activity lies in the run.
    let dump: Value = serde_json::from_slice(&std::fs::read(&run.dumps()[0]).unwrap()).unwrap();
    let first = a["first_unix_ns"].as_u64().unwrap();
    let (start, stop) = (
        dump["start_unix_ns"].as_u64().unwrap(),
        dump["stop_unix_ns"].as_u64().unwrap(),
    );
    assert!(
        start <= first && first <= stop,
        "{start} <= {first} <= {stop}"
    );
    // The report reads the same numbers.
    let r = run.report();
    let busy = r["gpu"][0]["devices"][0]["activity"]["busy_share"]
        .as_f64()
        .unwrap();
    let span = a["last_unix_ns"].as_u64().unwrap() - first;
    // The report demangles, and judges the 4-block grids small on 132 SMs.
    let ra = &r["gpu"][0]["devices"][0]["activity"];
    assert_eq!(
        ra["top_kernels"][0]["name"],
        "vecAdd(float*, float*, float*, int)"
    );
    assert_eq!(
        (
            ra["small_grid_kernels"].as_u64(),
            ra["small_grid_ns"].as_u64()
        ),
        (Some(3), Some(35_000_000))
    );
    assert!((busy - 31e6 / span as f64).abs() < 1e-12, "{busy}");
}

#[test]
fn gpuspy_steps_aside_when_the_program_registers_its_own_cupti_client() {
    // gpuspy's kinds were off when the program's client came, and CUPTI finalized: the
    // program found it as if unused.
    let run = program_client(
        "profiler",
        &[
            "after registering: kernels 0 copies 0",
            "registering found CUPTI finalized: 1",
        ],
    );
    let g = gpu_section(&run);
    assert_stepped_aside(&g);
    // What gpuspy had before stays in its dump, and nothing after.
    assert_eq!(g["devices"][0]["activity"]["kernels"], 1003);
}

#[test]
fn nvml_telemetry_and_facts_reach_the_dump_and_the_rules() {
    let lib_path = with_fake_nvml();
    let run = run(
        "cupti",
        &[],
        &[
            ("GPUSPY_CUPTI", "full"),
            ("LD_LIBRARY_PATH", lib_path.as_str()),
            ("GPUSPY_NVML_MS", "50"),
            ("FAKENVML_SM_CLOCK", "1485"),
            ("FAKENVML_REASONS", "0x4"),
            ("FAKENVML_OTHER_PIDS", "4242"),
            ("FAKENVML_POWER_LIMIT", "500000"),
        ],
    );
    let g = gpu_section(&run);
    assert_eq!(g["nvml"]["note"], "libnvidia-ml.so.1");
    let device = &g["devices"][0];
    let facts = &device["facts"];
    assert_eq!(facts["name"], "Fake H200");
    assert_eq!(facts["pci_bus_id"], "0000:19:00.0");
    // From the (fake) driver, not from NVML.
    assert_eq!(
        (
            facts["sm_count"].as_u64(),
            facts["cuda_driver_version"].as_u64()
        ),
        (Some(132), Some(13000))
    );
    assert_eq!(
        facts["pcie"],
        serde_json::json!({"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16})
    );
    assert_eq!(
        (
            facts["ecc_enabled"].as_bool(),
            facts["power_limit_mw"].as_u64(),
            facts["default_power_limit_mw"].as_u64()
        ),
        (Some(true), Some(500_000), Some(700_000))
    );
    assert_eq!(
        facts["other_processes"],
        serde_json::json!([{"pid": 4242, "used_bytes": 1073741824}])
    );
    assert_eq!(
        facts["nvlink"],
        serde_json::json!({"active_links": 18, "link_mbytes_per_s": 26562})
    );
    let t = &device["telemetry"];
    let samples = t["samples"].as_u64().unwrap();
    assert!(samples >= 2, "{t}");
    assert_eq!(t["sm_clock_mhz"]["mean"], 1485.0);
    assert_eq!(t["mem_temp_c"]["max"], 45.0);
    assert_eq!(
        t["clock_events"],
        serde_json::json!([{"reason": "sw-power-cap", "samples": samples}])
    );
    // The driver layer and gpu-shared judge from it.
    let r = run.report();
    let finding =
        |id: &str| finding(&r, id).unwrap_or_else(|| panic!("no {id} in {}", r["findings"]));
    assert!(finding("clocks-throttled")["summary"]
        .as_str()
        .unwrap()
        .contains("Its mean SM clock was 75.0 % of its maximum. The power limit is lowered to 500 W, from a default of 700 W."));
    assert_eq!(finding("gpu-shared")["evidence"]["other_processes"], 1);
    let layer = |name: &str| {
        r["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["layer"] == name)
            .cloned()
            .unwrap()
    };
    assert!(
        layer("driver")["no_data"].as_array().unwrap().is_empty(),
        "{}",
        layer("driver")
    );
}

#[test]
fn a_vfork_child_ending_in_exit_underscore_leaves_collection_running() {
    let run = run("cupti", &["vfork"], FULL);
    let g = gpu_section(&run);
    assert_eq!(g["devices"][0]["activity"]["kernels"], 1003 + 7, "{g}");
}

/// The stream program's own counts: (kernels, CPU page faults) it made.
fn made(run: &Run) -> (f64, f64) {
    let out = run.stdout();
    let mut words = out.split_whitespace();
    let mut next = |key| {
        assert_eq!(words.next(), Some(key), "{out}");
        words.next().unwrap().parse::<f64>().unwrap()
    };
    (next("kernels"), next("faults"))
}

#[test]
fn by_default_activity_is_sampled_and_counts_are_extrapolated() {
    // Up to 100,000 kernels a second (fewer on a loaded machine), far over the 3,750 a
    // second that CUPTI's budget allows recording whole: the kinds are on in duty cycles.
    let run = run("cupti_stream", &["1500", "managed"], &[]);
    let g = gpu_section(&run);
    let note = g["cupti"]["note"].as_str().unwrap();
    assert!(note.contains("activity sampled in duty cycles"), "{note}");
    let a = &g["devices"][0]["activity"];
    let factor = a["sampled"]["factor"].as_f64().unwrap();
    assert!(factor > 1.5, "{a}");
    let observed = a["sampled"]["observed_ns"].as_f64().unwrap();
    let covered = a["sampled"]["covered_ns"].as_f64().unwrap();
    assert!((observed * factor - covered).abs() < 1e3, "{a}");
    let (kernels, faults) = made(&run);
    // Every kernel is a launch through the driver: the recorded ones stand for all launches
    // over those made while recording, however irregular a loaded machine makes the stream
    // (scaled by time instead, the count was off by up to 6 % with a load of 10 on two
    // cores, 15 % with the whole suite beside it).
    let got = a["kernels"].as_f64().unwrap();
    assert!((got / kernels - 1.0).abs() < 0.02, "{got} of {kernels}");
    // Back-to-back kernels of 5 µs: busy time is their time, extrapolated alike.
    let busy = a["busy_ns"].as_f64().unwrap();
    assert!((busy / (got * 5e3) - 1.0).abs() < 1e-3, "{busy}");
    // The unified-memory counters came on at the first launch after the managed
    // allocation, for a 20 ms slot in every 1.28 s: faults are seen and scaled back up. Two slots of a busy loop on a loaded
    // machine are a small sample, so only the order of magnitude is checked; the scaling
    // is exact in the unit test.
    let um = g["unified_memory"]["cpu_page_faults"].as_f64().unwrap();
    assert!(um > faults / 3.0 && um < faults * 3.0, "{um} of {faults}");
}

#[test]
fn the_unified_memory_counters_come_on_with_the_first_launch_after_the_allocation() {
    // 300 ms of host set-up faults (the host filling the memory), then the stream. Begun at
    // the allocation, the counters' first slot saw only such set-up faults in every round
    // of the H200's staged managed loops, scaled up to the whole run, heavy or prefetched.
    let run = run("cupti_stream", &["1500", "managed", "setup"], &[]);
    let dump = dump_of(&run);
    let t = &dump["timeline"];
    let first_launch = series(&t["host"]["launches"])
        .iter()
        .position(|&n| n > 0)
        .unwrap();
    let um = &t["unified_memory"];
    let (on, faults) = (series(&um["observed_ns"]), series(&um["cpu_page_faults"]));
    assert!(first_launch > 0, "{t}");
    assert!(on[..first_launch].iter().all(|&n| n == 0), "{um}");
    assert!(faults[..first_launch].iter().all(|&n| n == 0), "{um}");
    assert!(
        on.iter().sum::<u64>() > 0 && faults.iter().sum::<u64>() > 0,
        "{um}"
    );
    // Scaled, the stream's faults alone: one a millisecond, as the program made them (the
    // order of magnitude, as in the test above).
    let scaled = dump["gpu"]["unified_memory"]["cpu_page_faults"]
        .as_f64()
        .unwrap();
    let made = made(&run).1;
    assert!(
        scaled > made / 3.0 && scaled < made * 3.0,
        "{scaled} of {made}"
    );
}

#[test]
fn by_default_the_sampled_mode_never_detaches_cupti() {
    // cuptiFinalize from gpuspy's thread races with the program's other threads' CUDA
    // calls (SIGSEGV in PyTorch backward passes on the H200): the stream that the opt-in
    // mode detaches between slots is sampled attached.
    let run = run("cupti_stream", &["1500"], &[]);
    let note = cupti_note(&run);
    assert!(note.contains("switched the traced kinds off"), "{note}");
    assert!(!note.contains("detached"), "{note}");
}

#[test]
fn the_traced_kinds_are_switched_only_while_no_call_is_in_flight() {
    // Each launch takes 20 µs in the fake driver, so the stream's thread is inside one
    // nearly all the time. CUPTI switched from gpuspy's thread while the program's threads
    // were in the driver crashed a PyTorch backward pass on the H200: the switches wait for
    // the launch in flight to end and hold the next one meanwhile. A held call goes on after
    // 5 ms whatever happens (gpuspy's thread descheduled mid-switch on a loaded machine):
    // only those may overlap a switch, and the note counts them.
    let run = run(
        "cupti_stream",
        &["1500"],
        &[("FAKECUDA_DELAY_NS", "cuLaunchKernel=20000")],
    );
    let note = cupti_note(&run);
    let offs: u64 = note
        .split("switched the traced kinds off ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(offs >= 1, "{note}");
    let outwaited: u64 = note
        .split("went on after the 5 ms limit")
        .next()
        .and_then(|before| before.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    let out = run.stdout();
    let in_calls: u64 = out
        .split("switches_in_calls ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(in_calls <= outwaited, "{out}\n{note}");
    assert!(note.contains("held "), "{note}");
}

#[test]
fn between_slots_the_detaching_mode_detaches_cupti_and_leaves_it_alone() {
    // No managed memory: under GPUSPY_CUPTI=detach, between slots gpuspy detaches CUPTI (an
    // attached CUPTI cost each launch on the H200 once a traced kind had been on) and calls
    // it again only to attach it for the next slot: any other call would attach it, as
    // CUPTI initialises lazily.
    let run = run("cupti_stream", &["1500"], &[("GPUSPY_CUPTI", "detach")]);
    let g = gpu_section(&run);
    let note = g["cupti"]["note"].as_str().unwrap();
    let detaches: u64 = note
        .split("detached between recording slots ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(detaches >= 1, "{note}");
    // Each detach follows a switch of the traced kinds off.
    assert!(
        note.contains(&format!("switched the traced kinds off {detaches} times")),
        "{note}"
    );
    let out = run.stdout();
    assert!(out.trim_end().ends_with("stray_calls 0"), "{out}");
    // Each slot's records were read before its detach (the fake, as CUPTI, drops a buffer
    // that was not flushed): the extrapolated count is the stream's.
    let a = &g["devices"][0]["activity"];
    let got = a["kernels"].as_f64().unwrap();
    let kernels = made(&run).0;
    assert!((got / kernels - 1.0).abs() < 0.02, "{got} of {kernels}");
    // The last slot ended long before the stream did: the span runs to the last launch,
    // so the busy share is the stream's (5 µs kernels over its 1.5 s), not that of the
    // records' span.
    let span = a["last_unix_ns"].as_f64().unwrap() - a["first_unix_ns"].as_f64().unwrap();
    let share = a["busy_ns"].as_f64().unwrap() / span;
    let stream = kernels * 5e3 / 1.5e9;
    assert!(
        (share / stream - 1.0).abs() < 0.05,
        "{share} against {stream}"
    );
}

#[test]
fn a_program_that_uses_cuda_graphs_keeps_cupti_attached() {
    // A graph captured while CUPTI was attached failed to launch after a detach on the
    // H200: the same stream, after a stream capture began, is sampled without detaching,
    // also under GPUSPY_CUPTI=detach.
    let run = run(
        "cupti_stream",
        &["1500", "graph"],
        &[("GPUSPY_CUPTI", "detach")],
    );
    let g = gpu_section(&run);
    let note = g["cupti"]["note"].as_str().unwrap();
    assert!(note.contains("activity sampled in duty cycles"), "{note}");
    assert!(!note.contains("detached"), "{note}");
    let a = &g["devices"][0]["activity"];
    assert!(a["sampled"]["factor"].as_f64().unwrap() > 1.5, "{a}");
}

#[test]
fn a_program_that_uses_nccl_is_recorded_whole() {
    // Two of five DDP jobs on two H200s had a rank segfault while the sampled mode
    // switched the kinds every slot: with a communicator, they stay on.
    let run = run("cupti_stream", &["1500", "nccl"], &[]);
    let g = gpu_section(&run);
    let note = g["cupti"]["note"].as_str().unwrap();
    assert!(
        !note.contains("switched") && !note.contains("detached"),
        "{note}"
    );
    let a = &g["devices"][0]["activity"];
    let (got, kernels) = (a["kernels"].as_f64().unwrap(), made(&run).0);
    assert_eq!(got, kernels, "{a}");
}

#[test]
fn a_slot_is_judged_by_its_launches_when_its_records_come_late() {
    // 100,000 launches a second whose records come 300 ms late: a 20 ms slot has none of
    // its own records at its end, yet its launches cost CUPTI as much.
    let run = run(
        "cupti_stream",
        &["1500", "late"],
        &[("GPUSPY_CUPTI", "detach")],
    );
    let note = cupti_note(&run);
    assert!(note.contains("switched the traced kinds off"), "{note}");
    // Its kernels still queued at each slot's end, CUPTI stays attached: a detach would
    // flush their records back untimed and wait for them.
    assert!(!note.contains("detached"), "{note}");
}

#[test]
fn kernel_records_that_stopped_coming_are_brought_back_by_attaching_cupti_anew() {
    // Under GPUSPY_CUPTI=detach only: attaching anew detaches first.
    // The fake's kernel records stop at the first switch-off, as in about 1 in 10 H200 runs
    // whose CUPTI stayed attached between slots; the stream (5,000 kernels a second, each
    // burst synced) is cheaper to record attached. Its records were awaited all run, so
    // CUPTI was never detached again, until the silent periods' kernels were seen to have
    // run (a sync returned after them).
    let run = run(
        "cupti_stream",
        &["20000", "stuck"],
        &[("FAKECUPTI_KERNELS_STOP", "1"), ("GPUSPY_CUPTI", "detach")],
    );
    let note = cupti_note(&run);
    assert!(
        note.contains("detached 1 times because kernel records had stopped coming"),
        "{note}"
    );
    // The stream is recorded attached: the restart's detach is not one of the cycle's.
    assert!(!note.contains("detached between recording slots"), "{note}");
    let dump = dump_of(&run);
    let t = &dump["timeline"];
    let width = t["window_ns"].as_u64().unwrap();
    let launches = series(&t["host"]["launches"]);
    let busy = series(&t["devices"][0]["busy_ns"]);
    let launching: Vec<usize> = (0..launches.len()).filter(|&i| launches[i] > 0).collect();
    // The state lasted until the records were given up (2.5 s) and their periods swept...
    let silent = launching.iter().filter(|&&i| busy[i] == 0).count() as u64;
    assert!(
        silent * width >= 2_000_000_000,
        "{silent} windows of {width} ns: {t}"
    );
    // ...and the run's last 300 ms, after the restart, have their kernels again.
    let last = *launching.last().unwrap();
    let after: u64 = busy[last.saturating_sub((300_000_000 / width) as usize)..=last]
        .iter()
        .sum();
    assert!(after > 0, "{t}");
}

#[test]
fn kernel_records_missing_without_a_sync_after_them_leave_cupti_attached() {
    // The same stream without its syncs: nothing shows that the silent periods' kernels
    // ran (their records could merely be late, behind a deep queue), so CUPTI is left
    // alone, though the periods are swept silent from about 2.6 s.
    let run = run(
        "cupti_stream",
        &["4000", "stuck", "nosync"],
        &[("FAKECUPTI_KERNELS_STOP", "1"), ("GPUSPY_CUPTI", "detach")],
    );
    let note = cupti_note(&run);
    assert!(note.contains("switched the traced kinds off"), "{note}");
    assert!(!note.contains("detached"), "{note}");
}

#[test]
fn a_program_cheap_to_record_is_recorded_whole_without_a_switch() {
    // 1,000 kernels a second cost ~0.2 % recorded: every slot is within budget, and the
    // next follows with the kinds left on (they were switched off and on at each).
    let run = run("cupti_stream", &["1500", "paced"], &[]);
    let g = gpu_section(&run);
    let note = g["cupti"]["note"].as_str().unwrap();
    assert!(note.contains("activity sampled in duty cycles"), "{note}");
    assert!(!note.contains("switched"), "{note}");
    let a = &g["devices"][0]["activity"];
    assert_eq!(a["kernels"].as_f64().unwrap(), made(&run).0, "{a}");
    assert_eq!(a["sampled"]["factor"].as_f64(), Some(1.0), "{a}");
}

#[test]
fn with_managed_memory_the_traced_kinds_are_on_one_slot_in_eight() {
    // Cheap to record, yet sampled: traced, kernels that fault on managed pages ran 5 %
    // slower on the H200.
    let run = run(
        "cupti_stream",
        &["1500", "paced", "managed"],
        &[("GPUSPY_CUPTI", "detach")],
    );
    let g = gpu_section(&run);
    let note = g["cupti"]["note"].as_str().unwrap();
    assert!(note.contains("switched the traced kinds off"), "{note}");
    assert!(!note.contains("detached"), "{note}");
    // On at the first launch after the managed allocation, off 20 ms later, and so on: how long the
    // longest switch took is told.
    assert!(
        note.contains("switched the unified-memory counters ")
            && note.contains(" times (the longest took "),
        "{note}"
    );
    let a = &g["devices"][0]["activity"];
    let factor = a["sampled"]["factor"].as_f64().unwrap();
    assert!(factor > 4.0, "{a}");
    let (got, kernels) = (a["kernels"].as_f64().unwrap(), made(&run).0);
    assert!((got / kernels - 1.0).abs() < 0.02, "{got} of {kernels}");
    assert!(
        g["unified_memory"]["cpu_page_faults"].as_f64().unwrap() > 0.0,
        "{g}"
    );
}

#[test]
fn sampled_windows_count_as_observed_only_time_that_is_busy_or_idle() {
    // Each enable call returns 300 µs after the kernels are on, so every period's first
    // kernels start before the call returned (the H200's launch-bound loop, where the
    // time between periods was counted observed, neither busy nor idle).
    let run = run("cupti_stream", &["1500"], &[("FAKECUPTI_ENABLE_US", "300")]);
    let dump = dump_of(&run);
    let w = &dump["timeline"]["devices"][0];
    let observed = series(&w["observed_ns"]);
    let busy = series(&w["busy_ns"]);
    let transfer = series(&w["transfer_ns"]);
    let idle: Vec<Vec<u64>> = w["idle_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| series(&s["ns"]))
        .collect();
    for (i, &o) in observed.iter().enumerate() {
        let idle: u64 = idle.iter().map(|s| s[i]).sum();
        assert_eq!(busy[i] + transfer[i] + idle, o, "window {i}: {w}");
    }
    // Observed time is the sampled part: kernels seen over kernels made, within the
    // stream's own irregularity on a loaded machine.
    let a = &dump["gpu"]["devices"][0]["activity"];
    let total: u64 = observed.iter().sum();
    assert_eq!(a["sampled"]["observed_ns"].as_u64().unwrap(), total, "{a}");
    let covered = a["sampled"]["covered_ns"].as_f64().unwrap();
    let seen = a["kernels"].as_f64().unwrap() * total as f64 / covered;
    let share = seen / made(&run).0;
    let time_share = total as f64 / covered;
    assert!(
        (share / time_share - 1.0).abs() < 0.3,
        "{share} of the kernels in {time_share} of the time"
    );
}

/// The first device's long-gap series of a dump's timeline: (cause, ended by) and the sum.
fn long_idle(device: &Value) -> Vec<((String, String), u64)> {
    (device["long_idle_ns"].as_array().unwrap().iter())
        .map(|s| {
            let key = (
                s["cause"].as_str().unwrap(),
                s["ended_by"].as_str().unwrap(),
            );
            let ns = series(&s["ns"]).iter().sum();
            ((key.0.to_string(), key.1.to_string()), ns)
        })
        .collect()
}

/// Per window and cause, the time in long gaps is part of the idle time.
fn assert_long_idle_within_idle(device: &Value) {
    for idle in device["idle_ns"].as_array().unwrap() {
        let mut in_long = vec![0; series(&idle["ns"]).len()];
        for long in device["long_idle_ns"].as_array().unwrap() {
            if long["cause"] == idle["cause"] {
                for (sum, ns) in in_long.iter_mut().zip(series(&long["ns"])) {
                    *sum += ns;
                }
            }
        }
        let within = in_long
            .iter()
            .zip(series(&idle["ns"]))
            .all(|(l, i)| *l <= i);
        assert!(within, "{device}");
    }
}

#[test]
fn a_host_away_before_each_batch_copy_leaves_long_gaps_the_copy_ends() {
    // 20 bursts of kernels, each followed by 5 ms of host sleep and the next batch's copy
    // to the device: each gap, from the burst's end (50 µs after it began) to the copy, is
    // at least 4.95 ms of host work.
    let run = run("cupti_gaps", &["sleep"], FULL);
    let dump = dump_of(&run);
    let device = &dump["timeline"]["devices"][0];
    let long = long_idle(device);
    let key = ("host".to_string(), "copy-to-device".to_string());
    let ended_by_copy = long.iter().find(|(k, _)| *k == key).map(|(_, ns)| *ns);
    let ended_by_copy = ended_by_copy.unwrap_or_else(|| panic!("{device}"));
    let run_ns = dump["stop_unix_ns"].as_u64().unwrap() - dump["start_unix_ns"].as_u64().unwrap();
    assert!(
        ended_by_copy >= 20 * 4_950_000 && ended_by_copy <= run_ns,
        "{ended_by_copy} ns of {run_ns}: {device}"
    );
    assert!(series(&device["long_gaps_ended"]).iter().sum::<u64>() >= 20);
    assert_long_idle_within_idle(device);
}

#[test]
fn per_op_dispatch_leaves_short_gaps_one_per_record() {
    // 11,000 records 20 µs apart: 10,999 gaps of 20 µs between them, and at most the one
    // before the first and the one after the last besides, which alone can be long.
    let run = run("cupti_gaps", &["dense"], FULL);
    let dump = dump_of(&run);
    let device = &dump["timeline"]["devices"][0];
    let short: u64 = series(&device["short_gaps_ended"]).iter().sum();
    let long: u64 = series(&device["long_gaps_ended"]).iter().sum();
    assert!(
        short + long >= 10_999 && short + long <= 11_001 && long <= 2,
        "{short} short, {long} long: {device}"
    );
    let ended: Vec<String> = long_idle(device).into_iter().map(|(k, _)| k.1).collect();
    assert!(
        ended.iter().all(|e| e == "kernel" || e == "not-observed"),
        "{device}"
    );
    // Their mean length is the spacing: 10,999 of 20 µs, and at most 2 under 1 ms.
    let idle: u64 = (device["idle_ns"].as_array().unwrap().iter())
        .map(|s| series(&s["ns"]).iter().sum::<u64>())
        .sum();
    let in_long: u64 = long_idle(device).iter().map(|(_, ns)| ns).sum();
    let mean = (idle - in_long) as f64 / short as f64;
    assert!((19_990.0..20_200.0).contains(&mean), "{mean} ns: {device}");
    assert_long_idle_within_idle(device);
}

#[test]
fn under_full_capture_every_record_counts_once() {
    let run = run("cupti_stream", &["500"], FULL);
    let a = &gpu_section(&run)["devices"][0]["activity"];
    assert_eq!(a["sampled"], Value::Null, "{a}");
    assert_eq!(a["kernels"].as_f64().unwrap(), made(&run).0);
}

#[test]
fn without_managed_memory_the_unified_memory_counters_stay_off() {
    let run = run("cupti_stream", &["300"], &[]);
    assert_eq!(gpu_section(&run)["unified_memory"], Value::Null);
}

#[test]
fn gpm_metrics_reach_the_dump_whole_gpu_or_mig_instance() {
    let lib_path = with_fake_nvml();
    // The fake's fixed values: SM active 40 % of the GPU, 25 % of MIG GPU instance 3.
    for (mig, note, sm_active) in [
        ("0", "nvmlGpmSampleGet", 40.0),
        ("1", "nvmlGpmMigSampleGet, GPU instance 3", 25.0),
    ] {
        let run = run(
            "cupti",
            &[],
            &[
                ("LD_LIBRARY_PATH", lib_path.as_str()),
                // Ticks every 10 ms, GPM pairs every 100 ms or more: a loaded machine that
                // delays a tick still gets a reading in the program's 300 ms.
                ("GPUSPY_NVML_MS", "10"),
                ("FAKENVML_MIG", mig),
            ],
        );
        let t = &gpu_section(&run)["devices"][0]["telemetry"];
        let gpm = &t["gpm"];
        assert_eq!(
            (gpm["active"].as_bool(), gpm["note"].as_str()),
            (Some(true), Some(note)),
            "{t}"
        );
        // The first sample pairs with none: one reading fewer than samples, at most.
        let readings = gpm["sm_active_pct"]["samples"].as_u64().unwrap();
        let samples = t["samples"].as_u64().unwrap();
        assert!(
            readings >= 1 && readings < samples,
            "{readings} of {samples}"
        );
        for (metric, value) in [
            ("sm_active_pct", sm_active),
            ("sm_occupancy_pct", 30.0),
            ("tensor_active_pct", 20.0),
            ("hmma_tensor_pct", 20.0),
            ("dfma_tensor_pct", 0.0),
            ("dram_bw_util_pct", 75.0),
            ("pcie_tx_mib_per_s", 100.0),
            ("nvlink_rx_mib_per_s", 400.0),
        ] {
            let g = &gpm[metric];
            assert_eq!(g["samples"].as_u64(), Some(readings), "{metric}");
            for stat in ["min", "mean", "max", "last"] {
                assert_eq!(g[stat].as_f64(), Some(value), "{metric} {stat}");
            }
        }
        let series = t["series"]["sm_active_pct"].as_array().unwrap();
        assert_eq!(
            series.len(),
            t["series"]["gpu_util_pct"].as_array().unwrap().len()
        );
        // Slots hold the reading or, between readings, -1.
        let values: Vec<f64> = series.iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(values.contains(&sm_active), "{values:?}");
        assert!(
            values.iter().all(|&v| v == sm_active || v == -1.0),
            "{values:?}"
        );
    }
}

#[test]
fn where_gpm_is_not_supported_the_dump_says_so() {
    let lib_path = with_fake_nvml();
    let run = run(
        "cupti",
        &[],
        &[
            ("LD_LIBRARY_PATH", lib_path.as_str()),
            ("GPUSPY_NVML_MS", "100"),
            ("FAKENVML_GPM", "0"),
        ],
    );
    let t = &gpu_section(&run)["devices"][0]["telemetry"];
    assert_eq!(
        t["gpm"],
        serde_json::json!({
            "active": false, "note": "not supported by this GPU",
            "sm_active_pct": null, "sm_occupancy_pct": null, "tensor_active_pct": null,
            "dfma_tensor_pct": null, "hmma_tensor_pct": null, "imma_tensor_pct": null,
            "dram_bw_util_pct": null, "pcie_tx_mib_per_s": null, "pcie_rx_mib_per_s": null,
            "nvlink_tx_mib_per_s": null, "nvlink_rx_mib_per_s": null
        })
    );
    assert_eq!(t["series"]["sm_active_pct"], serde_json::json!([]));
    // Everything else NVML gives is sampled as before.
    assert_eq!(t["sm_clock_mhz"]["mean"], 1980.0);
}

#[test]
fn a_sync_that_finds_the_gpu_drained_still_owns_the_idle_it_opens() {
    // bench/results/gpu-2026-12-03-reallib-4, short item-logging: a launch-bound transformer
    // step whose loss is read with .item() and written as a JSON record every step. The
    // GPU has drained when the host syncs (blocked 0.3 % of the steady state), and stays
    // idle through the formatting after it: 4.6 % of the steady state, the sync's.
    let r = report_json(&[&data("reallib4-item-logging-drained.json")]);
    assert_eq!(r["verdict"], "launch-bound");
    let f = finding(&r, "sync-stalled").expect("a sync-stalled finding");
    assert_eq!(f["severity"], "info");
    assert_eq!(f["evidence"]["blocked_share"], 0.003);
    assert_eq!(f["evidence"]["gpu_after_sync_idle_share"], 0.046);
    assert_eq!(f["impact"], 0.046);
}

#[test]
fn each_sync_also_owns_the_queues_refill_after_it() {
    // bench/results/gpu-2026-12-04-reallib-8, short item-logging: the loss read with
    // .item() and logged every step. GPU idle 16.4 % of the steady state after the syncs and
    // 12.3 % launching into the queue they drained; logging every 50 steps saved 28 %.
    let r = report_json(&[&data("reallib8-item-logging.json")]);
    assert_eq!(r["verdict"], "sync-stalled");
    let f = finding(&r, "sync-stalled").expect("a sync-stalled finding");
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["evidence"]["gpu_after_sync_idle_share"], 0.164);
    assert_eq!(f["evidence"]["refill_share"], 0.123);
    assert_eq!(f["evidence"]["blocked_share"], 0.213);
    assert!(
        (f["impact"].as_f64().unwrap() - 0.287).abs() < 1e-9,
        "{}",
        f["impact"]
    );
}

#[test]
fn a_host_bound_loop_gets_its_time_blocked_in_pageable_copies_back() {
    // bench/results/gpu-2026-12-04-reallib-8, short numpy-pageable: a small CNN fed from a
    // NumPy array, 19 MB a batch. Host blocked 48.3 % of the steady state in the copies,
    // the GPU's time in them 36.7 % once the pinned copies' time is taken off; pinning the
    // dataset saved 52 %.
    let r = report_json(&[&data("reallib8-numpy-pageable.json")]);
    assert_eq!(r["verdict"], "pageable-memcpy");
    let f = finding(&r, "pageable-memcpy").expect("a pageable-memcpy finding");
    assert_eq!(f["evidence"]["pageable_async_copies"], 309);
    assert_eq!(f["evidence"]["gpu_in_copies_share"], 0.367);
    assert_eq!(f["evidence"]["host_blocked_to_device_share"], 0.483);
    assert_eq!(f["impact"], 0.483);
}

#[test]
fn a_busy_training_loop_that_checkpoints_is_not_launch_bound() {
    // bench/results/gpu-2026-12-03-reallib-4, short healthy-checkpoint: a bf16 MLP step of
    // large matmuls at 24,079 launches a second, the GPU idle 7.3 % of the steady state
    // between them in gaps of 3.0 us a launch (p50 1.6 us): the bubbles between kernels
    // already queued, no launch waited on.
    let r = report_json(&[&data("reallib4-healthy-checkpoint.json")]);
    assert_eq!(r["verdict"], Value::Null);
    assert!(finding(&r, "launch-bound").is_none(), "{}", r["findings"]);
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "warning"),
        "{}",
        r["findings"]
    );
}
