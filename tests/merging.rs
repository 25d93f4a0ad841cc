use crate::support::*;
use gpuspy_format::Ending;
use serde_json::json;
use std::path::Path;
use std::process::Command;

/// `gpuspy report ARGS`: exit code, stdout, stderr.
fn report(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(gpuspy())
        .arg("report")
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Two ranks of a job: one runs from second 0 to 20, the other from 3 to 23. The job took
/// 23 s; its processes 40 s between them.
#[test]
fn each_dump_counts_once_and_the_wall_time_is_the_jobs_span() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_dump(
        dir.path(),
        "gpuspy-node-1.json",
        &crafted_dump(1, 0, 20, 100),
    );
    write_dump(
        dir.path(),
        "gpuspy-node-2.json",
        &crafted_dump(2, 3, 23, 50),
    );
    // A link to a dump beside it is the same dump.
    std::os::unix::fs::symlink(&a, dir.path().join("gpuspy-link.json")).unwrap();
    let d = s(dir.path());
    let r = report_json(&[dir.path(), dir.path(), &a]);
    assert_eq!(r["processes"].as_array().unwrap().len(), 2);
    assert_eq!(count(&r, "cuLaunchKernel"), 150);
    assert_eq!(r["wall_ns"], 23_000_000_000u64);
    assert_eq!(r["process_wall_ns"], 40_000_000_000u64);
    assert_eq!(r["driver_ns"], 150_000u64);
    let (code, text, _) = report(&[d, d]);
    assert_eq!(code, Some(0));
    assert_eq!(
        text.lines().next().unwrap(),
        "gpuspy report: 2 processes, 2 threads, wall 23.0 s (first start to last dump), \
         process time 40.0 s (summed over processes), inside the driver 150 us (0.0 % of process time)"
    );
    let once = report_json(&[&a, &a]);
    assert_eq!(count(&once, "cuLaunchKernel"), 100);
    assert_eq!(once["wall_ns"], 20_000_000_000u64);
}

/// Two dumps of 2^63 calls each: the sum saturates at 2^64-1 instead of wrapping to 0,
/// and the report says so.
#[test]
fn counts_that_overflow_when_merged_saturate_and_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    for pid in [1, 2] {
        let mut d = crafted_dump(pid, 0, 1, 1 << 63);
        // Only the calls overflow: 1 ms inside the driver.
        d.driver_ns = 1_000_000;
        d.apis[0].total_ns = 1_000_000;
        write_dump(dir.path(), &format!("gpuspy-node-{pid}.json"), &d);
    }
    let r = report_json(&[dir.path()]);
    assert_eq!(count(&r, "cuLaunchKernel"), u64::MAX);
    assert_eq!(
        symbols(&r, "cuLaunchKernel"),
        vec![("cuLaunchKernel".to_string(), u64::MAX)]
    );
    assert_eq!(r["saturated"], true);
    assert_eq!(r["processes"][1]["calls"], 1u64 << 63);
    let (_, text, _) = report(&[s(dir.path())]);
    assert!(
        text.contains("\nnote: some merged counts reached 2^64-1 and stopped there"),
        "{text}"
    );
    assert!(text.contains(" 18446744073709551615 "), "{text}");
    let one = report_json(&[&dir.path().join("gpuspy-node-1.json")]);
    assert_eq!(one["saturated"], false);
}

/// A process that exec'd left one dump per image: one process, the images' calls summed,
/// and how it ended (`killed by signal 15`, `exec'd`) in the table and the JSON.
#[test]
fn the_images_of_one_process_are_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = crafted_dump(40, 0, 2, 100);
    first.ended_by = Some(Ending::Exec);
    let mut second = crafted_dump(40, 0, 5, 7);
    second.process.image = 1;
    second.process.cmdline = vec!["after-exec".into()];
    second.ended_by = Some(Ending::Signal(15));
    // The same pid with another start: a later process that reused the pid.
    let mut other = crafted_dump(40, 1, 3, 1);
    other.ended_by = Some(Ending::Exec);
    // Named so that the later image is read first.
    write_dump(dir.path(), "gpuspy-node-40-b.json", &first);
    write_dump(dir.path(), "gpuspy-node-40-a.json", &second);
    write_dump(dir.path(), "gpuspy-node-40-c.json", &other);
    let r = report_json(&[dir.path()]);
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2);
    let p = &processes[0];
    assert_eq!(
        (&p["pid"], &p["calls"], &p["images"], &p["wall_ns"]),
        (&json!(40), &json!(107), &json!(2), &json!(5_000_000_000u64))
    );
    assert_eq!(p["ended_by"], json!({"signal": 15}));
    assert_eq!(p["cmdline"], json!(["after-exec"]));
    assert_eq!(processes[1]["ended_by"], "exec");
    assert_eq!(count(&r, "cuLaunchKernel"), 108);
    let (_, text, _) = report(&["--per-process", s(dir.path())]);
    assert!(
        text.contains("killed by signal 15 (2 images)  after-exec\n"),
        "{text}"
    );
    assert!(text.contains(" exec'd "), "{text}");
}

/// Dumps written before the shim redacted secrets still hold them: the reader redacts.
#[test]
fn secrets_in_an_old_dumps_command_line_are_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = crafted_dump(1, 0, 1, 1);
    d.process.cmdline = [
        "train.py",
        "--password=hunter2",
        "--api-key",
        "abc",
        "--tokenizer",
        "gpt2",
    ]
    .map(String::from)
    .to_vec();
    write_dump(dir.path(), "gpuspy-node-1.json", &d);
    let r = report_json(&[dir.path()]);
    assert_eq!(
        r["processes"][0]["cmdline"],
        json!([
            "train.py",
            "--password=<redacted>",
            "--api-key",
            "<redacted>",
            "--tokenizer",
            "gpt2"
        ])
    );
    for args in [vec!["--json"], vec!["--per-process"]] {
        let (_, out, _) = report(&[args.as_slice(), &[s(dir.path())]].concat());
        assert!(!out.contains("hunter2") && !out.contains("abc"), "{out}");
    }
}

/// A dump that another user could have planted in a shared directory draws one warning
/// naming it; the report goes on.
#[test]
fn dumps_owned_by_another_user_are_named_in_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    write_dump(dir.path(), "gpuspy-node-1.json", &crafted_dump(1, 0, 1, 10));
    let (code, _, stderr) = report(&[s(dir.path())]);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let planted = write_dump(dir.path(), "gpuspy-node-2.json", &crafted_dump(2, 0, 1, 5));
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    let (code, out, stderr) = report(&["--json", s(dir.path())]);
    assert_eq!(code, Some(0));
    assert_eq!(
        stderr,
        format!(
            "gpuspy: warning: dumps not owned by their directory's owner, you or root (another user may have planted or replaced them): {} (uid 65534)\n",
            planted.display()
        )
    );
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(count(&r, "cuLaunchKernel"), 15);
}

/// `check RUN RUN` checks the run once, as `report` reads each dump once.
#[test]
fn a_run_named_twice_is_checked_once() {
    let dir = tempfile::tempdir().unwrap();
    write_dump(
        dir.path(),
        "gpuspy-node-1.json",
        &crafted_dump(1, 0, 1, 100),
    );
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuLaunchKernel]\nmax_per_run = 100\n").unwrap();
    let d = s(dir.path());
    let out = gpuspy_cmd(&["check", d, d, "--budget", s(&budget), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["cases"].as_array().unwrap().len(), 1, "{r}");
}

/// A directory holding several runs: two `gpuspy run`s (different tokens and commands), and
/// dumps without a token written hours later. The report is of the latest run, with a note;
/// `--all-runs` merges them, says so under its headline, and names each run; `--json` lists
/// them in `runs`.
#[test]
fn a_directory_of_several_runs_says_so_and_names_each() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for launches in ["3", "5"] {
        let run = Command::new(gpuspy())
            .args([
                "run",
                "--json",
                s(&dir.path().join("r.json")),
                "-o",
                s(&out),
                "--",
            ])
            .arg(program("linked"))
            .args([launches, "1"])
            .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let (code, latest, stderr) = report(&["--json", s(&out)]);
    assert_eq!(code, Some(0));
    assert_eq!(
        stderr,
        "gpuspy: note: left out 1 older run(s) in these directories: this report is of the latest run (`--all-runs` merges them all)\n"
    );
    let latest: serde_json::Value = serde_json::from_str(&latest).unwrap();
    assert_eq!(latest["runs"].as_array().unwrap().len(), 1, "{latest}");
    assert_eq!(latest["runs"][0]["command"][1], "5");
    assert_eq!(count(&latest, "cuLaunchKernel"), 5);
    // Named, every file is read: the dumps of both runs, merged.
    let named: Vec<String> = dumps_in(&out).iter().map(|d| s(d).to_string()).collect();
    let named: Vec<&str> = named.iter().map(String::as_str).collect();
    let (_, both, stderr) = report(&[&["--json"], &named[..]].concat());
    assert_eq!(stderr, "");
    let both: serde_json::Value = serde_json::from_str(&both).unwrap();
    assert_eq!(count(&both, "cuLaunchKernel"), 8);
    let r = all_runs_json(&out);
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs
        .iter()
        .all(|run| run["token"].as_str().is_some_and(|t| t.len() == 32)));
    assert_eq!(runs[1]["command"][1], "5");
    let (_, text, _) = report(&["--all-runs", s(&out)]);
    assert!(
        text.contains("note: these dumps come from 2 runs, merged into this one report"),
        "{text}"
    );
    assert!(
        text.contains("  run 1: started first, 1 process, run token "),
        "{text}"
    );
    assert!(
        text.contains(" 1 process, run token ") && text.contains("linked 5 1"),
        "{text}"
    );

    // Token-less dumps of one job and, hours later, another.
    let crafted = dir.path().join("crafted");
    std::fs::create_dir(&crafted).unwrap();
    write_dump(&crafted, "gpuspy-node-1.json", &crafted_dump(1, 0, 20, 10));
    write_dump(&crafted, "gpuspy-node-2.json", &crafted_dump(2, 3, 23, 10));
    write_dump(
        &crafted,
        "gpuspy-node-3.json",
        &crafted_dump(3, 7200, 7210, 10),
    );
    let (code, text, _) = report(&["--all-runs", s(&crafted)]);
    assert_eq!(code, Some(0));
    assert!(
        text.contains("note: these dumps come from 2 runs"),
        "{text}"
    );
    assert!(
        text.contains("  run 2: started 7200 s after the first, 1 process, no run token"),
        "{text}"
    );
    // By default the latest, hours later, alone.
    let (_, latest, stderr) = report(&["--json", s(&crafted)]);
    assert!(stderr.contains("left out 1 older run(s)"), "{stderr}");
    let latest: serde_json::Value = serde_json::from_str(&latest).unwrap();
    assert_eq!(latest["processes"][0]["pid"], 3, "{latest}");
    // One run alone: no note.
    std::fs::remove_file(crafted.join("gpuspy-node-3.json")).unwrap();
    let (_, text, _) = report(&[s(&crafted)]);
    assert!(!text.contains("runs, merged"), "{text}");
    assert_eq!(
        report_json(&[&crafted])["runs"].as_array().unwrap().len(),
        1
    );
}

fn all_runs_json(dir: &Path) -> serde_json::Value {
    let (code, out, stderr) = report(&["--json", "--all-runs", s(dir)]);
    assert_eq!(code, Some(0), "{stderr}");
    serde_json::from_str(&out).unwrap()
}

/// A directory of run directories (one per node of a job, as `diff` also accepts) is
/// merged whole; a directory with no dumps at either level says where it looked.
#[test]
fn a_directory_of_run_directories_is_merged() {
    let dir = tempfile::tempdir().unwrap();
    for (node, pid, launches) in [("node0", 1, 100), ("node1", 2, 50)] {
        let sub = dir.path().join(node);
        std::fs::create_dir(&sub).unwrap();
        write_dump(
            &sub,
            &format!("gpuspy-node-{pid}.json"),
            &crafted_dump(pid, 0, 20, launches),
        );
    }
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let r = report_json(&[dir.path()]);
    assert_eq!(count(&r, "cuLaunchKernel"), 150);
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["dirs"].as_array().unwrap().len(), 2);
    let (code, _, stderr) = report(&[s(&dir.path().join("empty"))]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("empty: no gpuspy dumps in this directory nor in its subdirectories"),
        "{stderr}"
    );
}

/// What a report says of its dumps, less where they were read from (`processes[].path`,
/// `runs[].dirs`).
fn without_paths(mut r: serde_json::Value) -> serde_json::Value {
    for p in r["processes"].as_array_mut().unwrap() {
        p["path"] = serde_json::Value::Null;
    }
    for run in r["runs"].as_array_mut().unwrap() {
        run["dirs"] = serde_json::Value::Null;
    }
    r
}

/// One process image in several files (a dump copied under another name, into another
/// directory) counts once: the report on all of them is the report on the dump alone,
/// with one note.
#[test]
fn copies_of_one_dump_under_other_names_count_once() {
    let original = data("h200-sync-records-missing.json");
    let (here, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::copy(&original, here.path().join("gpuspy-copy.json")).unwrap();
    std::fs::copy(&original, elsewhere.path().join("gpuspy-vm-1674.json")).unwrap();
    let single = report_json(&[&original]);
    assert_eq!(single["processes"].as_array().unwrap().len(), 1);
    let (code, out, stderr) =
        report(&["--json", s(here.path()), s(elsewhere.path()), s(&original)]);
    assert_eq!(code, Some(0));
    assert_eq!(
        stderr,
        "gpuspy: note: left out 2 dump(s) of a process image another file holds too (same host, \
         pid, start time, first call, run token and image): each image counts once, from its \
         latest dump\n"
    );
    let merged: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        count(&merged, "cuStreamSynchronize"),
        count(&single, "cuStreamSynchronize")
    );
    assert_eq!(without_paths(merged), without_paths(single));
    let (_, text, _) = report(&[s(here.path()), s(&original)]);
    assert!(text.starts_with("gpuspy report: 1 process, "), "{text}");
}

/// A periodic flush copied away and the image's last dump: the last one is read, whichever
/// is named first; another image or another run of the same pid is not a copy, nor is an
/// image that took another's number (its first call is its own).
#[test]
fn of_one_image_s_dumps_the_latest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut flush = crafted_dump(9, 0, 5, 50);
    flush.complete = false;
    let last = crafted_dump(9, 0, 10, 100);
    write_dump(dir.path(), "gpuspy-a-flush.json", &flush);
    write_dump(dir.path(), "gpuspy-b-last.json", &last);
    let r = report_json(&[dir.path()]);
    assert_eq!(count(&r, "cuLaunchKernel"), 100);
    let p = &r["processes"][0];
    assert_eq!(
        (&p["complete"], &p["wall_ns"]),
        (&json!(true), &json!(10_000_000_000u64))
    );
    let mut next_image = crafted_dump(9, 0, 12, 7);
    next_image.process.image = 1;
    write_dump(dir.path(), "gpuspy-c-exec1.json", &next_image);
    let mut other_run = crafted_dump(9, 0, 10, 3);
    other_run.process.run_token = Some("another".into());
    // Another run in the directory: every run merged, as the images are what is tested.
    write_dump(dir.path(), "gpuspy-d-other.json", &other_run);
    let r = all_runs_json(dir.path());
    assert_eq!(count(&r, "cuLaunchKernel"), 110);
    let mut same_number = crafted_dump(9, 0, 14, 4);
    same_number.process.image = 1;
    same_number.first_call_unix_ns += 12_500_000_000;
    write_dump(dir.path(), "gpuspy-c-exec1.2.json", &same_number);
    let r = all_runs_json(dir.path());
    assert_eq!(count(&r, "cuLaunchKernel"), 114);
}
