//! `cuLaunchKernel` and `cuLaunchKernel_ptsz`, the hottest calls, written out by hand.
//!
//! With 11 arguments, 5 of them (`blockDimZ`, `sharedMemBytes`, `hStream`, `kernelParams`,
//! `extra`) travel on the stack. A wrapper that names them one by one makes the compiler
//! load each, spill it across the timestamps, and push it again for the real call: about
//! 10 wasted instructions of a ~100-instruction budget. On x86-64 the System V ABI passes a
//! struct larger than 16 bytes on the stack, in order, 8-byte aligned, which is exactly the
//! layout of five stack arguments that each take an 8-byte slot. So the wrapper takes the
//! five as one opaque `StackArgs` and hands the block on unchanged. AAPCS64 passes such a
//! struct by reference instead, so other targets spell out all 11 arguments.
//! tests/programs/linked.c checks that every argument arrives intact.

#![allow(non_snake_case)]

use crate::effect::Effect;
use crate::hooks::{CUresult, Hook, Ptr, CUDA_ERROR_NOT_FOUND};
use crate::{record, resolve};
use std::ffi::{c_uint, c_void};

/// The five stack arguments of `cuLaunchKernel`, forwarded as one block (x86-64 only).
#[cfg(target_arch = "x86_64")]
#[repr(C)]
pub struct StackArgs([u64; 5]);

macro_rules! launch_wrapper {
    ($name:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            f: Ptr,
            gx: c_uint,
            gy: c_uint,
            gz: c_uint,
            bx: c_uint,
            by: c_uint,
            stack: StackArgs,
        ) -> CUresult {
            type Real = unsafe extern "C" fn(
                Ptr,
                c_uint,
                c_uint,
                c_uint,
                c_uint,
                c_uint,
                StackArgs,
            ) -> CUresult;
            let Some(real) = resolve::real_fn(Hook::$name) else {
                return CUDA_ERROR_NOT_FOUND;
            };
            // SAFETY: libcuda's export of this name, whose stack arguments have the layout of
            // StackArgs (see the module comment).
            let real: Real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
            let span = record::begin(Hook::$name);
            // SAFETY: forwarding the caller's own arguments.
            let result = unsafe { real(f, gx, gy, gz, bx, by, stack) };
            record::end(span, Hook::$name, Effect::None, result);
            result
        }

        #[cfg(not(target_arch = "x86_64"))]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            f: Ptr,
            gx: c_uint,
            gy: c_uint,
            gz: c_uint,
            bx: c_uint,
            by: c_uint,
            bz: c_uint,
            smem: c_uint,
            stream: Ptr,
            params: Ptr,
            extra: Ptr,
        ) -> CUresult {
            type Real = unsafe extern "C" fn(
                Ptr,
                c_uint,
                c_uint,
                c_uint,
                c_uint,
                c_uint,
                c_uint,
                c_uint,
                Ptr,
                Ptr,
                Ptr,
            ) -> CUresult;
            let Some(real) = resolve::real_fn(Hook::$name) else {
                return CUDA_ERROR_NOT_FOUND;
            };
            // SAFETY: libcuda's export of this name, with this signature.
            let real: Real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
            let span = record::begin(Hook::$name);
            // SAFETY: forwarding the caller's own arguments.
            let result = unsafe { real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra) };
            record::end(span, Hook::$name, Effect::None, result);
            result
        }
    };
}

launch_wrapper!(cuLaunchKernel);
launch_wrapper!(cuLaunchKernel_ptsz);
