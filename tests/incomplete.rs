use crate::support::*;
use serde_json::Value;

/// A run whose shim forwarded calls without recording them (threads beyond those it
/// records at once) is incomplete, and every view of its figures says so: `report` right
/// under the headline and in `unrecorded_calls`, `diff` in a note, `check` in a note and
/// in its JSON and JUnit output. A complete run says nothing.
#[test]
fn unrecorded_calls_are_shown_wherever_figures_are() {
    let dir = tempfile::tempdir().unwrap();
    let (base, new) = (dir.path().join("base"), dir.path().join("new"));
    std::fs::create_dir(&base).unwrap();
    std::fs::create_dir(&new).unwrap();
    write_dump(&base, "gpuspy-node-1.json", &crafted_dump(1, 0, 10, 100));
    let mut partial = crafted_dump(2, 0, 10, 100);
    partial.unrecorded_calls = 4321;
    write_dump(&new, "gpuspy-node-2.json", &partial);

    let text = report_text(&new);
    let second = text.lines().nth(1).unwrap_or_default();
    assert!(
        second.contains("INCOMPLETE DATA") && second.contains("4321"),
        "{text}"
    );
    assert!(!report_text(&base).contains("INCOMPLETE"));
    let r = report_json(&[&new]);
    assert_eq!(r["unrecorded_calls"], 4321);
    assert_eq!(r["processes"][0]["unrecorded_calls"], 4321);
    assert_eq!(r["schema_version"], 1);
    assert_eq!(report_json(&[&base])["unrecorded_calls"], 0);

    let diff = gpuspy_cmd(&["diff", s(&base), s(&new)]);
    let diff_text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        diff_text.contains("note: new ") && diff_text.contains("incomplete data: 4321"),
        "{diff_text}"
    );
    let diff_json: Value =
        serde_json::from_slice(&gpuspy_cmd(&["diff", s(&base), s(&new), "--json"]).stdout).unwrap();
    assert_eq!(diff_json["incomplete"], true);
    let clean: Value =
        serde_json::from_slice(&gpuspy_cmd(&["diff", s(&base), s(&base), "--json"]).stdout)
            .unwrap();
    assert_eq!(clean["incomplete"], false);

    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[api.cuLaunchKernel]\nmax_per_run = 1000\n").unwrap();
    let junit = dir.path().join("junit.xml");
    let check = gpuspy_cmd(&[
        "check",
        s(&new),
        "--budget",
        s(&budget),
        "--junit",
        s(&junit),
    ]);
    assert!(check.status.success());
    let check_text = String::from_utf8_lossy(&check.stdout);
    assert!(
        check_text.starts_with("note: incomplete data: 4321"),
        "{check_text}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<property name=\"note\" value=\"incomplete data: 4321"),
        "{xml}"
    );
    let json = |path: &std::path::Path| -> Value {
        let out = gpuspy_cmd(&["check", s(path), "--budget", s(&budget), "--json"]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let partial_json = json(&new);
    assert_eq!(partial_json["incomplete"], true);
    assert!(partial_json["notes"][0].as_str().unwrap().contains("4321"));
    assert_eq!(json(&base)["incomplete"], false);
}
