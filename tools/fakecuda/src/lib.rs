//! A fake `libcuda.so.1` for testing gpuspy without a GPU.
//!
//! It exports driver entry points under their real names, each a distinct function, and a
//! `cuGetProcAddress`/`cuGetProcAddress_v2` that picks the exported variant by version and
//! flags the way the real driver does (highest version not above the one asked for; the
//! `_ptsz`/`_ptds` form when the per-thread-default-stream flag is set). Allocations hand
//! out fake device addresses and real host memory. Nothing touches a GPU.
//!
//! Knobs, read once:
//! - `FAKECUDA_DELAY_NS="cuStreamSynchronize=2000000,cuLaunchKernel=500"`: each call of that
//!   exact symbol takes at least that long (sleeps above 50 us, spins below).
//! - `FAKECUDA_FAIL="cuMemAlloc_v2=2"`: that symbol returns the given `CUresult`;
//!   `"cuMemAlloc_v2=2:3"` fails only its first 3 calls.
//!
//! It exports every symbol of gpuspy's hook list (shim/src/hot/hooks.rs) but those it
//! deliberately lacks, to test a partial driver: `cuLaunchCooperativeKernelMultiDevice`,
//! the `cuMemcpy*BatchAsync*` family and `cuCtxSynchronize_v2`. A new hook takes two lines
//! here: the export (in one of the macro lists below) and its version in `exports()`.
//! tests/doors.rs `every_hook_resolves_through_every_door` checks both against the list.
//!
//! It exports `fakecuda_simulated`, so that every report of a run against it says SIMULATED.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

type CUresult = u32;
const CUDA_ERROR_NOT_FOUND: CUresult = 500;
const PER_THREAD: u64 = 2;
const LEGACY: u64 = 1;

struct Knob {
    delay: Duration,
    fail_code: CUresult,
    /// Fail this many calls; u64::MAX means always.
    fail_first: u64,
    calls: AtomicU64,
}

fn knobs() -> &'static HashMap<String, Knob> {
    static KNOBS: OnceLock<HashMap<String, Knob>> = OnceLock::new();
    KNOBS.get_or_init(|| {
        let mut map: HashMap<String, Knob> = HashMap::new();
        let mut entry = |name: &str| {
            map.entry(name.to_string()).or_insert(Knob {
                delay: Duration::ZERO,
                fail_code: 0,
                fail_first: 0,
                calls: AtomicU64::new(0),
            }) as *mut Knob
        };
        let pairs = |var: &str| -> Vec<(String, String)> {
            std::env::var(var)
                .unwrap_or_default()
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect()
        };
        for (name, ns) in pairs("FAKECUDA_DELAY_NS") {
            let knob = entry(&name);
            // SAFETY: the pointer comes from the map entry just made, used before any other insert.
            unsafe { (*knob).delay = Duration::from_nanos(ns.parse().unwrap_or(0)) };
        }
        for (name, spec) in pairs("FAKECUDA_FAIL") {
            let (code, first) = match spec.split_once(':') {
                Some((c, n)) => (c.parse().unwrap_or(1), n.parse().unwrap_or(u64::MAX)),
                None => (spec.parse().unwrap_or(1), u64::MAX),
            };
            let knob = entry(&name);
            // SAFETY: as above.
            unsafe {
                (*knob).fail_code = code;
                (*knob).fail_first = first;
            }
        }
        map
    })
}

/// The marker that tells gpuspy's shim this libcuda is a fake: its dumps say `simulated`,
/// and every view of them SIMULATED. No real driver exports it.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static fakecuda_simulated: u8 = 1;

/// Calls inside their delay now, but those that wait for the GPU (a sync): what a CUPTI
/// switch must not overlap (`fakecuda_calls_in_flight`, read by the fake libcupti).
static CALLS_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

#[no_mangle]
pub extern "C" fn fakecuda_calls_in_flight() -> u64 {
    CALLS_IN_FLIGHT.load(SeqCst)
}

/// What every fake entry point does: honour the knobs for its exact name.
fn enter(name: &str) -> CUresult {
    let Some(knob) = knobs().get(name) else {
        return 0;
    };
    let waits = name.contains("Synchronize");
    if !waits {
        CALLS_IN_FLIGHT.fetch_add(1, SeqCst);
    }
    if !knob.delay.is_zero() {
        if knob.delay > Duration::from_micros(50) {
            std::thread::sleep(knob.delay);
        } else {
            let start = Instant::now();
            while start.elapsed() < knob.delay {
                std::hint::spin_loop();
            }
        }
    }
    if !waits {
        CALLS_IN_FLIGHT.fetch_sub(1, SeqCst);
    }
    let n = knob.calls.fetch_add(1, Relaxed);
    if knob.fail_code != 0 && n < knob.fail_first {
        knob.fail_code
    } else {
        0
    }
}

static NEXT_DEVICE_ADDRESS: AtomicU64 = AtomicU64::new(0x7f00_0000_0000);

/// Entry points that only honour the knobs. Callers pass their real arguments; with the
/// C calling convention an entry point that reads none of them is sound.
macro_rules! plain {
    ($($name:ident),* $(,)?) => {
        $(#[no_mangle] pub extern "C" fn $name() -> CUresult { enter(stringify!($name)) })*
    };
}

/// Entry points whose first argument is an out-pointer to a handle.
macro_rules! creates_handle {
    ($($name:ident),* $(,)?) => {
        $(#[no_mangle] pub unsafe extern "C" fn $name(out: *mut usize) -> CUresult {
            let r = enter(stringify!($name));
            if r == 0 && !out.is_null() { *out = 0x1000; }
            r
        })*
    };
}

/// Device allocations: `(out *CUdeviceptr, bytes)`.
macro_rules! allocates_device {
    ($($name:ident),* $(,)?) => {
        $(#[no_mangle] pub unsafe extern "C" fn $name(out: *mut u64, bytes: usize) -> CUresult {
            let r = enter(stringify!($name));
            if r == 0 && !out.is_null() {
                *out = NEXT_DEVICE_ADDRESS.fetch_add((bytes as u64 + 0xfff) & !0xfff, Relaxed);
            }
            r
        })*
    };
}

/// Host allocations that hand out real memory: `(out **void, bytes)`.
macro_rules! allocates_host {
    ($($name:ident),* $(,)?) => {
        $(#[no_mangle] pub unsafe extern "C" fn $name(out: *mut *mut c_void, bytes: usize) -> CUresult {
            let r = enter(stringify!($name));
            if r == 0 && !out.is_null() { *out = libc::malloc(bytes.max(1)); }
            r
        })*
    };
}

plain!(
    cuInit,
    cuCtxDestroy_v2,
    cuDevicePrimaryCtxRelease_v2,
    cuCtxSynchronize,
    cuModuleLoad,
    cuModuleUnload,
    cuLibraryUnload,
    cuLinkAddData_v2,
    cuLinkAddFile_v2,
    cuLinkComplete,
    cuLinkDestroy,
    cuLaunchKernelEx,
    cuLaunchKernelEx_ptsz,
    cuLaunchCooperativeKernel,
    cuLaunchCooperativeKernel_ptsz,
    cuLaunchHostFunc,
    cuLaunchHostFunc_ptsz,
    cuLaunch,
    cuLaunchGrid,
    cuLaunchGridAsync,
    cuGraphLaunch,
    cuGraphLaunch_ptsz,
    cuGraphUpload,
    cuGraphUpload_ptsz,
    cuStreamBeginCapture,
    cuStreamBeginCapture_ptsz,
    cuStreamBeginCapture_v2,
    cuStreamBeginCapture_v2_ptsz,
    cuStreamEndCapture,
    cuStreamEndCapture_ptsz,
    cuStreamSynchronize,
    cuStreamSynchronize_ptsz,
    cuEventSynchronize,
    cuStreamQuery,
    cuStreamQuery_ptsz,
    cuEventQuery,
    cuStreamWaitEvent,
    cuStreamWaitEvent_ptsz,
    cuEventRecord,
    cuEventRecord_ptsz,
    cuEventRecordWithFlags,
    cuEventRecordWithFlags_ptsz,
    cuMemcpyHtoD,
    cuMemcpyHtoD_v2,
    cuMemcpyHtoD_v2_ptds,
    cuMemcpyDtoH,
    cuMemcpyDtoH_v2,
    cuMemcpyDtoH_v2_ptds,
    cuMemcpyDtoD,
    cuMemcpyDtoD_v2,
    cuMemcpyDtoD_v2_ptds,
    cuMemcpyHtoDAsync,
    cuMemcpyHtoDAsync_v2,
    cuMemcpyHtoDAsync_v2_ptsz,
    cuMemcpyDtoHAsync,
    cuMemcpyDtoHAsync_v2,
    cuMemcpyDtoHAsync_v2_ptsz,
    cuMemcpyDtoDAsync,
    cuMemcpyDtoDAsync_v2,
    cuMemcpyDtoDAsync_v2_ptsz,
    cuMemcpy,
    cuMemcpy_ptds,
    cuMemcpyAsync,
    cuMemcpyAsync_ptsz,
    cuMemcpyPeer,
    cuMemcpyPeer_ptds,
    cuMemcpyPeerAsync,
    cuMemcpyPeerAsync_ptsz,
    cuMemcpy2D_v2,
    cuMemcpy2D_v2_ptds,
    cuMemcpy2DAsync_v2,
    cuMemcpy2DAsync_v2_ptsz,
    cuMemcpy3D_v2,
    cuMemcpy3D_v2_ptds,
    cuMemcpy3DAsync_v2,
    cuMemcpy3DAsync_v2_ptsz,
    cuMemsetD8,
    cuMemsetD8_v2,
    cuMemsetD8_v2_ptds,
    cuMemsetD32,
    cuMemsetD32_v2,
    cuMemsetD32_v2_ptds,
    cuMemsetD8Async,
    cuMemsetD8Async_ptsz,
    cuMemsetD32Async,
    cuMemsetD32Async_ptsz,
    cuMemFree,
    cuMemFree_v2,
    cuMemFreeAsync,
    cuMemFreeAsync_ptsz,
    cuMemHostUnregister,
    cuMemHostRegister,
    cuMemHostRegister_v2,
    cuMemRelease,
    cuMemMap,
    cuMemUnmap,
    cuMemSetAccess,
    cuMemAddressFree,
    cuMemPrefetchAsync,
    cuMemPrefetchAsync_ptsz,
    cuMemPrefetchAsync_v2,
    cuMemPrefetchAsync_v2_ptsz,
    cuMemAdvise,
    cuMemAdvise_v2,
    cuStreamBeginCaptureToGraph,
    cuStreamBeginCaptureToGraph_ptsz,
    cuMemcpyHtoA_v2,
    cuMemcpyHtoA_v2_ptds,
    cuMemcpyAtoH_v2,
    cuMemcpyAtoH_v2_ptds,
    cuMemcpyHtoAAsync_v2,
    cuMemcpyHtoAAsync_v2_ptsz,
    cuMemcpyAtoHAsync_v2,
    cuMemcpyAtoHAsync_v2_ptsz,
    cuMemcpyDtoA_v2,
    cuMemcpyDtoA_v2_ptds,
    cuMemcpyAtoD_v2,
    cuMemcpyAtoD_v2_ptds,
    cuMemcpyAtoA_v2,
    cuMemcpyAtoA_v2_ptds,
    cuMemcpyWithAttributesAsync,
    cuMemcpyWithAttributesAsync_ptsz,
    cuMemcpy2DUnaligned_v2,
    cuMemcpy2DUnaligned_v2_ptds,
    cuMemcpy3DPeer,
    cuMemcpy3DPeer_ptds,
    cuMemcpy3DPeerAsync,
    cuMemcpy3DPeerAsync_ptsz,
    cuMemsetD16_v2,
    cuMemsetD16_v2_ptds,
    cuMemsetD16Async,
    cuMemsetD16Async_ptsz,
    cuMemsetD2D8_v2,
    cuMemsetD2D8_v2_ptds,
    cuMemsetD2D16_v2,
    cuMemsetD2D16_v2_ptds,
    cuMemsetD2D32_v2,
    cuMemsetD2D32_v2_ptds,
    cuMemsetD2D8Async,
    cuMemsetD2D8Async_ptsz,
    cuMemsetD2D16Async,
    cuMemsetD2D16Async_ptsz,
    cuMemsetD2D32Async,
    cuMemsetD2D32Async_ptsz,
    cuMemPoolTrimTo,
    cuMemAllocPitch_v2,
    cuMemPrefetchBatchAsync,
    cuMemPrefetchBatchAsync_ptsz,
    // Not wrapped by gpuspy: passed through and listed by name.
    cuDeviceGetCount,
    cuCtxGetCurrent,
    cuCtxSetCurrent,
    cuStreamDestroy_v2,
    cuEventDestroy_v2,
);

creates_handle!(
    cuCtxCreate,
    cuCtxCreate_v2,
    cuCtxCreate_v3,
    cuCtxCreate_v4,
    cuDevicePrimaryCtxRetain,
    cuModuleLoadData,
    cuModuleLoadDataEx,
    cuModuleLoadFatBinary,
    cuModuleGetFunction,
    cuLibraryLoadData,
    cuLibraryLoadFromFile,
    cuLinkCreate_v2,
    cuStreamCreate,
    cuEventCreate,
    cuGraphInstantiateWithFlags,
    cuGraphInstantiate_v2,
    cuGraphInstantiateWithParams,
    cuGraphInstantiateWithParams_ptsz,
    cuMemCreate,
    cuMemAddressReserve,
);

allocates_device!(
    cuMemAlloc_v2,
    cuMemAllocAsync,
    cuMemAllocAsync_ptsz,
    cuMemAllocFromPoolAsync,
    cuMemAllocFromPoolAsync_ptsz,
);

allocates_host!(cuMemAllocHost_v2, cuMemHostAlloc);

/// The arguments of the last kernel launch, for tests that check the shim forwards them.
static LAST_LAUNCH: [AtomicU64; 11] = [const { AtomicU64::new(0) }; 11];

macro_rules! launches {
    ($($name:ident),*) => {
        $(#[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn $name(
            f: usize, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, smem: u32,
            stream: usize, params: usize, extra: usize,
        ) -> CUresult {
            let args = [f as u64, gx.into(), gy.into(), gz.into(), bx.into(), by.into(), bz.into(),
                        smem.into(), stream as u64, params as u64, extra as u64];
            for (slot, value) in LAST_LAUNCH.iter().zip(args) {
                slot.store(value, Relaxed);
            }
            enter(stringify!($name))
        })*
    };
}
launches!(cuLaunchKernel, cuLaunchKernel_ptsz);

/// Test hook (not a driver API): copies the last launch's 11 arguments to `out`.
#[no_mangle]
pub unsafe extern "C" fn fakecuda_last_launch(out: *mut u64) {
    for (i, slot) in LAST_LAUNCH.iter().enumerate() {
        *out.add(i) = slot.load(Relaxed);
    }
}

/// The legacy export takes a 32-bit device pointer and size.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc(out: *mut u32, _bytes: u32) -> CUresult {
    let r = enter("cuMemAlloc");
    if r == 0 && !out.is_null() {
        *out = 0x1000_0000;
    }
    r
}

/// The legacy export takes a 32-bit size.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost(out: *mut *mut c_void, bytes: u32) -> CUresult {
    let r = enter("cuMemAllocHost");
    if r == 0 && !out.is_null() {
        *out = libc::malloc((bytes as usize).max(1));
    }
    r
}

/// Managed memory is host memory here, so programs can touch it.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocManaged(out: *mut u64, bytes: usize, _flags: u32) -> CUresult {
    let r = enter("cuMemAllocManaged");
    if r == 0 && !out.is_null() {
        *out = libc::malloc(bytes.max(1)) as u64;
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    let r = enter("cuMemFreeHost");
    if r == 0 {
        libc::free(p);
    }
    r
}

/// One device, ordinal 0, with an H200's SM count, on PCI bus id 0000:19:00.0.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CUresult {
    if ordinal != 0 {
        return 101; // CUDA_ERROR_INVALID_DEVICE
    }
    if !device.is_null() {
        *device = 0;
    }
    enter("cuDeviceGet")
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    value: *mut c_int,
    attribute: c_int,
    _device: c_int,
) -> CUresult {
    const MULTIPROCESSOR_COUNT: c_int = 16;
    if !value.is_null() {
        *value = if attribute == MULTIPROCESSOR_COUNT {
            132
        } else {
            1
        };
    }
    enter("cuDeviceGetAttribute")
}

/// Bytes 0 to 15: fakenvml's MIG device has this UUID.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], _device: c_int) -> CUresult {
    if !uuid.is_null() {
        *uuid = std::array::from_fn(|i| i as u8);
    }
    enter("cuDeviceGetUuid_v2")
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(
    bus_id: *mut c_char,
    len: c_int,
    _device: c_int,
) -> CUresult {
    let id = b"0000:19:00.0\0";
    if !bus_id.is_null() && len as usize >= id.len() {
        std::ptr::copy_nonoverlapping(id.as_ptr().cast(), bus_id, id.len());
    }
    enter("cuDeviceGetPCIBusId")
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    if !version.is_null() {
        *version = 13000;
    }
    enter("cuDriverGetVersion")
}

/// Every exported entry point and the CUDA version that introduced its ABI. `_ptsz`/`_ptds`
/// forms carry the version of the form they are the per-thread variant of.
fn exports() -> &'static [(&'static str, i32, *mut c_void)] {
    struct Table(Vec<(&'static str, i32, *mut c_void)>);
    // SAFETY: function addresses are immutable and valid from any thread.
    unsafe impl Sync for Table {}
    unsafe impl Send for Table {}
    static TABLE: OnceLock<Table> = OnceLock::new();
    macro_rules! table {
        ($($name:ident @ $version:expr),* $(,)?) => {
            vec![$((stringify!($name), $version, $name as *mut c_void)),*]
        };
    }
    &TABLE
        .get_or_init(|| {
            Table(table![
                cuInit @ 2000, cuDriverGetVersion @ 2020,
                cuGetProcAddress @ 11030, cuGetProcAddress_v2 @ 12000,
                cuCtxCreate @ 2000, cuCtxCreate_v2 @ 3020, cuCtxCreate_v3 @ 11040, cuCtxCreate_v4 @ 12050,
                cuCtxDestroy_v2 @ 4000, cuDevicePrimaryCtxRetain @ 7000, cuDevicePrimaryCtxRelease_v2 @ 11000,
                cuCtxSynchronize @ 2000,
                cuModuleLoad @ 2000, cuModuleLoadData @ 2000, cuModuleLoadDataEx @ 2010,
                cuModuleLoadFatBinary @ 2000, cuModuleUnload @ 2000, cuModuleGetFunction @ 2000,
                cuLibraryLoadData @ 12000, cuLibraryLoadFromFile @ 12000, cuLibraryUnload @ 12000,
                cuLinkCreate_v2 @ 6050, cuLinkAddData_v2 @ 6050, cuLinkAddFile_v2 @ 6050,
                cuLinkComplete @ 5050, cuLinkDestroy @ 5050,
                cuLaunchKernel @ 4000, cuLaunchKernel_ptsz @ 4000,
                cuLaunchKernelEx @ 11060, cuLaunchKernelEx_ptsz @ 11060,
                cuLaunchCooperativeKernel @ 9000, cuLaunchCooperativeKernel_ptsz @ 9000,
                cuLaunchHostFunc @ 10000, cuLaunchHostFunc_ptsz @ 10000,
                cuLaunch @ 2000, cuLaunchGrid @ 2000, cuLaunchGridAsync @ 2000,
                cuGraphLaunch @ 10000, cuGraphLaunch_ptsz @ 10000,
                cuGraphUpload @ 11010, cuGraphUpload_ptsz @ 11010,
                cuGraphInstantiateWithFlags @ 11040, cuGraphInstantiate_v2 @ 11000,
                cuGraphInstantiateWithParams @ 12000, cuGraphInstantiateWithParams_ptsz @ 12000,
                cuStreamBeginCapture @ 10000, cuStreamBeginCapture_ptsz @ 10000,
                cuStreamBeginCapture_v2 @ 10010, cuStreamBeginCapture_v2_ptsz @ 10010,
                cuStreamEndCapture @ 10000, cuStreamEndCapture_ptsz @ 10000,
                cuStreamSynchronize @ 2000, cuStreamSynchronize_ptsz @ 2000,
                cuEventSynchronize @ 2000, cuStreamQuery @ 2000, cuStreamQuery_ptsz @ 2000,
                cuEventQuery @ 2000, cuStreamWaitEvent @ 3020, cuStreamWaitEvent_ptsz @ 3020,
                cuEventRecord @ 2000, cuEventRecord_ptsz @ 2000,
                cuEventRecordWithFlags @ 11010, cuEventRecordWithFlags_ptsz @ 11010,
                cuMemcpyHtoD @ 2000, cuMemcpyHtoD_v2 @ 3020, cuMemcpyHtoD_v2_ptds @ 3020,
                cuMemcpyDtoH @ 2000, cuMemcpyDtoH_v2 @ 3020, cuMemcpyDtoH_v2_ptds @ 3020,
                cuMemcpyDtoD @ 2000, cuMemcpyDtoD_v2 @ 3020, cuMemcpyDtoD_v2_ptds @ 3020,
                cuMemcpyHtoDAsync @ 2000, cuMemcpyHtoDAsync_v2 @ 3020, cuMemcpyHtoDAsync_v2_ptsz @ 3020,
                cuMemcpyDtoHAsync @ 2000, cuMemcpyDtoHAsync_v2 @ 3020, cuMemcpyDtoHAsync_v2_ptsz @ 3020,
                cuMemcpyDtoDAsync @ 2000, cuMemcpyDtoDAsync_v2 @ 3020, cuMemcpyDtoDAsync_v2_ptsz @ 3020,
                cuMemcpy @ 4000, cuMemcpy_ptds @ 4000, cuMemcpyAsync @ 4000, cuMemcpyAsync_ptsz @ 4000,
                cuMemcpyPeer @ 4000, cuMemcpyPeer_ptds @ 4000,
                cuMemcpyPeerAsync @ 4000, cuMemcpyPeerAsync_ptsz @ 4000,
                cuMemcpy2D_v2 @ 3020, cuMemcpy2D_v2_ptds @ 3020,
                cuMemcpy2DAsync_v2 @ 3020, cuMemcpy2DAsync_v2_ptsz @ 3020,
                cuMemcpy3D_v2 @ 3020, cuMemcpy3D_v2_ptds @ 3020,
                cuMemcpy3DAsync_v2 @ 3020, cuMemcpy3DAsync_v2_ptsz @ 3020,
                cuMemsetD8 @ 2000, cuMemsetD8_v2 @ 3020, cuMemsetD8_v2_ptds @ 3020,
                cuMemsetD32 @ 2000, cuMemsetD32_v2 @ 3020, cuMemsetD32_v2_ptds @ 3020,
                cuMemsetD8Async @ 3020, cuMemsetD8Async_ptsz @ 3020,
                cuMemsetD32Async @ 3020, cuMemsetD32Async_ptsz @ 3020,
                cuMemAlloc @ 2000, cuMemAlloc_v2 @ 3020,
                cuMemAllocAsync @ 11020, cuMemAllocAsync_ptsz @ 11020,
                cuMemAllocFromPoolAsync @ 11020, cuMemAllocFromPoolAsync_ptsz @ 11020,
                cuMemFree @ 2000, cuMemFree_v2 @ 3020, cuMemFreeAsync @ 11020, cuMemFreeAsync_ptsz @ 11020,
                cuMemAllocHost_v2 @ 3020, cuMemHostAlloc @ 2020, cuMemFreeHost @ 2000,
                cuMemHostRegister @ 4000, cuMemHostRegister_v2 @ 6050, cuMemHostUnregister @ 4000,
                cuMemAllocManaged @ 6000,
                cuMemCreate @ 10020, cuMemRelease @ 10020, cuMemMap @ 10020, cuMemUnmap @ 10020,
                cuMemSetAccess @ 10020, cuMemAddressReserve @ 10020, cuMemAddressFree @ 10020,
                cuMemPrefetchAsync @ 8000, cuMemPrefetchAsync_ptsz @ 8000,
                cuMemPrefetchAsync_v2 @ 12020, cuMemPrefetchAsync_v2_ptsz @ 12020,
                cuMemAdvise @ 8000, cuMemAdvise_v2 @ 12020,
                cuDeviceGet @ 2000, cuDeviceGetCount @ 2000, cuDeviceGetAttribute @ 2000,
                cuStreamBeginCaptureToGraph @ 12030, cuStreamBeginCaptureToGraph_ptsz @ 12030,
                cuMemcpyHtoA_v2 @ 3020, cuMemcpyHtoA_v2_ptds @ 3020,
                cuMemcpyAtoH_v2 @ 3020, cuMemcpyAtoH_v2_ptds @ 3020,
                cuMemcpyHtoAAsync_v2 @ 3020, cuMemcpyHtoAAsync_v2_ptsz @ 3020,
                cuMemcpyAtoHAsync_v2 @ 3020, cuMemcpyAtoHAsync_v2_ptsz @ 3020,
                cuMemcpyDtoA_v2 @ 3020, cuMemcpyDtoA_v2_ptds @ 3020,
                cuMemcpyAtoD_v2 @ 3020, cuMemcpyAtoD_v2_ptds @ 3020,
                cuMemcpyAtoA_v2 @ 3020, cuMemcpyAtoA_v2_ptds @ 3020,
                cuMemcpyWithAttributesAsync @ 12080, cuMemcpyWithAttributesAsync_ptsz @ 12080,
                cuMemcpy2DUnaligned_v2 @ 3020, cuMemcpy2DUnaligned_v2_ptds @ 3020,
                cuMemcpy3DPeer @ 4000, cuMemcpy3DPeer_ptds @ 4000,
                cuMemcpy3DPeerAsync @ 4000, cuMemcpy3DPeerAsync_ptsz @ 4000,
                cuMemsetD16_v2 @ 3020, cuMemsetD16_v2_ptds @ 3020,
                cuMemsetD16Async @ 3020, cuMemsetD16Async_ptsz @ 3020,
                cuMemsetD2D8_v2 @ 3020, cuMemsetD2D8_v2_ptds @ 3020,
                cuMemsetD2D16_v2 @ 3020, cuMemsetD2D16_v2_ptds @ 3020,
                cuMemsetD2D32_v2 @ 3020, cuMemsetD2D32_v2_ptds @ 3020,
                cuMemsetD2D8Async @ 3020, cuMemsetD2D8Async_ptsz @ 3020,
                cuMemsetD2D16Async @ 3020, cuMemsetD2D16Async_ptsz @ 3020,
                cuMemsetD2D32Async @ 3020, cuMemsetD2D32Async_ptsz @ 3020,
                cuMemAllocPitch_v2 @ 3020, cuMemAllocHost @ 2000, cuMemPoolTrimTo @ 11020,
                cuMemPrefetchBatchAsync @ 13000, cuMemPrefetchBatchAsync_ptsz @ 13000,
                cuCtxGetCurrent @ 4000, cuCtxSetCurrent @ 4000,
                cuStreamCreate @ 2000, cuStreamDestroy_v2 @ 4000,
                cuEventCreate @ 2000, cuEventDestroy_v2 @ 4000,
            ])
        })
        .0
}

fn strip_stream_suffix(name: &str) -> (&str, bool) {
    match name
        .strip_suffix("_ptsz")
        .or_else(|| name.strip_suffix("_ptds"))
    {
        Some(base) => (base, true),
        None => (name, false),
    }
}

fn api_name(export: &str) -> &str {
    let (name, _) = strip_stream_suffix(export);
    match name.rsplit_once("_v") {
        Some((head, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => name,
    }
}

/// The driver's variant choice for `(symbol, version, flags)`.
fn resolve(symbol: &str, version: i32, flags: u64) -> Result<*mut c_void, c_int> {
    let per_thread = flags & PER_THREAD != 0 && flags & LEGACY == 0;
    let candidates: Vec<_> = exports()
        .iter()
        .filter(|(name, _, _)| api_name(name) == symbol && !strip_stream_suffix(name).1)
        .collect();
    if candidates.is_empty() {
        return Err(1); // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
    }
    let (name, _, address) = candidates
        .iter()
        .filter(|(_, v, _)| *v <= version)
        .max_by_key(|(_, v, _)| *v)
        .ok_or(2)?; // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
    if per_thread {
        if let Some((_, _, pt)) = exports()
            .iter()
            .find(|(n, _, _)| strip_stream_suffix(n) == (*name, true))
        {
            return Ok(*pt);
        }
    }
    Ok(*address)
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    let r = enter("cuGetProcAddress_v2");
    if r != 0 {
        return r;
    }
    if symbol.is_null() || pfn.is_null() {
        return 1;
    }
    let name = CStr::from_ptr(symbol).to_str().unwrap_or("");
    let (result, code) = match resolve(name, version, flags) {
        Ok(p) => {
            *pfn = p;
            (0, 0)
        }
        Err(code) => {
            *pfn = std::ptr::null_mut();
            (CUDA_ERROR_NOT_FOUND, code)
        }
    };
    if !status.is_null() {
        *status = code;
    }
    result
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    let r = enter("cuGetProcAddress");
    if r != 0 {
        return r;
    }
    cuGetProcAddress_v2(symbol, pfn, version, flags, std::ptr::null_mut())
}
