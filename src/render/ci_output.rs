//! What CI systems read from `gpuspy diff` and `gpuspy check`: JUnit XML, a Markdown
//! summary (for `$GITHUB_STEP_SUMMARY`) and GitHub Actions `::error` annotations.

use crate::render::json::JsonTo;
use crate::{atomic_file, safe_text};
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;

/// How a gate reports: JSON (where `json` says) or text on stdout, and the files CI
/// systems read.
pub struct Output {
    pub json: Option<JsonTo>,
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
}

/// One named pass/fail result.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub name: String,
    pub passed: bool,
    pub message: String,
}

/// The results of one gate (`gpuspy diff` or `gpuspy check`).
pub struct Gate<'a> {
    pub tool: &'a str,
    pub cases: &'a [Case],
    /// What a reader must know to trust the cases, such as data the shim did not record:
    /// JUnit `properties` (`note`), lines under the Markdown heading.
    pub notes: &'a [String],
}

impl Gate<'_> {
    fn failures(&self) -> usize {
        self.cases.iter().filter(|c| !c.passed).count()
    }

    pub fn junit(&self) -> String {
        let suite = xml_escape(self.tool);
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"gpuspy\" tests=\"{n}\" failures=\"{f}\" errors=\"0\">\n  <testsuite name=\"{suite}\" tests=\"{n}\" failures=\"{f}\" errors=\"0\" skipped=\"0\" time=\"0\">\n",
            n = self.cases.len(),
            f = self.failures(),
        );
        if !self.notes.is_empty() {
            out.push_str("    <properties>\n");
            for note in self.notes {
                out.push_str(&format!(
                    "      <property name=\"note\" value=\"{}\"/>\n",
                    xml_escape(note)
                ));
            }
            out.push_str("    </properties>\n");
        }
        let classname = self.tool.replace(' ', ".");
        for case in self.cases {
            let name = xml_escape(&case.name);
            if case.passed {
                out.push_str(&format!(
                    "    <testcase name=\"{name}\" classname=\"{classname}\" time=\"0\">\n      <system-out>{}</system-out>\n    </testcase>\n",
                    xml_escape(&case.message)
                ));
            } else {
                let message = xml_escape(&case.message);
                out.push_str(&format!(
                    "    <testcase name=\"{name}\" classname=\"{classname}\" time=\"0\">\n      <failure message=\"{message}\" type=\"regression\">{message}</failure>\n    </testcase>\n"
                ));
            }
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }

    pub fn markdown(&self) -> String {
        let mut out = format!(
            "### {}: {}\n\n| | check | result |\n|---|---|---|\n",
            self.tool,
            if self.failures() == 0 {
                "passed".to_string()
            } else {
                format!("{} failed", self.failures())
            }
        );
        if !self.notes.is_empty() {
            let notes: String = self
                .notes
                .iter()
                .map(|n| format!("> **note:** {}\n", md_escape(n)))
                .collect();
            out = out.replacen("\n\n", &format!("\n\n{notes}\n"), 1);
        }
        for case in self.cases {
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                if case.passed { "✅" } else { "❌" },
                md_escape(&case.name),
                md_escape(&case.message)
            ));
        }
        out
    }

    /// `::error` lines, one per failure, for GitHub Actions.
    pub fn github_annotations(&self) -> String {
        self.cases
            .iter()
            .filter(|c| !c.passed)
            .map(|c| {
                format!(
                    "::error title={}::{}\n",
                    gh_property(self.tool),
                    gh_data(&format!("{}: {}", c.name, c.message))
                )
            })
            .collect()
    }

    /// Writes the files asked for and, under GitHub Actions, prints the annotations: on
    /// stdout, where the runner reads them, or on stderr (which it reads too) when stdout
    /// holds the one JSON document.
    pub fn emit(&self, out: &Output) -> Result<()> {
        if let Some(path) = &out.junit {
            atomic_file::write(path, |w| Ok(w.write_all(self.junit().as_bytes())?))?;
        }
        if let Some(path) = &out.markdown {
            atomic_file::write(path, |w| Ok(w.write_all(self.markdown().as_bytes())?))?;
        }
        if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
            // One line per annotation: `gh_data` escaped their newlines already.
            let annotations = safe_text::lines(&self.github_annotations());
            match out.json {
                Some(JsonTo::Stdout) => eprint!("{annotations}"),
                _ => print!("{annotations}"),
            }
        }
        Ok(())
    }
}

fn xml_escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => " ".to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// GitHub's workflow-command escaping of the message.
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// ... and of a property such as `title`, which also may not hold `:` or `,`.
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "cuStreamSynchronize p50".into(),
                passed: false,
                message: "p50 1.00 ms -> 1.40 ms (+40 %) <&\"'>".into(),
            },
            Case {
                name: "cuLaunchKernel p50".into(),
                passed: true,
                message: "unchanged".into(),
            },
        ]
    }

    #[test]
    fn junit_counts_and_escapes() {
        let c = cases();
        let xml = Gate {
            tool: "gpuspy diff",
            cases: &c,
            notes: &[],
        }
        .junit();
        assert!(xml.contains("tests=\"2\" failures=\"1\""));
        assert!(xml.contains("&lt;&amp;&quot;&apos;&gt;"));
        assert!(!xml.contains("<&"));
    }

    #[test]
    fn annotations_only_for_failures_and_escaped() {
        let c = cases();
        let lines = Gate {
            tool: "gpuspy diff",
            cases: &c,
            notes: &[],
        }
        .github_annotations();
        assert_eq!(lines.lines().count(), 1);
        assert!(
            lines.starts_with("::error title=gpuspy diff::cuStreamSynchronize p50: p50 1.00 ms")
        );
    }

    #[test]
    fn markdown_table_has_a_row_per_case() {
        let c = cases();
        let md = Gate {
            tool: "gpuspy check",
            cases: &c,
            notes: &[],
        }
        .markdown();
        assert!(md.starts_with("### gpuspy check: 1 failed"));
        assert_eq!(
            md.lines()
                .filter(|l| l.starts_with("| ❌") || l.starts_with("| ✅"))
                .count(),
            2
        );
    }
}
