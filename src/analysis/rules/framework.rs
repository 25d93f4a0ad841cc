//! Which Python framework made a process's CUDA calls, so that a finding can print that
//! framework's own fix (`jax.jit`, `cupy.fuse`, a CUDA graph in PyTorch) and size it.

use crate::analysis::profile::Profile;
use gpuspy_format::callsites::Frame;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Framework {
    Jax,
    CuPy,
    Torch,
}

impl Framework {
    /// The framework an installed package belongs to.
    fn of_package(package: &str) -> Option<Framework> {
        match package {
            "jax" | "jaxlib" => Some(Framework::Jax),
            "cupy" | "cupyx" | "cupy_backends" => Some(Framework::CuPy),
            "torch" => Some(Framework::Torch),
            _ => None,
        }
    }

    /// The framework of the innermost frame that lies in one of them: the one that made
    /// the call (a transformers or Lightning frame further out is its caller).
    fn of_frames(frames: &[Frame]) -> Option<Framework> {
        frames
            .iter()
            .find_map(|f| installed_package(&f.file).and_then(Framework::of_package))
    }
}

/// The top-level package of an installed module's path, `torch` for
/// `.../site-packages/torch/nn/modules/linear.py`.
fn installed_package(file: &str) -> Option<&str> {
    let (_, rest) = file
        .split_once("/site-packages/")
        .or_else(|| file.split_once("/dist-packages/"))?;
    rest.split('/').next()
}

/// The framework behind most of the profile's captured calls (syncs, copies and
/// allocations of Python call sites), weighted by calls; None without Python call sites or
/// where none of them goes through a known framework (C++, or a framework not listed).
pub fn framework(p: &Profile) -> Option<Framework> {
    let mut calls: BTreeMap<Framework, u64> = BTreeMap::new();
    for site in &p.call_sites {
        if let Some(f) = Framework::of_frames(&site.frames) {
            *calls.entry(f).or_default() += site.calls;
        }
    }
    calls
        .into_iter()
        .max_by_key(|&(f, n)| (n, f))
        .map(|(f, _)| f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use gpuspy_format::callsites::CallSite;

    fn site(calls: u64, files: &[&str]) -> CallSite {
        CallSite {
            api: "cuMemcpyDtoHAsync_v2".into(),
            cause: None,
            calls,
            blocked_ns: 1_000,
            max_ns: 1_000,
            frames: files
                .iter()
                .map(|f| Frame {
                    file: f.to_string(),
                    line: 1,
                    function: "f".into(),
                })
                .collect(),
        }
    }

    const VENV: &str = "/opt/venv/lib/python3.12/site-packages";

    #[test]
    fn the_innermost_framework_frame_names_the_framework_of_most_calls() {
        let mut p = run(1.0).build();
        assert_eq!(framework(&p), None);
        // A transformers loop calls through torch: torch made the calls.
        let generate = format!("{VENV}/transformers/generation/utils.py");
        let storage = format!("{VENV}/torch/storage.py");
        p.call_sites = vec![
            site(3, &[&storage, &generate, "/work/train.py"]),
            site(
                2,
                &[&format!("{VENV}/jaxlib/xla_client.py"), "/work/train.py"],
            ),
        ];
        assert_eq!(framework(&p), Some(Framework::Torch));
        p.call_sites.push(site(
            4,
            &["/usr/lib/python3/dist-packages/cupy/_core/core.py"],
        ));
        assert_eq!(framework(&p), Some(Framework::CuPy));
        // User code in a folder named like a framework is not it.
        p.call_sites = vec![site(9, &["/work/torch/train.py"])];
        assert_eq!(framework(&p), None);
    }
}
