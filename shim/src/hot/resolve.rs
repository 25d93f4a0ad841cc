//! Finding real functions: glibc's `dlsym`, the loaded libcuda and libnccl, and the real
//! function behind every hook (one acquire load on the hot path, resolved lazily because
//! programs such as PyTorch open libcuda late). It knows the hook table and nothing of what
//! the doors hand out or of CUPTI: `doors.rs` and `gpu/` both build on it.
//!
//! Never call `libc::dlsym` (or anything built on it) in this crate: it binds to our own
//! `dlsym` (doors.rs). `real_dlsym` is the way to the real one.

use crate::hooks::{Hook, HOOK_COUNT, HOOK_NAMES};
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

static REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

extern "C" {
    fn dlvsym(handle: *mut c_void, symbol: *const c_char, version: *const c_char) -> *mut c_void;
}

/// glibc's `dlsym`, found with `dlvsym` (which we do not interpose). Newest version first;
/// 2.17 is aarch64's base version.
pub fn real_dlsym() -> Option<DlsymFn> {
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

/// libc functions that the shim wraps (`exec*`, `kill`, `raise`), looked up with
/// `RTLD_NEXT` once, by the load-time constructor: their wrappers may run where `dlsym` is
/// not safe (in a forked child of a multi-threaded program, in a signal handler).
pub struct NextFns<const N: usize> {
    names: [&'static CStr; N],
    fns: [AtomicPtr<c_void>; N],
}

impl<const N: usize> NextFns<N> {
    pub const fn new(names: [&'static CStr; N]) -> Self {
        NextFns {
            names,
            fns: [const { AtomicPtr::new(std::ptr::null_mut()) }; N],
        }
    }

    /// At load, single-threaded.
    #[cfg_attr(test, allow(dead_code))]
    pub fn resolve(&self) {
        for (slot, name) in self.fns.iter().zip(self.names) {
            slot.store(lookup(libc::RTLD_NEXT, name), Release);
        }
    }

    /// Function `index` of the names, as `F`.
    ///
    /// # Safety
    /// `F` must be the C signature of that function.
    pub unsafe fn get<F: Copy>(&self, index: usize) -> Option<F> {
        let mut f = self.fns.get(index)?.load(Acquire);
        if f.is_null() {
            // Not resolved at load (the shim's own tests): look it up now.
            f = lookup(libc::RTLD_NEXT, self.names.get(index)?);
        }
        // SAFETY: the caller names F as the C signature of that function.
        (!f.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&f) })
    }
}

/// libcuda's export of each hooked name: null until resolved, `MISSING` where this driver
/// has no such export, else the function. One load on the hot path.
const MISSING: *mut c_void = std::ptr::dangling_mut(); // address 1

#[allow(clippy::declare_interior_mutable_const)]
const UNRESOLVED: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static REAL: [AtomicPtr<c_void>; HOOK_COUNT] = [UNRESOLVED; HOOK_COUNT];

/// `hook`'s slot in `REAL`: one per hook, so the access needs no check.
#[inline(always)]
fn real_slot(hook: Hook) -> &'static AtomicPtr<c_void> {
    // SAFETY: hook ids are < HOOK_COUNT, the table's length.
    unsafe { REAL.get_unchecked(hook as usize) }
}

/// libcuda's export of exactly `hook`'s name, or None if this driver lacks it.
#[inline(always)]
pub fn real_fn(hook: Hook) -> Option<*mut c_void> {
    let f = real_slot(hook).load(Acquire);
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
    let (handle, found) = if hook.is_nccl() {
        nccl_function(hook)
    } else {
        let handle = driver_handle();
        let found = if handle.is_null() {
            std::ptr::null_mut()
        } else {
            match HOOK_NAMES
                .get(hook as usize)
                .map(|name| CStr::from_bytes_with_nul(name.as_bytes()))
            {
                Some(Ok(name)) => lookup(handle, name),
                _ => std::ptr::null_mut(),
            }
        };
        (handle, found)
    };
    // A lookup that lands in our own library would make the wrapper call itself.
    if found.is_null() || is_own_address(found) {
        // A driver not loaded yet may appear later: only remember "missing" once it is.
        if !handle.is_null() {
            real_slot(hook).store(MISSING, Release);
        }
        return None;
    }
    real_slot(hook).store(found, Release);
    Some(found)
}

/// Tests stand in for libcuda by handing the wrappers their "real" functions.
#[cfg(test)]
pub fn inject_real(hook: Hook, f: *mut c_void) {
    real_slot(hook).store(f, Release);
}

/// NCCL's `p`-prefixed alias of an NCCL hook, and the library it came from (null if NCCL is
/// not loaded). RTLD_NEXT finds a libnccl in the global scope; one loaded as a dependency of
/// a module opened with RTLD_LOCAL (a Python extension) is found by its soname.
fn nccl_function(hook: Hook) -> (*mut c_void, *mut c_void) {
    let none = (std::ptr::null_mut(), std::ptr::null_mut());
    let mut buf = [0u8; 64];
    let bare = hook.name().as_bytes();
    let Some((p, rest)) = buf
        .get_mut(..bare.len() + 1)
        .and_then(<[u8]>::split_first_mut)
    else {
        return none;
    };
    *p = b'p';
    rest.copy_from_slice(bare);
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
pub fn adopt_driver(entry: *mut c_void) {
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
pub fn is_own_address(p: *mut c_void) -> bool {
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
    use crate::doors::wrapper_address;

    #[test]
    fn own_addresses_are_recognised() {
        assert!(is_own_address(wrapper_address(Hook::cuLaunchKernel)));
        assert!(!is_own_address(libc::malloc as *mut c_void));
    }
}
