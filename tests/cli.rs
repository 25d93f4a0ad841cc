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
        .args(["run", "--json", "-", "-o"])
        .arg(out.path())
        .arg("--")
        .arg(program("linked"))
        .args(["25", "2"])
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The program printed to its stdout; with `--json -` that went to stderr, and stdout
    // holds exactly one JSON document.
    assert!(stderr.contains("linked: done"), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(count(&r, "cuLaunchKernel"), 25);
    assert_eq!(r["findings"], serde_json::json!([]));

    // `--json FILE`: the program's stdout stays where it was, the report is in FILE.
    let file = out.path().join("report.json");
    let output = Command::new(gpuspy())
        .args(["run", "--json", s(&file), "-o"])
        .arg(out.path())
        .arg("--")
        .arg(program("linked"))
        .args(["12", "1"])
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), "linked: done\n");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(count(&r, "cuLaunchKernel"), 12);

    // A FILE that cannot be written is refused before the command runs.
    let ran = out.path().join("ran");
    let refused = Command::new(gpuspy())
        .args([
            "run",
            "--json",
            "/no/such/dir/report.json",
            "--",
            "touch",
            s(&ran),
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .starts_with("gpuspy: --json: /no/such/dir/report.json: cannot write"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!ran.exists());

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

/// A program linked with `-lcuda` on a machine without the driver: the loader refuses to
/// start it (exit 127, its message on stderr), and gpuspy says the driver library was not
/// found rather than that the program may have run on the CPU.
#[test]
fn a_missing_driver_library_is_named() {
    artifacts();
    let empty = tempfile::tempdir().unwrap();
    let installed = ["/lib64", "/usr/lib64", "/lib", "/usr/lib"]
        .iter()
        .any(|d| std::path::Path::new(d).join("libcuda.so.1").exists())
        || std::fs::read("/etc/ld.so.cache")
            .is_ok_and(|c| c.windows(13).any(|w| w == b"libcuda.so.1\0"));
    if installed {
        eprintln!("skipped: this machine has a CUDA driver, so the program would load it");
        return;
    }
    let output = Command::new(gpuspy())
        .args(["run", "-o"])
        .arg(empty.path().join("out"))
        .arg("--")
        .arg(program("linked"))
        .args(["1", "1"])
        .env("LD_LIBRARY_PATH", empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(127), "{stderr}");
    assert!(
        stderr.contains("libcuda.so.1: cannot open shared object file"),
        "{stderr}"
    );
    assert!(stderr.contains("wrote no dump of this run: the driver library was not found: libcuda.so.1 is in neither LD_LIBRARY_PATH"), "{stderr}");
    assert!(!stderr.contains("CPU"), "{stderr}");
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

/// Every checked-in dump still loads after a schema change: tests/data holds dumps of
/// schemas 1 and 2, none with the `tool_build` that schema 3 added, and a schema-2 dump
/// recorded on the H200 is reported as before.
#[test]
fn dumps_of_older_schemas_still_load() {
    fn dumps(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dumps(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    dumps(&data(""), &mut paths);
    let mut versions = std::collections::BTreeSet::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let dump =
            gpuspy_format::parse_dump(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // `tool_build` came with schema 3.
        if dump.schema_version < 3 {
            assert_eq!(dump.tool_build, None, "{}", path.display());
        }
        versions.insert(dump.schema_version);
    }
    assert_eq!(versions, [1, 2, gpuspy_format::SCHEMA_VERSION].into());
    let r = report_json(&[&data("h200-triton-deep-queue.json")]);
    assert_eq!(count(&r, "cuLaunchKernelEx"), 2000);
}

/// `gpuspy report PATH` within 10 s (a hang fails the test): exit code and stderr.
fn report_within(path: &std::path::Path) -> (Option<i32>, String) {
    let out = output_within(
        Command::new(gpuspy()).arg("report").arg(path),
        std::time::Duration::from_secs(10),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

#[test]
fn a_fifo_or_device_named_like_a_dump_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("gpuspy-x.json");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
    let zero_dir = tempfile::tempdir().unwrap();
    let zero = zero_dir.path().join("gpuspy-zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for path in [&fifo, dir.path(), &zero, zero_dir.path()] {
        let (code, stderr) = report_within(path);
        assert_eq!(code, Some(2), "{path:?}: {stderr}");
        let target = if path.starts_with(dir.path()) {
            &fifo
        } else {
            &zero
        };
        assert_eq!(
            stderr,
            format!(
                "gpuspy: {}: not a regular file (a FIFO, device or directory); gpuspy reads only dump files\n",
                target.display()
            )
        );
    }
}

#[test]
fn a_file_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("gpuspy-big.json");
    // Sparse: 300 MiB that take no disk.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let (code, stderr) = report_within(dir.path());
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr,
        format!(
            "gpuspy: {}: 300 MiB, larger than a gpuspy dump can be (256 MiB)\n",
            big.display()
        )
    );
}

/// Writes `dump` as `path` with `items` streamed into its list `field` (empty in `dump`),
/// so that this process never holds the file in memory (see `run_with_peak_rss`).
fn write_with_long_list<T: serde::Serialize>(
    path: &std::path::Path,
    dump: &gpuspy_format::Dump,
    field: &str,
    items: impl Iterator<Item = T>,
) -> u64 {
    use std::io::Write;
    let text = serde_json::to_string(dump).unwrap();
    let (head, tail) = text.split_once(&format!("\"{field}\":[]")).unwrap();
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(w, "{head}\"{field}\":[").unwrap();
    for (i, item) in items.enumerate() {
        if i > 0 {
            w.write_all(b",").unwrap();
        }
        serde_json::to_writer(&mut w, &item).unwrap();
    }
    write!(w, "]{tail}").unwrap();
    w.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Hostile dumps of 20 MB, one of 170,000 distinct symbols and one of 1.5 million names
/// looked up, cost at most 4 times their size plus 64 MiB to report on, as text and as
/// JSON. (Through `serde_json::Value` and a dense histogram per API it took over 100 times
/// the size.)
#[test]
fn memory_stays_within_four_times_a_large_dump() {
    const SYMBOLS: usize = 170_000;
    const NAMES: usize = 1_500_000;
    let dir = tempfile::tempdir().unwrap();
    let mut dump = crafted_dump(7, 0, 10, 5);
    let launches = std::mem::take(&mut dump.apis).remove(0);
    let apis = dir.path().join("gpuspy-apis.json");
    let fakes = (0..SYMBOLS).map(|i| gpuspy_format::ApiRecord {
        symbol: format!("cuFake{i:07}"),
        calls: 3,
        hist: gpuspy_format::Histogram(vec![(100, 1), (200, 2)]),
        ..launches.clone()
    });
    let apis_size = write_with_long_list(
        &apis,
        &dump,
        "apis",
        std::iter::once(launches.clone()).chain(fakes),
    );
    dump.apis = vec![launches];
    let names = dir.path().join("gpuspy-names.json");
    let names_size = write_with_long_list(
        &names,
        &dump,
        "unwrapped_symbols",
        (0..NAMES).map(|i| format!("cuX{i:07}")),
    );
    // Every report first, so that this process holds none of them while one runs.
    let mut reports = Vec::new();
    for (path, size) in [(&apis, apis_size), (&names, names_size)] {
        assert!(size > 19_000_000, "{size} bytes");
        for json in [false, true] {
            let mut cmd = Command::new(gpuspy());
            cmd.arg("report").args(json.then_some("--json")).arg(path);
            let Measured {
                status,
                stdout,
                max_rss_kib: peak_kib,
                ..
            } = run_with_peak_rss(&mut cmd);
            assert_eq!(status.code(), Some(0), "{path:?} json {json}");
            eprintln!(
                "{size} bytes, json {json}: peak RSS {} MiB",
                peak_kib / 1024
            );
            let limit_kib = (4 * size + (64 << 20)) / 1024;
            assert!(
                peak_kib < limit_kib,
                "{path:?} json {json}: peak {peak_kib} KiB, limit {limit_kib} KiB"
            );
            reports.push(std::io::BufReader::new(stdout));
        }
    }
    // Read without building what is not checked: this process must stay small while the
    // other tests' children run (see run_with_peak_rss).
    let mut reports = reports.into_iter();
    let mut apis_text = std::io::BufRead::lines(reports.next().unwrap()).map(Result::unwrap);
    assert!(apis_text
        .next()
        .unwrap()
        .starts_with("gpuspy report: 1 process, "));
    assert_eq!(
        apis_text.filter(|l| l.starts_with("  cuFake")).count(),
        SYMBOLS
    );
    let r: Large = serde_json::from_reader(reports.next().unwrap()).unwrap();
    assert_eq!(r.apis.len(), SYMBOLS + 1);
    let count = |name: &str| r.apis.iter().find(|a| a.api == name).unwrap().count;
    assert_eq!((count("cuFake0123456"), count("cuLaunchKernel")), (3, 5));
    let names_text = std::io::read_to_string(reports.next().unwrap()).unwrap();
    assert!(
        names_text.contains("\n1500000 driver entry points were looked up but are not wrapped (calls to them are not counted): cuX0000000, cuX0000001, "),
        "{names_text}"
    );
    let r: Large = serde_json::from_reader(reports.next().unwrap()).unwrap();
    assert_eq!(r.unwrapped_symbols.len(), NAMES);
}

/// The parts of a large `report --json` that the test checks.
#[derive(serde::Deserialize)]
struct Large {
    apis: Vec<ApiCount>,
    unwrapped_symbols: Vec<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct ApiCount {
    api: String,
    count: u64,
}

/// A pipe whose reader is gone: stdout's read end closed before gpuspy writes.
fn closed_pipe() -> std::process::Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into fds.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are new and owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write.into()
}

/// `gpuspy explain | true`, `gpuspy report DIR | head`: gpuspy dies of SIGPIPE, as Unix
/// tools do, instead of panicking with exit 101.
#[test]
fn a_closed_pipe_ends_gpuspy_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dump = data("h200-torch-pageable.json");
    for args in [
        vec!["explain"],
        vec!["report", s(&dump)],
        vec!["report", "--json", s(&dump)],
    ] {
        let out = Command::new(gpuspy())
            .args(&args)
            .stdout(closed_pipe())
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}");
    }
}

/// Sets a terminal title, clears the screen, writes the clipboard (OSC 52), sets red by
/// the one-byte CSI, then starts a forged line.
const HOSTILE: &str =
    "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m\r\nFAKE LINE\u{7f}";

/// The H200 dump with `HOSTILE` in every string a text output shows: host, program and
/// command line, kernel, device and NVTX names, call sites, NVML and CUPTI notes, names
/// looked up.
fn hostile_dump() -> serde_json::Value {
    let mut d: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("h200-sync-records-missing.json")).unwrap())
            .unwrap();
    let h = || serde_json::Value::from(HOSTILE);
    d["process"]["host"] = h();
    d["process"]["exe"] = h();
    d["process"]["cmdline"] = serde_json::json!(["python3", HOSTILE]);
    d["unwrapped_symbols"] = serde_json::json!([HOSTILE]);
    for site in d["call_sites"]["sites"].as_array_mut().unwrap() {
        for frame in site["frames"].as_array_mut().unwrap() {
            frame["file"] = h();
            frame["function"] = h();
        }
    }
    d["gpu"]["nvml"]["note"] = h();
    d["gpu"]["cupti"]["note"] = h();
    let device = &mut d["gpu"]["devices"][0];
    device["facts"]["name"] = h();
    for k in device["activity"]["top_kernels"].as_array_mut().unwrap() {
        k["name"] = h();
    }
    let start = d["start_unix_ns"].as_u64().unwrap();
    d["timeline"]["nvtx"] = serde_json::json!([{"name": HOSTILE, "count": 10, "outermost": 10,
        "total_ns": 1_000_000, "first_start_unix_ns": start, "last_end_unix_ns": start + 1_000_000,
        "ns": [], "ends": []}]);
    d["timeline"]["nvtx_recent"] = serde_json::json!([{"name": HOSTILE, "start_unix_ns": start, "end_unix_ns": start + 1_000}]);
    d
}

/// Whether `text` holds no control character but the newlines between its lines, and no
/// line the hostile string forged.
fn terminal_safe(text: &str) -> bool {
    text.chars().all(|c| c == '\n' || !c.is_control())
        && !text.lines().any(|l| l.starts_with("FAKE LINE"))
}

/// Terminal escape sequences and newlines in a dump's strings reach the text outputs
/// escaped (`\x1b`, `\u{9b}`): the report, `check` and `diff`, and one-line errors. `--json`
/// keeps them, JSON-escaped.
#[test]
fn terminal_escapes_in_dumps_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("gpuspy-hostile.json");
    std::fs::write(&dump, serde_json::to_vec(&hostile_dump()).unwrap()).unwrap();
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuStreamSynchronize]\nmax_per_run = 1\n").unwrap();
    let escaped =
        "\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\u{9b}31m\\x0d\\x0aFAKE LINE\\x7f";
    for args in [
        vec!["report", s(&dump)],
        vec!["report", "--per-process", s(&dump)],
        vec!["check", s(&dump), "--budget", s(&budget)],
        vec!["diff", s(&dump), s(&dump)],
    ] {
        let out = gpuspy_cmd(&args);
        let (stdout, stderr) = (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        );
        assert!(terminal_safe(&stdout), "{args:?}: {stdout:?}");
        assert!(terminal_safe(&stderr), "{args:?}: {stderr:?}");
        if args[0] == "report" {
            assert!(stdout.contains(escaped), "{args:?}: {stdout}");
        }
    }
    let json = gpuspy_cmd(&["report", "--json", s(&dump)]);
    let r: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(r["processes"][0]["host"], HOSTILE);

    // An error naming a file, and quoting a dump's value, is one escaped line.
    let mut bad = hostile_dump();
    bad["syncs"][0]["cause"] = HOSTILE.into();
    let named = dir.path().join(format!("gpuspy-{}.json", &HOSTILE[..14]));
    std::fs::write(&named, serde_json::to_vec(&bad).unwrap()).unwrap();
    let (code, stderr) = report_error(&named);
    assert_eq!(code, 2);
    assert!(terminal_safe(&stderr), "{stderr:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "gpuspy: {}/gpuspy-\\x1b]0;pwned\\x07\\x1b[2J.json: malformed dump (unknown variant `{escaped}`",
            dir.path().display()
        )),
        "{stderr}"
    );
}
