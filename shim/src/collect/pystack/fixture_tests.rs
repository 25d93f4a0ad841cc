//! The walk against CPython layouts this machine has no interpreter for: each fixture in
//! fixtures/ holds offsets taken from one release's headers (where each came from is
//! written beside it). The tests check the shim's layout tables (3.10-3.12) and its reading
//! of `_Py_DebugOffsets` (3.13, 3.13 free-threaded) against them, then build a thread
//! state, frames, code objects, strings and line tables in memory at those offsets and
//! walk them like a live interpreter's.

use super::layout::{self, Chain, Layout, Position, DEBUG_COOKIE, DEBUG_OFFSETS_SIZE};
use super::linetable::Format;
use super::sites;
use super::walk::{self, RawFrame};
use gpuspy_format::callsites::Frame;
use std::collections::BTreeMap;

struct Fixture(BTreeMap<String, usize>);

impl Fixture {
    fn load(name: &str) -> Fixture {
        let path = format!(
            "{}/src/collect/pystack/fixtures/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let values = text
            .lines()
            .map(|l| l.split('#').next().unwrap().trim())
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (key, value) = l.split_once(' ').unwrap();
                (key.to_string(), value.trim().parse().unwrap())
            })
            .collect();
        Fixture(values)
    }

    fn get(&self, key: &str) -> usize {
        *self
            .0
            .get(key)
            .unwrap_or_else(|| panic!("no {key} in the fixture"))
    }
}

/// The parts every layout takes the same way from its fixture.
fn objects(f: &Fixture, base: Layout) -> Layout {
    Layout {
        code_filename: f.get("PyCodeObject.co_filename"),
        code_first_line: f.get("PyCodeObject.co_firstlineno"),
        code_line_table: f.get("PyCodeObject.co_linetable"),
        object_type: f.get("PyObject.ob_type"),
        bytes_data: f.get("PyBytesObject.ob_sval"),
        str_length: f.get("PyASCIIObject.length"),
        str_state: f.get("PyASCIIObject.state"),
        str_ascii_data: f.get("sizeof.PyASCIIObject"),
        str_compact_data: f.get("sizeof.PyCompactUnicodeObject"),
        ..base
    }
}

fn expected_before_313(f: &Fixture, version: u32) -> Layout {
    let base = Layout {
        version,
        free_threaded: false,
        chain: Chain::Direct { current_frame: 0 },
        frame_previous: 0,
        frame_code: 0,
        frame_position: Position::InstructionPointer { instr: 0 },
        frame_owner: None,
        code_filename: 0,
        code_name: 0,
        code_first_line: 0,
        code_line_table: 0,
        code_start: 0,
        object_type: 0,
        bytes_size: f.get("PyVarObject.ob_size"),
        bytes_data: 0,
        str_length: 0,
        str_state: 0,
        str_ascii_data: 0,
        str_compact_data: 0,
        lines: Format::Locations311,
    };
    objects(
        f,
        if version >> 16 == 0x030a {
            Layout {
                chain: Chain::FrameObject {
                    frame: f.get("PyThreadState.frame"),
                },
                frame_previous: f.get("PyFrameObject.f_back"),
                frame_code: f.get("PyFrameObject.f_code"),
                frame_position: Position::LastInstruction {
                    lasti: f.get("PyFrameObject.f_lasti"),
                },
                code_name: f.get("PyCodeObject.co_name"),
                lines: Format::Pairs310,
                ..base
            }
        } else {
            Layout {
                chain: Chain::CFrame {
                    cframe: f.get("PyThreadState.cframe"),
                    current_frame: f.get("_PyCFrame.current_frame"),
                },
                frame_previous: f.get("_PyInterpreterFrame.previous"),
                frame_code: f.get("_PyInterpreterFrame.f_code"),
                frame_position: Position::InstructionPointer {
                    instr: f.get("_PyInterpreterFrame.prev_instr"),
                },
                // 3.11 has no frames owned by the C stack to skip.
                frame_owner: (version >> 16 == 0x030c).then(|| f.get("_PyInterpreterFrame.owner")),
                code_name: f.get("PyCodeObject.co_qualname"),
                code_start: f.get("PyCodeObject.co_code_adaptive"),
                ..base
            }
        },
    )
}

/// The `_Py_DebugOffsets` a 3.13 interpreter built like the fixture's would publish.
fn debug_offsets(f: &Fixture, version: u32) -> Vec<u8> {
    let mut blob = vec![0u8; f.get("sizeof._Py_DebugOffsets")];
    let mut put = |at: &str, value: usize| {
        let at = f.get(&format!("debug_offsets.{at}"));
        blob[at..at + 8].copy_from_slice(&(value as u64).to_ne_bytes());
    };
    put("version", version as usize);
    put(
        "free_threaded",
        f.0.get("free_threaded").copied().unwrap_or(0),
    );
    for (field, value) in [
        ("thread_state.current_frame", "PyThreadState.current_frame"),
        ("interpreter_frame.previous", "_PyInterpreterFrame.previous"),
        (
            "interpreter_frame.executable",
            "_PyInterpreterFrame.f_executable",
        ),
        (
            "interpreter_frame.instr_ptr",
            "_PyInterpreterFrame.instr_ptr",
        ),
        ("interpreter_frame.owner", "_PyInterpreterFrame.owner"),
        ("code_object.filename", "PyCodeObject.co_filename"),
        ("code_object.qualname", "PyCodeObject.co_qualname"),
        ("code_object.linetable", "PyCodeObject.co_linetable"),
        ("code_object.firstlineno", "PyCodeObject.co_firstlineno"),
        (
            "code_object.co_code_adaptive",
            "PyCodeObject.co_code_adaptive",
        ),
        ("pyobject.ob_type", "PyObject.ob_type"),
        ("bytes_object.ob_size", "PyBytesObject.ob_base.ob_size"),
        ("bytes_object.ob_sval", "PyBytesObject.ob_sval"),
        ("unicode_object.state", "PyASCIIObject.state"),
        ("unicode_object.length", "PyASCIIObject.length"),
        ("unicode_object.asciiobject_size", "sizeof.PyASCIIObject"),
    ] {
        put(field, f.get(value));
    }
    blob[..8].copy_from_slice(DEBUG_COOKIE);
    blob
}

fn expected_313(f: &Fixture, version: u32, free_threaded: bool) -> Layout {
    objects(
        f,
        Layout {
            version,
            free_threaded,
            chain: Chain::Direct {
                current_frame: f.get("PyThreadState.current_frame"),
            },
            frame_previous: f.get("_PyInterpreterFrame.previous"),
            frame_code: f.get("_PyInterpreterFrame.f_executable"),
            frame_position: Position::InstructionPointer {
                instr: f.get("_PyInterpreterFrame.instr_ptr"),
            },
            frame_owner: Some(f.get("_PyInterpreterFrame.owner")),
            code_filename: 0,
            code_name: f.get("PyCodeObject.co_qualname"),
            code_first_line: 0,
            code_line_table: 0,
            code_start: f.get("PyCodeObject.co_code_adaptive"),
            object_type: 0,
            bytes_size: f.get("PyBytesObject.ob_base.ob_size"),
            bytes_data: 0,
            str_length: 0,
            str_state: 0,
            str_ascii_data: 0,
            str_compact_data: 0,
            lines: Format::Locations311,
        },
    )
}

/// Memory to build objects in: 8-byte aligned, zeroed, never moved.
struct Memory {
    words: Box<[u64]>,
    used: usize,
}

impl Memory {
    fn new() -> Memory {
        Memory {
            words: vec![0u64; 8192].into_boxed_slice(),
            used: 0,
        }
    }
    fn alloc(&mut self, bytes: usize) -> usize {
        let at = self.words.as_ptr() as usize + self.used * 8;
        self.used += bytes.div_ceil(8) + 1;
        assert!(self.used <= self.words.len());
        at
    }
    fn put(&mut self, at: usize, bytes: &[u8]) {
        let base = self.words.as_mut_ptr() as usize;
        let start = at - base;
        assert!(start + bytes.len() <= self.words.len() * 8);
        // SAFETY: inside `words`, checked above.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
    }
    fn word(&mut self, at: usize, value: usize) {
        self.put(at, &value.to_ne_bytes());
    }

    /// A compact `str`: ASCII, or latin-1/UCS-2/UCS-4 after the larger header.
    fn str(&mut self, l: &Layout, text: &str) -> usize {
        let chars: Vec<u32> = text.chars().map(u32::from).collect();
        let kind = match chars.iter().max().copied().unwrap_or(0) {
            0..=0xff => 1,
            0x100..=0xffff => 2,
            _ => 4,
        };
        let ascii = text.is_ascii();
        let data = if ascii {
            l.str_ascii_data
        } else {
            l.str_compact_data
        };
        let s = self.alloc(data + kind * (chars.len() + 1));
        self.word(s + l.object_type, 0x5717);
        self.word(s + l.str_length, chars.len());
        let state = (kind as u32) << 2 | 1 << 5 | u32::from(ascii) << 6;
        self.put(s + l.str_state, &state.to_ne_bytes());
        for (i, &c) in chars.iter().enumerate() {
            self.put(s + data + kind * i, &c.to_ne_bytes()[..kind]);
        }
        s
    }

    fn bytes(&mut self, l: &Layout, content: &[u8]) -> usize {
        let b = self.alloc(l.bytes_data + content.len());
        self.word(b + l.bytes_size, content.len());
        self.put(b + l.bytes_data, content);
        b
    }

    fn code(&mut self, l: &Layout, file: &str, name: &str, first_line: i32, table: &[u8]) -> usize {
        let (file, name, table) = (self.str(l, file), self.str(l, name), self.bytes(l, table));
        let code = self.alloc(l.code_start.max(l.code_line_table) + 64);
        self.word(code + l.object_type, CODE_TYPE);
        self.word(code + l.code_filename, file);
        self.word(code + l.code_name, name);
        self.word(code + l.code_line_table, table);
        self.put(code + l.code_first_line, &first_line.to_ne_bytes());
        code
    }

    /// A frame running `code` at byte `offset`, called from `previous`.
    fn frame(
        &mut self,
        l: &Layout,
        code: usize,
        offset: usize,
        previous: usize,
        owner: u8,
    ) -> usize {
        let frame = self.alloc(160);
        self.word(frame + l.frame_previous, previous);
        self.word(frame + l.frame_code, code);
        match l.frame_position {
            Position::LastInstruction { lasti } => {
                self.put(frame + lasti, &((offset / 2) as i32).to_ne_bytes())
            }
            Position::InstructionPointer { instr } => {
                self.word(frame + instr, code + l.code_start + offset)
            }
        }
        if let Some(at) = l.frame_owner {
            self.put(frame + at, &[owner]);
        }
        frame
    }

    fn thread_state(&mut self, l: &Layout, innermost: usize) -> usize {
        let tstate = self.alloc(256);
        match l.chain {
            Chain::FrameObject { frame } => self.word(tstate + frame, innermost),
            Chain::CFrame {
                cframe,
                current_frame,
            } => {
                let c = self.alloc(32);
                self.word(c + current_frame, innermost);
                self.word(tstate + cframe, c);
            }
            Chain::Direct { current_frame } => self.word(tstate + current_frame, innermost),
        }
        tstate
    }
}

const CODE_TYPE: usize = 0xc0de_0000;

/// Builds `main() -> Model.schritt_λ()` in `l`'s layout (with a C-stack shim frame
/// between them where the layout has owners), walks it, and resolves it through the
/// call-site table under `hook`.
fn walk_and_resolve(l: &Layout, hook: usize) -> Vec<Frame> {
    let mut m = Memory::new();
    // Line tables: `main` starts at line 1, its call is 2 code units at line 3; the inner
    // function starts at line 40, and byte 6 (code unit 3) is at line 42.
    let (outer_table, inner_table): (&[u8], &[u8]) = match l.lines {
        Format::Pairs310 => (&[2, 0, 4, 2], &[6, 0, 2, 2]),
        Format::Locations311 => (
            &[0x80 | 13 << 3, 0, 0x80 | 12 << 3 | 1, 0, 1],
            &[0x80 | 13 << 3 | 2, 0, 0x80 | 13 << 3, 4],
        ),
    };
    let outer = m.code(l, "/home/u/main.py", "main", 1, outer_table);
    let inner = m.code(l, "/home/u/träin.py", "Model.schritt_λ", 40, inner_table);
    let main_frame = m.frame(l, outer, 4, 0, 0);
    let below = match l.frame_owner {
        Some(_) => m.frame(l, 0x5eed, 0, main_frame, layout::OWNED_BY_CSTACK),
        None => main_frame,
    };
    let inner_frame = m.frame(l, inner, 6, below, 0);
    let tstate = m.thread_state(l, inner_frame);
    let mut raw = [RawFrame::default(); 4];
    // SAFETY: the memory holds a complete thread state in the layout `l`.
    let n = unsafe { walk::frames(l, CODE_TYPE, tstate, &mut raw) };
    assert_eq!(
        &raw[..n],
        &[
            RawFrame {
                code: inner,
                offset: 6
            },
            RawFrame {
                code: outer,
                offset: 4
            }
        ]
    );
    // A table of its own: the process's is the skip test's.
    let mut t = sites::tests::table();
    // SAFETY: as above; the objects outlive the call.
    unsafe { sites::tests::add_call(&mut t, l, hook, &raw[..n], 5_000) };
    let top = sites::tests::top(&t);
    let site = top
        .iter()
        .find(|s| s.api == crate::hooks::HOOK_NAMES[hook].trim_end_matches('\0'))
        .expect("the site is in the table");
    site.frames.clone()
}

fn expected_frames() -> Vec<Frame> {
    vec![
        Frame {
            file: "/home/u/träin.py".into(),
            line: 42,
            function: "Model.schritt_λ".into(),
        },
        Frame {
            file: "/home/u/main.py".into(),
            line: 3,
            function: "main".into(),
        },
    ]
}

#[test]
fn cpython_3_10_frame_objects() {
    let f = Fixture::load("cpython-3.10.txt");
    let l = layout::for_version(0x030a0df0).unwrap();
    assert_eq!(l, expected_before_313(&f, 0x030a0df0));
    assert_eq!(walk_and_resolve(&l, 1), expected_frames());
}

#[test]
fn cpython_3_11_interpreter_frames() {
    let f = Fixture::load("cpython-3.11.txt");
    let l = layout::for_version(0x030b07f0).unwrap();
    assert_eq!(l, expected_before_313(&f, 0x030b07f0));
    assert_eq!(walk_and_resolve(&l, 2), expected_frames());
}

#[test]
fn cpython_3_12_skips_c_stack_frames() {
    let f = Fixture::load("cpython-3.12.txt");
    let l = layout::for_version(0x030c01f0).unwrap();
    assert_eq!(l, expected_before_313(&f, 0x030c01f0));
    assert_eq!(walk_and_resolve(&l, 3), expected_frames());
}

#[test]
fn cpython_3_13_from_its_debug_offsets() {
    let f = Fixture::load("cpython-3.13.txt");
    let l = layout::from_debug_offsets(&debug_offsets(&f, 0x030d00f0), 0x030d00f0).unwrap();
    assert_eq!(l, expected_313(&f, 0x030d00f0, false));
    assert_eq!(walk_and_resolve(&l, 4), expected_frames());
}

#[test]
fn cpython_3_13_free_threaded_from_its_debug_offsets() {
    let mut f = Fixture::load("cpython-3.13t.txt");
    f.0.insert("free_threaded".into(), 1);
    let l = layout::from_debug_offsets(&debug_offsets(&f, 0x030d00f0), 0x030d00f0).unwrap();
    assert_eq!(l, expected_313(&f, 0x030d00f0, true));
    // Its objects have the larger free-threaded header.
    assert_eq!(l.object_type, 24);
    assert_eq!(walk_and_resolve(&l, 5), expected_frames());
}

#[test]
fn debug_offsets_of_other_versions_and_foreign_bytes_are_refused() {
    let f = Fixture::load("cpython-3.13.txt");
    assert_eq!(f.get("sizeof._Py_DebugOffsets"), DEBUG_OFFSETS_SIZE);
    let v314 = debug_offsets(&f, 0x030e00f0);
    assert_eq!(
        layout::from_debug_offsets(&v314, 0x030e00f0),
        Err(layout::Refusal::Version(0x030e00f0))
    );
    let mismatch = debug_offsets(&f, 0x030d00f0);
    assert_eq!(
        layout::from_debug_offsets(&mismatch, 0x030c00f0),
        Err(layout::Refusal::Version(0x030d00f0))
    );
    let mut foreign = debug_offsets(&f, 0x030d00f0);
    foreign[0] = b'y';
    assert_eq!(
        layout::from_debug_offsets(&foreign, 0x030d00f0),
        Err(layout::Refusal::Cookie)
    );
    assert_eq!(layout::for_version(0x03090000), None);
    assert_eq!(layout::for_version(0x030d0000), None);
}

#[test]
fn a_code_object_freed_and_reused_gets_an_entry_of_its_own() {
    let l = layout::for_version(0x030b07f0).unwrap();
    let mut m = Memory::new();
    let code = m.code(&l, "/a.py", "f", 10, &[0x80 | 13 << 3 | 7, 2]);
    let mut t = sites::tests::table();
    let frame = RawFrame { code, offset: 0 };
    // SAFETY: the code object is complete in `m` (both times).
    unsafe { sites::tests::add_call(&mut t, &l, 0, &[frame], 300_000) };
    // Another code object at the same address: other strings, another line table.
    let (file, name, table) = (
        m.str(&l, "/b.py"),
        m.str(&l, "g"),
        m.bytes(&l, &[0x80 | 13 << 3 | 7, 4]),
    );
    m.word(code + l.code_filename, file);
    m.word(code + l.code_name, name);
    m.word(code + l.code_line_table, table);
    // SAFETY: as above.
    unsafe { sites::tests::add_call(&mut t, &l, 0, &[frame], 200_000) };
    let named: Vec<(String, u32, String)> = sites::tests::top(&t)
        .into_iter()
        .map(|s| {
            let f = &s.frames[0];
            (f.file.clone(), f.line, f.function.clone())
        })
        .collect();
    assert_eq!(
        named,
        [
            ("/a.py".into(), 11, "f".into()),
            ("/b.py".into(), 12, "g".into())
        ]
    );
}

#[test]
fn a_full_table_keeps_the_top_sites_and_counts_the_rest_as_dropped() {
    let l = layout::for_version(0x030b07f0).unwrap();
    let mut m = Memory::new();
    let code = m.code(&l, "/a.py", "f", 10, &[0x80 | 13 << 3 | 7, 2]);
    let mut t = sites::tests::table();
    // Each hook makes a site of its own: 256 fit.
    for hook in 0..257 {
        // SAFETY: the code object is complete in `m`.
        unsafe {
            sites::tests::add_call(
                &mut t,
                &l,
                hook,
                &[RawFrame { code, offset: 0 }],
                100_000 + hook as u64,
            )
        };
    }
    assert_eq!(sites::tests::dropped(&t), (1, 100_256));
    let top = sites::tests::top(&t);
    assert_eq!(top.len(), sites::TOP_SITES);
    assert_eq!(top[0].blocked_ns, 100_255);
    assert_eq!(top[31].blocked_ns, 100_224);
}

/// The tests that add to the process's call-site table, one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn a_capture_that_finds_the_table_in_use_counts_its_call_as_dropped() {
    let _serial = serial();
    let l = layout::for_version(0x030b07f0).unwrap();
    let mut m = Memory::new();
    let code = m.code(&l, "/a.py", "f", 10, &[0x80 | 13 << 3 | 7, 2]);
    let before = sites::summary();
    let held = sites::tests::hold_table();
    // SAFETY: the code object is complete in `m`.
    unsafe { sites::add(&l, 0, None, &[RawFrame { code, offset: 0 }], 3, 1_000) };
    drop(held);
    let after = sites::summary();
    assert_eq!(
        (
            after.captures - before.captures,
            after.dropped_calls - before.dropped_calls,
            after.dropped_ns - before.dropped_ns,
            after.sites.len(),
        ),
        (1, 3, 3_000, before.sites.len())
    );
}

/// The fake interpreter's thread state, the same for every thread.
static THREAD_STATE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn initialized() -> std::ffi::c_int {
    1
}

extern "C" fn this_thread_state() -> *mut std::ffi::c_void {
    THREAD_STATE.load(std::sync::atomic::Ordering::Relaxed) as *mut std::ffi::c_void
}

/// What `UPCALLS.call_site` runs for a picked call, from 8 threads at once into the
/// process's table: no allocation, and every call counted, at its site or, where another
/// thread held the table, as dropped.
#[test]
fn call_site_capture_does_not_allocate() {
    let _serial = serial();
    let l = layout::for_version(0x030b07f0).unwrap();
    let mut m = Memory::new();
    let table = [0x80 | 13 << 3 | 7, 2];
    let (outer, inner) = (
        m.code(&l, "/noalloc/main.py", "main", 1, &table),
        m.code(&l, "/noalloc/step.py", "step", 40, &table),
    );
    let main_frame = m.frame(&l, outer, 0, 0, 0);
    let inner_frame = m.frame(&l, inner, 0, main_frame, 0);
    THREAD_STATE.store(
        m.thread_state(&l, inner_frame),
        std::sync::atomic::Ordering::Relaxed,
    );
    let py = super::Interpreter {
        layout: l,
        code_type: CODE_TYPE,
        is_initialized: initialized,
        this_thread_state,
    };
    let hook = crate::hooks::Hook::cuStreamSynchronize as usize;
    let cause = Some(gpuspy_format::SyncCause::Explicit);
    let site_calls = |s: &sites::Summary| {
        s.sites
            .iter()
            .filter(|s| {
                s.frames
                    .first()
                    .is_some_and(|f| f.file == "/noalloc/step.py")
            })
            .map(|s| s.calls)
            .sum::<u64>()
    };
    let before = sites::summary();
    let allocations = crate::no_alloc_tests::allocations();
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                crate::no_alloc_tests::counting(|| {
                    for _ in 0..10_000 {
                        // Over the threshold: each capture stands for one call.
                        super::capture_in(&py, hook, cause, 200_000);
                    }
                })
            });
        }
    });
    assert_eq!(crate::no_alloc_tests::allocations(), allocations);
    let after = sites::summary();
    assert_eq!(after.captures - before.captures, 80_000);
    assert_eq!(
        site_calls(&after) - site_calls(&before) + after.dropped_calls - before.dropped_calls,
        80_000
    );
    assert!(site_calls(&after) > site_calls(&before));
}
