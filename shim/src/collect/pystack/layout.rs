//! Where CPython keeps what the walk reads: per-version offsets for 3.10-3.12, taken from
//! CPython's headers, and 3.13's own `_Py_DebugOffsets`, which `_PyRuntime` begins with.
//! Offsets are for 64-bit builds; fixtures/ records where each came from.

use super::linetable::Format;

/// How the thread state leads to the innermost frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// 3.10: `tstate->frame`, a `PyFrameObject`.
    FrameObject { frame: usize },
    /// 3.11, 3.12: `tstate->cframe->current_frame`, a `_PyInterpreterFrame`.
    CFrame { cframe: usize, current_frame: usize },
    /// 3.13+: `tstate->current_frame`.
    Direct { current_frame: usize },
}

/// Where a frame says which instruction it is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// 3.10: `f_lasti`, an `int` counting 2-byte code units.
    LastInstruction { lasti: usize },
    /// 3.11+: a pointer into the code object's `co_code_adaptive` (`prev_instr`, 3.13's
    /// `instr_ptr`).
    InstructionPointer { instr: usize },
}

/// Every offset the walk reads, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// `PY_VERSION_HEX` of the interpreter.
    pub version: u32,
    pub free_threaded: bool,
    pub chain: Chain,
    pub frame_previous: usize,
    /// `f_code`, or 3.13's `f_executable`.
    pub frame_code: usize,
    pub frame_position: Position,
    /// The frame's `owner` byte, where shim frames owned by the C stack must be skipped.
    pub frame_owner: Option<usize>,
    pub code_filename: usize,
    /// `co_qualname` (3.11+) or `co_name` (3.10).
    pub code_name: usize,
    /// `co_firstlineno`, an `int`.
    pub code_first_line: usize,
    pub code_line_table: usize,
    /// `co_code_adaptive`: where the instructions start (3.11+).
    pub code_start: usize,
    pub object_type: usize,
    pub bytes_size: usize,
    pub bytes_data: usize,
    pub str_length: usize,
    /// The `state` bit field: interned:2, kind:3, compact:1, ascii:1 (3.10-3.13).
    pub str_state: usize,
    /// `sizeof(PyASCIIObject)`: a compact ASCII string's characters follow it.
    pub str_ascii_data: usize,
    /// `sizeof(PyCompactUnicodeObject)`: a compact non-ASCII string's characters follow it.
    pub str_compact_data: usize,
    pub lines: Format,
}

/// `FRAME_OWNED_BY_CSTACK` (3.12, 3.13: Include/internal/pycore_frame.h).
pub const OWNED_BY_CSTACK: u8 = 3;

/// The layout of a 3.10, 3.11 or 3.12 interpreter (`version` is `PY_VERSION_HEX`); None
/// for other versions. 3.13 and later publish theirs: see `from_debug_offsets`.
pub fn for_version(version: u32) -> Option<Layout> {
    let common = |version| Layout {
        version,
        free_threaded: false,
        chain: Chain::Direct { current_frame: 0 },
        frame_previous: 0,
        frame_code: 0,
        frame_position: Position::InstructionPointer { instr: 0 },
        frame_owner: None,
        code_filename: 112,
        code_name: 128,
        code_first_line: 0,
        code_line_table: 136,
        code_start: 0,
        object_type: 8,
        bytes_size: 16,
        bytes_data: 32,
        str_length: 16,
        str_state: 32,
        str_ascii_data: 40,
        str_compact_data: 56,
        lines: Format::Locations311,
    };
    Some(match version >> 16 {
        0x030a => Layout {
            chain: Chain::FrameObject { frame: 24 },
            frame_previous: 24,
            frame_code: 32,
            frame_position: Position::LastInstruction { lasti: 96 },
            code_filename: 104,
            code_name: 112,
            code_first_line: 40,
            code_line_table: 120,
            str_ascii_data: 48,
            str_compact_data: 72,
            lines: Format::Pairs310,
            ..common(version)
        },
        0x030b => Layout {
            chain: Chain::CFrame {
                cframe: 56,
                current_frame: 8,
            },
            frame_previous: 48,
            frame_code: 32,
            frame_position: Position::InstructionPointer { instr: 56 },
            code_first_line: 72,
            code_start: 184,
            str_ascii_data: 48,
            str_compact_data: 72,
            ..common(version)
        },
        0x030c => Layout {
            chain: Chain::CFrame {
                cframe: 56,
                current_frame: 0,
            },
            frame_previous: 8,
            frame_code: 0,
            frame_position: Position::InstructionPointer { instr: 56 },
            frame_owner: Some(70),
            code_first_line: 68,
            code_start: 192,
            ..common(version)
        },
        _ => return None,
    })
}

/// The start of `_Py_DebugOffsets`: 3.13's cookie.
pub const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";

/// Byte positions of the fields of 3.13's `_Py_DebugOffsets` (struct `_Py_DebugOffsets`
/// in Include/internal/pycore_runtime.h, 3.13.0) that the walk needs. 3.14 reorders the
/// struct, so its version is refused.
mod debug_313 {
    pub const VERSION: usize = 8;
    pub const FREE_THREADED: usize = 16;
    pub const CURRENT_FRAME: usize = 184;
    pub const FRAME_PREVIOUS: usize = 232;
    pub const FRAME_EXECUTABLE: usize = 240;
    pub const FRAME_INSTR_PTR: usize = 248;
    pub const FRAME_OWNER: usize = 264;
    pub const CODE_FILENAME: usize = 280;
    pub const CODE_QUALNAME: usize = 296;
    pub const CODE_LINETABLE: usize = 304;
    pub const CODE_FIRSTLINENO: usize = 312;
    pub const CODE_ADAPTIVE: usize = 344;
    pub const OB_TYPE: usize = 360;
    pub const BYTES_OB_SIZE: usize = 520;
    pub const BYTES_OB_SVAL: usize = 528;
    pub const UNICODE_STATE: usize = 544;
    pub const UNICODE_LENGTH: usize = 552;
    pub const UNICODE_ASCII_SIZE: usize = 560;
    /// `sizeof(_Py_DebugOffsets)`.
    pub const SIZE: usize = 584;
}

/// Why a `_Py_DebugOffsets` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `_PyRuntime` symbol to read the debug offsets from.
    NoRuntime,
    /// The cookie is not `xdebugpy`.
    Cookie,
    /// A version whose struct this shim does not know (the version in the struct).
    Version(u32),
}

/// The layout published at the start of a 3.13 `_PyRuntime` (`debug` holds its first
/// `debug_313::SIZE` bytes). `expected` is the interpreter's `Py_Version`: the struct must
/// say the same minor version.
pub fn from_debug_offsets(debug: &[u8], expected: u32) -> Result<Layout, Refusal> {
    use debug_313::*;
    if debug.get(..8) != Some(DEBUG_COOKIE.as_slice()) {
        return Err(Refusal::Cookie);
    }
    let field = |at: usize| {
        debug
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes) as usize
    };
    let version = field(VERSION) as u32;
    if version >> 16 != 0x030d || version >> 16 != expected >> 16 || debug.len() < SIZE {
        return Err(Refusal::Version(version));
    }
    let ascii = field(UNICODE_ASCII_SIZE);
    Ok(Layout {
        version,
        free_threaded: field(FREE_THREADED) != 0,
        chain: Chain::Direct {
            current_frame: field(CURRENT_FRAME),
        },
        frame_previous: field(FRAME_PREVIOUS),
        frame_code: field(FRAME_EXECUTABLE),
        frame_position: Position::InstructionPointer {
            instr: field(FRAME_INSTR_PTR),
        },
        frame_owner: Some(field(FRAME_OWNER)),
        code_filename: field(CODE_FILENAME),
        code_name: field(CODE_QUALNAME),
        code_first_line: field(CODE_FIRSTLINENO),
        code_line_table: field(CODE_LINETABLE),
        code_start: field(CODE_ADAPTIVE),
        object_type: field(OB_TYPE),
        bytes_size: field(BYTES_OB_SIZE),
        bytes_data: field(BYTES_OB_SVAL),
        str_length: field(UNICODE_LENGTH),
        str_state: field(UNICODE_STATE),
        str_ascii_data: ascii,
        // PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject (3.12+).
        str_compact_data: ascii + 16,
        lines: Format::Locations311,
    })
}

/// The size of the `_Py_DebugOffsets` prefix `from_debug_offsets` reads.
pub const DEBUG_OFFSETS_SIZE: usize = debug_313::SIZE;
