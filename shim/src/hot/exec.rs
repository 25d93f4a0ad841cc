//! `exec` keeps the pid, so the new image would write its dump over the old image's. The
//! wrappers below write the old image's dump first, then hand the new image
//! `GPUSPY_IMAGE=<pid>:<n>:<start>`, which names its dumps `...-<pid>-exec<n>.json` and
//! keeps the process's start time, and the output directory as the absolute path this
//! image resolved at load (so a `chdir` before the `exec` does not move it). Should a new
//! image still find its name taken (an `exec` no wrapper saw: a raw system call), it
//! writes beside the old dump, never over it (`dump.rs`).
//!
//! The environment is the program's: the two variables go into it only while it still
//! preloads the shim (an empty environment, or one without `LD_PRELOAD`, goes unchanged),
//! and only where the program left them as this image found them: a value the program set
//! itself is passed on as it is.
//!
//! Wrapped: `execve`, `execv`, `execvp`, `execvpe`, `fexecve` and `execveat` here, and
//! `execl`, `execle` and `execlp` in exec_variadic.c, which build their argv and call
//! `execve` or `execvpe` (glibc's call its internal ones, which no preloaded library sees).
//! Only a process that records does any of this; any other caller (a forked child between
//! `fork` and `exec`, where allocating is not safe) goes straight to libc.

#![allow(clippy::missing_safety_doc)]

use crate::resolve::NextFns;
use std::ffi::{c_char, c_int, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;

type Argv = *const *const c_char;

extern "C" {
    static environ: *const *const c_char;
}

/// The environment for the next image: `envp` with our two variables set. Holds the
/// strings the pointer array points into.
struct NextEnv {
    _ours: Vec<CString>,
    pointers: Vec<*const c_char>,
}

/// The environment to hand the real function: ours where this process records and the
/// program's environment preloads the shim, else the caller's own.
fn envp_for_next(env: &Option<NextEnv>, envp: Argv) -> Argv {
    env.as_ref().map_or(envp, |e| e.pointers.as_ptr())
}

/// Writes this image's dump, and builds the next image's environment where it needs ours
/// (None: `envp` goes on unchanged).
fn prepare(envp: Argv) -> Option<NextEnv> {
    if !(crate::UPCALLS.owns_process)() {
        return None;
    }
    (crate::UPCALLS.before_exec)();
    // SAFETY: envp is a NULL-terminated array of C strings, per exec's contract.
    let entries = unsafe { entries(envp) };
    if !entries.iter().any(|&(_, bytes)| preloads_the_shim(bytes)) {
        return None;
    }
    let config = crate::config::config()?;
    let ours: [(&[u8], Vec<u8>, Option<&OsStr>); 2] = [
        (
            b"GPUSPY_IMAGE=",
            (crate::UPCALLS.next_image)().into_bytes(),
            config.inherited.image.as_deref(),
        ),
        (
            b"GPUSPY_OUT=",
            config.out_dir.as_os_str().as_bytes().to_vec(),
            config.inherited.out.as_deref(),
        ),
    ];
    // A value as this image found it is ours to update; any other is the program's.
    let inherited = |bytes: &[u8]| {
        ours.iter().any(|(prefix, _, found)| {
            bytes
                .strip_prefix(*prefix)
                .is_some_and(|value| found.is_some_and(|found| found.as_bytes() == value))
        })
    };
    let mut pointers: Vec<*const c_char> = entries
        .iter()
        .filter(|&&(_, bytes)| !inherited(bytes))
        .map(|&(pointer, _)| pointer)
        .collect();
    let mut added = Vec::new();
    for (prefix, value, _) in ours {
        let set = pointers.iter().any(|&p| {
            // SAFETY: an entry of envp, kept above.
            unsafe { CStr::from_ptr(p) }.to_bytes().starts_with(prefix)
        });
        if !set {
            added.push(CString::new([prefix, &value].concat()).ok()?);
        }
    }
    pointers.extend(added.iter().map(|s| s.as_ptr()));
    pointers.push(std::ptr::null());
    Some(NextEnv {
        _ours: added,
        pointers,
    })
}

/// The entries of a NULL-terminated environment, each with its bytes.
///
/// # Safety
/// `envp` is null or a NULL-terminated array of C strings that outlive the result.
unsafe fn entries<'a>(envp: Argv) -> Vec<(*const c_char, &'a [u8])> {
    let mut entries = Vec::new();
    let mut entry = envp;
    // SAFETY: the caller's contract.
    unsafe {
        while !entry.is_null() && !(*entry).is_null() {
            entries.push((*entry, CStr::from_ptr(*entry).to_bytes()));
            entry = entry.add(1);
        }
    }
    entries
}

/// Whether an environment entry is an `LD_PRELOAD` that names a `libgpuspy*` library
/// (ld.so splits the list at colons and spaces).
fn preloads_the_shim(entry: &[u8]) -> bool {
    entry.strip_prefix(b"LD_PRELOAD=").is_some_and(|list| {
        list.split(|&b| b == b':' || b == b' ').any(|path| {
            path.rsplit(|&b| b == b'/')
                .next()
                .is_some_and(|file| file.starts_with(b"libgpuspy"))
        })
    })
}

/// libc's `execve`, `execvpe`, `fexecve` and `execveat`: `exec` often comes in a forked
/// child of a multi-threaded program, where `dlsym` is not safe.
pub static NEXT: NextFns<4> = NextFns::new([c"execve", c"execvpe", c"fexecve", c"execveat"]);

fn enosys() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// `execve` and `execvpe` alike.
type ExecFn = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;
type ExecveatFn = unsafe extern "C" fn(c_int, *const c_char, Argv, Argv, c_int) -> c_int;

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

#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    flags: c_int,
) -> c_int {
    // SAFETY: libc's execveat (glibc 2.34 and later).
    let Some(real) = (unsafe { NEXT.get::<ExecveatFn>(3) }) else {
        return enosys();
    };
    let env = prepare(envp);
    // SAFETY: as in execve.
    unsafe { real(dirfd, path, argv, envp_for_next(&env, envp), flags) }
}
