//! One quantity, one figure: the same run through the text report, `--json`, the HTML page's
//! data and `gpuspy check` shows the same numbers, rounded by the same rule.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The recorded dumps: every file and run directory in tests/data.
fn recorded() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "json"))
        .filter(|p| !p.ends_with("junit.xsd"))
        .collect();
    v.sort();
    v
}

/// JavaScript's `x.toFixed(0)` for x >= 0: the nearest integer, halves up. The page
/// formats impacts this way; `x - floor(x)` is exact for a double of this size.
fn to_fixed_0(x: f64) -> String {
    let floor = x.floor();
    format!("{}", if x - floor >= 0.5 { floor + 1.0 } else { floor })
}

/// `gpuspy report` as text, JSON and the HTML page's embedded data, and `gpuspy check`
/// with a blocked-share budget: the four views of one input.
struct Views {
    text: String,
    json: Value,
    page: Value,
    check: String,
}

fn views(input: &Path) -> Views {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let budget = dir.path().join("budget.toml");
    std::fs::write(&budget, "[syncs]\nmax_blocked_share = 0.5\n").unwrap();
    let json = report_json(&[input]);
    let out = gpuspy_cmd(&["report", "--html", s(&html), s(input)]);
    assert!(out.status.success(), "{out:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    let start = page
        .find("<script id=\"data\" type=\"application/json\">")
        .unwrap();
    let data = &page[start..];
    let data = &data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()];
    let check = gpuspy_cmd(&["check", s(input), "--budget", s(&budget)]);
    Views {
        text: report_text(input),
        json,
        page: serde_json::from_str::<Value>(data).unwrap()["page"].take(),
        check: String::from_utf8_lossy(&check.stdout).into_owned(),
    }
}

fn assert_one_figure_each(name: &str, v: &Views) {
    // Host blocked in syncs: the text's steady-state line and check's case read the same
    // share of the same steady state as the JSON's `host_blocked`.
    let blocked = &v.json["host_blocked"];
    let share = format!("{:.1} %", blocked["share"].as_f64().unwrap() * 100.0);
    if !v.json["steady_state"].is_null() {
        let line = format!("host blocked in syncs {share} of it");
        assert!(v.text.contains(&line), "{name}: no {line:?} in\n{}", v.text);
    }
    let case = format!("blocked, {share} of ");
    assert!(
        v.check.contains(&case),
        "{name}: no {case:?} in\n{}",
        v.check
    );
    // Findings: the page shows the JSON's, and the text's impact is the page's rounding.
    assert_eq!(v.page["findings"], v.json["findings"], "{name}");
    for f in v.json["findings"].as_array().unwrap() {
        let id = f["id"].as_str().unwrap();
        let impact = to_fixed_0(f["impact"].as_f64().unwrap() * 100.0);
        let line = v
            .text
            .lines()
            .find(|l| l.contains(&format!(" {id}")) && l.contains("(impact "))
            .unwrap_or_else(|| panic!("{name}: no line for {id} in\n{}", v.text));
        assert!(
            line.ends_with(&format!("(impact {impact} % of the run's time)")),
            "{name}: {line}"
        );
    }
    assert_eq!(v.page["syncs"], v.json["syncs"], "{name}");
    assert_eq!(v.page["copies"], v.json["copies"], "{name}");
}

#[test]
fn recorded_dumps_show_one_figure_per_quantity_in_every_view() {
    let inputs = recorded();
    assert!(inputs.len() >= 12, "{inputs:?}");
    for input in inputs {
        let name = input.file_name().unwrap().to_string_lossy().into_owned();
        assert_one_figure_each(&name, &views(&input));
    }
}

#[test]
fn the_simulated_step_shows_one_figure_per_quantity_in_every_view() {
    // tools/main.sh's simulated run: a sync and a pageable copy each step.
    let r = run(
        "simulated_step",
        &["200"],
        &[(
            "FAKECUDA_DELAY_NS",
            "cuStreamSynchronize=400000,cuMemcpyHtoDAsync_v2=150000,cuLaunchKernel=4000",
        )],
    );
    let v = views(r.out_dir.path());
    assert_one_figure_each("simulated", &v);
    // The finding names the run's count, the one the sync table shows, beside its own.
    let copies = sync(&v.json, "pageable-async-copy").unwrap();
    assert_eq!(copies, 400);
    let pageable = v.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "pageable-memcpy")
        .unwrap();
    // Which steps fall in the steady state depends on timing: all of them, or all but a few.
    let summary = pageable["summary"].as_str().unwrap();
    assert!(
        summary.ends_with(&format!("They were {copies} async copies."))
            || summary.contains(&format!(
                "async copies in the steady state (of the run's {copies})."
            )),
        "{pageable}"
    );
}

#[test]
fn an_impact_on_a_half_percent_reads_the_same_in_text_and_page() {
    // 0.105 is 10.5 % exactly after the product: the page's toFixed gives 11.
    assert_eq!(to_fixed_0(0.105 * 100.0), "11");
    let ddp = views(&data("h200-ddp-comm"));
    let impact = ddp.json["findings"][0]["impact"].as_f64().unwrap();
    assert_eq!(to_fixed_0(impact * 100.0), "41", "{impact}");
    assert!(
        ddp.text
            .contains("estimated time lost: 41 % of the run's time"),
        "{}",
        ddp.text
    );
}
