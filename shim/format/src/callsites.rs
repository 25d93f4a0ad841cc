//! Python call sites of the calls that blocked the host (`Dump.call_sites`, schema 2 on;
//! absent from older dumps and from processes without Python).

use crate::SyncCause;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CallSites {
    /// The interpreter, e.g. `3.11.2` or `3.13.0 free-threaded`.
    pub python: String,
    /// Calls that blocked this long or longer were all captured...
    pub threshold_ns: u64,
    /// ...and one in this many of the shorter ones, standing for this many: `calls` and
    /// `blocked_ns` below are estimates where such samples contribute.
    pub sample_every: u64,
    /// Stacks read (threads without Python included), and the time reading them and
    /// adding them to the table took, all threads: the capture's cost.
    pub captures: u64,
    #[serde(default)]
    pub capture_ns: u64,
    /// Captured calls (weighted) made from threads with no Python frames, and their time.
    pub native_calls: u64,
    pub native_ns: u64,
    /// Captured calls whose site did not fit in the shim's table (256 sites), or that found
    /// the table in use by another capture or a dump (a capture never waits).
    pub dropped_calls: u64,
    pub dropped_ns: u64,
    /// The top sites (at most 32) by blocked time, largest first.
    pub sites: Vec<CallSite>,
    /// Why nothing was captured where that is known (an interpreter version without a
    /// known frame layout, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One driver function called from one Python stack.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CallSite {
    /// The exact exported symbol, e.g. `cuStreamSynchronize`.
    pub api: String,
    /// The implicit synchronisation the call amounted to, if any.
    pub cause: Option<SyncCause>,
    pub calls: u64,
    pub blocked_ns: u64,
    pub max_ns: u64,
    /// Innermost first, at most 16.
    pub frames: Vec<Frame>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Frame {
    pub file: String,
    /// 0 where the line table gives none.
    pub line: u32,
    /// The qualified name (`Model.step`; the bare name before 3.11).
    pub function: String,
}

impl CallSite {
    /// The frame to name: the innermost one outside installed packages and the standard
    /// library, else the innermost.
    pub fn user_frame(&self) -> Option<&Frame> {
        let library = |f: &&Frame| {
            f.file.contains("/site-packages/")
                || f.file.contains("/dist-packages/")
                || f.file.starts_with('<')
                || is_standard_library(&f.file)
        };
        self.frames
            .iter()
            .find(|f| !library(f))
            .or(self.frames.first())
    }
}

/// `.../lib/python3.N/x.py`, the standard library's own directory.
fn is_standard_library(file: &str) -> bool {
    file.split('/')
        .collect::<Vec<_>>()
        .windows(3)
        .any(|w| w[0] == "lib" && w[1].starts_with("python3") && !w[2].is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(file: &str) -> Frame {
        Frame {
            file: file.into(),
            line: 1,
            function: "f".into(),
        }
    }

    #[test]
    fn the_user_frame_skips_packages_and_the_standard_library() {
        let site = |files: &[&str]| CallSite {
            api: "cuStreamSynchronize".into(),
            cause: Some(SyncCause::Explicit),
            calls: 1,
            blocked_ns: 1,
            max_ns: 1,
            frames: files.iter().map(|f| frame(f)).collect(),
        };
        let s = site(&[
            "/usr/lib/python3/dist-packages/torch/cuda/__init__.py",
            "/usr/lib/python3.11/threading.py",
            "<frozen runpy>",
            "/home/u/train.py",
            "/home/u/main.py",
        ]);
        assert_eq!(s.user_frame().unwrap().file, "/home/u/train.py");
        let only_library = site(&["/x/site-packages/torch/a.py"]);
        assert_eq!(
            only_library.user_frame().unwrap().file,
            "/x/site-packages/torch/a.py"
        );
        assert_eq!(site(&[]).user_frame(), None);
    }
}
