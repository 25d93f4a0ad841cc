//! One process's timeline as windows, each clipped to the process's end, and what each
//! held: work, loading, copies only, time blocked, GPU busy time.

use super::ranges::{is_pause, is_step_name};
use crate::analysis::profile::total;
use gpuspy_format::timeline::{self, DeviceWindows, HostEvent, HostEventKind, Timeline};
use gpuspy_format::{Direction, SyncCause};

/// A window spent this share or more in module loading, JIT and driver init is loading.
const LOADING_SHARE: f64 = 0.25;

/// Blocked or GPU-busy time of at least this share makes a window one with work.
const WORK_SHARE: f64 = 0.1;

/// Window `i` of `series`, 0 past its end (older dumps lack some series).
pub fn at(series: &[u64], i: usize) -> u64 {
    series.get(i).copied().unwrap_or(0)
}

/// The device time of window `i` that CUPTI accounted for: busy, transfer and idle by
/// cause. The shim's `observed_ns` is exactly that since transfer time was recorded; in
/// older dumps it can also count time between sampling periods, so shares taken over it
/// come out too small. Shares are taken over this.
pub fn accounted_ns(d: &DeviceWindows, i: usize) -> u64 {
    at(&d.busy_ns, i) + at(&d.transfer_ns, i) + total(d.idle_ns.iter().map(|s| at(&s.ns, i)))
}

/// `value * num / den` without overflow, `value` where `den` is 0.
pub(super) fn scale(value: u64, num: u64, den: u64) -> u64 {
    match den {
        0 => value,
        _ => u64::try_from(value as u128 * num as u128 / den as u128).unwrap_or(u64::MAX),
    }
}

/// Per window of `t` (`n` of them), the time its sampled explicit syncs (the longest and
/// the most recent blocking calls, each counted once) spent in it. The host table files a
/// call in the window it ended in: a 1.8 s sync on a Triton loop's deep queue is 1.8 s in
/// one 80 ms window and nothing in the 22 before, where the H200 ran kernels whose records
/// CUPTI discarded when the recording period closed (bench/results/gpu-2026-12-01-
/// run16-phases-15).
pub(super) fn syncs_spread(t: &Timeline, n: usize) -> Vec<u64> {
    let mut spread = vec![0; n];
    let width = t.window_ns.max(1);
    let table_end = t.start_unix_ns + n as u64 * width;
    let mut syncs: Vec<&HostEvent> = (t.longest_blocking.iter().chain(&t.recent_blocking))
        .filter(|e| e.kind == HostEventKind::Sync(SyncCause::Explicit))
        .collect();
    syncs.sort_unstable_by_key(|e| (e.start_unix_ns, e.end_unix_ns));
    syncs.dedup_by_key(|e| (e.start_unix_ns, e.end_unix_ns));
    for e in syncs {
        let end = e.end_unix_ns.min(table_end);
        timeline::spread(&mut spread, t.start_unix_ns, width, e.start_unix_ns, end);
    }
    spread
}

/// The windows of one process's timeline, each clipped to the process's end.
pub(super) struct Windows<'a> {
    pub(super) t: &'a Timeline,
    stop: u64,
    pub(super) n: usize,
    /// Per window, the time the sampled explicit syncs spent in it (`syncs_spread`).
    sync_spread: Vec<u64>,
}

impl<'a> Windows<'a> {
    pub(super) fn new(t: &'a Timeline, stop: u64) -> Windows<'a> {
        let h = &t.host;
        let n = [
            &h.calls,
            &h.launches,
            &h.driver_ns,
            &h.module_ns,
            &h.init_ns,
        ]
        .iter()
        .map(|s| s.len())
        .chain(t.devices.iter().map(|d| d.observed_ns.len()))
        .max()
        .unwrap_or(0);
        // Windows past the dump (a flush taken mid-window) end there.
        let n = n.min(
            stop.saturating_sub(t.start_unix_ns)
                .div_ceil(t.window_ns.max(1))
                .try_into()
                .unwrap_or(usize::MAX),
        );
        let sync_spread = syncs_spread(t, n);
        Windows {
            t,
            stop,
            n,
            sync_spread,
        }
    }

    pub(super) fn span(&self, i: usize) -> (u64, u64) {
        let start = self.t.start_unix_ns + i as u64 * self.t.window_ns;
        (start, (start + self.t.window_ns).min(self.stop).max(start))
    }

    pub(super) fn len(&self, i: usize) -> u64 {
        let (a, b) = self.span(i);
        b - a
    }

    pub(super) fn blocked(&self, i: usize) -> u64 {
        total(self.t.host.blocked_ns.iter().map(|c| at(&c.ns, i)))
    }

    /// Time blocked in explicit syncs (waiting for the GPU's queue) in window `i`: the
    /// window's column, which holds a call in the window it ended in, or, where more, the
    /// part of the sampled syncs that fell in it.
    pub(super) fn explicit_blocked(&self, i: usize) -> u64 {
        let explicit = self
            .t
            .host
            .blocked_ns
            .iter()
            .filter(|c| c.cause == SyncCause::Explicit);
        total(explicit.map(|c| at(&c.ns, i))).max(at(&self.sync_spread, i))
    }

    /// GPU busy time in window `i`, summed over devices and scaled to the whole window.
    fn busy(&self, i: usize) -> u64 {
        total(
            self.t
                .devices
                .iter()
                .map(|d| scale(at(&d.busy_ns, i), self.len(i), accounted_ns(d, i))),
        )
    }

    /// Host time blocked in copies (synchronous ones, and async ones from pageable memory)
    /// in window `i`.
    pub(super) fn copy_blocked(&self, i: usize) -> u64 {
        let copying = self
            .t
            .host
            .blocked_ns
            .iter()
            .filter(|c| matches!(c.cause, SyncCause::SyncCopy | SyncCause::PageableAsyncCopy));
        total(copying.map(|c| at(&c.ns, i)))
    }

    /// Whether window `i`'s only work was copies: no launch, the GPU idle, and the host
    /// blocked mostly in copies.
    pub(super) fn copies_only(&self, i: usize, metric: &[u64]) -> bool {
        at(metric, i) == 0
            && (self.busy(i) as f64) < WORK_SHARE * self.len(i) as f64
            && 2 * self.copy_blocked(i) >= self.blocked(i)
    }

    /// Bytes copied between host and device in window `i`: to the device, to the host.
    pub(super) fn copied(&self, i: usize) -> (u64, u64) {
        let bytes = |d: Direction| {
            total(
                (self.t.host.copy_bytes.iter())
                    .filter(|c| c.direction == d)
                    .map(|c| at(&c.bytes, i)),
            )
        };
        (bytes(Direction::HtoD), bytes(Direction::DtoH))
    }

    pub(super) fn loading(&self, i: usize) -> bool {
        let h = &self.t.host;
        (at(&h.module_ns, i) + at(&h.init_ns, i)) as f64 >= LOADING_SHARE * self.len(i) as f64
    }

    /// Whether window `i` had work: launches (or, in a run without launches, calls), host
    /// time blocked on the GPU, or GPU busy time.
    pub(super) fn working(&self, i: usize, metric: &[u64]) -> bool {
        let floor = WORK_SHARE * self.len(i) as f64;
        at(metric, i) > 0 || self.blocked(i) as f64 >= floor || self.busy(i) as f64 >= floor
    }

    /// The name of a pause-like NVTX range (evaluation, checkpoint, compile: `nvtx::is_pause`)
    /// covering at least half of window `i`, unless the GPU ran the loop's steps in it.
    pub(super) fn nvtx_pause(&self, i: usize) -> Option<&'a str> {
        if self.runs_steps(i) {
            return None;
        }
        self.t
            .nvtx
            .iter()
            .filter(|r| is_pause(self.t, r))
            .find(|r| 2 * at(&r.ns, i) >= self.len(i))
            .map(|r| r.name.as_str())
    }

    /// Whether the GPU was busy at least half of window `i` with the loop's steps: a step
    /// range ran in it, or nothing was launched in it, so the GPU ran work queued before.
    /// A host range is not the GPU's time: a checkpoint's first copy waits while the GPU
    /// drains the steps queued ahead of it, and that time is the loop's.
    fn runs_steps(&self, i: usize) -> bool {
        let steps = self
            .t
            .nvtx
            .iter()
            .any(|r| is_step_name(&r.name) && at(&r.ns, i) > 0);
        2 * self.busy(i) >= self.len(i) && (steps || at(&self.t.host.launches, i) == 0)
    }
}
