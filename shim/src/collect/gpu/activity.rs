//! CUPTI activity records reduced on the fly into bounded per-device aggregates and
//! per-window series on the timeline's grid.
//!
//! Records arrive in buffers, unordered within a buffer and across buffers (CUPTI 13 keeps
//! one buffer per producing thread). Busy time is a union of intervals, which needs them
//! in start order, so each device keeps the intervals not yet settled; `settle(horizon)`
//! sorts them and folds every one that starts before `horizon` into two running unions
//! (kernels only, and all activity). A record that arrives after the time it covers was
//! settled is clipped to the settled frontier and counted as late. Memory is bounded by
//! the intervals of one horizon margin (and `MAX_PENDING`), a capped kernel table and
//! capped window series, whatever the run's length.
//!
//! # Recording periods
//! CUPTI records only while its activity kinds are on: the whole run under
//! `GPUSPY_CUPTI=full`, duty cycles by default (`super::sampling`). Each period opens when
//! the kinds are switched on and closes when they are switched off. A kernel is recorded
//! when it was launched inside a period, and runs after its launch, so a record belongs
//! to the last period that opened before it started. What a period observed on a device:
//! - from its first record's start (work running before it may have been launched before
//!   the period, unrecorded); from the period's opening when the device's queue is known
//!   empty then (the first period, which opens before any context exists);
//! - to the period's close, or its last record's end if later (on one stream, everything
//!   launched after the close runs after that);
//! - to its last record's end only, when the period has fewer kernel records than the
//!   host launched in it and one device has records (`Periods::lost`): CUPTI discards the
//!   records of kernels still incomplete when the kinds are switched off, so a period
//!   closed over a deep queue lost the records of kernels that ran in it, and its tail
//!   would read idle; a copy or memset after a gap in it ran behind those kernels, so the
//!   gap is not observed either;
//! - a period without records on the device observed it idle from opening to close.
//!
//! Several streams can blur the first two rules (work of an earlier launch on another
//! stream runs inside the observed part unrecorded): docs/design.md says how much.
//!
//! # Idle gaps
//! Inside observed time, the GPU is idle where no kernel, copy or memset runs. Each gap
//! gets the host's state at its opening (`idle_cause`), from the host's blocking events;
//! gaps shorter than `BUBBLE_NS` are pipeline bubbles between launches and count as
//! `Host` without a look at the events. When a gap ends it is counted, short or long
//! (`LONG_GAP_NS`), and a long one's idle time, piece by piece under the causes above, is
//! filed under what ended it: a kernel, a copy to the device, another transfer, or nothing
//! (the period closed) (`DeviceWindows::long_idle_ns`). Per-op dispatch leaves one short gap
//! after every launch; a host away for the next batch leaves long gaps its copy ends.

use gpuspy_format::gpu::{
    nccl_collective, Activity, CollectiveKernels, GpuCopy, GridBlocks, KernelStat, Overhead,
    Sampled, UnifiedMemory, PAUSE_NS, TOP_KERNELS,
};
use gpuspy_format::hist::{self, Histogram};
use gpuspy_format::timeline::{
    self, DeviceWindows, GapEnd, HostEvent, HostEventKind, IdleCause, IdleGap, IdleSeries,
    LongIdleSeries, UnifiedMemoryWindows, FIRST_WINDOW_NS, LONG_GAP_NS, SAMPLED_EVENTS, WINDOWS,
};
use gpuspy_format::SyncCause;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::CStr;

/// One decoded activity record.
pub enum Record<'a> {
    Kernel {
        device: u32,
        start: u64,
        end: u64,
        /// CUPTI shares one name string per kernel, so its address identifies the kernel.
        name: Option<&'a CStr>,
        blocks: u64,
    },
    Copy {
        device: u32,
        kind: u8,
        src_memory: u8,
        dst_memory: u8,
        bytes: u64,
        start: u64,
        end: u64,
    },
    Memset {
        device: u32,
        bytes: u64,
        start: u64,
        end: u64,
    },
    UnifiedMemory {
        counter: u32,
        value: u64,
        start: u64,
    },
    Overhead {
        kind: u32,
        start: u64,
        end: u64,
    },
}

/// Launches at a switch's edge (counted in a period, made before the kinds were on or
/// after they were off) or that failed: a closed period with this many fewer kernel
/// records than launches has not lost records.
const EDGE_LAUNCHES: u64 = 8;
/// Past this many unsettled intervals on a device, everything is settled at once.
const MAX_PENDING: usize = 1 << 20;
/// How far behind `now` a settle's horizon may be held for kernel records still to come
/// (`Aggregator::held_horizon`); the host's event history covers it (`crate::events`).
pub const MAX_HOLD_NS: u64 = 2_500_000_000;
/// A period left by the sweep with this many launches, not one kernel record, and a copy or
/// memset record is silent: the GPU ran work in it, and CUPTI's kernel records had stopped
/// (`Aggregator::records_stopped_since`). Behind a queue deeper than the period, its
/// kernels, copies and memsets all start after the close, and none is recorded.
const SILENT_LAUNCHES: u64 = 64;
/// Silent periods (with no period with a kernel record between them) before the kernel
/// records count as stopped: one can be a queue deeper than the records are awaited.
const SILENT_PERIODS: u32 = 2;
/// Distinct kernels tracked by name; later ones are summed into one "other" entry.
const MAX_KERNEL_NAMES: usize = 4096;
/// Pieces of the open idle gap held one by one (`OpenGap`); later ones are spread per
/// cause at once.
const GAP_PIECES: usize = 256;
/// Idle gaps shorter than this are the pipeline bubble between two launches (an empty
/// kernel's launch takes 2.9-3.7 µs on the H200): cause `Host`, without looking at the
/// host's events, which a launch-bound loop would otherwise do 100,000 times a second.
pub const BUBBLE_NS: u64 = 5_000;
/// A sync that returns this long after a gap opened (or up to `CLOCK_SLACK_NS` before:
/// CUPTI's GPU-to-host time mapping is not exact) is the one that waited for the work
/// that just ended. A spinning sync returns within a few µs, a yielding one within tens.
pub const SYNC_RETURN_NS: u64 = 200_000;
pub const CLOCK_SLACK_NS: u64 = 20_000;

/// What the host was doing when a GPU idle gap opened at `opened`, from the blocking events
/// around it (`complete`: none of that time's events were lost).
pub fn idle_cause(opened: u64, events: &[HostEvent], complete: bool) -> IdleCause {
    if !complete {
        return IdleCause::Unknown;
    }
    let returned_on_finish = |e: &&HostEvent| {
        matches!(
            e.kind,
            HostEventKind::Sync(SyncCause::Explicit | SyncCause::SyncCopy)
        ) && e.end_unix_ns + CLOCK_SLACK_NS >= opened
            && e.end_unix_ns <= opened + SYNC_RETURN_NS
    };
    if events.iter().any(|e| returned_on_finish(&e)) {
        return IdleCause::AfterSync;
    }
    WAITS
        .into_iter()
        .find(|&cause| {
            events.iter().any(|e| {
                e.start_unix_ns <= opened
                    && opened < e.end_unix_ns
                    && waiting_cause(e.kind) == Some(cause)
            })
        })
        .unwrap_or(IdleCause::Host)
}

/// The host calls the GPU can idle through, by how much each says when several threads are
/// in calls at once: a collective (a rank waiting for the others), then a copy, then an
/// allocation.
const WAITS: [IdleCause; 3] = [
    IdleCause::Collective,
    IdleCause::PageableCopy,
    IdleCause::Alloc,
];

/// The cause of the GPU's idle time while the host is in a call of `kind`, where the call
/// is one of `WAITS`. A sync copy still running after the GPU went idle is the driver
/// staging pageable memory.
fn waiting_cause(kind: HostEventKind) -> Option<IdleCause> {
    match kind {
        HostEventKind::Collective => Some(IdleCause::Collective),
        HostEventKind::Sync(SyncCause::PageableAsyncCopy | SyncCause::SyncCopy) => {
            Some(IdleCause::PageableCopy)
        }
        HostEventKind::Alloc | HostEventKind::Sync(SyncCause::Free) => Some(IdleCause::Alloc),
        HostEventKind::Sync(SyncCause::Explicit) => None,
    }
}

/// Splits idle time `[from, to)` of a gap that no sync's return opened by the host's calls
/// in it (`events`, all of those that overlap it): each part of it the host spent in one of
/// `WAITS` is that call's (removing the call removes that wait; the first in `WAITS` where
/// calls overlap), the rest host work. By the host's state at the opening alone, a gap that
/// opens as a launch returns, with the host back in Python between allocations, was all
/// host work: the H200's alloc-churn loop read 42 % or 81-88 % allocating from one run to
/// the next (bench/results/gpu-2026-11-30-run7-phases-1 and -2).
pub fn split_by_calls(from: u64, to: u64, events: &[HostEvent]) -> Vec<(u64, u64, IdleCause)> {
    let mut edges: Vec<(u64, i64, usize)> = events
        .iter()
        .filter_map(|e| {
            let rank = WAITS
                .iter()
                .position(|&c| waiting_cause(e.kind) == Some(c))?;
            let (start, end) = (e.start_unix_ns.max(from), e.end_unix_ns.min(to));
            (start < end).then_some([(start, 1, rank), (end, -1, rank)])
        })
        .flatten()
        .collect();
    edges.sort_unstable();
    let mut pieces: Vec<(u64, u64, IdleCause)> = Vec::new();
    let mut open = [0i64; WAITS.len()];
    let mut at = from;
    let mut piece = |a: u64, b: u64, open: &[i64; WAITS.len()]| {
        let cause = WAITS
            .iter()
            .zip(open)
            .find(|&(_, &n)| n > 0)
            .map_or(IdleCause::Host, |(&c, _)| c);
        match pieces.last_mut() {
            Some(last) if last.1 == a && last.2 == cause => last.1 = b,
            _ => pieces.push((a, b, cause)),
        }
    };
    for (time, delta, rank) in edges {
        if time > at {
            piece(at, time, &open);
            at = time;
        }
        if let Some(n) = open.get_mut(rank) {
            *n += delta;
        }
    }
    if at < to {
        piece(at, to, &open);
    }
    pieces
}

/// Where host events are found: `crate::events::between` in the shim, a list in tests.
pub type HostEvents<'a> = &'a mut dyn FnMut(u64, u64, &mut Vec<HostEvent>) -> bool;

/// A time CUPTI's activity kinds were on: `[on, off)`, `off` MAX while still on.
#[derive(Clone, Copy, Debug)]
struct Period {
    on: u64,
    off: u64,
    /// The host's kernel launches so far when it opened, and when it closed.
    launches_on: u64,
    launches_off: u64,
    /// Kernel records, and copy and memset records, that started in it (before the next
    /// period opened).
    kernel_records: u64,
    transfer_records: u64,
    /// Nothing could be queued on any device when it opened (before the first context).
    queue_empty: bool,
}

impl Period {
    fn open(on: u64, launches: u64, queue_empty: bool) -> Period {
        Period {
            on,
            off: u64::MAX,
            launches_on: launches,
            launches_off: 0,
            kernel_records: 0,
            transfer_records: 0,
            queue_empty,
        }
    }

    /// Closed with fewer kernel records than the host launched in it: the records of its
    /// last kernels, queued at the close, were discarded (gpu-truth-facts A.6). Triton's
    /// 4-block loop closed periods with ~1,000 kernels of 1.8 ms queued; their last 0.5 s
    /// read idle (bench/results/gpu-2026-12-01-run16-phases-15). Records that merely
    /// come late hold the settle's horizon (`Aggregator::held_horizon`) before the close,
    /// so the sweep meets this only once they came or were given up. CUDA graphs make more
    /// records than launches, which can hide a loss, never invent one.
    fn lost_records(&self) -> bool {
        self.off != u64::MAX
            && self.launches_off - self.launches_on > self.kernel_records + EDGE_LAUNCHES
    }
}

#[derive(Default)]
pub struct Aggregator {
    /// The timeline's origin: the process's start.
    origin_unix_ns: u64,
    since_unix_ns: u64,
    /// Added to CUPTI timestamps to make them Unix time (CUPTI 13 counts from boot).
    to_unix_ns: i64,
    devices: BTreeMap<u32, DeviceAgg>,
    unified_memory: Option<UnifiedMemory>,
    /// The unified-memory counters per window (of their own grid): when they were on, and
    /// what they recorded.
    um: UmSeries,
    overhead: BTreeMap<u32, (u64, u64)>,
    /// Recording periods, oldest first; `first_period` is the number of the front one.
    periods: VecDeque<Period>,
    first_period: u64,
    /// Whether periods are duty cycles (the counts are then scaled up).
    sampled: bool,
    /// The duty cycle's slot now on (or last): when it began, the host's launches then, and
    /// the records that started in it, for its rate. A slot begins at a period's opening,
    /// or inside one where the next follows with the kinds left on.
    slot_on: u64,
    slot_launches_on: u64,
    slot_records: u64,
    /// The host's kernel launches made while the closed periods were open.
    launches_recorded: u64,
    /// Kernel records received, timed or not.
    kernel_records: u64,
    /// The opening and close (`u64::MAX` while open) of the first and of the last period in
    /// which a record started, kept when the period leaves `periods`.
    first_active: Option<(u64, u64)>,
    last_active: Option<(u64, u64)>,
    /// The host's launches made while recording, as of each settle of the last
    /// `MAX_HOLD_NS`: (Unix ns, launches).
    recorded_launches: VecDeque<(u64, u64)>,
    /// Launches made while recording, as of the last settle older than `MAX_HOLD_NS`: a
    /// record not come by then is not awaited (a dropped record, a launch counted at a
    /// switch's edge).
    launches_given_up: u64,
    /// Unified-memory counters: when first switched on, since when on now (None: off),
    /// and the time on before that.
    um_first_on: Option<u64>,
    um_on_since: Option<u64>,
    um_on_ns: u64,
    /// Silent periods left by the sweep in a row, opened since `restarted_at`, and the close
    /// of the last one.
    silent_periods: u32,
    silent_close: u64,
    /// When CUPTI was last attached anew because its kernel records had stopped.
    restarted_at: u64,
}

impl Aggregator {
    /// `origin_unix_ns`: the process start, the timeline's origin; `since_unix_ns`: when
    /// CUPTI started (the first period opens then, before any context); `to_unix_ns`: Unix
    /// time minus CUPTI time, measured once; `sampled`: periods will be duty cycles;
    /// `launches`: the host's kernel launches so far.
    pub fn new(
        origin_unix_ns: u64,
        since_unix_ns: u64,
        to_unix_ns: i64,
        sampled: bool,
        launches: u64,
    ) -> Self {
        Aggregator {
            origin_unix_ns,
            since_unix_ns,
            to_unix_ns,
            sampled,
            periods: VecDeque::from([Period::open(since_unix_ns, launches, true)]),
            slot_on: since_unix_ns,
            slot_launches_on: launches,
            ..Aggregator::default()
        }
    }

    /// CUPTI was attached anew: its timestamps are Unix time minus `to_unix_ns` from now on.
    pub fn set_to_unix(&mut self, to_unix_ns: i64) {
        self.to_unix_ns = to_unix_ns;
    }

    /// The activity kinds were switched off at `at` (Unix ns), after `launches` kernel
    /// launches of the host's.
    pub fn period_off(&mut self, at: u64, launches: u64) {
        if let Some(p) = self.periods.back_mut().filter(|p| p.off == u64::MAX) {
            p.off = at.max(p.on);
            p.launches_off = launches.max(p.launches_on);
            self.launches_recorded += p.launches_off - p.launches_on;
            for active in [&mut self.first_active, &mut self.last_active] {
                if let Some(a) = active.as_mut().filter(|a| a.0 == p.on) {
                    a.1 = p.off;
                }
            }
        }
    }

    /// The activity kinds were switched on again at `at`, after `launches` launches.
    pub fn period_on(&mut self, at: u64, launches: u64) {
        if self.periods.back().is_some_and(|p| p.off != u64::MAX) {
            self.periods.push_back(Period::open(at, launches, false));
            self.next_slot(at, launches);
        }
    }

    /// A slot of the duty cycle began at `at`, after `launches` launches: its records are
    /// counted from 0.
    pub fn next_slot(&mut self, at: u64, launches: u64) {
        self.slot_on = at;
        self.slot_launches_on = launches;
        self.slot_records = 0;
    }

    /// All `launches` of the host's over those made while activity was recorded (the
    /// period still open counted to now); None when none was. The launch rate changes over
    /// a run (start-up, JIT, pauses: a slot recorded while nothing launched says nothing of
    /// the loop), and kernels follow launches. On the H200 the ratio of time covered to
    /// time recorded put a launch-bound loop's kernels at 15-74 % of its launches
    /// (bench/gpu/kernel_extrapolation.py), and launches per timeline window, a window
    /// recorded in part counted by its share of time, at 107-109 %
    /// (bench/results/gpu-2026-11-30-run9-probe): the launches at each switch are
    /// counted instead.
    fn kernel_factor(&self, launches: u64) -> Option<f64> {
        let recorded = self.launches_while_recording(launches);
        (recorded > 0).then(|| (launches as f64 / recorded as f64).max(1.0))
    }

    /// Of the host's `launches` so far, those made while activity was recorded.
    fn launches_while_recording(&self, launches: u64) -> u64 {
        let open = self
            .periods
            .back()
            .filter(|p| p.off == u64::MAX)
            .map_or(0, |p| launches.saturating_sub(p.launches_on));
        self.launches_recorded + open
    }

    /// The horizon of a settle at `now`, after `launches` launches: `horizon`, held back to
    /// the last settle before the oldest launch recorded whose kernel record has not come,
    /// for at most `MAX_HOLD_NS`. A kernel's record comes with its buffer, once every kernel
    /// recorded in that buffer has run: with ~1,000 kernels of 1.8 ms queued, a Triton loop's
    /// first records came up to 1.7 s after they started on the H200, and its first 1.24 s
    /// counted idle (bench/results/gpu-2026-11-30-run9-probe). Records outnumber
    /// launches with CUDA graphs (nothing is held); a launch whose record never comes (one
    /// made during a stream capture, a dropped record) holds it `MAX_HOLD_NS` at most, then
    /// is given up.
    pub fn held_horizon(&mut self, horizon: u64, now: u64, launches: u64) -> u64 {
        let recorded = self.launches_while_recording(launches);
        self.recorded_launches.push_back((now, recorded));
        let oldest = now.saturating_sub(MAX_HOLD_NS);
        while let Some(&(_, n)) = self.recorded_launches.front().filter(|&&(t, _)| t < oldest) {
            self.launches_given_up = self.launches_given_up.max(n);
            self.recorded_launches.pop_front();
        }
        let accounted = self.accounted_launches();
        if accounted >= recorded {
            return horizon;
        }
        let waiting_since = self
            .recorded_launches
            .iter()
            .rev()
            .find(|&&(_, n)| n <= accounted)
            .map_or(oldest, |&(t, _)| t);
        horizon.min(waiting_since.max(oldest))
    }

    /// Launches made while recording whose kernel record came (timed or not) or was given up.
    fn accounted_launches(&self) -> u64 {
        self.kernel_records.max(self.launches_given_up)
    }

    /// Of the host's `launches` so far, those made while recording whose kernel record has
    /// not come: kernels still queued or running, as `cuptiActivityFlushAll(0)` returns a
    /// buffer once all its records are complete.
    pub fn awaited_records(&self, launches: u64) -> u64 {
        self.launches_while_recording(launches)
            .saturating_sub(self.accounted_launches())
    }

    /// What the slot now on (or last) cost CUPTI, counted in records, and the host's
    /// launches since it began, of `launches` so far. The count is the kernel, copy and
    /// memset records received that started in it, or its launches where these are more:
    /// each launch made while a kind is on costs CUPTI's instrumentation, and a deep queue's
    /// records come late (they would count in no slot, and a launch-bound loop be recorded
    /// whole).
    pub fn this_slot(&self, launches: u64) -> (u64, u64) {
        let launched = launches.saturating_sub(self.slot_launches_on);
        (self.slot_records.max(launched), launched)
    }

    /// A CUPTI timestamp as Unix time; 0 (no timestamp) stays 0.
    fn unix(&self, t: u64) -> u64 {
        if t == 0 {
            0
        } else {
            t.saturating_add_signed(self.to_unix_ns)
        }
    }

    /// A timed record started at `start`: counted for the slot's rate, and its period as
    /// the last active one.
    fn record_started(&mut self, start: u64, kernel: bool) {
        if start >= self.slot_on {
            self.slot_records += 1;
        }
        let period = self.periods.iter_mut().rev().find(|p| p.on <= start);
        if let Some(p) = period {
            p.kernel_records += u64::from(kernel);
            p.transfer_records += u64::from(!kernel);
            if self.first_active.is_none_or(|(on, _)| p.on < on) {
                self.first_active = Some((p.on, p.off));
            }
            if self.last_active.is_none_or(|(on, _)| p.on >= on) {
                self.last_active = Some((p.on, p.off));
            }
        }
    }

    pub fn add(&mut self, record: Record<'_>) {
        let origin = self.origin_unix_ns;
        match record {
            Record::Kernel {
                device,
                start,
                end,
                name,
                blocks,
            } => {
                let (start, end) = (self.unix(start), self.unix(end));
                self.record_started(start, true);
                self.kernel_records += 1;
                self.devices
                    .entry(device)
                    .or_default()
                    .kernel(origin, start, end, name, blocks);
            }
            Record::Copy {
                device,
                kind,
                src_memory,
                dst_memory,
                bytes,
                start,
                end,
            } => {
                let (start, end) = (self.unix(start), self.unix(end));
                self.record_started(start, false);
                let d = self.devices.entry(device).or_default();
                let memory = if kind == COPY_DTOH {
                    dst_memory
                } else {
                    src_memory
                };
                d.copies
                    .entry((kind, memory_name(memory)))
                    .or_default()
                    .add(bytes, start, end);
                d.series.copy_bytes.add(origin, end, bytes);
                let ends_gap = if kind == COPY_HTOD || kind == COPY_HTOA {
                    GapEnd::CopyToDevice
                } else {
                    GapEnd::OtherTransfer
                };
                d.interval(origin, start, end, ends_gap);
            }
            Record::Memset {
                device,
                bytes,
                start,
                end,
            } => {
                let (start, end) = (self.unix(start), self.unix(end));
                self.record_started(start, false);
                let d = self.devices.entry(device).or_default();
                d.memsets.add(bytes, start, end);
                d.interval(origin, start, end, GapEnd::OtherTransfer);
            }
            Record::UnifiedMemory {
                counter,
                value,
                start,
            } => {
                let start = self.unix(start);
                let um = self
                    .unified_memory
                    .get_or_insert_with(UnifiedMemory::default);
                match counter {
                    1 => um.bytes_htod += value,
                    2 => um.bytes_dtoh += value,
                    3 => um.cpu_page_faults += 1,
                    4 => um.gpu_page_fault_groups += 1,
                    5 => um.thrashing_bytes += value,
                    6 => um.throttling_events += 1,
                    7 => um.remote_map_bytes += value,
                    8 => um.bytes_dtod += value,
                    _ => {}
                }
                let windowed = match counter {
                    1 => Some((&mut self.um.bytes_htod, value)),
                    2 => Some((&mut self.um.bytes_dtoh, value)),
                    3 => Some((&mut self.um.cpu_page_faults, 1)),
                    4 => Some((&mut self.um.gpu_page_fault_groups, 1)),
                    _ => None,
                };
                if let Some((series, n)) = windowed {
                    series.add(origin, start, n);
                }
            }
            Record::Overhead { kind, start, end } => {
                let o = self.overhead.entry(kind).or_default();
                o.0 += 1;
                o.1 += end.saturating_sub(start);
            }
        }
    }

    /// Unified-memory counters were switched on: report zeros rather than "not collected".
    fn expect_unified_memory(&mut self) {
        self.unified_memory
            .get_or_insert_with(UnifiedMemory::default);
    }

    /// Folds every interval that starts before `horizon` into the unions, and commits
    /// observed and idle time up to `min(horizon, now)`; gaps get their cause from
    /// `events`.
    pub fn settle(&mut self, horizon: u64, now: u64, events: HostEvents<'_>) {
        let origin = self.origin_unix_ns;
        // One look-up of the host's events for the time this settle commits, rather than
        // one per gap (a launch-bound loop has 100,000 gaps a second); a gap outside it,
        // or a span whose events were partly lost, is looked up on its own.
        let from = self
            .devices
            .values()
            .map(|d| d.sweep.frontier)
            .min()
            .unwrap_or(now)
            .saturating_sub(CLOCK_SLACK_NS);
        let to = horizon.min(now).saturating_add(SYNC_RETURN_NS);
        let mut batch = Vec::new();
        let complete = !self.devices.is_empty() && events(from, to, &mut batch);
        let mut cached = |a: u64, b: u64, out: &mut Vec<HostEvent>| {
            if complete && from <= a && b <= to {
                out.extend(
                    batch
                        .iter()
                        .filter(|e| e.start_unix_ns <= b && e.end_unix_ns >= a)
                        .cloned(),
                );
                true
            } else {
                events(a, b, out)
            }
        };
        let periods = Periods::new(&self.periods, self.first_period, self.devices.len());
        for d in self.devices.values_mut() {
            d.settle(origin, &periods, horizon, now, &mut cached);
        }
        // Periods every device has swept past, and that can hold no more records (the
        // next one opened before the horizon), go.
        let oldest = self
            .devices
            .values()
            .map(|d| d.sweep.period)
            .min()
            .unwrap_or(u64::MAX);
        while self.first_period < oldest
            && self
                .periods
                .get(1)
                .is_some_and(|next| next.on <= horizon.min(now))
        {
            if let Some(left) = self.periods.pop_front() {
                self.count_silence(&left);
            }
            self.first_period += 1;
        }
    }

    /// Counts `left`, a period the sweep is done with, in the run of silent ones: reset by
    /// one with a kernel record, unchanged by one with too few launches or no record.
    fn count_silence(&mut self, left: &Period) {
        if left.on < self.restarted_at {
            return;
        }
        if left.kernel_records > 0 {
            self.silent_periods = 0;
        } else if left.transfer_records > 0
            && left.launches_off.saturating_sub(left.launches_on) >= SILENT_LAUNCHES
        {
            self.silent_periods += 1;
            self.silent_close = left.off;
        }
    }

    /// The close of the last silent period, where `SILENT_PERIODS` came with no period with
    /// a kernel record between them: CUPTI stopped sending kernel records. In H200 runs
    /// whose CUPTI stayed attached while the kinds were switched (about 1 in 10 of most long
    /// staged loops, 6 of 12 of `healthy-pauses`), not one kernel record came after the
    /// first switch-off, while copy and memset records did (docs/diagnosis.md). Their
    /// records were awaited all run, so CUPTI was never detached, and no run detached
    /// between slots showed the state. The caller checks that the kernels ran (a sync
    /// returned after them).
    pub fn records_stopped_since(&self) -> Option<u64> {
        (self.silent_periods >= SILENT_PERIODS).then_some(self.silent_close)
    }

    /// CUPTI was detached at `at` because its kernel records had stopped: the periods before
    /// no longer count.
    pub fn records_restarted(&mut self, at: u64) {
        self.restarted_at = at;
        self.silent_periods = 0;
    }

    /// The unified-memory counters were switched on or off at `at`.
    pub fn unified_memory_switched(&mut self, on: bool, at: u64) {
        if on {
            self.expect_unified_memory();
            self.um_first_on.get_or_insert(at);
            self.um_on_since.get_or_insert(at);
        } else if let Some(since) = self.um_on_since.take() {
            self.um_on_ns += at.saturating_sub(since);
            self.um.observed.spread(self.origin_unix_ns, since, at);
        }
    }

    /// Unified-memory counters, scaled up by the time they were on when sampled.
    pub fn unified_memory(&self, now: u64) -> Option<UnifiedMemory> {
        let factor = self.um_factor(now);
        self.unified_memory.clone().map(|um| UnifiedMemory {
            cpu_page_faults: scale(um.cpu_page_faults, factor),
            gpu_page_fault_groups: scale(um.gpu_page_fault_groups, factor),
            bytes_htod: scale(um.bytes_htod, factor),
            bytes_dtoh: scale(um.bytes_dtoh, factor),
            bytes_dtod: scale(um.bytes_dtod, factor),
            thrashing_bytes: scale(um.thrashing_bytes, factor),
            throttling_events: scale(um.throttling_events, factor),
            remote_map_bytes: scale(um.remote_map_bytes, factor),
        })
    }

    /// The time since the counters were first switched on over the time they were on.
    fn um_factor(&self, now: u64) -> f64 {
        let open = self
            .um_on_since
            .map_or(0, |since| now.saturating_sub(since));
        let on = self.um_on_ns + open;
        let covered = self
            .um_first_on
            .map_or(0, |first| now.saturating_sub(first));
        if !self.sampled || on == 0 || covered <= on {
            1.0
        } else {
            covered as f64 / on as f64
        }
    }

    pub fn overhead(&self) -> Vec<Overhead> {
        self.overhead
            .iter()
            .map(|(&kind, &(count, ns))| Overhead {
                kind: overhead_name(kind).to_string(),
                count,
                ns,
            })
            .collect()
    }

    /// Per-device activity as of now, every interval received so far included. Does not
    /// disturb the running state, so it serves periodic dumps too. `launches`: the host's
    /// kernel launches so far, by which sampled kernel statistics are extrapolated;
    /// `(first_launch, last_launch)`: about when the host launched its first and its last
    /// kernel (Unix ns).
    ///
    /// Sampled, where the host launched after the last period with any record closed, a
    /// device that worked in that period is taken to work until the last launch: its
    /// activity's span ends there, not at the last record. Its extrapolated busy time is
    /// over the whole run, and over the records' span the H200's launch-bound loop read
    /// busy 79 % of the time, against 11 % recorded in full
    /// (bench/results/gpu-2026-11-30-run9-default, truth.sh step 2). The last period
    /// with a record, not the last period: a loop of 35 ms kernels, 10 a second, launched
    /// none in most 20 ms slots, and its span ended 2 s before the loop did
    /// (bench/results/gpu-2026-12-01-run10-final, um-fault-heavy long).
    ///
    /// Likewise where the host launched before the first period with a record opened, a
    /// device that worked in that period is taken to work from the first launch: the same
    /// loop's first record once came 3.2 s into its 3.3 s loop, and busy read 1,096 % of
    /// the 103 ms left (bench/results/gpu-2026-12-01-run11-phases-1, long).
    pub fn devices(&self, launches: u64, launch_span: (u64, u64)) -> Vec<(u32, Activity)> {
        let (first_launch, last_launch) = launch_span;
        let kernel_factor = self.kernel_factor(launches);
        // Where the last launch came inside it (or none closed), the records tell.
        let last_opened = self
            .last_active
            .filter(|&(_, off)| off < last_launch)
            .map_or(u64::MAX, |(on, _)| on);
        // Where the first launch came inside it, or none was filed, likewise.
        let first_closed = self
            .first_active
            .filter(|&(on, _)| first_launch > 0 && first_launch < on)
            .map_or(0, |(_, off)| off);
        let periods = Periods::new(&self.periods, self.first_period, self.devices.len());
        self.devices
            .iter()
            .filter(|(_, d)| d.seen())
            .map(|(&ordinal, d)| {
                let sampling = self.sampled.then(|| d.sampled(kernel_factor));
                let mut a = d.snapshot(self.since_unix_ns, sampling);
                if let Some(ns) = d.pending_lost_tail(&periods) {
                    a.lost_tails += 1;
                    a.lost_tail_ns += ns;
                }
                if self.sampled && d.last >= last_opened {
                    a.last_unix_ns = a.last_unix_ns.max(last_launch);
                }
                if self.sampled && d.first < first_closed {
                    a.first_unix_ns = a.first_unix_ns.min(first_launch);
                }
                (ordinal, a)
            })
            .collect()
    }

    /// The per-window series of every device, and the unified-memory counters' (on until
    /// `now` if on), on the timeline's grid (`origin_unix_ns`, which must be the process
    /// start this aggregator was made with), all brought to one window width. Settled time
    /// only: the last `SETTLE_MARGIN_NS` (more while kernel records are awaited:
    /// `held_horizon`) are missing.
    pub fn windows(&self, origin_unix_ns: u64, now: u64) -> GpuWindows {
        if origin_unix_ns != self.origin_unix_ns {
            return GpuWindows::default();
        }
        let devices: Vec<(u32, DeviceSeries)> = self
            .devices
            .iter()
            .filter(|(_, d)| d.seen())
            .map(|(&ordinal, d)| (ordinal, d.series(origin_unix_ns)))
            .collect();
        let mut um = self.um_first_on.map(|_| self.um.clone());
        if let (Some(um), Some(since)) = (&mut um, self.um_on_since) {
            um.observed.spread(origin_unix_ns, since, now);
        }
        let window_ns = (devices.iter().flat_map(|(_, d)| d.widths()))
            .chain(um.iter().flat_map(|u| u.series().map(|s| s.window_ns)))
            .max()
            .unwrap_or(FIRST_WINDOW_NS);
        GpuWindows {
            window_ns,
            devices: devices
                .into_iter()
                .map(|(ordinal, d)| d.into_windows(ordinal, window_ns))
                .collect(),
            unified_memory: um.map(|u| u.into_windows(window_ns)),
        }
    }
}

/// A latency histogram in full, one count per bucket, made at its first count.
type Dense = [u64; hist::BUCKETS];

fn count_in(hist: &mut Option<Box<Dense>>, ns: u64) {
    let counts = hist.get_or_insert_with(|| Box::new([0; hist::BUCKETS]));
    if let Some(n) = counts.get_mut(hist::bucket_index(ns)) {
        *n += 1;
    }
}

fn scale(v: u64, factor: f64) -> u64 {
    (v as f64 * factor).round() as u64
}

/// CUPTI's copy kinds from host memory to the device (a linear buffer, an array), and back.
const COPY_HTOD: u8 = 1;
const COPY_DTOH: u8 = 2;
const COPY_HTOA: u8 = 3;

fn copy_name(kind: u8) -> &'static str {
    match kind {
        1 => "HtoD",
        2 => "DtoH",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => "other",
    }
}

fn memory_name(kind: u8) -> &'static str {
    match kind {
        1 => "pageable",
        2 => "pinned",
        3 | 6 => "device",
        5 | 7 => "managed",
        _ => "other",
    }
}

fn overhead_name(kind: u32) -> &'static str {
    match kind {
        1 => "driver-compiler",
        0x1_0000 => "cupti-buffer-flush",
        0x2_0000 => "cupti-instrumentation",
        0x3_0000 => "cupti-resource",
        0x4_0000 => "runtime-triggered-module-loading",
        0x5_0000 => "lazy-function-loading",
        0x6_0000 => "command-buffer-full",
        0x7_0000 => "activity-buffer-request",
        0x8_0000 => "uvm-activity-init",
        _ => "unknown",
    }
}

/// One quantity per window from the process start: `FIRST_WINDOW_NS` wide, doubled (and
/// neighbours merged) whenever a time past the `WINDOWS`th window arrives. Each series
/// keeps its own width; `Aggregator::windows` brings them to the widest.
#[derive(Clone)]
struct Series {
    window_ns: u64,
    values: Vec<u64>,
}

impl Default for Series {
    fn default() -> Series {
        Series {
            window_ns: FIRST_WINDOW_NS,
            values: Vec::new(),
        }
    }
}

impl Series {
    fn fit(&mut self, origin: u64, end: u64) {
        while end.saturating_sub(origin) > self.window_ns.saturating_mul(WINDOWS as u64) {
            timeline::merge_pairs(&mut self.values);
            self.window_ns *= 2;
        }
    }

    /// `n` at time `at`.
    fn add(&mut self, origin: u64, at: u64, n: u64) {
        if at < origin {
            return;
        }
        self.fit(origin, at + 1);
        let slot = ((at - origin) / self.window_ns) as usize;
        if self.values.len() <= slot {
            self.values.resize(slot + 1, 0);
        }
        if let Some(v) = self.values.get_mut(slot) {
            *v += n;
        }
    }

    /// The part of `[start, end)` in each window.
    fn spread(&mut self, origin: u64, start: u64, end: u64) {
        if end > start {
            self.fit(origin, end);
            timeline::spread(&mut self.values, origin, self.window_ns, start, end);
        }
    }

    /// How many windows of width `window_ns` (a power-of-two multiple of this one) the
    /// values take.
    fn len_at(&self, window_ns: u64) -> usize {
        self.values
            .len()
            .div_ceil((window_ns / self.window_ns) as usize)
    }

    /// Merges neighbours until the width is `window_ns` (a power-of-two multiple of this
    /// one) or more.
    fn widen(&mut self, window_ns: u64) {
        while self.window_ns < window_ns {
            timeline::merge_pairs(&mut self.values);
            self.window_ns *= 2;
        }
    }

    /// The values at width `window_ns` (a power-of-two multiple of this one), `len` long.
    fn at_width(mut self, window_ns: u64, len: usize) -> Vec<u64> {
        self.widen(window_ns);
        self.values.resize(len.max(self.values.len()), 0);
        self.values
    }

    /// Adds `other`'s values window by window, at the wider of the two widths.
    fn add_series(&mut self, other: Series) {
        self.widen(other.window_ns);
        let values = other.at_width(self.window_ns, self.values.len());
        self.values.resize(values.len(), 0);
        for (sum, v) in self.values.iter_mut().zip(values) {
            *sum += v;
        }
    }
}

/// The GPU side of a timeline, at one window width (`Aggregator::windows`).
#[derive(Debug, PartialEq)]
pub struct GpuWindows {
    pub window_ns: u64,
    pub devices: Vec<DeviceWindows>,
    pub unified_memory: Option<UnifiedMemoryWindows>,
}

impl Default for GpuWindows {
    fn default() -> GpuWindows {
        GpuWindows {
            window_ns: FIRST_WINDOW_NS,
            devices: Vec::new(),
            unified_memory: None,
        }
    }
}

/// The unified-memory counters' series, before they are brought to one width.
#[derive(Clone, Default)]
struct UmSeries {
    observed: Series,
    cpu_page_faults: Series,
    gpu_page_fault_groups: Series,
    bytes_htod: Series,
    bytes_dtoh: Series,
}

impl UmSeries {
    fn series(&self) -> impl Iterator<Item = &Series> {
        [
            &self.observed,
            &self.cpu_page_faults,
            &self.gpu_page_fault_groups,
            &self.bytes_htod,
            &self.bytes_dtoh,
        ]
        .into_iter()
    }

    fn into_windows(self, window_ns: u64) -> UnifiedMemoryWindows {
        let len = self
            .series()
            .map(|s| s.len_at(window_ns))
            .max()
            .unwrap_or(0);
        UnifiedMemoryWindows {
            observed_ns: self.observed.at_width(window_ns, len),
            cpu_page_faults: self.cpu_page_faults.at_width(window_ns, len),
            gpu_page_fault_groups: self.gpu_page_fault_groups.at_width(window_ns, len),
            bytes_htod: self.bytes_htod.at_width(window_ns, len),
            bytes_dtoh: self.bytes_dtoh.at_width(window_ns, len),
        }
    }
}

/// A device's series, before they are brought to one width.
#[derive(Clone, Default)]
struct DeviceSeries {
    observed: Series,
    busy: Series,
    /// Time any kernel, copy or memset ran; less `busy`, the windows' transfer time.
    active: Series,
    kernels: Series,
    copy_bytes: Series,
    idle: BTreeMap<IdleCause, Series>,
    /// Of `idle`, the time in long gaps, per cause and what ended the gap.
    long_idle: BTreeMap<(IdleCause, GapEnd), Series>,
    /// Gaps that ended, shorter than `LONG_GAP_NS` and not.
    short_gaps: Series,
    long_gaps: Series,
    open_gap: OpenGap,
    longest_gaps: Vec<IdleGap>,
    recent_gaps: VecDeque<IdleGap>,
}

/// The idle time of the gap open at the sweep's frontier, held until the gap ends and its
/// length says whether it belongs to the long-gap series.
#[derive(Clone, Default)]
struct OpenGap {
    /// Its idle time so far.
    ns: u64,
    /// Its pieces, in time order, neighbours of one cause joined: its first `GAP_PIECES`...
    pieces: Vec<(u64, u64, IdleCause)>,
    /// ...and the later ones spread per cause, for a gap the host spent in thousands of
    /// calls.
    spilled: BTreeMap<IdleCause, Series>,
}

impl OpenGap {
    fn add(&mut self, origin: u64, start: u64, end: u64, cause: IdleCause) {
        self.ns += end - start;
        let held = self.pieces.len();
        match self.pieces.last_mut() {
            Some(last) if last.1 == start && last.2 == cause => last.1 = end,
            _ if held < GAP_PIECES => self.pieces.push((start, end, cause)),
            _ => self
                .spilled
                .entry(cause)
                .or_default()
                .spread(origin, start, end),
        }
    }
}

impl DeviceSeries {
    fn series(&self) -> impl Iterator<Item = &Series> {
        [
            &self.observed,
            &self.busy,
            &self.active,
            &self.kernels,
            &self.copy_bytes,
            &self.short_gaps,
            &self.long_gaps,
        ]
        .into_iter()
        .chain(self.idle.values())
        .chain(self.long_idle.values())
    }

    fn widths(&self) -> impl Iterator<Item = u64> + '_ {
        self.series().map(|s| s.window_ns)
    }

    fn into_windows(self, ordinal: u32, window_ns: u64) -> DeviceWindows {
        // Column-wise: every series as long as the longest.
        let len = self
            .series()
            .map(|s| s.len_at(window_ns))
            .max()
            .unwrap_or(0);
        let busy_ns = self.busy.at_width(window_ns, len);
        let transfer_ns = (self.active.at_width(window_ns, len).iter())
            .zip(&busy_ns)
            .map(|(active, busy)| active.saturating_sub(*busy))
            .collect();
        DeviceWindows {
            ordinal,
            observed_ns: self.observed.at_width(window_ns, len),
            transfer_ns,
            busy_ns,
            kernels: self.kernels.at_width(window_ns, len),
            copy_bytes: self.copy_bytes.at_width(window_ns, len),
            idle_ns: self
                .idle
                .into_iter()
                .map(|(cause, s)| IdleSeries {
                    cause,
                    ns: s.at_width(window_ns, len),
                })
                .collect(),
            long_idle_ns: self
                .long_idle
                .into_iter()
                .map(|((cause, ended_by), s)| LongIdleSeries {
                    cause,
                    ended_by,
                    ns: s.at_width(window_ns, len),
                })
                .collect(),
            short_gaps_ended: self.short_gaps.at_width(window_ns, len),
            long_gaps_ended: self.long_gaps.at_width(window_ns, len),
            longest_gaps: self.longest_gaps,
            recent_gaps: self.recent_gaps.into(),
        }
    }

    /// Idle time `[start, end)` of `cause`, in the gap open at the sweep's frontier.
    fn add_idle(&mut self, origin: u64, start: u64, end: u64, cause: IdleCause) {
        self.idle
            .entry(cause)
            .or_default()
            .spread(origin, start, end);
        self.open_gap.add(origin, start, end, cause);
    }

    /// The open gap ended at `at`, by `ended_by`: counted, and its idle time, if it is
    /// long, put in the long-gap series. Its length is the idle time committed to it, which
    /// `idle` holds (the end of a period that lost records can come before that).
    fn gap_ended(&mut self, origin: u64, at: u64, ended_by: GapEnd) {
        let gap = &mut self.open_gap;
        let long = gap.ns >= LONG_GAP_NS;
        let count = if long {
            &mut self.long_gaps
        } else {
            &mut self.short_gaps
        };
        // In the window of its last nanosecond: a gap that ends at a window's edge is all
        // in the window before.
        count.add(origin, at.saturating_sub(1), 1);
        if long {
            for (start, end, cause) in gap.pieces.drain(..) {
                let series = self.long_idle.entry((cause, ended_by)).or_default();
                series.spread(origin, start, end);
            }
            for (cause, spilled) in std::mem::take(&mut gap.spilled) {
                let series = self.long_idle.entry((cause, ended_by)).or_default();
                series.add_series(spilled);
            }
        }
        gap.pieces.clear();
        gap.spilled.clear();
        gap.ns = 0;
    }

    /// A finished idle gap, for the bounded samples: the longest above `LONG_GAP_NS` and
    /// the most recent ones.
    fn sample_gap(&mut self, gap: IdleGap) {
        let len = |g: &IdleGap| g.end_unix_ns - g.start_unix_ns;
        if len(&gap) < LONG_GAP_NS {
            return;
        }
        if self.recent_gaps.len() == SAMPLED_EVENTS {
            self.recent_gaps.pop_front();
        }
        self.recent_gaps.push_back(gap.clone());
        let at = self.longest_gaps.partition_point(|g| len(g) >= len(&gap));
        if at < SAMPLED_EVENTS {
            self.longest_gaps.insert(at, gap);
            self.longest_gaps.truncate(SAMPLED_EVENTS);
        }
    }
}

#[derive(Clone, Copy)]
struct Interval {
    start: u64,
    end: u64,
    /// What its record is, as the end of the gap before it.
    ends_gap: GapEnd,
}

impl Interval {
    fn kernel(&self) -> bool {
        self.ends_gap == GapEnd::Kernel
    }
}

/// Copies or memsets: how many, how many bytes, how long on the GPU.
#[derive(Default, Clone, Copy)]
struct Transfers {
    count: u64,
    bytes: u64,
    ns: u64,
}

impl Transfers {
    fn add(&mut self, bytes: u64, start: u64, end: u64) {
        self.count += 1;
        self.bytes += bytes;
        self.ns += end.saturating_sub(start);
    }

    fn scaled(self, factor: f64) -> Transfers {
        Transfers {
            count: scale(self.count, factor),
            bytes: scale(self.bytes, factor),
            ns: scale(self.ns, factor),
        }
    }
}

/// One kernel name's totals, and the NCCL collective it serves, if any.
#[derive(Default)]
struct NamedKernel {
    stat: KernelStat,
    collective: Option<String>,
}

/// Where a device's sweep through the recording periods stands: everything before
/// `frontier` is committed to the series.
#[derive(Default)]
struct Sweep {
    /// The number of the period being swept.
    period: u64,
    /// Where its observed part starts, once known (its first record, or its opening).
    observed_from: Option<u64>,
    frontier: u64,
    /// End of the last activity in this period (0: none yet).
    run_end: u64,
    /// The idle gap open at `frontier`, once its cause is known: (opened, cause).
    gap: Option<(u64, IdleCause)>,
    /// Observed time in all, and where the first period's observed part began.
    observed_ns: u64,
    first_observed: Option<u64>,
    /// Where the unobserved tail of a period that lost records began, once the sweep
    /// reached its close: records after the close move `run_end` past it.
    lost_from: Option<u64>,
}

#[derive(Default)]
struct DeviceAgg {
    pending: Vec<Interval>,
    busy: Union,
    active: Union,
    first: u64,
    last: u64,
    kernels: u64,
    kernel_ns: u64,
    kernel_hist: Option<Box<Dense>>,
    /// Idle gaps between two stretches of activity in one period.
    gap_hist: Option<Box<Dense>>,
    /// Kernels and their time per grid-size bucket (`hist` layout), NCCL's left out.
    grid_blocks: BTreeMap<u32, (u64, u64)>,
    names: HashMap<usize, NamedKernel>,
    other_kernels: NamedKernel,
    /// Per (copy kind, memory kind).
    copies: BTreeMap<(u8, &'static str), Transfers>,
    memsets: Transfers,
    untimed: u64,
    /// Intervals that came after the sweep had passed their start, and their time before it.
    late_records: u64,
    late_ns: u64,
    /// Periods that lost records (`Periods::lost`) that the sweep has left, and their time
    /// left unobserved.
    lost_tails: u64,
    lost_tail_ns: u64,
    sweep: Sweep,
    series: DeviceSeries,
}

impl DeviceAgg {
    fn seen(&self) -> bool {
        self.kernels + self.untimed > 0 || !self.copies.is_empty() || self.memsets.count > 0
    }

    fn kernel(&mut self, origin: u64, start: u64, end: u64, name: Option<&CStr>, blocks: u64) {
        if start == 0 || end < start {
            self.untimed += 1;
            return;
        }
        let ns = end - start;
        self.kernels += 1;
        self.kernel_ns += ns;
        self.series.kernels.add(origin, end, 1);
        count_in(&mut self.kernel_hist, ns);
        let key = name.map_or(0, |n| n.as_ptr() as usize);
        let room = self.names.len() < MAX_KERNEL_NAMES;
        let named = match self.names.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) if room => {
                let name = name.map_or_else(
                    || "(unnamed)".to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                e.insert(NamedKernel {
                    collective: nccl_collective(&name).map(str::to_string),
                    stat: KernelStat {
                        name,
                        ..KernelStat::default()
                    },
                })
            }
            std::collections::hash_map::Entry::Vacant(_) => &mut self.other_kernels,
        };
        // NCCL runs one block per channel by design: not a grid too small for the GPU.
        if named.collective.is_none() {
            let bucket = self
                .grid_blocks
                .entry(hist::bucket_index(blocks) as u32)
                .or_default();
            bucket.0 += 1;
            bucket.1 += ns;
        }
        let stat = &mut named.stat;
        stat.calls += 1;
        stat.total_ns += ns;
        stat.max_ns = stat.max_ns.max(ns);
        stat.min_blocks = if stat.calls == 1 {
            blocks
        } else {
            stat.min_blocks.min(blocks)
        };
        stat.max_blocks = stat.max_blocks.max(blocks);
        self.interval(origin, start, end, GapEnd::Kernel);
    }

    fn interval(&mut self, origin: u64, start: u64, end: u64, ends_gap: GapEnd) {
        if start == 0 || end <= start {
            return;
        }
        self.first = if self.first == 0 {
            start
        } else {
            self.first.min(start)
        };
        self.last = self.last.max(end);
        self.pending.push(Interval {
            start,
            end,
            ends_gap,
        });
        if self.pending.len() >= MAX_PENDING {
            // No period boundary is known here: fold the intervals, sweep no further.
            self.fold(origin, u64::MAX, &mut |_, _, _| true);
        }
    }

    fn settle(
        &mut self,
        origin: u64,
        periods: &Periods<'_>,
        horizon: u64,
        now: u64,
        events: HostEvents<'_>,
    ) {
        if self.sweep.observed_from.is_none() && self.sweep.frontier == 0 {
            self.start_sweep(periods.list, periods.first);
        }
        self.sweep_fold(origin, periods, horizon, events);
        self.advance(origin, periods, horizon.min(now), None, events);
    }

    /// A device's first settle: its sweep starts in the oldest period still kept.
    fn start_sweep(&mut self, periods: &VecDeque<Period>, first_period: u64) {
        self.sweep.period = first_period;
        if let Some(p) = periods.front() {
            self.sweep.frontier = p.on;
            if p.queue_empty {
                self.sweep.observed_from = Some(p.on);
            }
        }
    }

    /// Folds pending intervals into the unions without sweeping periods (an overflow).
    fn fold(&mut self, origin: u64, horizon: u64, events: HostEvents<'_>) {
        let empty = VecDeque::new();
        self.sweep_fold(origin, &Periods::new(&empty, 0, 0), horizon, events);
    }

    fn sweep_fold(
        &mut self,
        origin: u64,
        periods: &Periods<'_>,
        horizon: u64,
        events: HostEvents<'_>,
    ) {
        self.pending.sort_unstable_by_key(|i| i.start);
        let ready = self.pending.partition_point(|i| i.start < horizon);
        let intervals: Vec<Interval> = self.pending.drain(..ready).collect();
        for mut i in intervals {
            if !periods.list.is_empty() {
                if i.start < self.sweep.frontier {
                    // Its time was committed (or passed over, unobserved) before it came.
                    self.late_records += 1;
                    self.late_ns += i.end.min(self.sweep.frontier) - i.start;
                    i.start = self.sweep.frontier;
                    if i.end <= i.start {
                        continue;
                    }
                }
                self.advance(origin, periods, i.start, Some(i.kernel()), events);
                self.sweep_record(origin, periods, i);
            }
            if i.kernel() {
                if let Some((s, e)) = self.busy.add(i.start, i.end) {
                    self.series.busy.spread(origin, s, e);
                }
            }
            if let Some((s, e)) = self.active.add(i.start, i.end) {
                self.series.active.spread(origin, s, e);
            }
        }
    }

    /// Moves the sweep onto a record of the period being swept, which starts at or after
    /// the frontier (`advance` has committed up to its start, or to the period's end).
    fn sweep_record(&mut self, origin: u64, periods: &Periods<'_>, i: Interval) {
        let s = &mut self.sweep;
        let period = periods.get(s.period);
        let closed_before =
            period.is_some_and(|p| p.off != u64::MAX && i.start > p.off.max(s.run_end));
        // A copy or memset after a gap in a period that lost kernel records ran behind the
        // lost kernels (one stream runs in order): the gap is theirs, not idle. torch.compile's
        // short loop ended in a period whose 555 launches left no record and one memset 13 ms
        // later, and the 13 ms read as host-side idle (gpu-2026-12-01-run17-phases-20).
        let after_lost = !i.kernel()
            && i.start > s.run_end
            && period.is_some_and(|p| periods.lost(&p) && i.start <= p.off);
        if after_lost {
            self.lost_tail_ns += i.start - s.frontier.max(s.run_end).min(i.start);
        }
        if s.observed_from.is_none() {
            let from = i.start.max(s.frontier);
            s.observed_from = Some(from);
            s.frontier = from;
            s.first_observed.get_or_insert(from);
        } else if closed_before || after_lost {
            // After its close a period observed only the time its own records ran:
            // launches made since may have run before this one, unrecorded.
            s.frontier = i.start;
        } else if i.start > s.run_end && s.run_end > 0 {
            count_in(&mut self.gap_hist, i.start - s.run_end);
        }
        if i.start >= self.sweep.frontier.max(self.sweep.run_end) {
            self.close_gap(origin, i.start, i.ends_gap);
        }
        self.sweep.run_end = self.sweep.run_end.max(i.end);
    }

    /// The idle gap open at the frontier ended at `at`, by `ended_by`: into the series and
    /// the samples.
    fn close_gap(&mut self, origin: u64, at: u64, ended_by: GapEnd) {
        if let Some((opened, cause)) = self.sweep.gap.take() {
            self.series.gap_ended(origin, at, ended_by);
            self.series.sample_gap(IdleGap {
                start_unix_ns: opened,
                end_unix_ns: at,
                cause,
            });
        }
    }

    /// Commits observed and idle time up to `to`, closing the periods `to` has passed.
    /// `record`: `to` is the start of a record (whether a kernel's), which ends the idle gap
    /// there.
    fn advance(
        &mut self,
        origin: u64,
        periods: &Periods<'_>,
        to: u64,
        record: Option<bool>,
        events: HostEvents<'_>,
    ) {
        let at_record = record.is_some();
        loop {
            let Some(period) = periods.get(self.sweep.period) else {
                return;
            };
            let next = periods.get(self.sweep.period + 1);
            let lost = periods.lost(&period);
            let observed_to = if period.off == u64::MAX {
                u64::MAX
            } else if lost {
                self.sweep.run_end
            } else {
                period.off.max(self.sweep.run_end)
            };
            match next {
                Some(next) if to >= next.on => {
                    // Every record of this period is in: what it observed is final.
                    if self.sweep.observed_from.is_none() {
                        self.sweep.observed_from = Some(self.sweep.frontier.max(period.on));
                        self.sweep.frontier = self.sweep.frontier.max(period.on);
                    }
                    self.commit(origin, observed_to, false, events);
                    self.close_gap(origin, observed_to, GapEnd::NotObserved);
                    if lost {
                        self.lost_tails += 1;
                        self.lost_tail_ns += self.lost_tail(&period, observed_to);
                    }
                    // The last period's activity may reach into this one (a deep queue).
                    self.sweep = Sweep {
                        period: self.sweep.period + 1,
                        frontier: self.sweep.frontier.max(observed_to).max(next.on),
                        observed_ns: self.sweep.observed_ns,
                        first_observed: self.sweep.first_observed,
                        ..Sweep::default()
                    };
                }
                _ => {
                    // A kernel record before the close of a period that lost its tail's
                    // records: the time before it was observed.
                    let observed_to = if record == Some(true) && lost && to <= period.off {
                        observed_to.max(to)
                    } else {
                        observed_to
                    };
                    self.commit(origin, to.min(observed_to), at_record, events);
                    if to >= observed_to {
                        // Switched off, and past its last activity: its tail gap is over.
                        self.close_gap(origin, observed_to, GapEnd::NotObserved);
                    }
                    if lost && to >= period.off && self.sweep.lost_from.is_none() {
                        self.sweep.lost_from = Some(self.tail_start(&period, observed_to));
                    }
                    return;
                }
            }
        }
    }

    /// Where the unobserved tail of `period`, which lost records and was observed to
    /// `observed_to`, begins.
    fn tail_start(&self, period: &Period, observed_to: u64) -> u64 {
        observed_to.max(period.on).max(self.sweep.frontier)
    }

    /// The unobserved tail of `period`: from where the sweep found it began, at its close.
    fn lost_tail(&self, period: &Period, observed_to: u64) -> u64 {
        let from = (self.sweep.lost_from).unwrap_or_else(|| self.tail_start(period, observed_to));
        period.off.saturating_sub(from)
    }

    /// The tail of the period being swept, if it closed having lost records: counted when
    /// the sweep leaves it, so a dump taken before (the last period at exit) adds it.
    fn pending_lost_tail(&self, periods: &Periods<'_>) -> Option<u64> {
        let period = periods.get(self.sweep.period)?;
        (period.off != u64::MAX && periods.lost(&period))
            .then(|| self.lost_tail(&period, self.sweep.run_end))
    }

    /// Observed time `[frontier, to)`, and its idle part after the last activity.
    fn commit(&mut self, origin: u64, to: u64, closing: bool, events: HostEvents<'_>) {
        let Some(observed_from) = self.sweep.observed_from else {
            return;
        };
        self.sweep.first_observed.get_or_insert(observed_from);
        let from = self.sweep.frontier.max(observed_from);
        if to <= from {
            return;
        }
        self.series.observed.spread(origin, from, to);
        self.sweep.observed_ns += to - from;
        let idle_from = from.max(self.sweep.run_end);
        if idle_from < to {
            let opened = self.sweep.run_end.max(observed_from);
            let bubble = closing && to - opened < BUBBLE_NS;
            let cause = match self.sweep.gap {
                Some((at, cause)) if at == opened => cause,
                _ => {
                    let cause = if bubble {
                        IdleCause::Host
                    } else {
                        let mut found = Vec::new();
                        let complete = events(
                            opened.saturating_sub(CLOCK_SLACK_NS),
                            opened + SYNC_RETURN_NS,
                            &mut found,
                        );
                        idle_cause(opened, &found, complete)
                    };
                    self.sweep.gap = Some((opened, cause));
                    cause
                }
            };
            let mut found = Vec::new();
            let pieces = match cause {
                // A sync's return opened it: all of it is that sync's doing.
                IdleCause::AfterSync | IdleCause::Unknown => vec![(idle_from, to, cause)],
                _ if bubble || !events(idle_from, to, &mut found) => vec![(idle_from, to, cause)],
                _ => split_by_calls(idle_from, to, &found),
            };
            for (start, end, cause) in pieces {
                self.series.add_idle(origin, start, end, cause);
            }
        }
        self.sweep.frontier = to;
    }

    /// Observed over covered time, and `kernel_factor`, when activity was sampled.
    fn sampled(&self, kernel_factor: Option<f64>) -> Sampled {
        let covered = self
            .sweep
            .frontier
            .saturating_sub(self.sweep.first_observed.unwrap_or(self.sweep.frontier));
        let observed = self.sweep.observed_ns;
        Sampled {
            observed_ns: observed,
            covered_ns: covered,
            factor: if observed > 0 && covered > observed {
                covered as f64 / observed as f64
            } else {
                1.0
            },
            kernel_factor,
        }
    }

    fn series(&self, origin: u64) -> DeviceSeries {
        let mut series = self.series.clone();
        let mut busy = self.busy.clone();
        if let Some((s, e)) = busy.close() {
            series.busy.spread(origin, s, e);
        }
        let mut active = self.active.clone();
        if let Some((s, e)) = active.close() {
            series.active.spread(origin, s, e);
        }
        // The gap open now, as far as it was committed.
        if self.sweep.gap.is_some() {
            series.gap_ended(origin, self.sweep.frontier, GapEnd::NotObserved);
        }
        series
    }

    /// The activity, scaled by `sampling`'s factors where it was sampled: copies and
    /// memsets by time, kernel statistics by launches where the host's were known.
    fn snapshot(&self, since_unix_ns: u64, sampling: Option<Sampled>) -> Activity {
        let (mut busy, mut active) = (self.busy.clone(), self.active.clone());
        let mut pending = self.pending.clone();
        pending.sort_unstable_by_key(|i| i.start);
        for i in &pending {
            if i.kernel() {
                busy.add(i.start, i.end);
            }
            active.add(i.start, i.end);
        }
        busy.close();
        active.close();
        let factor = sampling.as_ref().map_or(1.0, |s| s.factor);
        let kernel_factor = sampling
            .as_ref()
            .map_or(1.0, |s| s.kernel_factor.unwrap_or(s.factor));
        let n = |v: u64| scale(v, kernel_factor);
        let stat = |k: &KernelStat, name: String| KernelStat {
            name,
            calls: n(k.calls),
            total_ns: n(k.total_ns),
            ..k.clone()
        };
        let mut top: Vec<&KernelStat> = self.names.values().map(|n| &n.stat).collect();
        top.sort_unstable_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        let mut top_kernels: Vec<KernelStat> = top
            .into_iter()
            .take(TOP_KERNELS)
            .map(|k| stat(k, k.name.clone()))
            .collect();
        if self.other_kernels.stat.calls > 0 {
            top_kernels.push(stat(&self.other_kernels.stat, "(other kernels)".into()));
        }
        let mut collectives: BTreeMap<&str, CollectiveKernels> = BTreeMap::new();
        for k in self.names.values() {
            if let Some(op) = &k.collective {
                let c = collectives.entry(op).or_insert_with(|| CollectiveKernels {
                    op: op.clone(),
                    ..CollectiveKernels::default()
                });
                c.calls += n(k.stat.calls);
                c.total_ns += n(k.stat.total_ns);
            }
        }
        // Counts scaled like the kernels, but for the buckets from `unscaled_from` on.
        let dense = |h: &Option<Box<Dense>>, unscaled_from: Option<u64>| {
            h.as_deref().map_or_else(
                || Histogram(Vec::new()),
                |d| {
                    let unscaled =
                        |i| unscaled_from.is_some_and(|from| hist::bucket_bounds(i).0 >= from);
                    let counts: Vec<u64> = d
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| if unscaled(i) { c } else { n(c) })
                        .collect();
                    Histogram::from_dense(&counts)
                },
            )
        };
        let memsets = self.memsets.scaled(factor);
        Activity {
            since_unix_ns,
            first_unix_ns: self.first,
            last_unix_ns: self.last,
            // An untimed record is a kernel that ran, its time unknown: a queue deeper than
            // the slot, detached, brought back 937 of the 4,177 records of the launches made
            // while recording on the H200 (bench/results/gpu-2026-11-30-run9-default).
            kernels: n(self.kernels + self.untimed),
            kernel_ns: n(self.kernel_ns),
            busy_ns: n(busy.total),
            active_ns: n(active.total),
            kernel_hist: dense(&self.kernel_hist, None),
            // The gaps between kernels recur with them; a pause (`Activity::pauses`) is one
            // event, seen whole in a slot the quiet program kept on, taken out of a span
            // that is not scaled: extrapolated, one 6.5 s pause counted 2 and the working
            // span read 0 (a torch.compile run on the H200, kernel factor 2.37).
            gap_hist: dense(&self.gap_hist, Some(PAUSE_NS)),
            small_grid_kernels: None,
            small_grid_ns: None,
            grid_blocks: self
                .grid_blocks
                .iter()
                .map(|(&bucket, &(kernels, ns))| GridBlocks {
                    bucket,
                    kernels: n(kernels),
                    ns: n(ns),
                })
                .collect(),
            top_kernels,
            copies: self
                .copies
                .iter()
                .map(|(&(kind, memory), t)| {
                    let t = t.scaled(factor);
                    GpuCopy {
                        kind: copy_name(kind).into(),
                        memory: memory.into(),
                        count: t.count,
                        bytes: t.bytes,
                        ns: t.ns,
                    }
                })
                .collect(),
            memsets: memsets.count,
            memset_bytes: memsets.bytes,
            memset_ns: memsets.ns,
            busy_series: None,
            late_records: self.late_records + busy.late_records,
            late_ns: self.late_ns + busy.late_ns,
            lost_tails: self.lost_tails,
            lost_tail_ns: self.lost_tail_ns,
            untimed_records: self.untimed,
            collectives: collectives.into_values().collect(),
            sampled: sampling,
        }
    }
}

/// The aggregator's periods, numbered from `first`.
struct Periods<'a> {
    list: &'a VecDeque<Period>,
    first: u64,
    /// One device has records: a period's launches and kernel records are its own. With
    /// several, a device that ran its work to the end would lose its idle time to another's
    /// lost records.
    single_device: bool,
}

impl<'a> Periods<'a> {
    /// `list`, whose front is period number `first`, in a process whose records came from
    /// `devices` devices.
    fn new(list: &'a VecDeque<Period>, first: u64, devices: usize) -> Self {
        Periods {
            list,
            first,
            single_device: devices == 1,
        }
    }

    fn get(&self, number: u64) -> Option<Period> {
        let at = number.checked_sub(self.first)?;
        self.list.get(at as usize).copied()
    }

    /// Whether `p` lost kernel records, as far as the device swept can tell.
    fn lost(&self, p: &Period) -> bool {
        self.single_device && p.lost_records()
    }
}

/// A union of intervals fed in start order: everything before `settled` is final.
#[derive(Clone, Default)]
struct Union {
    open: Option<(u64, u64)>,
    settled: u64,
    total: u64,
    late_records: u64,
    late_ns: u64,
}

impl Union {
    /// Adds `[start, end)`; returns the run it closed, if it opened a new one.
    fn add(&mut self, start: u64, end: u64) -> Option<(u64, u64)> {
        let mut start = start;
        if start < self.settled {
            self.late_records += 1;
            self.late_ns += end.min(self.settled) - start;
            start = self.settled;
            if end <= start {
                return None;
            }
        }
        match self.open {
            Some((open_start, open_end)) if start <= open_end => {
                self.open = Some((open_start, open_end.max(end)));
                None
            }
            Some((open_start, open_end)) => {
                self.total += open_end - open_start;
                self.open = Some((start, end));
                self.settled = start;
                Some((open_start, open_end))
            }
            None => {
                self.open = Some((start, end));
                self.settled = start;
                None
            }
        }
    }

    /// Ends the open run; returns it.
    fn close(&mut self) -> Option<(u64, u64)> {
        let (start, end) = self.open.take()?;
        self.total += end - start;
        self.settled = end;
        Some((start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const MS: u64 = 1_000_000;
    pub(super) const US: u64 = 1_000;
    pub(super) const T0: u64 = 1_700_000_000_000_000_000;

    pub(super) fn kernel(start: u64, end: u64) -> Record<'static> {
        Record::Kernel {
            device: 0,
            start: T0 + start,
            end: T0 + end,
            name: Some(c"_Z6vecAddPfS_S_i"),
            blocks: 4,
        }
    }

    pub(super) fn copy(start: u64, end: u64) -> Record<'static> {
        Record::Copy {
            device: 0,
            kind: 1,
            src_memory: 1,
            dst_memory: 3,
            bytes: 1 << 20,
            start: T0 + start,
            end: T0 + end,
        }
    }

    /// Recorded for the first 10 ms, when the program launched nothing, and for 2 ms of
    /// its loop, 20 kernels: `launches` is the host's count at the second period's start
    /// and end.
    fn two_periods(launches: (u64, u64)) -> Aggregator {
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        agg.period_off(T0 + 10 * MS, 0);
        agg.settle(T0 + 10 * MS, T0 + 10 * MS, &mut no_events);
        agg.period_on(T0 + 50 * MS, launches.0);
        for k in 0..20 {
            let start = 50 * MS + k * 100 * US;
            agg.add(kernel(start, start + 50 * US));
        }
        agg.period_off(T0 + 52 * MS, launches.1);
        agg.settle(u64::MAX, T0 + 100 * MS, &mut no_events);
        agg
    }

    #[test]
    fn kernels_are_extrapolated_by_the_launches_made_while_recording() {
        // The 20 recorded kernels were 20 of the loop's 900 launches: they stand for all
        // 900 (one in 45 was recorded), not for 20 times covered over recorded time.
        let agg = two_periods((400, 420));
        let a = agg.devices(900, (0, 0)).remove(0).1;
        let sampled = a.sampled.unwrap();
        assert_eq!(sampled.kernel_factor, Some(45.0));
        assert_eq!((a.kernels, a.kernel_ns), (900, 900 * 50 * US));
        assert_eq!(a.top_kernels[0].calls, 900);
        // By time, the 20 would have counted 52 / 12 times: so they do when no launch was
        // counted while recording.
        assert_eq!(sampled.observed_ns, 12 * MS);
        assert_eq!(sampled.covered_ns, 52 * MS);
        let a = two_periods((420, 420)).devices(900, (0, 0)).remove(0).1;
        assert_eq!((a.sampled.unwrap().kernel_factor, a.kernels), (None, 87));
    }

    #[test]
    fn the_period_still_open_counts_its_launches_to_now() {
        let mut agg = two_periods((400, 420));
        agg.period_on(T0 + 90 * MS, 880);
        // 20 + 20 of 900 launches made while recording.
        let sampled = agg.devices(900, (0, 0)).remove(0).1.sampled.unwrap();
        assert_eq!(sampled.kernel_factor, Some(22.5));
    }

    #[test]
    fn sampled_a_device_busy_in_the_last_period_works_until_the_last_launch() {
        // Its last record ended at 52 ms, in the last period; the host launched until 100 ms.
        let a = two_periods((400, 420))
            .devices(900, (0, T0 + 100 * MS))
            .remove(0)
            .1;
        assert_eq!(a.last_unix_ns, T0 + 100 * MS);
        // Later periods without records: it worked in the last one with any, even once that
        // period is settled and gone from the list.
        let mut agg = two_periods((400, 420));
        agg.period_on(T0 + 90 * MS, 880);
        let a = agg.devices(900, (0, T0 + 100 * MS)).remove(0).1;
        assert_eq!(a.last_unix_ns, T0 + 100 * MS);
        let mut settled = two_periods((400, 420));
        for on in [90, 200, 300] {
            settled.period_on(T0 + on * MS, 880);
            settled.period_off(T0 + (on + 20) * MS, 890);
        }
        settled.settle(T0 + 350 * MS, T0 + 350 * MS, &mut no_events);
        assert!(settled.periods.front().unwrap().on > T0 + 52 * MS);
        let a = settled.devices(900, (0, T0 + 400 * MS)).remove(0).1;
        assert_eq!(a.last_unix_ns, T0 + 400 * MS);
        // Another device worked in a later period: this one had stopped.
        let device_1 = |start, end| Record::Kernel {
            device: 1,
            start,
            end,
            name: None,
            blocks: 1,
        };
        agg.add(device_1(T0 + 91 * MS, T0 + 92 * MS));
        agg.period_off(T0 + 95 * MS, 890);
        let devices = agg.devices(900, (0, T0 + 100 * MS));
        let stopped = T0 + 50 * MS + 19 * 100 * US + 50 * US;
        assert_eq!(devices[0].1.last_unix_ns, stopped);
        assert_eq!(devices[1].1.last_unix_ns, T0 + 100 * MS);
        // One period for the whole run (a job cheap to record), closed at the end: a device
        // that stopped early stays stopped.
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        agg.add(kernel(0, MS));
        agg.add(device_1(T0 + 9_900 * MS, T0 + 9_950 * MS));
        agg.period_off(T0 + 10_000 * MS, 1_000);
        let devices = agg.devices(1_000, (0, T0 + 9_960 * MS));
        assert_eq!(devices[0].1.last_unix_ns, T0 + MS);
        assert_eq!(devices[1].1.last_unix_ns, T0 + 9_950 * MS);
        // Recorded whole, the records tell.
        let mut agg = full();
        agg.add(kernel(0, 40));
        assert_eq!(
            agg.devices(1, (0, T0 + 100 * MS)).remove(0).1.last_unix_ns,
            T0 + 40
        );
    }

    #[test]
    fn sampled_a_device_busy_in_the_first_period_with_records_works_from_the_first_launch() {
        // Its first record started at 50 ms, in the second period; the host launched from
        // 20 ms, while nothing was recorded.
        let a = two_periods((400, 420))
            .devices(900, (T0 + 20 * MS, T0 + 100 * MS))
            .remove(0)
            .1;
        assert_eq!(
            (a.first_unix_ns, a.last_unix_ns),
            (T0 + 20 * MS, T0 + 100 * MS)
        );
        // The first launch inside that period (or none filed): the records tell.
        for first_launch in [T0 + 51 * MS, 0] {
            let a = two_periods((400, 420))
                .devices(900, (first_launch, T0 + 100 * MS))
                .remove(0)
                .1;
            assert_eq!(a.first_unix_ns, T0 + 50 * MS);
        }
        // A device that began in a later period had not started.
        let mut agg = two_periods((400, 420));
        agg.period_on(T0 + 90 * MS, 880);
        agg.add(Record::Kernel {
            device: 1,
            start: T0 + 91 * MS,
            end: T0 + 92 * MS,
            name: None,
            blocks: 1,
        });
        agg.period_off(T0 + 95 * MS, 890);
        let devices = agg.devices(900, (T0 + 20 * MS, T0 + 100 * MS));
        assert_eq!(devices[0].1.first_unix_ns, T0 + 20 * MS);
        assert_eq!(devices[1].1.first_unix_ns, T0 + 91 * MS);
        // Recorded whole, the records tell.
        let mut agg = full();
        agg.add(kernel(30 * MS, 31 * MS));
        let a = agg.devices(1, (T0 + 10 * MS, T0 + 100 * MS)).remove(0).1;
        assert_eq!(a.first_unix_ns, T0 + 30 * MS);
    }

    pub(super) fn full() -> Aggregator {
        Aggregator::new(T0, T0, 0, false, 0)
    }

    pub(super) fn no_events(_: u64, _: u64, _: &mut Vec<HostEvent>) -> bool {
        true
    }

    fn only(agg: &Aggregator) -> Activity {
        let mut devices = agg.devices(0, (0, 0));
        assert_eq!(devices.len(), 1);
        devices.remove(0).1
    }

    #[test]
    fn busy_time_is_the_exact_union_whatever_the_arrival_order() {
        // Kernels [0,10) [5,20) [30,40) [35,36) and a copy [20,25): kernel union 30 ns,
        // activity union 35 ns, one idle gap of 5 ns between 25 and 30.
        let intervals = [(30, 40), (0, 10), (35, 36), (5, 20)];
        let mut agg = full();
        for &(s, e) in &intervals {
            agg.add(kernel(s, e));
        }
        agg.add(copy(20, 25));
        agg.period_off(T0 + 40, 0);
        agg.settle(u64::MAX, T0 + 40, &mut no_events);
        let a = only(&agg);
        assert_eq!((a.kernels, a.kernel_ns), (4, 10 + 15 + 10 + 1));
        assert_eq!(a.busy_ns, 30);
        assert_eq!(a.active_ns, 35);
        assert_eq!(a.gap_hist.count(), 1);
        assert_eq!(a.gap_hist.0[0].0 as usize, hist::bucket_index(5));
        assert_eq!((a.first_unix_ns, a.last_unix_ns), (T0, T0 + 40));
        assert_eq!(a.busy_share(), Some(30.0 / 40.0));
    }

    #[test]
    fn settling_in_batches_gives_the_same_union() {
        let mut whole = full();
        let mut batched = full();
        // 1000 kernels of 3 ms every 5 ms, delivered in shuffled batches of 100, each
        // batch settled up to where the next batch starts.
        let mut order: Vec<u64> = (0..1000).collect();
        order.reverse();
        for batch in order.chunks(100).rev() {
            for &i in batch.iter().rev() {
                let r = || kernel(i * 5 * MS, i * 5 * MS + 3 * MS);
                whole.add(r());
                batched.add(r());
            }
            let next = batch.iter().min().unwrap() + 100;
            let at = T0 + next * 5 * MS;
            batched.settle(at, at, &mut no_events);
        }
        whole.settle(u64::MAX, T0 + 5000 * MS, &mut no_events);
        let (a, b) = (only(&whole), only(&batched));
        assert_eq!(a.busy_ns, 1000 * 3 * MS);
        assert_eq!(b.busy_ns, a.busy_ns);
        assert_eq!(b.gap_hist, a.gap_hist);
        assert_eq!(a.gap_hist.count(), 999);
        assert_eq!(b.late_records, 0);
    }

    #[test]
    fn a_late_record_is_clipped_and_counted() {
        let mut agg = full();
        agg.add(kernel(0, 10));
        agg.add(kernel(100, 110));
        agg.settle(T0 + 1000, T0 + 1000, &mut no_events);
        // [50, 120) arrives after [100, 110) opened the current run: [50, 100) is lost.
        agg.add(kernel(50, 120));
        let a = only(&agg);
        assert_eq!(a.busy_ns, 10 + 20);
        assert_eq!((a.late_records, a.late_ns), (1, 50));
        // Snapshots leave the running state alone.
        assert_eq!(only(&agg), a);
    }

    #[test]
    fn cupti_time_is_shifted_to_unix_time() {
        let mut agg = Aggregator::new(T0, T0, 1_000, false, 0);
        agg.add(kernel(0, 10));
        let a = only(&agg);
        assert_eq!((a.first_unix_ns, a.last_unix_ns), (T0 + 1_000, T0 + 1_010));
    }

    #[test]
    fn untimed_and_empty_records_do_not_count_as_busy() {
        let mut agg = full();
        agg.add(Record::Kernel {
            device: 0,
            start: 0,
            end: 0,
            name: None,
            blocks: 1,
        });
        agg.add(kernel(10, 10));
        let a = only(&agg);
        assert_eq!((a.untimed_records, a.busy_ns), (1, 0));
        // Both ran: counted as kernels, with the one known time.
        assert_eq!((a.kernels, a.kernel_ns), (2, 0));
    }

    #[test]
    fn nccl_kernel_time_is_totalled_per_collective_and_left_out_of_the_grid_sizes() {
        let mut agg = full();
        let names = [
            c"_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
            c"_Z43ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE24ncclDevKernelArgsStorageILm4096EE",
            c"_Z42ncclDevKernel_Broadcast_RING_LL24ncclDevKernelArgsStorageILm4096EE",
            c"_Z6vecAddPfS_S_i",
        ];
        for (i, (name, ns)) in names.iter().zip([10, 20, 40, 80]).enumerate() {
            for call in 0..=i as u64 {
                let start = T0 + (i as u64 * 10 + call) * 1000;
                agg.add(Record::Kernel {
                    device: 0,
                    start,
                    end: start + ns,
                    name: Some(name),
                    blocks: 2,
                });
            }
        }
        let a = only(&agg);
        // Only vecAdd's 4 two-block grids are counted.
        assert_eq!(
            a.grid_blocks,
            [GridBlocks {
                bucket: 2,
                kernels: 4,
                ns: 4 * 80
            }]
        );
        let got: Vec<(String, u64, u64)> = a
            .collectives
            .into_iter()
            .map(|c| (c.op, c.calls, c.total_ns))
            .collect();
        assert_eq!(
            got,
            [
                ("AllReduce".into(), 3, 10 + 2 * 20),
                ("Broadcast".into(), 3, 3 * 40)
            ]
        );
    }

    #[test]
    fn top_kernels_keep_their_names_and_are_ranked_by_total_time() {
        let mut agg = full();
        let names = [c"_Z6vecAddPfS_S_i", c"gemm_kernel"];
        for i in 0..10u64 {
            agg.add(Record::Kernel {
                device: 0,
                start: T0 + i * 100,
                end: T0 + i * 100 + 10,
                name: Some(names[0]),
                blocks: 4 + i,
            });
        }
        agg.add(Record::Kernel {
            device: 0,
            start: T0 + 5000,
            end: T0 + 5500,
            name: Some(names[1]),
            blocks: 1024,
        });
        let a = only(&agg);
        let top: Vec<(&str, u64, u64, u64)> = a
            .top_kernels
            .iter()
            .map(|k| (k.name.as_str(), k.calls, k.min_blocks, k.max_blocks))
            .collect();
        assert_eq!(
            top,
            [
                ("gemm_kernel", 1, 1024, 1024),
                ("_Z6vecAddPfS_S_i", 10, 4, 13)
            ]
        );
        // Grids of 4 to 13 blocks, one bucket each; 1024 blocks in bucket [1024, 1088).
        let buckets: Vec<(u32, u64, u64)> = a
            .grid_blocks
            .iter()
            .map(|g| (g.bucket, g.kernels, g.ns))
            .collect();
        let mut expected: Vec<(u32, u64, u64)> = (4..14).map(|b| (b, 1, 10)).collect();
        expected.push((hist::bucket_index(1024) as u32, 1, 500));
        assert_eq!(buckets, expected);
        assert_eq!(hist::bucket_bounds(hist::bucket_index(1024)), (1024, 1088));
    }

    #[test]
    fn copies_unified_memory_and_overhead_are_totalled() {
        let mut agg = full();
        agg.unified_memory_switched(true, T0);
        agg.add(copy(0, 1000));
        agg.add(copy(2000, 3000));
        agg.add(Record::Copy {
            device: 0,
            kind: 2,
            src_memory: 3,
            dst_memory: 2,
            bytes: 4096,
            start: T0 + 4000,
            end: T0 + 4100,
        });
        for (counter, value) in [(3, 0x7f00), (3, 0x7f08), (4, 2), (1, 65536), (2, 4096)] {
            agg.add(Record::UnifiedMemory {
                counter,
                value,
                start: T0 + 15 * MS,
            });
        }
        agg.add(Record::Overhead {
            kind: 0x2_0000,
            start: T0,
            end: T0 + 700,
        });
        let a = only(&agg);
        let copies: Vec<(&str, &str, u64, u64, u64)> = a
            .copies
            .iter()
            .map(|c| (c.kind.as_str(), c.memory.as_str(), c.count, c.bytes, c.ns))
            .collect();
        assert_eq!(
            copies,
            [
                ("HtoD", "pageable", 2, 2 << 20, 2000),
                ("DtoH", "pinned", 1, 4096, 100)
            ]
        );
        assert_eq!(
            a.copies[0].bytes_per_s(),
            Some((2 << 20) as f64 * 1e9 / 2000.0)
        );
        assert_eq!(
            agg.unified_memory(T0 + 20 * MS),
            Some(UnifiedMemory {
                cpu_page_faults: 2,
                gpu_page_fault_groups: 1,
                bytes_htod: 65536,
                bytes_dtoh: 4096,
                ..UnifiedMemory::default()
            })
        );
        assert_eq!(
            agg.overhead(),
            [Overhead {
                kind: "cupti-instrumentation".into(),
                count: 1,
                ns: 700
            }]
        );
        assert_eq!(full().unified_memory(T0), None);
        assert_eq!(full().windows(T0, T0).unified_memory, None);
    }

    #[test]
    fn the_unified_memory_counters_have_windows_of_their_own() {
        // The counters on from T0 to 25 ms and again from 38 ms (on at the dump, 42 ms); no
        // device ever recorded activity: the program's kernels ran while the traced kinds
        // were off.
        let mut agg = full();
        agg.unified_memory_switched(true, T0);
        for (counter, value) in [(3, 0x7f00), (3, 0x7f08), (4, 2), (1, 65536), (2, 4096)] {
            agg.add(Record::UnifiedMemory {
                counter,
                value,
                start: T0 + 15 * MS,
            });
        }
        agg.unified_memory_switched(false, T0 + 25 * MS);
        agg.unified_memory_switched(true, T0 + 38 * MS);
        let gpu = agg.windows(T0, T0 + 42 * MS);
        assert!(gpu.devices.is_empty());
        assert_eq!(gpu.window_ns, FIRST_WINDOW_NS);
        assert_eq!(
            gpu.unified_memory,
            Some(UnifiedMemoryWindows {
                observed_ns: vec![10 * MS, 10 * MS, 5 * MS, 2 * MS, 2 * MS],
                cpu_page_faults: vec![0, 2, 0, 0, 0],
                gpu_page_fault_groups: vec![0, 1, 0, 0, 0],
                bytes_htod: vec![0, 65536, 0, 0, 0],
                bytes_dtoh: vec![0, 4096, 0, 0, 0],
            })
        );
    }

    #[test]
    fn the_windows_stay_capped_and_keep_every_busy_nanosecond() {
        let mut agg = full();
        // One hour of 1 ms kernels every second.
        for s in 0..3600u64 {
            agg.add(kernel(s * 1000 * MS, s * 1000 * MS + MS));
            if s % 100 == 99 {
                let at = T0 + s * 1000 * MS;
                agg.settle(at, at, &mut no_events);
            }
        }
        agg.period_off(T0 + 3600 * 1000 * MS, 0);
        agg.settle(u64::MAX, T0 + 3600 * 1000 * MS, &mut no_events);
        let GpuWindows {
            window_ns,
            devices: w,
            ..
        } = agg.windows(T0, T0);
        // 3,600 s over at most 256 windows: 10 ms doubled to 20.48 s.
        assert_eq!(window_ns, FIRST_WINDOW_NS << 11);
        assert!(w[0].busy_ns.len() <= WINDOWS);
        assert_eq!(w[0].busy_ns.iter().sum::<u64>(), 3600 * MS);
        assert_eq!(w[0].kernels.iter().sum::<u64>(), 3600);
        // The first window holds the kernels that started in it, one per second.
        assert_eq!(w[0].busy_ns[0], window_ns.div_ceil(1000 * MS) * MS);
        // Column-wise: every series as long.
        assert_eq!(w[0].observed_ns.len(), w[0].busy_ns.len());
        assert_eq!(w[0].kernels.len(), w[0].busy_ns.len());
        // Every gap is long, and merged with its windows: 3,599 ended by the next kernel,
        // the last by the close.
        let long = long_idle(&w[0]);
        assert_eq!(long.len(), 2);
        assert_eq!((long[0].0, long[0].1), (IdleCause::Host, GapEnd::Kernel));
        assert_eq!(long[0].2.iter().sum::<u64>(), 3599 * 999 * MS);
        assert_eq!(
            (long[1].1, long[1].2.iter().sum::<u64>()),
            (GapEnd::NotObserved, 999 * MS)
        );
        let in_long: Vec<u64> = (0..w[0].busy_ns.len())
            .map(|i| long[0].2[i] + long[1].2[i])
            .collect();
        assert_eq!(in_long, w[0].idle_ns[0].ns);
        assert_eq!(w[0].long_gaps_ended.iter().sum::<u64>(), 3600);
        assert_eq!(w[0].long_gaps_ended.len(), w[0].busy_ns.len());
        assert!(w[0].short_gaps_ended.iter().all(|&n| n == 0));
        // A grid of another origin is not this one.
        assert_eq!(agg.windows(T0 + 1, T0), GpuWindows::default());
    }

    #[test]
    fn records_land_in_their_windows_exactly() {
        let mut agg = full();
        // A kernel across the first window edge, a copy ending in the third window.
        agg.add(kernel(5 * MS, 12 * MS));
        agg.add(copy(19 * MS, 21 * MS));
        agg.period_off(T0 + 30 * MS, 0);
        agg.settle(u64::MAX, T0 + 30 * MS, &mut no_events);
        let GpuWindows {
            window_ns,
            devices: w,
            ..
        } = agg.windows(T0, T0);
        assert_eq!(window_ns, FIRST_WINDOW_NS);
        let w = &w[0];
        assert_eq!(w.ordinal, 0);
        assert_eq!(w.observed_ns, [10 * MS, 10 * MS, 10 * MS]);
        assert_eq!(w.busy_ns, [5 * MS, 2 * MS, 0]);
        assert_eq!(w.kernels, [0, 1, 0]);
        assert_eq!(w.copy_bytes, [0, 0, 1 << 20]);
        // Idle: [0,5) before the kernel (the queue was empty at CUPTI's start), [12,19)
        // and [21,30): no host events, so the host's doing.
        assert_eq!(
            w.idle_ns,
            [IdleSeries {
                cause: IdleCause::Host,
                ns: vec![5 * MS, 7 * MS, 9 * MS]
            }]
        );
    }

    /// A device's long-gap series: (cause, what ended the gaps, per window).
    pub(super) fn long_idle(w: &DeviceWindows) -> Vec<(IdleCause, GapEnd, Vec<u64>)> {
        (w.long_idle_ns.iter())
            .map(|s| (s.cause, s.ended_by, s.ns.clone()))
            .collect()
    }

    /// Host events as the shim's history would return them: those overlapping the span.
    pub(super) fn history(
        events: Vec<HostEvent>,
    ) -> impl FnMut(u64, u64, &mut Vec<HostEvent>) -> bool {
        move |from, to, out| {
            out.extend(
                events
                    .iter()
                    .filter(|e| e.start_unix_ns <= to && e.end_unix_ns >= from)
                    .cloned(),
            );
            true
        }
    }

    pub(super) fn event(start: u64, end: u64, kind: HostEventKind) -> HostEvent {
        HostEvent {
            start_unix_ns: T0 + start,
            end_unix_ns: T0 + end,
            kind,
        }
    }

    #[test]
    fn each_idle_gap_gets_the_host_state_at_its_opening() {
        let mut agg = full();
        for (s, e) in [
            (0, MS),
            (3 * MS, 4 * MS),
            (4 * MS + 2_000, 5 * MS),
            (8 * MS, 9 * MS),
        ] {
            agg.add(kernel(s, e));
        }
        // The sync that waited for the first kernel returned 50 µs after it ended; an
        // allocation was under way when the third kernel ended, for 1 ms of that 3 ms gap.
        let mut events = history(vec![
            event(
                200_000,
                MS + 50_000,
                HostEventKind::Sync(SyncCause::Explicit),
            ),
            event(4 * MS + 500_000, 6 * MS, HostEventKind::Alloc),
        ]);
        agg.period_off(T0 + 10 * MS, 0);
        agg.settle(u64::MAX, T0 + 10 * MS, &mut events);
        let w = agg.windows(T0, T0).devices;
        let idle: Vec<(IdleCause, u64)> = w[0]
            .idle_ns
            .iter()
            .map(|s| (s.cause, s.ns.iter().sum()))
            .collect();
        assert_eq!(
            idle,
            [
                (IdleCause::AfterSync, 2 * MS),
                (IdleCause::Alloc, MS),
                // The 2 µs bubble between launches, the 2 ms of that gap after the
                // allocation, and the last 1 ms before the end.
                (IdleCause::Host, 2_000 + 2 * MS + MS),
            ]
        );
        let gap = |s: u64, e: u64, cause| IdleGap {
            start_unix_ns: T0 + s,
            end_unix_ns: T0 + e,
            cause,
        };
        assert_eq!(
            w[0].longest_gaps,
            [
                gap(5 * MS, 8 * MS, IdleCause::Alloc),
                gap(MS, 3 * MS, IdleCause::AfterSync),
                gap(9 * MS, 10 * MS, IdleCause::Host),
            ]
        );
        assert_eq!(w[0].recent_gaps.len(), 3);
        // Only the gaps between two stretches of activity are in the histogram.
        assert_eq!(only(&agg).gap_hist.count(), 3);
    }

    #[test]
    fn a_gap_is_split_by_the_host_calls_in_it() {
        let e = |start: u64, end: u64, kind| HostEvent {
            kind,
            start_unix_ns: start,
            end_unix_ns: end,
        };
        let events = [
            e(10, 40, HostEventKind::Alloc),
            e(30, 50, HostEventKind::Sync(SyncCause::PageableAsyncCopy)),
            e(60, 90, HostEventKind::Sync(SyncCause::Free)),
            e(0, 100, HostEventKind::Sync(SyncCause::Explicit)),
        ];
        assert_eq!(
            split_by_calls(0, 100, &events),
            [
                (0, 10, IdleCause::Host),
                (10, 30, IdleCause::Alloc),
                // A copy where both overlap: the copy says more.
                (30, 50, IdleCause::PageableCopy),
                (50, 60, IdleCause::Host),
                (60, 90, IdleCause::Alloc),
                (90, 100, IdleCause::Host),
            ]
        );
        // Calls reaching outside the gap count only inside it; no calls: host work.
        assert_eq!(
            split_by_calls(100, 200, &[e(50, 150, HostEventKind::Collective)]),
            [
                (100, 150, IdleCause::Collective),
                (150, 200, IdleCause::Host)
            ]
        );
        assert_eq!(split_by_calls(5, 9, &[]), [(5, 9, IdleCause::Host)]);
    }

    #[test]
    fn host_events_are_looked_up_once_per_settle_when_none_were_lost() {
        let mut agg = full();
        for i in 0..100 {
            agg.add(kernel(i * 100_000, i * 100_000 + 50_000));
        }
        let mut calls = 0;
        let mut counting = |_: u64, _: u64, _: &mut Vec<HostEvent>| {
            calls += 1;
            true
        };
        agg.settle(T0 + 20 * MS, T0 + 20 * MS, &mut counting);
        assert_eq!(calls, 1);
        // Lost events: every gap asks for its own span, and gets `unknown` where lost.
        let mut agg = full();
        for i in 0..3 {
            agg.add(kernel(i * MS, i * MS + 500_000));
        }
        let mut calls = 0;
        let mut lossy = |from: u64, _: u64, _: &mut Vec<HostEvent>| {
            calls += 1;
            from > T0 + MS
        };
        agg.settle(T0 + 3 * MS, T0 + 3 * MS, &mut lossy);
        // The batch, then the gaps opening at 0.5, 1.5 and 2.5 ms, and the spans of the
        // last two, to split them by the calls in them (the first is unknown, whole).
        assert_eq!(calls, 6);
        let w = agg.windows(T0, T0).devices;
        let idle: Vec<(IdleCause, u64)> = w[0]
            .idle_ns
            .iter()
            .map(|s| (s.cause, s.ns.iter().sum()))
            .collect();
        assert_eq!(idle, [(IdleCause::Host, MS), (IdleCause::Unknown, 500_000)]);
    }

    #[test]
    fn the_cause_of_a_gap_follows_the_blocking_call_around_its_opening() {
        use HostEventKind::*;
        let at = 1_000_000;
        let e = |s, e, kind| HostEvent {
            start_unix_ns: s,
            end_unix_ns: e,
            kind,
        };
        let cause = |events: &[HostEvent]| idle_cause(at, events, true);
        assert_eq!(cause(&[]), IdleCause::Host);
        assert_eq!(idle_cause(at, &[], false), IdleCause::Unknown);
        // A sync returning within SYNC_RETURN_NS after, or CLOCK_SLACK_NS before.
        let sync = |end| e(0, end, Sync(SyncCause::Explicit));
        assert_eq!(cause(&[sync(at + SYNC_RETURN_NS)]), IdleCause::AfterSync);
        assert_eq!(cause(&[sync(at - CLOCK_SLACK_NS)]), IdleCause::AfterSync);
        assert_eq!(cause(&[sync(at + SYNC_RETURN_NS + 1)]), IdleCause::Host);
        assert_eq!(cause(&[sync(at - CLOCK_SLACK_NS - 1)]), IdleCause::Host);
        let copy = e(0, at + MS, Sync(SyncCause::SyncCopy));
        assert_eq!(cause(std::slice::from_ref(&copy)), IdleCause::PageableCopy);
        let pageable = e(0, at + MS, Sync(SyncCause::PageableAsyncCopy));
        assert_eq!(cause(&[pageable]), IdleCause::PageableCopy);
        assert_eq!(
            cause(&[e(0, at + MS, Sync(SyncCause::Free))]),
            IdleCause::Alloc
        );
        let collective = e(0, at + MS, Collective);
        assert_eq!(cause(&[copy, collective.clone()]), IdleCause::Collective);
        // Over by the opening: not in progress.
        assert_eq!(cause(&[e(0, at, Alloc)]), IdleCause::Host);
        assert_eq!(cause(&[collective, sync(at)]), IdleCause::AfterSync);
    }

    #[test]
    fn sampled_counts_are_extrapolated_exactly_on_a_regular_stream() {
        let us = 1_000;
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        // A kernel of 5 µs every 10 µs; the kinds on for 100 µs in every 1,000 µs, ten
        // times: only the launches made while on are recorded.
        for period in 0..10 {
            let on = period * 1_000 * us;
            if period > 0 {
                agg.period_on(T0 + on, 0);
            }
            for k in 0..10 {
                let start = on + k * 10 * us;
                agg.add(kernel(start, start + 5 * us));
            }
            assert_eq!(agg.this_slot(0).0, 10);
            agg.period_off(T0 + on + 100 * us, 0);
            let horizon = T0 + on + 50 * us;
            agg.settle(horizon, horizon, &mut no_events);
        }
        let end = T0 + 9_100 * us;
        agg.settle(u64::MAX, end, &mut no_events);
        let a = only(&agg);
        let covered = 9_100 * us;
        assert_eq!(
            a.sampled,
            Some(Sampled {
                observed_ns: 1_000 * us,
                covered_ns: covered,
                factor: 9.1,
                kernel_factor: None,
            })
        );
        // 910 kernels of 5 µs started in [0, 9,100 µs).
        assert_eq!((a.kernels, a.busy_ns), (910, 910 * 5 * us));
        assert_eq!(a.top_kernels[0].calls, 910);
        let w = agg.windows(T0, T0).devices;
        assert_eq!(w[0].observed_ns, [1_000 * us]);
        assert_eq!(w[0].busy_ns, [500 * us]);
        assert_eq!(
            w[0].idle_ns,
            [IdleSeries {
                cause: IdleCause::Host,
                ns: vec![500 * us]
            }]
        );
    }

    #[test]
    fn sampled_a_pause_counts_once_however_the_kernels_are_extrapolated() {
        // One slot kept on through the program's 1.5 s pause, between two bursts of 10
        // kernels; 20 of the host's 40 launches were made while recording.
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        for burst in [0, 1_519 * MS] {
            for k in 0..10 {
                agg.add(kernel(burst + k * 2 * MS, burst + k * 2 * MS + MS));
            }
        }
        agg.period_off(T0 + 1_540 * MS, 20);
        agg.settle(u64::MAX, T0 + 2_000 * MS, &mut no_events);
        let a = agg.devices(40, (0, 0)).remove(0).1;
        assert_eq!(a.sampled.as_ref().unwrap().kernel_factor, Some(2.0));
        assert_eq!(a.kernels, 40);
        // The 18 gaps between kernels stand for 36, like the kernels; the pause is one.
        assert_eq!(a.gap_hist.count(), 36 + 1);
        assert_eq!(a.pauses().0, 1);
        assert!(a.working_span_ns() > 0);
    }

    #[test]
    fn a_period_without_records_observed_the_device_idle() {
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        agg.add(kernel(MS, 2 * MS));
        agg.period_off(T0 + 3 * MS, 0);
        agg.period_on(T0 + 5 * MS, 0);
        agg.period_off(T0 + 8 * MS, 0);
        // A third period whose first record starts 1 ms after it opened: work queued
        // before it may have run until then, so its observed part starts at the record.
        agg.period_on(T0 + 12 * MS, 0);
        agg.add(kernel(13 * MS, 14 * MS));
        agg.period_off(T0 + 15 * MS, 0);
        agg.settle(u64::MAX, T0 + 16 * MS, &mut no_events);
        let w = agg.windows(T0, T0).devices;
        // [0,3) + [5,8) + [13,15) ms.
        assert_eq!(w[0].observed_ns, [3 * MS + 3 * MS, 2 * MS]);
        // [0,1) and [2,3), all of [5,8), then [14,15).
        assert_eq!(w[0].idle_ns[0].ns, [2 * MS + 3 * MS, MS]);
        assert_eq!(w[0].busy_ns, [MS, MS]);
    }

    #[test]
    fn a_device_whose_records_come_late_still_has_the_periods_they_belong_to() {
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        agg.period_off(T0 + 3 * MS, 0);
        agg.period_on(T0 + 5 * MS, 0);
        // No device yet: the periods after the horizon must stay.
        agg.settle(T0 + 4 * MS, T0 + 4 * MS, &mut no_events);
        agg.add(kernel(6 * MS, 7 * MS));
        agg.period_off(T0 + 8 * MS, 0);
        agg.settle(u64::MAX, T0 + 9 * MS, &mut no_events);
        let w = agg.windows(T0, T0).devices;
        // [0,3) idle (the first period, the queue empty), then [6,8).
        assert_eq!(w[0].observed_ns, [5 * MS]);
        assert_eq!(w[0].busy_ns, [MS]);
        assert_eq!(w[0].idle_ns[0].ns, [4 * MS]);
    }

    #[test]
    fn unified_memory_counts_are_scaled_by_the_time_the_counters_were_on() {
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        agg.unified_memory_switched(true, T0);
        agg.add(Record::UnifiedMemory {
            counter: 3,
            value: 0x7f00,
            start: T0 + MS,
        });
        agg.unified_memory_switched(false, T0 + 100 * MS);
        // On 100 ms of 400 ms.
        let um = agg.unified_memory(T0 + 400 * MS).unwrap();
        assert_eq!(um.cpu_page_faults, 4);
    }
}

#[cfg(test)]
mod accounting {
    //! Per window, observed time is busy plus transfer plus idle: nothing counted as
    //! observed is none of them.
    use super::tests::{copy, kernel, no_events, MS, T0, US};
    use super::*;

    /// The device's windows: (observed, busy, idle of every cause), checked to add up
    /// with the transfer time.
    fn accounted(agg: &Aggregator) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let w = agg.windows(T0, T0).devices;
        let w = &w[0];
        let idle: Vec<u64> = (0..w.observed_ns.len())
            .map(|i| w.idle_ns.iter().map(|s| s.ns[i]).sum())
            .collect();
        for (i, idle) in idle.iter().enumerate() {
            assert_eq!(
                w.busy_ns[i] + w.transfer_ns[i] + idle,
                w.observed_ns[i],
                "window {i}: busy {} + transfer {} + idle {idle} against observed {}",
                w.busy_ns[i],
                w.transfer_ns[i],
                w.observed_ns[i]
            );
        }
        (w.observed_ns.clone(), w.busy_ns.clone(), idle)
    }

    #[test]
    fn the_time_between_periods_is_not_observed_when_a_record_starts_just_before_the_next() {
        // The H200 launch-bound loop: the kinds are switched on at 100 ms, but the time of
        // the switch is read after the calls that switch them, so a kernel launched during
        // those calls starts 10 µs before the period's recorded opening. It belongs to the
        // period before by its start, long after that one closed.
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        agg.add(kernel(MS, 2 * MS));
        agg.add(kernel(5 * MS, 6 * MS));
        // A copy, half under the second kernel: 0.5 ms of transfer time.
        agg.add(Record::Copy {
            device: 0,
            kind: 1,
            src_memory: 1,
            dst_memory: 3,
            bytes: 4096,
            start: T0 + 4 * MS + 500 * US,
            end: T0 + 5 * MS + 500 * US,
        });
        agg.period_off(T0 + 20 * MS, 0);
        agg.settle(T0 + 20 * MS, T0 + 20 * MS, &mut no_events);
        agg.period_on(T0 + 100 * MS, 0);
        agg.add(kernel(100 * MS - 10 * US, 100 * MS + 500 * US));
        agg.add(kernel(110 * MS, 111 * MS));
        agg.period_off(T0 + 120 * MS, 0);
        agg.settle(u64::MAX, T0 + 130 * MS, &mut no_events);
        let (observed, busy, _) = accounted(&agg);
        // [0,20) (the queue empty at CUPTI's start); the early kernel's own time; the next
        // period from its first record at 110 ms to its close. The 80 ms between are not
        // observed.
        let mut expected = vec![10 * MS, 10 * MS, 0, 0, 0, 0, 0, 0, 0, 10 * US];
        expected.extend([500 * US, 10 * MS]);
        assert_eq!(observed, expected);
        assert_eq!(busy[9..], [10 * US, 500 * US, MS]);
        let w = agg.windows(T0, T0).devices;
        assert_eq!(w[0].transfer_ns[..2], [500 * US, 0]);
        let a = agg.devices(0, (0, 0)).remove(0).1;
        let sampled = a.sampled.unwrap();
        assert_eq!(sampled.observed_ns, 20 * MS + 510 * US + 10 * MS);
    }

    #[test]
    fn after_its_close_a_period_observed_only_the_time_its_records_ran() {
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        agg.add(kernel(MS, 2 * MS));
        agg.period_off(T0 + 10 * MS, 0);
        // Queued before the close: one running across it, one starting 3 ms after it
        // (behind work of another stream, say), then one right behind that.
        agg.add(kernel(9 * MS, 11 * MS));
        agg.add(kernel(14 * MS, 15 * MS));
        agg.add(kernel(15 * MS, 16 * MS));
        agg.settle(u64::MAX, T0 + 30 * MS, &mut no_events);
        let (observed, busy, idle) = accounted(&agg);
        assert_eq!(observed, [10 * MS, MS + 2 * MS]);
        assert_eq!(busy, [2 * MS, 3 * MS]);
        assert_eq!(idle, [8 * MS, 0]);
    }

    #[test]
    fn a_period_closed_over_a_deep_queue_observed_only_until_its_last_record() {
        // 40 launches at once queue kernels of 1 ms from 1 ms on; the kinds go off at 25 ms
        // with 25 of them still queued, and only the first 15 records come, at 20 ms. Then
        // a period of one launch, whose kernel runs [41, 42) before the close at 45. Settled
        // every 5 ms as `cupti::collect` does, until the missing records are given up.
        let run = |launches_at_close: u64| {
            let mut agg = Aggregator::new(T0, T0, 0, true, 0);
            for tick in 1..=600 {
                let now = tick * 5 * MS;
                match now / MS {
                    20 => (1..16).for_each(|k| agg.add(kernel(k * MS, (k + 1) * MS))),
                    25 => agg.period_off(T0 + 25 * MS, launches_at_close),
                    40 => agg.period_on(T0 + 40 * MS, launches_at_close),
                    45 => {
                        agg.add(kernel(41 * MS, 42 * MS));
                        agg.period_off(T0 + 45 * MS, launches_at_close + 1);
                    }
                    _ => {}
                }
                let launches = launches_at_close + u64::from(now >= 40 * MS);
                let horizon = agg.held_horizon(T0 + now - 5 * MS, T0 + now, launches);
                agg.settle(horizon, T0 + now, &mut no_events);
            }
            agg.settle(u64::MAX, T0 + 3_005 * MS, &mut no_events);
            let a = agg.devices(launches_at_close + 1, (0, 0)).remove(0).1;
            (accounted(&agg), (a.lost_tails, a.lost_tail_ns))
        };
        // The 25 records missing: the queue's last 9 ms ran unrecorded, not idle.
        let ((observed, busy, idle), lost) = run(40);
        assert_eq!(lost, (1, 9 * MS));
        assert_eq!(observed, [10 * MS, 6 * MS, 0, 0, 4 * MS]);
        assert_eq!(busy, [9 * MS, 6 * MS, 0, 0, MS]);
        assert_eq!(idle, [MS, 0, 0, 0, 3 * MS]);
        // Every launch recorded (or all but `EDGE_LAUNCHES`): idle to the close.
        for launches in [15, 15 + EDGE_LAUNCHES] {
            let ((observed, busy, idle), lost) = run(launches);
            assert_eq!(lost, (0, 0));
            assert_eq!(observed, [10 * MS, 10 * MS, 5 * MS, 0, 4 * MS]);
            assert_eq!(busy, [9 * MS, 6 * MS, 0, 0, MS]);
            assert_eq!(idle, [MS, 4 * MS, 5 * MS, 0, 3 * MS]);
        }
    }

    #[test]
    fn a_copy_behind_the_lost_kernels_of_a_period_does_not_make_their_time_idle() {
        // 24 launches: kernels of 1 ms from 1 ms on, of which only the first 4 records come
        // (to 5 ms), then a copy queued behind the other 20, run [25, 26), before the close
        // at 30 ms. [5, 25) is the lost kernels' time, not idle: only the copy's own time is
        // observed after 5 ms, and nothing after it.
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        for k in 1..5 {
            agg.add(kernel(k * MS, (k + 1) * MS));
        }
        agg.add(copy(25 * MS, 26 * MS));
        agg.period_off(T0 + 30 * MS, 24);
        agg.settle(u64::MAX, T0 + 40 * MS, &mut no_events);
        let (observed, busy, idle) = accounted(&agg);
        assert_eq!(observed, [5 * MS, 0, MS]);
        assert_eq!(busy, [4 * MS, 0, 0]);
        assert_eq!(idle, [MS, 0, 0]);
        let a = agg.devices(24, (0, 0)).remove(0).1;
        // Unobserved: [5, 25) and [26, 30).
        assert_eq!((a.lost_tails, a.lost_tail_ns), (1, 24 * MS));
    }

    #[test]
    fn a_record_after_the_close_of_a_period_that_lost_records_leaves_its_tail_unobserved() {
        // The period of 24 launches above, closed at 30 ms, with a copy or a kernel of the
        // next launches after the close: [5, 30) is counted once, and never idle.
        for after in [copy(35 * MS, 36 * MS), kernel(35 * MS, 36 * MS)] {
            let mut agg = Aggregator::new(T0, T0, 0, true, 0);
            for k in 1..5 {
                agg.add(kernel(k * MS, (k + 1) * MS));
            }
            agg.add(after);
            agg.period_off(T0 + 30 * MS, 24);
            agg.settle(u64::MAX, T0 + 40 * MS, &mut no_events);
            let (observed, _, idle) = accounted(&agg);
            assert_eq!(observed, [5 * MS, 0, 0, MS]);
            assert_eq!(idle, [MS, 0, 0, 0]);
            let a = agg.devices(24, (0, 0)).remove(0).1;
            assert_eq!((a.lost_tails, a.lost_tail_ns), (1, 25 * MS));
        }
    }

    #[test]
    fn with_two_devices_a_period_short_of_records_is_observed_to_its_close() {
        // Device 0 lost the records of 20 of its 24 launches; device 1 ran one kernel and
        // idled to the close. Launches are the host's, not a device's: nothing is cut.
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        for k in 1..5 {
            agg.add(kernel(k * MS, (k + 1) * MS));
        }
        agg.add(Record::Kernel {
            device: 1,
            start: T0 + MS,
            end: T0 + 2 * MS,
            name: None,
            blocks: 1,
        });
        agg.period_off(T0 + 30 * MS, 25);
        agg.settle(u64::MAX, T0 + 40 * MS, &mut no_events);
        let w = agg.windows(T0, T0).devices;
        for d in &w {
            assert_eq!(d.observed_ns, [10 * MS, 10 * MS, 10 * MS], "{}", d.ordinal);
        }
        assert!(agg
            .devices(25, (0, 0))
            .iter()
            .all(|(_, a)| a.lost_tails == 0));
    }

    #[test]
    fn a_record_arriving_after_its_time_was_committed_is_clipped_to_the_frontier() {
        let mut agg = Aggregator::new(T0, T0, 0, false, 0);
        agg.add(kernel(MS, 2 * MS));
        agg.settle(T0 + 10 * MS, T0 + 10 * MS, &mut no_events);
        // Held in a buffer with a record of work still queued: it comes after [0,10) was
        // committed, [1,2) busy and the rest idle.
        agg.add(kernel(5 * MS, 12 * MS));
        agg.period_off(T0 + 20 * MS, 0);
        agg.settle(u64::MAX, T0 + 20 * MS, &mut no_events);
        let (observed, busy, idle) = accounted(&agg);
        assert_eq!(observed, [10 * MS, 10 * MS]);
        assert_eq!(busy, [MS, 2 * MS]);
        assert_eq!(idle, [9 * MS, 8 * MS]);
        let a = agg.devices(0, (0, 0)).remove(0).1;
        assert_eq!((a.late_records, a.late_ns), (1, 5 * MS));
        assert_eq!(a.busy_ns, 3 * MS);
    }

    #[test]
    fn a_settle_waits_for_the_records_of_queued_launches() {
        // 1,000 launches in the first 10 ms queue kernels of 1.8 ms; their records come in
        // one buffer 1.8 s later, when the last has run. Settles every 100 ms.
        let mut agg = Aggregator::new(T0, T0, 0, false, 0);
        let margin = 500 * MS;
        let mut horizons = Vec::new();
        for tick in 1..=19 {
            let now = T0 + tick * 100 * MS;
            if tick == 19 {
                for k in 0..1_000 {
                    agg.add(kernel(k * 1_800 * US, (k + 1) * 1_800 * US));
                }
            }
            let horizon = agg.held_horizon(now - margin, now, 1_000);
            horizons.push(now - horizon);
            agg.settle(horizon, now, &mut no_events);
        }
        // Every settle saw the launches already made: held as far as it may be, until the
        // records came; then the margin again.
        assert!(
            horizons[..18].iter().all(|&h| h == MAX_HOLD_NS),
            "{horizons:?}"
        );
        assert_eq!(horizons[18], margin);
        agg.period_off(T0 + 1_900 * MS, 1_000);
        agg.settle(u64::MAX, T0 + 1_900 * MS, &mut no_events);
        let a = agg.devices(0, (0, 0)).remove(0).1;
        assert_eq!((a.late_records, a.busy_ns), (0, 1_800 * MS));
    }

    #[test]
    fn a_settle_is_held_for_launches_without_records_at_most_max_hold() {
        let mut agg = Aggregator::new(T0, T0, 0, false, 0);
        // No launch outstanding: the horizon as given.
        assert_eq!(agg.held_horizon(T0, T0 + 500 * MS, 0), T0);
        // 10 launches after that settle, 4 records: held at that settle's time.
        for k in 0..4 {
            agg.add(kernel(600 * MS + k * MS, 600 * MS + (k + 1) * MS));
        }
        let now = T0 + 1_000 * MS;
        assert_eq!(agg.held_horizon(now - 500 * MS, now, 10), T0 + 500 * MS);
        assert_eq!(agg.awaited_records(10), 6);
        // Never more than MAX_HOLD_NS behind...
        let late = T0 + 500 * MS + MAX_HOLD_NS + 100 * MS;
        assert_eq!(
            agg.held_horizon(late - 500 * MS, late, 10),
            late - MAX_HOLD_NS
        );
        // ...and once the settle that saw those launches is that old, their records are
        // given up: the kinds off since, or the program quiet, nothing more is held.
        let later = T0 + 1_000 * MS + MAX_HOLD_NS + MS;
        assert_eq!(
            agg.held_horizon(later - 500 * MS, later, 10),
            later - 500 * MS
        );
        assert_eq!(agg.awaited_records(10), 0);
        // Records outnumbering launches (a CUDA graph) hold nothing.
        let mut agg = Aggregator::new(T0, T0, 0, false, 0);
        for k in 0..20 {
            agg.add(kernel(700 * MS + k * MS, 700 * MS + (k + 1) * MS));
        }
        assert_eq!(agg.held_horizon(now - 500 * MS, now, 10), now - 500 * MS);
    }
}

#[cfg(test)]
mod silence {
    use super::tests::{copy, kernel, no_events, MS, T0};
    use super::*;

    /// A first period of 100 launches, all recorded, [0, 20) ms, then from 40 ms to 6 s a
    /// period of `launches` every 40 ms, [40k, 40k + 20) ms, with a copy record if `copies`
    /// and a kernel record from `recorded_from` on; CUPTI restarted at `restart`. Settled
    /// every 5 ms through the held horizon, as `cupti::collect` settles, to 8 s.
    /// `Aggregator::records_stopped_since` at each of `at`.
    fn stopped_since(
        launches: u64,
        copies: bool,
        recorded_from: u64,
        restart: Option<u64>,
        at: &[u64],
    ) -> Vec<Option<u64>> {
        let mut agg = Aggregator::new(T0, T0, 0, true, 0);
        (0..100).for_each(|k| agg.add(kernel(k * 100_000, k * 100_000 + 50_000)));
        agg.period_off(T0 + 20 * MS, 100);
        let mut made = 100;
        let mut seen = Vec::new();
        for now in (5 * MS..=8_000 * MS).step_by(5 * MS as usize) {
            if (40 * MS..6_000 * MS).contains(&now) {
                match now % (40 * MS) {
                    0 => {
                        agg.period_on(T0 + now, made);
                        made += launches;
                        if copies {
                            agg.add(copy(now + 3 * MS, now + 4 * MS));
                        }
                        if now >= recorded_from {
                            agg.add(kernel(now + MS, now + 2 * MS));
                        }
                    }
                    x if x == 20 * MS => agg.period_off(T0 + now, made),
                    _ => {}
                }
            }
            if restart == Some(now) {
                agg.records_restarted(T0 + now);
            }
            let horizon = agg.held_horizon(T0 + now - 5 * MS, T0 + now, made);
            agg.settle(horizon, T0 + now, &mut no_events);
            if at.contains(&now) {
                seen.push(agg.records_stopped_since().map(|t| t - T0));
            }
        }
        seen
    }

    #[test]
    fn kernel_records_count_as_stopped_after_two_silent_periods_with_launches() {
        // A copy but not one kernel record after the first period: a silent period is
        // swept once its records are given up, `MAX_HOLD_NS` after the next period opened.
        // The second, [80, 100) ms, at 2.62 s; at 8 s, the one closed at 5.46 s.
        let never = u64::MAX;
        assert_eq!(
            stopped_since(
                100,
                true,
                never,
                None,
                &[2_615 * MS, 2_620 * MS, 8_000 * MS]
            ),
            [None, Some(100 * MS), Some(5_460 * MS)]
        );
        // Periods of 63 launches are too few to tell.
        assert_eq!(stopped_since(63, true, never, None, &[8_000 * MS]), [None]);
        // No record at all: the periods' work may all have been queued past their close.
        assert_eq!(
            stopped_since(100, false, never, None, &[8_000 * MS]),
            [None]
        );
        // A kernel record in the periods from 5 s on: they were not silent.
        assert_eq!(
            stopped_since(100, true, 5_000 * MS, None, &[8_000 * MS]),
            [None]
        );
        // Restarted at 5 s: the periods before no longer count; two after it do.
        assert_eq!(
            stopped_since(
                100,
                true,
                never,
                Some(5_000 * MS),
                &[5_005 * MS, 8_000 * MS]
            ),
            [None, Some(5_460 * MS)]
        );
    }
}

#[cfg(test)]
mod long_gaps {
    use super::tests::{copy, event, full, history, kernel, long_idle, no_events, MS, T0, US};
    use super::*;

    /// The first device's windows after `records` under full capture, closed at `off` ms,
    /// with `events` the host's.
    fn gaps_of(records: Vec<Record<'static>>, off: u64, events: Vec<HostEvent>) -> DeviceWindows {
        let mut agg = full();
        for r in records {
            agg.add(r);
        }
        agg.period_off(T0 + off * MS, 0);
        agg.settle(u64::MAX, T0 + off * MS, &mut history(events));
        agg.windows(T0, T0).devices.remove(0)
    }

    #[test]
    fn gaps_between_dense_kernels_are_all_short() {
        // 100 kernels of 50 µs every 100 µs, closed 50 µs after the last: 99 gaps between
        // them and the tail, all of 50 µs.
        let kernels = (0..100).map(|i| kernel(i * 100 * US, i * 100 * US + 50 * US));
        let w = gaps_of(kernels.collect(), 10, Vec::new());
        assert_eq!(w.short_gaps_ended, [100]);
        assert_eq!(w.long_gaps_ended, [0]);
        assert_eq!(w.long_idle_ns, []);
        assert_eq!(w.idle_ns[0].ns, [100 * 50 * US]);
    }

    #[test]
    fn a_long_gap_a_copy_to_the_device_ended_is_filed_under_it() {
        // The host away 5 ms after a kernel, then the next batch's copy (HtoD), and the
        // kernel 0.9 ms after it; a copy back to the host ends the next long gap, and the
        // close 0.9 ms later a short one.
        let back = Record::Copy {
            device: 0,
            kind: COPY_DTOH,
            src_memory: 3,
            dst_memory: 2,
            bytes: 4,
            start: T0 + 9 * MS,
            end: T0 + 9 * MS + 100 * US,
        };
        let records = vec![
            kernel(0, MS),
            copy(6 * MS, 6 * MS + 100 * US),
            kernel(7 * MS, 8 * MS),
            back,
        ];
        let w = gaps_of(records, 10, Vec::new());
        assert_eq!(
            long_idle(&w),
            [
                (IdleCause::Host, GapEnd::CopyToDevice, vec![5 * MS]),
                (IdleCause::Host, GapEnd::OtherTransfer, vec![MS]),
            ]
        );
        assert_eq!((w.short_gaps_ended, w.long_gaps_ended), (vec![2], vec![2]));
        // The short gaps' 0.9 ms each are idle, in no long gap.
        assert_eq!(w.idle_ns[0].ns, [5 * MS + 900 * US + MS + 900 * US]);
    }

    #[test]
    fn a_long_gap_a_kernel_ended_keeps_the_causes_of_its_pieces() {
        // 5 ms between two kernels, the host allocating for 1 ms of them.
        let alloc = event(2 * MS, 3 * MS, HostEventKind::Alloc);
        let w = gaps_of(vec![kernel(0, MS), kernel(6 * MS, 7 * MS)], 7, vec![alloc]);
        assert_eq!(
            long_idle(&w),
            [
                (IdleCause::Alloc, GapEnd::Kernel, vec![MS]),
                (IdleCause::Host, GapEnd::Kernel, vec![4 * MS]),
            ]
        );
        let idle: Vec<(IdleCause, Vec<u64>)> =
            w.idle_ns.iter().map(|s| (s.cause, s.ns.clone())).collect();
        assert_eq!(
            idle,
            [
                (IdleCause::Alloc, vec![MS]),
                (IdleCause::Host, vec![4 * MS])
            ]
        );
        assert_eq!((w.short_gaps_ended, w.long_gaps_ended), (vec![0], vec![1]));
        // The sample keeps the cause at its opening.
        assert_eq!(w.longest_gaps.len(), 1);
        assert_eq!(w.longest_gaps[0].cause, IdleCause::Host);
    }

    #[test]
    fn a_long_gap_is_spread_over_the_windows_it_spans_and_counted_where_it_ends() {
        let w = gaps_of(
            vec![kernel(0, 8 * MS), kernel(13 * MS, 14 * MS)],
            14,
            Vec::new(),
        );
        assert_eq!(
            long_idle(&w),
            [(IdleCause::Host, GapEnd::Kernel, vec![2 * MS, 3 * MS])]
        );
        assert_eq!(w.long_gaps_ended, [0, 1]);
        assert_eq!(w.short_gaps_ended, [0, 0]);
        // A gap that ends at a window's edge is counted in the window it fills.
        let w = gaps_of(
            vec![kernel(0, 5 * MS), kernel(10 * MS, 11 * MS)],
            11,
            Vec::new(),
        );
        assert_eq!(w.long_gaps_ended, [1, 0]);
    }

    #[test]
    fn the_gap_open_at_a_dump_counts_as_not_observed_so_far() {
        let mut agg = full();
        agg.add(kernel(0, MS));
        let at = |agg: &mut Aggregator, ns: u64| {
            agg.settle(T0 + ns, T0 + ns, &mut no_events);
            agg.windows(T0, T0).devices.remove(0)
        };
        // Open for 0.5 ms: short so far.
        let w = at(&mut agg, MS + 500 * US);
        let w = (w.short_gaps_ended, w.long_gaps_ended, w.long_idle_ns);
        assert_eq!(w, (vec![1], vec![0], vec![]));
        let w = at(&mut agg, 4 * MS);
        assert_eq!(
            long_idle(&w),
            [(IdleCause::Host, GapEnd::NotObserved, vec![3 * MS])]
        );
        assert_eq!((w.short_gaps_ended, w.long_gaps_ended), (vec![0], vec![1]));
        // The snapshots left it open: a kernel ends it, and the close the next one.
        agg.add(kernel(6 * MS, 7 * MS));
        agg.period_off(T0 + 9 * MS, 0);
        let w = at(&mut agg, 9 * MS);
        assert_eq!(
            long_idle(&w),
            [
                (IdleCause::Host, GapEnd::Kernel, vec![5 * MS]),
                (IdleCause::Host, GapEnd::NotObserved, vec![2 * MS]),
            ]
        );
        assert_eq!((w.short_gaps_ended, w.long_gaps_ended), (vec![0], vec![2]));
    }

    #[test]
    fn a_long_gap_through_many_host_calls_keeps_every_piece_exactly() {
        // 40 ms between two kernels, over 5 windows, the host allocating 10 µs in every
        // 100 µs of it: 801 pieces, most of them past those held one by one.
        let allocs = (0..400)
            .map(|i| {
                let at = MS + i * 100 * US + 20 * US;
                event(at, at + 10 * US, HostEventKind::Alloc)
            })
            .collect();
        let w = gaps_of(vec![kernel(0, MS), kernel(41 * MS, 42 * MS)], 42, allocs);
        let long = long_idle(&w);
        let idle: Vec<(IdleCause, GapEnd, Vec<u64>)> = (w.idle_ns.iter())
            .map(|s| (s.cause, GapEnd::Kernel, s.ns.clone()))
            .collect();
        assert_eq!(long, idle);
        assert_eq!(long[0].0, IdleCause::Alloc);
        assert_eq!(long[0].2.iter().sum::<u64>(), 400 * 10 * US);
        assert_eq!(long[1].2.iter().sum::<u64>(), 40 * MS - 400 * 10 * US);
        assert_eq!(long[1].2.len(), 5);
        assert_eq!(w.long_gaps_ended, [0, 0, 0, 0, 1]);
    }
}
