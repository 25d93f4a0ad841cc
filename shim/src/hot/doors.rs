//! The three doors into the driver, and how each hands out our wrappers.
//!
//! 1. Exported symbols: `hooks.rs` exports a wrapper under every hooked name, so a program
//!    linked with `-lcuda` binds to it; the wrapper calls libcuda's export of the same name.
//! 2. `dlsym(handle, "cu...")`: a handle-scoped lookup never sees a preloaded library, so we
//!    define `dlsym` ourselves, ask the real one, and swap a libcuda entry point for our
//!    wrapper of the same exported variant.
//! 3. `cuGetProcAddress` (4 arguments) and `cuGetProcAddress_v2` (5): the CUDA runtime gets
//!    every entry point through these. We call the real resolver and swap the returned
//!    pointer the same way, including when the symbol asked for is the resolver itself.
//!
//! Swapping is by pointer identity, never by name: the driver picks the variant from
//! version and flags (`cuMemAlloc` at 3020 is `cuMemAlloc_v2`; flag 2 gives `_ptsz`), so
//! the pointer it returns names the exact ABI, and the wrapper of that variant is the only
//! correct one. Pointers we do not know pass through untouched; their names are kept once.
//!
//! This module is the only one that knows which lookups to answer with something else:
//! driver entry points and NCCL functions with our wrappers, CUPTI's subscriber functions
//! with `gpu::cupti`'s (through `crate::UPCALLS`). Finding the real functions is `resolve.rs`, which knows none of
//! that.

use crate::effect::Effect;
use crate::hooks::{hook_list, CUresult, Hook, ALL_HOOKS};
use crate::record;
use crate::resolve::{adopt_driver, is_own_address, real_dlsym, real_fn};
use std::ffi::{c_char, c_int, c_void, CStr};

/// `wrapper_address`, from the hook list: the generated wrappers and the hand-written ones.
macro_rules! hook_addresses {
    (
        driver -> $dres:ty, else $dmissing:expr; {
            $( $name:ident ( $($arg:ident : $ty:ty),* ) => $effect:expr; )*
        }
        nccl -> $nres:ty, else $nmissing:expr; {
            $( $nname:ident ( $($narg:ident : $nty:ty),* ) => $neffect:expr $(, then $nthen:expr)?; )*
        }
        manual { $( $mname:ident => $($mpath:ident)::+; )* }
    ) => {
        /// The address of our wrapper for `hook`.
        pub fn wrapper_address(hook: Hook) -> *mut c_void {
            match hook {
                $(Hook::$name => crate::exports::$name as *mut c_void,)*
                $(Hook::$nname => crate::exports::$nname as *mut c_void,)*
                $(Hook::$mname => crate::$($mpath)::+ as *mut c_void,)*
            }
        }
    };
}

hook_list!(hook_addresses);

/// Door 2: every `dlsym` in the process comes through here.
///
/// # Safety
/// Same contract as `dlsym(3)`.
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let Some(real) = real_dlsym() else {
        return std::ptr::null_mut();
    };
    // SAFETY: forwarding the caller's arguments.
    let found = unsafe { real(handle, symbol) };
    if found.is_null() || symbol.is_null() {
        return found;
    }
    // SAFETY: symbol is a C string per dlsym's contract.
    let name = unsafe { CStr::from_ptr(symbol) };
    // Fast path for everything that is neither a driver entry point (`cu` + capital letter;
    // this excludes cudnn*, cublas*, curl_*) nor NCCL.
    if is_driver_name(name) {
        swap_for_wrapper(found, symbol)
    } else if name.to_bytes().starts_with(b"nccl") {
        nccl_wrapper(found, name)
    } else if name.to_bytes().starts_with(b"cupti") {
        (crate::UPCALLS.cupti_lookup)(found, name)
    } else {
        found
    }
}

fn is_driver_name(name: &CStr) -> bool {
    matches!(name.to_bytes(), [b'c', b'u', c, ..] if c.is_ascii_uppercase())
}

/// Door 3, the CUDA 11.3 form (4 arguments).
///
/// # Safety
/// Same contract as `cuGetProcAddress` in cuda.h.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    type Real = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
    let Some(real) = real_fn(Hook::cuGetProcAddress) else {
        return crate::hooks::CUDA_ERROR_NOT_FOUND;
    };
    // SAFETY: libcuda's cuGetProcAddress has exactly this signature.
    let real: Real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
    let span = record::begin(Hook::cuGetProcAddress);
    // SAFETY: forwarding the caller's arguments.
    let result = unsafe { real(symbol, pfn, version, flags) };
    record::end(span, Hook::cuGetProcAddress, Effect::None, result);
    // SAFETY: pfn is the caller's out-pointer, written by the driver on success.
    unsafe { swap_resolved(result, pfn, symbol) };
    result
}

/// Door 3, the CUDA 12+ form (5 arguments). `status` is the driver's to write, never ours.
///
/// # Safety
/// Same contract as `cuGetProcAddress_v2` in cuda.h.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    type Real =
        unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;
    let Some(real) = real_fn(Hook::cuGetProcAddress_v2) else {
        return crate::hooks::CUDA_ERROR_NOT_FOUND;
    };
    // SAFETY: libcuda's cuGetProcAddress_v2 has exactly this signature.
    let real: Real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
    let span = record::begin(Hook::cuGetProcAddress_v2);
    // SAFETY: forwarding the caller's arguments.
    let result = unsafe { real(symbol, pfn, version, flags, status) };
    record::end(span, Hook::cuGetProcAddress_v2, Effect::None, result);
    // SAFETY: as in cuGetProcAddress.
    unsafe { swap_resolved(result, pfn, symbol) };
    result
}

/// # Safety
/// `pfn` is null or a valid out-pointer that the driver wrote when `result` is success.
unsafe fn swap_resolved(result: CUresult, pfn: *mut *mut c_void, symbol: *const c_char) {
    if result != 0 || pfn.is_null() {
        return;
    }
    // SAFETY: per the contract above.
    let found = unsafe { *pfn };
    if !found.is_null() {
        // SAFETY: as above.
        unsafe { *pfn = swap_for_wrapper(found, symbol) };
    }
}

/// Our wrapper for an NCCL function looked up by name (NCCL has one ABI per name), unless
/// the lookup already found our own export.
#[cold]
#[inline(never)]
fn nccl_wrapper(found: *mut c_void, name: &CStr) -> *mut c_void {
    if is_own_address(found) {
        return found;
    }
    match ALL_HOOKS
        .iter()
        .find(|h| h.is_nccl() && h.name().as_bytes() == name.to_bytes())
    {
        Some(&hook) => wrapper_address(hook),
        None => found,
    }
}

/// Our wrapper for the driver entry point at `found`, or `found` itself when we do not wrap
/// it (its name is then remembered once).
#[cold]
#[inline(never)]
fn swap_for_wrapper(found: *mut c_void, symbol: *const c_char) -> *mut c_void {
    adopt_driver(found);
    if let Some(hook) = ALL_HOOKS
        .iter()
        .copied()
        .find(|&h| !h.is_nccl() && real_fn(h) == Some(found))
    {
        return wrapper_address(hook);
    }
    if !is_own_address(found) && !symbol.is_null() {
        // SAFETY: symbol is the caller's C string.
        crate::unwrapped::note(unsafe { CStr::from_ptr(symbol) });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wrapper_is_distinct() {
        let mut addrs: Vec<usize> = ALL_HOOKS
            .iter()
            .map(|&h| wrapper_address(h) as usize)
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert_eq!(
            addrs.len(),
            crate::hooks::HOOK_COUNT,
            "two hooks share a wrapper"
        );
    }

    #[test]
    fn only_cu_capital_names_are_driver_names() {
        assert!(is_driver_name(c"cuLaunchKernel"));
        assert!(is_driver_name(c"cuGetProcAddress_v2"));
        assert!(!is_driver_name(c"cudnnCreate"));
        assert!(!is_driver_name(c"cublasCreate_v2"));
        assert!(!is_driver_name(c"curl_easy_init"));
        assert!(!is_driver_name(c"cu"));
        assert!(!is_driver_name(c"malloc"));
    }

    extern "C" fn stand_in_for_libcuda() {}

    #[test]
    fn routing_is_by_pointer_not_by_name() {
        let real = stand_in_for_libcuda as *mut c_void;
        crate::resolve::inject_real(Hook::cuMemcpyDtoHAsync_v2_ptsz, real);
        // Whatever name was asked for, the driver's pointer decides the wrapper.
        let wrapper = wrapper_address(Hook::cuMemcpyDtoHAsync_v2_ptsz);
        assert_eq!(
            swap_for_wrapper(real, c"cuMemcpyDtoHAsync".as_ptr()),
            wrapper
        );
        assert_eq!(swap_for_wrapper(real, c"anything".as_ptr()), wrapper);
        // An unknown pointer (outside this library: libc's malloc) passes through and its
        // name is kept.
        let unknown = libc::malloc as *mut c_void;
        assert_eq!(
            swap_for_wrapper(unknown, c"cuSomethingNew".as_ptr()),
            unknown
        );
        assert!(crate::unwrapped::names().contains(&"cuSomethingNew".to_string()));
    }
}
