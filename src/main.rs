//! `gpuspy`: runs programs under `libgpuspy.so` and turns its dumps into reports. The CLI
//! is the library (src/lib.rs); this binary parses the command line and runs it.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Die of SIGPIPE when the reader of stdout goes away (`gpuspy explain | head`), as Unix
    // tools do. Rust ignores SIGPIPE, so every print would instead panic on EPIPE, exit 101
    // and leave a panic message; handling BrokenPipe at each print instead would mean every
    // renderer returning io::Result. Children got the default from std's spawn before too.
    // SAFETY: called first in main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    gpuspy::cmd::execute(gpuspy::cli::Cli::parse())
}
