use crate::support::*;
use serde_json::Value;

fn launches(dump: &std::path::Path) -> (u64, bool) {
    let r = report_json(&[dump]);
    (
        count(&r, "cuLaunchKernel"),
        r["processes"][0]["complete"].as_bool().unwrap(),
    )
}

/// (launches, complete) of each dump, parent (5 launches) first.
fn per_process(run: &Run) -> Vec<(u64, bool)> {
    let mut v: Vec<(u64, bool)> = run.dumps().iter().map(|d| launches(d)).collect();
    v.sort_by_key(|&(n, _)| n);
    v
}

#[test]
fn forked_child_returning_normally_has_its_own_dump() {
    let run = run("lifecycle", &["return"], &[]);
    assert_eq!(per_process(&run), vec![(5, true), (7, true)]);
}

#[test]
fn forked_child_ending_in_exit_underscore_has_its_own_dump() {
    let run = run("lifecycle", &["_exit"], &[]);
    assert_eq!(per_process(&run), vec![(5, true), (7, true)]);
}

/// Whether each dump (parent first) has a GPU section, i.e. GPU-side collection started.
fn gpu_sections(run: &Run) -> Vec<bool> {
    let mut v: Vec<(u64, bool)> = run
        .dumps()
        .iter()
        .map(|d| {
            let dump: Value = serde_json::from_slice(&std::fs::read(d).unwrap()).unwrap();
            (launches(d).0, !dump["gpu"].is_null())
        })
        .collect();
    v.sort_unstable();
    v.into_iter().map(|(_, gpu)| gpu).collect()
}

#[test]
fn gpu_collection_starts_in_whichever_process_created_a_context_first() {
    // A child forked after its parent started collecting does not collect (CUDA does not
    // survive fork); a child whose parent had no context yet starts its own.
    assert_eq!(
        gpu_sections(&run("lifecycle", &["init-parent"], &[])),
        [true, false]
    );
    assert_eq!(
        gpu_sections(&run("lifecycle", &["init-child"], &[])),
        [false, true]
    );
}

#[test]
fn forked_child_that_never_calls_the_driver_writes_nothing() {
    let run = run("lifecycle", &["silent"], &[]);
    assert_eq!(per_process(&run), vec![(5, true)]);
}

#[test]
fn killed_child_keeps_its_data_up_to_the_last_flush() {
    let run = run("lifecycle", &["kill"], &[("GPUSPY_FLUSH_S", "0.2")]);
    assert_eq!(per_process(&run), vec![(5, true), (7, false)]);
}

#[test]
fn a_process_without_driver_calls_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let status = command(std::path::Path::new("/bin/true"), &[], &[], out.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_dir(out.path())
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
}

#[test]
fn dumps_are_not_world_writable_and_carry_the_header() {
    use std::os::unix::fs::PermissionsExt;
    let run = run(
        "linked",
        &["3", "1"],
        &[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("CUDA_MODULE_LOADING", "EAGER"),
        ],
    );
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1);
    let mode = std::fs::metadata(&dumps[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o002, 0, "world-writable dump: {mode:o}");
    let dump: Value = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    assert_eq!(dump["schema"], "gpuspy-dump");
    assert_eq!(dump["schema_version"], gpuspy_format::SCHEMA_VERSION);
    assert_eq!(dump["tool_version"], env!("CARGO_PKG_VERSION"));
    // The shim's build script and the CLI's each describe the checkout when their own
    // sources last changed, so only the commit must agree, not the dirty mark.
    let build = dump["tool_build"].as_str().unwrap();
    let commit = |id: &'static str| id.strip_suffix("-dirty").unwrap_or(id);
    assert_eq!(
        build.strip_suffix("-dirty").unwrap_or(build),
        commit(env!("GPUSPY_BUILD"))
    );
    if std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".git")
        .exists()
    {
        assert_ne!(build, "unknown");
    }
    let pid = dump["process"]["pid"].as_u64().unwrap();
    let name = dumps[0].file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("gpuspy-r3-") && name.ends_with(&format!("-{pid}.json")),
        "{name}"
    );
    assert_eq!(dump["process"]["rank"]["rank"], 3);
    assert_eq!(dump["process"]["rank"]["world_size"], 8);
    assert_eq!(dump["process"]["rank"]["source"], "RANK");
    assert!(dump["process"]["exe"]
        .as_str()
        .unwrap()
        .ends_with("/linked"));
    assert_eq!(dump["process"]["cmdline"][1], "3");
    let rank_env = dump["process"]["rank_env"].as_array().unwrap();
    assert!(
        rank_env.contains(&serde_json::json!(["RANK", "3"])),
        "{rank_env:?}"
    );
    // The driver settings that were set, and only those gpuspy looks for.
    let cuda_env = dump["process"]["cuda_env"].as_array().unwrap();
    assert!(
        cuda_env.contains(&serde_json::json!(["CUDA_MODULE_LOADING", "EAGER"])),
        "{cuda_env:?}"
    );
    assert!(cuda_env
        .iter()
        .all(|kv| gpuspy_format::CUDA_VARIABLES.contains(&kv[0].as_str().unwrap())));
    let (start, first, stop) = (
        dump["start_unix_ns"].as_u64().unwrap(),
        dump["first_call_unix_ns"].as_u64().unwrap(),
        dump["stop_unix_ns"].as_u64().unwrap(),
    );
    assert!(start <= first && first <= stop, "{start} {first} {stop}");
    assert_eq!(dump["histogram"]["buckets"], 976);
}

#[test]
fn unwritable_output_directory_warns_once_and_the_program_runs_on() {
    let out = tempfile::tempdir().unwrap();
    let blocked = out.path().join("a-file");
    std::fs::write(&blocked, "").unwrap();
    let output = command(
        &program("linked"),
        &["10", "1"],
        &[("GPUSPY_FLUSH_S", "0.05")],
        &blocked.join("sub"),
    )
    .output()
    .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("linked: done"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("gpuspy: cannot write dumps").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_planted_symlink_is_not_followed_and_the_dump_is_still_written() {
    for how in ["exit", "_exit", "_Exit"] {
        let out = tempfile::tempdir().unwrap();
        let victim = out.path().join("victim.txt");
        std::fs::write(&victim, "keep me").unwrap();
        let status = command(
            &program("planted"),
            &[victim.to_str().unwrap(), how],
            &[],
            out.path(),
        )
        .status()
        .unwrap();
        assert!(status.success(), "{how}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "keep me",
            "{how}"
        );
        let dumps = dumps_in(out.path());
        assert_eq!(dumps.len(), 1, "{how}");
        assert_eq!(
            count(&report_json(&[&dumps[0]]), "cuLaunchKernel"),
            42,
            "{how}"
        );
    }
}

#[test]
fn the_monotonic_clock_records_the_same_counts() {
    let run = run("linked", &["100", "3"], &[("GPUSPY_CLOCK", "monotonic")]);
    let dump: Value = serde_json::from_slice(&std::fs::read(&run.dumps()[0]).unwrap()).unwrap();
    assert_eq!(dump["clock"], "monotonic");
    let r = run.report();
    assert_eq!(count(&r, "cuLaunchKernel"), 100);
    assert_eq!(count(&r, "cuStreamSynchronize"), 3);
}

/// This host's name, as the shim records it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// A writer killed while writing a dump (SIGKILL) leaves its temp file: the next `report`
/// or `run` over the directory removes it once the writer is gone, and keeps those of live
/// writers and of other hosts.
#[test]
fn temp_files_of_writers_that_died_are_removed_by_the_next_report_or_run() {
    use gpuspy_format::side_files::temp_name;
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        data("h200-sync-records-missing.json"),
        dir.path().join("gpuspy-vm-1674.json"),
    )
    .unwrap();
    let host = hostname();
    // The writer: a process that holds the lock of its temp file, as the shim does while
    // it writes, until it is killed.
    let placeholder = dir.path().join("placeholder");
    let mut writer = Command::new("flock")
        .args(["--no-fork", "--exclusive"])
        .arg(&placeholder)
        .args(["sleep", "600"])
        .spawn()
        .unwrap();
    let held = || {
        let file = std::fs::File::open(dir.path().join(temp_name(&host, writer.id(), 0)))
            .or_else(|_| std::fs::File::open(&placeholder));
        // SAFETY: flock on a descriptor we own.
        file.is_ok_and(|f| unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::LOCK_EX | libc::LOCK_NB,
            ) != 0
        })
    };
    let start = std::time::Instant::now();
    while !held() {
        assert!(start.elapsed().as_secs() < 60, "flock never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let killed = dir.path().join(temp_name(&host, writer.id(), 0));
    std::fs::rename(&placeholder, &killed).unwrap();
    let live = dir.path().join(temp_name(&host, std::process::id(), 1));
    let elsewhere = dir.path().join(temp_name("another-host", 1, 2));
    std::fs::write(&live, "{\"schema\":").unwrap();
    std::fs::write(&elsewhere, "{\"schema\":").unwrap();
    let syncs = count(
        &report_json(&[&data("h200-sync-records-missing.json")]),
        "cuStreamSynchronize",
    );
    let report = || {
        let out = gpuspy_cmd(&["report", "--json", s(dir.path())]);
        assert_eq!(out.status.code(), Some(0));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(count(&r, "cuStreamSynchronize"), syncs);
        String::from_utf8(out.stderr).unwrap()
    };
    assert_eq!(report(), "", "the writer is alive");
    assert!(killed.exists());
    writer.kill().unwrap();
    writer.wait().unwrap();
    assert_eq!(
        report(),
        format!(
            "gpuspy: removed 1 temp file(s) left in {} by processes that died while writing a dump\n",
            dir.path().display()
        )
    );
    assert!(!killed.exists());
    assert!(live.exists() && elsewhere.exists());
    assert_eq!(report(), "");

    // `run` cleans its dump directory before the job starts.
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let dead = dir.path().join(temp_name(&host, pid_max + 1, 3));
    std::fs::write(&dead, "").unwrap();
    let out = gpuspy_cmd(&["run", "-o", s(dir.path()), "--", "true"]);
    assert!(String::from_utf8(out.stderr).unwrap().starts_with(&format!(
        "gpuspy: removed 1 temp file(s) left in {} by processes",
        dir.path().display()
    )));
    assert!(!dead.exists());
    assert!(live.exists() && elsewhere.exists());
}
