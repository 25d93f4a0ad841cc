// What the dump header's `tool_build` and `gpuspy --version` say about the exact build:
// `git describe --always --dirty` of the checkout the crate was built from, or "unknown"
// where its sources are not a checkout (a wheel built from an sdist). Included by
// shim/build.rs and the CLI's build.rs, so that each binary names the sources it holds.

use std::path::Path;
use std::process::Command;

/// Sets `GPUSPY_BUILD` for the crate being built. `workspace` is the directory that holds
/// the checkout's `.git`; `sources` are the paths (relative to the crate) whose change
/// makes the id worth computing again, besides a commit or checkout moving HEAD.
fn emit_build_id(workspace: &Path, sources: &[&str]) {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
    };
    // Without a `.git` of its own, git would describe whatever repository the sources were
    // unpacked in.
    let checkout = workspace.join(".git").exists();
    let id = checkout
        .then(|| git(&["describe", "--always", "--dirty"]))
        .flatten();
    println!(
        "cargo:rustc-env=GPUSPY_BUILD={}",
        id.as_deref().unwrap_or("unknown")
    );
    for source in sources {
        println!("cargo:rerun-if-changed={source}");
    }
    if !checkout {
        return;
    }
    // HEAD moves on a checkout, the branch's ref on a commit. A path that does not exist
    // would make cargo run this script on every build, so only existing ones are named.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "packed-refs"]
        .into_iter()
        .chain(branch.as_deref())
    {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            let path = workspace.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
