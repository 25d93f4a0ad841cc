//! `gpuspy diff BASE NEW`: compares two sets of runs (`analysis::diff`), gates on the
//! regressions and prints the result as text, JSON or an HTML page.

use crate::analysis::analyse;
use crate::analysis::diff::{compare, Change, DiffReport, Kind, Options};
use crate::render::ci_output::{Case, Gate, Output};
use crate::render::html;
use crate::safe_text::Escaped;
use crate::units::duration;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

pub fn diff(
    base: &[PathBuf],
    new: &[PathBuf],
    o: &Options,
    out: &Output,
    html: Option<&Path>,
) -> Result<bool> {
    if !(o.threshold > 0.0 && o.alpha > 0.0 && o.alpha < 1.0 && o.min_share >= 0.0) {
        bail!("--threshold must be > 0, --alpha in (0, 1), --min-share >= 0");
    }
    let report = compare(&analyse::runs(base)?, &analyse::runs(new)?, o);
    let cases: Vec<Case> = report.changes.iter().map(case).collect();
    Gate {
        tool: "gpuspy diff",
        cases: &cases,
        notes: &report.notes,
    }
    .emit(out)?;
    if let Some(path) = html {
        crate::atomic_file::write(path, |w| html::write_diff(&report, w))?;
    }
    if let Some(to) = &out.json {
        to.write(&report)?;
    } else {
        print!("{}", render(&report, o));
    }
    if let Some(path) = html {
        super::wrote(path, out.json.is_some());
    }
    Ok(report.regressions == 0)
}

fn render(r: &DiffReport, o: &Options) -> String {
    let mut out = format!(
        "gpuspy diff: {} base run(s), {} new run(s); threshold {:.0} %, floor {}, alpha {}\n",
        r.base_runs,
        r.new_runs,
        o.threshold * 100.0,
        duration(o.floor_ns),
        o.alpha
    );
    for note in &r.notes {
        out.push_str(&format!("note: {}\n", Escaped(note)));
    }
    for c in &r.overall {
        out.push_str(&format!(
            "  {:<11} {:<44} {:>10} -> {:<10} {}\n",
            "overall",
            Escaped(&c.what),
            c.base,
            c.new,
            Escaped(&c.detail)
        ));
    }
    let (mut minor, mut unchanged) = (0, 0);
    for c in &r.changes {
        let label = match c.kind {
            Kind::Regression => "REGRESSION",
            Kind::Improvement => "improved",
            Kind::Changed => "changed",
            Kind::Minor => {
                minor += 1;
                continue;
            }
            Kind::Unchanged => {
                unchanged += 1;
                continue;
            }
        };
        out.push_str(&format!(
            "  {label:<11} {:<44} {:>10} -> {:<10} {}\n",
            Escaped(&c.what),
            c.base,
            c.new,
            Escaped(&c.detail)
        ));
    }
    if minor > 0 {
        out.push_str(&format!(
            "  {minor} latency shift(s) under the threshold, the floor or the driver-time share (`--json` lists them)\n"
        ));
    }
    out.push_str(&format!(
        "  {unchanged} comparison(s) unchanged\nresult: {}\n",
        match r.regressions {
            0 => "no significant regression".to_string(),
            n => format!("{n} regression(s)"),
        }
    ));
    out
}

/// One comparison as a CI test case: it fails when it is a regression.
fn case(c: &Change) -> Case {
    Case {
        name: c.what.clone(),
        passed: c.kind != Kind::Regression,
        message: format!("{} -> {} ({})", c.base, c.new, c.detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overall_changes_come_first_in_the_text() {
        let change = |what: &str, kind| Change {
            kind,
            what: what.into(),
            base: "1.30 s".into(),
            new: "1.10 s".into(),
            detail: "-15.4 %".into(),
        };
        let report = DiffReport {
            base_runs: 3,
            new_runs: 3,
            overall: vec![change("wall time per run", Kind::Improvement)],
            regressions: 1,
            changes: vec![change("cuLaunchKernel p50", Kind::Regression)],
            simulated: false,
            incomplete: false,
            notes: Vec::new(),
            latencies: Vec::new(),
        };
        let options = Options {
            threshold: 0.10,
            floor_ns: 200,
            min_share: 0.01,
            alpha: 0.05,
        };
        let text = render(&report, &options);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].starts_with("  overall     wall time per run"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("  REGRESSION  cuLaunchKernel p50"),
            "{text}"
        );
    }
}
