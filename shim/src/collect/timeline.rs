//! The host side of the dump's time axis (`Dump.timeline`, `gpuspy_format::timeline`).
//!
//! Nothing here runs on the hot path. The writer thread (`gpuspy-writer`, which exists from
//! the first call of every process generation and otherwise sleeps between flushes) calls
//! `tick` at every window edge: it sums the per-thread cumulative counters and files the
//! difference from the last sum into the window, then reads the threads' event rings
//! (`events.rs`) at least every `DRAIN_NS`. Windows start at the process's start
//! (`start_unix_ns` of the dump) and are `FIRST_WINDOW_NS` wide; when the run outgrows
//! `WINDOWS` the table merges pairwise and the width doubles, and the ticks follow the
//! width, so wake-ups for the windows fall as the run grows.
//!
//! A sum stays cheap because a hook's histogram (976 buckets) is summed only when its
//! `total_ns` or its 0 ns bucket changed since the last sum, and pages of a block never
//! written are not read. Every quantity counts calls by the window they ended in; a call
//! longer than a window puts all its time in the window where it ended.
//!
//! At each dump the last interval is filed from the dump's own totals, taken under the
//! same lock, so every column of the host table sums exactly to the dump's totals.

use crate::clock::{self, Anchor};
use crate::forklock::{ForkLock, Guard};
use crate::gpu::activity::GpuWindows;
use crate::hooks::{ALL_HOOKS, HOOK_COUNT};
use crate::record::{self, Series, ThreadStats, Written};
use gpuspy_format::timeline::{
    merge_pairs, CauseSeries, CopySeries, HostWindows, ThreadInCall, Timeline, FIRST_WINDOW_NS,
    SAMPLED_EVENTS, WINDOWS,
};
use gpuspy_format::{Direction, Dump, HostKind, SyncCause};
use std::sync::atomic::Ordering::*;

/// The event rings are read at least this often, whatever the window width.
pub const DRAIN_NS: u64 = 100_000_000;
/// The most a timeline may add to a dump, in bytes of JSON.
pub const MAX_JSON_BYTES: usize = 64 * 1024;

const CAUSES: usize = SyncCause::ALL.len();
const DIRECTIONS: usize = Direction::ALL.len();
const HOST_KINDS: usize = HostKind::ALL.len();

/// What a hook's calls count towards, beyond `calls` and `driver_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    /// Every `cuLaunch*` variant.
    Launch,
    /// `cuGraphLaunch*`: a graph's replay, many kernels in one call.
    GraphLaunch,
    /// `cuModuleLoad*`, `cuLibraryLoad*`, `cuLink*`: where JIT and lazy loading show.
    Module,
    /// `cuInit`, context creation and primary-context retain.
    Init,
    /// Device, pinned and managed allocations, host registration.
    Alloc,
    /// Their frees.
    Free,
    Other,
}

fn family(symbol: &str) -> Family {
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| symbol.starts_with(p));
    // A host function is queued like a kernel but is none: no kernel record follows it.
    if starts(&["cuLaunch"]) && !starts(&["cuLaunchHostFunc"]) {
        Family::Launch
    } else if starts(&["cuGraphLaunch"]) {
        Family::GraphLaunch
    } else if starts(&["cuModuleLoad", "cuLibraryLoad", "cuLink"]) {
        Family::Module
    } else if symbol == "cuInit" || starts(&["cuCtxCreate", "cuDevicePrimaryCtxRetain"]) {
        Family::Init
    } else if starts(&[
        "cuMemAlloc",
        "cuMemHostAlloc",
        "cuMemCreate",
        "cuMemHostRegister",
    ]) {
        Family::Alloc
    } else if starts(&["cuMemFree", "cuMemRelease", "cuMemHostUnregister"]) {
        Family::Free
    } else {
        Family::Other
    }
}

/// The cumulative counters the windows are differences of.
#[derive(Clone, Default, PartialEq, Debug)]
struct Totals {
    calls: u64,
    launches: u64,
    graph_launches: u64,
    driver_ns: u64,
    launch_ns: u64,
    module_ns: u64,
    init_ns: u64,
    allocs: u64,
    frees: u64,
    blocked_ns: [u64; CAUSES],
    copy_bytes: [[u64; HOST_KINDS]; DIRECTIONS],
}

impl Totals {
    fn add_calls(&mut self, family: Family, calls: u64, ns: u64) {
        self.calls += calls;
        self.driver_ns += ns;
        match family {
            Family::Launch => {
                self.launches += calls;
                self.launch_ns += ns;
            }
            Family::GraphLaunch => self.graph_launches += calls,
            Family::Module => self.module_ns += ns,
            Family::Init => self.init_ns += ns,
            Family::Alloc => self.allocs += calls,
            Family::Free => self.frees += calls,
            Family::Other => {}
        }
    }

    /// Time blocked for cause `c` (a `SyncCause` as usize).
    fn blocked(&self, c: usize) -> u64 {
        self.blocked_ns.get(c).copied().unwrap_or(0)
    }

    /// Bytes copied in direction `d` from or to host memory of kind `k` (as usize).
    fn copied(&self, d: usize, k: usize) -> u64 {
        self.copy_bytes
            .get(d)
            .and_then(|row| row.get(k))
            .copied()
            .unwrap_or(0)
    }

    fn add(&mut self, other: &Totals) {
        self.calls += other.calls;
        self.launches += other.launches;
        self.graph_launches += other.graph_launches;
        self.driver_ns += other.driver_ns;
        self.launch_ns += other.launch_ns;
        self.module_ns += other.module_ns;
        self.init_ns += other.init_ns;
        self.allocs += other.allocs;
        self.frees += other.frees;
        let blocked = self.blocked_ns.iter_mut().zip(&other.blocked_ns);
        let copies = self.copy_bytes.iter_mut().flatten();
        for (a, b) in blocked.chain(copies.zip(other.copy_bytes.iter().flatten())) {
            *a += b;
        }
    }

    /// The same quantities from a dump's records.
    fn of_dump(d: &Dump) -> Totals {
        let mut t = Totals::default();
        for a in &d.apis {
            t.add_calls(family(&a.symbol), a.calls, a.total_ns);
        }
        for s in &d.syncs {
            if let Some(ns) = t.blocked_ns.get_mut(s.cause as usize) {
                *ns += s.total_ns;
            }
        }
        for c in &d.copies {
            let cell = t
                .copy_bytes
                .get_mut(c.direction as usize)
                .and_then(|row| row.get_mut(c.host as usize));
            if let Some(bytes) = cell {
                *bytes += c.bytes;
            }
        }
        t
    }
}

/// One hook of one block as last summed.
#[derive(Clone, Copy, Default)]
struct HookSeen {
    total_ns: u64,
    zero_ns_calls: u64,
    calls: u64,
}

impl HookSeen {
    /// Reads the hook again; returns the calls and ns added since the last read.
    fn refresh(&mut self, s: &Series) -> (u64, u64) {
        let total_ns = s.total_ns.load(Relaxed);
        let zero_ns_calls = s.hist[0].load(Relaxed);
        // A call adds to total_ns, or (0 ns) to bucket 0: either way one of them moved.
        if (total_ns, zero_ns_calls) == (self.total_ns, self.zero_ns_calls) {
            return (0, 0);
        }
        let calls: u64 = s.hist.iter().map(|b| b.load(Relaxed)).sum();
        let added = (
            calls.saturating_sub(self.calls),
            total_ns.saturating_sub(self.total_ns),
        );
        *self = HookSeen {
            total_ns,
            zero_ns_calls,
            calls,
        };
        added
    }
}

#[derive(Default)]
struct BlockSeen {
    retired: u32,
    hooks: Vec<HookSeen>,
    /// The block's hook counters as last read, summed by family.
    totals: Totals,
}

pub struct Table {
    /// Unix ns of window 0's start; 0 until the first tick.
    origin: u64,
    window_ns: u64,
    host: HostWindows,
    /// The totals filed so far, and when they were taken (Unix ns).
    filed: Totals,
    filed_at: u64,
    blocks: Vec<BlockSeen>,
    families: Vec<Family>,
}

impl Default for Table {
    fn default() -> Table {
        Table {
            origin: 0,
            window_ns: FIRST_WINDOW_NS,
            host: HostWindows::default(),
            filed: Totals::default(),
            filed_at: 0,
            blocks: Vec::new(),
            families: ALL_HOOKS.iter().map(|h| family(h.name())).collect(),
        }
    }
}

static TABLE: ForkLock<Table> = ForkLock::new();

impl Table {
    /// Starts the table at the process's start, once it is known.
    fn started(&mut self) -> bool {
        if self.origin == 0 {
            self.origin = crate::switch::start_unix_ns();
        }
        self.origin != 0
    }

    fn window_of(&self, at: u64) -> u64 {
        at.saturating_sub(self.origin) / self.window_ns
    }

    fn next_edge(&self, now: u64) -> u64 {
        self.origin + (self.window_of(now) + 1) * self.window_ns
    }

    /// The live totals, from the blocks.
    fn sum_blocks(&mut self, blocks: &[ThreadStats]) -> Totals {
        let mut t = Totals::default();
        self.blocks.resize_with(blocks.len(), BlockSeen::default);
        for (index, (block, seen)) in blocks.iter().zip(&mut self.blocks).enumerate() {
            let retired = record::retired(index);
            if seen.retired != retired || seen.hooks.is_empty() {
                *seen = BlockSeen {
                    retired,
                    hooks: vec![HookSeen::default(); HOOK_COUNT],
                    totals: Totals::default(),
                };
            }
            // Every call writes its hook's total_ns: a hook whose page of it was never
            // written was never called.
            let written = Written::of(block);
            for ((cell, hook), &family) in
                block.apis.iter().zip(&mut seen.hooks).zip(&self.families)
            {
                if written.holds(&cell.series.total_ns) {
                    let (calls, ns) = hook.refresh(&cell.series);
                    seen.totals.add_calls(family, calls, ns);
                }
            }
            t.add(&seen.totals);
            for (sum, series) in t.blocked_ns.iter_mut().zip(&block.syncs) {
                *sum += series.total_ns.load(Relaxed);
            }
            for (sums, cells) in t.copy_bytes.iter_mut().zip(&block.copies) {
                for (sum, cell) in sums.iter_mut().zip(cells) {
                    *sum += cell.bytes.load(Relaxed);
                }
            }
        }
        t
    }

    /// Files what changed since the last filing into the window of the interval's middle.
    fn file(&mut self, now: u64, totals: Totals) {
        let at = if self.filed_at == 0 {
            now
        } else {
            self.filed_at + now.saturating_sub(self.filed_at) / 2
        };
        // The table reaches `now`, so that it spans the process's life so far.
        while self.window_of(now) >= WINDOWS as u64 {
            self.host.series_mut().into_iter().for_each(merge_pairs);
            self.window_ns *= 2;
        }
        let slot = self.window_of(at) as usize;
        let windows = self.host.calls.len().max(self.window_of(now) as usize + 1);
        let was = std::mem::replace(&mut self.filed, totals);
        let new = &self.filed;
        let host = &mut self.host;
        for (cause, (&new, &old)) in SyncCause::ALL
            .iter()
            .zip(new.blocked_ns.iter().zip(&was.blocked_ns))
        {
            if new > old && !host.blocked_ns.iter().any(|c| c.cause == *cause) {
                host.blocked_ns.push(CauseSeries {
                    cause: *cause,
                    ns: Vec::new(),
                });
            }
        }
        for (d, direction) in Direction::ALL.iter().enumerate() {
            for (k, kind) in HostKind::ALL.iter().enumerate() {
                let grew = new.copied(d, k) > was.copied(d, k);
                if grew
                    && !host
                        .copy_bytes
                        .iter()
                        .any(|c| c.direction == *direction && c.host == *kind)
                {
                    host.copy_bytes.push(CopySeries {
                        direction: *direction,
                        host: *kind,
                        bytes: Vec::new(),
                    });
                }
            }
        }
        host.series_mut()
            .into_iter()
            .for_each(|s| s.resize(windows, 0));
        let add = |series: &mut Vec<u64>, new: u64, old: u64| {
            if let Some(v) = series.get_mut(slot) {
                *v += new.saturating_sub(old);
            }
        };
        add(&mut host.calls, new.calls, was.calls);
        add(&mut host.launches, new.launches, was.launches);
        add(
            &mut host.graph_launches,
            new.graph_launches,
            was.graph_launches,
        );
        add(&mut host.driver_ns, new.driver_ns, was.driver_ns);
        add(&mut host.launch_ns, new.launch_ns, was.launch_ns);
        add(&mut host.module_ns, new.module_ns, was.module_ns);
        add(&mut host.init_ns, new.init_ns, was.init_ns);
        add(&mut host.allocs, new.allocs, was.allocs);
        add(&mut host.frees, new.frees, was.frees);
        for series in &mut host.blocked_ns {
            let c = series.cause as usize;
            add(&mut series.ns, new.blocked(c), was.blocked(c));
        }
        for series in &mut host.copy_bytes {
            let (d, k) = (series.direction as usize, series.host as usize);
            add(&mut series.bytes, new.copied(d, k), was.copied(d, k));
        }
        self.filed_at = now;
    }
}

/// The writer thread's periodic work: files the windows that have ended and reads the
/// event rings. Returns how long (ns) until it is due again.
pub fn tick() -> u64 {
    let now = clock::unix_ns();
    let next_edge = {
        let mut table = TABLE.lock();
        if !table.started() {
            return DRAIN_NS;
        }
        if now >= table.next_edge(table.filed_at) {
            let totals = record::with_blocks(|blocks| table.sum_blocks(blocks));
            table.file(now, totals);
        }
        table.next_edge(now)
    };
    crate::events::drain();
    crate::nvtx::drain();
    next_edge.saturating_sub(now).clamp(1, DRAIN_NS)
}

/// The kernel launches made so far, summed from the blocks as a tick does: the GPU side
/// counts them as it switches recording on and off, and extrapolates sampled kernels by
/// them. Takes the table's lock: never call it under a lock the dump takes inside it.
pub fn launches_so_far() -> u64 {
    let mut table = TABLE.lock();
    record::with_blocks(|blocks| table.sum_blocks(blocks)).launches
}

impl Table {
    /// About when the first and the last of a dump's `launches` were made: the start of the
    /// first window that filed one, and the end of the last (at the last filing if some
    /// came after it); 0 where none was filed.
    pub fn launch_span_unix_ns(&self, launches: u64) -> (u64, u64) {
        let window_start = |i: usize| self.origin + i as u64 * self.window_ns;
        let first = self.host.launches.iter().position(|&n| n > 0);
        let last = if launches > self.filed.launches {
            self.filed_at
        } else {
            let last = self.host.launches.iter().rposition(|&n| n > 0);
            last.map_or(0, |i| window_start(i + 1).min(self.filed_at))
        };
        (first.map_or(last, window_start), last)
    }
}

/// The kernel launches among a dump's calls.
pub fn launches_in(apis: &[gpuspy_format::ApiRecord]) -> u64 {
    apis.iter()
        .filter(|a| family(&a.symbol) == Family::Launch)
        .map(|a| a.calls)
        .sum()
}

/// Held while a dump reads the blocks, so that its totals and the last window agree.
pub fn lock() -> Guard<'static, Table> {
    TABLE.lock()
}

/// The timeline of `dump`, whose records were read while `table` was held, with the GPU
/// side's windows from `gpu` (`gpu::timeline_gpu`, given the timeline's origin).
pub fn assemble(
    mut table: Guard<'static, Table>,
    dump: &Dump,
    gpu: impl FnOnce(u64) -> GpuWindows,
) -> Option<Timeline> {
    if !table.started() {
        return None;
    }
    table.file(dump.stop_unix_ns, Totals::of_dump(dump));
    let mut timeline = Timeline {
        start_unix_ns: table.origin,
        window_ns: table.window_ns,
        host: table.host.clone(),
        ..Timeline::default()
    };
    drop(table);
    let gpu = gpu(timeline.start_unix_ns);
    add_gpu(&mut timeline, gpu);
    if let Some((longest, recent, lost)) = crate::events::samples() {
        timeline.longest_blocking = longest;
        timeline.recent_blocking = recent;
        timeline.blocking_events_lost = lost;
    }
    timeline.in_call = threads_in_call();
    crate::nvtx::fill(&mut timeline);
    fit(&mut timeline);
    Some(timeline)
}

/// Brings the host's and the GPU side's series to the coarser of the two widths (both
/// double from `FIRST_WINDOW_NS`) and to one length.
fn add_gpu(timeline: &mut Timeline, gpu: GpuWindows) {
    let GpuWindows {
        mut window_ns,
        mut devices,
        mut unified_memory,
    } = gpu;
    if devices.is_empty() && unified_memory.is_none() {
        return;
    }
    while timeline.window_ns < window_ns {
        timeline.host.series_mut().into_iter().for_each(merge_pairs);
        timeline.window_ns *= 2;
    }
    while window_ns < timeline.window_ns {
        let um = unified_memory.iter_mut().flat_map(|u| u.series_mut());
        for s in devices.iter_mut().flat_map(|d| d.series_mut()).chain(um) {
            merge_pairs(s);
        }
        window_ns *= 2;
    }
    timeline.devices = devices;
    timeline.unified_memory = unified_memory;
    let Timeline {
        host,
        devices,
        unified_memory,
        ..
    } = timeline;
    let mut series: Vec<&mut Vec<u64>> = host.series_mut();
    series.extend(devices.iter_mut().flat_map(|d| d.series_mut()));
    series.extend(unified_memory.iter_mut().flat_map(|u| u.series_mut()));
    let windows = series.iter().map(|s| s.len()).max().unwrap_or(0);
    for s in series {
        s.resize(windows, 0);
    }
}

/// Keeps the timeline within `MAX_JSON_BYTES`: halves the table until it fits.
fn fit(timeline: &mut Timeline) {
    while timeline.host.calls.len() > 1
        && serde_json::to_vec(timeline).map_or(0, |json| json.len()) > MAX_JSON_BYTES
    {
        timeline.merge_pairs();
    }
}

/// Threads inside an intercepted call now, longest first.
fn threads_in_call() -> Vec<ThreadInCall> {
    let anchor = Anchor::now();
    let mut calls: Vec<ThreadInCall> = record::in_flight()
        .into_iter()
        .filter_map(|c| {
            Some(ThreadInCall {
                symbol: ALL_HOOKS.get(c.hook)?.name().to_string(),
                since_unix_ns: anchor.unix_ns(c.since),
            })
        })
        .collect();
    calls.sort_unstable_by_key(|c| c.since_unix_ns);
    calls.truncate(SAMPLED_EVENTS);
    calls
}

/// Fork child: the table starts afresh at the child's start.
pub fn on_fork_child() {
    TABLE.reset_in_child();
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuspy_format::timeline::{
        DeviceWindows, GapEnd, IdleCause, IdleSeries, LongIdleSeries, UnifiedMemoryWindows,
    };

    #[test]
    fn hooks_fall_in_their_families() {
        let of = |name: &str| family(name);
        for launch in [
            "cuLaunchKernel",
            "cuLaunchKernelEx_ptsz",
            "cuLaunchCooperativeKernel",
        ] {
            assert_eq!(of(launch), Family::Launch);
        }
        assert_eq!(of("cuLaunchHostFunc_ptsz"), Family::Other);
        for graph in ["cuGraphLaunch", "cuGraphLaunch_ptsz"] {
            assert_eq!(of(graph), Family::GraphLaunch);
        }
        for module in [
            "cuModuleLoadDataEx",
            "cuLibraryLoadFromFile",
            "cuLinkComplete",
        ] {
            assert_eq!(of(module), Family::Module);
        }
        assert_eq!(of("cuModuleGetFunction"), Family::Other);
        for init in ["cuInit", "cuCtxCreate_v4", "cuDevicePrimaryCtxRetain"] {
            assert_eq!(of(init), Family::Init);
        }
        assert_eq!(of("cuDevicePrimaryCtxRelease_v2"), Family::Other);
        for alloc in [
            "cuMemAlloc_v2",
            "cuMemAllocManaged",
            "cuMemHostAlloc",
            "cuMemCreate",
        ] {
            assert_eq!(of(alloc), Family::Alloc);
        }
        for free in [
            "cuMemFree_v2",
            "cuMemFreeAsync",
            "cuMemFreeHost",
            "cuMemRelease",
        ] {
            assert_eq!(of(free), Family::Free);
        }
        assert_eq!(of("cuStreamSynchronize"), Family::Other);
    }

    fn totals(calls: u64, explicit_ns: u64) -> Totals {
        let mut t = Totals {
            calls,
            ..Totals::default()
        };
        t.blocked_ns[SyncCause::Explicit as usize] = explicit_ns;
        t
    }

    fn table() -> Table {
        Table {
            origin: 1_000,
            ..Table::default()
        }
    }

    #[test]
    fn differences_land_in_the_window_of_their_interval() {
        let mut t = table();
        let w = FIRST_WINDOW_NS;
        t.file(1_000 + 3 * w + 5, totals(4, 0));
        t.file(1_000 + 5 * w + 5, totals(10, 700));
        // The second interval's middle is in window 4; the table reaches window 5.
        assert_eq!(t.host.calls, vec![0, 0, 0, 4, 6, 0]);
        assert_eq!(t.host.blocked_ns.len(), 1);
        assert_eq!(t.host.blocked_ns[0].ns, vec![0, 0, 0, 0, 700, 0]);
        assert_eq!(t.host.launches, vec![0; 6]);
        assert!(t.host.copy_bytes.is_empty());
        // Graph launches have their own column, kernel launches theirs.
        let graphs = Totals {
            calls: 13,
            graph_launches: 3,
            ..Totals::default()
        };
        t.file(1_000 + 7 * w + 5, graphs);
        assert_eq!(t.host.graph_launches, vec![0, 0, 0, 0, 0, 0, 3, 0]);
        assert_eq!(t.host.launches, vec![0; 8]);
    }

    #[test]
    fn the_first_and_last_launches_are_placed_in_their_windows_or_after_the_last_filing() {
        let mut t = table();
        let w = FIRST_WINDOW_NS;
        let launches = |n| Totals {
            launches: n,
            ..Totals::default()
        };
        assert_eq!(t.launch_span_unix_ns(0), (0, 0));
        // Launches filed in window 2 (the interval's middle), none in windows 3-4.
        t.file(1_000 + w, launches(0));
        t.file(1_000 + 3 * w, launches(5));
        t.file(1_000 + 5 * w, launches(5));
        assert_eq!(t.launch_span_unix_ns(5), (1_000 + 2 * w, 1_000 + 3 * w));
        // One more made since the last filing: then.
        assert_eq!(t.launch_span_unix_ns(6), (1_000 + 2 * w, 1_000 + 5 * w));
        // None filed yet: the first is the last.
        let mut t = table();
        t.file(1_000 + w, launches(0));
        assert_eq!(t.launch_span_unix_ns(1), (1_000 + w, 1_000 + w));
    }

    #[test]
    fn a_long_run_merges_the_table_and_keeps_every_count() {
        let mut t = table();
        let w = FIRST_WINDOW_NS;
        // One call per window for 1,000 windows: the table merges twice (to 4 w).
        for i in 1..=1_000u64 {
            t.file(1_000 + i * w, totals(i, i * 10));
        }
        assert_eq!(t.window_ns, 4 * w);
        assert!(t.host.calls.len() <= WINDOWS);
        assert_eq!(t.host.calls.iter().sum::<u64>(), 1_000);
        assert_eq!(t.host.blocked_ns[0].ns.iter().sum::<u64>(), 10_000);
        // Window j of 4 w holds the filings whose interval middle fell in it.
        assert_eq!(t.host.calls[1], 4);
    }

    #[test]
    fn a_timeline_of_any_length_fits_the_dump_budget() {
        let mut t = table();
        let mut all = Totals::default();
        // Ten days of busy 10 ms windows, every series in use, with large values.
        for i in 1..=86_400_000u64 / 10 {
            all.add_calls(Family::Launch, 9_999, 987_654_321);
            all.add_calls(Family::Module, 1, 123_456_789);
            all.add_calls(Family::Init, 1, 123_456_789);
            all.add_calls(Family::Alloc, 77, 5_555_555);
            all.add_calls(Family::Free, 77, 5_555_555);
            all.blocked_ns.iter_mut().for_each(|b| *b += 99_999_999);
            all.copy_bytes
                .iter_mut()
                .flatten()
                .for_each(|b| *b += 123_456_789_012);
            if i % 97 == 0 {
                t.file(1_000 + i * 10 * FIRST_WINDOW_NS, all.clone());
            }
        }
        // A device with every series in use: each idle cause, each long-gap pair.
        let windows = t.host.calls.len();
        let busy = || vec![987_654_321_012; windows];
        let ends = [
            GapEnd::Kernel,
            GapEnd::CopyToDevice,
            GapEnd::OtherTransfer,
            GapEnd::NotObserved,
        ];
        let device = DeviceWindows {
            observed_ns: busy(),
            busy_ns: busy(),
            kernels: busy(),
            transfer_ns: busy(),
            copy_bytes: busy(),
            idle_ns: (IdleCause::ALL.iter())
                .map(|&cause| IdleSeries { cause, ns: busy() })
                .collect(),
            long_idle_ns: (IdleCause::ALL.iter())
                .flat_map(|&cause| ends.map(|ended_by| (cause, ended_by)))
                .map(|(cause, ended_by)| LongIdleSeries {
                    cause,
                    ended_by,
                    ns: busy(),
                })
                .collect(),
            short_gaps_ended: busy(),
            long_gaps_ended: busy(),
            ..DeviceWindows::default()
        };
        let mut timeline = Timeline {
            start_unix_ns: t.origin,
            window_ns: t.window_ns,
            host: t.host.clone(),
            devices: vec![device],
            ..Timeline::default()
        };
        let full = serde_json::to_vec(&timeline).unwrap().len();
        fit(&mut timeline);
        let fitted = serde_json::to_vec(&timeline).unwrap().len();
        assert!(
            full > MAX_JSON_BYTES,
            "the test should need a merge: {full}"
        );
        // Within the budget, and not merged further than needed (a merge halves it).
        assert!(fitted <= MAX_JSON_BYTES, "{fitted} bytes");
        assert!(fitted > MAX_JSON_BYTES / 4, "{fitted} bytes");
        assert_eq!(timeline.host.calls.iter().sum::<u64>(), t.filed.calls);
        assert_eq!(timeline.host.copy_bytes.len(), DIRECTIONS * HOST_KINDS);
        let device = &timeline.devices[0];
        assert_eq!(device.long_idle_ns.len(), IdleCause::ALL.len() * ends.len());
        let width = (windows as u64).div_ceil(device.long_gaps_ended.len() as u64);
        assert_eq!(device.long_gaps_ended[0], width * 987_654_321_012);
    }

    /// A measurement, not a check (bench/timeline-snapshot.sh runs it): the CPU time of one
    /// window's snapshot (summing the blocks, filing the window) and of one read of the
    /// event rings, with 1, 8 and 64 threads calling six kinds of call all along.
    #[test]
    #[ignore]
    fn snapshot_cost() {
        use crate::exports;
        use crate::hooks::Hook;
        use std::ffi::c_void;
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        use std::sync::Arc;
        extern "C" fn ok(_: *mut c_void) -> u32 {
            0
        }
        let hooks = [
            Hook::cuStreamSynchronize,
            Hook::cuStreamSynchronize_ptsz,
            Hook::cuEventSynchronize,
            Hook::cuStreamQuery,
            Hook::cuStreamQuery_ptsz,
            Hook::cuEventQuery,
        ];
        let out = std::env::temp_dir().join(format!("gpuspy-snapshot-{}", std::process::id()));
        std::env::set_var("GPUSPY_OUT", &out);
        for h in hooks {
            crate::resolve::inject_real(h, ok as *mut c_void);
        }
        let cpu_ns = || {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: t is a valid timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
        };
        let mut table = Table::default();
        for threads in [1usize, 8, 64] {
            let stop = Arc::new(AtomicBool::new(false));
            let started = Arc::new(AtomicUsize::new(0));
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let (stop, started) = (stop.clone(), started.clone());
                    std::thread::spawn(move || {
                        let null = std::ptr::null_mut();
                        let mut first = true;
                        while !stop.load(Relaxed) {
                            // SAFETY: the injected stub ignores its argument.
                            unsafe {
                                exports::cuStreamSynchronize(null);
                                exports::cuStreamSynchronize_ptsz(null);
                                exports::cuEventSynchronize(null);
                                exports::cuStreamQuery(null);
                                exports::cuStreamQuery_ptsz(null);
                                exports::cuEventQuery(null);
                            }
                            if std::mem::take(&mut first) {
                                started.fetch_add(1, Relaxed);
                            }
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                    })
                })
                .collect();
            while started.load(Relaxed) < threads {
                std::thread::yield_now();
            }
            let (mut snapshot, mut drain) = (Vec::new(), Vec::new());
            for i in 0..200 {
                let t0 = cpu_ns();
                let totals = record::with_blocks(|blocks| table.sum_blocks(blocks));
                table.file(clock::unix_ns() + i * FIRST_WINDOW_NS, totals);
                let t1 = cpu_ns();
                crate::events::drain();
                drain.push(cpu_ns() - t1);
                snapshot.push(t1 - t0);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            stop.store(true, Relaxed);
            workers.into_iter().for_each(|w| w.join().unwrap());
            // Medians: on a loaded machine the means are mostly other processes' doing.
            let median = |v: &mut Vec<u64>| {
                v.sort_unstable();
                v[v.len() / 2] as f64 / 1e3
            };
            println!(
                "{threads} threads: snapshot {:.1} us, ring read {:.1} us per tick (CPU, median)",
                median(&mut snapshot),
                median(&mut drain)
            );
        }
        let _ = std::fs::remove_dir_all(out);
    }

    #[test]
    fn gpu_series_are_brought_to_the_coarser_width() {
        let mut timeline = Timeline {
            window_ns: FIRST_WINDOW_NS,
            host: HostWindows {
                calls: vec![1, 2, 3, 4, 5],
                ..HostWindows::default()
            },
            ..Timeline::default()
        };
        let device = DeviceWindows {
            busy_ns: vec![10, 20],
            ..DeviceWindows::default()
        };
        let um = UnifiedMemoryWindows {
            observed_ns: vec![4, 4],
            ..UnifiedMemoryWindows::default()
        };
        let gpu = GpuWindows {
            window_ns: 2 * FIRST_WINDOW_NS,
            devices: vec![device],
            unified_memory: Some(um),
        };
        add_gpu(&mut timeline, gpu);
        assert_eq!(timeline.window_ns, 2 * FIRST_WINDOW_NS);
        assert_eq!(timeline.host.calls, vec![3, 7, 5]);
        assert_eq!(timeline.devices[0].busy_ns, vec![10, 20, 0]);
        assert_eq!(timeline.devices[0].observed_ns, vec![0, 0, 0]);
        let um = timeline.unified_memory.unwrap();
        assert_eq!(um.observed_ns, vec![4, 4, 0]);
        assert_eq!(um.bytes_dtoh, vec![0, 0, 0]);
        // A host table coarser than the GPU side's: the GPU side is merged.
        let mut timeline = Timeline {
            window_ns: 2 * FIRST_WINDOW_NS,
            host: HostWindows {
                calls: vec![1],
                ..HostWindows::default()
            },
            ..Timeline::default()
        };
        let um = UnifiedMemoryWindows {
            observed_ns: vec![1, 2, 3],
            ..UnifiedMemoryWindows::default()
        };
        let gpu = GpuWindows {
            window_ns: FIRST_WINDOW_NS,
            devices: Vec::new(),
            unified_memory: Some(um),
        };
        add_gpu(&mut timeline, gpu);
        let um = timeline.unified_memory.unwrap();
        assert_eq!(
            (timeline.host.calls, um.observed_ns),
            (vec![1, 0], vec![3, 3])
        );
    }
}
