//! Every impact is a share of time in [0, 1] and every printed share of a span is at most
//! 100 %: on every recorded dump in tests/data, on the real-library dumps recorded on an
//! H200 (`REAL_LIBRARY_DUMPS`), and on fuzzed copies of the dump files,
//! whose numbers are scaled, zeroed or pushed to extremes. A fuzzed dump may be refused,
//! with a one-line error and exit 2, but never panics the CLI.

use crate::golden::recorded_inputs;
use crate::support::gpuspy;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The real-library loops (JAX, transformers, Lightning, CuPy, DataLoader workers, ...)
/// recorded on the H200 for issue 36: each archive with the folder in it that holds one
/// directory of dumps per run.
const REAL_LIBRARY_DUMPS: [(&str, &str); 4] = [
    (
        "bench/results/gpu-2026-12-02-reallib-3/dumps.tar.gz",
        "dumps/short",
    ),
    (
        "bench/results/gpu-2026-12-03-reallib-5-long/dumps.tar.gz",
        "dumps/long",
    ),
    (
        "bench/results/gpu-2026-12-03-reallib-6/dumps-short.tar.gz",
        "dumps/short",
    ),
    (
        "bench/results/gpu-2026-12-03-reallib-6/dumps-long.tar.gz",
        "dumps/long",
    ),
];

/// The impacts outside [0, 1] in a report, and the printed shares over 100 %, as messages.
fn out_of_bounds(input: &Path) -> Result<Vec<String>, String> {
    let json = Command::new(gpuspy())
        .args(["report", "--json"])
        .arg(input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&json.stderr);
    match json.status.code() {
        Some(0) => {}
        Some(2) if stderr.lines().count() == 1 && !stderr.contains("panicked") => {
            return Err(stderr.into_owned());
        }
        _ => panic!("{}: {:?}, stderr {stderr}", input.display(), json.status),
    }
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    let mut faults = Vec::new();
    impacts_out_of_bounds(&report, String::new(), &mut faults);
    let text = Command::new(gpuspy())
        .arg("report")
        .arg(input)
        .output()
        .unwrap();
    assert!(
        text.status.success(),
        "{}: text report failed",
        input.display()
    );
    for line in String::from_utf8_lossy(&text.stdout).lines() {
        faults.extend(shares_over_100(line).map(|share| format!("{share} %: {line}")));
    }
    Ok(faults)
}

fn impacts_out_of_bounds(value: &Value, at: String, faults: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, v) in fields {
                if key == "impact" {
                    match v.as_f64() {
                        Some(impact) if (0.0..=1.0).contains(&impact) => {}
                        _ => faults.push(format!("{at}/impact = {v}")),
                    }
                }
                impacts_out_of_bounds(v, format!("{at}/{key}"), faults);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                impacts_out_of_bounds(v, format!("{at}/{i}"), faults);
            }
        }
        _ => {}
    }
}

/// The figures of "N % of it", "N % of the steady state" and the like above 100 in a
/// line: shares of a span, or of a whole (kernel time, samples, a rank's time). ("N % of
/// wall" for time inside the driver across threads, and shares of a peak, may exceed it
/// and are not matched.)
fn shares_over_100(line: &str) -> impl Iterator<Item = f64> + '_ {
    const SPANS: [&str; 12] = [
        " % of it",
        " % of the steady state",
        " % of the run's time",
        " % of the working span",
        " % of the span",
        " % of the GPU working span",
        " % of the wall time",
        " % of the time since",
        " % of kernel time",
        " % of samples",
        " % of their time",
        " % of its own",
    ];
    SPANS.iter().flat_map(move |span| {
        line.match_indices(span).filter_map(move |(end, _)| {
            let figure = line[..end]
                .rsplit(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()?;
            figure.parse::<f64>().ok().filter(|share| *share > 100.0)
        })
    })
}

#[test]
fn shares_over_100_reads_the_figures_before_a_span() {
    let line = "idle 101.5 % of it, busy 99.0 % of the steady state, 250.0 % of wall";
    assert_eq!(shares_over_100(line).collect::<Vec<_>>(), vec![101.5]);
    let line = "Module loading and JIT took 120.0 % of the wall time. Rank 1 waits 3 % of its own.";
    assert_eq!(shares_over_100(line).collect::<Vec<_>>(), vec![120.0]);
}

#[test]
fn impacts_and_shares_are_bounded_on_every_recorded_dump() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut inputs: Vec<PathBuf> = recorded_inputs(root)
        .into_iter()
        .map(|p| root.join(p))
        .collect();
    let real = tempfile::tempdir().unwrap();
    let mut real_inputs = Vec::new();
    for (i, (archive, runs)) in REAL_LIBRARY_DUMPS.iter().enumerate() {
        let into = real.path().join(i.to_string());
        std::fs::create_dir(&into).unwrap();
        let untar = Command::new("tar")
            .arg("-xzf")
            .arg(root.join(archive))
            .arg("-C")
            .arg(&into)
            .status()
            .unwrap();
        assert!(untar.success(), "{archive}");
        let mut these: Vec<PathBuf> = std::fs::read_dir(into.join(runs))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir() && std::fs::read_dir(p).unwrap().next().is_some())
            .collect();
        assert!(these.len() >= 4, "{archive}: {} runs", these.len());
        these.sort();
        real_inputs.extend(these);
    }
    assert!(
        real_inputs.len() >= 60,
        "{} real-library runs",
        real_inputs.len()
    );
    inputs.extend(real_inputs);
    let mut faults = Vec::new();
    for input in &inputs {
        match out_of_bounds(input) {
            Ok(found) => faults.extend(
                found
                    .into_iter()
                    .map(|f| format!("{}: {f}", input.display())),
            ),
            Err(error) => faults.push(format!("{}: refused: {error}", input.display())),
        }
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

/// A deterministic stream of choices (xorshift64*), so that a failure names a case that
/// reproduces.
struct Choices(u64);

impl Choices {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Replaces about one number in `one_in` by zero, its double, its thousandfold, its
/// thousandth or a huge value, keeping integers integers (and within u32 where they were).
fn fuzz_numbers(value: &mut Value, choices: &mut Choices, one_in: u64) {
    match value {
        Value::Object(fields) => fields
            .values_mut()
            .for_each(|v| fuzz_numbers(v, choices, one_in)),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| fuzz_numbers(v, choices, one_in)),
        Value::Number(n) if choices.next().is_multiple_of(one_in) => {
            let pick = choices.next() % 5;
            *value = if let Some(u) = n.as_u64() {
                Value::from(match pick {
                    0 => 0,
                    1 => u.saturating_mul(2),
                    2 if u <= u64::from(u32::MAX) => {
                        u.saturating_mul(1000).min(u64::from(u32::MAX))
                    }
                    2 => u.saturating_mul(1000),
                    3 => u / 1000,
                    _ if u <= u64::from(u32::MAX) => u64::from(u32::MAX),
                    _ => u64::MAX / 3,
                })
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                Value::from(match pick {
                    0 => 0.0,
                    1 => f * 2.0,
                    2 => f * 1000.0,
                    3 => f / 1000.0,
                    _ => 1e300,
                })
            };
        }
        _ => {}
    }
}

fn count_numbers(value: &Value) -> u64 {
    match value {
        Value::Object(fields) => fields.values().map(count_numbers).sum(),
        Value::Array(items) => items.iter().map(count_numbers).sum(),
        Value::Number(_) => 1,
        _ => 0,
    }
}

#[test]
fn fuzzed_dumps_keep_impacts_and_shares_bounded_and_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dumps: Vec<PathBuf> = recorded_inputs(root)
        .into_iter()
        .map(|p| root.join(p))
        .filter(|p| p.is_file())
        .collect();
    assert!(dumps.len() >= 8, "{} dump files in tests/data", dumps.len());
    let dir = tempfile::tempdir().unwrap();
    let mut faults = Vec::new();
    let (mut judged, mut refused) = (0, 0);
    for (d, dump) in dumps.iter().enumerate() {
        let original: Value = serde_json::from_slice(&std::fs::read(dump).unwrap()).unwrap();
        let numbers = count_numbers(&original);
        // Seeded by the file's name, not its place in the list: a dump added to tests/data
        // leaves the other files' cases as they were.
        let name_seed = dump
            .file_name()
            .unwrap()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        for case in 0..6u64 {
            let mut choices = Choices(0x9e37_79b9_7f4a_7c15 ^ name_seed ^ case);
            let mut fuzzed = original.clone();
            // 1, 2, 4, ... 32 numbers changed, on average.
            fuzz_numbers(&mut fuzzed, &mut choices, (numbers >> case).max(1));
            let path = dir.path().join(format!("gpuspy-fuzz-{d}-{case}.json"));
            std::fs::write(&path, serde_json::to_vec(&fuzzed).unwrap()).unwrap();
            match out_of_bounds(&path) {
                Ok(found) => {
                    judged += 1;
                    let name = dump.file_name().unwrap().to_string_lossy();
                    faults.extend(
                        found
                            .into_iter()
                            .map(|f| format!("{name} case {case}: {f}")),
                    );
                }
                Err(_) => refused += 1,
            }
            std::fs::remove_file(&path).unwrap();
        }
    }
    // Most fuzzed dumps are still dumps: the test judges reports, not only refusals.
    assert!(judged > refused, "{judged} judged, {refused} refused");
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}
