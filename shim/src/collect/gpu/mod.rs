//! The GPU's own view: NVML telemetry and CUPTI activity, collected on one gpuspy thread.
//!
//! The process's first successful `cuInit` starts one thread, which opens CUPTI while
//! `cuInit` waits (at most 1 s): CUPTI must be enabled before the first context exists, or
//! unified-memory counters stay at zero and the first kernels go unrecorded (both seen on
//! the H200 when collection started at the first context instead). NVML opens at the
//! first context, so a launcher that only initialises the driver (torchrun's agent) never
//! opens it and its dump has no GPU section. Then the thread, every `GPUSPY_NVML_MS`
//! (100 ms), samples NVML for each device the process created a context on and drains
//! CUPTI's completed buffers. At exit an `atexit` handler (registered after the program's
//! own, so it runs before them, while CUDA and CUPTI are still up) forces a last flush. Its
//! own driver and NVML calls bypass the wrappers and its thread is excluded from
//! recording, so they never appear as the program's calls. A child forked after collection
//! started collects nothing GPU-side.

pub mod activity;
pub mod cupti;
mod cupti_places;
mod duty;
mod nvml;
mod sampling;
mod telemetry;

use crate::config::CuptiMode;
use crate::{clock, resolve};
use duty::{AfterSlot, Detaching, KindSwitches, Look, Traced, Woke};
use gpuspy_format::gpu::{Device, DeviceFacts, Gpu, SourceStatus};
use nvml::{GpmSampler, Nvml};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Mutex;
use std::time::Duration;
use telemetry::TelemetryAgg;

static STARTED: AtomicBool = AtomicBool::new(false);
/// The process that started collection: a vfork child shares our memory but must not
/// finish it for us when it calls `_exit`.
static STARTED_PID: AtomicU32 = AtomicU32::new(0);
static FINISHED: AtomicBool = AtomicBool::new(false);
/// The gpuspy thread has opened (or failed to open) NVML and CUPTI, at the first context.
static SOURCES_OPEN: AtomicBool = AtomicBool::new(false);
/// The gpuspy thread has tried to start CUPTI (what came of it is in the status).
static CUPTI_TRIED: AtomicBool = AtomicBool::new(false);
static IN_FORKED_CHILD: AtomicBool = AtomicBool::new(false);
/// CUDA ordinals (below 64) the process created or retained a context on.
static DEVICES_USED: AtomicU64 = AtomicU64::new(0);
/// The program allocated managed memory: the unified-memory counters are wanted.
static MANAGED_MEMORY: AtomicBool = AtomicBool::new(false);

/// Intervals younger than this stay unsettled: records of work still running when a flush
/// happens come later.
const SETTLE_MARGIN_NS: u64 = 500_000_000;
/// The slow NVML queries (PCIe throughput, other processes) run every this many ticks.
const SLOW_QUERY_TICKS: u64 = 10;
/// CPU time the gpuspy thread has used, as of its last tick.
static COLLECTOR_CPU_NS: AtomicU64 = AtomicU64::new(0);
/// How long the program's first `cuInit` was held while the gpuspy thread started CUPTI.
static START_WAIT_NS: AtomicU64 = AtomicU64::new(0);

#[derive(Default)]
struct State {
    nvml: SourceStatus,
    cupti: SourceStatus,
    devices: BTreeMap<u32, DeviceState>,
}

#[derive(Default)]
struct DeviceState {
    facts: Option<DeviceFacts>,
    telemetry: Option<TelemetryAgg>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// After the first successful `cuInit` of the process: starts the gpuspy thread and waits
/// (at most 1 s) until it has tried CUPTI, so that no context predates the subscription.
/// The wait comes after the call's time was recorded: it is not charged to `cuInit`.
#[cold]
pub fn on_driver_ready() {
    if IN_FORKED_CHILD.load(Relaxed) || STARTED.swap(true, AcqRel) {
        return;
    }
    let held_from = clock::monotonic_ns();
    STARTED_PID.store(own_pid(), Release);
    if let Ok(mut state) = STATE.lock() {
        *state = Some(State::default());
    }
    if !crate::signals::spawn_without_signals("gpuspy-gpu", run) {
        set_status(|s| {
            s.nvml.note = "could not start the gpuspy thread".into();
            s.cupti.note = s.nvml.note.clone();
        });
        return;
    }
    // SAFETY: registering a plain extern "C" fn.
    unsafe { libc::atexit(finish_at_exit) };
    wait_for(&CUPTI_TRIED);
    START_WAIT_NS.store(clock::monotonic_ns() - held_from, Relaxed);
}

/// Waits at most 1 s for `flag`.
fn wait_for(flag: &AtomicBool) {
    let deadline = clock::monotonic_ns() + 1_000_000_000;
    while !flag.load(Acquire) && clock::monotonic_ns() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A context was created or retained on CUDA device `ordinal`.
#[cold]
pub fn on_device_used(ordinal: c_int) {
    if (0..64).contains(&ordinal) {
        DEVICES_USED.fetch_or(1 << ordinal, Relaxed);
    }
}

/// The program allocated managed memory (`cuMemAllocManaged`).
#[cold]
pub fn on_managed_memory() {
    MANAGED_MEMORY.store(true, Relaxed);
}

extern "C" fn finish_at_exit() {
    finish();
}

/// The last collection: forced CUPTI flush. Later calls do nothing. A process that used a
/// device and ends while the gpuspy thread is still opening NVML waits for it (at most
/// 1 s), so that the dump says what happened.
pub fn finish() {
    if STARTED.load(Acquire)
        && !IN_FORKED_CHILD.load(Relaxed)
        && STARTED_PID.load(Acquire) == own_pid()
        && !FINISHED.swap(true, AcqRel)
    {
        if DEVICES_USED.load(Relaxed) != 0 {
            wait_for(&SOURCES_OPEN);
        }
        cupti::collect(true, 0);
    }
}

/// A child forked after collection started inherits locks a thread that does not exist
/// here may hold, and CUDA does not survive fork: it collects nothing. A child forked
/// before (its parent never initialised CUDA) starts afresh at its own `cuInit`.
pub fn on_fork_child() {
    if STARTED.load(Relaxed) {
        IN_FORKED_CHILD.store(true, Relaxed);
        cupti::forget_after_fork();
    }
}

fn own_pid() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u32 }
}

fn set_status(f: impl FnOnce(&mut State)) {
    if let Ok(mut guard) = STATE.lock() {
        if let Some(state) = guard.as_mut() {
            f(state);
        }
    }
}

struct Settings {
    interval: Duration,
    nvml: bool,
    cupti: CuptiMode,
}

fn settings() -> Settings {
    let config = crate::config::load();
    Settings {
        // With NVML off the thread still drains CUPTI every 100 ms.
        interval: config.nvml_every.unwrap_or(Duration::from_millis(100)),
        nvml: config.nvml_every.is_some(),
        cupti: config.cupti,
    }
}

fn run() {
    crate::record::exclude_current_thread();
    let settings = settings();
    let cupti = match settings.cupti {
        CuptiMode::Off => Err("off (GPUSPY_CUPTI=0)".to_string()),
        mode => cupti::start(
            mode != CuptiMode::Full,
            mode == CuptiMode::SampledDetaching,
            crate::switch::start_unix_ns(),
        ),
    };
    let sampled = settings.cupti != CuptiMode::Full && cupti.is_ok();
    let mut duty = KindSwitches::new(sampled, clock::unix_ns());
    set_status(|s| s.cupti = status(cupti));
    CUPTI_TRIED.store(true, Release);
    // NVML waits for the first context; CUPTI's buffers are drained meanwhile all the same.
    while DEVICES_USED.load(Relaxed) == 0 {
        if FINISHED.load(Acquire) {
            return;
        }
        cupti::collect(false, SETTLE_MARGIN_NS);
        switch_kinds_until(
            clock::monotonic_ns() + settings.interval.as_nanos() as u64,
            &mut duty,
        );
    }
    // A program whose own CUPTI client (torch.profiler started before the first CUDA call)
    // was already active hung in its first cuBLAS call on the H200 in both runs where
    // gpuspy had opened NVML, and not in the run where it had not
    // (bench/results/gpu-2026-11-29-truth-3). The cause is not known, so gpuspy leaves
    // NVML alone in that case.
    let nvml = if !settings.nvml {
        Err("off (GPUSPY_NVML_MS=0)".to_string())
    } else if cupti::program_client() {
        Err("off: the program's own CUPTI client was active when gpuspy started".to_string())
    } else {
        Nvml::open()
    };
    set_status(|s| {
        s.nvml = status(
            nvml.as_ref()
                .map(|_| "libnvidia-ml.so.1".to_string())
                .map_err(String::clone),
        )
    });
    SOURCES_OPEN.store(true, Release);
    let nvml = nvml.ok();
    let pid = own_pid();
    let mut known = 0u64;
    let mut sampled = BTreeMap::new();
    let mut tick = 0u64;
    while !FINISHED.load(Acquire) {
        let started = clock::monotonic_ns();
        let used = DEVICES_USED.load(Relaxed);
        if used != known {
            for ordinal in (0..64).filter(|o| (used & !known) >> o & 1 == 1) {
                if let Some(d) = add_device(ordinal, nvml.as_ref(), pid, settings.interval) {
                    sampled.insert(ordinal, d);
                }
            }
            known = used;
        }
        // Sampling stops for good once the program has its own CUPTI client: the hangs
        // described above happened with NVML queries running alongside one.
        if let (Some(nvml), false) = (&nvml, cupti::program_client()) {
            sample(
                nvml,
                &mut sampled,
                pid,
                tick.is_multiple_of(SLOW_QUERY_TICKS),
            );
        }
        cupti::collect(false, SETTLE_MARGIN_NS);
        COLLECTOR_CPU_NS.store(thread_cpu_ns(), Relaxed);
        tick += 1;
        switch_kinds_until(started + settings.interval.as_nanos() as u64, &mut duty);
    }
}

/// Sleeps until `deadline` (monotonic ns), switching CUPTI's kinds on and off meanwhile
/// when `duty` says: it gathers what `duty` decides on and makes the calls it asks for.
fn switch_kinds_until(deadline: u64, duty: &mut KindSwitches) {
    loop {
        let now = clock::monotonic_ns();
        if now >= deadline || FINISHED.load(Acquire) {
            return;
        }
        let managed_memory = MANAGED_MEMORY.load(Relaxed);
        let wake = duty.woke(&Woke {
            monotonic: now,
            unix: clock::unix_ns(),
            managed_memory,
            launches: duty
                .wants_launches(managed_memory)
                .then(crate::timeline::launches_so_far),
            nccl: crate::nccl::used(),
        });
        if wake.start_unified_memory {
            cupti::switch_unified_memory(true);
        }
        match wake.traced {
            Traced::Wait => {}
            Traced::TurnOn => turn_traced_kinds_on(duty),
            Traced::LookAtSlot => look_at_slot(duty),
        }
        if let Some(on) = wake.unified_memory {
            cupti::switch_unified_memory(on);
            duty.unified_memory_switched(clock::unix_ns());
        }
        let sleep = duty.sleep_ns(clock::unix_ns()).min(deadline - now);
        std::thread::sleep(Duration::from_nanos(sleep));
    }
}

fn turn_traced_kinds_on(duty: &mut KindSwitches) {
    if cupti::switch_traced_kinds(true) {
        duty.traced_on(clock::unix_ns());
    } else {
        duty.held_back(clock::unix_ns());
    }
}

/// The slot's cost so far, at its end or inside a long one, and what follows from it.
fn look_at_slot(duty: &mut KindSwitches) {
    cupti::collect(false, SETTLE_MARGIN_NS);
    let now = clock::unix_ns();
    match duty.look_at_slot(now, cupti::this_slot()) {
        Look::Continue => {}
        Look::NextSlot => cupti::next_slot(now),
        Look::TurnOff if !cupti::switch_traced_kinds(false) => duty.held_back(clock::unix_ns()),
        Look::TurnOff => {
            // The slot's records, gathered with the kinds off: its rate decides the next
            // cycle.
            cupti::collect(false, SETTLE_MARGIN_NS);
            if duty.may_restart() && cupti::records_stopped() {
                cupti::restart();
            }
            let detaching = Detaching {
                allowed: cupti::may_detach_between_slots(),
                awaited_records: cupti::awaited_records(),
                switch_ns: cupti::switch_cost_ns(),
            };
            match duty.slot_ended(clock::unix_ns(), cupti::this_slot(), &detaching) {
                AfterSlot::TurnOn => turn_traced_kinds_on(duty),
                AfterSlot::Detach => cupti::detach(),
                AfterSlot::StayAttached => {}
            }
        }
    }
}

fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn status(r: Result<String, String>) -> SourceStatus {
    match r {
        Ok(note) => SourceStatus { active: true, note },
        Err(note) => SourceStatus {
            active: false,
            note,
        },
    }
}

/// The CUDA device's UUID in NVML's form for a MIG instance (`MIG-xxxxxxxx-xxxx-...`).
fn mig_uuid(ordinal: u32) -> Option<std::ffi::CString> {
    type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> u32;
    type Uuid = unsafe extern "C" fn(*mut [u8; 16], c_int) -> u32;
    let get = resolve::driver_symbol(c"cuDeviceGet")?;
    let uuid = resolve::driver_symbol(c"cuDeviceGetUuid_v2")?;
    let (mut dev, mut b) = (0 as c_int, [0u8; 16]);
    // SAFETY: libcuda's functions of these names and cuda.h signatures (CUuuid is 16 bytes).
    let ok = unsafe {
        std::mem::transmute::<*mut c_void, DeviceGet>(get)(&mut dev, ordinal as c_int) == 0
            && std::mem::transmute::<*mut c_void, Uuid>(uuid)(&mut b, dev) == 0
    };
    if !ok {
        return None;
    }
    let hex = |r: std::ops::Range<usize>| -> String {
        b.iter()
            .take(r.end)
            .skip(r.start)
            .map(|x| format!("{x:02x}"))
            .collect()
    };
    let uuid = format!(
        "MIG-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    );
    std::ffi::CString::new(uuid).ok()
}

/// The driver's view of a device (PCI bus id, SM count), asked of libcuda directly.
fn driver_identity(ordinal: u32) -> (Option<String>, Option<u32>) {
    type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> u32;
    type BusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> u32;
    type Attribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> u32;
    const MULTIPROCESSOR_COUNT: c_int = 16;
    let (Some(get), Some(bus), Some(attr)) = (
        resolve::driver_symbol(c"cuDeviceGet"),
        resolve::driver_symbol(c"cuDeviceGetPCIBusId"),
        resolve::driver_symbol(c"cuDeviceGetAttribute"),
    ) else {
        return (None, None);
    };
    let mut dev: c_int = 0;
    // SAFETY: libcuda's functions of these names and cuda.h signatures.
    unsafe {
        if std::mem::transmute::<*mut c_void, DeviceGet>(get)(&mut dev, ordinal as c_int) != 0 {
            return (None, None);
        }
        let mut buf = [0 as c_char; 32];
        let bus_id = (std::mem::transmute::<*mut c_void, BusId>(bus)(buf.as_mut_ptr(), 32, dev)
            == 0)
            .then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned());
        let mut sms: c_int = 0;
        let sms = (std::mem::transmute::<*mut c_void, Attribute>(attr)(
            &mut sms,
            MULTIPROCESSOR_COUNT,
            dev,
        ) == 0)
            .then_some(sms as u32);
        (bus_id, sms)
    }
}

fn cuda_driver_version() -> Option<u32> {
    let f = resolve::driver_symbol(c"cuDriverGetVersion")?;
    let mut v: c_int = 0;
    // SAFETY: cuDriverGetVersion(int*).
    let r = unsafe {
        std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_int) -> u32>(f)(&mut v)
    };
    (r == 0).then_some(v as u32)
}

/// A device NVML samples: its handle (an address: handles are pointers) and its GPM
/// sampler where GPM works.
struct Sampled {
    dev: usize,
    gpm: Option<GpmSampler>,
}

/// Reads a newly used device's facts; returns what to sample it with.
fn add_device(ordinal: u32, nvml: Option<&Nvml>, pid: u32, interval: Duration) -> Option<Sampled> {
    let (bus_id, sms) = driver_identity(ordinal);
    let cuda_version = cuda_driver_version();
    let nvml_device = nvml.zip(bus_id.as_deref()).and_then(|(nvml, bus_id)| {
        let c_bus = std::ffi::CString::new(bus_id).ok()?;
        let dev = nvml.device_by_pci_bus_id(&c_bus)?;
        let mut facts = nvml.facts(dev, bus_id, pid);
        facts.sm_count = sms;
        facts.cuda_driver_version = cuda_version;
        let gpm = if facts.mig_mode == Some(true) {
            mig_uuid(ordinal)
                .ok_or_else(|| "MIG is on and the driver gave no UUID for the device".to_string())
                .and_then(|uuid| nvml.gpm(dev, Some(&uuid)))
        } else {
            nvml.gpm(dev, None)
        };
        Some((dev as usize, facts, gpm))
    });
    let (sampled, facts, gpm_status) = match nvml_device {
        Some((dev, facts, gpm)) => {
            let status = status(
                gpm.as_ref()
                    .map(GpmSampler::describe)
                    .map_err(String::clone),
            );
            (
                Some(Sampled { dev, gpm: gpm.ok() }),
                Some(facts),
                Some(status),
            )
        }
        None => (None, None, None),
    };
    set_status(|s| {
        let d = s.devices.entry(ordinal).or_default();
        d.telemetry = gpm_status.map(|gpm| {
            let mut t = TelemetryAgg::new(interval.as_millis() as u64);
            t.set_gpm_status(gpm);
            t
        });
        d.facts = facts.or_else(|| {
            sms.map(|sms| DeviceFacts {
                sm_count: Some(sms),
                pci_bus_id: bus_id.unwrap_or_default(),
                cuda_driver_version: cuda_version,
                ..DeviceFacts::default()
            })
        });
    });
    sampled
}

fn sample(nvml: &Nvml, devices: &mut BTreeMap<u32, Sampled>, pid: u32, with_processes: bool) {
    for (&ordinal, d) in devices.iter_mut() {
        let s = nvml.sample(d.dev as *mut c_void, d.gpm.as_mut(), pid, with_processes);
        set_status(|state| {
            if let Some(t) = state
                .devices
                .get_mut(&ordinal)
                .and_then(|d| d.telemetry.as_mut())
            {
                t.add(&s);
            }
        });
    }
}

/// The GPU section of a dump; None when collection never started in this process.
/// `launches`: the host's kernel launches, by which sampled kernel statistics are
/// extrapolated; `launch_span`: about when the first and the last of them were made.
pub fn snapshot(launches: u64, launch_span: (u64, u64)) -> Option<Gpu> {
    if !STARTED.load(Acquire) || IN_FORKED_CHILD.load(Relaxed) {
        return None;
    }
    let (activity, unified_memory, cupti_overhead) = match cupti::AGGREGATOR.lock() {
        Ok(guard) => match guard.as_ref() {
            Some(agg) => (
                agg.devices(launches, launch_span),
                agg.unified_memory(clock::unix_ns()),
                agg.overhead(),
            ),
            None => (Vec::new(), None, Vec::new()),
        },
        Err(_) => (Vec::new(), None, Vec::new()),
    };
    // A launcher that only initialised the driver has nothing to say about a GPU; a context
    // made some way the hooks do not see still shows through its activity.
    if DEVICES_USED.load(Relaxed) == 0 && activity.is_empty() {
        return None;
    }
    let guard = STATE.lock().ok()?;
    let state = guard.as_ref()?;
    let mut devices: BTreeMap<u32, Device> = state
        .devices
        .iter()
        .map(|(&ordinal, d)| {
            let device = Device {
                ordinal,
                facts: d.facts.clone(),
                telemetry: d.telemetry.as_ref().map(TelemetryAgg::telemetry),
                activity: None,
            };
            (ordinal, device)
        })
        .collect();
    for (ordinal, a) in activity {
        devices
            .entry(ordinal)
            .or_insert_with(|| Device {
                ordinal,
                ..Device::default()
            })
            .activity = Some(a);
    }
    let (dropped, refused, yielded_at) = cupti::counters();
    let mut cupti = state.cupti.clone();
    if let Some(summary) = cupti::switch_summary() {
        cupti.note.push_str("; ");
        cupti.note.push_str(&summary);
    }
    if let Some(at) = yielded_at {
        cupti.note.push_str(&format!(
            "; stepped aside for the program's own CUPTI client (torch.profiler or similar) at unix {}.{:03} s: later GPU activity is missing",
            at / 1_000_000_000,
            at % 1_000_000_000 / 1_000_000
        ));
    }
    let mut nvml = state.nvml.clone();
    if nvml.active && cupti::program_client() {
        nvml.note.push_str(
            "; sampling stopped when the program's own CUPTI client (torch.profiler or similar) registered",
        );
    }
    Some(Gpu {
        nvml,
        cupti,
        devices: devices.into_values().collect(),
        unified_memory,
        cupti_overhead,
        dropped_records: dropped,
        refused_buffers: refused,
        collector_cpu_ns: COLLECTOR_CPU_NS.load(Relaxed),
        start_wait_ns: START_WAIT_NS.load(Relaxed),
    })
}

/// The GPU side of the timeline: per device, and for the unified-memory counters, what
/// CUPTI saw per window of the grid that starts at `origin_unix_ns` (the process start;
/// the dump's `start_unix_ns`), and the window width they are at (`FIRST_WINDOW_NS`
/// doubled as often as the run needed; the host side's table may be at another width:
/// merge the finer one pairwise until they match). Empty without CUPTI.
pub fn timeline_gpu(origin_unix_ns: u64) -> activity::GpuWindows {
    if !STARTED.load(Acquire) || IN_FORKED_CHILD.load(Relaxed) {
        return activity::GpuWindows::default();
    }
    match cupti::AGGREGATOR.lock() {
        Ok(guard) => guard.as_ref().map_or_else(Default::default, |agg| {
            agg.windows(origin_unix_ns, clock::unix_ns())
        }),
        Err(_) => activity::GpuWindows::default(),
    }
}
