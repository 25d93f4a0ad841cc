//! The hang watchdog: the writer thread reads every live thread's `in_call` word (which the
//! hot path writes anyway) and treats a driver or NCCL call in flight for `GPUSPY_HANG_S`
//! or longer as a hang. A new hang gets the dump flushed at once, with the calls in flight
//! (`Dump.hangs`), and one line on stderr. The hot path does nothing more for it.
//!
//! A thread stuck outside any intercepted call (sleeping, or in Python) has no call in
//! flight: `gpuspy report` finds such a rank from the communicators' operation counts in
//! the other ranks' periodic flushes (docs/multi-rank.md, "Hangs").

use crate::clock::Anchor;
use crate::config::config;
use crate::hooks::ALL_HOOKS;
use crate::{nccl, record};
use gpuspy_format::Hang;

/// How often the writer thread looks: a quarter of the threshold, so that a hang is found
/// within 1.25 times it, but at most every 10 ms and at least every second.
pub fn check_every_ns() -> Option<u64> {
    let hang = config()?.hang_after?;
    Some((hang.as_nanos() as u64 / 4).clamp(10_000_000, 1_000_000_000))
}

/// The calls in flight for the threshold or longer now, longest first.
pub fn hangs() -> Vec<Hang> {
    current().into_iter().map(|(_, h)| h).collect()
}

/// The hangs now, each with the thread and start (in ticks) that identify it.
fn current() -> Vec<((u32, u64), Hang)> {
    let Some(threshold) = config().and_then(|c| c.hang_after) else {
        return Vec::new();
    };
    let threshold_ns = threshold.as_nanos() as u64;
    let anchor = Anchor::now();
    let mut hangs: Vec<((u32, u64), Hang)> = record::in_flight()
        .into_iter()
        .filter_map(|c| {
            let since_unix_ns = anchor.unix_ns(c.since);
            let elapsed_ns = anchor.unix_now().saturating_sub(since_unix_ns);
            if elapsed_ns < threshold_ns {
                return None;
            }
            let hook = ALL_HOOKS.get(c.hook)?;
            let op = hook.is_nccl().then(|| nccl::thread_op(c.block)).flatten();
            let hang = Hang {
                api: hook.name().to_string(),
                thread: c.tid,
                since_unix_ns,
                elapsed_ns,
                sequence: op.as_ref().map(|o| o.1),
                communicator: op.map(|o| o.0),
            };
            Some(((c.tid, c.since), hang))
        })
        .collect();
    hangs.sort_unstable_by_key(|(_, h)| std::cmp::Reverse(h.elapsed_ns));
    hangs
}

/// The hangs not seen before (`seen`: the thread and start of each one already reported,
/// kept by the writer thread).
pub fn new_hangs(seen: &mut Vec<(u32, u64)>) -> Vec<Hang> {
    let now = current();
    seen.retain(|s| now.iter().any(|(id, _)| id == s));
    let fresh: Vec<((u32, u64), Hang)> = now
        .into_iter()
        .filter(|(id, _)| !seen.contains(id))
        .collect();
    seen.extend(fresh.iter().map(|(id, _)| *id));
    fresh.into_iter().map(|(_, h)| h).collect()
}

/// The stderr line for a hang.
pub fn describe(h: &Hang) -> String {
    let collective = match (&h.communicator, h.sequence) {
        (Some(comm), Some(seq)) => format!(" (communicator {comm}, operation {seq})"),
        _ => String::new(),
    };
    format!(
        "gpuspy: hang: pid {} thread {} in {}{collective} for {:.1} s; its dump was flushed",
        std::process::id(),
        h.thread,
        h.api,
        h.elapsed_ns as f64 / 1e9
    )
}
