//! Reading a thread's own Python frames without the GIL: plain loads at the offsets of a
//! `Layout`, no C-API call. Safe for the calling thread's own frames while it sits inside a
//! driver call: nothing else unwinds them, and they keep their code objects alive.

use super::layout::{Chain, Layout, Position, OWNED_BY_CSTACK};

/// One frame as found: its code object and how far into it (bytes) it had got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawFrame {
    pub code: usize,
    pub offset: i64,
}

/// A chain longer than this is taken for a cycle (a layout that does not match).
const MAX_CHAIN: usize = 4096;

/// The word at `addr`.
///
/// # Safety
/// `addr` must be readable for 8 bytes.
unsafe fn word(addr: usize) -> usize {
    // SAFETY: the caller's contract.
    unsafe { (addr as *const usize).read_unaligned() }
}

unsafe fn int(addr: usize) -> i32 {
    // SAFETY: as `word`, for 4 bytes.
    unsafe { (addr as *const i32).read_unaligned() }
}

/// Whether `p` may point to an object: not null, 8-byte aligned.
fn plausible(p: usize) -> bool {
    p != 0 && p.is_multiple_of(8)
}

/// Fills `out` with the innermost frames of thread state `tstate`, innermost first, and
/// returns how many. Frames whose code is not of type `code_type` (a layout mismatch, or a
/// 3.13 frame running something else) end the walk.
///
/// # Safety
/// `tstate` must be the calling thread's own `PyThreadState` of an interpreter `layout`
/// describes.
pub unsafe fn frames(
    layout: &Layout,
    code_type: usize,
    tstate: usize,
    out: &mut [RawFrame],
) -> usize {
    // SAFETY (all reads below): the caller's contract, each pointer checked for null first.
    let mut frame = unsafe {
        match layout.chain {
            Chain::FrameObject { frame } => word(tstate + frame),
            Chain::CFrame {
                cframe,
                current_frame,
            } => match word(tstate + cframe) {
                c if plausible(c) => word(c + current_frame),
                _ => 0,
            },
            Chain::Direct { current_frame } => word(tstate + current_frame),
        }
    };
    let mut n = 0;
    for _ in 0..MAX_CHAIN {
        if n == out.len() || !plausible(frame) {
            break;
        }
        // SAFETY: as above.
        let (code, owner, previous) = unsafe {
            (
                word(frame + layout.frame_code),
                layout.frame_owner.map(|o| *((frame + o) as *const u8)),
                word(frame + layout.frame_previous),
            )
        };
        if owner != Some(OWNED_BY_CSTACK) {
            // SAFETY: as above.
            if !plausible(code) || unsafe { word(code + layout.object_type) } != code_type {
                break;
            }
            let offset = match layout.frame_position {
                // SAFETY: as above.
                Position::LastInstruction { lasti } => i64::from(unsafe { int(frame + lasti) }) * 2,
                Position::InstructionPointer { instr } => {
                    // SAFETY: as above.
                    let at = unsafe { word(frame + instr) } as i64;
                    at - (code + layout.code_start) as i64
                }
            };
            if let Some(slot) = out.get_mut(n) {
                *slot = RawFrame { code, offset };
                n += 1;
            }
        }
        frame = previous;
    }
    n
}

/// The fields of a code object that name it, and its validators: a code object freed and
/// another allocated at its address has other strings and another line table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeFields {
    pub filename: usize,
    pub name: usize,
    pub line_table: usize,
    pub first_line: i32,
}

/// # Safety
/// `code` must be a live code object of an interpreter `layout` describes.
pub unsafe fn code_fields(layout: &Layout, code: usize) -> CodeFields {
    // SAFETY: the caller's contract.
    unsafe {
        CodeFields {
            filename: word(code + layout.code_filename),
            name: word(code + layout.code_name),
            line_table: word(code + layout.code_line_table),
            first_line: int(code + layout.code_first_line),
        }
    }
}

/// The contents of a `bytes` object.
///
/// # Safety
/// `bytes` must be a live `bytes` object of an interpreter `layout` describes, alive for
/// as long as the slice is used.
pub unsafe fn bytes<'a>(layout: &Layout, bytes: usize) -> &'a [u8] {
    if !plausible(bytes) {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe {
        let len = word(bytes + layout.bytes_size) as isize;
        std::slice::from_raw_parts(
            (bytes + layout.bytes_data) as *const u8,
            len.max(0) as usize,
        )
    }
}

/// Longest text kept of a file or function name, in characters.
const MAX_TEXT: usize = 512;

/// Hands each character of a `str` object to `put`, the first `MAX_TEXT` of them; a
/// non-compact (legacy) string, which CPython never uses for names, gives `?`.
///
/// # Safety
/// `s` must be a live `str` object of an interpreter `layout` describes.
pub unsafe fn text(layout: &Layout, s: usize, mut put: impl FnMut(char)) {
    if !plausible(s) {
        return put('?');
    }
    // SAFETY: the caller's contract.
    let (state, length) = unsafe {
        (
            *((s + layout.str_state) as *const u32),
            word(s + layout.str_length),
        )
    };
    let (kind, compact, ascii) = ((state >> 2) & 7, state >> 5 & 1 == 1, state >> 6 & 1 == 1);
    if !compact {
        return put('?');
    }
    let data = s + if ascii {
        layout.str_ascii_data
    } else {
        layout.str_compact_data
    };
    for i in 0..length.min(MAX_TEXT) {
        // SAFETY: a compact string holds `length` characters of `kind` bytes after its header.
        let code_point = unsafe {
            match kind {
                1 => u32::from(*((data + i) as *const u8)),
                2 => u32::from(((data + 2 * i) as *const u16).read_unaligned()),
                4 => ((data + 4 * i) as *const u32).read_unaligned(),
                _ => return put('?'),
            }
        };
        put(char::from_u32(code_point).unwrap_or('\u{fffd}'));
    }
}
