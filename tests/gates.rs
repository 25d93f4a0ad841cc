use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn check_gates_with_junit_markdown_and_github_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    step_run(&run_dir, 1000);
    let budget = dir.path().join("budget.toml");
    std::fs::write(
        &budget,
        "steps = 300\n\
         [api.cuStreamSynchronize]\np50_max_us = 500\nmax_per_step = 1\n\
         [api.cuLaunchKernel]\nmax_per_run = 20000\n\
         [syncs]\nmax_blocked_share = 0.99\n\
         [findings]\nforbid = [\"pageable-memcpy\"]\n",
    )
    .unwrap();
    let junit = dir.path().join("junit.xml");
    let markdown = dir.path().join("summary.md");
    let out = Command::new(gpuspy())
        .args([
            "check",
            s(&run_dir),
            "--budget",
            s(&budget),
            "--junit",
            s(&junit),
            "--markdown",
            s(&markdown),
        ])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // p50 of ~1 ms breaks the 500 us ceiling; everything else holds.
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with("FAIL"))
            .count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("FAIL cuStreamSynchronize p50 <= 500 us"),
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("::error title=gpuspy check::"))
            .count(),
        1,
        "{text}"
    );
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(md.starts_with("### gpuspy check: 1 failed"), "{md}");

    // The JUnit file validates against the JUnit schema.
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/junit.xsd");
    let lint = Command::new("xmllint")
        .args(["--noout", "--schema", s(&xsd), s(&junit)])
        .output()
        .expect("xmllint (libxml2-utils; `tools/ensure-deps.sh test` installs it)");
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stderr)
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"5\" failures=\"1\""), "{xml}");

    // Loosen the one limit: the gate passes.
    let loose = dir.path().join("loose.toml");
    std::fs::write(
        &loose,
        std::fs::read_to_string(&budget)
            .unwrap()
            .replace("p50_max_us = 500", "p50_max_us = 5000"),
    )
    .unwrap();
    let out = gpuspy_cmd(&["check", s(&run_dir), "--budget", s(&loose)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn malformed_budget_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    step_run(&run_dir, 10);
    let budget = dir.path().join("bad.toml");
    std::fs::write(&budget, "[api.cuInit\np50_max_us = 3\n").unwrap();
    let out = gpuspy_cmd(&["check", s(&run_dir), "--budget", s(&budget)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpuspy: budget ") && err.contains("line 1"),
        "{err}"
    );
}

#[test]
fn run_with_a_budget_is_a_one_step_gate() {
    let dir = tempfile::tempdir().unwrap();
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuStreamSynchronize]\nmax_per_run = 100\n").unwrap();
    let gate = |steps: &str| {
        Command::new(gpuspy())
            .args([
                "run",
                "--check",
                s(&budget),
                "-o",
                s(&dir.path().join(steps)),
                "--",
            ])
            .arg(program("simulated_step"))
            .arg(steps)
            .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
            .env_remove("GITHUB_ACTIONS")
            .output()
            .unwrap()
    };
    assert_eq!(gate("50").status.code(), Some(0));
    let over = gate("150");
    assert_eq!(over.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&over.stdout)
        .contains("FAIL cuStreamSynchronize calls <= 100 per run"));
}

/// Budgets that could never fail, or never be compared with a measurement, are usage errors
/// (exit 2, one line) before anything is loaded or run.
#[test]
fn budgets_that_check_nothing_or_name_no_api_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-torch-pageable.json");
    let budget = dir.path().join("budget.toml");
    let ran = dir.path().join("ran");
    for (text, error) in [
        (
            "[api.cuLaunchKernelz]\nmax_per_run = 10\n",
            "[api.cuLaunchKernelz]: gpuspy records no API cuLaunchKernelz; did you mean cuLaunchKernel?",
        ),
        ("", "asserts nothing, and an empty gate passes any run"),
        (
            "[api.cuLaunchKernel]\np50_max_us = nan\n",
            "api.cuLaunchKernel.p50_max_us = NaN: a limit is a finite number >= 0",
        ),
        (
            "[api.cuLaunchKernel]\np99_max_us = -1\n",
            "api.cuLaunchKernel.p99_max_us = -1: a limit is a finite number >= 0",
        ),
    ] {
        std::fs::write(&budget, text).unwrap();
        let prefix = format!("gpuspy: budget {}: {error}", budget.display());
        let check = gpuspy_cmd(&["check", s(&dump), "--budget", s(&budget)]);
        // `run --check` refuses before the job starts: the command never runs.
        let run = gpuspy_cmd(&["run", "--check", s(&budget), "--", "touch", s(&ran)]);
        for out in [check, run] {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{text:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.starts_with(&prefix), "{text:?}: {err}");
        }
        assert!(!ran.exists(), "{text:?}: the job ran");
    }
    let missing = dir.path().join("missing.toml");
    let out = gpuspy_cmd(&["run", "--check", s(&missing), "--", "touch", s(&ran)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with(&format!(
        "gpuspy: budget {}: cannot read",
        missing.display()
    )));
    assert!(!ran.exists(), "the job ran before the budget was read");
}

/// A gate with no dump of its run to check does not pass; a failing command keeps its code.
#[test]
fn run_check_without_a_dump_does_not_pass() {
    let dir = tempfile::tempdir().unwrap();
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuLaunchKernel]\nmax_per_run = 10\n").unwrap();
    let out_dir = dir.path().join("out");
    let gate = |script: &str| {
        gpuspy_cmd(&[
            "run",
            "--check",
            s(&budget),
            "-o",
            s(&out_dir),
            "--",
            "sh",
            "-c",
            script,
        ])
    };
    let quiet = gate("exit 0");
    let err = String::from_utf8_lossy(&quiet.stderr);
    assert_eq!(quiet.status.code(), Some(2), "{err}");
    assert!(
        err.ends_with("gpuspy: --check: no dump to check the budget against\n"),
        "{err}"
    );
    assert_eq!(gate("exit 3").status.code(), Some(3));
}

#[test]
fn diff_calls_unchanged_only_what_its_test_did_not_tell_apart() {
    let out = gpuspy_cmd(&[
        "diff",
        "--json",
        s(&data("h200-ddp-even")),
        s(&data("h200-ddp-slow")),
    ]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p_value = |c: &Value| -> Option<f64> {
        let detail = c["detail"].as_str().unwrap();
        let at = detail.find("p = ")? + 4;
        detail[at..].split(',').next()?.parse().ok()
    };
    let mut minor = 0;
    for c in r["changes"].as_array().unwrap() {
        match (c["kind"].as_str().unwrap(), p_value(c)) {
            ("unchanged", Some(p)) => assert!(p >= 0.05, "{c}"),
            ("minor", Some(p)) => {
                assert!(p < 0.05, "{c}");
                minor += 1;
            }
            ("minor", None) => panic!("a minor change without its test: {c}"),
            _ => {}
        }
    }
    // Such as cuEventRecord p50, 311 ns -> 227 ns at p < 0.001: 0.0 % of the driver time.
    assert_eq!(minor, 25, "{r}");
    let text = String::from_utf8(
        gpuspy_cmd(&["diff", s(&data("h200-ddp-even")), s(&data("h200-ddp-slow"))]).stdout,
    )
    .unwrap();
    assert!(
        text.contains(&format!("  {minor} latency shift(s) under the threshold, the floor or the driver-time share (`--json` lists them)\n")),
        "{text}"
    );
}
