//! Blocking host calls as single events: syncs of every `SyncCause`, allocations and frees.
//!
//! The recorder writes each one, with its start and end ticks, into a ring in the calling
//! thread's block (`ring.rs`, from `record::apply` after such a call only: never on the
//! launch path). The ring has one writer and a fixed size; its pages are committed when
//! first written, so a thread that never blocks costs nothing. Readers (`drain`) run off
//! the hot path: the writer thread every `timeline::DRAIN_NS` at most, the GPU collector
//! through `between`, a dump, and a thread that exits (its last events). They move the
//! events into:
//! - the bounded samples of the dump (the longest and the most recent calls);
//! - a time-ordered history of at least the last `HISTORY_NS` (at most `HISTORY_EVENTS`),
//!   which the GPU collector reads to tell what the host was doing when a GPU idle gap
//!   opened.
//!
//! A ring that a reader does not empty in time overwrites its oldest events: they are
//! counted (`Timeline.blocking_events_lost`), and `between` says which spans of time may
//! miss some.

use crate::clock::Anchor;
use crate::forklock::ForkLock;
use crate::record::{self, ThreadStats};
use gpuspy_format::timeline::{HostEvent, SAMPLED_EVENTS};
use std::collections::VecDeque;
use std::time::Duration;

/// The history keeps at least this much time: a GPU idle gap's opening is looked up when
/// its time settles, up to `MAX_HOLD_NS` late...
const HISTORY_NS: u64 = crate::gpu::activity::MAX_HOLD_NS + 500_000_000;
/// ...and at most this many events (6 MiB): `HISTORY_NS` of 87,000 blocking calls a
/// second. At 32,768 an allocation loop making 24,500 a second kept 1.3 s, less than the
/// collector's lag, and 69 % of its steady state's idle time had no known cause
/// (bench/results/gpu-2026-12-01-run16-phases-17, long alloc-churn).
const HISTORY_EVENTS: usize = 1 << 18;
/// Spans of time with lost events that `between` remembers; older ones count as trimmed.
const LOSS_SPANS: usize = 64;

#[derive(Default)]
struct History {
    /// Per block: its retire count when last read, the next ring position to read, and
    /// when (Unix ns) it was last read.
    read: Vec<(u32, u64, u64)>,
    /// Ordered by end.
    events: VecDeque<HostEvent>,
    /// Events that ended before this (Unix ns) may be gone from `events`.
    trimmed_to: u64,
    /// Unix ns spans in which some events were lost from a ring.
    losses: VecDeque<(u64, u64)>,
    longest: Vec<HostEvent>,
    recent: VecDeque<HostEvent>,
    lost: u64,
}

static HISTORY: ForkLock<History> = ForkLock::new();

impl History {
    /// Reads block `index`'s ring into `batch` as Unix-ns events.
    fn read_block(
        &mut self,
        index: usize,
        block: &ThreadStats,
        anchor: &Anchor,
        batch: &mut Vec<HostEvent>,
    ) {
        if self.read.len() <= index {
            self.read.resize(index + 1, (0, 0, 0));
        }
        let Some(read) = self.read.get_mut(index) else {
            return;
        };
        let retired = record::retired(index);
        let (seen_retired, mut from, read_at) = *read;
        if seen_retired != retired {
            from = 0;
        }
        let mut raw = Vec::new();
        let (next, lost) = block.events.read(from, &mut raw);
        let now = anchor.unix_now();
        if lost > 0 {
            self.lost += lost;
            self.losses.push_back((read_at, now));
        }
        *read = (retired, next, now);
        batch.extend(raw.into_iter().map(|(start, end, kind)| {
            let start_unix_ns = anchor.unix_ns(start);
            HostEvent {
                start_unix_ns,
                end_unix_ns: start_unix_ns + anchor.ns_between(start, end),
                kind,
            }
        }));
    }

    /// Files a batch of new events into the samples and the history, then trims the
    /// history to what it keeps as of `now`.
    fn absorb(&mut self, mut batch: Vec<HostEvent>, now: u64) {
        batch.sort_unstable_by_key(|e| e.end_unix_ns);
        for e in batch {
            self.sample(&e);
            if e.end_unix_ns < self.trimmed_to {
                continue;
            }
            let at = self
                .events
                .partition_point(|o| o.end_unix_ns <= e.end_unix_ns);
            self.events.insert(at, e);
        }
        let cutoff = now.saturating_sub(HISTORY_NS);
        while let Some(oldest) = self.events.front() {
            if oldest.end_unix_ns >= cutoff && self.events.len() <= HISTORY_EVENTS {
                break;
            }
            self.trimmed_to = self.trimmed_to.max(oldest.end_unix_ns + 1);
            self.events.pop_front();
        }
        self.trimmed_to = self.trimmed_to.max(cutoff);
        while self.losses.len() > LOSS_SPANS {
            if let Some((_, end)) = self.losses.pop_front() {
                self.trimmed_to = self.trimmed_to.max(end);
            }
        }
        let trimmed_to = self.trimmed_to;
        self.losses.retain(|&(_, end)| end > trimmed_to);
    }

    fn sample(&mut self, e: &HostEvent) {
        let length = |e: &HostEvent| e.end_unix_ns - e.start_unix_ns;
        let at = self.longest.partition_point(|o| length(o) >= length(e));
        if at < SAMPLED_EVENTS {
            self.longest.insert(at, e.clone());
            self.longest.truncate(SAMPLED_EVENTS);
        }
        let at = self
            .recent
            .partition_point(|o| o.end_unix_ns <= e.end_unix_ns);
        self.recent.insert(at, e.clone());
        if self.recent.len() > SAMPLED_EVENTS {
            self.recent.pop_front();
        }
    }

    fn between(&self, from: u64, to: u64, out: &mut Vec<HostEvent>) -> bool {
        let first = self.events.partition_point(|e| e.end_unix_ns < from);
        out.extend(
            self.events
                .range(first..)
                .take_while(|e| e.end_unix_ns < to)
                .cloned(),
        );
        from >= self.trimmed_to && !self.losses.iter().any(|&(a, b)| a < to && from < b)
    }

    /// Reads every live thread's ring.
    fn drain(&mut self) {
        let anchor = Anchor::now();
        let mut batch = Vec::new();
        record::with_blocks(|blocks| {
            // Block 0 holds exited threads' counters; their events were read at exit.
            for (index, block) in blocks.iter().enumerate().skip(1) {
                self.read_block(index, block, &anchor, &mut batch);
            }
        });
        self.absorb(batch, anchor.unix_now());
    }
}

/// Host blocking events that ended in [from, to) Unix ns, oldest first, appended to `out`.
/// Returns false when events in that range may be missing (a ring overflowed or the
/// history was trimmed).
pub fn between(from: u64, to: u64, out: &mut Vec<HostEvent>) -> bool {
    let mut history = HISTORY.lock();
    history.drain();
    history.between(from, to, out)
}

/// The writer thread's regular read of the rings.
pub fn drain() {
    HISTORY.lock().drain();
}

/// A thread's last events, read as it exits (its block is about to be zeroed); block
/// `index` is the caller's own.
pub fn retire(index: usize, block: &ThreadStats) {
    let mut history = HISTORY.lock();
    let anchor = Anchor::now();
    let mut batch = Vec::new();
    history.read_block(index, block, &anchor, &mut batch);
    history.absorb(batch, anchor.unix_now());
}

/// The dump's samples: the longest blocking calls (longest first), the most recent ones
/// (oldest first) and the events lost so far. Nothing if the history stays locked for
/// long (a thread the dump's signal interrupted may hold it).
pub fn samples() -> Option<(Vec<HostEvent>, Vec<HostEvent>, u64)> {
    let mut history = HISTORY.lock_within(Duration::from_millis(100))?;
    history.drain();
    Some((
        history.longest.clone(),
        history.recent.iter().cloned().collect(),
        history.lost,
    ))
}

/// Fork child: starts from no events, like the arena.
pub fn on_fork_child() {
    HISTORY.reset_in_child();
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuspy_format::timeline::HostEventKind;
    use gpuspy_format::SyncCause;

    fn sync(start: u64, end: u64) -> HostEvent {
        HostEvent {
            start_unix_ns: start,
            end_unix_ns: end,
            kind: HostEventKind::Sync(SyncCause::Explicit),
        }
    }

    #[test]
    fn samples_keep_the_longest_and_the_latest() {
        let mut h = History::default();
        let batch = (0..40u64)
            .map(|i| sync(i * 100, i * 100 + (i * 37) % 50))
            .collect();
        h.absorb(batch, 5_000);
        assert_eq!(h.longest.len(), SAMPLED_EVENTS);
        let lengths: Vec<u64> = h
            .longest
            .iter()
            .map(|e| e.end_unix_ns - e.start_unix_ns)
            .collect();
        let mut expected: Vec<u64> = (0..40u64).map(|i| (i * 37) % 50).collect();
        expected.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(lengths, expected[..SAMPLED_EVENTS]);
        let starts: Vec<u64> = h.recent.iter().map(|e| e.start_unix_ns).collect();
        assert_eq!(starts, (24..40u64).map(|i| i * 100).collect::<Vec<_>>());
    }

    #[test]
    fn the_history_is_ordered_trimmed_and_says_what_it_lost() {
        let mut h = History::default();
        let t0 = 10 * HISTORY_NS;
        h.absorb(vec![sync(t0, t0 + 30), sync(t0 - 50, t0 + 10)], t0 + 100);
        // A late event that ended earlier is filed in order.
        h.absorb(vec![sync(t0, t0 + 20)], t0 + 200);
        let ends: Vec<u64> = h.events.iter().map(|e| e.end_unix_ns - t0).collect();
        assert_eq!(ends, vec![10, 20, 30]);
        let mut out = Vec::new();
        assert!(h.between(t0 + 15, t0 + 30, &mut out));
        assert_eq!(out, vec![sync(t0, t0 + 20)]);
        // Past HISTORY_NS the old ones go, and their span counts as possibly missing.
        let later = t0 + HISTORY_NS + 25;
        h.absorb(vec![sync(later, later + 1)], later + 1);
        assert_eq!(h.events.len(), 2);
        assert_eq!(h.trimmed_to, later + 1 - HISTORY_NS);
        out.clear();
        assert!(!h.between(t0, t0 + 31, &mut out));
        assert_eq!(out, vec![sync(t0, t0 + 30)]);
        assert!(h.between(later, later + 2, &mut Vec::new()));
        // A span with lost events is not complete.
        h.losses.push_back((later + 5, later + 9));
        assert!(!h.between(later, later + 6, &mut Vec::new()));
        assert!(h.between(later + 9, later + 20, &mut Vec::new()));
    }

    #[test]
    fn the_history_covers_the_collectors_longest_lag_at_a_fast_allocation_loop() {
        // A blocking call every 40 µs (25,000 a second; the H200's fastest alloc-churn loop
        // made 24,500), drained every 100 ms for 4 s.
        let mut h = History::default();
        let t0 = 10 * HISTORY_NS;
        let (every, drain) = (40_000, 100_000_000);
        for d in 0..40 {
            let batch = (0..drain / every)
                .map(|k| {
                    let at = t0 + d * drain + k * every;
                    HostEvent {
                        start_unix_ns: at,
                        end_unix_ns: at + 1_000,
                        kind: HostEventKind::Alloc,
                    }
                })
                .collect();
            h.absorb(batch, t0 + (d + 1) * drain);
        }
        // A gap that settles `MAX_HOLD_NS` late still finds what the host did.
        let now = t0 + 40 * drain;
        let opened = now - crate::gpu::activity::MAX_HOLD_NS;
        let mut found = Vec::new();
        assert!(h.between(opened, opened + every, &mut found));
        assert_eq!(found.len(), 1);
    }
}
