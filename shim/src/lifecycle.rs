//! When the shim starts recording, and when it writes.
//!
//! No constructor: nothing runs at load time. The first intercepted call of a process
//! reads the environment once (`Config`), picks the clock, maps the arena and registers the
//! fork handler; threads that arrive while that is under way pass straight through rather
//! than wait. The first call of each process generation (the process itself, or a forked
//! child) records its start and starts the periodic flusher.
//!
//! Dumps are written at normal exit (a `.fini_array` destructor, which runs after the
//! program's `atexit` handlers, so the CUDA runtime's own teardown calls are counted), at
//! `_exit`/`_Exit`, and every `GPUSPY_FLUSH_S` seconds. A fork child starts from zero.

use crate::{clock, dump, record, unwrapped};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::OnceLock;
use std::time::Duration;

/// Everything the environment says, read once.
#[derive(Debug)]
pub struct Config {
    pub out_dir: PathBuf,
    pub flush_every: Option<Duration>,
    pub enabled: bool,
    pub force_monotonic: bool,
    /// `GPUSPY_RUN_TOKEN`, set by `gpuspy run`; copied into every dump.
    pub run_token: Option<String>,
    /// `GPUSPY_IMAGE`: how many `exec`s of this pid came before this image (set by the
    /// shim's exec wrappers in the new image's environment).
    pub image: u32,
}

impl Config {
    fn from_env() -> Config {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let flush_s = var("GPUSPY_FLUSH_S")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(10.0);
        Config {
            out_dir: var("GPUSPY_OUT").map_or_else(|| PathBuf::from("gpuspy-out"), PathBuf::from),
            flush_every: (flush_s > 0.0).then(|| Duration::from_secs_f64(flush_s)),
            enabled: var("GPUSPY_DISABLE").is_none_or(|v| v == "0"),
            force_monotonic: var("GPUSPY_CLOCK").is_some_and(|v| v == "monotonic"),
            run_token: var("GPUSPY_RUN_TOKEN"),
            image: var("GPUSPY_IMAGE")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn config() -> Option<&'static Config> {
    CONFIG.get()
}

const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const READY: u8 = 2;
const OFF: u8 = 3;
static STATE: AtomicU8 = AtomicU8::new(UNINIT);

/// The two globals every intercepted call reads, on one cache line: between two calls a
/// Python interpreter evicts most of what the wrapper touches, and each line is a miss.
#[repr(C, align(64))]
struct Hot {
    /// 0 until the first call of a process generation (cleared in a fork child), then the
    /// clock source: one load says both "record" and "which clock".
    active: AtomicU8,
    /// `clock::ns_per_tick_q32()`, copied here at activation.
    ns_per_tick_q32: AtomicU64,
}

static HOT: Hot = Hot {
    active: AtomicU8::new(0),
    ns_per_tick_q32: AtomicU64::new(1 << 32),
};

/// The tick-to-nanosecond factor of the active clock.
#[inline(always)]
pub fn ns_per_tick_q32() -> u64 {
    HOT.ns_per_tick_q32.load(Relaxed)
}
/// The pid whose data the arena holds: a vfork child shares our memory but not our pid.
static OWNER_PID: AtomicU32 = AtomicU32::new(0);
static START_UNIX_NS: AtomicU64 = AtomicU64::new(0);
static FIRST_CALL_UNIX_NS: AtomicU64 = AtomicU64::new(0);
/// Bumped at every fork so the parent's flusher thread, if copied state suggests it runs,
/// is known not to exist in the child.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Whether wrappers should record, and with which clock. One relaxed load on the hot path.
#[inline(always)]
pub fn recording() -> Option<clock::Source> {
    match HOT.active.load(Relaxed) {
        1 => Some(clock::Source::Monotonic),
        2 => Some(clock::Source::Tsc),
        _ => activate().then(clock::chosen),
    }
}

fn active() -> bool {
    HOT.active.load(Acquire) != 0
}

#[cold]
#[inline(never)]
fn activate() -> bool {
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
        // /proc gives 10 ms resolution: never let the start fall after the first call.
        START_UNIX_NS.store(process_start_unix_ns().map_or(now, |s| s.min(now)), Relaxed);
        dump::capture_process_info();
        start_flusher();
    }
    HOT.ns_per_tick_q32.store(clock::ns_per_tick_q32(), Relaxed);
    HOT.active.store(clock::chosen() as u8, Release);
    true
}

fn init_process() -> bool {
    let config = CONFIG.get_or_init(Config::from_env);
    if !config.enabled || !record::init_arena() {
        return false;
    }
    clock::init(config.force_monotonic);
    // SAFETY: registering a plain extern "C" fn; the handler only stores atomics and makes
    // one madvise call, both async-signal-safe.
    unsafe { libc::pthread_atfork(None, None, Some(on_fork_child)) };
    true
}

extern "C" fn on_fork_child() {
    HOT.active.store(0, Relaxed);
    OWNER_PID.store(0, Relaxed);
    GENERATION.fetch_add(1, Relaxed);
    FINAL_WRITTEN.store(false, Relaxed);
    WRITING.store(false, Relaxed);
    record::reset_arena();
    unwrapped::reset();
    crate::nccl::reset();
    crate::gpu::on_fork_child();
}

fn start_flusher() {
    let Some(every) = config().and_then(|c| c.flush_every) else {
        return;
    };
    let generation = GENERATION.load(Relaxed);
    let spawned = std::thread::Builder::new()
        .name("gpuspy-flush".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            if GENERATION.load(Relaxed) != generation || FINAL_WRITTEN.load(Relaxed) {
                return;
            }
            write(false);
        });
    if spawned.is_err() {
        dump::warn_once("could not start the flush thread; dumps are written at exit only");
    }
}

/// Serialises dump writers: the flusher never overwrites the final dump.
static WRITING: AtomicBool = AtomicBool::new(false);
static FINAL_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Writes this process's dump if it made driver calls. `complete` marks the exit dump,
/// after which nothing is written again.
fn write(complete: bool) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if !active() || OWNER_PID.load(Acquire) != pid || FINAL_WRITTEN.load(Acquire) {
        return;
    }
    // The exit path waits for a periodic write in progress (bounded); the flusher gives way.
    let mut spins = 0;
    while WRITING
        .compare_exchange(false, true, Acquire, Relaxed)
        .is_err()
    {
        if !complete || spins > 2_000 {
            return;
        }
        spins += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    if !FINAL_WRITTEN.load(Acquire) {
        let times = dump::Times {
            start_unix_ns: START_UNIX_NS.load(Relaxed),
            first_call_unix_ns: FIRST_CALL_UNIX_NS.load(Relaxed),
        };
        let _ = std::panic::catch_unwind(|| dump::write(times, complete));
        if complete {
            FINAL_WRITTEN.store(true, Release);
        }
    }
    WRITING.store(false, Release);
}

/// Normal exit and dlclose.
extern "C" fn on_unload() {
    write(true);
}

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = on_unload;

type ExitFn = unsafe extern "C" fn(libc::c_int) -> !;

fn exit_via(name: &std::ffi::CStr, status: libc::c_int) -> ! {
    crate::gpu::finish();
    write(true);
    let real = crate::doors::lookup(libc::RTLD_NEXT, name);
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
