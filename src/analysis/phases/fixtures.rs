//! Timelines for tests: a process whose windows are described one by one.

use super::axis::time_axis;
use super::steady::SteadyState;
use crate::analysis::profile::Profile;
use gpuspy_format::timeline::{
    CauseSeries, CopySeries, DeviceWindows, IdleCause, IdleSeries, Timeline,
};
use gpuspy_format::{Direction, HostKind, SyncCause};

pub const MS: u64 = 1_000_000;
/// The timelines' window 0 starts here.
pub const T0: u64 = 1_800_000_000_000_000_000;

/// What one window holds.
#[derive(Clone, Copy, Default)]
pub struct W {
    pub launches: u64,
    pub launch_ns: u64,
    pub driver_ns: u64,
    pub module_ns: u64,
    pub init_ns: u64,
    pub blocked_ns: u64,
    pub busy_ns: u64,
    pub idle_after_sync: u64,
    pub idle_host: u64,
    /// Host time blocked in async copies from pageable memory, and the bytes they moved.
    pub copy_ns: u64,
    pub htod_bytes: u64,
    pub dtoh_bytes: u64,
}

/// `n` copies of `w`.
pub fn times(n: usize, w: W) -> Vec<W> {
    vec![w; n]
}

/// Gives `p`'s first process the timeline `t`, the process running from its first
/// window to its last.
pub fn attach(p: &mut Profile, t: Timeline) {
    let me = &mut p.processes[0];
    me.start_unix_ns = t.start_unix_ns;
    me.stop_unix_ns = t.start_unix_ns + t.host.calls.len() as u64 * t.window_ns;
    me.timeline = Some(Box::new(t));
}

/// A timeline of 10 ms windows; with `gpu`, one device observed all the time.
pub fn timeline(windows: &[W], gpu: bool) -> Timeline {
    let col = |f: fn(&W) -> u64| windows.iter().map(f).collect::<Vec<u64>>();
    let mut t = Timeline {
        start_unix_ns: T0,
        window_ns: 10 * MS,
        ..Timeline::default()
    };
    t.host.calls = col(|w| w.launches);
    t.host.launches = col(|w| w.launches);
    t.host.driver_ns = col(|w| w.driver_ns + w.module_ns + w.init_ns + w.launch_ns);
    t.host.launch_ns = col(|w| w.launch_ns);
    t.host.module_ns = col(|w| w.module_ns);
    t.host.init_ns = col(|w| w.init_ns);
    t.host.blocked_ns = vec![CauseSeries {
        cause: SyncCause::Explicit,
        ns: col(|w| w.blocked_ns),
    }];
    // The copies' series only where a window copied, as the shim writes them.
    if windows.iter().any(|w| w.copy_ns > 0) {
        t.host.blocked_ns.push(CauseSeries {
            cause: SyncCause::PageableAsyncCopy,
            ns: col(|w| w.copy_ns),
        });
    }
    for (direction, bytes) in [
        (Direction::HtoD, col(|w| w.htod_bytes)),
        (Direction::DtoH, col(|w| w.dtoh_bytes)),
    ] {
        if bytes.iter().any(|&b| b > 0) {
            t.host.copy_bytes.push(CopySeries {
                direction,
                host: HostKind::Pageable,
                bytes,
            });
        }
    }
    if gpu {
        t.devices = vec![DeviceWindows {
            observed_ns: vec![10 * MS; windows.len()],
            busy_ns: col(|w| w.busy_ns),
            idle_ns: vec![
                IdleSeries {
                    cause: IdleCause::AfterSync,
                    ns: col(|w| w.idle_after_sync),
                },
                IdleSeries {
                    cause: IdleCause::Host,
                    ns: col(|w| w.idle_host),
                },
            ],
            ..DeviceWindows::default()
        }];
    }
    t
}

/// The steady state of `p`, if its dumps have timelines and it reached one.
pub fn steady(p: &Profile) -> Option<SteadyState> {
    time_axis(p)?.steady
}
