//! The time axis of one process: counters per window of time, host side and GPU side, plus
//! bounded samples of single events. The shim fills it; the CLI only sums and judges
//! (phases, steady state, the cause of GPU idle time).
//!
//! Every time is Unix-epoch nanoseconds (`CLOCK_REALTIME`), the clock CUPTI's records use:
//! the shim converts its own ticks to it with the offset it measured at start (see
//! docs/dump-format.md, "Clocks"). Window `i` covers
//! `[start_unix_ns + i * window_ns, start_unix_ns + (i + 1) * window_ns)`.
//!
//! The table never grows past `WINDOWS`: when the run outgrows it, neighbouring windows are
//! merged pairwise (`merge_pairs`) and `window_ns` doubles, so any run length fits in a
//! fixed size. The series are stored column-wise (one `Vec` per quantity, all of the same
//! length) because that is the compact JSON form: 256 windows of some 30 quantities stay
//! well under the 64 KB a timeline may add to a dump.

use crate::{Direction, HostKind, SyncCause};
use serde::{Deserialize, Serialize};

/// The most windows a timeline keeps.
pub const WINDOWS: usize = 256;
/// The width of a window before any merge.
pub const FIRST_WINDOW_NS: u64 = 10_000_000;
/// The most events each bounded sample keeps.
pub const SAMPLED_EVENTS: usize = 16;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Timeline {
    pub start_unix_ns: u64,
    pub window_ns: u64,
    pub host: HostWindows,
    /// One entry per device CUPTI reported activity for; empty without CUPTI.
    #[serde(default)]
    pub devices: Vec<DeviceWindows>,
    /// The longest blocking calls of the run and the most recent ones (each at most
    /// `SAMPLED_EVENTS`, longest first / oldest first).
    #[serde(default)]
    pub longest_blocking: Vec<HostEvent>,
    #[serde(default)]
    pub recent_blocking: Vec<HostEvent>,
    /// Blocking calls that were counted but not kept as single events (a thread's event
    /// ring filled up before the shim read it): the samples and the GPU-idle causes may
    /// miss them; the counters per window do not.
    #[serde(default)]
    pub blocking_events_lost: u64,
    /// Threads inside an intercepted call when the dump was written, longest first (at
    /// most `SAMPLED_EVENTS`): where a hung or killed process was waiting.
    #[serde(default)]
    pub in_call: Vec<ThreadInCall>,
    /// NVTX ranges the program pushed, per name (at most `NVTX_NAMES` names).
    #[serde(default)]
    pub nvtx: Vec<NvtxRanges>,
    /// The longest outermost NVTX ranges of the run and the most recent ones (each at most
    /// `SAMPLED_EVENTS`, longest first / oldest first): where the program's phases and steps
    /// began and ended.
    #[serde(default)]
    pub nvtx_longest: Vec<NvtxEvent>,
    #[serde(default)]
    pub nvtx_recent: Vec<NvtxEvent>,
    /// NVTX ranges counted in no table or only in part: nested deeper than a thread's stack,
    /// started while every cross-thread slot was open, or overwritten in the event ring
    /// before the shim read it.
    #[serde(default)]
    pub nvtx_lost: u64,
    /// `NVTX_INJECTION64_PATH` as another tool (nsys, a user) had set it: that tool gets the
    /// program's NVTX ranges, and gpuspy none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvtx_other_tool: Option<String>,
    /// What CUPTI's unified-memory counters saw, once they were switched on (their records
    /// name no CUDA device). Older 0.1 dumps had the faults alone, on
    /// the first device's entry, and only when CUPTI had recorded activity on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unified_memory: Option<UnifiedMemoryWindows>,
}

/// One thread's outermost intercepted call, not yet returned.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadInCall {
    pub symbol: String,
    pub since_unix_ns: u64,
}

impl Timeline {
    /// Halves the table: neighbouring windows merged, `window_ns` doubled (every series,
    /// host, devices and NVTX).
    pub fn merge_pairs(&mut self) {
        self.host.series_mut().into_iter().for_each(merge_pairs);
        for device in &mut self.devices {
            device.series_mut().into_iter().for_each(merge_pairs);
        }
        if let Some(um) = &mut self.unified_memory {
            um.series_mut().into_iter().for_each(merge_pairs);
        }
        for ranges in &mut self.nvtx {
            merge_pairs(&mut ranges.ns);
            merge_pairs(&mut ranges.ends);
        }
        self.window_ns *= 2;
    }
}

/// Host-side counters per window, derived from the per-thread statistics off the hot path.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostWindows {
    /// Outermost intercepted calls that ended in the window.
    pub calls: Vec<u64>,
    /// Kernel launches (every `cuLaunch*` variant) among them.
    pub launches: Vec<u64>,
    /// CUDA graph launches (`cuGraphLaunch*`) among them: a replay runs many kernels, so a
    /// graph loop's windows have work without kernel launches. Absent from older 0.1
    /// dumps.
    #[serde(default)]
    pub graph_launches: Vec<u64>,
    /// Time inside outermost driver calls, all threads; and the part in launch calls, in
    /// module loading and linking (`cuModuleLoad*`, `cuLibraryLoad*`, `cuLink*`: where JIT
    /// and lazy loading show), and in context creation and `cuInit`.
    pub driver_ns: Vec<u64>,
    pub launch_ns: Vec<u64>,
    pub module_ns: Vec<u64>,
    pub init_ns: Vec<u64>,
    /// Host time blocked per sync cause; a cause appears only if it occurred.
    #[serde(default)]
    pub blocked_ns: Vec<CauseSeries>,
    /// Bytes named by copy calls, per direction and host memory kind that occurred.
    #[serde(default)]
    pub copy_bytes: Vec<CopySeries>,
    pub allocs: Vec<u64>,
    pub frees: Vec<u64>,
}

impl HostWindows {
    /// Every series of the table.
    pub fn series_mut(&mut self) -> Vec<&mut Vec<u64>> {
        let mut all = vec![
            &mut self.calls,
            &mut self.launches,
            &mut self.graph_launches,
            &mut self.driver_ns,
            &mut self.launch_ns,
            &mut self.module_ns,
            &mut self.init_ns,
            &mut self.allocs,
            &mut self.frees,
        ];
        all.extend(self.blocked_ns.iter_mut().map(|c| &mut c.ns));
        all.extend(self.copy_bytes.iter_mut().map(|c| &mut c.bytes));
        all
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CauseSeries {
    pub cause: SyncCause,
    pub ns: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CopySeries {
    pub direction: Direction,
    pub host: HostKind,
    pub bytes: Vec<u64>,
}

/// What CUPTI saw on one device, per window of the same table.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceWindows {
    pub ordinal: u32,
    /// The part of each window CUPTI was recording: the whole window under
    /// `GPUSPY_CUPTI=full`, a share of it when activity is sampled. Busy and idle times
    /// below cover only that part; the CLI scales them by `window_ns / observed_ns`.
    pub observed_ns: Vec<u64>,
    /// Time at least one kernel ran; kernels that ended in the window.
    pub busy_ns: Vec<u64>,
    pub kernels: Vec<u64>,
    /// Time copies or memsets ran and no kernel did. Observed time is busy, transfer and
    /// idle time, each window exactly. Absent from dumps before it existed.
    #[serde(default)]
    pub transfer_ns: Vec<u64>,
    /// Bytes moved by copies the GPU ran, any direction.
    pub copy_bytes: Vec<u64>,
    /// Observed idle time, per cause of the gap it belongs to; a cause appears only if it
    /// occurred. The idle time of a gap is put in the windows it spans.
    #[serde(default)]
    pub idle_ns: Vec<IdleSeries>,
    /// The part of `idle_ns` that lies in gaps of `LONG_GAP_NS` or more, per cause and per
    /// what ended the gap; a pair appears only if it occurred. A gap's pieces keep the
    /// causes they have in `idle_ns` (a gap the host worked through is split by the calls in
    /// it), and its length decides, whole, whether they are here: per window and cause, the
    /// sum over `ended_by` is at most that cause's `idle_ns`, and the rest is idle time in
    /// shorter gaps. The gap open when the dump was written is here as ended by
    /// `not-observed`, with its idle time so far. Absent from dumps before it existed.
    #[serde(default)]
    pub long_idle_ns: Vec<LongIdleSeries>,
    /// Idle gaps that ended in the window (their last nanosecond in it), shorter than
    /// `LONG_GAP_NS` and of it or more, the one open at the dump counted as in
    /// `long_idle_ns`. Over a stretch of windows, the idle time in gaps of either kind over
    /// their count is about their mean length (a gap's time is spread over the windows it
    /// spans, its count is in the window of its end).
    /// Absent from dumps before they existed.
    #[serde(default)]
    pub short_gaps_ended: Vec<u64>,
    #[serde(default)]
    pub long_gaps_ended: Vec<u64>,
    /// The longest idle gaps above `LONG_GAP_NS` and the most recent ones.
    #[serde(default)]
    pub longest_gaps: Vec<IdleGap>,
    #[serde(default)]
    pub recent_gaps: Vec<IdleGap>,
}

impl DeviceWindows {
    /// Every series of the table.
    pub fn series_mut(&mut self) -> Vec<&mut Vec<u64>> {
        let mut all = vec![
            &mut self.observed_ns,
            &mut self.busy_ns,
            &mut self.kernels,
            &mut self.transfer_ns,
            &mut self.copy_bytes,
        ];
        all.push(&mut self.short_gaps_ended);
        all.push(&mut self.long_gaps_ended);
        all.extend(self.idle_ns.iter_mut().map(|i| &mut i.ns));
        all.extend(self.long_idle_ns.iter_mut().map(|i| &mut i.ns));
        all
    }
}

/// The unified-memory counters per window of the same table: how long they were on (by
/// default they are sampled), and the faults and migrations they recorded meanwhile, by
/// the time of each record. Not scaled: a reader scales a stretch's counts by its time
/// over its `observed_ns`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct UnifiedMemoryWindows {
    pub observed_ns: Vec<u64>,
    pub cpu_page_faults: Vec<u64>,
    pub gpu_page_fault_groups: Vec<u64>,
    pub bytes_htod: Vec<u64>,
    pub bytes_dtoh: Vec<u64>,
}

impl UnifiedMemoryWindows {
    /// Every series of the table.
    pub fn series_mut(&mut self) -> Vec<&mut Vec<u64>> {
        vec![
            &mut self.observed_ns,
            &mut self.cpu_page_faults,
            &mut self.gpu_page_fault_groups,
            &mut self.bytes_htod,
            &mut self.bytes_dtoh,
        ]
    }
}

/// Gaps at least this long are kept as single events.
pub const LONG_GAP_NS: u64 = 1_000_000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdleSeries {
    pub cause: IdleCause,
    pub ns: Vec<u64>,
}

/// Idle time in long gaps of one cause that ended one way (`DeviceWindows::long_idle_ns`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LongIdleSeries {
    pub cause: IdleCause,
    pub ended_by: GapEnd,
    pub ns: Vec<u64>,
}

/// What ended a GPU idle gap: the record that started when it closed. After a long gap, a
/// copy to the device is the next batch arriving; a kernel, the host's next step launched
/// (or the next op of a framework that dispatches one at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GapEnd {
    Kernel,
    /// A copy from host memory to the device (CUPTI's `HtoD` and `HtoA`).
    CopyToDevice,
    /// Any other copy, or a memset.
    OtherTransfer,
    /// No record: the recording period closed (a sampled slot's end, the process's exit)
    /// or the dump was written while the gap was open.
    NotObserved,
}

/// What the host was doing when a GPU idle gap opened (the GPU had finished everything
/// queued). The shim's collector decides it from the host's blocking events; the CLI turns
/// causes into findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleCause {
    /// A blocking sync (explicit, or a synchronous copy) returned as the GPU finished, and
    /// the host then worked with nothing queued: the sync's doing.
    AfterSync,
    /// The host was inside a pageable copy, which the driver stages in pieces.
    PageableCopy,
    /// The host was allocating or freeing device or pinned memory.
    Alloc,
    /// The host was waiting in a collective call.
    Collective,
    /// The host was outside the driver or launching, with nothing queued and no blocking
    /// call just before: launch overhead or host work (data loading, Python); the CLI tells
    /// them apart by the window's launch rate and launch time.
    Host,
    /// Host events of the time were lost (a thread's event ring overflowed).
    Unknown,
}

impl IdleCause {
    pub const ALL: [IdleCause; 6] = [
        IdleCause::AfterSync,
        IdleCause::PageableCopy,
        IdleCause::Alloc,
        IdleCause::Collective,
        IdleCause::Host,
        IdleCause::Unknown,
    ];
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdleGap {
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub cause: IdleCause,
}

/// A blocking host call: a sync, a synchronous or pageable copy, an allocation or free.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostEvent {
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub kind: HostEventKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostEventKind {
    /// One of the `SyncCause`s.
    Sync(SyncCause),
    Alloc,
    Collective,
}

/// The most NVTX range names a timeline keeps; later names are counted in the last one,
/// named `NVTX_OTHER`.
pub const NVTX_NAMES: usize = 64;
/// The name of the ranges of names past the first `NVTX_NAMES - 1`.
pub const NVTX_OTHER: &str = "(other names)";
/// Longer range names are cut to this many bytes (at a character boundary).
pub const NVTX_NAME_BYTES: usize = 63;

/// Ranges of one name (`torch.cuda.nvtx.range_push("forward")`, Megatron's and NeMo's).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NvtxRanges {
    pub name: String,
    /// Ranges of this name that ended, at any depth; `outermost` of them had no range open
    /// around them on their thread (start/end ranges count as outermost).
    pub count: u64,
    #[serde(default)]
    pub outermost: u64,
    pub total_ns: u64,
    pub first_start_unix_ns: u64,
    pub last_end_unix_ns: u64,
    /// Time inside ranges of this name, per window of the table: ranges at depth 0 and 1
    /// only (deeper ones, such as `emit_nvtx`'s per-op ranges, count in `count` and
    /// `total_ns` alone); empty when none was that shallow.
    pub ns: Vec<u64>,
    /// Ranges of this name at depth 0 and 1 that ended, per window: the steps a window
    /// holds, where a range times only the host's part of an asynchronous step. Absent in
    /// dumps of gpuspy 0.1 before it.
    #[serde(default)]
    pub ends: Vec<u64>,
}

/// One NVTX range, as its name and its span.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NvtxEvent {
    pub name: String,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
}

/// Merges neighbouring slots pairwise: the series of a table whose window doubles.
pub fn merge_pairs(series: &mut Vec<u64>) {
    *series = series.chunks(2).map(|pair| pair.iter().sum()).collect();
}

/// Spreads `[start, end)` over `series` (window `window_ns` from `origin`), growing it as
/// needed: the part of the interval in each window is added to it. The caller keeps the
/// table within `WINDOWS` (merging first) before the interval's end passes it.
pub fn spread(series: &mut Vec<u64>, origin: u64, window_ns: u64, start: u64, end: u64) {
    let mut at = start.max(origin);
    while at < end {
        let slot = ((at - origin) / window_ns) as usize;
        let slot_end = origin + (slot as u64 + 1) * window_ns;
        if series.len() <= slot {
            series.resize(slot + 1, 0);
        }
        series[slot] += slot_end.min(end) - at;
        at = slot_end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_merge_and_an_odd_tail_stays() {
        let mut s = vec![1, 2, 3, 4, 5];
        merge_pairs(&mut s);
        assert_eq!(s, vec![3, 7, 5]);
    }

    #[test]
    fn a_timeline_halves_every_series() {
        let mut t = Timeline {
            window_ns: 10,
            host: HostWindows {
                calls: vec![1, 2, 3],
                blocked_ns: vec![CauseSeries {
                    cause: SyncCause::Free,
                    ns: vec![4, 5, 6],
                }],
                ..HostWindows::default()
            },
            devices: vec![DeviceWindows {
                busy_ns: vec![7, 8],
                long_idle_ns: vec![LongIdleSeries {
                    cause: IdleCause::Host,
                    ended_by: GapEnd::CopyToDevice,
                    ns: vec![1, 2, 3],
                }],
                short_gaps_ended: vec![4, 4],
                long_gaps_ended: vec![0, 1, 1],
                ..DeviceWindows::default()
            }],
            ..Timeline::default()
        };
        t.merge_pairs();
        assert_eq!(t.window_ns, 20);
        assert_eq!(t.host.calls, vec![3, 3]);
        assert_eq!(t.host.blocked_ns[0].ns, vec![9, 6]);
        let d = &t.devices[0];
        assert_eq!(d.busy_ns, vec![15]);
        assert_eq!(d.long_idle_ns[0].ns, vec![3, 3]);
        assert_eq!(
            (&d.short_gaps_ended, &d.long_gaps_ended),
            (&vec![8], &vec![1, 1])
        );
    }

    #[test]
    fn a_device_entry_without_the_long_gap_series_loads() {
        let d: DeviceWindows = serde_json::from_str(
            r#"{"ordinal": 0, "observed_ns": [5], "busy_ns": [1], "kernels": [1],
                "copy_bytes": [0], "idle_ns": [{"cause": "host", "ns": [4]}]}"#,
        )
        .unwrap();
        assert!(d.long_idle_ns.is_empty() && d.short_gaps_ended.is_empty());
        assert!(d.long_gaps_ended.is_empty());
    }

    #[test]
    fn an_interval_is_split_at_window_edges() {
        let mut s = Vec::new();
        spread(&mut s, 100, 10, 95, 127);
        assert_eq!(s, vec![10, 10, 7]);
        spread(&mut s, 100, 10, 131, 132);
        assert_eq!(s, vec![10, 10, 7, 1]);
    }
}
