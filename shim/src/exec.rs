//! `exec` keeps the pid, so the new image would write its dump over the old image's. The
//! wrappers below write the old image's dump first, then hand the new image
//! `GPUSPY_IMAGE=<pid>:<n>:<start>`, which names its dumps `...-<pid>-exec<n>.json` and
//! keeps the process's start time, and the output
//! directory as the absolute path this image resolved at load (so a `chdir` before the
//! `exec` does not move it).
//!
//! Only a process that records does any of this; any other caller (a forked child between
//! `fork` and `exec`, where allocating is not safe) goes straight to libc. glibc's `execl*`
//! functions call `execve` internally, not through the symbol table, so they are not seen:
//! an image that ends in `execl` keeps its data up to its last periodic flush.

#![allow(clippy::missing_safety_doc)]

use crate::lifecycle;
use crate::resolve::NextFns;
use std::ffi::{c_char, c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;

type Argv = *const *const c_char;

extern "C" {
    static environ: *const *const c_char;
}

/// The environment for the next image: `envp` less our two variables, plus their new values.
/// Holds the strings the pointer array points into.
struct NextEnv {
    _ours: [CString; 2],
    pointers: Vec<*const c_char>,
}

/// The environment to hand the real function: ours where this process records, else the
/// caller's own.
fn envp_for_next(env: &Option<NextEnv>, envp: Argv) -> Argv {
    env.as_ref().map_or(envp, |e| e.pointers.as_ptr())
}

/// Writes this image's dump and builds the next image's environment, or None when this
/// process does not record.
fn prepare(envp: Argv) -> Option<NextEnv> {
    if !lifecycle::owns_process() {
        return None;
    }
    lifecycle::before_exec();
    let config = lifecycle::config()?;
    let image = format!("GPUSPY_IMAGE={}", lifecycle::next_image()).into_bytes();
    let mut out = b"GPUSPY_OUT=".to_vec();
    out.extend_from_slice(config.out_dir.as_os_str().as_bytes());
    let ours = [CString::new(image).ok()?, CString::new(out).ok()?];
    let mut pointers: Vec<*const c_char> = Vec::new();
    let mut entry = envp;
    // SAFETY: envp is a NULL-terminated array of C strings, per exec's contract.
    unsafe {
        while !entry.is_null() && !(*entry).is_null() {
            let bytes = CStr::from_ptr(*entry).to_bytes();
            if !bytes.starts_with(b"GPUSPY_IMAGE=") && !bytes.starts_with(b"GPUSPY_OUT=") {
                pointers.push(*entry);
            }
            entry = entry.add(1);
        }
    }
    pointers.extend(ours.iter().map(|s| s.as_ptr()));
    pointers.push(std::ptr::null());
    Some(NextEnv {
        _ours: ours,
        pointers,
    })
}

/// libc's `execve`, `execvpe` and `fexecve`: `exec` often comes in a forked child of a
/// multi-threaded program, where `dlsym` is not safe.
pub static NEXT: NextFns<3> = NextFns::new([c"execve", c"execvpe", c"fexecve"]);

fn enosys() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// `execve` and `execvpe` alike.
type ExecFn = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: libc's execve.
    let Some(real) = (unsafe { NEXT.get::<ExecFn>(0) }) else {
        return enosys();
    };
    let env = prepare(envp);
    // SAFETY: the caller's arguments; the environment lives until the call returns.
    unsafe { real(path, argv, envp_for_next(&env, envp)) }
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    // SAFETY: reading the process's environment pointer.
    unsafe { execve(path, argv, environ) }
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: libc's execvpe.
    let Some(real) = (unsafe { NEXT.get::<ExecFn>(1) }) else {
        return enosys();
    };
    let env = prepare(envp);
    // SAFETY: as in execve.
    unsafe { real(file, argv, envp_for_next(&env, envp)) }
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    // SAFETY: reading the process's environment pointer.
    unsafe { execvpe(file, argv, environ) }
}

#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: libc's fexecve.
    let Some(real) = (unsafe { NEXT.get::<FexecveFn>(2) }) else {
        return enosys();
    };
    let env = prepare(envp);
    // SAFETY: as in execve.
    unsafe { real(fd, argv, envp_for_next(&env, envp)) }
}
