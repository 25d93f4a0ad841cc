use crate::support::*;
use std::process::Command;

fn report_error(path: &std::path::Path) -> (i32, String) {
    let out = Command::new(gpuspy())
        .arg("report")
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap(), stderr)
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[u8], &str)] = &[
        ("empty.json", b"", "empty file"),
        (
            "truncated.json",
            b"{\"schema\": \"gpuspy-dump\", \"sch",
            "truncated JSON",
        ),
        (
            "random.json",
            &[0x93, 0x17, 0xff, 0x00, 0x42, 0x8c],
            "not JSON",
        ),
        ("foreign.json", b"{\"hello\": 1}", "not a gpuspy dump"),
        (
            "future.json",
            b"{\"schema\":\"gpuspy-dump\",\"schema_version\":7}",
            "schema version 7",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let (code, stderr) = report_error(&path);
        assert_eq!(code, 2, "{name}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.starts_with("gpuspy: ") && stderr.contains(expected),
            "{name}: {stderr}"
        );
    }
    let (code, stderr) = report_error(&dir.path().join("missing.json"));
    assert_eq!(code, 2);
    assert!(stderr.contains("No such file"), "{stderr}");
    let empty = tempfile::tempdir().unwrap();
    let (code, stderr) = report_error(empty.path());
    assert_eq!(code, 2);
    assert!(stderr.contains("no gpuspy dumps"), "{stderr}");
}

#[test]
fn run_profiles_the_command_and_keeps_its_exit_code() {
    artifacts();
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(gpuspy())
        .args(["run", "--json", "-o"])
        .arg(out.path())
        .arg("--")
        .arg(program("linked"))
        .args(["25", "2"])
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json_line = stdout.lines().last().unwrap();
    let r: serde_json::Value = serde_json::from_str(json_line).unwrap();
    assert_eq!(count(&r, "cuLaunchKernel"), 25);
    assert_eq!(r["findings"], serde_json::json!([]));

    let failing = Command::new(gpuspy())
        .args(["run", "-o"])
        .arg(out.path())
        .args(["--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(failing.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&failing.stderr).contains("wrote no dump"));

    let missing = Command::new(gpuspy())
        .args(["run", "--", "/no/such/program"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).starts_with("gpuspy: cannot run"));
}

#[test]
fn merged_report_over_a_directory_sums_processes() {
    let a = run("linked", &["100", "1"], &[]);
    let b = run("linked", &["50", "1"], &[]);
    let r = report_json(&[a.out_dir.path(), b.out_dir.path()]);
    assert_eq!(count(&r, "cuLaunchKernel"), 150);
    assert_eq!(r["processes"].as_array().unwrap().len(), 2);
}

/// A dump recorded on an H200 (bench/results/gpu-2026-11-29-run2): 200 pageable
/// `h.to('cuda')` copies of 4 MiB in PyTorch 2.11.
#[test]
fn report_on_a_dump_recorded_on_the_h200() {
    let dump = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/h200-torch-pageable.json");
    let r = report_json(&[&dump]);
    assert_eq!(count(&r, "cuMemcpyHtoDAsync"), 200);
    assert_eq!(
        symbols(&r, "cuMemcpyHtoDAsync"),
        vec![("cuMemcpyHtoDAsync_v2".to_string(), 200)]
    );
    assert_eq!(copies(&r, "HtoD", "pageable"), (200, 200 * 4 * 1024 * 1024));
    assert_eq!(sync(&r, "pageable-async-copy"), Some(200));
    assert_eq!(count(&r, "cuGetProcAddress"), 440);
    assert_eq!(r["processes"][0]["complete"], true);
    let text = report_text(&dump);
    assert!(text.contains("pageable-async-copy"), "{text}");
    assert!(text.contains("more in --json"), "{text}");
}
