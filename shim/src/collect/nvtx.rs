//! NVTX ranges: `libgpuspy.so` is the program's NVTX injection library, so that the phases
//! and steps the program names (`torch.cuda.nvtx.range_push("step")`, Megatron's and NeMo's
//! ranges, NCCL's domain ranges) name the phases of its timeline.
//!
//! How NVTX finds us (NVIDIA/NVTX `c/include/nvtx3/nvtxDetail/nvtxInit.h`): every copy of
//! nvtx3 compiled into a library (libtorch, libnccl, ...) initialises itself at its first
//! NVTX call: it reads `NVTX_INJECTION64_PATH`, `dlopen`s that path, and calls its
//! `InitializeInjectionNvtx2(getExportTable)`, through which the tool writes its handlers
//! into that copy's slots. So the variable must be set before the first NVTX call of each
//! copy, and `InitializeInjectionNvtx2` runs once per copy. The load-time constructor sets
//! the variable to the shim's own path when it is unset (`claim_injection`); a `dlopen` of
//! an object already loaded returns it, so the handlers run in this very shim. A value
//! another tool set (nsys, a user) is never replaced: that tool gets the ranges, and the
//! dump says so (`Timeline.nvtx_other_tool`).
//!
//! The handlers run on the program's threads and are their own path, apart from the
//! driver hooks: they take no lock, call no driver function and allocate nothing (their
//! per-thread stack is a const-initialised thread-local). A range's name is copied, cut to
//! `NVTX_NAME_BYTES`, into a table of `NVTX_NAMES` (interned without a lock: a slot is
//! claimed with one atomic add; two threads that meet a new name at once may each claim
//! one, and the dump merges them). When a range ends its name's counters grow, and ranges
//! at depth 0 or 1 also go into a ring of events that the writer thread (`drain`, from
//! `timeline::tick`) and the dump read: they give the time per name per window and the
//! samples of outermost ranges.
//!
//! One stack per thread serves every domain: ranges of several domains on one thread
//! nest as they were pushed.

use crate::clock::{self, Anchor};
use crate::forklock::ForkLock;
use crate::ring::wrapped;
use gpuspy_format::timeline::{
    merge_pairs, spread, NvtxEvent, NvtxRanges, Timeline, FIRST_WINDOW_NS, NVTX_NAMES,
    NVTX_NAME_BYTES, NVTX_OTHER, SAMPLED_EVENTS, WINDOWS,
};
use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::OnceLock;

const INJECTION_VAR: &CStr = c"NVTX_INJECTION64_PATH";

// From NVIDIA/NVTX c/include/nvtx3/nvtxDetail/nvtxTypes.h: `NvtxExportTableID`,
// `NvtxCallbackModule`, `NvtxCallbackIdCore` and `NvtxCallbackIdCore2`.
const NVTX_ETID_CALLBACKS: u32 = 1;
const NVTX_CB_MODULE_CORE: u32 = 1;
const NVTX_CB_MODULE_CORE2: u32 = 5;
const NVTX_CBID_CORE_RANGE_START_EX: usize = 4;
const NVTX_CBID_CORE_RANGE_START_A: usize = 5;
const NVTX_CBID_CORE_RANGE_START_W: usize = 6;
const NVTX_CBID_CORE_RANGE_END: usize = 7;
const NVTX_CBID_CORE_RANGE_PUSH_EX: usize = 8;
const NVTX_CBID_CORE_RANGE_PUSH_A: usize = 9;
const NVTX_CBID_CORE_RANGE_PUSH_W: usize = 10;
const NVTX_CBID_CORE_RANGE_POP: usize = 11;
const NVTX_CBID_CORE2_DOMAIN_RANGE_START_EX: usize = 2;
const NVTX_CBID_CORE2_DOMAIN_RANGE_END: usize = 3;
const NVTX_CBID_CORE2_DOMAIN_RANGE_PUSH_EX: usize = 4;
const NVTX_CBID_CORE2_DOMAIN_RANGE_POP: usize = 5;
const NVTX_CBID_CORE2_DOMAIN_REGISTER_STRING_A: usize = 10;
const NVTX_CBID_CORE2_DOMAIN_REGISTER_STRING_W: usize = 11;

// From NVIDIA/NVTX c/include/nvtx3/nvToolsExt.h: `nvtxMessageType_t`.
const NVTX_MESSAGE_TYPE_ASCII: i32 = 1;
const NVTX_MESSAGE_TYPE_UNICODE: i32 = 2;
const NVTX_MESSAGE_TYPE_REGISTERED: i32 = 3;

/// `NvtxExportTableCallbacks` (nvtxTypes.h): `GetModuleFunctionTable` hands out a module's
/// table, an array of pointers to the function-pointer slots, and its length.
#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table:
        Option<unsafe extern "C" fn(u32, *mut *mut *mut *const c_void, *mut c_uint) -> c_int>,
}

/// `nvtxEventAttributes_v2` (nvToolsExt.h), as far as the message; `size` says how much of
/// it the caller filled in.
#[repr(C)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_void,
}

type GetExportTable = unsafe extern "C" fn(u32) -> *const c_void;

/// What NVTX calls in the injection library, once per copy of nvtx3 in the process.
///
/// # Safety
/// `get_export_table` is nvtx3's `nvtxGetExportTable` (or null), per the injection contract.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: Option<GetExportTable>,
) -> c_int {
    // A shim that does not record (disabled, or loaded only because the variable names it:
    // a child whose launcher dropped LD_PRELOAD) leaves every slot NVTX's no-op.
    let (true, Some(get_export_table)) = (INJECTING.load(Relaxed), get_export_table) else {
        return 0;
    };
    // SAFETY: NVTX's own export-table getter, called as documented.
    let callbacks = unsafe { get_export_table(NVTX_ETID_CALLBACKS) } as *const ExportTableCallbacks;
    // SAFETY: a non-null answer is the copy's `NvtxExportTableCallbacks`, alive for the process.
    let Some(get_table) = (unsafe { callbacks.as_ref() }).and_then(|c| c.get_module_function_table)
    else {
        return 0;
    };
    let core: [(usize, *const c_void); 8] = [
        (
            NVTX_CBID_CORE_RANGE_START_EX,
            range_start_ex as *const c_void,
        ),
        (NVTX_CBID_CORE_RANGE_START_A, range_start_a as *const c_void),
        (NVTX_CBID_CORE_RANGE_START_W, range_start_w as *const c_void),
        (NVTX_CBID_CORE_RANGE_END, range_end as *const c_void),
        (NVTX_CBID_CORE_RANGE_PUSH_EX, range_push_ex as *const c_void),
        (NVTX_CBID_CORE_RANGE_PUSH_A, range_push_a as *const c_void),
        (NVTX_CBID_CORE_RANGE_PUSH_W, range_push_w as *const c_void),
        (NVTX_CBID_CORE_RANGE_POP, range_pop as *const c_void),
    ];
    let core2: [(usize, *const c_void); 6] = [
        (
            NVTX_CBID_CORE2_DOMAIN_RANGE_START_EX,
            domain_range_start_ex as *const c_void,
        ),
        (
            NVTX_CBID_CORE2_DOMAIN_RANGE_END,
            domain_range_end as *const c_void,
        ),
        (
            NVTX_CBID_CORE2_DOMAIN_RANGE_PUSH_EX,
            domain_range_push_ex as *const c_void,
        ),
        (
            NVTX_CBID_CORE2_DOMAIN_RANGE_POP,
            domain_range_pop as *const c_void,
        ),
        (
            NVTX_CBID_CORE2_DOMAIN_REGISTER_STRING_A,
            register_string_a as *const c_void,
        ),
        (
            NVTX_CBID_CORE2_DOMAIN_REGISTER_STRING_W,
            register_string_w as *const c_void,
        ),
    ];
    for (module, handlers) in [
        (NVTX_CB_MODULE_CORE, &core[..]),
        (NVTX_CB_MODULE_CORE2, &core2[..]),
    ] {
        let mut table: *mut *mut *const c_void = std::ptr::null_mut();
        let mut size: c_uint = 0;
        // SAFETY: the copy's own getter, with valid out-pointers.
        if unsafe { get_table(module, &mut table, &mut size) } == 0 || table.is_null() {
            return 0;
        }
        for &(id, handler) in handlers {
            if id >= size as usize {
                continue;
            }
            // SAFETY: `table` has `size` entries (nvtxImpl.h, nvtxEtiGetModuleFunctionTable),
            // each a pointer to one of the copy's function-pointer slots.
            unsafe {
                let slot = *table.add(id);
                if !slot.is_null() {
                    *slot = handler;
                }
            }
        }
    }
    1
}

/// Whether `InitializeInjectionNvtx2` installs the handlers: this shim records and was
/// preloaded (set at load).
static INJECTING: AtomicBool = AtomicBool::new(false);

/// At load, when recording is on: if `LD_PRELOAD` loaded this shim, makes it the NVTX
/// injection library when no other tool is, and remembers the tool that is. Runs in the
/// constructor, before `main` and any NVTX call, while the process has one thread.
pub fn claim_injection() {
    let own = own_path();
    let preloaded = std::env::var("LD_PRELOAD").is_ok_and(|list| {
        list.split([' ', ':'])
            .any(|entry| own.as_ref().is_some_and(|own| same_file(own, entry)))
    });
    if !preloaded {
        return;
    }
    INJECTING.store(true, Relaxed);
    // SAFETY: getenv of a constant name; single-threaded at load.
    let current = unsafe { libc::getenv(INJECTION_VAR.as_ptr()) };
    if !current.is_null() {
        // SAFETY: getenv returns a C string.
        let current = unsafe { CStr::from_ptr(current) }
            .to_string_lossy()
            .into_owned();
        if !current.is_empty() {
            let ours = own.as_ref().is_some_and(|own| same_file(own, &current));
            if !ours {
                let _ = OTHER_TOOL.set(current);
            }
            return;
        }
    }
    let Some(own) = own.and_then(|p| std::ffi::CString::new(p).ok()) else {
        return;
    };
    // SAFETY: two C strings; single-threaded at load.
    unsafe { libc::setenv(INJECTION_VAR.as_ptr(), own.as_ptr(), 1) };
}

static OTHER_TOOL: OnceLock<String> = OnceLock::new();

/// The absolute path of this shim, as the dynamic loader found it.
fn own_path() -> Option<String> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address of one of our functions, and a valid Dl_info to fill.
    if unsafe { libc::dladdr(claim_injection as *const c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: dladdr's file name is a C string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_str().ok()?;
    let path = std::fs::canonicalize(name).ok()?;
    path.to_str().map(str::to_string)
}

fn same_file(a: &str, b: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

// ---- The handlers. Each returns what NVTX's API documents (nvToolsExt.h): a push the
// level of the range it opened, a pop the level of the range it closed, negative when
// there was none; a start the range's id, 0 when it is not tracked.

unsafe extern "C" fn range_push_a(message: *const c_char) -> c_int {
    // SAFETY: NVTX passes a C string or null.
    push(unsafe { intern_c(message) })
}

unsafe extern "C" fn range_push_w(message: *const libc::wchar_t) -> c_int {
    // SAFETY: NVTX passes a wide C string or null.
    push(unsafe { intern_wide(message) })
}

unsafe extern "C" fn range_push_ex(attributes: *const EventAttributes) -> c_int {
    // SAFETY: NVTX passes the caller's attributes or null.
    push(unsafe { intern_attributes(attributes) })
}

unsafe extern "C" fn domain_range_push_ex(
    _domain: *const c_void,
    attributes: *const EventAttributes,
) -> c_int {
    // SAFETY: as above.
    push(unsafe { intern_attributes(attributes) })
}

extern "C" fn range_pop() -> c_int {
    pop()
}

extern "C" fn domain_range_pop(_domain: *const c_void) -> c_int {
    pop()
}

unsafe extern "C" fn range_start_a(message: *const c_char) -> u64 {
    // SAFETY: as above.
    start(unsafe { intern_c(message) })
}

unsafe extern "C" fn range_start_w(message: *const libc::wchar_t) -> u64 {
    // SAFETY: as above.
    start(unsafe { intern_wide(message) })
}

unsafe extern "C" fn range_start_ex(attributes: *const EventAttributes) -> u64 {
    // SAFETY: as above.
    start(unsafe { intern_attributes(attributes) })
}

unsafe extern "C" fn domain_range_start_ex(
    _domain: *const c_void,
    attributes: *const EventAttributes,
) -> u64 {
    // SAFETY: as above.
    start(unsafe { intern_attributes(attributes) })
}

extern "C" fn range_end(id: u64) {
    end(id)
}

extern "C" fn domain_range_end(_domain: *const c_void, id: u64) {
    end(id)
}

/// A registered string's handle is its name's slot + 1, which `intern_attributes` reads
/// back from a `NVTX_MESSAGE_TYPE_REGISTERED` message.
unsafe extern "C" fn register_string_a(_domain: *const c_void, s: *const c_char) -> *const c_void {
    // SAFETY: as above.
    (unsafe { intern_c(s) } + 1) as *const c_void
}

unsafe extern "C" fn register_string_w(
    _domain: *const c_void,
    s: *const libc::wchar_t,
) -> *const c_void {
    // SAFETY: as above.
    (unsafe { intern_wide(s) } + 1) as *const c_void
}

// ---- Names.

/// The slot of ranges whose name did not fit in the table.
const OTHER: usize = NVTX_NAMES - 1;
const EMPTY: u32 = 0;
const READY: u32 = 1;

struct Name {
    state: AtomicU32,
    hash: AtomicU64,
    len: AtomicUsize,
    /// Written once, by the thread that claimed the slot, before `state` is `READY`.
    bytes: UnsafeCell<[u8; NVTX_NAME_BYTES]>,
    /// Ranges ended, outermost among them, their total ticks, the first start and last end
    /// (ticks; `u64::MAX` and 0 until one ended).
    count: AtomicU64,
    outermost: AtomicU64,
    ticks: AtomicU64,
    first_start: AtomicU64,
    last_end: AtomicU64,
}

// SAFETY: `bytes` is written only before the slot is published (`state`), read only after.
unsafe impl Sync for Name {}

impl Name {
    const fn new() -> Name {
        Name {
            state: AtomicU32::new(EMPTY),
            hash: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            bytes: UnsafeCell::new([0; NVTX_NAME_BYTES]),
            count: AtomicU64::new(0),
            outermost: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            first_start: AtomicU64::new(u64::MAX),
            last_end: AtomicU64::new(0),
        }
    }

    /// The name, if the slot is published.
    fn get(&self) -> Option<&[u8]> {
        if self.state.load(Acquire) != READY {
            return None;
        }
        let len = self.len.load(Relaxed).min(NVTX_NAME_BYTES);
        // SAFETY: published, so no longer written.
        unsafe { (&*self.bytes.get()).get(..len) }
    }

    fn clear(&self) {
        for counter in [&self.count, &self.outermost, &self.ticks, &self.last_end] {
            counter.store(0, Relaxed);
        }
        self.first_start.store(u64::MAX, Relaxed);
    }
}

static NAMES: [Name; NVTX_NAMES] = [const { Name::new() }; NVTX_NAMES];
/// Slots claimed so far (may run past `OTHER`: those names went to `OTHER`).
static CLAIMED: AtomicUsize = AtomicUsize::new(0);

/// The slot of `name`, cut to `NVTX_NAME_BYTES` at a character boundary.
fn intern(name: &[u8]) -> usize {
    let mut len = name.len().min(NVTX_NAME_BYTES);
    while len > 0 && name.get(len).is_some_and(|b| b & 0xc0 == 0x80) {
        len -= 1;
    }
    let name = name.get(..len).unwrap_or_default();
    // FNV-1a, never 0.
    let hash = name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    let claimed = CLAIMED.load(Acquire);
    for (i, slot) in NAMES.iter().enumerate().take(claimed.min(OTHER)) {
        if slot.hash.load(Relaxed) == hash && slot.get() == Some(name) {
            return i;
        }
    }
    // A full table is not written again: a flood of new names (`emit_nvtx`'s per-op
    // strings) leaves the shared counter's cache line alone.
    if claimed >= OTHER {
        return OTHER;
    }
    let i = CLAIMED.fetch_add(1, AcqRel);
    let Some(slot) = NAMES.get(i).filter(|_| i < OTHER) else {
        return OTHER;
    };
    // SAFETY: slot `i` is ours alone until `state` publishes it.
    if let Some(bytes) = unsafe { (&mut *slot.bytes.get()).get_mut(..len) } {
        bytes.copy_from_slice(name);
    }
    slot.len.store(len, Relaxed);
    slot.hash.store(hash, Relaxed);
    slot.state.store(READY, Release);
    i
}

/// The slot of a C string's name ("" for null).
///
/// # Safety
/// `s` is null or a C string.
unsafe fn intern_c(s: *const c_char) -> usize {
    if s.is_null() {
        return intern(b"");
    }
    let mut buf = [0u8; NVTX_NAME_BYTES + 1];
    let mut n = 0;
    // Read no further than we keep (+1, so that `intern` sees a cut character).
    for byte in buf.iter_mut() {
        // SAFETY: within the string, whose terminator ends the loop.
        let b = unsafe { *s.add(n) } as u8;
        if b == 0 {
            break;
        }
        *byte = b;
        n += 1;
    }
    intern(buf.get(..n).unwrap_or_default())
}

/// The slot of a wide string's name, as UTF-8 ("" for null).
///
/// # Safety
/// `s` is null or a NUL-terminated `wchar_t` string.
unsafe fn intern_wide(s: *const libc::wchar_t) -> usize {
    let mut buf = [0u8; NVTX_NAME_BYTES + 4];
    let mut n = 0;
    let mut i = 0;
    while !s.is_null() && n <= NVTX_NAME_BYTES {
        // SAFETY: within the string, whose terminator ends the loop.
        let w = unsafe { *s.add(i) };
        if w == 0 {
            break;
        }
        let c = char::from_u32(w as u32).unwrap_or(char::REPLACEMENT_CHARACTER);
        // At least 4 bytes are left: `n` is at most `NVTX_NAME_BYTES` here.
        let Some(rest) = buf.get_mut(n..) else { break };
        n += c.encode_utf8(rest).len();
        i += 1;
    }
    intern(buf.get(..n).unwrap_or_default())
}

/// The slot of an event's message.
///
/// # Safety
/// `attributes` is null or an `nvtxEventAttributes_t` whose message matches its type.
unsafe fn intern_attributes(attributes: *const EventAttributes) -> usize {
    // SAFETY: per the contract.
    let Some(a) = (unsafe { attributes.as_ref() }) else {
        return intern(b"");
    };
    if usize::from(a.size) < std::mem::size_of::<EventAttributes>() {
        return intern(b"");
    }
    // SAFETY: per the contract: the message is of its type.
    unsafe {
        match a.message_type {
            NVTX_MESSAGE_TYPE_ASCII => intern_c(a.message as *const c_char),
            NVTX_MESSAGE_TYPE_UNICODE => intern_wide(a.message as *const libc::wchar_t),
            NVTX_MESSAGE_TYPE_REGISTERED => (a.message as usize).wrapping_sub(1).min(OTHER),
            _ => intern(b""),
        }
    }
}

// ---- Ranges.

/// Ranges a thread can have open and still be timed; deeper ones are counted as lost.
const STACK_DEPTH: usize = 32;

struct Stack {
    depth: Cell<usize>,
    names: [Cell<u8>; STACK_DEPTH],
    starts: [Cell<u64>; STACK_DEPTH],
}

thread_local! {
    static STACK: Stack = const {
        Stack {
            depth: Cell::new(0),
            names: [const { Cell::new(0) }; STACK_DEPTH],
            starts: [const { Cell::new(0) }; STACK_DEPTH],
        }
    };
}

/// Ranges not timed (too deep, no free cross-thread slot).
static LOST: AtomicU64 = AtomicU64::new(0);

fn now() -> Option<u64> {
    crate::switch::recording().map(clock::Source::ticks)
}

fn push(name: usize) -> c_int {
    let Some(start) = now() else {
        return 0;
    };
    STACK
        .try_with(|s| {
            let depth = s.depth.get();
            match (s.names.get(depth), s.starts.get(depth)) {
                (Some(n), Some(t)) => {
                    n.set(name as u8);
                    t.set(start);
                }
                _ => {
                    LOST.fetch_add(1, Relaxed);
                }
            }
            s.depth.set(depth + 1);
            depth as c_int
        })
        .unwrap_or(-1)
}

fn pop() -> c_int {
    let Some(end) = now() else {
        return 0;
    };
    STACK
        .try_with(|s| {
            let Some(depth) = s.depth.get().checked_sub(1) else {
                return -1;
            };
            s.depth.set(depth);
            if let (Some(n), Some(t)) = (s.names.get(depth), s.starts.get(depth)) {
                ended(usize::from(n.get()), depth, t.get(), end);
            }
            depth as c_int
        })
        .unwrap_or(-1)
}

/// Files one range that ended.
fn ended(name: usize, depth: usize, start: u64, end: u64) {
    let Some(n) = NAMES.get(name) else {
        return;
    };
    n.count.fetch_add(1, Relaxed);
    if depth == 0 {
        n.outermost.fetch_add(1, Relaxed);
    }
    n.ticks.fetch_add(end.saturating_sub(start), Relaxed);
    n.first_start.fetch_min(start, Relaxed);
    n.last_end.fetch_max(end, Relaxed);
    if depth < RING_DEPTH {
        RING.push(name, depth, start, end);
    }
}

/// Start/end ranges may end on another thread: they are kept by id in a fixed table.
const OPEN_RANGES: usize = 64;
const FREE: u64 = 0;
const CLAIMING: u64 = u64::MAX;

struct Open {
    /// FREE, CLAIMING, or the id of the range it holds.
    id: AtomicU64,
    name: AtomicUsize,
    start: AtomicU64,
}

static OPEN: [Open; OPEN_RANGES] = [const {
    Open {
        id: AtomicU64::new(FREE),
        name: AtomicUsize::new(0),
        start: AtomicU64::new(0),
    }
}; OPEN_RANGES];
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn start(name: usize) -> u64 {
    let Some(start) = now() else {
        return 0;
    };
    for (i, open) in OPEN.iter().enumerate() {
        if open
            .id
            .compare_exchange(FREE, CLAIMING, Acquire, Relaxed)
            .is_ok()
        {
            open.name.store(name, Relaxed);
            open.start.store(start, Relaxed);
            // The slot's index in the low bits finds it again; never FREE nor CLAIMING.
            let id = (NEXT_ID.fetch_add(1, Relaxed) % (u64::MAX / OPEN_RANGES as u64 - 1) + 1)
                * OPEN_RANGES as u64
                + i as u64;
            open.id.store(id, Release);
            return id;
        }
    }
    LOST.fetch_add(1, Relaxed);
    0
}

fn end(id: u64) {
    let Some(end) = now() else {
        return;
    };
    let Some(open) = OPEN.get((id % OPEN_RANGES as u64) as usize) else {
        return;
    };
    if id == FREE
        || id == CLAIMING
        || open
            .id
            .compare_exchange(id, CLAIMING, Acquire, Relaxed)
            .is_err()
    {
        return;
    }
    let (name, start) = (open.name.load(Relaxed), open.start.load(Relaxed));
    open.id.store(FREE, Release);
    ended(name, 0, start, end);
}

// ---- The event ring: ranges at depth < RING_DEPTH, for the windows and the samples.

const RING_DEPTH: usize = 2;
/// 40,000 shallow ranges a second between two reads (`timeline::DRAIN_NS` apart).
const RING_EVENTS: usize = 4096;

struct RingSlot {
    /// Event `n` is complete in this slot when `seq` is `n + 1`; 0 while being written.
    seq: AtomicU64,
    name_depth: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
}

struct Ring {
    pushed: AtomicU64,
    slots: [RingSlot; RING_EVENTS],
}

static RING: Ring = Ring {
    pushed: AtomicU64::new(0),
    slots: [const {
        RingSlot {
            seq: AtomicU64::new(0),
            name_depth: AtomicU64::new(0),
            start: AtomicU64::new(0),
            end: AtomicU64::new(0),
        }
    }; RING_EVENTS],
};

impl Ring {
    /// Any thread may push (a seqlock per slot).
    fn push(&self, name: usize, depth: usize, start: u64, end: u64) {
        let n = self.pushed.fetch_add(1, Relaxed);
        let slot = wrapped(&self.slots, n as usize);
        slot.seq.store(0, Relaxed);
        fence(Release);
        slot.name_depth
            .store((name as u64) << 8 | depth as u64, Relaxed);
        slot.start.store(start, Relaxed);
        slot.end.store(end, Relaxed);
        slot.seq.store(n + 1, Release);
    }

    /// The complete events from position `from` on, as `(name, depth, start, end)`;
    /// returns the next position to read and how many events were lost (overwritten).
    /// Stops at an event still being written.
    fn read(&self, mut from: u64, out: &mut Vec<(usize, usize, u64, u64)>) -> (u64, u64) {
        let pushed = self.pushed.load(Acquire);
        let mut lost = 0;
        if pushed.saturating_sub(from) > RING_EVENTS as u64 {
            lost += pushed - from - RING_EVENTS as u64;
            from = pushed - RING_EVENTS as u64;
        }
        while from < pushed {
            let slot = wrapped(&self.slots, from as usize);
            let seq = slot.seq.load(Acquire);
            if seq < from + 1 {
                break;
            }
            let (name_depth, start, end) = (
                slot.name_depth.load(Relaxed),
                slot.start.load(Relaxed),
                slot.end.load(Relaxed),
            );
            fence(Acquire);
            if seq != from + 1 || slot.seq.load(Relaxed) != seq {
                lost += 1;
            } else {
                out.push((
                    (name_depth >> 8) as usize,
                    (name_depth & 0xff) as usize,
                    start,
                    end,
                ));
            }
            from += 1;
        }
        (from, lost)
    }
}

/// The ring's events filed: time per name per window, and the outermost samples.
#[derive(Default)]
struct Collector {
    read: u64,
    origin: u64,
    window_ns: u64,
    /// Per name slot: time in ranges, and ranges that ended, per window.
    series: Vec<Vec<u64>>,
    ends: Vec<Vec<u64>>,
    longest: Vec<(usize, u64, u64)>,
    recent: VecDeque<(usize, u64, u64)>,
    lost: u64,
}

static COLLECTOR: ForkLock<Collector> = ForkLock::new();

impl Collector {
    fn merge_pairs(&mut self) {
        self.series.iter_mut().for_each(merge_pairs);
        self.ends.iter_mut().for_each(merge_pairs);
        self.window_ns *= 2;
    }

    fn drain(&mut self) {
        if self.origin == 0 {
            self.origin = crate::switch::start_unix_ns();
            self.window_ns = FIRST_WINDOW_NS;
            self.series = vec![Vec::new(); NVTX_NAMES];
            self.ends = vec![Vec::new(); NVTX_NAMES];
            if self.origin == 0 {
                return;
            }
        }
        let anchor = Anchor::now();
        let mut events = Vec::new();
        let (next, lost) = RING.read(self.read, &mut events);
        self.read = next;
        self.lost += lost;
        for (name, depth, start, end) in events {
            let start_unix_ns = anchor.unix_ns(start);
            let end_unix_ns = start_unix_ns + anchor.ns_between(start, end);
            self.file(name, depth, start_unix_ns, end_unix_ns);
        }
    }

    fn file(&mut self, name: usize, depth: usize, start: u64, end: u64) {
        while end.saturating_sub(self.origin) / self.window_ns >= WINDOWS as u64 {
            self.merge_pairs();
        }
        if let (Some(series), Some(ends)) = (self.series.get_mut(name), self.ends.get_mut(name)) {
            spread(series, self.origin, self.window_ns, start, end);
            let slot = (end.saturating_sub(self.origin) / self.window_ns) as usize;
            if ends.len() <= slot {
                ends.resize(slot + 1, 0);
            }
            if let Some(n) = ends.get_mut(slot) {
                *n += 1;
            }
        }
        if depth > 0 {
            return;
        }
        let event = (name, start, end);
        let length = |e: &(usize, u64, u64)| e.2 - e.1;
        let at = self
            .longest
            .partition_point(|o| length(o) >= length(&event));
        if at < SAMPLED_EVENTS {
            self.longest.insert(at, event);
            self.longest.truncate(SAMPLED_EVENTS);
        }
        self.recent.push_back(event);
        if self.recent.len() > SAMPLED_EVENTS {
            self.recent.pop_front();
        }
    }
}

/// The writer thread's regular read of the ring.
pub fn drain() {
    COLLECTOR.lock().drain();
}

/// Fills the NVTX part of a dump's timeline, whose host table is complete.
pub fn fill(timeline: &mut Timeline) {
    timeline.nvtx_other_tool = OTHER_TOOL.get().cloned();
    // Only the writer thread takes the lock, between its own sleeps: a dump never waits
    // long, unless the process forked while it held it (then the child has no ranges yet).
    let Some(mut c) = COLLECTOR.lock_within(std::time::Duration::from_millis(100)) else {
        return;
    };
    c.drain();
    if c.origin == 0 {
        return;
    }
    // Both tables double from FIRST_WINDOW_NS at the process's start: bring the finer one
    // to the coarser width.
    while c.window_ns < timeline.window_ns {
        c.merge_pairs();
    }
    while timeline.window_ns < c.window_ns {
        timeline.merge_pairs();
    }
    let windows = timeline.host.calls.len();
    let anchor = Anchor::now();
    let q32 = crate::switch::ns_per_tick_q32();
    let name_of = |slot: usize| match slot {
        OTHER => NVTX_OTHER.to_string(),
        _ => String::from_utf8_lossy(NAMES.get(slot).and_then(Name::get).unwrap_or_default())
            .into_owned(),
    };
    let mut ranges: Vec<NvtxRanges> = Vec::new();
    for (slot, n) in NAMES.iter().enumerate() {
        let count = n.count.load(Relaxed);
        if count == 0 {
            continue;
        }
        let to_width = |s: &Vec<u64>| {
            let mut s = s.clone();
            if !s.is_empty() {
                s.resize(windows, 0);
            }
            s
        };
        let this = NvtxRanges {
            name: name_of(slot),
            count,
            outermost: n.outermost.load(Relaxed),
            total_ns: clock::ticks_to_ns(n.ticks.load(Relaxed), q32),
            // A range ending as the dump reads may have its count in and its start not yet.
            first_start_unix_ns: anchor
                .unix_ns(n.first_start.load(Relaxed).min(n.last_end.load(Relaxed))),
            last_end_unix_ns: anchor.unix_ns(n.last_end.load(Relaxed)),
            ns: c.series.get(slot).map(to_width).unwrap_or_default(),
            ends: c.ends.get(slot).map(to_width).unwrap_or_default(),
        };
        // Two threads that met a new name at once claimed a slot each.
        match ranges.iter_mut().find(|r| r.name == this.name) {
            Some(r) => merge(r, this),
            None => ranges.push(this),
        }
    }
    timeline.nvtx = ranges;
    let event = |&(slot, start_unix_ns, end_unix_ns): &(usize, u64, u64)| NvtxEvent {
        name: name_of(slot),
        start_unix_ns,
        end_unix_ns,
    };
    timeline.nvtx_longest = c.longest.iter().map(event).collect();
    timeline.nvtx_recent = c.recent.iter().map(event).collect();
    timeline.nvtx_lost = c.lost + LOST.load(Relaxed);
}

fn merge(into: &mut NvtxRanges, other: NvtxRanges) {
    into.count += other.count;
    into.outermost += other.outermost;
    into.total_ns += other.total_ns;
    into.first_start_unix_ns = into.first_start_unix_ns.min(other.first_start_unix_ns);
    into.last_end_unix_ns = into.last_end_unix_ns.max(other.last_end_unix_ns);
    for (into, other) in [(&mut into.ns, other.ns), (&mut into.ends, other.ends)] {
        if into.len() < other.len() {
            into.resize(other.len(), 0);
        }
        for (a, b) in into.iter_mut().zip(other) {
            *a += b;
        }
    }
}

/// Fork child: the parent's ranges are the parent's. The names stay (they are only names),
/// and so does the forking thread's stack: ranges it had open end in the child.
pub fn on_fork_child() {
    NAMES.iter().for_each(Name::clear);
    LOST.store(0, Relaxed);
    COLLECTOR.reset_in_child();
    let pushed = RING.pushed.load(Relaxed);
    COLLECTOR.lock().read = pushed;
}

/// One copy of nvtx3 as the shim sees it (nvtxImpl.h's tables and export getter), for the
/// tests: `install` runs `InitializeInjectionNvtx2` on it, `slot` reads what it installed.
#[cfg(test)]
pub mod fake_copy {
    use super::*;
    use std::sync::atomic::AtomicPtr;

    const SIZE: usize = 16;
    static SLOTS: [[AtomicPtr<c_void>; SIZE + 1]; 2] =
        [const { [const { AtomicPtr::new(std::ptr::null_mut()) }; SIZE + 1] }; 2];
    static TABLES: [[AtomicPtr<AtomicPtr<c_void>>; SIZE + 1]; 2] =
        [const { [const { AtomicPtr::new(std::ptr::null_mut()) }; SIZE + 1] }; 2];

    unsafe extern "C" fn get_module_function_table(
        module: u32,
        out_table: *mut *mut *mut *const c_void,
        out_size: *mut c_uint,
    ) -> c_int {
        let m = match module {
            NVTX_CB_MODULE_CORE => 0,
            NVTX_CB_MODULE_CORE2 => 1,
            _ => return 0,
        };
        for (table, slot) in TABLES[m].iter().zip(&SLOTS[m]).take(SIZE) {
            table.store(slot as *const _ as *mut _, Relaxed);
        }
        // SAFETY: the shim passes valid out-pointers.
        unsafe {
            *out_table = TABLES[m].as_ptr() as *mut *mut *const c_void;
            *out_size = SIZE as c_uint;
        }
        1
    }

    static CALLBACKS: ExportTableCallbacks = ExportTableCallbacks {
        struct_size: std::mem::size_of::<ExportTableCallbacks>(),
        get_module_function_table: Some(get_module_function_table),
    };

    unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
        match id {
            NVTX_ETID_CALLBACKS => &CALLBACKS as *const _ as *const c_void,
            _ => std::ptr::null(),
        }
    }

    /// Runs the injection on the copy; returns what it returned.
    pub fn install() -> c_int {
        // What `claim_injection` says of a preloaded, recording shim.
        super::INJECTING.store(true, Relaxed);
        // SAFETY: a getter that follows the contract.
        unsafe { InitializeInjectionNvtx2(Some(get_export_table)) }
    }

    /// The handler installed for callback `id` of CORE (`core2` false) or CORE2.
    pub fn slot(core2: bool, id: usize) -> *mut c_void {
        SLOTS[usize::from(core2)][id].load(Relaxed)
    }

    pub fn push_a(name: &CStr) -> c_int {
        // SAFETY: the RangePushA slot holds a handler of that signature.
        unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_char) -> c_int>(slot(
                false,
                NVTX_CBID_CORE_RANGE_PUSH_A,
            ))(name.as_ptr())
        }
    }

    pub fn pop() -> c_int {
        // SAFETY: the RangePop slot holds a handler of that signature.
        unsafe {
            std::mem::transmute::<*mut c_void, extern "C" fn() -> c_int>(slot(
                false,
                NVTX_CBID_CORE_RANGE_POP,
            ))()
        }
    }

    pub fn start_a(name: &CStr) -> u64 {
        // SAFETY: the RangeStartA slot holds a handler of that signature.
        unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_char) -> u64>(slot(
                false,
                NVTX_CBID_CORE_RANGE_START_A,
            ))(name.as_ptr())
        }
    }

    pub fn end(id: u64) {
        // SAFETY: the RangeEnd slot holds a handler of that signature.
        unsafe {
            std::mem::transmute::<*mut c_void, extern "C" fn(u64)>(slot(
                false,
                NVTX_CBID_CORE_RANGE_END,
            ))(id)
        }
    }

    pub fn domain_push(name: &CStr) -> c_int {
        let attributes = EventAttributes {
            version: 3,
            size: std::mem::size_of::<EventAttributes>() as u16,
            category: 0,
            color_type: 0,
            color: 0,
            payload_type: 0,
            reserved0: 0,
            payload: 0,
            message_type: NVTX_MESSAGE_TYPE_ASCII,
            message: name.as_ptr() as *const c_void,
        };
        type PushEx = unsafe extern "C" fn(*const c_void, *const EventAttributes) -> c_int;
        // SAFETY: the DomainRangePushEx slot holds a handler of that signature.
        unsafe {
            std::mem::transmute::<*mut c_void, PushEx>(slot(
                true,
                NVTX_CBID_CORE2_DOMAIN_RANGE_PUSH_EX,
            ))(std::ptr::null(), &attributes)
        }
    }

    pub fn domain_pop() -> c_int {
        // SAFETY: the DomainRangePop slot holds a handler of that signature.
        unsafe {
            std::mem::transmute::<*mut c_void, extern "C" fn(*const c_void) -> c_int>(slot(
                true,
                NVTX_CBID_CORE2_DOMAIN_RANGE_POP,
            ))(std::ptr::null())
        }
    }
}

/// Held by every test that uses the handlers: the name table, the open-range slots and
/// the lost counter are the process's, and the test harness runs tests in parallel.
#[cfg(test)]
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::fake_copy::{self as copy, domain_pop, domain_push, install, push_a, slot, start_a};
    use super::*;

    fn counts(name: &str) -> (u64, u64) {
        let slot = intern(name.as_bytes());
        let n = &NAMES[slot];
        (n.count.load(Relaxed), n.outermost.load(Relaxed))
    }

    /// One test, run in order: the name table and the stacks are the process's.
    #[test]
    fn handlers_count_nest_cut_and_bound() {
        let _serial = serial();
        let out = std::env::temp_dir().join(format!("gpuspy-nvtx-{}", std::process::id()));
        std::env::set_var("GPUSPY_OUT", &out);
        assert_eq!(install(), 1);
        for id in [4, 5, 6, 7, 8, 9, 10, 11] {
            assert!(!slot(false, id).is_null(), "CORE {id}");
        }
        for id in [2, 3, 4, 5, 10, 11] {
            assert!(!slot(true, id).is_null(), "CORE2 {id}");
        }
        // Marks and names of threads and categories stay NVTX's no-ops.
        for id in [1, 2, 3, 12, 14] {
            assert!(slot(false, id).is_null(), "CORE {id}");
        }

        // Levels as NVTX documents them, one stack for both domains.
        assert_eq!(push_a(c"unit-outer"), 0);
        assert_eq!(domain_push(c"unit-inner"), 1);
        assert_eq!(domain_pop(), 1);
        assert_eq!(copy::pop(), 0);
        assert_eq!(copy::pop(), -1);
        assert_eq!(counts("unit-outer"), (1, 1));
        assert_eq!(counts("unit-inner"), (1, 0));

        // Too deep: counted as lost, the levels still right.
        let lost = LOST.load(Relaxed);
        for depth in 0..STACK_DEPTH + 8 {
            assert_eq!(push_a(c"unit-deep"), depth as c_int);
        }
        for depth in (0..STACK_DEPTH + 8).rev() {
            assert_eq!(copy::pop(), depth as c_int);
        }
        assert_eq!(LOST.load(Relaxed) - lost, 8);
        assert_eq!(counts("unit-deep"), (STACK_DEPTH as u64, 1));

        // Start/end ranges by id, each ended once; past the open slots, id 0 and lost.
        let id = start_a(c"unit-start");
        assert_ne!(id, 0);
        copy::end(id);
        copy::end(id);
        assert_eq!(counts("unit-start"), (1, 1));
        let ids: Vec<u64> = (0..OPEN_RANGES).map(|_| start_a(c"unit-open")).collect();
        assert!(ids.iter().all(|&id| id != 0));
        assert_eq!(start_a(c"unit-open"), 0);
        ids.into_iter().for_each(copy::end);
        assert_eq!(
            counts("unit-open"),
            (OPEN_RANGES as u64, OPEN_RANGES as u64)
        );
        assert_eq!(LOST.load(Relaxed) - lost, 9);

        // Long names are cut at a character boundary: 31 two-byte characters fit in 63.
        let long = "é".repeat(50);
        let cut = intern(long.as_bytes());
        assert_eq!(NAMES[cut].get(), Some("é".repeat(31).as_bytes()));
        assert_eq!(intern("é".repeat(40).as_bytes()), cut);

        // A registered string's handle finds its name again.
        // SAFETY: a C string.
        let handle = unsafe { register_string_a(std::ptr::null(), c"unit-registered".as_ptr()) };
        assert_eq!(handle as usize - 1, intern(b"unit-registered"));

        // The table is bounded: names past it share the last slot.
        for i in 0..NVTX_NAMES {
            intern(format!("unit-many-{i}").as_bytes());
        }
        assert_eq!(intern(b"unit-one-too-many"), OTHER);
        assert!(NAMES[OTHER].get().is_none());
        let _ = std::fs::remove_dir_all(out);
    }

    /// A measurement, not a check: the cost of a push/pop pair (outermost, so it goes
    /// through the ring too) and of a start/end pair, on one thread.
    /// `cargo test --release -p gpuspy-shim handler_cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn handler_cost() {
        let _serial = serial();
        let out = std::env::temp_dir().join(format!("gpuspy-nvtx-cost-{}", std::process::id()));
        std::env::set_var("GPUSPY_OUT", &out);
        assert_eq!(install(), 1);
        let n = 1_000_000;
        let time = |f: &dyn Fn()| {
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                f();
            }
            t0.elapsed().as_nanos() as f64 / n as f64
        };
        time(&|| {
            push_a(c"cost-step");
            copy::pop();
        });
        let push_pop = time(&|| {
            push_a(c"cost-step");
            copy::pop();
        });
        let nested = time(&|| {
            push_a(c"cost-step");
            push_a(c"cost-inner");
            push_a(c"cost-deep");
            copy::pop();
            copy::pop();
            copy::pop();
        });
        let start_end = time(&|| copy::end(start_a(c"cost-start")));
        println!(
            "push+pop {push_pop:.1} ns, three nested push+pop {nested:.1} ns, start+end {start_end:.1} ns"
        );
        let _ = std::fs::remove_dir_all(out);
    }

    #[test]
    fn the_ring_keeps_the_last_events_and_counts_the_rest() {
        let _serial = serial();
        // SAFETY: all-zero bytes are valid atomics.
        let ring: Box<Ring> = unsafe { Box::new_zeroed().assume_init() };
        for i in 0..RING_EVENTS as u64 + 10 {
            ring.push(3, 1, 100 + i, 200 + i);
        }
        let mut out = Vec::new();
        assert_eq!(ring.read(0, &mut out), (RING_EVENTS as u64 + 10, 10));
        assert_eq!(out.len(), RING_EVENTS);
        assert_eq!(out[0], (3, 1, 110, 210));
        out.clear();
        ring.push(5, 0, 7, 9);
        assert_eq!(ring.read(RING_EVENTS as u64 + 10, &mut out).1, 0);
        assert_eq!(out, vec![(5, 0, 7, 9)]);
    }

    #[test]
    fn the_collector_spreads_ranges_and_samples_the_outermost() {
        let _serial = serial();
        let origin = 1_000;
        let w = FIRST_WINDOW_NS;
        let mut c = Collector {
            origin,
            window_ns: w,
            series: vec![Vec::new(); NVTX_NAMES],
            ends: vec![Vec::new(); NVTX_NAMES],
            ..Collector::default()
        };
        c.file(2, 0, origin + w / 2, origin + 2 * w);
        c.file(4, 1, origin, origin + 10);
        for i in 0..SAMPLED_EVENTS as u64 + 4 {
            c.file(2, 0, origin + 3 * w + i, origin + 3 * w + 2 * i);
        }
        assert_eq!(c.series[2][..2], [w / 2, w]);
        assert_eq!(c.series[4], vec![10]);
        // Each range counted in the window it ended in: window 2, then 3 (20 of them).
        assert_eq!(c.ends[2], [0, 0, 1, SAMPLED_EVENTS as u64 + 4]);
        assert_eq!(c.ends[4], [1]);
        // Depth 1 is in the windows, not in the samples.
        assert!(c.longest.iter().chain(&c.recent).all(|e| e.0 == 2));
        assert_eq!(c.longest[0], (2, origin + w / 2, origin + 2 * w));
        assert_eq!(c.longest.len(), SAMPLED_EVENTS);
        assert_eq!(c.recent.len(), SAMPLED_EVENTS);
        assert_eq!(
            c.recent.back().unwrap().1,
            origin + 3 * w + SAMPLED_EVENTS as u64 + 3
        );
        // A range past the table's end merges it: the time stays.
        c.file(2, 0, origin + 300 * w, origin + 300 * w + 1);
        assert_eq!(c.window_ns, 2 * w);
        assert_eq!(c.series[2][0], w / 2 + w);
        assert_eq!(c.ends[2][..2], [0, SAMPLED_EVENTS as u64 + 5]);
    }
}
