//! The verbs, one file each: each loads what it is given, analyses it (`analysis`) and
//! hands the result to the renderers (`render`). `execute` runs the parsed command line.

mod check;
mod completions;
mod demo;
mod diff;
mod explain;
mod man;
mod report;
mod run;

use crate::analysis::load::Runs;
use crate::cli::{CiFiles, Cli, Command};
use crate::render::ci_output::Output;
use crate::render::json::JsonTo;
use crate::safe_text;
use clap::CommandFactory;
use std::process::ExitCode;

/// `--json` of `report`, `diff` and `check`: the JSON on stdout, or none.
fn stdout_if(json: bool) -> Option<JsonTo> {
    json.then_some(JsonTo::Stdout)
}

/// Says that a view (`--html`, `--perfetto`) was written: on stdout, or on stderr when
/// stdout holds the JSON alone.
fn wrote(path: &std::path::Path, json_on_stdout: bool) {
    let line = format!("wrote {}", safe_text::Escaped(&path.display().to_string()));
    if json_on_stdout {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// Where `diff`, `check` and `run --check` write their result.
fn ci_output(files: CiFiles, json: Option<JsonTo>) -> Output {
    Output {
        json,
        junit: files.junit,
        markdown: files.markdown,
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

/// Runs the verb `cli` names: its exit code, or 2 with the error on one line of stderr.
pub fn execute(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Run {
            out,
            json,
            check,
            prom,
            ci,
            command,
        } => {
            let json = json.map(JsonTo::from);
            let ci = ci_output(ci, json.clone());
            run::run(
                &out,
                json.as_ref(),
                check.as_deref(),
                prom.as_deref(),
                &ci,
                &command,
            )
        }
        Command::Demo { out } => demo::demo(&out),
        Command::DemoStep { steps } => demo::step::step(steps),
        Command::Diff {
            base,
            new,
            threshold,
            floor_ns,
            min_share,
            alpha,
            json,
            html,
            ci,
        } => {
            let options = crate::analysis::diff::Options {
                threshold,
                floor_ns,
                min_share,
                alpha,
            };
            diff::diff(
                &[base],
                &[new],
                &options,
                &ci_output(ci, stdout_if(json)),
                html.as_deref(),
            )
            .map(gate)
        }
        Command::Check {
            paths,
            budget,
            json,
            ci,
        } => check::check(&paths, &budget, &ci_output(ci, stdout_if(json))).map(gate),
        Command::Report {
            json,
            per_process,
            html,
            perfetto,
            all_runs,
            paths,
        } => report::report(
            &paths,
            if all_runs { Runs::All } else { Runs::Latest },
            stdout_if(json).as_ref(),
            per_process,
            &report::Views { html, perfetto },
        )
        .map(|()| ExitCode::SUCCESS),
        Command::Explain { id, markdown_table } => {
            explain::explain(id.as_deref(), markdown_table).map(|()| ExitCode::SUCCESS)
        }
        Command::ShimPath => run::print_shim_path(),
        Command::Completions { shell } => {
            completions::completions(shell, Cli::command()).map(|()| ExitCode::SUCCESS)
        }
        Command::Man { dir } => man::man(&dir, Cli::command()).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            safe_text::eprint_line(format_args!("{e:#}"));
            ExitCode::from(2)
        }
    }
}
