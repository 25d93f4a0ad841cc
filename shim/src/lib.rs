//! `libgpuspy.so`: preloaded into a process, it interposes the CUDA driver API through all
//! three doors (exported symbols, `dlsym`, `cuGetProcAddress`), forwards every call
//! untouched and records per-call latency histograms, bytes moved and implicit
//! synchronisations. After the first successful `cuInit`, one background thread adds what
//! the GPU itself reports: NVML telemetry and CUPTI activity (`collect/gpu/`). See
//! docs/design.md.
//!
//! # The hot-path budget
//! Per intercepted call, and nothing more: one relaxed load of the "recording" flag, one
//! thread-local lookup (const-initialised, Drop-free), an acquire load of the real
//! function's pointer, two timestamps (invariant TSC where available), the indirect call,
//! a bucket index from `leading_zeros`, and relaxed atomic adds into this thread's own
//! block. No locks, allocation, formatting, logging, syscalls or extra driver calls.
//! Copies add a scan of the pinned-range table. Everything else (first resolution, init,
//! lookups through `dlsym`/`cuGetProcAddress`, errors, flushing) is `#[cold]`.
//!
//! # Failing open
//! The application's `CUresult` is returned unchanged. Any internal failure (no arena, no
//! dump directory) turns recording off or warns once, and the calls keep flowing. Wrappers
//! cannot panic: the crate denies `unwrap`, `expect`, `panic` and unchecked indexing, and
//! dump writing runs under `catch_unwind`.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]
#![deny(unsafe_op_in_unsafe_fn)]

// A file's folder is its layer (docs/design.md "Shim layers"). The re-exports keep every
// module at the crate root (`crate::clock`): the folders group the files, the paths stay
// short.
mod base;
mod collect;
mod hot;
mod lifecycle;

pub(crate) use base::{clock, config, forklock, hostmem, reserve, switch, tls, unwrapped};
pub(crate) use collect::{events, gpu, nvtx, pystack, timeline, watchdog};
pub(crate) use hot::{
    doors, effect, exec, exports, hooks, launch, nccl, record, resolve, ring, signals,
};

#[cfg(test)]
pub(crate) use hot::no_alloc_tests;

/// The calls the lower layers make into the upper ones, which they do not know: this table,
/// filled here where the whole crate is in view, is how the hot path and the interposed
/// libc functions (exec, signals) reach the lifecycle and the collectors (dependency
/// inversion, docs/design.md "Shim layers"). The hot path takes them on cold branches
/// only. A static, so it is there before the very first intercepted call.
pub struct Upcalls {
    /// The first call of a process generation: starts recording; true when it did.
    pub activate: fn() -> bool,
    /// A thread that recorded calls exits: its unread blocking events go to the timeline
    /// (`events::retire`), before its block is folded.
    pub thread_exit: fn(usize, &record::ThreadStats),
    /// Captures the Python call site of a call `Effect::picks_call_site` picked.
    pub call_site: fn(usize, Option<gpuspy_format::SyncCause>, u64),
    /// The first successful `cuInit`: GPU-side collection starts.
    pub driver_ready: fn(),
    /// The program made a context on this device ordinal.
    pub device_used: fn(std::ffi::c_int),
    /// The program allocated managed memory.
    pub managed_memory: fn(),
    /// Before a CUDA graph is captured, instantiated or launched: CUPTI stays attached.
    pub keep_attached: fn(),
    /// What `dlsym` of a `cupti*` name returns: gpuspy's wrapper for the functions it
    /// shares CUPTI through, or what the real lookup found.
    pub cupti_lookup: fn(*mut std::ffi::c_void, &std::ffi::CStr) -> *mut std::ffi::c_void,
    /// Whether this process generation records (`exec` and the signal handler ask).
    pub owns_process: fn() -> bool,
    /// Just before `exec` replaces this image: its dump.
    pub before_exec: fn(),
    /// The `GPUSPY_IMAGE` value for the image that replaces this one.
    pub next_image: fn() -> String,
    /// From a signal handler: asks for the dump the signal is about to cut short; whether
    /// one will come. Async-signal-safe.
    pub request_signal_dump: fn(std::ffi::c_int) -> bool,
    /// Whether the dump a signal asked for is written. Async-signal-safe.
    pub signal_dump_written: fn() -> bool,
}

pub static UPCALLS: Upcalls = Upcalls {
    activate: lifecycle::activate,
    thread_exit: events::retire,
    call_site: pystack::capture,
    driver_ready: gpu::on_driver_ready,
    device_used: gpu::on_device_used,
    managed_memory: gpu::on_managed_memory,
    keep_attached: gpu::cupti::keep_attached,
    cupti_lookup: gpu::cupti::dlsym_wrapper,
    owns_process: lifecycle::owns_process,
    before_exec: lifecycle::before_exec,
    next_image: lifecycle::next_image,
    request_signal_dump: lifecycle::request_signal_dump,
    signal_dump_written: lifecycle::signal_dump_written,
};
