//! `gpuspy`: runs programs under `libgpuspy.so` and turns its dumps into reports.
//!
//! The verbs (`cmd_*`) run one pipeline (docs/design.md): `load` (read, validate, merge
//! into a `profile`) -> `analyse` (every judgement once, with `diagnose` and `rules`) ->
//! `report` (one typed `Report`) -> `render_text` / `render_json` (formatting only).

mod analyse;
mod ci_output;
mod cmd_check;
mod cmd_diff;
mod cmd_explain;
mod cmd_report;
mod cmd_run;
mod collectives;
mod diagnose;
mod hangs;
mod load;
mod profile;
mod render_json;
mod render_text;
mod report;
mod rules;
mod stats;

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
    ///
    /// SIGTERM, SIGHUP and SIGINT sent to gpuspy are passed on to the command (a Ctrl-C
    /// from the terminal reaches it directly); gpuspy then reports and exits 128+N.
    Run {
        /// Directory for the dumps (GPUSPY_OUT for the child), created and checked before
        /// the command starts. Only this run's dumps in it are reported.
        #[arg(short, long, default_value = "gpuspy-out")]
        out: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Gate on a budget (see `gpuspy check`) instead of printing the report; exit 1 if
        /// an assertion fails. The budget is read before the command starts.
        #[arg(long, value_name = "BUDGET")]
        check: Option<PathBuf>,
        /// Write Prometheus textfiles to DIR (GPUSPY_PROM_DIR for the child): one per process
        /// at every flush, and one with the job's first finding, diagnosed at every flush.
        #[arg(long, value_name = "DIR")]
        prom: Option<PathBuf>,
        #[command(flatten)]
        ci: CiFiles,
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
    /// Compare two sets of runs; exit 1 on a significant regression.
    Diff {
        /// The base: a dump, a directory of one run's dumps, or a directory of run directories.
        base: PathBuf,
        /// The runs to compare against the base, in the same forms.
        new: PathBuf,
        /// Smallest relative change that counts (0.1 = 10 %).
        #[arg(long, default_value_t = 0.10)]
        threshold: f64,
        /// Smallest absolute latency change that counts, in ns.
        #[arg(long, default_value_t = 200)]
        floor_ns: u64,
        /// Smallest share of the time inside the driver an API must hold to count.
        #[arg(long, default_value_t = 0.01)]
        min_share: f64,
        /// Significance level of the Mann-Whitney tests.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ci: CiFiles,
    },
    /// Check runs against a TOML budget; exit 1 if an assertion fails.
    Check {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_name = "FILE")]
        budget: PathBuf,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ci: CiFiles,
    },
    /// Print a diagnosis rule's documentation, or list the rules.
    Explain {
        /// The rule id (for example sync-stalled); without it, all rules are listed.
        id: Option<String>,
        /// Print the rule table in Markdown, as in the README.
        #[arg(long)]
        markdown_table: bool,
    },
    /// Print the absolute path of libgpuspy.so, the library `gpuspy run` preloads, for
    /// `LD_PRELOAD=$(gpuspy shim-path) python train.py`.
    ShimPath,
}

/// Files for CI systems, written by `diff`, `check` and `run --check`.
#[derive(clap::Args)]
struct CiFiles {
    /// Write JUnit XML here.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a Markdown summary here (for $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
}

impl CiFiles {
    fn output(self, json: bool) -> ci_output::Output {
        ci_output::Output {
            json,
            junit: self.junit,
            markdown: self.markdown,
        }
    }
}

/// 0 when a gate passes, 1 when it fails.
fn gate(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    // Die of SIGPIPE when the reader of stdout goes away (`gpuspy explain | head`), as Unix
    // tools do. Rust ignores SIGPIPE, so every print would instead panic on EPIPE, exit 101
    // and leave a panic message; handling BrokenPipe at each print instead would mean every
    // renderer returning io::Result. Children got the default from std's spawn before too.
    // SAFETY: called first in main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            out,
            json,
            check,
            prom,
            ci,
            command,
        } => cmd_run::run(
            &out,
            json,
            check.as_deref(),
            prom.as_deref(),
            &ci.output(json),
            &command,
        ),
        Command::Diff {
            base,
            new,
            threshold,
            floor_ns,
            min_share,
            alpha,
            json,
            ci,
        } => {
            let options = cmd_diff::Options {
                threshold,
                floor_ns,
                min_share,
                alpha,
            };
            cmd_diff::diff(&[base], &[new], &options, &ci.output(json)).map(gate)
        }
        Command::Check {
            paths,
            budget,
            json,
            ci,
        } => cmd_check::check(&paths, &budget, &ci.output(json)).map(gate),
        Command::Report {
            json,
            per_process,
            paths,
        } => cmd_report::report(&paths, json, per_process).map(|()| ExitCode::SUCCESS),
        Command::Explain { id, markdown_table } => {
            cmd_explain::explain(id.as_deref(), markdown_table).map(|()| ExitCode::SUCCESS)
        }
        Command::ShimPath => cmd_run::print_shim_path(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpuspy: {e:#}");
            ExitCode::from(2)
        }
    }
}
