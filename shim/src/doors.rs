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
//! Never call `libc::dlsym` (or anything built on it) in this crate: it binds to our own
//! `dlsym`. `real_dlsym` is the way to the real one.

use crate::effect::Effect;
use crate::hooks::{wrapper_address, CUresult, Hook, ALL_HOOKS, HOOK_COUNT, HOOK_NAMES};
use crate::record;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

static REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

extern "C" {
    fn dlvsym(handle: *mut c_void, symbol: *const c_char, version: *const c_char) -> *mut c_void;
}

/// glibc's `dlsym`, found with `dlvsym` (which we do not interpose). Newest version first;
/// 2.17 is aarch64's base version.
fn real_dlsym() -> Option<DlsymFn> {
    let mut f = REAL_DLSYM.load(Acquire);
    if f.is_null() {
        for version in [c"GLIBC_2.34", c"GLIBC_2.2.5", c"GLIBC_2.17"] {
            // SAFETY: valid C strings; dlvsym is thread-safe.
            f = unsafe { dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) };
            if !f.is_null() {
                break;
            }
        }
        if f.is_null() {
            return None;
        }
        REAL_DLSYM.store(f, Release);
    }
    // SAFETY: f is glibc's dlsym.
    Some(unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(f) })
}

/// Looks `name` up with the real `dlsym`.
pub fn lookup(handle: *mut c_void, name: &CStr) -> *mut c_void {
    match real_dlsym() {
        // SAFETY: name is NUL-terminated; handle is whatever the caller's dlsym would take.
        Some(dlsym) => unsafe { dlsym(handle, name.as_ptr()) },
        None => std::ptr::null_mut(),
    }
}

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
        crate::gpu::cupti::dlsym_wrapper(found, name)
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

/// libcuda's export of each hooked name: null until resolved, `MISSING` where this driver
/// has no such export, else the function. One load on the hot path.
const MISSING: *mut c_void = std::ptr::dangling_mut(); // address 1

#[allow(clippy::declare_interior_mutable_const)]
const UNRESOLVED: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static REAL: [AtomicPtr<c_void>; HOOK_COUNT] = [UNRESOLVED; HOOK_COUNT];

/// libcuda's export of exactly `hook`'s name, or None if this driver lacks it.
#[inline(always)]
pub fn real_fn(hook: Hook) -> Option<*mut c_void> {
    // SAFETY: hook ids are < HOOK_COUNT.
    let f = unsafe { REAL.get_unchecked(hook as usize) }.load(Acquire);
    if (f as usize) > (MISSING as usize) {
        Some(f)
    } else if f.is_null() {
        resolve(hook)
    } else {
        None
    }
}

/// Resolves one hook: a driver hook against libcuda, an NCCL hook to NCCL's `pncclX`
/// alias. Racing threads compute the same answer.
#[cold]
#[inline(never)]
fn resolve(hook: Hook) -> Option<*mut c_void> {
    let i = hook as usize;
    let (handle, found) = if hook.is_nccl() {
        nccl_function(hook)
    } else {
        let handle = driver_handle();
        let found = if handle.is_null() {
            std::ptr::null_mut()
        } else {
            match CStr::from_bytes_with_nul(HOOK_NAMES[i].as_bytes()) {
                Ok(name) => lookup(handle, name),
                Err(_) => std::ptr::null_mut(),
            }
        };
        (handle, found)
    };
    // A lookup that lands in our own library would make the wrapper call itself.
    if found.is_null() || is_own_address(found) {
        // A driver not loaded yet may appear later: only remember "missing" once it is.
        if !handle.is_null() {
            REAL[i].store(MISSING, Release);
        }
        return None;
    }
    REAL[i].store(found, Release);
    Some(found)
}

/// Tests stand in for libcuda by handing the wrappers their "real" functions.
#[cfg(test)]
pub fn inject_real(hook: Hook, f: *mut c_void) {
    REAL[hook as usize].store(f, Release);
}

/// NCCL's `p`-prefixed alias of an NCCL hook, and the library it came from (null if NCCL is
/// not loaded). RTLD_NEXT finds a libnccl in the global scope; one loaded as a dependency of
/// a module opened with RTLD_LOCAL (a Python extension) is found by its soname.
fn nccl_function(hook: Hook) -> (*mut c_void, *mut c_void) {
    let none = (std::ptr::null_mut(), std::ptr::null_mut());
    let mut buf = [0u8; 64];
    let bare = hook.name().as_bytes();
    let Some(target) = buf.get_mut(..bare.len() + 1) else {
        return none;
    };
    target[0] = b'p';
    target[1..].copy_from_slice(bare);
    let Ok(name) = CStr::from_bytes_until_nul(&buf) else {
        return none;
    };
    let next = lookup(libc::RTLD_NEXT, name);
    if !next.is_null() {
        return (libc::RTLD_NEXT, next);
    }
    for soname in [c"libnccl.so.2", c"libnccl.so"] {
        // SAFETY: a valid C string; RTLD_NOLOAD only returns an already loaded object.
        let h = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            return (h, lookup(h, name));
        }
    }
    none
}

static DRIVER: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// libcuda's own export of `name`, bypassing every wrapper: for gpuspy's own driver
/// queries, which must not show up as the program's calls.
pub fn driver_symbol(name: &CStr) -> Option<*mut c_void> {
    let handle = driver_handle();
    if handle.is_null() {
        return None;
    }
    let found = lookup(handle, name);
    (!found.is_null() && !is_own_address(found)).then_some(found)
}

/// The already loaded libcuda. Never loads it: a wrapper only runs once the program has
/// the driver.
fn driver_handle() -> *mut c_void {
    let h = DRIVER.load(Acquire);
    if !h.is_null() {
        return h;
    }
    // SAFETY: a valid C string; RTLD_NOLOAD only returns an already loaded object.
    let h = unsafe {
        libc::dlopen(
            c"libcuda.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        )
    };
    if !h.is_null() {
        DRIVER.store(h, Release);
    }
    h
}

/// A driver loaded under another name (an absolute path without the usual soname): adopt the
/// object that holds an entry point the program just resolved.
fn adopt_driver(entry: *mut c_void) {
    if !driver_handle().is_null() || is_own_address(entry) {
        return;
    }
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr writes into info; a zero return means not found.
    if unsafe { libc::dladdr(entry, info.as_mut_ptr()) } == 0 {
        return;
    }
    // SAFETY: dladdr succeeded and filled info; dli_fname is a C string or null.
    let path = unsafe { info.assume_init() }.dli_fname;
    if !path.is_null() {
        // SAFETY: path is the loaded object's file name.
        let h = unsafe { libc::dlopen(path, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            DRIVER.store(h, Release);
        }
    }
}

static OWN_BASE: AtomicUsize = AtomicUsize::new(0);

/// Whether `p` lies in libgpuspy.so itself.
fn is_own_address(p: *mut c_void) -> bool {
    let own = match OWN_BASE.load(Relaxed) {
        0 => {
            let base = object_base(is_own_address as *mut c_void);
            OWN_BASE.store(base, Relaxed);
            base
        }
        base => base,
    };
    own != 0 && object_base(p) == own
}

fn object_base(p: *mut c_void) -> usize {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr writes into info; a zero return means not found.
    if unsafe { libc::dladdr(p, info.as_mut_ptr()) } == 0 {
        return 0;
    }
    // SAFETY: dladdr succeeded and filled info.
    unsafe { info.assume_init() }.dli_fbase as usize
}

#[cfg(test)]
mod tests {
    use super::*;

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
        inject_real(Hook::cuMemcpyDtoHAsync_v2_ptsz, real);
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

    #[test]
    fn own_addresses_are_recognised() {
        assert!(is_own_address(wrapper_address(Hook::cuLaunchKernel)));
        assert!(!is_own_address(libc::malloc as *mut c_void));
    }
}
