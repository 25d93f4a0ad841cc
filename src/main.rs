//! `gpuspy`: runs programs under `libgpuspy.so` and turns its dumps into reports.

mod cmd_explain;
mod cmd_report;
mod cmd_run;
mod diagnose;
mod profile;
mod render_json;
mod render_text;
mod rules;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Explains why a GPU job is slow, from the CUDA driver calls it makes.
#[derive(Parser)]
#[command(name = "gpuspy", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command with libgpuspy.so preloaded, then report on the dumps it wrote.
    Run {
        /// Directory for the dumps (GPUSPY_OUT for the child).
        #[arg(short, long, default_value = "gpuspy-out")]
        out: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Report on dumps: files, or directories of them (merged).
    Report {
        /// Exactly one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Add a table with one row per process.
        #[arg(long)]
        per_process: bool,
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Print a diagnosis rule's documentation, or list the rules.
    Explain {
        /// The rule id (for example sync-stalled); without it, all rules are listed.
        id: Option<String>,
        /// Print the rule table in Markdown, as in the README.
        #[arg(long)]
        markdown_table: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { out, json, command } => cmd_run::run(&out, json, &command),
        Command::Report {
            json,
            per_process,
            paths,
        } => cmd_report::report(&paths, json, per_process).map(|()| ExitCode::SUCCESS),
        Command::Explain { id, markdown_table } => {
            cmd_explain::explain(id.as_deref(), markdown_table).map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpuspy: {e:#}");
            ExitCode::from(2)
        }
    }
}
