//! The hot path never allocates: 8 threads x 10k wrapped calls of each kind (launch, sync,
//! pageable and pinned copies, a failing call, an NCCL all-reduce on a registered
//! communicator) under a counting global allocator. The Python call-site capture that
//! `UPCALLS.call_site` runs is tested beside its fixtures (`pystack::fixture_tests`).

use crate::exports;
use crate::hooks::{CUresult, Hook};
use crate::launch;
use crate::resolve::inject_real;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

struct CountingAlloc;
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with this thread's allocations counted (`allocations`); for the hot-path tests
/// kept beside the code they test (`pystack::fixture_tests`).
pub fn counting<R>(f: impl FnOnce() -> R) -> R {
    COUNTING.with(|c| c.set(true));
    let result = f();
    COUNTING.with(|c| c.set(false));
    result
}

/// Allocations made so far on threads while they were counted.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Relaxed)
}

// SAFETY: forwards to the system allocator; the counter has no effect on allocation.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.try_with(Cell::get).unwrap_or(false) {
            ALLOCATIONS.fetch_add(1, Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

extern "C" fn ok_launch(
    _: *mut c_void,
    _: u32,
    _: u32,
    _: u32,
    _: u32,
    _: u32,
    _: u32,
    _: u32,
    _: *mut c_void,
    _: *mut c_void,
    _: *mut c_void,
) -> CUresult {
    0
}
extern "C" fn ok_sync(_: *mut c_void) -> CUresult {
    0
}
extern "C" fn not_ready(_: *mut c_void) -> CUresult {
    600
}
extern "C" fn ok_copy(_: u64, _: *mut c_void, _: usize, _: *mut c_void) -> CUresult {
    0
}
extern "C" fn ok_all_reduce(
    _: *mut c_void,
    _: *mut c_void,
    _: usize,
    _: i32,
    _: i32,
    _: *mut c_void,
    _: *mut c_void,
) -> i32 {
    0
}
extern "C" fn new_comm(out: *mut *mut c_void, _: i32, _: crate::nccl::UniqueId, _: i32) -> i32 {
    // SAFETY: the test passes a valid out-pointer.
    unsafe { *out = 0x6000 as *mut c_void };
    0
}
extern "C" fn pin(p: *mut *mut c_void, _: usize, _: u32) -> CUresult {
    // SAFETY: the test passes a valid out-pointer.
    unsafe { *p = 0x5000_0000 as *mut c_void };
    0
}

/// Calls the launch wrapper as C code would, whatever its Rust signature on this target.
fn launch_kernel(null: *mut c_void) {
    type CLaunch = unsafe extern "C" fn(
        *mut c_void,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        *mut c_void,
        *mut c_void,
        *mut c_void,
    ) -> CUresult;
    // SAFETY: the wrapper has the C signature of cuLaunchKernel (see launch.rs).
    let wrapper: CLaunch = unsafe {
        std::mem::transmute::<*mut c_void, CLaunch>(launch::cuLaunchKernel as *mut c_void)
    };
    // SAFETY: the injected real function ignores its arguments.
    unsafe { wrapper(null, 1, 1, 1, 1, 1, 1, 0, null, null, null) };
}

#[test]
fn hot_path_does_not_allocate() {
    let out = std::env::temp_dir().join(format!("gpuspy-noalloc-{}", std::process::id()));
    std::env::set_var("GPUSPY_OUT", &out);
    std::env::set_var("GPUSPY_FLUSH_S", "0");
    inject_real(Hook::cuLaunchKernel, ok_launch as *mut c_void);
    inject_real(Hook::cuStreamSynchronize, ok_sync as *mut c_void);
    inject_real(Hook::cuStreamQuery, not_ready as *mut c_void);
    inject_real(Hook::cuMemcpyHtoDAsync_v2, ok_copy as *mut c_void);
    inject_real(Hook::cuMemHostAlloc, pin as *mut c_void);
    inject_real(Hook::ncclAllReduce, ok_all_reduce as *mut c_void);
    inject_real(Hook::ncclCommInitRank, new_comm as *mut c_void);
    let mut comm = std::ptr::null_mut();
    // SAFETY: the injected init writes the out-pointer; the id is plain bytes.
    unsafe { exports::ncclCommInitRank(&mut comm, 2, crate::nccl::UniqueId([1; 128]), 0) };
    let comm = comm as usize;
    let mut pinned = std::ptr::null_mut();
    // SAFETY: the injected functions ignore their arguments but the out-pointer.
    unsafe { exports::cuMemHostAlloc(&mut pinned, 1 << 20, 0) };
    let pinned = pinned as usize;

    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let pageable = [0u8; 64];
                COUNTING.with(|c| c.set(true));
                for _ in 0..10_000 {
                    // SAFETY: as above.
                    unsafe {
                        let null = std::ptr::null_mut();
                        launch_kernel(null);
                        exports::cuStreamSynchronize(null);
                        exports::cuStreamQuery(null);
                        exports::cuMemcpyHtoDAsync_v2(
                            1,
                            pageable.as_ptr() as *mut c_void,
                            64,
                            null,
                        );
                        exports::cuMemcpyHtoDAsync_v2(1, pinned as *mut c_void, 64, null);
                        exports::ncclAllReduce(null, null, 256, 7, 0, comm as *mut c_void, null);
                    }
                }
                COUNTING.with(|c| c.set(false));
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(ALLOCATIONS.load(Relaxed), 0, "allocations on the hot path");
    // A gpuspy thread's calls are forwarded but never show up in a dump.
    std::thread::spawn(move || {
        crate::record::exclude_current_thread();
        for _ in 0..5_000 {
            // SAFETY: the injected stub ignores its arguments.
            unsafe { exports::cuStreamQuery(std::ptr::null_mut()) };
        }
    })
    .join()
    .unwrap();

    // The calls were recorded, not skipped.
    let dump = crate::lifecycle::dump::snapshot(Default::default(), false);
    let calls = |name: &str| dump.apis.iter().find(|a| a.symbol == name).map(|a| a.calls);
    assert_eq!(calls("cuLaunchKernel"), Some(80_000));
    assert_eq!(calls("cuStreamQuery"), Some(80_000));
    assert_eq!(calls("cuMemcpyHtoDAsync_v2"), Some(160_000));
    assert_eq!(calls("ncclAllReduce"), Some(80_000));
    let _ = std::fs::remove_dir_all(out);
}

/// The NVTX handlers never allocate either, new names and cross-thread ranges included.
#[test]
fn nvtx_handlers_do_not_allocate() {
    use crate::nvtx::fake_copy::*;
    let _serial = crate::nvtx::serial();
    let out = std::env::temp_dir().join(format!("gpuspy-noalloc-nvtx-{}", std::process::id()));
    std::env::set_var("GPUSPY_OUT", &out);
    assert_eq!(install(), 1);
    // The first call starts the recorder (cold, allocating once per process).
    push_a(c"warm-up");
    pop();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let names = [c"noalloc-a", c"noalloc-b", c"noalloc-c"];
                COUNTING.with(|c| c.set(true));
                let mut levels = [0; 4];
                for i in 0..10_000 {
                    let level = push_a(names[(i + t) % 3]);
                    let inner = domain_push(c"noalloc-inner");
                    let id = start_a(c"noalloc-start");
                    end(id);
                    if i == 0 {
                        levels = [level, inner, domain_pop(), pop()];
                    } else {
                        domain_pop();
                        pop();
                    }
                }
                COUNTING.with(|c| c.set(false));
                assert_eq!(levels, [0, 1, 1, 0]);
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(
        ALLOCATIONS.load(Relaxed),
        0,
        "allocations in the NVTX handlers"
    );
    let _ = std::fs::remove_dir_all(out);
}
