//! `gpuspy demo-step STEPS` (hidden): the job `gpuspy demo` profiles, the training step of
//! examples/simulated_step.c as a naive PyTorch loop drives the driver: a batch copied
//! from pageable memory, a burst of small kernels, and a `.item()` (a copy back and a
//! sync). It finds the driver as PyTorch does, with dlopen and dlsym, and, standing in for
//! the GPU, tells the fake CUPTI what the GPU ran (tools/fakecupti's `fakecupti_*`).

use anyhow::{bail, Result};
use std::ffi::{c_char, c_uint, c_void, CStr};
use std::process::ExitCode;

type CUresult = u32;
type DevicePtr = u64;

/// CUPTI's kernel activity kind, and its copy and memory kinds.
const KIND_CONCURRENT_KERNEL: c_uint = 10;
const HTOD: u8 = 1;
const DTOH: u8 = 2;
const PAGEABLE: u8 = 1;
const DEVICE: u8 = 3;

const BATCH: usize = 4 << 20;
const KERNELS_PER_STEP: u32 = 40;
/// Blocks per kernel: a grid far smaller than the fake H200's 132 SMs (`small-grid`).
const BLOCKS: u32 = 8;
/// The loss's copy back to the host, on the simulated GPU.
const COPY_OUT_NS: u64 = 1_000;

/// The driver calls of the step, as cuda.h declares them.
struct Driver {
    init: unsafe extern "C" fn(c_uint) -> CUresult,
    retain_context: unsafe extern "C" fn(*mut *mut c_void, i32) -> CUresult,
    alloc: unsafe extern "C" fn(*mut DevicePtr, usize) -> CUresult,
    copy_in: unsafe extern "C" fn(DevicePtr, *const c_void, usize, *mut c_void) -> CUresult,
    copy_out: unsafe extern "C" fn(*mut c_void, DevicePtr, usize, *mut c_void) -> CUresult,
    #[allow(clippy::type_complexity)]
    launch: unsafe extern "C" fn(
        *mut c_void,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        *mut c_void,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CUresult,
    sync: unsafe extern "C" fn(*mut c_void) -> CUresult,
}

/// The fake CUPTI's producer calls (tools/fakecupti).
struct FakeGpu {
    enabled: unsafe extern "C" fn(c_uint) -> i32,
    now: unsafe extern "C" fn() -> u64,
    kernel: unsafe extern "C" fn(c_uint, u64, u64, i32, *const c_char),
    copy: unsafe extern "C" fn(u8, u8, u8, u64, u64, u64, c_uint),
}

/// A library by soname, found as the loader finds it (`gpuspy demo` sets the path). In the
/// global scope, as a program linked with it has it: the fake CUPTI looks up the fake
/// driver's `fakecuda_calls_in_flight` there.
fn open(soname: &CStr) -> Result<*mut c_void> {
    // SAFETY: a valid C string.
    let handle = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        bail!("{}: cannot be loaded", soname.to_string_lossy());
    }
    Ok(handle)
}

/// Function `name` of `library`, as `F`. Through the program's `dlsym`, which the shim
/// interposes: the driver's calls come back as the shim's wrappers.
///
/// # Safety
/// `F` must be the function's C signature.
unsafe fn function<F: Copy>(library: *mut c_void, name: &CStr) -> Result<F> {
    let f = libc::dlsym(library, name.as_ptr());
    if f.is_null() {
        bail!("{} not found", name.to_string_lossy());
    }
    Ok(std::mem::transmute_copy::<*mut c_void, F>(&f))
}

impl Driver {
    fn open() -> Result<Driver> {
        let lib = open(c"libcuda.so.1")?;
        // SAFETY: each type is that function's signature in cuda.h.
        unsafe {
            Ok(Driver {
                init: function(lib, c"cuInit")?,
                retain_context: function(lib, c"cuDevicePrimaryCtxRetain")?,
                alloc: function(lib, c"cuMemAlloc_v2")?,
                copy_in: function(lib, c"cuMemcpyHtoDAsync_v2")?,
                copy_out: function(lib, c"cuMemcpyDtoHAsync_v2")?,
                launch: function(lib, c"cuLaunchKernel")?,
                sync: function(lib, c"cuStreamSynchronize")?,
            })
        }
    }
}

impl FakeGpu {
    fn open() -> Result<FakeGpu> {
        let lib = open(c"libcupti.so.13")?;
        // SAFETY: each type is that function's signature in tools/fakecupti.
        unsafe {
            Ok(FakeGpu {
                enabled: function(lib, c"fakecupti_enabled")?,
                now: function(lib, c"fakecupti_now")?,
                kernel: function(lib, c"fakecupti_kernel")?,
                copy: function(lib, c"fakecupti_memcpy")?,
            })
        }
    }

    fn now(&self) -> u64 {
        // SAFETY: no arguments.
        unsafe { (self.now)() }
    }
}

/// Fails on a driver error, which the fake only returns when told to.
fn check(what: &str, r: CUresult) -> Result<()> {
    if r != 0 {
        bail!("{what} failed ({r})");
    }
    Ok(())
}

pub fn step(steps: u32) -> Result<ExitCode> {
    // CUPTI first: gpuspy's shim takes the libcupti the process has.
    let gpu = FakeGpu::open()?;
    let cuda = Driver::open()?;
    let host = vec![0u8; BATCH]; // pageable: the copy cannot overlap
    let (mut context, mut input, mut loss) = (std::ptr::null_mut(), 0, 0);
    let mut value = 0f32;
    let null = std::ptr::null_mut();
    // SAFETY: the driver's calls, with out-pointers to live locals and the host buffers'
    // own sizes.
    unsafe {
        check("cuInit", (cuda.init)(0))?;
        check(
            "cuDevicePrimaryCtxRetain",
            (cuda.retain_context)(&mut context, 0),
        )?;
        check("cuMemAlloc_v2", (cuda.alloc)(&mut input, BATCH))?;
        check("cuMemAlloc_v2", (cuda.alloc)(&mut loss, size_of::<f32>()))?;
        // The shim switches CUPTI's kinds on from its own thread; kernels before that would
        // go unrecorded. (Under GPUSPY_CUPTI=0 it never does: the job starts after 5 s.)
        for _ in 0..5000 {
            if (gpu.enabled)(KIND_CONCURRENT_KERNEL) != 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let kernel_name = c"demo_step_kernel".as_ptr();
        for _ in 0..steps {
            let start = gpu.now();
            check(
                "cuMemcpyHtoDAsync_v2",
                (cuda.copy_in)(input, host.as_ptr().cast(), BATCH, null),
            )?;
            let end = gpu.now();
            (gpu.copy)(HTOD, PAGEABLE, DEVICE, BATCH as u64, start, end, 0);
            for _ in 0..KERNELS_PER_STEP {
                check(
                    "cuLaunchKernel",
                    (cuda.launch)(
                        null,
                        BLOCKS,
                        1,
                        1,
                        128,
                        1,
                        1,
                        0,
                        null,
                        null.cast(),
                        null.cast(),
                    ),
                )?;
            }
            check(
                "cuMemcpyDtoHAsync_v2",
                (cuda.copy_out)((&raw mut value).cast(), loss, size_of::<f32>(), null),
            )?;
            check("cuStreamSynchronize", (cuda.sync)(null))?;
            // The sync returned when the GPU had done the step: its kernels ran back to back
            // from the batch's arrival, and the loss came back last.
            let done = gpu.now();
            let kernel_ns = (done - end).saturating_sub(COPY_OUT_NS) / KERNELS_PER_STEP as u64;
            for k in 0..KERNELS_PER_STEP as u64 {
                let start = end + k * kernel_ns;
                (gpu.kernel)(0, start, start + kernel_ns, BLOCKS as i32, kernel_name);
            }
            (gpu.copy)(DTOH, PAGEABLE, DEVICE, 4, done - COPY_OUT_NS, done, 0);
        }
    }
    println!("simulated training: {steps} steps");
    Ok(ExitCode::SUCCESS)
}
