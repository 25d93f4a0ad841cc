//! Hangs across a job: the calls each process's watchdog found stuck (`Dump.hangs`), and
//! for each communicator whose members disagree, the collective the members ahead wait in
//! and the members that never entered it (docs/multi-rank.md, "Hangs").
//!
//! A collective completes only when every member has entered it. A member that is stuck
//! outside any intercepted call (sleeping, in Python, in a deadlock of its own) shows no
//! call in flight, but its periodic flushes show how many operations it issued on each
//! communicator: fewer than the others, so it never entered the one they wait in.

use crate::analysis::profile::Profile;
use serde::Serialize;

/// One call in flight past the hang threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hang {
    pub rank: Option<u32>,
    pub pid: u32,
    pub host: String,
    pub api: String,
    pub thread: u32,
    pub elapsed_ns: u64,
    /// For an NCCL operation: its communicator and sequence number there.
    pub communicator: Option<String>,
    pub sequence: Option<u64>,
}

/// A collective some members of a communicator wait in and others never entered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub communicator: String,
    /// The operation the members ahead issued last (None in dumps before it was recorded).
    pub collective: Option<String>,
    /// Its sequence number on the communicator (operations issued before it).
    pub sequence: u64,
    /// Members that issued it (`rank N`, or `pid N` outside a launcher).
    pub waiting: Vec<String>,
    /// Members that did not, with the operations they had issued: the suspects.
    pub behind: Vec<(String, u64)>,
}

/// Every process's hung calls, longest first.
pub fn hangs(p: &Profile) -> Vec<Hang> {
    let mut hangs: Vec<Hang> = p
        .processes
        .iter()
        .flat_map(|pr| {
            pr.hangs.iter().map(|h| Hang {
                rank: pr.rank,
                pid: pr.pid,
                host: pr.host.clone(),
                api: h.api.clone(),
                thread: h.thread,
                elapsed_ns: h.elapsed_ns,
                communicator: h.communicator.clone(),
                sequence: h.sequence,
            })
        })
        .collect();
    hangs.sort_by_key(|h| std::cmp::Reverse(h.elapsed_ns));
    hangs
}

/// The collectives that some members of a communicator issued and others did not, in a
/// job where some process hung; empty otherwise (a finished job's disagreement is named
/// by the communicator table).
pub fn waits(p: &Profile) -> Vec<Wait> {
    if p.processes.iter().all(|pr| pr.hangs.is_empty()) {
        return Vec::new();
    }
    p.communicators
        .iter()
        .filter_map(|(key, c)| {
            let ahead = c.members.iter().map(|&(_, n)| n).max()?;
            let (waiting, behind): (Vec<_>, Vec<_>) =
                c.members.iter().cloned().partition(|&(_, n)| n == ahead);
            (!behind.is_empty()).then(|| Wait {
                communicator: key.clone(),
                collective: c.last_ops.get(&ahead).cloned(),
                sequence: ahead - 1,
                waiting: waiting.into_iter().map(|(m, _)| m).collect(),
                behind,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::profile::synthetic::run;

    #[test]
    fn the_member_behind_the_others_is_the_suspect_only_when_something_hung() {
        let mut p = run(10.0).build();
        let c = p.communicators.entry("c1".into()).or_default();
        c.members = vec![
            ("rank 0".into(), 8),
            ("rank 1".into(), 7),
            ("rank 2".into(), 8),
        ];
        c.last_ops.insert(8, "AllReduce".into());
        c.last_ops.insert(7, "AllGather".into());
        p.communicators.entry("c2".into()).or_default().members =
            vec![("rank 0".into(), 3), ("rank 1".into(), 3)];
        assert_eq!(waits(&p), vec![]);
        p.processes[0].hangs.push(gpuspy_format::Hang {
            api: "cuStreamSynchronize".into(),
            thread: 42,
            since_unix_ns: 1,
            elapsed_ns: 6_000_000_000,
            communicator: None,
            sequence: None,
        });
        assert_eq!(
            waits(&p),
            vec![Wait {
                communicator: "c1".into(),
                collective: Some("AllReduce".into()),
                sequence: 7,
                waiting: vec!["rank 0".into(), "rank 2".into()],
                behind: vec![("rank 1".into(), 7)],
            }]
        );
        let h = hangs(&p);
        assert_eq!(
            (h.len(), h[0].api.as_str(), h[0].elapsed_ns, h[0].thread),
            (1, "cuStreamSynchronize", 6_000_000_000, 42)
        );
    }
}
