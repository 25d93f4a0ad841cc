//! Which runs the merged dumps come from. `gpuspy run` gives every run a token that the shim
//! copies into each dump (`process.run_token`), so dumps with different tokens are different
//! runs, whatever directory holds them. Dumps without one (a plain `LD_PRELOAD`, an older
//! shim) are told apart by time: a run's processes overlap or follow each other closely,
//! and a process that starts `SEPARATE_AFTER_NS` or more after every earlier one ended
//! begins another run. The report merges them all and says so (`Report::runs`).

use crate::analysis::profile::{ProcessInfo, Profile};
use serde::Serialize;
use std::path::PathBuf;

/// A pause with no process of the dumps alive that long separates two runs without tokens:
/// a job's launcher outlives its workers, and steps of one script follow within seconds.
pub const SEPARATE_AFTER_NS: u64 = 60_000_000_000;

#[derive(Serialize)]
pub struct Run {
    /// The token `gpuspy run` gave it; None for dumps written without one.
    pub token: Option<String>,
    pub processes: usize,
    pub start_unix_ns: u64,
    pub stop_unix_ns: u64,
    /// How long after the first run's start this one started.
    pub after_first_ns: u64,
    /// The command line of its first process (the launcher, in a distributed job).
    pub command: Vec<String>,
    /// The directories its dumps were read from.
    pub dirs: Vec<PathBuf>,
}

/// A process as runs are told apart: its span and its run token.
pub struct Span<'a> {
    pub start_unix_ns: u64,
    pub stop_unix_ns: u64,
    pub token: Option<&'a str>,
}

/// The run of each span, the runs numbered by their first start (0 the earliest).
pub fn run_of(spans: &[Span]) -> Vec<usize> {
    let mut by_start: Vec<usize> = (0..spans.len()).collect();
    by_start.sort_by_key(|&i| spans[i].start_unix_ns);
    // Each run so far: its token and its latest stop.
    let mut runs: Vec<(Option<&str>, u64)> = Vec::new();
    let mut of = vec![0; spans.len()];
    for i in by_start {
        let s = &spans[i];
        let same = runs
            .iter()
            .rposition(|&(token, stop)| match (token, s.token) {
                (Some(a), Some(b)) => a == b,
                (None, None) => s.start_unix_ns < stop.saturating_add(SEPARATE_AFTER_NS),
                _ => false,
            });
        of[i] = match same {
            Some(r) => {
                runs[r].1 = runs[r].1.max(s.stop_unix_ns);
                r
            }
            None => {
                runs.push((s.token, s.stop_unix_ns));
                runs.len() - 1
            }
        };
    }
    of
}

/// The runs of `p`, earliest first.
pub fn runs(p: &Profile) -> Vec<Run> {
    let spans: Vec<Span> = p
        .processes
        .iter()
        .map(|pr| Span {
            start_unix_ns: pr.start_unix_ns,
            stop_unix_ns: pr.stop_unix_ns,
            token: pr.run_token.as_deref(),
        })
        .collect();
    let of = run_of(&spans);
    let mut by_start: Vec<(usize, &ProcessInfo)> = p.processes.iter().enumerate().collect();
    by_start.sort_by_key(|(_, pr)| pr.start_unix_ns);
    let mut runs: Vec<Run> = Vec::new();
    for (i, pr) in by_start {
        let dir = pr.path.parent().map(PathBuf::from).unwrap_or_default();
        // In start order, a run's first process comes when the runs before it are listed.
        match runs.get_mut(of[i]) {
            Some(run) => {
                run.processes += 1;
                run.stop_unix_ns = run.stop_unix_ns.max(pr.stop_unix_ns);
                if !run.dirs.contains(&dir) {
                    run.dirs.push(dir);
                }
            }
            None => runs.push(Run {
                token: pr.run_token.clone(),
                processes: 1,
                after_first_ns: runs
                    .first()
                    .map_or(0, |first| pr.start_unix_ns - first.start_unix_ns),
                start_unix_ns: pr.start_unix_ns,
                stop_unix_ns: pr.stop_unix_ns,
                command: pr.cmdline.clone(),
                dirs: vec![dir],
            }),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(start_s: u64, stop_s: u64, token: Option<&str>, cmd: &str) -> ProcessInfo {
        let p = crate::analysis::diagnose::synthetic::run(1.0).build();
        let mut pr = p.processes[0].clone();
        pr.start_unix_ns = start_s * 1_000_000_000;
        pr.stop_unix_ns = stop_s * 1_000_000_000;
        pr.run_token = token.map(String::from);
        pr.cmdline = vec![cmd.to_string()];
        pr.path = PathBuf::from(format!("out/{cmd}/gpuspy-{start_s}.json"));
        pr
    }

    fn of(processes: Vec<ProcessInfo>) -> Vec<(Option<String>, usize, String, u64)> {
        let p = Profile {
            processes,
            ..Profile::default()
        };
        runs(&p)
            .into_iter()
            .map(|r| {
                (
                    r.token,
                    r.processes,
                    r.command.join(" "),
                    r.after_first_ns / 1_000_000_000,
                )
            })
            .collect()
    }

    #[test]
    fn tokens_tell_runs_apart_whatever_their_times() {
        let runs = of(vec![
            process(0, 10, Some("a"), "torchrun"),
            process(1, 9, Some("a"), "worker"),
            process(2, 8, Some("b"), "other"),
            process(3, 9, Some("a"), "worker"),
        ]);
        assert_eq!(
            runs,
            [
                (Some("a".into()), 3, "torchrun".into(), 0),
                (Some("b".into()), 1, "other".into(), 2)
            ]
        );
    }

    #[test]
    fn without_tokens_a_minute_with_nothing_alive_separates_runs() {
        let runs = of(vec![
            process(0, 100, None, "launcher"),
            process(50, 90, None, "worker"),
            // Starts 59 s after everything ended: the same run (a script's next step).
            process(159, 200, None, "step2"),
            // Hours later: another run.
            process(7200, 7300, None, "again"),
            process(7210, 7290, Some("t"), "tokened"),
        ]);
        assert_eq!(
            runs,
            [
                (None, 3, "launcher".into(), 0),
                (None, 1, "again".into(), 7200),
                (Some("t".into()), 1, "tokened".into(), 7210)
            ]
        );
    }
}
