//! `gpuspy man DIR`: the manual pages, generated from the CLI's own definition
//! (clap_mangen): `gpuspy.1` and one `gpuspy-VERB.1` per verb, with the same descriptions,
//! examples and environment variables as `--help`.

use anyhow::{Context, Result};
use std::path::Path;

pub fn man(dir: &Path, cli: clap::Command) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    clap_mangen::generate_to(cli, dir)
        .with_context(|| format!("{}: cannot write the pages", dir.display()))?;
    println!("gpuspy: manual pages written to {}", dir.display());
    Ok(())
}
