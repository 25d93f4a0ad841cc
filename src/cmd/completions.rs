//! `gpuspy completions SHELL`: a completion script generated from the CLI's own definition
//! (clap_complete), so it never lags a new verb or flag.

use anyhow::{Context, Result};
use clap_complete::Shell;
use std::io::Write;

pub fn completions(shell: Shell, mut cli: clap::Command) -> Result<()> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cli, "gpuspy", &mut out);
    out.flush().context("cannot write the completions")
}
