//! What a call means beyond its latency: bytes moved, host memory kind, whether it blocked
//! the host. Effects are built from the call's arguments before the call (no driver calls,
//! no allocation) and applied by the recorder after a successful return.

use crate::hostmem;
use gpuspy_format::timeline::HostEventKind;
use gpuspy_format::{Direction, HostKind, SyncCause};
use std::ffi::{c_int, c_void};

/// Calls that block the host this long or longer all get their call site captured.
pub const CALL_SITE_THRESHOLD_NS: u64 = 100_000;
/// Of the shorter calls, one in this many is captured and stands for this many. The pick
/// is the low bits of the measured duration, which timing jitter spreads evenly: no
/// counter to keep per thread. (A clock coarser than 1 ns, as `GPUSPY_CLOCK=monotonic` may
/// be on some hosts, samples fewer.)
pub const CALL_SITE_SAMPLE_EVERY: u64 = 1024;

#[derive(Clone, Copy)]
pub enum Mode {
    Blocking,
    Async,
}

#[derive(Clone, Copy)]
pub enum Effect {
    None,
    /// An explicit wait for the GPU.
    Sync,
    /// Bytes named by the call (memset, mapping, prefetch).
    Bytes(u64),
    /// Device memory allocated (`cuMemAlloc*`, `cuMemCreate`), this many bytes.
    DeviceAlloc(u64),
    /// Device memory given back without a device-wide sync (`cuMemFreeAsync`, `cuMemRelease`).
    DeviceFree,
    Copy {
        dir: Direction,
        host: HostKind,
        bytes: u64,
        mode: Mode,
    },
    /// Pinned host memory was allocated; its address is written to `out` by the driver.
    PinnedAlloc {
        out: *mut *mut c_void,
        bytes: u64,
    },
    PinnedRegister {
        ptr: usize,
        bytes: u64,
    },
    ManagedAlloc {
        out: *mut u64,
        bytes: u64,
    },
    /// A free that synchronises the device; forgets the range if the shim tracked it.
    Release {
        ptr: usize,
    },
    /// `cuInit` succeeded: GPU-side collection starts.
    DriverReady,
    /// A context was created or retained on this CUDA device ordinal.
    UsesDevice(c_int),
    /// An NCCL collective, point-to-point call or group end: NCCL enqueues the work on the
    /// GPU and returns, unless it waits (for its peers, or to connect to them).
    Collective,
}

/// An NCCL call that took this long waited rather than enqueued (an enqueue takes
/// microseconds; the fake NCCL's rendezvous polls every millisecond).
pub const COLLECTIVE_WAIT_NS: u64 = 1_000_000;

impl Effect {
    /// The implicit synchronisation this call amounts to, if any.
    #[inline(always)]
    pub fn sync_cause(&self) -> Option<SyncCause> {
        match *self {
            Effect::Sync => Some(SyncCause::Explicit),
            Effect::Release { .. } => Some(SyncCause::Free),
            Effect::Copy {
                mode: Mode::Blocking,
                ..
            } => Some(SyncCause::SyncCopy),
            Effect::Copy {
                mode: Mode::Async,
                host: HostKind::Pageable,
                ..
            } => Some(SyncCause::PageableAsyncCopy),
            _ => None,
        }
    }

    /// Whether the call can hold the host up: a sync, a copy, an allocation or a free
    /// (not a launch, not a start-up call). Those get their Python call site captured.
    #[inline(always)]
    pub fn may_block_host(&self) -> bool {
        matches!(
            self,
            Effect::Sync
                | Effect::Release { .. }
                | Effect::Copy { .. }
                | Effect::Bytes(_)
                | Effect::DeviceAlloc(_)
                | Effect::DeviceFree
                | Effect::PinnedAlloc { .. }
                | Effect::PinnedRegister { .. }
                | Effect::ManagedAlloc { .. }
        )
    }

    /// Whether the call, which took `ns`, gets its Python call site captured
    /// (`pystack::capture`): every call that may block the host and took
    /// `CALL_SITE_THRESHOLD_NS` or more, and one in `CALL_SITE_SAMPLE_EVERY` of the others.
    #[inline(always)]
    pub fn picks_call_site(&self, ns: u64) -> bool {
        self.may_block_host()
            && (ns >= CALL_SITE_THRESHOLD_NS || ns.is_multiple_of(CALL_SITE_SAMPLE_EVERY))
    }

    /// What kind of blocking host event the call, which took `ns`, is, if it is one: the
    /// timeline keeps these with their start and end (`events.rs`).
    #[inline(always)]
    pub fn blocking_kind(&self, ns: u64) -> Option<HostEventKind> {
        match *self {
            Effect::Collective => (ns >= COLLECTIVE_WAIT_NS).then_some(HostEventKind::Collective),
            Effect::DeviceAlloc(_)
            | Effect::DeviceFree
            | Effect::PinnedAlloc { .. }
            | Effect::PinnedRegister { .. }
            | Effect::ManagedAlloc { .. } => Some(HostEventKind::Alloc),
            _ => self.sync_cause().map(HostEventKind::Sync),
        }
    }

    /// Updates the host-memory table after the driver succeeded.
    #[inline(always)]
    pub fn track_host_memory(&self) {
        match *self {
            Effect::PinnedAlloc { out, bytes } if !out.is_null() => {
                // SAFETY: the driver returned success, so it wrote the allocation to `out`.
                hostmem::insert(unsafe { *out } as usize, bytes, HostKind::Pinned);
            }
            Effect::PinnedRegister { ptr, bytes } => hostmem::insert(ptr, bytes, HostKind::Pinned),
            Effect::ManagedAlloc { out, bytes } if !out.is_null() => {
                // SAFETY: as above.
                hostmem::insert(unsafe { *out } as usize, bytes, HostKind::Managed);
                (crate::UPCALLS.managed_memory)();
            }
            Effect::Release { ptr } => hostmem::remove(ptr),
            _ => {}
        }
    }

    /// Tells GPU-side collection about the driver coming up and the devices in use.
    #[inline(always)]
    pub fn notify_gpu(&self) {
        match *self {
            Effect::DriverReady => (crate::UPCALLS.driver_ready)(),
            Effect::UsesDevice(ordinal) => (crate::UPCALLS.device_used)(ordinal),
            _ => {}
        }
    }

    pub fn bytes(&self) -> u64 {
        match *self {
            Effect::Bytes(b) | Effect::DeviceAlloc(b) => b,
            Effect::Copy { bytes, .. } => bytes,
            Effect::PinnedAlloc { bytes, .. }
            | Effect::PinnedRegister { bytes, .. }
            | Effect::ManagedAlloc { bytes, .. } => bytes,
            _ => 0,
        }
    }
}

/// A copy with one host side (`host` may be null when there is none).
#[inline(always)]
pub fn copy(dir: Direction, host: *mut c_void, bytes: u64, mode: Mode) -> Effect {
    let host = if host.is_null() {
        HostKind::None
    } else {
        hostmem::classify(host as usize)
    };
    Effect::Copy {
        dir,
        host,
        bytes,
        mode,
    }
}

/// A unified-addressing copy: a side the shim saw allocated as pinned or managed memory
/// tells the direction; otherwise it stays unknown.
#[inline(always)]
pub fn copy_unified(dst: u64, src: u64, bytes: u64, mode: Mode) -> Effect {
    let (dir, host) = match (hostmem::lookup(src as usize), hostmem::lookup(dst as usize)) {
        (Some(kind), _) => (Direction::HtoD, kind),
        (None, Some(kind)) => (Direction::DtoH, kind),
        (None, None) => (Direction::Unknown, HostKind::None),
    };
    Effect::Copy {
        dir,
        host,
        bytes,
        mode,
    }
}

const MEMORYTYPE_HOST: u32 = 1;

/// The fields of `CUDA_MEMCPY2D`, `CUDA_MEMCPY3D` and `CUDA_MEMCPY3D_PEER` that say
/// where a copy goes and how big it is.
struct Sides {
    src_type: u32,
    src_host: *mut c_void,
    dst_type: u32,
    dst_host: *mut c_void,
    bytes: u64,
}

fn sided_copy(sides: Sides, mode: Mode) -> Effect {
    let (dir, host) = match (
        sides.src_type == MEMORYTYPE_HOST,
        sides.dst_type == MEMORYTYPE_HOST,
    ) {
        (true, false) => (Direction::HtoD, sides.src_host),
        (false, true) => (Direction::DtoH, sides.dst_host),
        (false, false) => (Direction::DtoD, std::ptr::null_mut()),
        (true, true) => (Direction::Unknown, std::ptr::null_mut()),
    };
    copy(dir, host, sides.bytes, mode)
}

#[repr(C)]
struct Memcpy2D {
    src_x: usize,
    src_y: usize,
    src_type: u32,
    src_host: *mut c_void,
    src_device: u64,
    src_array: *mut c_void,
    src_pitch: usize,
    dst_x: usize,
    dst_y: usize,
    dst_type: u32,
    dst_host: *mut c_void,
    dst_device: u64,
    dst_array: *mut c_void,
    dst_pitch: usize,
    width: usize,
    height: usize,
}

/// `CUDA_MEMCPY3D` and `CUDA_MEMCPY3D_PEER` share this layout (the peer form has contexts
/// where the plain one has reserved pointers).
#[repr(C)]
struct Memcpy3D {
    src_x: usize,
    src_y: usize,
    src_z: usize,
    src_lod: usize,
    src_type: u32,
    src_host: *mut c_void,
    src_device: u64,
    src_array: *mut c_void,
    src_reserved_or_ctx: *mut c_void,
    src_pitch: usize,
    src_height: usize,
    dst_x: usize,
    dst_y: usize,
    dst_z: usize,
    dst_lod: usize,
    dst_type: u32,
    dst_host: *mut c_void,
    dst_device: u64,
    dst_array: *mut c_void,
    dst_reserved_or_ctx: *mut c_void,
    dst_pitch: usize,
    dst_height: usize,
    width: usize,
    height: usize,
    depth: usize,
}

pub fn copy2d(p: *mut c_void, mode: Mode) -> Effect {
    // SAFETY: the caller passes a valid CUDA_MEMCPY2D or null, as the driver requires.
    let Some(c) = (unsafe { (p as *const Memcpy2D).as_ref() }) else {
        return Effect::None;
    };
    sided_copy(
        Sides {
            src_type: c.src_type,
            src_host: c.src_host,
            dst_type: c.dst_type,
            dst_host: c.dst_host,
            bytes: (c.width as u64).saturating_mul(c.height as u64),
        },
        mode,
    )
}

pub fn copy3d(p: *mut c_void, mode: Mode) -> Effect {
    // SAFETY: the caller passes a valid CUDA_MEMCPY3D or null, as the driver requires.
    let Some(c) = (unsafe { (p as *const Memcpy3D).as_ref() }) else {
        return Effect::None;
    };
    sided_copy(
        Sides {
            src_type: c.src_type,
            src_host: c.src_host,
            dst_type: c.dst_type,
            dst_host: c.dst_host,
            bytes: (c.width as u64)
                .saturating_mul(c.height as u64)
                .saturating_mul(c.depth.max(1) as u64),
        },
        mode,
    )
}

pub fn copy3d_peer(p: *mut c_void, mode: Mode) -> Effect {
    match copy3d(p, mode) {
        Effect::Copy {
            bytes,
            mode,
            dir: Direction::DtoD,
            ..
        } => Effect::Copy {
            dir: Direction::Peer,
            host: HostKind::None,
            bytes,
            mode,
        },
        other => other,
    }
}

/// The total of a batch call's `sizes` array.
pub fn sum_sizes(sizes: *const usize, count: usize) -> u64 {
    if sizes.is_null() {
        return 0;
    }
    // SAFETY: the driver API requires `sizes` to hold `count` entries.
    unsafe { std::slice::from_raw_parts(sizes, count) }
        .iter()
        .fold(0u64, |sum, &n| sum.saturating_add(n as u64))
}

/// A batch of unified-addressing copies: the byte total, direction unknown.
pub fn batch(sizes: *const usize, count: usize) -> Effect {
    let bytes = sum_sizes(sizes, count);
    Effect::Copy {
        dir: Direction::Unknown,
        host: HostKind::None,
        bytes,
        mode: Mode::Async,
    }
}

pub fn pinned_alloc(out: *mut *mut c_void, bytes: u64) -> Effect {
    Effect::PinnedAlloc { out, bytes }
}

pub fn pinned_register(ptr: *mut c_void, bytes: u64) -> Effect {
    Effect::PinnedRegister {
        ptr: ptr as usize,
        bytes,
    }
}

pub fn managed_alloc(out: *mut u64, bytes: u64) -> Effect {
    Effect::ManagedAlloc { out, bytes }
}

/// Before a call that captures, instantiates or launches a CUDA graph: from now on gpuspy
/// keeps CUPTI attached (`gpu::cupti::keep_attached`).
#[inline]
pub fn graph_ahead() -> Effect {
    (crate::UPCALLS.keep_attached)();
    Effect::None
}

pub fn release(ptr: usize) -> Effect {
    Effect::Release { ptr }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memcpy2d(src_type: u32, dst_type: u32, host: usize) -> Memcpy2D {
        Memcpy2D {
            src_x: 0,
            src_y: 0,
            src_type,
            src_host: host as *mut c_void,
            src_device: 0,
            src_array: std::ptr::null_mut(),
            src_pitch: 0,
            dst_x: 0,
            dst_y: 0,
            dst_type,
            dst_host: host as *mut c_void,
            dst_device: 0,
            dst_array: std::ptr::null_mut(),
            dst_pitch: 0,
            width: 64,
            height: 3,
        }
    }

    #[test]
    fn struct_layouts_match_cuda_h() {
        // sizeof in cuda.h on LP64: CUDA_MEMCPY2D 128, CUDA_MEMCPY3D 200.
        assert_eq!(std::mem::size_of::<Memcpy2D>(), 128);
        assert_eq!(std::mem::size_of::<Memcpy3D>(), 200);
    }

    #[test]
    fn copy2d_reads_direction_and_size() {
        let c = memcpy2d(2, 1, 0x1000);
        match copy2d(&c as *const _ as *mut c_void, Mode::Async) {
            Effect::Copy { dir, bytes, .. } => {
                assert_eq!(dir, Direction::DtoH);
                assert_eq!(bytes, 192);
            }
            _ => panic!("not a copy"),
        }
        assert!(matches!(
            copy2d(std::ptr::null_mut(), Mode::Async),
            Effect::None
        ));
    }

    #[test]
    fn sync_causes() {
        let blocking = copy(Direction::DtoD, std::ptr::null_mut(), 1, Mode::Blocking);
        assert_eq!(blocking.sync_cause(), Some(SyncCause::SyncCopy));
        let pageable = copy(Direction::HtoD, 0x5 as *mut c_void, 1, Mode::Async);
        assert_eq!(pageable.sync_cause(), Some(SyncCause::PageableAsyncCopy));
        let device = copy(Direction::DtoD, std::ptr::null_mut(), 1, Mode::Async);
        assert_eq!(device.sync_cause(), None);
        assert_eq!(Effect::Sync.sync_cause(), Some(SyncCause::Explicit));
        assert_eq!(release(1).sync_cause(), Some(SyncCause::Free));
    }

    #[test]
    fn launches_and_start_up_calls_never_block_the_host() {
        let blocking = [
            Effect::Sync,
            release(1),
            copy(Direction::DtoD, std::ptr::null_mut(), 1, Mode::Async),
            Effect::Bytes(1),
            pinned_alloc(std::ptr::null_mut(), 1),
            Effect::DeviceAlloc(1),
            Effect::DeviceFree,
        ];
        assert!(blocking.iter().all(Effect::may_block_host));
        let not = [Effect::None, Effect::DriverReady, Effect::UsesDevice(0)];
        assert!(!not.iter().any(Effect::may_block_host));
    }

    #[test]
    fn blocking_kinds() {
        let pageable = copy(Direction::DtoH, 0x5 as *mut c_void, 1, Mode::Blocking);
        assert_eq!(
            pageable.blocking_kind(1),
            Some(HostEventKind::Sync(SyncCause::SyncCopy))
        );
        assert_eq!(
            release(1).blocking_kind(1),
            Some(HostEventKind::Sync(SyncCause::Free))
        );
        assert_eq!(
            Effect::DeviceAlloc(4).blocking_kind(1),
            Some(HostEventKind::Alloc)
        );
        assert_eq!(
            Effect::DeviceFree.blocking_kind(1),
            Some(HostEventKind::Alloc)
        );
        assert_eq!(
            pinned_alloc(std::ptr::null_mut(), 1).blocking_kind(1),
            Some(HostEventKind::Alloc)
        );
        let device = copy(Direction::DtoD, std::ptr::null_mut(), 1, Mode::Async);
        assert_eq!(device.blocking_kind(1), None);
        assert_eq!(Effect::Bytes(8).blocking_kind(1), None);
        assert_eq!(Effect::None.blocking_kind(1), None);
        // An NCCL call is one only when it waited.
        assert_eq!(
            Effect::Collective.blocking_kind(COLLECTIVE_WAIT_NS - 1),
            None
        );
        assert_eq!(
            Effect::Collective.blocking_kind(COLLECTIVE_WAIT_NS),
            Some(HostEventKind::Collective)
        );
    }

    #[test]
    fn batch_sums_sizes() {
        let sizes = [10usize, 20, 30];
        assert_eq!(batch(sizes.as_ptr(), 3).bytes(), 60);
        assert_eq!(batch(std::ptr::null(), 3).bytes(), 0);
    }
}
