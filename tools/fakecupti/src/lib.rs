//! A fake `libcupti.so.13` for testing gpuspy without a GPU: the V1 activity API calls
//! gpuspy makes, with records laid out at the offsets of the CUDA 13 structs, plus a
//! `fakecupti_*` producer API a test program calls to emit records. One buffer at a time
//! is filled, from the calling thread; a flush hands it to the completion callback
//! registered at that moment, as CUPTI does. Timestamps count from boot
//! (`CLOCK_MONOTONIC`), as CUPTI 13's do.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering::*};
use std::sync::Mutex;

type Request = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type Complete = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);

const MAX_LIMIT_REACHED: u32 = 12;
const NOT_COMPATIBLE: u32 = 27;
const KIND_MEMCPY: u32 = 1;
const KIND_CONCURRENT_KERNEL: u32 = 10;
const KIND_UNIFIED_MEMORY_COUNTER: u32 = 25;

static REQUEST: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static COMPLETE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static ENABLED: [AtomicBool; 64] = [const { AtomicBool::new(false) }; 64];
static UM_CONFIGURED: AtomicBool = AtomicBool::new(false);
/// `cuptiFinalize` detached CUPTI, and no callbacks were registered since.
static FINALIZED: AtomicBool = AtomicBool::new(false);
/// CUPTI calls made while finalized, other than the registration that attaches it again:
/// the real CUPTI attaches itself again on any call (lazy initialisation).
static STRAY_CALLS: AtomicU64 = AtomicU64::new(0);

/// With `FAKECUPTI_KERNELS_STOP` set, kernel records stop at the first switch of the kernel
/// kind off, for good until `cuptiFinalize`, as on the H200 in about 1 in 10 runs whose
/// CUPTI stayed attached while its kinds were switched; copy records go on.
static KERNELS_STOPPED: AtomicBool = AtomicBool::new(false);
static KERNELS_STOPPED_ONCE: AtomicBool = AtomicBool::new(false);

fn called_while_finalized() {
    if FINALIZED.load(Acquire) {
        STRAY_CALLS.fetch_add(1, Relaxed);
    }
}

struct Buffer {
    data: *mut u8,
    size: usize,
    used: usize,
}

// SAFETY: the buffer is owned by whoever requested it; the fake only writes under the lock.
unsafe impl Send for Buffer {}

static CURRENT: Mutex<Option<Buffer>> = Mutex::new(None);

/// Record sizes by kind, so `cuptiActivityGetNextRecord` can step over them.
fn record_size(kind: u32) -> usize {
    match kind {
        KIND_CONCURRENT_KERNEL | KIND_UNIFIED_MEMORY_COUNTER => 112,
        _ => 48,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetVersion(v: *mut u32) -> u32 {
    called_while_finalized();
    *v = 130001;
    0
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    request: Option<Request>,
    complete: Option<Complete>,
) -> u32 {
    attach();
    REQUEST.store(
        request.map_or(std::ptr::null_mut(), |f| f as *mut c_void),
        Release,
    );
    COMPLETE.store(
        complete.map_or(std::ptr::null_mut(), |f| f as *mut c_void),
        Release,
    );
    0
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityConfigureUnifiedMemoryCounter(
    _config: *mut c_void,
    count: u32,
) -> u32 {
    called_while_finalized();
    UM_CONFIGURED.store(count > 0, Release);
    0
}

/// Enabling a kind takes effect at once, but the call returns only after
/// `FAKECUPTI_ENABLE_US` (0 unless set), as CUPTI's takes 10-60 µs on the H200 (and a
/// unified-memory one 14-22 ms): launches made meanwhile are recorded.
fn enable_takes() -> std::time::Duration {
    let us = std::env::var("FAKECUPTI_ENABLE_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    std::time::Duration::from_micros(us)
}

/// Switches of a traced kind made while the fake libcuda had a call in flight (the real
/// CUPTI crashed PyTorch's backward pass when its kinds were switched so).
static SWITCHES_IN_CALLS: AtomicU64 = AtomicU64::new(0);

fn note_switch(kind: u32) {
    type InFlight = unsafe extern "C" fn() -> u64;
    if kind == KIND_UNIFIED_MEMORY_COUNTER {
        return;
    }
    // SAFETY: looked up by name in the process; the fake libcuda's function of that name.
    let in_flight = unsafe { dlsym(std::ptr::null_mut(), c"fakecuda_calls_in_flight".as_ptr()) };
    // SAFETY: that function's signature.
    if !in_flight.is_null()
        && unsafe { std::mem::transmute::<*mut c_void, InFlight>(in_flight)() } > 0
    {
        SWITCHES_IN_CALLS.fetch_add(1, Relaxed);
    }
}

#[no_mangle]
pub extern "C" fn fakecupti_switches_in_calls() -> u64 {
    SWITCHES_IN_CALLS.load(Acquire)
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityEnable(kind: u32) -> u32 {
    called_while_finalized();
    note_switch(kind);
    if kind == KIND_UNIFIED_MEMORY_COUNTER && !UM_CONFIGURED.load(Acquire) {
        return NOT_COMPATIBLE;
    }
    match ENABLED.get(kind as usize) {
        Some(flag) => {
            flag.store(true, Release);
            std::thread::sleep(enable_takes());
            0
        }
        None => NOT_COMPATIBLE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityDisable(kind: u32) -> u32 {
    called_while_finalized();
    note_switch(kind);
    if kind == KIND_CONCURRENT_KERNEL
        && std::env::var_os("FAKECUPTI_KERNELS_STOP").is_some()
        && !KERNELS_STOPPED_ONCE.swap(true, AcqRel)
    {
        KERNELS_STOPPED.store(true, Release);
    }
    if let Some(flag) = ENABLED.get(kind as usize) {
        flag.store(false, Release);
    }
    0
}

/// Hands the buffer being filled, if any, to the completion callback.
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityFlushAll(_flag: u32) -> u32 {
    called_while_finalized();
    let taken = CURRENT.lock().unwrap().take();
    if let Some(b) = taken {
        deliver(b);
    }
    0
}

unsafe fn deliver(b: Buffer) {
    let complete = COMPLETE.load(Acquire);
    if !complete.is_null() {
        std::mem::transmute::<*mut c_void, Complete>(complete)(
            std::ptr::null_mut(),
            0,
            b.data,
            b.size,
            b.used,
        );
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNextRecord(
    buffer: *mut u8,
    valid: usize,
    record: *mut *mut u8,
) -> u32 {
    called_while_finalized();
    let next = if (*record).is_null() {
        0
    } else {
        let at = (*record).offset_from(buffer) as usize;
        at + record_size((*record).cast::<u32>().read_unaligned())
    };
    if next >= valid {
        return MAX_LIMIT_REACHED;
    }
    *record = buffer.add(next);
    0
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNumDroppedRecords(
    _context: *mut c_void,
    _stream: u32,
    dropped: *mut usize,
) -> u32 {
    called_while_finalized();
    *dropped = 0;
    0
}

fn monotonic_ns() -> u64 {
    let mut t = libc_timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes the struct.
    unsafe { clock_gettime(1, &mut t) };
    t.sec as u64 * 1_000_000_000 + t.nsec as u64
}

#[repr(C)]
struct libc_timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, t: *mut libc_timespec) -> i32;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetTimestamp(t: *mut u64) -> u32 {
    called_while_finalized();
    *t = monotonic_ns();
    0
}

/// Detaches as CUPTI does: callbacks, kinds and the unified-memory configuration are gone,
/// and so is a buffer being filled (its records are lost unless flushed before).
#[no_mangle]
pub unsafe extern "C" fn cuptiFinalize() -> u32 {
    called_while_finalized();
    FINALIZED.store(true, Release);
    KERNELS_STOPPED.store(false, Release);
    REQUEST.store(std::ptr::null_mut(), Release);
    COMPLETE.store(std::ptr::null_mut(), Release);
    for flag in &ENABLED {
        flag.store(false, Release);
    }
    UM_CONFIGURED.store(false, Release);
    CURRENT.lock().unwrap().take();
    0
}

/// A subscriber to the callback API: attaches CUPTI again, as registering does.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    _subscriber: *mut c_void,
    _callback: *mut c_void,
    _userdata: *mut c_void,
) -> u32 {
    attach();
    0
}

/// Whether the last registration or subscription found CUPTI finalized.
static FOUND_FINALIZED: AtomicBool = AtomicBool::new(false);

fn attach() {
    FOUND_FINALIZED.store(FINALIZED.swap(false, AcqRel), Release);
}

#[no_mangle]
pub extern "C" fn fakecupti_found_finalized() -> i32 {
    FOUND_FINALIZED.load(Acquire) as i32
}

/// CUPTI calls made while it was finalized, other than registering callbacks.
#[no_mangle]
pub extern "C" fn fakecupti_stray_calls() -> u64 {
    STRAY_CALLS.load(Acquire)
}

/// Whether activity `kind` is on.
#[no_mangle]
pub extern "C" fn fakecupti_enabled(kind: u32) -> i32 {
    ENABLED.get(kind as usize).is_some_and(|f| f.load(Acquire)) as i32
}

/// CUPTI's clock now.
#[no_mangle]
pub extern "C" fn fakecupti_now() -> u64 {
    monotonic_ns()
}

/// Appends one record of `kind`, built by `fill`, if the kind is on and a buffer is had.
unsafe fn emit(kind: u32, fill: impl FnOnce(*mut u8)) {
    if fakecupti_enabled(kind) == 0
        || kind == KIND_CONCURRENT_KERNEL && KERNELS_STOPPED.load(Acquire)
    {
        return;
    }
    let size = record_size(kind);
    let mut current = CURRENT.lock().unwrap();
    if current.is_none() {
        let request = REQUEST.load(Acquire);
        if request.is_null() {
            return;
        }
        let (mut data, mut len, mut max) = (std::ptr::null_mut(), 0usize, 0usize);
        std::mem::transmute::<*mut c_void, Request>(request)(&mut data, &mut len, &mut max);
        if data.is_null() || len < size {
            return;
        }
        *current = Some(Buffer {
            data,
            size: len,
            used: 0,
        });
    }
    let Some(b) = current.as_mut() else { return };
    let record = b.data.add(b.used);
    std::ptr::write_bytes(record, 0, size);
    record.cast::<u32>().write_unaligned(kind);
    fill(record);
    b.used += size;
    if b.used + 112 > b.size {
        let full = current.take();
        drop(current);
        if let Some(full) = full {
            deliver(full);
        }
    }
}

unsafe fn put<T>(record: *mut u8, offset: usize, value: T) {
    record.add(offset).cast::<T>().write_unaligned(value);
}

/// A kernel record (`Kernel10` offsets).
#[no_mangle]
pub unsafe extern "C" fn fakecupti_kernel(
    device: u32,
    start: u64,
    end: u64,
    blocks: i32,
    name: *const c_char,
) {
    emit(KIND_CONCURRENT_KERNEL, |r| {
        put(r, 16, start);
        put(r, 24, end);
        put(r, 40, device);
        put(r, 52, blocks);
        put(r, 56, 1i32);
        put(r, 60, 1i32);
        put(r, 104, name);
    });
}

/// A copy record (`Memcpy6` offsets).
#[no_mangle]
pub unsafe extern "C" fn fakecupti_memcpy(
    kind: u8,
    src: u8,
    dst: u8,
    bytes: u64,
    start: u64,
    end: u64,
    device: u32,
) {
    emit(KIND_MEMCPY, |r| {
        put(r, 4, kind);
        put(r, 5, src);
        put(r, 6, dst);
        put(r, 8, bytes);
        put(r, 16, start);
        put(r, 24, end);
        put(r, 32, device);
    });
}

/// A unified-memory counter record (`UnifiedMemoryCounter3` offsets).
#[no_mangle]
pub unsafe extern "C" fn fakecupti_um(counter: u32, value: u64) {
    emit(KIND_UNIFIED_MEMORY_COUNTER, |r| {
        put(r, 4, counter);
        put(r, 8, value);
        put(r, 16, monotonic_ns());
    });
}
