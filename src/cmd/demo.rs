//! `gpuspy demo`: the report of a simulated training step, with no GPU and no C compiler.
//!
//! The job is `gpuspy demo-step` (`step`, a hidden verb of this same binary), run as
//! `gpuspy run` runs a job, against the fakes that ship beside libgpuspy.so: the driver
//! (tools/fakecuda), CUPTI (tools/fakecupti) and NVML (tools/fakenvml), so that every rule
//! has data. They keep cargo's file names there (`libcuda.so`, ...), which no program loads
//! a driver by; the job finds them through a private directory of links named by the real
//! libraries' sonames, on its `LD_LIBRARY_PATH`. The fake driver marks the dumps
//! `simulated`, so every view of them, later ones included, says SIMULATED.

pub mod step;

use crate::cmd::run;
use crate::render::ci_output::Output;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::ExitCode;

/// The fakes beside the shim: the file cargo builds, and the soname programs load it by.
const FAKES: [(&str, &str); 3] = [
    ("libcuda.so", "libcuda.so.1"),
    ("libcupti.so", "libcupti.so.13"),
    ("libnvidia_ml.so", "libnvidia-ml.so.1"),
];

/// What the fake driver makes each call take (`FAKECUDA_DELAY_NS`): a 4 MiB copy from
/// pageable memory, a small kernel's launch, and the wait for a step's kernels, as on a GPU.
const DELAYS: &str = "cuStreamSynchronize=400000,cuMemcpyHtoDAsync_v2=150000,cuLaunchKernel=4000";

/// Steps of the simulated job: about a second, several NVML samples.
const STEPS: u32 = 1000;

pub fn demo(out: &Path) -> Result<ExitCode> {
    let shim = run::shim_path()?;
    let shim = std::fs::canonicalize(&shim).unwrap_or(shim);
    let links = tempfile::Builder::new()
        .prefix("gpuspy-demo-")
        .tempdir()
        .context("cannot create a directory for the fake libraries' links")?;
    for (file, soname) in FAKES {
        let fake = shim.with_file_name(file);
        if !fake.is_file() {
            bail!(
                "{} not found: gpuspy demo needs the fake CUDA driver, CUPTI and NVML beside \
                 libgpuspy.so (the pip wheel ships them; in a checkout, `cargo build --release` \
                 builds them)",
                fake.display()
            );
        }
        std::os::unix::fs::symlink(&fake, links.path().join(soname))
            .with_context(|| format!("cannot link {}", fake.display()))?;
    }
    // The job inherits these. Set while gpuspy has no other thread, which setenv needs.
    std::env::set_var("LD_LIBRARY_PATH", links.path());
    std::env::set_var("FAKECUDA_DELAY_NS", DELAYS);
    let exe = std::env::current_exe().context("cannot locate the gpuspy binary")?;
    let Ok(exe) = exe.into_os_string().into_string() else {
        bail!("the gpuspy binary's path is not UTF-8");
    };
    let job = [exe, "demo-step".into(), STEPS.to_string()];
    let no_gate = Output {
        json: None,
        junit: None,
        markdown: None,
    };
    run::run(out, None, None, None, &no_gate, &job)
}
