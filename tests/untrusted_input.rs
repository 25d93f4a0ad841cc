use crate::support::*;
use serde_json::Value;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PERIODS: [&str; 3] = ["GPUSPY_FLUSH_S", "GPUSPY_HANG_S", "GPUSPY_NVML_MS"];
const NO_PERIODS: [&str; 5] = ["1e20", "1e300", "NaN", "-1", "inf"];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The one warning a bad value gets, as the shim words it (`gpuspy_format::env`).
fn warning(var: &str, value: &str) -> String {
    let (unit, default, max) = match var {
        "GPUSPY_FLUSH_S" => ("s", "10", "31536000"),
        "GPUSPY_HANG_S" => ("s", "300", "31536000"),
        _ => ("ms", "100", "31536000000"),
    };
    if matches!(value, "NaN" | "-1") {
        format!(
            "gpuspy: {var}={value} is neither 0 (off) nor a period in {unit}: using the default, \
             {default} {unit}\n"
        )
    } else {
        format!(
            "gpuspy: {var}={value} is longer than the longest period, {max} {unit} (a year): \
             using that\n"
        )
    }
}

#[test]
fn numbers_no_period_has_never_stop_a_program() {
    let out = tempfile::tempdir().unwrap();
    for var in PERIODS {
        for value in NO_PERIODS {
            for disabled in ["0", "1"] {
                let env = [(var, value), ("GPUSPY_DISABLE", disabled)];
                let output = command(Path::new("/bin/echo"), &["hello"], &env, out.path())
                    .output()
                    .unwrap();
                let case = format!("{var}={value} GPUSPY_DISABLE={disabled}");
                assert_eq!(output.status.code(), Some(0), "{case}");
                assert_eq!(text(&output.stdout), "hello\n", "{case}");
                // A disabled shim says nothing.
                let said = if disabled == "1" {
                    String::new()
                } else {
                    warning(var, value)
                };
                assert_eq!(text(&output.stderr), said, "{case}");
            }
            // A CUDA program records everything, its dump written at exit.
            let run = run("linked", &["10", "1"], &[(var, value)]);
            assert_eq!(
                text(&run.output.stderr),
                warning(var, value),
                "{var}={value}"
            );
            assert_eq!(count(&run.report(), "cuLaunchKernel"), 10, "{var}={value}");
        }
    }
}

#[test]
fn gpuspy_run_takes_any_flush_period() {
    for value in NO_PERIODS {
        let (out, prom) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let output = Command::new(gpuspy())
            .args(["run", "--prom", s(prom.path()), "-o", s(out.path()), "--"])
            .arg(program("linked"))
            .args(["10", "1"])
            .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
            .env("GPUSPY_FLUSH_S", value)
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{value}: {stderr}");
        // Said once, by the shim in the command.
        assert_eq!(
            stderr.matches("GPUSPY_FLUSH_S=").count(),
            1,
            "{value}: {stderr}"
        );
        assert!(
            stderr.contains(&warning("GPUSPY_FLUSH_S", value)),
            "{stderr}"
        );
        assert_eq!(count(&report_json(&[out.path()]), "cuLaunchKernel"), 10);
    }
}

/// `cmd`, to run in a UTS namespace of its own named `host`: by `unshare` alone as root,
/// else in a user namespace that maps this user to root there.
fn in_uts_namespace<'a>(cmd: &'a mut Command, host: &str) -> &'a mut Command {
    // Made before the fork: between fork and exec nothing may allocate.
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let maps = [
        (c"/proc/self/setgroups", "deny".to_string()),
        (c"/proc/self/uid_map", format!("0 {uid} 1")),
        (c"/proc/self/gid_map", format!("0 {gid} 1")),
    ];
    let name = CString::new(host).unwrap();
    // SAFETY: only system calls between fork and exec, on memory made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWUTS) != 0 {
                if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWUTS) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                for (path, line) in &maps {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                    let written = libc::write(fd, line.as_ptr().cast(), line.len());
                    libc::close(fd);
                    if written != line.len() as isize {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            if libc::sethostname(name.as_ptr(), name.as_bytes().len()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Why this kernel will not give a process a host name of its own, if it will not.
fn no_uts_namespace() -> Option<String> {
    let probe = in_uts_namespace(&mut Command::new("/bin/true"), "probe").status();
    match probe {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!("/bin/true in a UTS namespace: {status}")),
        Err(e) => Some(format!("no UTS namespace: {e}")),
    }
}

/// Host names a container may set, and the file names their dumps get.
const HOSTS: [(&str, &str); 4] = [
    ("rack/7", "rack_7"),
    ("..", ".."),
    ("gpu node 1", "gpu_node_1"),
    ("../../etc/x", ".._.._etc_x"),
];

#[test]
fn a_host_name_that_is_no_file_name_still_gets_its_dump() {
    if let Some(reason) = no_uts_namespace() {
        eprintln!("skipped: {reason}");
        return;
    }
    for (host, file_host) in HOSTS {
        let out = tempfile::tempdir().unwrap();
        let mut cmd = command(&program("linked"), &["10", "1"], &[], out.path());
        let child = in_uts_namespace(&mut cmd, host)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{host}: {output:?}");
        assert_eq!(text(&output.stderr), "", "{host}");
        let written: Vec<String> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            written,
            [format!("gpuspy-{file_host}-{pid}.json")],
            "{host}"
        );
        let dump: Value =
            serde_json::from_slice(&std::fs::read(out.path().join(&written[0])).unwrap()).unwrap();
        assert_eq!(dump["process"]["host"], host);
        let report = report_json(&[out.path()]);
        assert_eq!(report["processes"][0]["host"], host);
        assert_eq!(count(&report, "cuLaunchKernel"), 10, "{host}");
    }
}

#[test]
fn gpuspy_runs_finding_file_is_named_by_a_file_safe_host() {
    if let Some(reason) = no_uts_namespace() {
        eprintln!("skipped: {reason}");
        return;
    }
    let (out, prom) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut cmd = Command::new(gpuspy());
    cmd.args(["run", "--prom", s(prom.path()), "-o", s(out.path()), "--"])
        // 200 steps blocked in syncs of 4 ms: the job runs for a second or more.
        .arg(program("simulated_step"))
        .arg("200")
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env("FAKECUDA_DELAY_NS", "cuStreamSynchronize=4000000")
        .env("GPUSPY_FLUSH_S", "0.05")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut job = in_uts_namespace(&mut cmd, "rack/7").spawn().unwrap();
    let finding_file = format!("gpuspy-run-{}-rack_7.prom", job.id());
    let started = Instant::now();
    let mut seen = false;
    while job.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(60) {
        seen |= prom.path().join(&finding_file).exists();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(job.wait().unwrap().success());
    assert!(seen, "no {finding_file} while the job ran");
}

#[test]
fn secrets_in_every_form_never_reach_the_dump() {
    let args = [
        "10",
        "1",
        "--db-pass=hunter2",
        "--pwd",
        "hunter3",
        "HF_TOKEN=hf_hunter4",
        "AWS_SECRET_ACCESS_KEY=hunter5",
        "--db=postgres://admin:hunter6@db/app",
        "--monkey=1",
    ];
    let run = run("linked", &args, &[]);
    let raw = std::fs::read_to_string(&run.dumps()[0]).unwrap();
    assert!(!raw.contains("hunter"), "{raw}");
    let dump: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        dump["process"]["cmdline"].as_array().unwrap()[1..],
        [
            "10",
            "1",
            "--db-pass=<redacted>",
            "--pwd",
            "<redacted>",
            "HF_TOKEN=<redacted>",
            "AWS_SECRET_ACCESS_KEY=<redacted>",
            "--db=postgres://admin:<redacted>@db/app",
            "--monkey=1",
        ]
    );
}
