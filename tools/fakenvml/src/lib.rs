//! A fake `libnvidia-ml.so.1` for testing gpuspy without a GPU: the NVML queries gpuspy
//! makes, about one H200 on PCI bus 0000:19:00.0. Knobs, read at each call:
//! `FAKENVML_SM_CLOCK` (MHz, default 1980), `FAKENVML_REASONS` (clock-event reason bits,
//! hex, default 0), `FAKENVML_OTHER_PIDS` (comma-separated pids of other compute
//! processes), `FAKENVML_PCIE_GEN` (current link generation, default 5), `FAKENVML_NVLINKS`
//! (active NVLink links, default 18; 0 for a GPU without NVLink), `FAKENVML_POWER_LIMIT`
//! (enforced power limit in mW, default 700000, the default limit), `FAKENVML_GPM` (0: the
//! GPU does not support GPM), `FAKENVML_MIG` (1: MIG on, with one GPU instance, 3, whose
//! MIG device has the fake driver's UUID). GPM metrics have fixed values (`gpm_value`), so
//! tests can assert exact aggregates.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_char, c_void, CStr};

type Ret = u32;
const SUCCESS: Ret = 0;
const INVALID_ARGUMENT: Ret = 2;
const NOT_SUPPORTED: Ret = 3;
const NOT_FOUND: Ret = 6;
const INSUFFICIENT_SIZE: Ret = 7;

/// The one device's handle.
const DEVICE: *mut c_void = 0x19 as *mut c_void;

fn knob(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

unsafe fn put_text(buf: *mut c_char, len: u32, text: &str) -> Ret {
    if (len as usize) <= text.len() {
        return INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(text.as_ptr().cast(), buf, text.len());
    *buf.add(text.len()) = 0;
    SUCCESS
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> Ret {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut *mut c_void,
) -> Ret {
    if CStr::from_ptr(bus_id).to_bytes() != b"0000:19:00.0" {
        return NOT_FOUND;
    }
    *device = DEVICE;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: u32) -> Ret {
    put_text(buf, len, "580.0-fake")
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(_d: *mut c_void, buf: *mut c_char, len: u32) -> Ret {
    put_text(buf, len, "Fake H200")
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(_d: *mut c_void, buf: *mut c_char, len: u32) -> Ret {
    put_text(buf, len, "GPU-00000000-fake")
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetVbiosVersion(
    _d: *mut c_void,
    buf: *mut c_char,
    len: u32,
) -> Ret {
    put_text(buf, len, "96.00.fake")
}

macro_rules! value {
    ($($name:ident => $value:expr;)*) => {
        $(#[no_mangle]
        pub unsafe extern "C" fn $name(_d: *mut c_void, out: *mut u32) -> Ret {
            *out = $value;
            SUCCESS
        })*
    };
}

value! {
    nvmlDeviceGetCurrPcieLinkGeneration => knob("FAKENVML_PCIE_GEN").and_then(|v| v.parse().ok()).unwrap_or(5);
    nvmlDeviceGetMaxPcieLinkGeneration => 5;
    nvmlDeviceGetCurrPcieLinkWidth => 16;
    nvmlDeviceGetMaxPcieLinkWidth => 16;
    nvmlDeviceGetPersistenceMode => 1;
    nvmlDeviceGetEnforcedPowerLimit => knob("FAKENVML_POWER_LIMIT").and_then(|v| v.parse().ok()).unwrap_or(700_000);
    nvmlDeviceGetPowerManagementDefaultLimit => 700_000;
    nvmlDeviceGetPowerUsage => 300_000;
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    _d: *mut c_void,
    cur: *mut u32,
    pend: *mut u32,
) -> Ret {
    (*cur, *pend) = (1, 1);
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    _d: *mut c_void,
    cur: *mut u32,
    pend: *mut u32,
) -> Ret {
    let on = u32::from(mig());
    (*cur, *pend) = (on, on);
    SUCCESS
}

fn mig() -> bool {
    knob("FAKENVML_MIG").is_some_and(|v| v == "1")
}

/// The MIG device of GPU instance `MIG_INSTANCE`, with fakecuda's `cuDeviceGetUuid_v2`.
const MIG_DEVICE: *mut c_void = 0x1903 as *mut c_void;
const MIG_UUID: &[u8] = b"MIG-00010203-0405-0607-0809-0a0b0c0d0e0f";
const MIG_INSTANCE: u32 = 3;

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut *mut c_void,
) -> Ret {
    if !mig() || CStr::from_ptr(uuid).to_bytes() != MIG_UUID {
        return NOT_FOUND;
    }
    *device = MIG_DEVICE;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(d: *mut c_void, out: *mut u32) -> Ret {
    if d != MIG_DEVICE {
        return INVALID_ARGUMENT;
    }
    *out = MIG_INSTANCE;
    SUCCESS
}

/// `nvmlGpmSupport_t`.
#[repr(C)]
pub struct GpmSupport {
    version: u32,
    is_supported_device: u32,
}

#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(d: *mut c_void, out: *mut GpmSupport) -> Ret {
    if d != DEVICE || (*out).version != 1 {
        return INVALID_ARGUMENT;
    }
    (*out).is_supported_device = u32::from(knob("FAKENVML_GPM").is_none_or(|v| v != "0"));
    SUCCESS
}

/// A sample buffer: which GPU instance it was taken of (`u32::MAX`: the whole GPU), if
/// it was taken.
pub struct GpmSample {
    taken: Option<u32>,
}

#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(out: *mut *mut GpmSample) -> Ret {
    *out = Box::into_raw(Box::new(GpmSample { taken: None }));
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleGet(d: *mut c_void, sample: *mut GpmSample) -> Ret {
    if d != DEVICE || mig() {
        // NVML samples MIG instances with nvmlGpmMigSampleGet.
        return INVALID_ARGUMENT;
    }
    (*sample).taken = Some(u32::MAX);
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMigSampleGet(
    d: *mut c_void,
    instance: u32,
    sample: *mut GpmSample,
) -> Ret {
    if d != DEVICE || !mig() || instance != MIG_INSTANCE {
        return INVALID_ARGUMENT;
    }
    (*sample).taken = Some(instance);
    SUCCESS
}

/// `nvmlGpmMetric_t`.
#[repr(C)]
pub struct GpmMetric {
    metric_id: u32,
    nvml_return: u32,
    value: f64,
    names: [*const c_char; 3],
}

/// `nvmlGpmMetricsGet_t`, up to its metrics (read through a pointer past them).
#[repr(C)]
pub struct GpmMetricsGet {
    version: u32,
    num_metrics: u32,
    sample1: *mut GpmSample,
    sample2: *mut GpmSample,
    metrics: [GpmMetric; 0],
}

/// The fixed value of a metric; a MIG instance's SM activity differs, so tests can tell
/// which path sampled. Unknown ids: None (NOT_SUPPORTED).
fn gpm_value(id: u32, instance: u32) -> Option<f64> {
    Some(match id {
        2 if instance == MIG_INSTANCE => 25.0,
        2 => 40.0,
        3 => 30.0,
        5 | 7 => 20.0,
        6 | 9 => 0.0,
        10 => 75.0,
        20 => 100.0,
        21 => 200.0,
        61 => 300.0,
        60 => 400.0,
        _ => return None,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMetricsGet(q: *mut GpmMetricsGet) -> Ret {
    let q = &mut *q;
    let (Some(first), Some(second)) = ((*q.sample1).taken, (*q.sample2).taken) else {
        return INVALID_ARGUMENT;
    };
    if q.version != 1 || first != second || q.sample1 == q.sample2 {
        return INVALID_ARGUMENT;
    }
    let metrics = std::slice::from_raw_parts_mut(q.metrics.as_mut_ptr(), q.num_metrics as usize);
    for m in metrics {
        (m.nvml_return, m.value) = match gpm_value(m.metric_id, first) {
            Some(v) => (SUCCESS, v),
            None => (NOT_SUPPORTED, 0.0),
        };
    }
    SUCCESS
}

/// Clock type 1 is SM, 2 memory.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    _d: *mut c_void,
    kind: u32,
    out: *mut u32,
) -> Ret {
    *out = if kind == 2 { 3201 } else { 1980 };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(_d: *mut c_void, kind: u32, out: *mut u32) -> Ret {
    *out = if kind == 2 {
        3201
    } else {
        knob("FAKENVML_SM_CLOCK")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1980)
    };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    _d: *mut c_void,
    _sensor: u32,
    out: *mut u32,
) -> Ret {
    *out = 50;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(_d: *mut c_void, out: *mut u32) -> Ret {
    (*out, *out.add(1)) = (60, 20);
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    _d: *mut c_void,
    out: *mut u64,
) -> Ret {
    *out = knob("FAKENVML_REASONS")
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    _d: *mut c_void,
    _kind: u32,
    _counter: u32,
    out: *mut u64,
) -> Ret {
    *out = 0;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    _d: *mut c_void,
    _counter: u32,
    out: *mut u32,
) -> Ret {
    *out = 1000;
    SUCCESS
}

/// `nvmlFieldValue_t`: one field, memory temperature (82), as an unsigned int.
#[repr(C)]
pub struct FieldValue {
    field_id: u32,
    scope_id: u32,
    timestamp: i64,
    latency_usec: i64,
    value_type: u32,
    nvml_return: u32,
    value: u64,
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    _d: *mut c_void,
    count: i32,
    values: *mut FieldValue,
) -> Ret {
    for i in 0..count.max(0) as usize {
        let v = &mut *values.add(i);
        (v.value_type, v.nvml_return, v.value) = match v.field_id {
            82 => (1, SUCCESS, 45),
            // Like the H200: no common speed (field 90), a speed per link (164).
            164 if v.scope_id < nvlinks() => (1, SUCCESS, 26_562),
            _ => (0, NOT_FOUND, 0),
        };
    }
    SUCCESS
}

fn nvlinks() -> u32 {
    knob("FAKENVML_NVLINKS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(18)
}

/// Links past the last answer INVALID_ARGUMENT, as NVML's do.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    _d: *mut c_void,
    link: u32,
    out: *mut u32,
) -> Ret {
    match nvlinks() {
        0 => NOT_SUPPORTED,
        n if link >= n => INVALID_ARGUMENT,
        _ => {
            *out = 1;
            SUCCESS
        }
    }
}

/// `nvmlProcessInfo_t` (v2/v3 layout).
#[repr(C)]
pub struct ProcessInfo {
    pid: u32,
    used_gpu_memory: u64,
    gpu_instance_id: u32,
    compute_instance_id: u32,
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    _d: *mut c_void,
    count: *mut u32,
    infos: *mut ProcessInfo,
) -> Ret {
    let pids: Vec<u32> = knob("FAKENVML_OTHER_PIDS")
        .map(|v| v.split(',').filter_map(|p| p.trim().parse().ok()).collect())
        .unwrap_or_default();
    if (*count as usize) < pids.len() {
        *count = pids.len() as u32;
        return INSUFFICIENT_SIZE;
    }
    for (i, &pid) in pids.iter().enumerate() {
        *infos.add(i) = ProcessInfo {
            pid,
            used_gpu_memory: 1 << 30,
            gpu_instance_id: u32::MAX,
            compute_instance_id: u32::MAX,
        };
    }
    *count = pids.len() as u32;
    SUCCESS
}
