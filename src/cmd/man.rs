//! `gpuspy man DIR`: the manual pages, generated from the CLI's own definition
//! (clap_mangen): `gpuspy.1` and one `gpuspy-VERB.1` per verb, with the same descriptions,
//! examples and environment variables as `--help`.

use crate::atomic_file;
use anyhow::{Context, Result};
use std::path::Path;

pub fn man(dir: &Path, cli: clap::Command) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    // As clap_mangen::generate_to walks the verbs, each page written whole or not at all.
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    write_pages(&cli, dir)?;
    println!("gpuspy: manual pages written to {}", dir.display());
    Ok(())
}

/// The page of `cmd` and of each of its visible subcommands.
fn write_pages(cmd: &clap::Command, dir: &Path) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    let page = clap_mangen::Man::new(cmd.clone());
    atomic_file::write(&dir.join(page.get_filename()), |w| Ok(page.render(w)?))
}
