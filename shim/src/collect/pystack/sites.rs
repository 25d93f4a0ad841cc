//! The call-site table: per (driver function, sync cause, stack) the calls and the time
//! they blocked. Fixed-size and static, so a capture never allocates: 256 sites, 1024 code
//! objects and 64 KiB of names; what does not fit is counted as dropped, and so is a call
//! whose capture finds the table in use: a capture never waits. A dump keeps the top
//! `TOP_SITES` by blocked time.

use super::layout::Layout;
use super::linetable;
use super::walk::{self, CodeFields, RawFrame};
use super::MAX_FRAMES;
#[cfg(test)]
use crate::forklock::SpinGuard;
use crate::forklock::SpinLock;
use crate::hooks::HOOK_NAMES;
use gpuspy_format::callsites::{CallSite, Frame};
use gpuspy_format::SyncCause;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// Sites a dump keeps, by blocked time.
pub const TOP_SITES: usize = 32;
const SITES: usize = 256;
const SITE_SLOTS: usize = 2 * SITES;
const CODES: usize = 1024;
const CODE_SLOTS: usize = 2 * CODES;
const POOL: usize = 64 * 1024;
/// A frame whose code object did not fit: shown as `?`.
const NO_CODE: u32 = u32::MAX;
const NO_CAUSE: u8 = u8::MAX;

/// A span of the name pool.
#[derive(Clone, Copy)]
struct Text {
    start: u32,
    len: u32,
}

#[derive(Clone, Copy)]
struct Code {
    address: usize,
    fields: CodeFields,
    file: Text,
    function: Text,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    hook: u16,
    cause: u8,
    depth: u8,
    /// (code index, line) per frame, innermost first.
    frames: [(u32, u32); MAX_FRAMES],
}

#[derive(Clone, Copy)]
struct Site {
    key: Key,
    calls: u64,
    blocked_ns: u64,
    max_ns: u64,
}

pub(super) struct Table {
    sites: [Site; SITES],
    site_count: usize,
    /// Open addressing over `sites`: index + 1, 0 for an empty slot.
    site_slots: [u16; SITE_SLOTS],
    codes: [Code; CODES],
    code_count: usize,
    code_slots: [u16; CODE_SLOTS],
    pool: [u8; POOL],
    pool_len: usize,
    dropped_calls: u64,
    dropped_ns: u64,
}

const EMPTY_TEXT: Text = Text { start: 0, len: 0 };
const EMPTY_SITE: Site = Site {
    key: Key {
        hook: 0,
        cause: NO_CAUSE,
        depth: 0,
        frames: [(NO_CODE, 0); MAX_FRAMES],
    },
    calls: 0,
    blocked_ns: 0,
    max_ns: 0,
};
const EMPTY_CODE: Code = Code {
    address: 0,
    fields: CodeFields {
        filename: 0,
        name: 0,
        line_table: 0,
        first_line: 0,
    },
    file: EMPTY_TEXT,
    function: EMPTY_TEXT,
};

const EMPTY_TABLE: Table = Table {
    sites: [EMPTY_SITE; SITES],
    site_count: 0,
    site_slots: [0; SITE_SLOTS],
    codes: [EMPTY_CODE; CODES],
    code_count: 0,
    code_slots: [0; CODE_SLOTS],
    pool: [0; POOL],
    pool_len: 0,
    dropped_calls: 0,
    dropped_ns: 0,
};

/// A capture holds it for a few microseconds; one that finds it held skips its call.
static TABLE: SpinLock<Table> = SpinLock::new(EMPTY_TABLE);

/// Calls captured from threads with no Python frames (weighted), and their blocked time.
static NATIVE_CALLS: AtomicU64 = AtomicU64::new(0);
static NATIVE_NS: AtomicU64 = AtomicU64::new(0);
/// Stacks read, and the time reading and adding them took.
static CAPTURES: AtomicU64 = AtomicU64::new(0);
static CAPTURE_NS: AtomicU64 = AtomicU64::new(0);

/// Captured calls (weighted), and their blocked time, that found the table held by another
/// capture or a dump: counted with the dropped ones, as a capture inside the program's call
/// never waits.
static SKIPPED_CALLS: AtomicU64 = AtomicU64::new(0);
static SKIPPED_NS: AtomicU64 = AtomicU64::new(0);

pub fn add_capture_time(took: std::time::Duration) {
    CAPTURE_NS.fetch_add(took.as_nanos() as u64, Relaxed);
}

/// A call from a thread that has no Python frames.
pub fn add_native(weight: u64, ns: u64) {
    CAPTURES.fetch_add(1, Relaxed);
    NATIVE_CALLS.fetch_add(weight, Relaxed);
    NATIVE_NS.fetch_add(ns.saturating_mul(weight), Relaxed);
}

/// Adds a call of driver function `hook` that blocked `ns`, standing for `weight` calls,
/// made from the stack `frames` (innermost first).
///
/// # Safety
/// `frames` must be the calling thread's own live frames, read with `layout`.
pub unsafe fn add(
    layout: &Layout,
    hook: usize,
    cause: Option<SyncCause>,
    frames: &[RawFrame],
    weight: u64,
    ns: u64,
) {
    CAPTURES.fetch_add(1, Relaxed);
    match TABLE.try_lock() {
        // SAFETY: our contract.
        Some(mut table) => unsafe { table.add(layout, hook, cause, frames, weight, ns) },
        None => {
            SKIPPED_CALLS.fetch_add(weight, Relaxed);
            SKIPPED_NS.fetch_add(ns.saturating_mul(weight), Relaxed);
        }
    }
}

impl Table {
    /// `add`, into this table.
    ///
    /// # Safety
    /// As `add`.
    unsafe fn add(
        &mut self,
        layout: &Layout,
        hook: usize,
        cause: Option<SyncCause>,
        frames: &[RawFrame],
        weight: u64,
        ns: u64,
    ) {
        let t = self;
        let mut key = Key {
            hook: hook as u16,
            cause: cause.map_or(NO_CAUSE, |c| c as u8),
            depth: frames.len().min(MAX_FRAMES) as u8,
            frames: [(NO_CODE, 0); MAX_FRAMES],
        };
        for (slot, frame) in key.frames.iter_mut().zip(frames) {
            // SAFETY: the frame's code object is alive while the frame is (our contract).
            *slot = unsafe { t.locate(layout, frame) };
        }
        match t.site(&key) {
            Some(site) => {
                site.calls = site.calls.saturating_add(weight);
                site.blocked_ns = site.blocked_ns.saturating_add(ns.saturating_mul(weight));
                site.max_ns = site.max_ns.max(ns);
            }
            None => {
                t.dropped_calls = t.dropped_calls.saturating_add(weight);
                t.dropped_ns = t.dropped_ns.saturating_add(ns.saturating_mul(weight));
            }
        }
    }

    /// The top sites by blocked time.
    fn top(&self) -> Vec<CallSite> {
        let mut order: Vec<&Site> = self.sites.iter().take(self.site_count).collect();
        order.sort_by_key(|s| std::cmp::Reverse(s.blocked_ns));
        order
            .into_iter()
            .take(TOP_SITES)
            .map(|s| self.call_site(s))
            .collect()
    }
}

/// What fits in a dump: the top sites and the counters.
pub struct Summary {
    pub sites: Vec<CallSite>,
    pub captures: u64,
    pub capture_ns: u64,
    pub native_calls: u64,
    pub native_ns: u64,
    pub dropped_calls: u64,
    pub dropped_ns: u64,
}

/// Cold (dump time): may allocate.
pub fn summary() -> Summary {
    let (sites, dropped_calls, dropped_ns) = {
        let t = TABLE.lock();
        (t.top(), t.dropped_calls, t.dropped_ns)
    };
    Summary {
        sites,
        captures: CAPTURES.load(Relaxed),
        capture_ns: CAPTURE_NS.load(Relaxed),
        native_calls: NATIVE_CALLS.load(Relaxed),
        native_ns: NATIVE_NS.load(Relaxed),
        dropped_calls: dropped_calls.saturating_add(SKIPPED_CALLS.load(Relaxed)),
        dropped_ns: dropped_ns.saturating_add(SKIPPED_NS.load(Relaxed)),
    }
}

/// Empties the table (a fork child: its own calls only). One thread runs then.
pub fn reset() {
    TABLE.reset_in_child();
    let mut t = TABLE.lock();
    t.site_count = 0;
    t.site_slots.fill(0);
    t.code_count = 0;
    t.code_slots.fill(0);
    t.pool_len = 0;
    t.dropped_calls = 0;
    t.dropped_ns = 0;
    drop(t);
    for counter in [
        &NATIVE_CALLS,
        &NATIVE_NS,
        &CAPTURES,
        &CAPTURE_NS,
        &SKIPPED_CALLS,
        &SKIPPED_NS,
    ] {
        counter.store(0, Relaxed);
    }
}

/// Fibonacci hashing of a word into one of `slots` slots.
fn slot_of(value: u64, slots: usize) -> usize {
    (value.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % slots
}

impl Table {
    /// The (code index, line) of a frame.
    ///
    /// # Safety
    /// The frame's code object must be alive.
    unsafe fn locate(&mut self, layout: &Layout, frame: &RawFrame) -> (u32, u32) {
        // SAFETY: the caller's contract.
        let fields = unsafe { walk::code_fields(layout, frame.code) };
        // SAFETY: the line table belongs to the live code object.
        let table = unsafe { walk::bytes(layout, fields.line_table) };
        let line = linetable::line_at(
            layout.lines,
            table,
            i64::from(fields.first_line),
            frame.offset,
        )
        .map_or(0, |l| l.clamp(0, i64::from(u32::MAX)) as u32);
        // SAFETY: the caller's contract.
        (unsafe { self.code(layout, frame.code, fields) }, line)
    }

    /// The index of a code object's entry, added if new. An entry is never changed once
    /// made, since sites refer to it: a code object freed and another allocated at the
    /// same address with other fields gets an entry of its own.
    unsafe fn code(&mut self, layout: &Layout, address: usize, fields: CodeFields) -> u32 {
        let start = slot_of(address as u64, CODE_SLOTS);
        for probe in 0..CODE_SLOTS {
            let index = match self.code_slots.get((start + probe) % CODE_SLOTS) {
                Some(0) | None => break,
                Some(&i) => usize::from(i) - 1,
            };
            let same = |c: &Code| c.address == address && c.fields == fields;
            if self.codes.get(index).is_some_and(same) {
                return index as u32;
            }
        }
        if self.code_count == CODES {
            return NO_CODE;
        }
        // SAFETY: the caller's contract: the names belong to the live code object.
        let (file, function) = unsafe {
            (
                self.intern(layout, fields.filename),
                self.intern(layout, fields.name),
            )
        };
        let index = self.code_count;
        let Some(entry) = self.codes.get_mut(index) else {
            return NO_CODE;
        };
        *entry = Code {
            address,
            fields,
            file,
            function,
        };
        self.code_count += 1;
        if let Some(slot) = (0..CODE_SLOTS)
            .filter_map(|p| self.code_slots.get((start + p) % CODE_SLOTS))
            .position(|&s| s == 0)
            .and_then(|p| self.code_slots.get_mut((start + p) % CODE_SLOTS))
        {
            *slot = index as u16 + 1;
        }
        index as u32
    }

    /// Copies a `str` object's text into the pool as UTF-8; empty once the pool is full.
    unsafe fn intern(&mut self, layout: &Layout, s: usize) -> Text {
        let start = self.pool_len;
        let (pool, len) = (&mut self.pool, &mut self.pool_len);
        let mut full = false;
        // SAFETY: the caller's contract.
        unsafe {
            walk::text(layout, s, |c| {
                let mut utf8 = [0u8; 4];
                let encoded = c.encode_utf8(&mut utf8).as_bytes();
                match pool.get_mut(*len..*len + encoded.len()) {
                    Some(room) if !full => {
                        room.copy_from_slice(encoded);
                        *len += encoded.len();
                    }
                    _ => full = true,
                }
            })
        };
        if full {
            self.pool_len = start;
            return EMPTY_TEXT;
        }
        Text {
            start: start as u32,
            len: (self.pool_len - start) as u32,
        }
    }

    /// The site of `key`, added if new; None when the table is full.
    fn site(&mut self, key: &Key) -> Option<&mut Site> {
        let mut hash = u64::from(key.hook) << 16 | u64::from(key.cause) << 8 | u64::from(key.depth);
        for &(code, line) in key.frames.iter().take(usize::from(key.depth)) {
            hash = hash.rotate_left(5) ^ (u64::from(code) << 32 | u64::from(line));
        }
        let start = slot_of(hash, SITE_SLOTS);
        for probe in 0..SITE_SLOTS {
            let slot = self.site_slots.get_mut((start + probe) % SITE_SLOTS)?;
            match *slot {
                0 => {
                    let index = self.site_count;
                    if index == SITES {
                        return None;
                    }
                    self.site_count += 1;
                    *slot = index as u16 + 1;
                    let site = self.sites.get_mut(index)?;
                    *site = Site {
                        key: *key,
                        ..EMPTY_SITE
                    };
                    return Some(site);
                }
                i => {
                    let index = usize::from(i) - 1;
                    if self.sites.get(index).is_some_and(|s| s.key == *key) {
                        return self.sites.get_mut(index);
                    }
                }
            }
        }
        None
    }

    fn text(&self, t: Text) -> String {
        let (start, len) = (t.start as usize, t.len as usize);
        String::from_utf8_lossy(self.pool.get(start..start + len).unwrap_or(b"?")).into_owned()
    }

    fn call_site(&self, s: &Site) -> CallSite {
        let frames = s
            .key
            .frames
            .iter()
            .take(usize::from(s.key.depth))
            .map(|&(code, line)| match self.codes.get(code as usize) {
                Some(c) if (code as usize) < self.code_count => Frame {
                    file: self.text(c.file),
                    line,
                    function: self.text(c.function),
                },
                _ => Frame {
                    file: "?".into(),
                    line,
                    function: "?".into(),
                },
            })
            .collect();
        CallSite {
            api: HOOK_NAMES
                .get(usize::from(s.key.hook))
                .map_or("?", |n| n.trim_end_matches('\0'))
                .to_string(),
            cause: SyncCause::ALL.get(usize::from(s.key.cause)).copied(),
            calls: s.calls,
            blocked_ns: s.blocked_ns,
            max_ns: s.max_ns,
            frames,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A table of its own, off the stack (it is 170 KiB).
    pub fn table() -> Box<Table> {
        let mut t: Box<std::mem::MaybeUninit<Table>> = Box::new_uninit();
        t.write(EMPTY_TABLE);
        // SAFETY: just written.
        unsafe { t.assume_init() }
    }

    /// Adds a call from `frames` (innermost first) to `t`.
    ///
    /// # Safety
    /// The frames' code objects are alive in `layout`.
    pub unsafe fn add_call(
        t: &mut Table,
        layout: &Layout,
        hook: usize,
        frames: &[RawFrame],
        ns: u64,
    ) {
        // SAFETY: the caller's contract.
        unsafe { t.add(layout, hook, None, frames, 1, ns) }
    }

    /// The process's table, held as another capture or a dump would.
    pub fn hold_table() -> SpinGuard<'static, Table> {
        TABLE.lock()
    }

    pub fn top(t: &Table) -> Vec<CallSite> {
        t.top()
    }

    pub fn dropped(t: &Table) -> (u64, u64) {
        (t.dropped_calls, t.dropped_ns)
    }
}
