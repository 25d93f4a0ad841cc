//! The command line: every verb, flag, example and environment variable that `--help`,
//! the shell completions and the manual pages show, as clap definitions and nothing else.
//! `cmd::execute` runs what was parsed.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The version and the exact build (build.rs), as `gpuspy --version` prints them.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GPUSPY_BUILD"), ")");

/// Explains why a GPU job is slow, from the CUDA driver calls it makes.
#[derive(Parser)]
#[command(
    name = "gpuspy",
    version = VERSION,
    about,
    long_about = None,
    after_help = "Examples:
  gpuspy run -- python train.py        profile a job and print its report
  gpuspy report gpuspy-out/            report on the dumps a job left
  gpuspy explain sync-stalled          what a finding means and how to fix it

`gpuspy VERB --help` describes each verb, its examples and its environment variables."
)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run a command with libgpuspy.so preloaded, then report on the dumps it wrote.
    ///
    /// SIGTERM, SIGHUP and SIGINT sent to gpuspy are passed on to the command (a Ctrl-C
    /// from the terminal reaches it directly); gpuspy then reports and exits 128+N.
    #[command(after_help = "Examples:
  gpuspy run -- python train.py
  gpuspy run --json report.json -o /scratch/dumps -- torchrun --nproc-per-node 8 train.py
  gpuspy run --json - -- python train.py | jq .verdict     (the job's stdout goes to stderr)
  gpuspy run --check budget.toml --junit gate.xml -- python bench.py

Environment:
  GPUSPY_SHIM      the libgpuspy.so to preload (default: beside gpuspy, else ../lib/gpuspy/)
  LD_PRELOAD       kept, after the shim
  GPUSPY_FLUSH_S, GPUSPY_NVML_MS, GPUSPY_CUPTI, GPUSPY_CUPTI_PATH, GPUSPY_CMDLINE,
  GPUSPY_FSYNC, GPUSPY_CLOCK, GPUSPY_DISABLE
                   passed to the command: how the shim records (README, Environment variables)
  GPUSPY_OUT, GPUSPY_RUN_TOKEN
                   set for the command by gpuspy (-o, and one random token per run)
  TMPDIR           where a preload symlink goes when the shim's path has a space, `:` or `$`
  GITHUB_ACTIONS   `true`: with --check, one `::error` line per failed assertion")]
    Run {
        /// Directory for the dumps (GPUSPY_OUT for the child), created and checked before
        /// the command starts. Only this run's dumps in it are reported.
        #[arg(short, long, default_value = "gpuspy-out")]
        out: PathBuf,
        /// Write the report (or, with --check, the gate's result) as one JSON document to
        /// FILE instead of the text report; `-` is stdout, and then the command's own stdout
        /// goes to stderr, so that stdout holds the JSON alone. FILE's directory is checked
        /// before the command starts, and FILE is written whole when it ends, or not at all.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
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
        /// The command and its arguments (after `--` when they start with `-`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Profile a simulated training step, without a GPU: see what a report looks like.
    ///
    /// A training loop that copies each batch from pageable memory and syncs every step
    /// runs under the shim against the fake CUDA driver, CUPTI and NVML that ship beside
    /// libgpuspy.so. Every view of its dumps says SIMULATED: no GPU measured the figures.
    #[command(after_help = "Examples:
  gpuspy demo
  gpuspy demo -o /tmp/demo && gpuspy report --html demo.html /tmp/demo

Environment:
  GPUSPY_SHIM      the libgpuspy.so to preload; the fakes are looked for beside it
  LD_LIBRARY_PATH, FAKECUDA_DELAY_NS
                   set for the job by gpuspy (the fakes, and the latencies they inject)")]
    Demo {
        /// Directory for the dumps, as for `gpuspy run`.
        #[arg(short, long, default_value = "gpuspy-demo")]
        out: PathBuf,
    },
    /// The job `gpuspy demo` profiles (src/cmd/demo/step.rs).
    #[command(hide = true)]
    DemoStep {
        /// Training steps to simulate.
        steps: u32,
    },
    /// Report on dumps: files, or directories of them (merged).
    ///
    /// The report opens with the diagnosis. Of dumps of several runs in the directories
    /// named (other run tokens, or hours apart), only the latest run is reported, with a
    /// note; `--all-runs` merges them, with a note that names each run.
    #[command(after_help = "Examples:
  gpuspy report gpuspy-out/
  gpuspy report --per-process gpuspy-out/gpuspy-node1-4242.json
  gpuspy report --json nodes/ | jq .verdict         (nodes/ holds node0/, node1/, ...)
  gpuspy report --html report.html --perfetto trace.json gpuspy-out/

Environment: none; the shim's variables act when the dumps are written.")]
    Report {
        /// Exactly one JSON object on stdout (docs/report-json.md), instead of the text report.
        #[arg(long)]
        json: bool,
        /// Add a table with one row per process.
        #[arg(long)]
        per_process: bool,
        /// Write the report as one self-contained HTML page (charts, no network); stdout
        /// then says `wrote FILE` instead of printing the text report.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Write the time axis as a trace for ui.perfetto.dev or chrome://tracing (Chrome
        /// trace-event JSON, under 10 MB); stdout then says `wrote FILE`.
        #[arg(long, value_name = "FILE")]
        perfetto: Option<PathBuf>,
        /// Merge every run the directories hold, not only the latest.
        #[arg(long)]
        all_runs: bool,
        /// Dump files, directories of dumps, or directories whose subdirectories hold dumps
        /// (one per node, say); everything named is merged into one report.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Compare two sets of runs; exit 1 on a significant regression.
    #[command(after_help = "Examples:
  gpuspy diff runs/main/ runs/branch/           (directories of run directories)
  gpuspy diff --threshold 0.05 before/ after/
  gpuspy diff --json --junit diff.xml base.json new.json

Environment:
  GITHUB_ACTIONS   `true`: one `::error` line per regression on stdout")]
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
        /// Exactly one JSON object on stdout (the changes, regressions and notes), instead
        /// of the text.
        #[arg(long)]
        json: bool,
        /// Also write the comparisons and both sides' latency histograms as one
        /// self-contained HTML page.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        #[command(flatten)]
        ci: CiFiles,
    },
    /// Check runs against a TOML budget; exit 1 if an assertion fails.
    #[command(after_help = "Examples:
  gpuspy check gpuspy-out/ --budget budget.toml
  gpuspy check runs/ --budget budget.toml --junit check.xml --markdown \"$GITHUB_STEP_SUMMARY\"
  gpuspy check a.json b.json --budget budget.toml --json

The budget's keys are in docs/ci.md.

Environment:
  GITHUB_ACTIONS   `true`: one `::error` line per failed assertion on stdout")]
    Check {
        /// The runs to check, each on its own: dump files, directories of one run's dumps,
        /// or directories of run directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The TOML budget: latency ceilings, calls per run or step, blocked share,
        /// forbidden findings, minimum GPU busy share (docs/ci.md).
        #[arg(long, value_name = "FILE")]
        budget: PathBuf,
        /// Exactly one JSON object on stdout (failed count, cases, notes), instead of the
        /// text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ci: CiFiles,
    },
    /// Print a diagnosis rule's documentation, or list the rules.
    #[command(after_help = "Examples:
  gpuspy explain                    list the rules, one line each
  gpuspy explain pageable-memcpy    evidence, impact and fix of one rule
  gpuspy explain --markdown-table   the README's rule table

Environment: none.")]
    Explain {
        /// The rule id (for example sync-stalled); without it, all rules are listed.
        id: Option<String>,
        /// Print the rule table in Markdown, as in the README.
        #[arg(long)]
        markdown_table: bool,
    },
    /// Print the absolute path of libgpuspy.so, the library `gpuspy run` preloads, for
    /// `LD_PRELOAD=$(gpuspy shim-path) python train.py`.
    #[command(after_help = "Examples:
  LD_PRELOAD=$(gpuspy shim-path) python train.py
  docker run -v $(gpuspy shim-path):/gpuspy.so -e LD_PRELOAD=/gpuspy.so IMAGE CMD

Environment:
  GPUSPY_SHIM      this path instead of the one beside gpuspy or ../lib/gpuspy/")]
    ShimPath,
    /// Print a shell completion script for gpuspy.
    #[command(after_help = "Examples:
  gpuspy completions bash > ~/.local/share/bash-completion/completions/gpuspy
  gpuspy completions zsh > ~/.zfunc/_gpuspy        (with fpath+=~/.zfunc before compinit)
  gpuspy completions fish > ~/.config/fish/completions/gpuspy.fish

Environment: none.")]
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages: gpuspy.1, and gpuspy-VERB.1 for each verb.
    #[command(after_help = "Examples:
  gpuspy man ~/.local/share/man/man1 && man gpuspy-run
  gpuspy man /tmp/pages && man -l /tmp/pages/gpuspy-report.1

Environment: none.")]
    Man {
        /// The directory to write the pages to (created if missing).
        dir: PathBuf,
    },
}

/// Files for CI systems, written by `diff`, `check` and `run --check`.
#[derive(clap::Args)]
pub(crate) struct CiFiles {
    /// Write JUnit XML here.
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Write a Markdown summary here (for $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    pub(crate) markdown: Option<PathBuf>,
}
