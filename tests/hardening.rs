use crate::support::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Everything in `dir`, temp files included.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn dump(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn launches(dump: &Value) -> u64 {
    dump["apis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["symbol"] == "cuLaunchKernel")
        .map_or(0, |a| a["calls"].as_u64().unwrap())
}

fn name(path: &Path) -> &str {
    path.file_name().unwrap().to_str().unwrap()
}

/// The hardening program, with the signals the tests send at their default dispositions
/// (a harness started under nohup or in the background would otherwise pass SIG_IGN on)
/// and no core files.
fn hardening(args: &[&str], env: &[(&str, &str)], out: &Path) -> Command {
    with_default_signals("hardening", args, env, out)
}

/// Test program `name` as `hardening` starts its own.
fn with_default_signals(name: &str, args: &[&str], env: &[(&str, &str)], out: &Path) -> Command {
    let mut cmd = command(&program(name), args, env, out);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGABRT] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
    cmd
}

/// Starts the program and waits for its "ready" line.
fn spawn_ready(cmd: &mut Command) -> Child {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    child
}

/// Waits for the child, killing it (and failing) if it outlives a minute.
fn wait(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the program did not end");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_file_size_limit_never_kills_the_program() {
    // At exit, and mid-run from the writer thread.
    for (flush_s, sleep_ms) in [("0", "0"), ("0.02", "300")] {
        let out = tempfile::tempdir().unwrap();
        let mut cmd = hardening(
            &["exit7", sleep_ms],
            &[("GPUSPY_FLUSH_S", flush_s)],
            out.path(),
        );
        // SAFETY: setrlimit is async-signal-safe. 512 bytes: less than any dump.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 512,
                    rlim_max: 512,
                };
                libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
                Ok(())
            });
        }
        let output = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(7), "flush {flush_s}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "buffered output of exit7\n"
        );
        assert_eq!(
            stderr.matches("gpuspy: cannot write dumps").count(),
            1,
            "{stderr}"
        );
        assert!(stderr.contains("file-size limit"), "{stderr}");
        assert_eq!(
            entries(out.path()),
            Vec::<PathBuf>::new(),
            "no temp file left"
        );
    }
}

/// After its first driver calls the program closes every descriptor it did not open and
/// uses the numbers for its own files, as daemons and test harnesses do: gpuspy holds no
/// descriptor for it to take over.
#[test]
fn a_program_that_takes_over_every_descriptor_keeps_them_to_itself() {
    // Its own pipe gets every byte while the writer thread flushes (the transfer takes at
    // least 80 ms; the first flush comes well after the descriptors are closed).
    let out = tempfile::tempdir().unwrap();
    let output = command(
        &program("descriptors"),
        &["pipe", "1600000"],
        &[("GPUSPY_FLUSH_S", "0.02")],
        out.path(),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "received 1600000
"
    );
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    assert_eq!(launches(&dump(&dumps[0])), 50);

    // Asleep for 2 s, the process uses next to no CPU: nothing of gpuspy's spins on a
    // descriptor that is gone (a spinning thread takes most of a core, well over 300 ms).
    let out = tempfile::tempdir().unwrap();
    let output = command(&program("descriptors"), &["idle", "2000"], &[], out.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let cpu_ms: u64 = stdout
        .strip_prefix("cpu_ms ")
        .and_then(|ms| ms.trim().parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(cpu_ms < 300, "{cpu_ms} ms of CPU in a 2 s sleep");
    assert_eq!(entries(out.path()).len(), 1);

    // A fatal signal with a data file on every old number: the dump is written, and not a
    // byte lands in the program's file.
    let out = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let data = files.path().join("data");
    let mut child = spawn_ready(&mut with_default_signals(
        "descriptors",
        &["signal", s(&data)],
        &[],
        out.path(),
    ));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(wait(&mut child).signal(), Some(libc::SIGTERM));
    assert_eq!(std::fs::read(&data).unwrap(), b"");
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let d = dump(&dumps[0]);
    assert_eq!(launches(&d), 50);
    assert_eq!(d["ended_by"]["signal"], libc::SIGTERM);
}

/// A program that runs out of memory under its own `RLIMIT_AS` and exits 3 exits 3, with
/// its dump: written from the reserve at exit, and by the writer thread while the program
/// runs on without memory.
#[test]
fn a_program_out_of_memory_keeps_its_exit_status_and_its_dump() {
    for (flush_s, after_ms) in [("0", "0"), ("0.01", "200")] {
        let out = tempfile::tempdir().unwrap();
        let output = command(
            &program("out_of_memory"),
            &[after_ms],
            &[("GPUSPY_FLUSH_S", flush_s)],
            out.path(),
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "flush {flush_s}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "limited\nout of memory after some blocks\n"
        );
        assert_eq!(stderr, "", "flush {flush_s}");
        let dumps = entries(out.path());
        assert_eq!(dumps.len(), 1, "flush {flush_s}: {dumps:?}");
        let d = dump(&dumps[0]);
        assert_eq!(launches(&d), 50);
        assert_eq!(d["complete"], true);
    }
}

#[test]
fn exec_keeps_both_images_calls() {
    for flush_s in ["0", "0.01"] {
        let run = run("hardening", &["exec"], &[("GPUSPY_FLUSH_S", flush_s)]);
        assert_eq!(run.stdout(), "after exec\n");
        let mut dumps = run.dumps();
        // The first image's dump first.
        dumps.sort_by_key(|d| name(d).contains("-exec"));
        assert_eq!(dumps.len(), 2, "{dumps:?}");
        let (first, second) = (dump(&dumps[0]), dump(&dumps[1]));
        let pid = first["process"]["pid"].as_u64().unwrap();
        assert_eq!(second["process"]["pid"].as_u64(), Some(pid));
        assert!(name(&dumps[0]).ends_with(&format!("-{pid}.json")));
        assert!(name(&dumps[1]).ends_with(&format!("-{pid}-exec1.json")));
        assert_eq!((launches(&first), launches(&second)), (100, 7));
        assert_eq!(first["ended_by"], "exec");
        assert_eq!(first["complete"], true);
        assert_eq!(second["process"]["image"], 1);
        assert_eq!(second["ended_by"], Value::Null);
        assert_eq!(second["start_unix_ns"], first["start_unix_ns"]);
        let report = run.report();
        assert_eq!(count(&report, "cuLaunchKernel"), 107);
        assert_eq!(
            report["processes"].as_array().unwrap().len(),
            1,
            "one process, two images"
        );
    }
}

/// `execl`, `execle`, `execlp` and `execveat`, which glibc's `execve` wrapper never sees,
/// keep both images' dumps as `execv` does.
#[test]
fn every_exec_form_keeps_both_images_dumps() {
    let programs = program("images").parent().unwrap().to_path_buf();
    let path = format!("{}:/usr/bin:/bin", programs.display());
    for form in ["execl", "execle", "execlp", "execveat"] {
        let run = run("images", &["exec", form], &[("PATH", &path)]);
        assert_eq!(run.stdout(), "after exec\n", "{form}");
        let mut dumps = run.dumps();
        dumps.sort_by_key(|d| name(d).contains("-exec"));
        assert_eq!(dumps.len(), 2, "{form}: {dumps:?}");
        let (first, second) = (dump(&dumps[0]), dump(&dumps[1]));
        let pid = first["process"]["pid"].as_u64().unwrap();
        assert!(name(&dumps[0]).ends_with(&format!("-{pid}.json")), "{form}");
        assert!(
            name(&dumps[1]).ends_with(&format!("-{pid}-exec1.json")),
            "{form}"
        );
        assert_eq!((launches(&first), launches(&second)), (100, 7), "{form}");
        assert_eq!(first["ended_by"], "exec", "{form}");
        assert_eq!(second["start_unix_ns"], first["start_unix_ns"], "{form}");
        let report = run.report();
        assert_eq!(count(&report, "cuLaunchKernel"), 107, "{form}");
        assert_eq!(report["processes"].as_array().unwrap().len(), 1, "{form}");
    }
}

/// An `exec` no wrapper sees (the raw system call): the new image does not know it is one,
/// and writes beside the old image's last periodic flush, never over it.
#[test]
fn a_new_image_never_writes_over_a_dump_it_did_not_write() {
    let run = run(
        "images",
        &["exec", "syscall"],
        &[("GPUSPY_FLUSH_S", "0.01")],
    );
    assert_eq!(run.stdout(), "after exec\n");
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 2, "{dumps:?}");
    let (first, second) = (dump(&dumps[0]), dump(&dumps[1]));
    let pid = first["process"]["pid"].as_u64().unwrap();
    assert!(name(&dumps[0]).ends_with(&format!("-{pid}.2.json")));
    assert!(name(&dumps[1]).ends_with(&format!("-{pid}.json")));
    assert_eq!((launches(&second), launches(&first)), (100, 7));
    assert_eq!(second["complete"], false, "the old image's periodic flush");
    assert_eq!(count(&run.report(), "cuLaunchKernel"), 107);
}

/// The environment a program hands to `exec` is its own: the next image's variables go
/// only into one that still preloads the shim, and never over the program's own values.
#[test]
fn the_environment_handed_to_exec_is_the_programs() {
    let empty = run("images", &["env-empty"], &[]);
    assert_eq!(empty.stdout(), "");
    let own = "GPUSPY_OUT=/own/dir\nGPUSPY_IMAGE=own\nKEPT=1\n";
    assert_eq!(run("images", &["env-own"], &[]).stdout(), own);
    // `env` itself runs under the shim then, which claims NVTX injection for itself.
    let preloaded = run("images", &["env-own", "preloaded"], &[]).stdout();
    let preloaded: String = preloaded
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("NVTX_INJECTION64_PATH="))
        .collect();
    assert_eq!(
        preloaded,
        format!(
            "{own}LD_PRELOAD={}\nLD_LIBRARY_PATH={}\n",
            shim().display(),
            artifacts().driver_dir.display()
        )
    );
    // Its own environment, as it found it: the next image's number and the directory.
    let inherited = run("images", &["env-inherited"], &[]);
    let d = dump(&inherited.dumps()[0]);
    let image = format!(
        "GPUSPY_IMAGE={}:1:{}",
        d["process"]["pid"], d["start_unix_ns"]
    );
    let out = format!("GPUSPY_OUT={}", inherited.out_dir.path().display());
    let stdout = inherited.stdout();
    let ours: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("GPUSPY_IMAGE=") || l.starts_with("GPUSPY_OUT="))
        .collect();
    assert_eq!(ours, [image.as_str(), out.as_str()], "{stdout}");
}

#[test]
fn a_relative_output_directory_stays_where_the_program_started() {
    for mode in ["chdir", "chdir-exec"] {
        let cwd = tempfile::tempdir().unwrap();
        let elsewhere = cwd.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let status = hardening(&[mode, s(&elsewhere)], &[], Path::new("out"))
            .current_dir(cwd.path())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{mode}");
        assert!(!elsewhere.join("out").exists(), "{mode}");
        let dumps = entries(&cwd.path().join("out"));
        let total: u64 = dumps.iter().map(|d| launches(&dump(d))).sum();
        let expected = if mode == "chdir" { (1, 5) } else { (2, 107) };
        assert_eq!((dumps.len(), total), expected, "{mode}: {dumps:?}");
    }
}

#[test]
fn every_call_of_thousands_of_threads_is_counted() {
    // One after another: slots of exited threads are reused.
    let seq = run("hardening", &["threads-seq", "3000"], &[]);
    let d = dump(&seq.dumps()[0]);
    assert_eq!(launches(&d), 9_000);
    assert_eq!(
        (d["threads"].as_u64(), d["unrecorded_calls"].as_u64()),
        (Some(3000), Some(0))
    );
    // 1,024 alive at once.
    let concurrent = run("hardening", &["threads-conc", "1024"], &[]);
    let d = dump(&concurrent.dumps()[0]);
    assert_eq!(launches(&d), 2_048);
    assert_eq!(
        (d["threads"].as_u64(), d["unrecorded_calls"].as_u64()),
        (Some(1024), Some(0))
    );
}

/// Sends `signal` to a program waiting for it and returns how it ended and its one dump.
fn signalled(args: &[&str], signal: i32) -> (ExitStatus, String, Value) {
    let out = tempfile::tempdir().unwrap();
    let mut child = spawn_ready(&mut hardening(args, &[("GPUSPY_FLUSH_S", "0")], out.path()));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = wait(&mut child);
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    (status, stdout, dump(&dumps[0]))
}

#[test]
fn a_fatal_signal_keeps_the_dump_and_the_same_wait_status() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let (status, _, d) = signalled(&["wait-signal"], signal);
        assert_eq!(status.signal(), Some(signal));
        assert_eq!(launches(&d), 50);
        assert_eq!(d["ended_by"]["signal"], signal);
        assert_eq!(d["complete"], true);
    }
}

/// The program sees the dispositions it set: after the first driver call SIGINT and SIGTERM
/// still read SIG_DFL, through `sigaction` and `signal`, also as the disposition a new
/// handler replaced; and with SIGTERM set to SIG_DFL again, SIGTERM still leaves the dump.
#[test]
fn the_program_sees_its_own_signal_dispositions() {
    let out = tempfile::tempdir().unwrap();
    let mut child =
        with_default_signals("dispositions", &[], &[("GPUSPY_FLUSH_S", "0")], out.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
    let mut seen = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    while !seen.ends_with("ready\n") && stdout.read_line(&mut seen).unwrap() > 0 {}
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(wait(&mut child).signal(), Some(libc::SIGTERM));
    assert_eq!(
        seen,
        "before SIGINT SIG_DFL SIG_DFL SIGTERM SIG_DFL SIG_DFL\n\
         after-first-call SIGINT SIG_DFL SIG_DFL SIGTERM SIG_DFL SIG_DFL\n\
         replaced-SIGINT SIG_DFL\n\
         own-SIGINT SIGINT own own SIGTERM SIG_DFL SIG_DFL\n\
         SIGTERM-reset SIGINT own own SIGTERM SIG_DFL SIG_DFL\n\
         ready\n"
    );
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let d = dump(&dumps[0]);
    assert_eq!(launches(&d), 10);
    assert_eq!(d["ended_by"]["signal"], libc::SIGTERM);
}

/// Python after a CUDA library's first driver call: `signal.getsignal` says what Python
/// set, and so does a C extension asking `sigaction`; SIGTERM set to SIG_DFL by Python
/// and sent to itself still leaves the dump.
const PYTHON_DISPOSITIONS: &str = r#"
import ctypes, os, signal
cuda = ctypes.CDLL("libcuda.so.1")
for _ in range(50):
    cuda.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None)
libc = ctypes.CDLL(None, use_errno=True)
old = ctypes.create_string_buffer(256)  # a struct sigaction; its handler comes first
assert libc.sigaction(signal.SIGTERM, None, old) == 0, ctypes.get_errno()
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
      ctypes.c_void_p.from_buffer(old).value is None, flush=True)
signal.signal(signal.SIGTERM, lambda *_: None)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
os.kill(os.getpid(), signal.SIGTERM)
"#;

#[test]
fn python_sees_the_dispositions_it_set() {
    let out = tempfile::tempdir().unwrap();
    let mut cmd = command(
        Path::new("python3"),
        &["-c", PYTHON_DISPOSITIONS],
        &[("GPUSPY_FLUSH_S", "0")],
        out.path(),
    );
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "True True True\n",
        "{stderr}"
    );
    assert_eq!(output.status.signal(), Some(libc::SIGTERM), "{stderr}");
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let d = dump(&dumps[0]);
    assert_eq!(launches(&d), 50);
    assert_eq!(d["ended_by"]["signal"], libc::SIGTERM);
}

/// Python after an unhandled KeyboardInterrupt: atexit handlers, then SIGINT back to the
/// default and `kill(getpid(), SIGINT)`, so that no exit path of ours runs.
const PYTHON_CTRL_C: &str = r#"
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
for _ in range(50):
    cuda.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None)
print("ready", flush=True)
# Short sleeps: a SIGINT that lands after Python's last signal check and before the sleep
# starts is only seen when a sleep returns (one long sleep lost it in CI).
for _ in range(6000):
    time.sleep(0.01)
"#;

#[test]
fn ctrl_c_in_python_keeps_the_dump_and_dies_of_sigint() {
    let out = tempfile::tempdir().unwrap();
    let mut cmd = command(
        Path::new("python3"),
        &["-c", PYTHON_CTRL_C],
        &[],
        out.path(),
    );
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = spawn_ready(cmd.stderr(Stdio::piped()));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait(&mut child);
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("KeyboardInterrupt"), "{stderr}");
    assert_eq!(status.signal(), Some(libc::SIGINT));
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let d = dump(&dumps[0]);
    assert_eq!(launches(&d), 50);
    assert_eq!(d["ended_by"]["signal"], libc::SIGINT);
}

#[test]
fn a_signal_on_a_thread_inside_malloc_keeps_the_dump() {
    let out = tempfile::tempdir().unwrap();
    let mut child = hardening(&["malloc-signal"], &[("GPUSPY_FLUSH_S", "0")], out.path())
        .spawn()
        .unwrap();
    assert_eq!(wait(&mut child).signal(), Some(libc::SIGTERM));
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1);
    assert_eq!(launches(&dump(&dumps[0])), 50);
}

#[test]
fn abort_keeps_the_dump() {
    let out = tempfile::tempdir().unwrap();
    let mut child = hardening(&["abort"], &[("GPUSPY_FLUSH_S", "0")], out.path())
        .spawn()
        .unwrap();
    assert_eq!(wait(&mut child).signal(), Some(libc::SIGABRT));
    let dumps = entries(out.path());
    assert_eq!(dumps.len(), 1);
    let d = dump(&dumps[0]);
    assert_eq!(launches(&d), 50);
    assert_eq!(d["ended_by"]["signal"], libc::SIGABRT);
}

#[test]
fn the_programs_own_signal_handler_keeps_working() {
    // Installed before the first driver call (gpuspy leaves it alone) or after (it replaces
    // gpuspy's): either way the program's handler runs, and its _exit writes the dump.
    for when in ["before", "after"] {
        let (status, stdout, d) = signalled(&["own-handler", when], libc::SIGTERM);
        assert_eq!(status.code(), Some(3), "{when}");
        assert_eq!(stdout, "handled\n", "{when}");
        assert_eq!(launches(&d), 50, "{when}");
        assert_eq!(d["ended_by"], Value::Null, "{when}");
    }
}

/// Every libc way for a program to send itself (or its process group) a signal that ends
/// it keeps the dump, and the program dies of that signal: with gpuspy's handler in place,
/// and after the program has set the signal back to the default (as Python does after
/// Ctrl-C), when no handler of gpuspy's runs.
#[test]
fn every_way_of_signalling_itself_keeps_the_dump() {
    let forms = [
        ("kill-pid", libc::SIGTERM),
        ("kill-0", libc::SIGTERM),
        ("kill-group", libc::SIGTERM),
        ("killpg", libc::SIGHUP),
        ("raise", libc::SIGINT),
        ("tgkill", libc::SIGINT),
        ("pthread_kill", libc::SIGINT),
        ("sigqueue", libc::SIGTERM),
        ("pthread_sigqueue", libc::SIGHUP),
    ];
    for (form, signal) in forms {
        for disposition in ["as-is", "default"] {
            let case = format!("{form} ({disposition})");
            let out = tempfile::tempdir().unwrap();
            let mut cmd = with_default_signals(
                "self_signal",
                &[form, disposition, &signal.to_string()],
                &[("GPUSPY_FLUSH_S", "0")],
                out.path(),
            );
            // A group of its own: kill(0) and killpg reach no process of the test run.
            let output = cmd.process_group(0).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.signal(), Some(signal), "{case}: {stderr}");
            let dumps = entries(out.path());
            assert_eq!(dumps.len(), 1, "{case}: {dumps:?}");
            let d = dump(&dumps[0]);
            assert_eq!(launches(&d), 50, "{case}");
            assert_eq!(d["ended_by"]["signal"], signal, "{case}");
            assert_eq!(d["complete"], true, "{case}");
        }
    }
}

#[test]
fn secret_option_values_never_reach_the_dump() {
    let args = [
        "10",
        "1",
        "--password=hunter2",
        "--api-key",
        "k3y-value",
        "--tokenizer",
        "gpt2",
    ];
    let full = run("linked", &args, &[]);
    let raw = std::fs::read_to_string(&full.dumps()[0]).unwrap();
    assert!(!raw.contains("hunter2") && !raw.contains("k3y-value"));
    let cmdline = &dump(&full.dumps()[0])["process"]["cmdline"];
    assert_eq!(
        cmdline.as_array().unwrap()[1..],
        [
            "10",
            "1",
            "--password=<redacted>",
            "--api-key",
            "<redacted>",
            "--tokenizer",
            "gpt2"
        ]
    );
    let bare = run("linked", &args, &[("GPUSPY_CMDLINE", "0")]);
    let cmdline = dump(&bare.dumps()[0])["process"]["cmdline"].clone();
    assert_eq!(cmdline.as_array().unwrap().len(), 1, "{cmdline}");
    assert!(cmdline[0].as_str().unwrap().ends_with("/linked"));
}

/// Runs `linked` with GPUSPY_OUT=out: (its dumps there, gpuspy's warning if any).
fn linked_into(out: &Path) -> (usize, String) {
    let output = command(&program("linked"), &["10", "1"], &[], out)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("linked: done"));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let dumps = dumps_in(out).len();
    (dumps, stderr)
}

#[test]
fn an_output_directory_others_control_is_refused_and_the_program_runs_on() {
    use std::os::unix::fs::{chown, lchown, PermissionsExt};
    let set_mode = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let top = tempfile::tempdir().unwrap();
    // Writable by every user, no sticky bit: refused; with the sticky bit: used.
    let open = top.path().join("open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    let (dumps, warning) = linked_into(&open);
    assert_eq!(dumps, 0);
    assert!(warning.contains("no sticky bit"), "{warning}");
    // `gpuspy run` applies the same rule before it starts the job.
    let refused = gpuspy_cmd(&[
        "run",
        "-o",
        s(&open),
        "--",
        s(&program("linked")),
        "10",
        "1",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no sticky bit"));
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("linked: done"));
    set_mode(&open, 0o1777);
    assert_eq!(linked_into(&open), (1, String::new()));
    // A symlink of this user's to a directory of this user's is followed.
    let target = top.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let link = top.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_eq!(linked_into(&link).0, 1);
    assert_eq!(entries(&target).len(), 1);

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: the cases owned by another user are skipped");
        return;
    }
    let nobody = Some(65534);
    let theirs = top.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chown(&theirs, nobody, nobody).unwrap();
    let (dumps, warning) = linked_into(&theirs);
    assert_eq!(dumps, 0);
    assert!(
        warning.contains("belongs to another user (uid 65534)"),
        "{warning}"
    );
    let their_link = top.path().join("their-link");
    std::os::unix::fs::symlink(&target, &their_link).unwrap();
    lchown(&their_link, nobody, nobody).unwrap();
    let (_, warning) = linked_into(&their_link);
    assert!(
        warning.contains("symbolic link owned by another user"),
        "{warning}"
    );
    assert_eq!(
        entries(&target).len(),
        1,
        "nothing new written through their link"
    );
}

/// The unprivileged users of the multi-user cases.
const ATTACKER: u32 = 1001;
const VICTIM: u32 = 1002;

/// Whether the multi-user cases can run here (as root, with setpriv allowed to switch
/// users); if not, why is printed and the test counts as skipped.
fn multi_user(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let why = if unsafe { libc::geteuid() } != 0 {
        "not root".to_string()
    } else {
        match as_user(ATTACKER, Path::new("true")).status() {
            Ok(s) if s.success() => return true,
            Ok(s) => format!("setpriv cannot switch users here ({s})"),
            Err(e) => format!("no setpriv: {e}"),
        }
    };
    eprintln!("skipped {test}: {why}");
    false
}

/// `exe` run as user `uid` with no supplementary groups.
fn as_user(uid: u32, exe: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .args(["--clear-groups", "--"])
        .arg(exe)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("TMPDIR")
        .env_remove("GITHUB_ACTIONS");
    cmd
}

/// A directory every user may enter, with `name` in it owned by `uid` with `mode`.
fn shared_with(top: &Path, name: &str, uid: u32, mode: u32) -> PathBuf {
    use std::os::unix::fs::{chown, PermissionsExt};
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = top.join(name);
    std::fs::create_dir(&dir).unwrap();
    chown(&dir, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

/// gpuspy and libgpuspy.so copied under a path ld.so would split at its space.
fn spaced_install(top: &Path) -> PathBuf {
    let install = top.join("my space");
    std::fs::create_dir(&install).unwrap();
    for file in ["gpuspy", "libgpuspy.so"] {
        std::fs::copy(artifacts().bin_dir.join(file), install.join(file)).unwrap();
    }
    install
}

#[test]
fn the_preload_link_outlives_the_job_and_no_other_user_can_replace_it() {
    use std::os::unix::fs::MetadataExt;
    if !multi_user("the_preload_link_outlives_the_job") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let install = spaced_install(top.path());
    let home = shared_with(top.path(), "victim", VICTIM, 0o755);
    let seen = home.join("preload");
    let out = as_user(VICTIM, &install.join("gpuspy"))
        .args(["run", "-o", s(&home.join("out")), "--", "sh", "-c"])
        .arg(r#"printf %s "$LD_PRELOAD" > "$SEEN" && exec "$0" 3 1"#)
        .arg(program("linked"))
        .env("HOME", &home)
        .env("SEEN", &seen)
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("1 dump(s) of this run"), "{stderr}");
    let preloaded = PathBuf::from(std::fs::read_to_string(&seen).unwrap());
    let dir = home.join(".cache/gpuspy");
    assert_eq!(preloaded.parent(), Some(dir.as_path()));
    // The job is over; the link stays for what it may have left behind, in a directory of
    // the victim's that nobody else may write to.
    let shim = install.join("libgpuspy.so");
    assert_eq!(std::fs::read_link(&preloaded).unwrap(), shim);
    let meta = std::fs::metadata(&dir).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (VICTIM, 0o700));
    let attack = as_user(ATTACKER, Path::new("sh"))
        .args(["-c", r#"mkdir -p "$1" && ln -sfn /tmp/evil.so "$2""#, "sh"])
        .args([&dir, &preloaded])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!attack.success());
    assert_eq!(std::fs::read_link(&preloaded).unwrap(), shim);
}

#[test]
fn a_tmpdir_others_may_write_is_never_used_for_the_preload_link() {
    let top = tempfile::tempdir().unwrap();
    let install = spaced_install(top.path());
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let shared = shared_with(top.path(), "shared", me, 0o777);
    let out = Command::new(install.join("gpuspy"))
        .args(["run", "-o", s(&top.path().join("out")), "--"])
        .arg(program("linked"))
        .args(["3", "1"])
        .env_remove("HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_CACHE_HOME")
        .env("TMPDIR", &shared)
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let why = format!(
        "{}/gpuspy-{me}: {} above it may be written by other users (mode 777)",
        shared.display(),
        shared.display()
    );
    assert!(stderr.contains(&why), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("linked: done"));
    assert_eq!(entries(&shared), Vec::<PathBuf>::new());
}

#[test]
fn a_prometheus_directory_others_may_write_is_refused() {
    let top = tempfile::tempdir().unwrap();
    let shared = shared_with(top.path(), "shared", 0, 0o1777);
    let out = top.path().join("out");
    let refused = gpuspy_cmd(&[
        "run",
        "--prom",
        s(&shared),
        "-o",
        s(&out),
        "--",
        s(&program("linked")),
        "3",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "gpuspy: cannot write Prometheus files to {}: it may be written by other users \
             (mode 1777); choose another directory with --prom\n",
            shared.display()
        )
    );
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("linked: done"));
    // The shim holds GPUSPY_PROM_DIR to the same rule.
    let direct = command(
        &program("linked"),
        &["3", "1"],
        &[("GPUSPY_PROM_DIR", s(&shared))],
        &out,
    )
    .output()
    .unwrap();
    assert!(direct.status.success());
    let warning = String::from_utf8_lossy(&direct.stderr);
    assert!(
        warning.contains(&format!(
            "cannot write Prometheus metrics to {}: it may be written by other users (mode \
             1777); set GPUSPY_PROM_DIR (gpuspy run --prom) to a directory of your own",
            shared.display()
        )),
        "{warning}"
    );
    assert_eq!(entries(&shared), Vec::<PathBuf>::new());
    assert_eq!(dumps_in(&out).len(), 1);
}

#[test]
fn dumps_are_readable_by_their_user_alone() {
    use std::os::unix::fs::PermissionsExt;
    let top = tempfile::tempdir().unwrap();
    let out = shared_with(top.path(), "out", 0, 0o755);
    let (dumps, _) = linked_into(&out);
    assert_eq!(dumps, 1);
    let dump = &dumps_in(&out)[0];
    let mode = std::fs::metadata(dump).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o600);
    if multi_user("dumps_are_readable_by_their_user_alone, by another user") {
        let read = as_user(ATTACKER, Path::new("cat"))
            .arg(dump)
            .output()
            .unwrap();
        assert!(!read.status.success());
        assert!(!String::from_utf8_lossy(&read.stdout).contains("run_token"));
    }
}

#[test]
fn an_output_directory_made_inside_another_users_directory_is_refused() {
    if !multi_user("an_output_directory_made_inside_another_users_directory") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    // A scratch directory anyone may write to, but its owner may rename anything in it.
    let theirs = shared_with(top.path(), "scratch", ATTACKER, 0o1777);
    let why = format!(
        "{} above it belongs to another user (uid {ATTACKER})",
        theirs.display()
    );
    let out = theirs.join("out");
    let refused = as_user(VICTIM, &gpuspy())
        .args(["run", "-o", s(&out), "--", s(&program("linked")), "3", "1"])
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&why), "{stderr}");
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("linked: done"));
    // The shim refuses it too, and the program runs on.
    let direct = as_user(VICTIM, &program("linked"))
        .args(["3", "1"])
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env("LD_PRELOAD", shim())
        .env("GPUSPY_OUT", &out)
        .output()
        .unwrap();
    assert!(direct.status.success());
    let warning = String::from_utf8_lossy(&direct.stderr);
    assert!(warning.contains(&why), "{warning}");
    assert!(!out.exists());
}

#[test]
fn the_reader_names_the_other_user_whose_directory_and_dumps_it_reads() {
    if !multi_user("the_reader_names_the_other_user") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let theirs = shared_with(top.path(), "theirs", ATTACKER, 0o755);
    let wrote = as_user(ATTACKER, Path::new("sh"))
        .args(["-c", r#""$0" 3 1 && chmod 644 "$GPUSPY_OUT"/*.json"#])
        .arg(program("linked"))
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env("LD_PRELOAD", shim())
        .env("GPUSPY_OUT", &theirs)
        .output()
        .unwrap();
    assert!(wrote.status.success(), "{wrote:?}");
    assert_eq!(dumps_in(&theirs).len(), 1);
    let read = as_user(VICTIM, &gpuspy())
        .args(["report", "--json"])
        .arg(&theirs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&read.stderr);
    assert!(read.status.success(), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "gpuspy: warning: dumps of another user, in that user's directory (every figure \
             from them is theirs to choose): {} (uid {ATTACKER})\n",
            theirs.display()
        )
    );
    let report: Value = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(count(&report, "cuLaunchKernel"), 3);
}
