//! `gpuspy report` of every recorded dump, compared byte for byte with tests/golden/: a
//! change meant to keep the CLI's behaviour (a refactor) must leave all of them as they are.
//! `GPUSPY_BLESS=1 cargo test --release --test tests golden` rewrites them from this build.
//!
//! Nothing is masked: a report is a pure function of its dumps, and the paths in it are
//! the relative ones given on the command line, run from the repository root.

use crate::support::gpuspy;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The recorded inputs, relative to the repository root: every dump file in tests/data and
/// every directory there that holds one job's dumps.
pub(crate) fn recorded_inputs(root: &Path) -> Vec<PathBuf> {
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(root.join("tests/data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.strip_prefix(root).unwrap().to_path_buf())
        .collect();
    inputs.sort();
    inputs
}

/// The outputs compared, as (golden file extension, `gpuspy` arguments before the input).
const OUTPUTS: [(&str, &[&str]); 2] = [
    ("json", &["report", "--json"]),
    ("txt", &["report", "--per-process"]),
];

#[test]
fn reports_of_recorded_dumps_match_their_goldens() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let golden_dir = root.join("tests/golden");
    let bless = std::env::var_os("GPUSPY_BLESS").is_some_and(|v| v == "1");
    let mut expected_goldens = Vec::new();
    let mut differences = Vec::new();
    for input in recorded_inputs(root) {
        let stem = input.file_stem().unwrap().to_str().unwrap();
        for (ext, args) in OUTPUTS {
            let out = Command::new(gpuspy())
                .args(args)
                .arg(&input)
                .current_dir(root)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "gpuspy {} {}: {}",
                args.join(" "),
                input.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let name = format!("{stem}.{ext}");
            let golden = golden_dir.join(&name);
            if bless {
                std::fs::create_dir_all(&golden_dir).unwrap();
                std::fs::write(&golden, &out.stdout).unwrap();
            } else if let Some(difference) = first_difference(&golden, &out.stdout) {
                differences.push(format!("{name}: {difference}"));
            }
            expected_goldens.push(name);
        }
    }
    let mut stale: Vec<String> = std::fs::read_dir(&golden_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| !expected_goldens.contains(name))
        .collect();
    stale.sort();
    assert!(
        stale.is_empty(),
        "goldens without a recorded dump: {stale:?}"
    );
    assert!(
        differences.is_empty(),
        "reports differ from tests/golden/ (GPUSPY_BLESS=1 rewrites them if the change is \
         meant):\n{}",
        differences.join("\n")
    );
}

/// `None` when `golden` holds exactly `actual`, else where they first differ.
fn first_difference(golden: &Path, actual: &[u8]) -> Option<String> {
    let Ok(expected) = std::fs::read(golden) else {
        return Some("no golden yet".into());
    };
    if expected == actual {
        return None;
    }
    // A JSON report is one line: name the first field that differs instead.
    if let (Ok(e), Ok(a)) = (
        serde_json::from_slice::<Value>(&expected),
        serde_json::from_slice::<Value>(actual),
    ) {
        return Some(json_difference(&e, &a, String::new()).unwrap_or_else(|| "key order".into()));
    }
    let (expected, actual) = (
        String::from_utf8_lossy(&expected),
        String::from_utf8_lossy(actual),
    );
    let mut lines = expected.lines().zip(actual.lines()).enumerate();
    Some(match lines.find(|(_, (e, a))| e != a) {
        Some((n, (e, a))) => format!("line {}:\n  golden: {e}\n  now:    {a}", n + 1),
        None => "one is a prefix of the other".into(),
    })
}

/// The JSON pointer of the first value that differs, with both values.
fn json_difference(expected: &Value, actual: &Value, at: String) -> Option<String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            if let Some(k) = e.keys().find(|k| !a.contains_key(*k)) {
                return Some(format!("{at}/{k}: gone now"));
            }
            if let Some(k) = a.keys().find(|k| !e.contains_key(*k)) {
                return Some(format!("{at}/{k}: new now"));
            }
            e.iter()
                .find_map(|(k, v)| json_difference(v, &a[k], format!("{at}/{k}")))
        }
        (Value::Array(e), Value::Array(a)) if e.len() != a.len() => Some(format!(
            "{at}: {} elements in the golden, {} now",
            e.len(),
            a.len()
        )),
        (Value::Array(e), Value::Array(a)) => e
            .iter()
            .zip(a)
            .enumerate()
            .find_map(|(i, (e, a))| json_difference(e, a, format!("{at}/{i}"))),
        _ if expected == actual => None,
        _ => Some(format!("{at}:\n  golden: {expected}\n  now:    {actual}")),
    }
}
