//! Python call sites: CPython calling the fake driver through ctypes from known lines
//! (tests/programs/callsites.py), under the shim. The lines are found by their markers.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every call of the script blocks longer than the shim's capture threshold (100 us), so
/// each is captured once, unweighted.
const DELAYS: &str = "cuStreamSynchronize=300000,cuMemcpyHtoDAsync_v2=200000,cuMemAlloc_v2=150000,cuCtxSynchronize=200000";
const STEPS: u64 = 120;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/callsites.py")
}

/// The line of the script marked `# marker: NAME`.
fn marker(name: &str) -> u64 {
    let text = std::fs::read_to_string(script()).unwrap();
    let tag = format!("# marker: {name}");
    1 + text.lines().position(|l| l.ends_with(&tag)).unwrap() as u64
}

/// Runs the script under `python`; returns its dump and `report --json`.
fn run_script(python: &Path) -> (Value, Value) {
    let out = tempfile::tempdir().unwrap();
    let status = command(
        python,
        &[script().to_str().unwrap(), &STEPS.to_string()],
        &[("FAKECUDA_DELAY_NS", DELAYS)],
        out.path(),
    )
    .status()
    .unwrap();
    assert!(status.success(), "{} failed: {status:?}", python.display());
    let dumps = dumps_in(out.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let dump = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    (dump, report_json(&[out.path()]))
}

fn site<'a>(dump: &'a Value, api: &str) -> &'a Value {
    let sites = dump["call_sites"]["sites"].as_array().unwrap();
    let found: Vec<&Value> = sites.iter().filter(|s| s["api"] == api).collect();
    assert_eq!(found.len(), 1, "{api} in {sites:#?}");
    found[0]
}

/// The three blocking calls of each step name their own line in `step`, called from
/// `main`; the native thread's call is counted without a site.
fn assert_named(dump: &Value, step: &str) {
    for (api, cause, mark) in [
        ("cuStreamSynchronize", Value::from("explicit"), "sync"),
        (
            "cuMemcpyHtoDAsync_v2",
            Value::from("pageable-async-copy"),
            "pageable copy",
        ),
        ("cuMemAlloc_v2", Value::Null, "alloc"),
    ] {
        let s = site(dump, api);
        assert_eq!(s["cause"], cause, "{s}");
        assert_eq!(s["calls"], STEPS, "{s}");
        let frames = s["frames"].as_array().unwrap();
        assert_eq!(frames[0]["file"], script().to_str().unwrap());
        assert_eq!(frames[0]["line"], marker(mark), "{api}: {s}");
        assert_eq!(frames[0]["function"], step);
        assert_eq!(frames[1]["function"], "main");
        assert_eq!(frames.last().unwrap()["function"], "<module>");
    }
    let c = &dump["call_sites"];
    assert_eq!(c["native_calls"], 1, "{c}");
    assert!(c["sites"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["api"] != "cuCtxSynchronize"));
    assert_eq!(c["captures"], 3 * STEPS + 1);
    assert_eq!(c["dropped_calls"], 0);
}

#[test]
fn a_known_sync_copy_and_allocation_name_their_lines() {
    let (dump, report) = run_script(Path::new("python3"));
    assert!(dump["call_sites"]["python"]
        .as_str()
        .unwrap()
        .starts_with("3."));
    assert_named(&dump, "Trainer.step");
    // The findings name the same lines, with the share of their blocked time.
    let findings = report["findings"].as_array().unwrap();
    for (id, mark) in [
        ("sync-stalled", "sync"),
        ("pageable-memcpy", "pageable copy"),
        ("alloc-churn", "alloc"),
    ] {
        let f = findings
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {report}"));
        let sites = f["call_sites"].as_array().unwrap();
        assert_eq!(sites.len(), 1, "{id}: {sites:?}");
        let s = &sites[0];
        assert_eq!(s["file"], script().to_str().unwrap());
        assert_eq!(s["line"], marker(mark));
        assert_eq!(s["function"], "Trainer.step");
        assert_eq!(s["calls"], STEPS);
        assert!(s["blocked_ns"].as_u64().unwrap() >= STEPS * 150_000, "{s}");
        assert!(s["share"].as_f64().unwrap() > 0.9, "{s}");
    }
}

/// The interpreters this machine has: `python3`, and pyenv's where installed. Each
/// 3.10-3.13 names the same lines through its own layout; another version is refused
/// with a note and no sites.
#[test]
fn every_interpreter_here_reads_its_own_layout() {
    let mut pythons = vec![PathBuf::from("python3")];
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(Ok(versions)) = pyenv.map(|p| std::fs::read_dir(p.join("versions"))) {
        let mut found: Vec<PathBuf> = versions
            .map(|e| e.unwrap().path().join("bin/python3"))
            .filter(|p| p.exists())
            .collect();
        found.sort();
        pythons.extend(found);
    }
    for python in &pythons {
        let (dump, _) = run_script(python);
        let c = &dump["call_sites"];
        let version = c["python"].as_str().unwrap().to_string();
        let minor: u32 = version.split('.').nth(1).unwrap().parse().unwrap();
        eprintln!("{}: Python {version}", python.display());
        match minor {
            10 => assert_named(&dump, "step"),
            11..=13 => assert_named(&dump, "Trainer.step"),
            _ => {
                assert_eq!(c["sites"], serde_json::json!([]), "{version}");
                assert_eq!(c["captures"], 0);
                let notes = c["notes"].as_array().unwrap();
                assert!(
                    notes[0].as_str().unwrap().contains("no frame layout known"),
                    "{notes:?}"
                );
            }
        }
    }
}

#[test]
fn a_program_without_python_has_no_call_sites() {
    let run = run(
        "timed",
        &["3"],
        &[("FAKECUDA_DELAY_NS", "cuStreamSynchronize=300000")],
    );
    let dumps = run.dumps();
    let dump: Value = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    assert_eq!(dump["apis"].as_array().unwrap().len(), 2, "{dump}");
    assert_eq!(dump.get("call_sites"), None);
    let report = run.report();
    assert!(report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["call_sites"] == serde_json::json!([])));
}
