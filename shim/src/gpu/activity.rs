//! CUPTI activity records reduced on the fly into bounded per-device aggregates.
//!
//! Records arrive in buffers, unordered within a buffer and across buffers (CUPTI 13 keeps
//! one buffer per producing thread). Busy time is a union of intervals, which needs them
//! in start order, so each device keeps the intervals not yet settled; `settle(horizon)`
//! sorts them and folds every one that starts before `horizon` into two running unions
//! (kernels only, and all activity). A record that arrives after the time it covers was
//! settled is clipped to the settled frontier and counted as late. Memory is bounded by
//! the intervals of one horizon margin (and `MAX_PENDING`), a capped kernel table and a
//! capped series, whatever the run's length.

use gpuspy_format::gpu::{
    nccl_collective, Activity, BusySeries, CollectiveKernels, GpuCopy, GridBlocks, KernelStat,
    Overhead, UnifiedMemory, SERIES_POINTS, TOP_KERNELS,
};
use gpuspy_format::hist::{self, Histogram};
use std::collections::{BTreeMap, HashMap};
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
    },
    Overhead {
        kind: u32,
        start: u64,
        end: u64,
    },
}

/// Past this many unsettled intervals on a device, everything is settled at once.
const MAX_PENDING: usize = 1 << 20;
/// Distinct kernels tracked by name; later ones are summed into one "other" entry.
const MAX_KERNEL_NAMES: usize = 4096;
/// The first slot width of the busy series; it doubles as the run grows.
const FIRST_STEP_NS: u64 = 10_000_000;

#[derive(Default)]
pub struct Aggregator {
    since_unix_ns: u64,
    /// Added to CUPTI timestamps to make them Unix time (CUPTI 13 counts from boot).
    to_unix_ns: i64,
    devices: BTreeMap<u32, DeviceAgg>,
    unified_memory: Option<UnifiedMemory>,
    overhead: BTreeMap<u32, (u64, u64)>,
}

impl Aggregator {
    /// `to_unix_ns`: Unix time minus CUPTI time, measured once.
    pub fn new(since_unix_ns: u64, to_unix_ns: i64) -> Aggregator {
        Aggregator {
            since_unix_ns,
            to_unix_ns,
            ..Aggregator::default()
        }
    }

    /// A CUPTI timestamp as Unix time; 0 (no timestamp) stays 0.
    fn unix(&self, t: u64) -> u64 {
        if t == 0 {
            0
        } else {
            t.saturating_add_signed(self.to_unix_ns)
        }
    }

    pub fn add(&mut self, record: Record<'_>) {
        match record {
            Record::Kernel {
                device,
                start,
                end,
                name,
                blocks,
            } => {
                let (start, end) = (self.unix(start), self.unix(end));
                self.devices
                    .entry(device)
                    .or_default()
                    .kernel(start, end, name, blocks);
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
                d.interval(start, end, false);
            }
            Record::Memset {
                device,
                bytes,
                start,
                end,
            } => {
                let (start, end) = (self.unix(start), self.unix(end));
                let d = self.devices.entry(device).or_default();
                d.memsets.add(bytes, start, end);
                d.interval(start, end, false);
            }
            Record::UnifiedMemory { counter, value } => {
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
            }
            Record::Overhead { kind, start, end } => {
                let o = self.overhead.entry(kind).or_default();
                o.0 += 1;
                o.1 += end.saturating_sub(start);
            }
        }
    }

    /// Unified-memory counters were switched on: report zeros rather than "not collected".
    pub fn expect_unified_memory(&mut self) {
        self.unified_memory
            .get_or_insert_with(UnifiedMemory::default);
    }

    /// Folds every interval that starts before `horizon` into the unions.
    pub fn settle(&mut self, horizon: u64) {
        for d in self.devices.values_mut() {
            d.settle(horizon);
        }
    }

    pub fn unified_memory(&self) -> Option<UnifiedMemory> {
        self.unified_memory.clone()
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
    /// disturb the running state, so it serves periodic dumps too.
    pub fn devices(&self) -> Vec<(u32, Activity)> {
        self.devices
            .iter()
            .filter(|(_, d)| d.seen())
            .map(|(&ordinal, d)| (ordinal, d.snapshot(self.since_unix_ns)))
            .collect()
    }
}

const COPY_DTOH: u8 = 2;

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

#[derive(Clone, Copy)]
struct Interval {
    start: u64,
    end: u64,
    kernel: bool,
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
}

/// One kernel name's totals, and the NCCL collective it serves, if any.
#[derive(Default)]
struct NamedKernel {
    stat: KernelStat,
    collective: Option<String>,
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
    kernel_hist: Option<Box<[u64; hist::BUCKETS]>>,
    /// Kernels and their time per grid-size bucket (`hist` layout), NCCL's left out.
    grid_blocks: BTreeMap<u32, (u64, u64)>,
    names: HashMap<usize, NamedKernel>,
    other_kernels: NamedKernel,
    /// Per (copy kind, memory kind).
    copies: BTreeMap<(u8, &'static str), Transfers>,
    memsets: Transfers,
    untimed: u64,
}

impl DeviceAgg {
    fn seen(&self) -> bool {
        self.kernels + self.untimed > 0 || !self.copies.is_empty() || self.memsets.count > 0
    }

    fn kernel(&mut self, start: u64, end: u64, name: Option<&CStr>, blocks: u64) {
        if start == 0 || end < start {
            self.untimed += 1;
            return;
        }
        let ns = end - start;
        self.kernels += 1;
        self.kernel_ns += ns;
        self.kernel_hist
            .get_or_insert_with(|| Box::new([0; hist::BUCKETS]))[hist::bucket_index(ns)] += 1;
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
        self.interval(start, end, true);
    }

    fn interval(&mut self, start: u64, end: u64, kernel: bool) {
        if start == 0 || end <= start {
            return;
        }
        self.first = if self.first == 0 {
            start
        } else {
            self.first.min(start)
        };
        self.last = self.last.max(end);
        self.pending.push(Interval { start, end, kernel });
        if self.pending.len() >= MAX_PENDING {
            self.settle(u64::MAX);
        }
    }

    fn settle(&mut self, horizon: u64) {
        self.pending.sort_unstable_by_key(|i| i.start);
        let ready = self.pending.partition_point(|i| i.start < horizon);
        for i in self.pending.drain(..ready) {
            if i.kernel {
                self.busy.add(i.start, i.end);
            }
            self.active.add(i.start, i.end);
        }
    }

    fn snapshot(&self, since_unix_ns: u64) -> Activity {
        let (mut busy, mut active) = (self.busy.clone(), self.active.clone());
        let mut pending = self.pending.clone();
        pending.sort_unstable_by_key(|i| i.start);
        for i in &pending {
            if i.kernel {
                busy.add(i.start, i.end);
            }
            active.add(i.start, i.end);
        }
        busy.close();
        active.close();
        let mut top: Vec<&KernelStat> = self.names.values().map(|n| &n.stat).collect();
        top.sort_unstable_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        let mut top_kernels: Vec<KernelStat> = top.into_iter().take(TOP_KERNELS).cloned().collect();
        if self.other_kernels.stat.calls > 0 {
            top_kernels.push(KernelStat {
                name: "(other kernels)".into(),
                ..self.other_kernels.stat.clone()
            });
        }
        let mut collectives: BTreeMap<&str, CollectiveKernels> = BTreeMap::new();
        for k in self.names.values() {
            if let Some(op) = &k.collective {
                let c = collectives.entry(op).or_insert_with(|| CollectiveKernels {
                    op: op.clone(),
                    ..CollectiveKernels::default()
                });
                c.calls += k.stat.calls;
                c.total_ns += k.stat.total_ns;
            }
        }
        let dense = |h: &Option<Box<[u64; hist::BUCKETS]>>| {
            h.as_deref()
                .map_or_else(|| Histogram(Vec::new()), |d| Histogram::from_dense(d))
        };
        Activity {
            since_unix_ns,
            first_unix_ns: self.first,
            last_unix_ns: self.last,
            kernels: self.kernels,
            kernel_ns: self.kernel_ns,
            busy_ns: busy.total,
            active_ns: active.total,
            kernel_hist: dense(&self.kernel_hist),
            gap_hist: dense(&active.gaps),
            small_grid_kernels: None,
            small_grid_ns: None,
            grid_blocks: self
                .grid_blocks
                .iter()
                .map(|(&bucket, &(kernels, ns))| GridBlocks {
                    bucket,
                    kernels,
                    ns,
                })
                .collect(),
            top_kernels,
            copies: self
                .copies
                .iter()
                .map(|(&(kind, memory), t)| GpuCopy {
                    kind: copy_name(kind).into(),
                    memory: memory.into(),
                    count: t.count,
                    bytes: t.bytes,
                    ns: t.ns,
                })
                .collect(),
            memsets: self.memsets.count,
            memset_bytes: self.memsets.bytes,
            memset_ns: self.memsets.ns,
            busy_series: busy.series,
            late_records: busy.late_records,
            late_ns: busy.late_ns,
            untimed_records: self.untimed,
            collectives: collectives.into_values().collect(),
        }
    }
}

/// A union of intervals fed in start order: everything before `settled` is final.
#[derive(Clone, Default)]
struct Union {
    open: Option<(u64, u64)>,
    settled: u64,
    total: u64,
    gaps: Option<Box<[u64; hist::BUCKETS]>>,
    series: BusySeries,
    late_records: u64,
    late_ns: u64,
}

impl Union {
    fn add(&mut self, start: u64, end: u64) {
        let mut start = start;
        if start < self.settled {
            self.late_records += 1;
            self.late_ns += end.min(self.settled) - start;
            start = self.settled;
            if end <= start {
                return;
            }
        }
        match self.open {
            Some((open_start, open_end)) if start <= open_end => {
                self.open = Some((open_start, open_end.max(end)));
            }
            Some((open_start, open_end)) => {
                self.close_run(open_start, open_end);
                self.gaps
                    .get_or_insert_with(|| Box::new([0; hist::BUCKETS]))
                    [hist::bucket_index(start - open_end)] += 1;
                self.open = Some((start, end));
                self.settled = start;
            }
            None => {
                self.open = Some((start, end));
                self.settled = start;
            }
        }
    }

    fn close(&mut self) {
        if let Some((start, end)) = self.open.take() {
            self.close_run(start, end);
            self.settled = end;
        }
    }

    fn close_run(&mut self, start: u64, end: u64) {
        self.total += end - start;
        add_to_series(&mut self.series, start, end);
    }
}

/// Spreads `[start, end)` over the series' slots, widening them as the run outgrows them.
fn add_to_series(s: &mut BusySeries, start: u64, end: u64) {
    if s.step_ns == 0 {
        s.start_unix_ns = start;
        s.step_ns = FIRST_STEP_NS;
    }
    while end > s.start_unix_ns + s.step_ns * SERIES_POINTS as u64 {
        s.busy_ns = s.busy_ns.chunks(2).map(|pair| pair.iter().sum()).collect();
        s.step_ns *= 2;
    }
    let mut at = start.max(s.start_unix_ns);
    while at < end {
        let slot = ((at - s.start_unix_ns) / s.step_ns) as usize;
        let slot_end = s.start_unix_ns + (slot as u64 + 1) * s.step_ns;
        if s.busy_ns.len() <= slot {
            s.busy_ns.resize(slot + 1, 0);
        }
        s.busy_ns[slot] += slot_end.min(end) - at;
        at = slot_end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_700_000_000_000_000_000;

    fn kernel(start: u64, end: u64) -> Record<'static> {
        Record::Kernel {
            device: 0,
            start: T0 + start,
            end: T0 + end,
            name: Some(c"_Z6vecAddPfS_S_i"),
            blocks: 4,
        }
    }

    fn copy(start: u64, end: u64) -> Record<'static> {
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

    fn only(agg: &Aggregator) -> Activity {
        let mut devices = agg.devices();
        assert_eq!(devices.len(), 1);
        devices.remove(0).1
    }

    #[test]
    fn busy_time_is_the_exact_union_whatever_the_arrival_order() {
        // Kernels [0,10) [5,20) [30,40) [35,36) and a copy [20,25): kernel union 30 ns,
        // activity union 35 ns, one idle gap of 5 ns between 25 and 30.
        let intervals = [(30, 40), (0, 10), (35, 36), (5, 20)];
        let mut agg = Aggregator::new(T0, 0);
        for &(s, e) in &intervals {
            agg.add(kernel(s, e));
        }
        agg.add(copy(20, 25));
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
        let mut whole = Aggregator::new(T0, 0);
        let mut batched = Aggregator::new(T0, 0);
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
            batched.settle(T0 + next * 5 * MS);
        }
        let (a, b) = (only(&whole), only(&batched));
        assert_eq!(a.busy_ns, 1000 * 3 * MS);
        assert_eq!(b.busy_ns, a.busy_ns);
        assert_eq!(b.gap_hist, a.gap_hist);
        assert_eq!(a.gap_hist.count(), 999);
        assert_eq!(b.late_records, 0);
        assert_eq!(a.busy_series.busy_ns.iter().sum::<u64>(), a.busy_ns);
    }

    #[test]
    fn a_late_record_is_clipped_and_counted() {
        let mut agg = Aggregator::new(T0, 0);
        agg.add(kernel(0, 10));
        agg.add(kernel(100, 110));
        agg.settle(T0 + 1000);
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
        let mut agg = Aggregator::new(T0, 1_000);
        agg.add(kernel(0, 10));
        let a = only(&agg);
        assert_eq!((a.first_unix_ns, a.last_unix_ns), (T0 + 1_000, T0 + 1_010));
    }

    #[test]
    fn untimed_and_empty_records_do_not_count_as_busy() {
        let mut agg = Aggregator::new(T0, 0);
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
    }

    #[test]
    fn nccl_kernel_time_is_totalled_per_collective_and_left_out_of_the_grid_sizes() {
        let mut agg = Aggregator::new(T0, 0);
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
        let mut agg = Aggregator::new(T0, 0);
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
        let mut agg = Aggregator::new(T0, 0);
        agg.expect_unified_memory();
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
            agg.add(Record::UnifiedMemory { counter, value });
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
            agg.unified_memory(),
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
        assert_eq!(Aggregator::new(T0, 0).unified_memory(), None);
    }

    #[test]
    fn the_series_stays_capped_and_keeps_every_busy_nanosecond() {
        let mut agg = Aggregator::new(T0, 0);
        // One hour of 1 ms kernels every second.
        for s in 0..3600u64 {
            agg.add(kernel(s * 1000 * MS, s * 1000 * MS + MS));
            if s % 100 == 99 {
                agg.settle(T0 + s * 1000 * MS);
            }
        }
        let a = only(&agg);
        assert!(a.busy_series.busy_ns.len() <= SERIES_POINTS);
        assert_eq!(a.busy_series.busy_ns.iter().sum::<u64>(), 3600 * MS);
        // The first slot holds the kernels that started in it, one per second.
        let step = a.busy_series.step_ns;
        assert_eq!(a.busy_in(T0, T0 + step), step.div_ceil(1000 * MS) * MS);
    }
}
