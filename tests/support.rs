//! Shared test plumbing: builds the shim and the fake driver, compiles the C programs, runs
//! them under the shim and reads the report.

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

pub struct Artifacts {
    /// target/<profile>: gpuspy, libgpuspy.so, the fake libcuda.so.
    pub bin_dir: PathBuf,
    /// A directory holding only the fake driver (libcuda.so.1, libcuda.so) and the fake
    /// NCCL (libnccl.so.2, libnccl.so).
    pub driver_dir: PathBuf,
    /// The fake CUPTI (libcupti.so.13, libcupti.so), apart: only the programs linked with
    /// it (named cupti*) load it, and gpuspy must find it in no other process unless a
    /// test puts it somewhere.
    pub cupti_dir: PathBuf,
    /// The fake libnvidia-ml.so.1.
    pub nvml_dir: PathBuf,
}

pub fn gpuspy() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gpuspy"))
}

/// Builds libgpuspy.so and the fake driver with the same profile as this test run.
pub fn artifacts() -> &'static Artifacts {
    static ARTIFACTS: OnceLock<Artifacts> = OnceLock::new();
    ARTIFACTS.get_or_init(|| {
        let bin_dir = gpuspy().parent().unwrap().to_path_buf();
        let mut build = Command::new(env!("CARGO"));
        build.args([
            "build",
            "-q",
            "-p",
            "gpuspy-shim",
            "-p",
            "fakecuda",
            "-p",
            "fakenccl",
            "-p",
            "fakecupti",
            "-p",
            "fakenvml",
        ]);
        if bin_dir.ends_with("release") {
            build.arg("--release");
        }
        let status = build.status().expect("cargo build");
        assert!(
            status.success(),
            "building the shim and the fake driver failed"
        );
        let driver_dir = bin_dir.join("fake-driver");
        let cupti_dir = bin_dir.join("fake-cupti");
        for (dir, built, names) in [
            (&driver_dir, "libcuda.so", ["libcuda.so.1", "libcuda.so"]),
            (&driver_dir, "libnccl.so", ["libnccl.so.2", "libnccl.so"]),
            (&cupti_dir, "libcupti.so", ["libcupti.so.13", "libcupti.so"]),
        ] {
            std::fs::create_dir_all(dir).unwrap();
            for name in names {
                let dst = dir.join(name);
                let _ = std::fs::remove_file(&dst);
                std::fs::copy(bin_dir.join(built), &dst).unwrap();
            }
        }
        // A libcupti left in the driver's folder by an older layout would be found on the
        // library path.
        for name in ["libcupti.so.13", "libcupti.so"] {
            let _ = std::fs::remove_file(driver_dir.join(name));
        }
        // NVML in a directory of its own: only the tests that put it on the library path
        // see it (`with_fake_nvml`).
        let nvml_dir = bin_dir.join("fake-nvml");
        std::fs::create_dir_all(&nvml_dir).unwrap();
        let nvml = nvml_dir.join("libnvidia-ml.so.1");
        let _ = std::fs::remove_file(&nvml);
        std::fs::copy(bin_dir.join("libnvidia_ml.so"), &nvml).unwrap();
        Artifacts {
            bin_dir,
            driver_dir,
            cupti_dir,
            nvml_dir,
        }
    })
}

/// `LD_LIBRARY_PATH` with the fake NVML beside the fake driver.
pub fn with_fake_nvml() -> String {
    let a = artifacts();
    format!("{}:{}", a.driver_dir.display(), a.nvml_dir.display())
}

pub fn shim() -> PathBuf {
    artifacts().bin_dir.join("libgpuspy.so")
}

/// Compiles tests/programs/NAME.c (or examples/NAME.c) against the fake driver, once per
/// test run.
pub fn program(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap();
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let a = artifacts();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = ["tests/programs", "examples"]
        .iter()
        .map(|dir| root.join(dir).join(format!("{name}.c")))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no program {name}.c"));
    let exe = a.bin_dir.join("test-programs").join(name);
    let driver = a.driver_dir.display();
    let mut libs = vec![
        format!("-L{driver}"),
        "-lcuda".into(),
        "-lnccl".into(),
        "-ldl".into(),
        "-lpthread".into(),
    ];
    // Only programs named cupti* load the fake CUPTI (from its folder, through their run
    // path): in the others gpuspy finds none.
    if name.starts_with("cupti") {
        let dir = a.cupti_dir.display();
        libs.extend([
            format!("-L{dir}"),
            "-lcupti".into(),
            format!("-Wl,-rpath,{dir}"),
        ]);
    }
    compile(&src, &exe, &libs);
    built.insert(name.to_string(), exe.clone());
    exe
}

pub struct Run {
    pub output: Output,
    pub out_dir: tempfile::TempDir,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn dumps(&self) -> Vec<PathBuf> {
        dumps_in(self.out_dir.path())
    }

    pub fn report(&self) -> Value {
        report_json(&[self.out_dir.path()])
    }
}

/// The dumps in `dir`, sorted, named as the CLI reads them (a process killed while writing
/// may leave a `.gpuspy-*.tmp` file, which is not one).
pub fn dumps_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().path())
            .filter(|p| gpuspy::is_dump_name(p))
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// A command with the fake driver on the library path and the shim preloaded.
pub fn command(exe: &Path, args: &[&str], env: &[(&str, &str)], out_dir: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env("LD_PRELOAD", shim())
        .env("GPUSPY_OUT", out_dir)
        .env_remove("FAKECUDA_DELAY_NS")
        .env_remove("FAKECUDA_FAIL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

pub fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out_dir = tempfile::tempdir().unwrap();
    let output = command(&program(name), args, env, out_dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{name} failed: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Run { output, out_dir }
}

/// `gpuspy report PATH`, the text.
pub fn report_text(path: &Path) -> String {
    let out = Command::new(gpuspy())
        .arg("report")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn report_json(paths: &[&Path]) -> Value {
    let out = Command::new(gpuspy())
        .arg("report")
        .arg("--json")
        .args(paths)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report --json prints one JSON object")
}

/// The row of `api` (a base name) in a report, or panics listing what is there.
pub fn api<'a>(report: &'a Value, name: &str) -> &'a Value {
    let apis = report["apis"].as_array().unwrap();
    apis.iter().find(|a| a["api"] == name).unwrap_or_else(|| {
        let names: Vec<_> = apis.iter().map(|a| a["api"].to_string()).collect();
        panic!("no {name} in report; apis: {}", names.join(", "))
    })
}

pub fn count(report: &Value, name: &str) -> u64 {
    api(report, name)["count"].as_u64().unwrap()
}

/// Exact variant counts of one API, as `[(symbol, count)]`.
pub fn symbols(report: &Value, name: &str) -> Vec<(String, u64)> {
    api(report, name)["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["symbol"].as_str().unwrap().to_string(),
                s["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

pub fn sync(report: &Value, cause: &str) -> Option<u64> {
    report["syncs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["cause"] == cause)
        .map(|s| s["count"].as_u64().unwrap())
}

/// `(calls, bytes)` of copies in one direction from one kind of host memory.
pub fn copies(report: &Value, direction: &str, host: &str) -> (u64, u64) {
    report["copies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["direction"] == direction && c["host"] == host)
        .map(|c| (c["count"].as_u64().unwrap(), c["bytes"].as_u64().unwrap()))
        .unwrap_or((0, 0))
}

/// One run of the simulated training step (examples/simulated_step.c, 300 steps) with
/// `cuStreamSynchronize` taking `sync_us`, dumped into `dir`.
pub fn step_run(dir: &Path, sync_us: u64) {
    paced_run(dir, 300, sync_us);
}

/// `steps` steps of the simulated training step with `cuStreamSynchronize` taking `sync_us`
/// and each launch 2 us, dumped into `dir`.
pub fn paced_run(dir: &Path, steps: u32, sync_us: u64) {
    let delay = format!("cuStreamSynchronize={},cuLaunchKernel=2000", sync_us * 1000);
    let steps = steps.to_string();
    let status = command(
        &program("simulated_step"),
        &[&steps],
        // The GPU-side sources stay closed: nothing to collect here, and less noise.
        &[
            ("FAKECUDA_DELAY_NS", &delay),
            ("GPUSPY_CUPTI", "0"),
            ("GPUSPY_NVML_MS", "0"),
        ],
        dir,
    )
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert!(status.success());
}

/// gpuspy with ARGS, outside GitHub Actions.
pub fn gpuspy_cmd(args: &[&str]) -> Output {
    Command::new(gpuspy())
        .args(args)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A checked-in dump, from tests/data.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Unix ns of the crafted dumps' second 0.
pub const EPOCH_NS: u64 = 1_795_960_800_000_000_000;

/// A dump of process `pid` on host `node`, started `start_s` seconds after `EPOCH_NS` and
/// dumped at `stop_s`, whose only calls are `launches` cuLaunchKernel calls of 1 us.
pub fn crafted_dump(pid: u32, start_s: u64, stop_s: u64, launches: u64) -> gpuspy_format::Dump {
    use gpuspy_format::{hist, ApiRecord, Histogram};
    let mut d: gpuspy_format::Dump =
        serde_json::from_slice(&std::fs::read(data("h200-torch-pageable.json")).unwrap()).unwrap();
    d.process.pid = pid;
    d.process.host = "node".into();
    d.start_unix_ns = EPOCH_NS + start_s * 1_000_000_000;
    d.stop_unix_ns = EPOCH_NS + stop_s * 1_000_000_000;
    d.first_call_unix_ns = d.start_unix_ns;
    d.driver_ns = launches.saturating_mul(1_000);
    d.apis = vec![ApiRecord {
        symbol: "cuLaunchKernel".into(),
        calls: launches,
        nested: 0,
        total_ns: d.driver_ns,
        max_ns: 1_000,
        bytes: 0,
        results: vec![],
        hist: Histogram(vec![(hist::bucket_index(1_000) as u32, launches)]),
    }];
    d.syncs.clear();
    d.copies.clear();
    d.unwrapped_symbols.clear();
    d.nccl = None;
    d.gpu = None;
    d
}

/// Writes `dump` as `dir/name`.
pub fn write_dump(dir: &Path, name: &str, dump: &gpuspy_format::Dump) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(dump).unwrap()).unwrap();
    path
}

/// What `run_with_peak_rss` measured of one child.
pub struct Measured {
    pub status: std::process::ExitStatus,
    /// Its stdout, rewound.
    pub stdout: std::fs::File,
    pub max_rss_kib: u64,
    /// Its own user and system CPU time: unlike wall time, not stretched while it waited
    /// for a CPU on a loaded machine.
    pub cpu_s: f64,
}

/// Runs `cmd` to its end, its stdout into a new file, and returns its exit status, that
/// file, its own peak RSS and its CPU time.
///
/// The figures come from wait4 in `peak_rss`, which forks `cmd`'s program from its own small
/// image: a child started straight from this test process would count this process's peak
/// RSS as its own, since the kernel counts the memory of the process that execs, and for
/// posix_spawn that is this one.
pub fn run_with_peak_rss(cmd: &mut Command) -> Measured {
    let stdout = tempfile::tempfile().unwrap();
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut wrapped = Command::new(peak_rss());
    wrapped
        .arg(report.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => wrapped.env(key, v),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    let ran = wrapped
        .stdout(stdout.try_clone().unwrap())
        .stderr(Stdio::inherit())
        .status()
        .unwrap();
    assert!(ran.success(), "peak_rss: {ran:?}");
    let figures = std::fs::read_to_string(report.path()).unwrap();
    let mut words = figures.split_whitespace();
    let mut next = || {
        words
            .next()
            .unwrap_or_else(|| panic!("peak_rss wrote {figures:?}"))
    };
    let status: i32 = next().parse().unwrap();
    let max_rss_kib: u64 = next().parse().unwrap();
    let cpu_s: f64 = next().parse().unwrap();
    let mut stdout = stdout;
    std::io::Seek::rewind(&mut stdout).unwrap();
    Measured {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout,
        max_rss_kib,
        cpu_s,
    }
}

/// tests/programs/peak_rss.c, built once without the fake libraries.
fn peak_rss() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = artifacts().bin_dir.join("test-programs").join("peak_rss");
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/peak_rss.c");
            compile(&src, &exe, &[]);
            exe
        })
        .clone()
}

/// Compiles the C program `src` into `exe` with `$CC` (default `cc`) and the linker
/// arguments `libs`, or fails the test with the compiler's message.
fn compile(src: &Path, exe: &Path, libs: &[String]) {
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O1", "-Wall", "-o"])
        .arg(exe)
        .arg(src)
        .args(libs)
        .output()
        .expect("a C compiler (cc) is needed for the integration tests");
    assert!(
        out.status.success(),
        "cc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` to its end with its output captured, or fails the test if it takes longer
/// than `limit` (then kills it: a command that hangs must not hang the tests).
pub fn output_within(cmd: &mut Command, limit: std::time::Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{cmd:?} still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
