//! What the CLI says to the mistakes newcomers make: each message names the cause.

use crate::support::*;
use std::process::Command;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_run_with_gpuspy_disable_set_names_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(gpuspy())
        .args(["run", "-o", s(dir.path()), "--"])
        .arg(program("simulated_step"))
        .arg("2")
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env("GPUSPY_DISABLE", "1")
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.ends_with(
            "wrote no dump of this run: GPUSPY_DISABLE is set (and not 0), which turns the shim's recording off: unset it to record.\n"
        ),
        "{text}"
    );
}

#[test]
fn explain_suggests_the_rule_a_misspelt_id_meant() {
    let out = gpuspy_cmd(&["explain", "sync-stall"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "gpuspy: no rule named sync-stall; did you mean sync-stalled? (`gpuspy explain` lists the rules)\n"
    );
}

#[test]
fn a_report_json_read_as_a_dump_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let json = gpuspy_cmd(&["report", "--json", s(&data("h200-torch-pageable.json"))]);
    std::fs::write(&report, &json.stdout).unwrap();
    let out = gpuspy_cmd(&["report", s(&report)]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "gpuspy: {}: not a gpuspy dump: it looks like a report JSON (`gpuspy report --json` output); report the dumps it was made from\n",
            report.display()
        )
    );
}

#[test]
fn a_report_written_into_the_dump_directory_is_skipped_with_one_note() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        data("h200-torch-pageable.json"),
        dir.path().join("gpuspy-host-1.json"),
    )
    .unwrap();
    let alone = gpuspy_cmd(&["report", "--json", s(dir.path())]);
    assert_eq!(alone.status.code(), Some(0), "{alone:?}");
    // `gpuspy report --json DIR > DIR/gpuspy-report.json`: the shell creates the file, empty,
    // before the report lists DIR; from then on it holds a report.
    let written = dir.path().join("gpuspy-report.json");
    for (contents, what) in [(&b""[..], "empty"), (&alone.stdout[..], "a report JSON")] {
        std::fs::write(&written, contents).unwrap();
        let out = gpuspy_cmd(&["report", "--json", s(dir.path())]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(out.stdout, alone.stdout);
        assert_eq!(
            stderr(&out),
            format!(
                "gpuspy: note: skipped 1 file(s) named like dumps that hold none: {} ({what})\n",
                written.display()
            )
        );
    }
    // Named, it is an error still; and a directory with nothing else has no dump to report.
    let named = gpuspy_cmd(&["report", s(&written)]);
    assert_eq!(named.status.code(), Some(2));
    std::fs::remove_file(dir.path().join("gpuspy-host-1.json")).unwrap();
    let nothing = gpuspy_cmd(&["report", s(dir.path())]);
    assert_eq!(nothing.status.code(), Some(2));
    assert!(
        stderr(&nothing)
            .ends_with("gpuspy: no gpuspy dumps left to report once those are skipped\n"),
        "{}",
        stderr(&nothing)
    );
}
