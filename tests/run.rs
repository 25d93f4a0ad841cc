use crate::support::*;
use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Far longer than anything here takes on a loaded machine: only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(120);

/// Waits until `path` exists; panics after `PATIENCE`.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < PATIENCE,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `-o DIR/out -- waiter LAUNCHES READY`: the waiter program under `gpuspy run`, which makes
/// LAUNCHES launches, creates READY and waits for signals.
fn waiter_args(dir: &Path, launches: u32, ready: &Path) -> Vec<String> {
    [
        "-o".to_string(),
        dir.join("out").display().to_string(),
        "--".to_string(),
        program("waiter").display().to_string(),
        launches.to_string(),
        ready.display().to_string(),
    ]
    .to_vec()
}

/// `gpuspy run ARGS` against the fake driver, outside GitHub Actions, output to files in
/// `dir` so that a test can signal it while it runs.
fn spawn_run(dir: &Path, args: &[impl AsRef<OsStr>]) -> Child {
    run_command(dir, args).spawn().unwrap()
}

fn run_command(dir: &Path, args: &[impl AsRef<OsStr>]) -> Command {
    let mut cmd = Command::new(gpuspy());
    // gpuspy keeps signals that were ignored when it started ignored (nohup), as it should:
    // a suite started as a background job passes SIGINT on ignored, so start gpuspy with
    // the dispositions of a terminal.
    // SAFETY: signal is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    cmd.arg("run")
        .args(args)
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env_remove("GITHUB_ACTIONS")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap());
    cmd
}

/// The finished run's status and output; kills it and panics if it hangs.
fn finish(mut child: Child, dir: &Path) -> Output {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("gpuspy run hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: std::fs::read(dir.join("stdout")).unwrap(),
        stderr: std::fs::read(dir.join("stderr")).unwrap(),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `--json -` report: stdout, exactly one JSON document.
fn report_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill has no memory preconditions; the child is not reaped yet.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// tests/programs/marker_lib.c as a shared library that creates $MARKER_<tag> when loaded.
fn marker_lib(tag: &str, dest: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/marker_lib.c");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", &format!("-DTAG={tag}"), "-o"])
        .arg(dest)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `run --json FILE` writes the report to FILE and says so as every verb does, on stderr:
/// stdout is the profiled command's.
#[test]
fn run_json_to_a_file_says_wrote_file() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = finish(
        run_command(
            dir.path(),
            &[
                "--json",
                s(&report),
                "-o",
                s(&dir.path().join("out")),
                "--",
                s(&program("linked")),
                "5",
                "1",
            ],
        )
        .spawn()
        .unwrap(),
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).ends_with(&format!("wrote {}\n", report.display())),
        "{}",
        text(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(count(&json, "cuLaunchKernel"), 5);
}

/// ld.so splits LD_PRELOAD at spaces and colons: a gpuspy installed under such a path must
/// preload its shim through a path ld.so takes whole, never the working-directory-relative
/// tail, and keep the user's own LD_PRELOAD after it.
#[test]
fn an_install_path_with_a_space_or_colon_never_preloads_a_planted_library() {
    let a = artifacts();
    let root = tempfile::tempdir().unwrap();
    let kept = root.path().join("kept/libkept.so");
    marker_lib("KEPT", &kept);
    for (install, tail) in [("my space", "space"), ("a:b", "b")] {
        let dir = root.path().join(install);
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["gpuspy", "libgpuspy.so"] {
            std::fs::copy(a.bin_dir.join(file), dir.join(file)).unwrap();
        }
        // What ld.so would load from the working directory after splitting the real path.
        let cwd = root.path().join(format!("cwd-{tail}"));
        marker_lib("PLANTED", &cwd.join(tail).join("libgpuspy.so"));
        let tmp = root.path().join(format!("tmp-{tail}"));
        std::fs::create_dir(&tmp).unwrap();
        let runtime = root.path().join(format!("runtime-{tail}"));
        std::fs::create_dir(&runtime).unwrap();
        let (planted, kept_marker) = (
            root.path().join("planted-marker"),
            root.path().join("kept-marker"),
        );
        let out = Command::new(dir.join("gpuspy"))
            .args(["run", "--json", "-", "-o"])
            .arg(root.path().join(format!("out-{tail}")))
            .arg("--")
            .arg(program("linked"))
            .args(["7", "1"])
            .current_dir(&cwd)
            .env("LD_LIBRARY_PATH", &a.driver_dir)
            .env("LD_PRELOAD", &kept)
            .env("TMPDIR", &tmp)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("MARKER_PLANTED", &planted)
            .env("MARKER_KEPT", &kept_marker)
            .output()
            .unwrap();
        assert!(out.status.success(), "{install}: {}", text(&out.stderr));
        assert!(
            !planted.exists(),
            "{install}: the planted library was loaded"
        );
        assert!(
            kept_marker.exists(),
            "{install}: the user's LD_PRELOAD was dropped"
        );
        std::fs::remove_file(&kept_marker).unwrap();
        assert_eq!(count(&report_of(&out), "cuLaunchKernel"), 7, "{install}");
        // The link is in the user's runtime directory, where it stays for what the job
        // left behind; nothing is made under TMPDIR.
        let links = std::fs::read_dir(runtime.join("gpuspy")).unwrap();
        let link = links.map(|e| e.unwrap().path()).collect::<Vec<_>>();
        assert_eq!(link.len(), 1, "{install}: {link:?}");
        assert_eq!(
            std::fs::read_link(&link[0]).unwrap(),
            dir.join("libgpuspy.so")
        );
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "{install}");
    }
}

/// SIGTERM and SIGHUP sent to gpuspy reach the child once; gpuspy waits for it, prints the
/// report of what it dumped and exits 128 + N.
#[test]
fn sigterm_and_sighup_are_forwarded_and_the_report_printed() {
    for (sig, code, counts) in [
        (libc::SIGTERM, 143, "int=0 term=1 hup=0"),
        (libc::SIGHUP, 129, "int=0 term=0 hup=1"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let child = spawn_run(
            dir.path(),
            &["--json", "-", "-o", s(&dir.path().join("out")), "--"]
                .into_iter()
                .chain([s(&program("waiter")), "5", s(&ready)])
                .collect::<Vec<_>>(),
        );
        wait_for(&ready);
        signal(&child, sig);
        let out = finish(child, dir.path());
        assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
        // The waiter's own stdout went to stderr: stdout is the JSON alone.
        assert!(text(&out.stderr).contains(counts), "{}", text(&out.stderr));
        assert_eq!(count(&report_of(&out), "cuLaunchKernel"), 5);
    }
}

/// Killing gpuspy no longer leaves the job running: a child with the default disposition
/// dies of the forwarded SIGTERM.
#[test]
fn killing_gpuspy_does_not_orphan_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "echo $$ > {0}.tmp && mv {0}.tmp {0} && exec sleep 600",
        s(&pid_file)
    );
    let child = spawn_run(
        dir.path(),
        &["-o", s(&dir.path().join("out")), "--", "sh", "-c", &script],
    );
    wait_for(&pid_file);
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(&child, libc::SIGTERM);
    let out = finish(child, dir.path());
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stderr));
    // gpuspy reaped it: the pid is gone.
    // SAFETY: signal 0 only checks that the process exists.
    assert_eq!(unsafe { libc::kill(pid, 0) }, -1);
}

/// A SIGINT sent to gpuspy's pid alone is forwarded, once.
#[test]
fn sigint_sent_to_gpuspy_alone_is_forwarded_once() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let child = spawn_run(dir.path(), &waiter_args(dir.path(), 3, &ready));
    wait_for(&ready);
    signal(&child, libc::SIGINT);
    wait_for(&dir.path().join("ready.int"));
    // SIGTERM ends the waiter; a second SIGINT, had one been sent, would have been
    // delivered before it.
    signal(&child, libc::SIGTERM);
    let out = finish(child, dir.path());
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("int=1 term=1 hup=0"),
        "{}",
        text(&out.stdout)
    );
}

/// A pseudo-terminal (both ends close-on-exec: closing the test's master must hang it up)
/// whose slave becomes the controlling terminal of the spawned process,
/// which leads a session of its own: Ctrl-C and hangups as an interactive shell's job gets.
struct Pty {
    master: std::fs::File,
    slave: std::fs::File,
}

fn pty() -> Pty {
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc calls on descriptors we own; ptsname_r writes into `name`.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0);
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let slave = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(slave >= 0);
        Pty {
            master: std::fs::File::from_raw_fd(master),
            slave: std::fs::File::from_raw_fd(slave),
        }
    }
}

fn spawn_on_pty(pty: &Pty, dir: &Path, args: &[impl AsRef<OsStr>]) -> Child {
    let mut cmd = run_command(dir, args);
    cmd.stdin(pty.slave.try_clone().unwrap());
    // SAFETY: setsid and ioctl are async-signal-safe; stdin (the slave) becomes the new
    // session's controlling terminal, with this process its foreground group.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// Ctrl-C on the terminal signals the whole foreground group, the child included: gpuspy
/// must not send it a second one.
#[test]
fn ctrl_c_on_the_terminal_reaches_the_child_once() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let mut pty = pty();
    let child = spawn_on_pty(&pty, dir.path(), &waiter_args(dir.path(), 3, &ready));
    wait_for(&ready);
    pty.master.write_all(b"\x03").unwrap();
    wait_for(&dir.path().join("ready.int"));
    // gpuspy handled its own SIGINT before this SIGTERM: had it forwarded the SIGINT, the
    // child would have it before the SIGTERM.
    signal(&child, libc::SIGTERM);
    let out = finish(child, dir.path());
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("int=1 term=1 hup=0"),
        "{}",
        text(&out.stdout)
    );
}

/// A terminal hangup signals only the session leader, here gpuspy: it forwards it.
#[test]
fn a_hangup_of_gpuspys_terminal_is_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let pty = pty();
    let child = spawn_on_pty(&pty, dir.path(), &waiter_args(dir.path(), 3, &ready));
    wait_for(&ready);
    drop(pty);
    let out = finish(child, dir.path());
    assert_eq!(out.status.code(), Some(129), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("int=0 term=0 hup=1"),
        "{}",
        text(&out.stdout)
    );
}

/// Two runs sharing `-o`, each with a dump of the other's appearing in the directory while
/// it runs: each reports its own process only, and says what it left out.
#[test]
fn concurrent_runs_sharing_a_directory_report_only_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a_dir).unwrap();
    std::fs::create_dir(&b_dir).unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let mut a = run_command(
        &a_dir,
        &[
            "--json",
            "-",
            "-o",
            s(&shared),
            "--",
            s(&program("waiter")),
            "11",
            s(&ready),
            s(&go),
        ],
    );
    // Periodic flushes: A's dump is in the directory, and rewritten, while B runs.
    let a = a.env("GPUSPY_FLUSH_S", "0.05").spawn().unwrap();
    wait_for(&ready);
    let start = Instant::now();
    while dumps_in(&shared).is_empty() {
        assert!(start.elapsed() < PATIENCE, "A never flushed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let b = finish(
        run_command(
            &b_dir,
            &[
                "--json",
                "-",
                "-o",
                s(&shared),
                "--",
                s(&program("linked")),
                "23",
                "1",
            ],
        )
        .env("GPUSPY_FLUSH_S", "0.05")
        .spawn()
        .unwrap(),
        &b_dir,
    );
    std::fs::write(&go, "").unwrap();
    let a = finish(a, &a_dir);
    for (out, launches) in [(&a, 11), (&b, 23)] {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let r = report_of(out);
        assert_eq!(count(&r, "cuLaunchKernel"), launches);
        assert_eq!(r["processes"].as_array().unwrap().len(), 1);
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "gpuspy: 1 dump(s) of this run in {}; left out 1 other dump(s) there",
                shared.display()
            )),
            "{stderr}"
        );
    }
}

/// A corrupt file and a FIFO appearing in the directory during the run are counted, never
/// read into the report, and change no exit code, with or without a gate.
#[test]
fn a_corrupt_file_planted_during_the_run_does_not_change_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuLaunchKernel]\nmax_per_run = 100\n").unwrap();
    for (i, gate) in [&[][..], &["--check", s(&budget)][..]]
        .into_iter()
        .enumerate()
    {
        let run_dir = dir.path().join(format!("run{i}"));
        let out_dir = run_dir.join("out");
        std::fs::create_dir(&run_dir).unwrap();
        let (ready, go) = (run_dir.join("ready"), run_dir.join("go"));
        let waiter = program("waiter");
        let args: Vec<&str> = gate
            .iter()
            .copied()
            .chain(["-o", s(&out_dir), "--", s(&waiter), "3", s(&ready), s(&go)])
            .collect();
        let child = spawn_run(&run_dir, &args);
        wait_for(&ready);
        std::fs::write(
            out_dir.join("gpuspy-evil.json"),
            "{\"schema\": \"gpuspy-dump\", ",
        )
        .unwrap();
        // A FIFO would block a reader forever.
        let fifo = std::ffi::CString::new(s(&out_dir.join("gpuspy-fifo.json"))).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::fs::write(&go, "").unwrap();
        let out = finish(child, &run_dir);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("1 dump(s) of this run in")
                && stderr.ends_with("; left out 2 unreadable file(s) there\n"),
            "{stderr}"
        );
    }
}

/// `-o` on something the shim cannot write to is refused before the job starts.
#[test]
fn an_unusable_dump_directory_is_refused_before_the_job_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let ran = dir.path().join("ran");
    for (out, why) in [
        (file.clone(), "it is a file, not a directory".to_string()),
        (
            file.join("sub"),
            "cannot create it: Not a directory (os error 20)".to_string(),
        ),
    ] {
        let out_arg = s(&out).to_string();
        let result = gpuspy_cmd(&["run", "-o", &out_arg, "--", "touch", s(&ran)]);
        let stderr = text(&result.stderr);
        assert_eq!(result.status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "gpuspy: cannot write dumps to {out_arg}: {why}; choose another directory with -o\n"
            )
        );
        assert!(!ran.exists(), "the job ran");
    }
}

/// When the directory becomes unusable during the run, gpuspy says the dumps could not be
/// written and why, not that the program made no driver call.
#[test]
fn dumps_that_could_not_be_written_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let result = Command::new(gpuspy())
        .args(["run", "-o", s(&out_dir), "--", "sh", "-c"])
        .arg("rm -r \"$0\" && touch \"$0\" && exec \"$1\" 5 1")
        .arg(&out_dir)
        .arg(program("linked"))
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .output()
        .unwrap();
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.ends_with(&format!(
            "gpuspy: sh wrote no dump of this run: the dumps could not be written to {}: it is a \
             file, not a directory.\n",
            out_dir.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("made no CUDA driver call"), "{stderr}");
}

/// Under a file-size limit smaller than a dump (SIGXFSZ ignored, so that writes past it
/// fail rather than kill), the shim warns on the command's stderr and leaves a marker;
/// gpuspy says the dump could not be written and why, not that the program made no driver
/// call, and removes the marker.
#[test]
fn a_dump_over_the_file_size_limit_is_named_as_unwritten() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let mut cmd = Command::new(gpuspy());
    cmd.args(["run", "-o", s(&out_dir), "--"])
        .arg(program("linked"))
        .args(["5", "1"])
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env_remove("LD_PRELOAD");
    // SAFETY: setrlimit and signal are async-signal-safe. 512 bytes: less than any dump.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 512,
                rlim_max: 512,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            Ok(())
        });
    }
    let result = cmd.output().unwrap();
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.matches("gpuspy: cannot write dumps to").count(),
        1,
        "the shim's own warning: {stderr}"
    );
    assert!(
        stderr.ends_with(&format!(
            "gpuspy: {} wrote no dump of this run: 1 process could not write its dump to {}: a \
             dump was larger than the file-size limit (ulimit -f).\n",
            program("linked").display(),
            out_dir.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("made no CUDA driver call"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A GPUSPY_SHIM that names no file would run the job unprofiled: refused before it starts.
#[test]
fn a_missing_shim_is_refused_before_the_job_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (shim, ran) = (dir.path().join("libgpuspy.so"), dir.path().join("ran"));
    let out = Command::new(gpuspy())
        .args([
            "run",
            "-o",
            s(&dir.path().join("out")),
            "--",
            "touch",
            s(&ran),
        ])
        .env("GPUSPY_SHIM", &shim)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!("gpuspy: GPUSPY_SHIM={}: no such file\n", shim.display())
    );
    assert!(!ran.exists(), "the job ran");
    assert!(
        !dir.path().join("out").exists(),
        "refused, yet made the dump directory"
    );
}
