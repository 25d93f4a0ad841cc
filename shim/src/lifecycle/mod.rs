//! When the shim starts recording, and when it writes.
//!
//! At load time a constructor reads the environment once (`config.rs`) and fixes the output
//! directory as an absolute path, before the program can `chdir`. Nothing else runs then.
//! The first intercepted call of a process picks the clock, maps the arena and registers
//! the fork handler; threads that arrive while that is under way pass straight through
//! rather than wait. The first call of each process generation (the process itself, a
//! forked child, or a new image after `exec`) records its start, starts the writer thread
//! and installs the signal handlers (`signals.rs`).
//!
//! Dumps are written at normal exit (a `.fini_array` destructor, which runs after the
//! program's `atexit` handlers, so the CUDA runtime's own teardown calls are counted), at
//! `_exit`/`_Exit`, just before `exec` (`exec.rs`), by the writer thread every
//! `GPUSPY_FLUSH_S` seconds, and by the writer thread when a signal is about to end the
//! process. A fork child starts from zero.
//!
//! The lifecycle is the top layer (docs/design.md "Shim layers"): the dump it writes
//! (`dump.rs`) is its own submodule.

pub(crate) mod dump;

use crate::{clock, record, signals, switch, unwrapped};
use gpuspy_format::Ending;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::time::Duration;

use crate::config::config;

/// The `GPUSPY_IMAGE` value for the image that replaces this one (`config::Image`).
pub fn next_image() -> String {
    let number = config().and_then(|c| c.image).map_or(0, |i| i.number) + 1;
    format!(
        "{}:{number}:{}",
        std::process::id(),
        switch::start_unix_ns()
    )
}

/// At load: the environment and the working directory as the program was started with them.
#[cfg_attr(test, allow(dead_code))]
extern "C" fn on_load() {
    if crate::config::load().enabled {
        crate::nvtx::claim_injection();
    }
    crate::exec::NEXT.resolve();
    signals::NEXT.resolve();
    signals::DISPOSITION_FNS.resolve();
}

// Not in the shim's own unit tests, which set the environment themselves.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = on_load;

const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const READY: u8 = 2;
const OFF: u8 = 3;
static STATE: AtomicU8 = AtomicU8::new(UNINIT);

/// The pid whose data the arena holds: a vfork child shares our memory but not our pid.
static OWNER_PID: AtomicU32 = AtomicU32::new(0);

static FIRST_CALL_UNIX_NS: AtomicU64 = AtomicU64::new(0);
/// Bumped at every fork so the parent's flusher thread, if copied state suggests it runs,
/// is known not to exist in the child.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// The first call of a process generation (through `switch::recording`): starts recording.
/// True when the shim records.
#[cold]
#[inline(never)]
pub fn activate() -> bool {
    match STATE.compare_exchange(UNINIT, INITIALISING, AcqRel, Acquire) {
        Ok(_) => {
            let ready = init_process();
            STATE.store(if ready { READY } else { OFF }, Release);
            if !ready {
                return false;
            }
        }
        Err(READY) => {}
        Err(INITIALISING) => {
            // Another thread is initialising (about 2 ms, for the clock). Wait for it so
            // that a burst of threads at start-up is recorded, but never for long: past the
            // bound, pass through rather than risk waiting on a thread that waits on us.
            let deadline = clock::monotonic_ns() + 100_000_000;
            while STATE.load(Acquire) == INITIALISING {
                if clock::monotonic_ns() > deadline {
                    return false;
                }
                std::thread::yield_now();
            }
            if STATE.load(Acquire) != READY {
                return false;
            }
        }
        Err(_) => return false,
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if OWNER_PID.swap(pid, AcqRel) != pid {
        let now = clock::unix_ns();
        FIRST_CALL_UNIX_NS.store(now, Relaxed);
        // /proc gives 10 ms resolution: never let the start fall after the first call. An
        // image after exec keeps the start its first image recorded.
        let start = match config().and_then(|c| c.image) {
            Some(image) => image.start_unix_ns,
            None => process_start_unix_ns().map_or(now, |s| s.min(now)),
        };
        switch::set_start_unix_ns(start);
        dump::capture_process_info();
        start_writer();
        signals::install();
    }
    switch::turn_on();
    true
}

fn init_process() -> bool {
    let config = crate::config::load();
    if !config.enabled || !record::init_arena() {
        return false;
    }
    clock::init(config.force_monotonic);
    crate::reserve::map();
    // SAFETY: registering a plain extern "C" fn; the handler only stores atomics and makes
    // one madvise call, both async-signal-safe.
    unsafe { libc::pthread_atfork(None, None, Some(on_fork_child)) };
    true
}

extern "C" fn on_fork_child() {
    switch::mark_forked();
    switch::turn_off();
    OWNER_PID.store(0, Relaxed);
    GENERATION.fetch_add(1, Relaxed);
    FINAL_WRITTEN.store(false, Relaxed);
    WRITING.store(false, Relaxed);
    SIGNAL_REQUEST.store(0, Relaxed);
    SIGNAL_DUMP_DONE.store(false, Relaxed);
    // The parent's writer thread does not exist here.
    WRITER_RUNNING.store(false, Relaxed);
    record::reset_arena();
    crate::timeline::on_fork_child();
    crate::events::on_fork_child();
    crate::nvtx::on_fork_child();
    unwrapped::reset();
    crate::nccl::reset();
    crate::pystack::reset();
    crate::gpu::on_fork_child();
}

/// Whether this process generation has a writer thread to ask for a signal's dump.
static WRITER_RUNNING: AtomicBool = AtomicBool::new(false);
/// Wakes the writer thread early (a signal's dump). A futex word and no descriptor: a
/// program may close every descriptor it did not open, or reuse the numbers for its own
/// files (daemons, test harnesses), and a wake-up pipe would then be polled, drained and
/// written to under numbers that are the program's.
static WAKE: Wake = Wake(AtomicU32::new(0));
/// The signal whose dump a handler asked for (0: none), and whether it has been written.
static SIGNAL_REQUEST: AtomicI32 = AtomicI32::new(0);
static SIGNAL_DUMP_DONE: AtomicBool = AtomicBool::new(false);

/// A wake-up call on a futex word: each ring bumps it, and a wait returns at once if it
/// changed since the waiter looked, so no ring between the look and the wait is lost.
struct Wake(AtomicU32);

impl Wake {
    fn rings(&self) -> u32 {
        self.0.load(Acquire)
    }

    /// Sleeps for at most `timeout`, unless the word has moved on from `seen`.
    fn wait(&self, seen: u32, timeout: &libc::timespec) {
        // SAFETY: a private futex on a word that lives as long as the process; the timeout
        // is relative. Any result (woken, timed out, EAGAIN, EINTR) just ends the wait.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                timeout as *const libc::timespec,
            )
        };
    }

    /// Async-signal-safe: an atomic add and one futex call.
    fn ring(&self) {
        self.0.fetch_add(1, Release);
        // SAFETY: as in `wait`; wakes at most one waiter, the writer thread.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            )
        };
    }
}

/// Starts the writer thread of this process generation: it writes a dump every
/// `GPUSPY_FLUSH_S` seconds, at once when a signal handler asks, and in between keeps the
/// timeline's windows (`timeline::tick`).
fn start_writer() {
    let flush_every = config().and_then(|c| c.flush_every);
    let generation = GENERATION.load(Relaxed);
    let spawned =
        signals::spawn_without_signals("gpuspy-writer", move || writer(flush_every, generation));
    if spawned {
        WRITER_RUNNING.store(true, Release);
    } else {
        dump::warn_once("could not start the writer thread; dumps are written at exit only");
    }
}

fn writer(flush_every: Option<Duration>, generation: u32) {
    let flush_every_ns = flush_every.map(|d| d.as_nanos().clamp(1, u64::MAX as u128) as u64);
    let mut next_flush = flush_every_ns.map(|every| clock::monotonic_ns() + every);
    let watch_every = crate::watchdog::check_every_ns();
    let mut next_watch = watch_every.map(|every| clock::monotonic_ns() + every);
    let mut hangs_seen = Vec::new();
    loop {
        let rings = WAKE.rings();
        let tick_in = crate::timeline::tick();
        let now = clock::monotonic_ns();
        let wait_ns = [next_flush, next_watch]
            .into_iter()
            .flatten()
            .fold(tick_in, |wait, at| wait.min(at.saturating_sub(now)));
        let timeout = libc::timespec {
            tv_sec: (wait_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long,
        };
        // A request made before `rings` was read is seen here; one made after moves the
        // word, and the wait returns at once.
        if SIGNAL_REQUEST.load(Acquire) == 0 {
            WAKE.wait(rings, &timeout);
        }
        if GENERATION.load(Relaxed) != generation || FINAL_WRITTEN.load(Acquire) {
            return;
        }
        let mut flush_due = next_flush.is_some_and(|at| clock::monotonic_ns() >= at);
        let mut hangs = Vec::new();
        if next_watch.is_some_and(|at| clock::monotonic_ns() >= at) {
            hangs = crate::watchdog::new_hangs(&mut hangs_seen);
            flush_due |= !hangs.is_empty();
            next_watch = watch_every.map(|every| clock::monotonic_ns() + every);
        }
        match SIGNAL_REQUEST.load(Acquire) {
            0 if !flush_due => {}
            0 => {
                write(Occasion::Periodic);
                next_flush = flush_every_ns.map(|every| clock::monotonic_ns() + every);
                for hang in &hangs {
                    eprintln!("{}", crate::watchdog::describe(hang));
                }
            }
            signal => {
                write(Occasion::Final(Some(Ending::Signal(signal))));
                SIGNAL_DUMP_DONE.store(true, Release);
                return;
            }
        }
    }
}

/// Called from a signal handler: asks the writer thread for the dump that `signal` is about
/// to cut short and says whether one will come (`signal_dump_written` tells when).
/// Async-signal-safe: atomics, `getpid` and one futex wake.
pub fn request_signal_dump(signal: libc::c_int) -> bool {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if !WRITER_RUNNING.load(Acquire)
        || !switch::is_on()
        || OWNER_PID.load(Acquire) != pid
        || FINAL_WRITTEN.load(Acquire)
    {
        return false;
    }
    // A second signal, on another thread, waits for the first one's dump.
    let _ = SIGNAL_REQUEST.compare_exchange(0, signal, AcqRel, Acquire);
    WAKE.ring();
    true
}

pub fn signal_dump_written() -> bool {
    SIGNAL_DUMP_DONE.load(Acquire)
}

/// What a write is for.
#[derive(Clone, Copy)]
enum Occasion {
    /// The writer thread's periodic flush of a running process.
    Periodic,
    /// Just before `exec`: complete, but the image runs on if `exec` fails.
    BeforeExec,
    /// The image is ending: exit, `_exit`, or a signal (then nothing is written after it).
    Final(Option<Ending>),
}

/// Serialises dump writers: the periodic flush never overwrites a final dump.
static WRITING: AtomicBool = AtomicBool::new(false);
static FINAL_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Writes this process's dump if it made driver calls.
fn write(what: Occasion) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if !switch::is_on() || OWNER_PID.load(Acquire) != pid || FINAL_WRITTEN.load(Acquire) {
        return;
    }
    // A final or pre-exec write waits for a periodic write in progress (bounded); the
    // periodic one gives way.
    let mut spins = 0;
    while WRITING
        .compare_exchange(false, true, Acquire, Relaxed)
        .is_err()
    {
        if matches!(what, Occasion::Periodic) || spins > 2_000 {
            return;
        }
        spins += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    if !FINAL_WRITTEN.load(Acquire) {
        let times = dump::Times {
            start_unix_ns: switch::start_unix_ns(),
            first_call_unix_ns: FIRST_CALL_UNIX_NS.load(Relaxed),
        };
        let (complete, ending) = match what {
            Occasion::Periodic => (false, None),
            Occasion::BeforeExec => (true, Some(Ending::Exec)),
            Occasion::Final(ending) => (true, ending),
        };
        let last = matches!(what, Occasion::Final(_));
        let _ = std::panic::catch_unwind(|| dump::write(times, complete, ending, last));
        if matches!(what, Occasion::Final(_)) {
            FINAL_WRITTEN.store(true, Release);
        }
    }
    WRITING.store(false, Release);
}

/// Just before this image is replaced: its dump, GPU collection finished first.
pub fn before_exec() {
    crate::gpu::finish();
    write(Occasion::BeforeExec);
}

/// Whether this process generation records (so an `exec` of it is a new image of ours).
pub fn owns_process() -> bool {
    // SAFETY: getpid has no preconditions.
    switch::is_on() && OWNER_PID.load(Acquire) == unsafe { libc::getpid() } as u32
}

/// Normal exit and dlclose.
extern "C" fn on_unload() {
    write(Occasion::Final(None));
}

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = on_unload;

type ExitFn = unsafe extern "C" fn(libc::c_int) -> !;

fn exit_via(name: &std::ffi::CStr, status: libc::c_int) -> ! {
    crate::gpu::finish();
    write(Occasion::Final(None));
    let real = crate::resolve::lookup(libc::RTLD_NEXT, name);
    if !real.is_null() {
        // SAFETY: the next definition of _exit/_Exit, same signature.
        unsafe { std::mem::transmute::<*mut libc::c_void, ExitFn>(real)(status) }
    }
    // SAFETY: exit_group ends the process; it is what _exit does.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    unreachable_exit()
}

fn unreachable_exit() -> ! {
    loop {
        std::hint::spin_loop();
    }
}

/// `_exit` (Python's `os._exit`, multiprocessing workers) skips atexit and destructors.
#[no_mangle]
pub extern "C" fn _exit(status: libc::c_int) -> ! {
    exit_via(c"_exit", status)
}

#[no_mangle]
pub extern "C" fn _Exit(status: libc::c_int) -> ! {
    exit_via(c"_Exit", status)
}

/// Process start: its age from /proc (start in clock ticks after boot, field 22 of
/// /proc/self/stat, against /proc/uptime, both 10 ms resolution) taken from now.
fn process_start_unix_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name, which may itself hold spaces.
    let after_comm = stat.rsplit_once(')')?.1;
    let start_ticks: u64 = after_comm.split_whitespace().nth(19)?.parse().ok()?;
    let uptime_s: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    let age_ns = ((uptime_s * 1e9) as u64).checked_sub(start_ticks * (1_000_000_000 / hz))?;
    clock::unix_ns().checked_sub(age_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_start_is_in_the_past() {
        let start = process_start_unix_ns().unwrap();
        let now = clock::unix_ns();
        assert!(
            start <= now && now - start < 3_600 * 1_000_000_000,
            "{start} vs {now}"
        );
    }
}
