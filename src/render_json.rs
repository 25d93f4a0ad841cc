//! `gpuspy report --json`: the `Report` serialised, exactly one JSON object. Schema:
//! docs/report-json.md.

use crate::report::Report;
use std::io::Write;

/// Writes the report as it is serialised, one line, without building a JSON tree first:
/// a hostile dump can make its lists as long as it likes.
pub fn write(report: &Report, mut out: impl Write) -> anyhow::Result<()> {
    serde_json::to_writer(&mut out, report)?;
    writeln!(out)?;
    Ok(())
}
