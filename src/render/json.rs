//! `--json`: where the one JSON document goes and how it is written. The report's schema:
//! docs/report-json.md.

use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

/// Where `--json` writes: stdout, or a file (`run --json FILE`, where `-` is stdout).
#[derive(Clone)]
pub enum JsonTo {
    Stdout,
    File(PathBuf),
}

impl From<PathBuf> for JsonTo {
    fn from(path: PathBuf) -> JsonTo {
        if path.as_os_str() == "-" {
            JsonTo::Stdout
        } else {
            JsonTo::File(path)
        }
    }
}

impl JsonTo {
    /// Checks now that the file can be written (`atomic_file::check`), so that a path
    /// that cannot be is refused before a job starts rather than after it.
    pub fn check(&self) -> Result<()> {
        if let JsonTo::File(path) = self {
            crate::atomic_file::check(path).context("--json")?;
        }
        Ok(())
    }

    /// Writes `value` as one line of JSON, serialised as it goes rather than built as a
    /// tree first: a hostile dump can make the report's lists as long as it likes.
    pub fn write(&self, value: &impl Serialize) -> Result<()> {
        fn emit(value: &impl Serialize, mut out: impl Write) -> Result<()> {
            serde_json::to_writer(&mut out, value)?;
            writeln!(out)?;
            out.flush()?;
            Ok(())
        }
        match self {
            JsonTo::Stdout => {
                emit(value, std::io::stdout().lock()).context("cannot write to stdout")
            }
            JsonTo::File(path) => {
                crate::atomic_file::write(path, |w| emit(value, w)).context("--json")
            }
        }
    }
}
