//! Which line of Python made a call that blocked the host: after a sync, a copy, an
//! allocation or a free returns (never a launch), when it blocked `CALL_SITE_THRESHOLD_NS`
//! or more, or for one in `CALL_SITE_SAMPLE_EVERY` of the shorter ones (`effect.rs`), the
//! calling thread's own Python stack is read and added to a per-call-site table (sites.rs)
//! that the dump carries.
//!
//! No GIL is taken and no C-API function that allocates or needs the GIL is called. The
//! caller has usually released the GIL around the driver call (ctypes, PyTorch's
//! bindings), so the "current" thread state is NULL; `PyGILState_GetThisThreadState`
//! gives the thread's own one either way, and while the thread sits inside the call its
//! frames are frozen: nothing else unwinds them, and they keep their code objects alive.
//! The frames are read as plain memory at the offsets of the interpreter's version
//! (layout.rs; 3.13's own `_Py_DebugOffsets`), line numbers decoded from the line tables
//! (linetable.rs). Another version, no interpreter or a thread without Python: no stack,
//! a note in the dump where a version was refused.
//!
//! Cost: on calls that are not captured, a test of the effect and the duration. A
//! capture is `#[cold]`, and times itself: the dump says how long the captures took
//! (bench/callsites.sh reads it).

mod layout;
mod linetable;
mod sites;
mod walk;

#[cfg(test)]
mod fixture_tests;

use crate::effect::{CALL_SITE_SAMPLE_EVERY, CALL_SITE_THRESHOLD_NS};
use crate::resolve;
use gpuspy_format::callsites::CallSites;
use gpuspy_format::SyncCause;
use layout::{Layout, Refusal};
use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::sync::OnceLock;

/// Frames kept per stack, innermost first.
pub const MAX_FRAMES: usize = 16;

type NoArgs<R> = unsafe extern "C" fn() -> R;

struct Interpreter {
    layout: Layout,
    /// `&PyCode_Type`: every frame's code object must have it.
    code_type: usize,
    is_initialized: NoArgs<c_int>,
    this_thread_state: NoArgs<*mut c_void>,
}

enum Found {
    /// No CPython in the process.
    Absent,
    /// A CPython whose layout this shim does not know (`PY_VERSION_HEX`).
    Refused {
        version: u32,
        why: Refusal,
    },
    Ready(Interpreter),
}

/// Looked for once, at the first capture: the process has loaded its interpreter by then
/// if it ever will have one calling the driver.
static FOUND: OnceLock<Found> = OnceLock::new();

/// Captures the calling thread's Python call site of a call the recorder picked
/// (`Effect::picks_call_site`).
#[cold]
#[inline(never)]
pub fn capture(hook: usize, cause: Option<SyncCause>, ns: u64) {
    if let Found::Ready(py) = FOUND.get_or_init(find) {
        capture_in(py, hook, cause, ns);
    }
}

/// `capture`, with the interpreter found.
fn capture_in(py: &Interpreter, hook: usize, cause: Option<SyncCause>, ns: u64) {
    let weight = if ns >= CALL_SITE_THRESHOLD_NS {
        1
    } else {
        CALL_SITE_SAMPLE_EVERY
    };
    let start = std::time::Instant::now();
    // SAFETY: both are CPython functions without arguments, callable from any thread
    // without the GIL: a flag read, and a pthread TSS read.
    let tstate = unsafe {
        if (py.is_initialized)() == 0 {
            return;
        }
        (py.this_thread_state)() as usize
    };
    let mut frames = [walk::RawFrame::default(); MAX_FRAMES];
    let depth = match tstate {
        0 => 0,
        // SAFETY: the calling thread's own thread state, of the interpreter the layout is
        // for.
        t => unsafe { walk::frames(&py.layout, py.code_type, t, &mut frames) },
    };
    match frames.get(..depth) {
        Some(stack) if depth > 0 => {
            // SAFETY: this thread's own frames, still live: it is inside the call.
            unsafe { sites::add(&py.layout, hook, cause, stack, weight, ns) }
        }
        _ => sites::add_native(weight, ns),
    }
    sites::add_capture_time(start.elapsed());
}

fn symbol(name: &CStr) -> *mut c_void {
    resolve::lookup(libc::RTLD_DEFAULT, name)
}

fn find() -> Found {
    let (is_initialized, this_thread_state, code_type) = (
        symbol(c"Py_IsInitialized"),
        symbol(c"PyGILState_GetThisThreadState"),
        symbol(c"PyCode_Type"),
    );
    if is_initialized.is_null() || this_thread_state.is_null() || code_type.is_null() {
        return Found::Absent;
    }
    let version = match symbol(c"Py_Version") {
        // SAFETY: `Py_Version` (3.11+) is a `const unsigned long`.
        p if !p.is_null() => (unsafe { *(p as *const c_ulong) }) as u32,
        _ => version_from_text(symbol(c"Py_GetVersion")),
    };
    let layout = if version >> 16 >= 0x030d {
        let runtime = symbol(c"_PyRuntime");
        if runtime.is_null() {
            return Found::Refused {
                version,
                why: Refusal::NoRuntime,
            };
        }
        // SAFETY: `_PyRuntime` is far larger than the debug offsets it begins with.
        let debug =
            unsafe { std::slice::from_raw_parts(runtime as *const u8, layout::DEBUG_OFFSETS_SIZE) };
        layout::from_debug_offsets(debug, version)
    } else {
        layout::for_version(version).ok_or(Refusal::Version(version))
    };
    match layout {
        // SAFETY: symbols of these names are CPython's functions of these signatures.
        Ok(layout) => unsafe {
            Found::Ready(Interpreter {
                layout,
                code_type: code_type as usize,
                is_initialized: std::mem::transmute::<*mut c_void, NoArgs<c_int>>(is_initialized),
                this_thread_state: std::mem::transmute::<*mut c_void, NoArgs<*mut c_void>>(
                    this_thread_state,
                ),
            })
        },
        Err(why) => Found::Refused { version, why },
    }
}

/// `PY_VERSION_HEX` from `Py_GetVersion()`'s "3.10.13 (main, ...)" (before 3.11 there is
/// no `Py_Version`); 0 if unreadable.
fn version_from_text(get_version: *mut c_void) -> u32 {
    if get_version.is_null() {
        return 0;
    }
    // SAFETY: `Py_GetVersion` returns a static C string.
    let text = unsafe {
        let f = std::mem::transmute::<*mut c_void, NoArgs<*const c_char>>(get_version);
        CStr::from_ptr(f())
    };
    parse_version(text.to_bytes())
}

fn parse_version(text: &[u8]) -> u32 {
    let mut parts = text.split(|&b| b == b'.' || b == b' ').map(|p| {
        p.iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'))
    });
    let (major, minor, micro) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    (major.min(255) << 24) | (minor.min(255) << 16) | (micro.min(255) << 8)
}

fn version_text(version: u32) -> String {
    format!(
        "{}.{}.{}",
        version >> 24,
        (version >> 16) & 0xff,
        (version >> 8) & 0xff
    )
}

/// The dump's section: None where no capture ever ran or the process has no Python.
pub fn snapshot() -> Option<CallSites> {
    let (python, notes) = match FOUND.get()? {
        Found::Absent => return None,
        Found::Ready(py) => (
            version_text(py.layout.version)
                + if py.layout.free_threaded {
                    " free-threaded"
                } else {
                    ""
                },
            Vec::new(),
        ),
        Found::Refused { version, why } => {
            let v = version_text(*version);
            let note = match why {
                Refusal::Version(_) => format!(
                    "Python {v}: no frame layout known for this version; call sites not captured"
                ),
                Refusal::NoRuntime => format!(
                    "Python {v}: no _PyRuntime symbol to read the frame layout from; call sites not captured"
                ),
                Refusal::Cookie => format!(
                    "Python {v}: _PyRuntime does not begin with the \"xdebugpy\" debug offsets; call sites not captured"
                ),
            };
            (v, vec![note])
        }
    };
    let s = sites::summary();
    Some(CallSites {
        python,
        threshold_ns: CALL_SITE_THRESHOLD_NS,
        sample_every: CALL_SITE_SAMPLE_EVERY,
        captures: s.captures,
        capture_ns: s.capture_ns,
        native_calls: s.native_calls,
        native_ns: s.native_ns,
        dropped_calls: s.dropped_calls,
        dropped_ns: s.dropped_ns,
        sites: s.sites,
        notes,
    })
}

/// A fork child starts with no call sites of its own.
pub fn reset() {
    sites::reset();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_from_py_get_version() {
        assert_eq!(parse_version(b"3.10.13 (main, Jan  1 2024)"), 0x030a0d00);
        assert_eq!(parse_version(b"3.9.18+ (default)"), 0x03091200);
        assert_eq!(version_text(0x030b02f0), "3.11.2");
    }
}
