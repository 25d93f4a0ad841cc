//! NVML bindings: facts read once per device and telemetry samples, taken on the gpuspy
//! thread. Every function is looked up once, when NVML is opened, into a struct of
//! function pointers; no call looks a symbol up or allocates a name. What the samples add
//! up to is telemetry.rs.
//!
//! libnvidia-ml.so.1 is opened at run time, initialised once per process on the gpuspy
//! thread (never from a constructor or inside a driver call: NVML init has hung in other
//! interposers' hooks), and never shut down. Devices are matched by PCI bus id, since NVML
//! and CUDA number them differently. Calls that a GPU or driver does not support leave
//! their field empty.

use super::telemetry::{GpmReading, Sample, GPM_METRIC_IDS};
use crate::resolve::lookup;
use gpuspy_format::gpu::{DeviceFacts, GpuProcess, NvLink, PcieLink};
use std::ffi::{c_char, c_void, CStr};

type Ret = u32;
type Handle = *mut c_void;

/// `nvmlReturn_t f(nvmlDevice_t, unsigned int *)`.
type DeviceU32 = unsafe extern "C" fn(Handle, *mut u32) -> Ret;
/// `nvmlReturn_t f(nvmlDevice_t, unsigned int which, unsigned int *)`.
type DeviceU32Of = unsafe extern "C" fn(Handle, u32, *mut u32) -> Ret;
/// `nvmlReturn_t f(nvmlDevice_t, char *, unsigned int length)`.
type DeviceText = unsafe extern "C" fn(Handle, *mut c_char, u32) -> Ret;
/// `nvmlReturn_t f(nvmlDevice_t, nvmlEnableState_t *current, nvmlEnableState_t *pending)`.
type DeviceMode = unsafe extern "C" fn(Handle, *mut u32, *mut u32) -> Ret;
/// `nvmlReturn_t f(nvmlDevice_t, unsigned long long *)`.
type DeviceU64 = unsafe extern "C" fn(Handle, *mut u64) -> Ret;

/// Declares the NVML functions gpuspy calls, by nvml.h name and C signature, as one struct
/// of optional function pointers (older drivers lack some), looked up once by `open`.
macro_rules! nvml_functions {
    ($($field:ident: $name:literal as $ty:ty,)*) => {
        struct Functions {
            $($field: Option<$ty>,)*
        }

        impl Functions {
            fn resolve(lib: *mut c_void) -> Functions {
                Functions {
                    $($field: {
                        let f = lookup(lib, $name);
                        // SAFETY: NVML's export of this name has this C signature (nvml.h).
                        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, $ty>(f) })
                    },)*
                }
            }
        }
    };
}

nvml_functions! {
    init: c"nvmlInit_v2" as unsafe extern "C" fn() -> Ret,
    handle_by_pci_bus_id: c"nvmlDeviceGetHandleByPciBusId_v2" as unsafe extern "C" fn(*const c_char, *mut Handle) -> Ret,
    name: c"nvmlDeviceGetName" as DeviceText,
    uuid: c"nvmlDeviceGetUUID" as DeviceText,
    vbios_version: c"nvmlDeviceGetVbiosVersion" as DeviceText,
    driver_version: c"nvmlSystemGetDriverVersion" as unsafe extern "C" fn(*mut c_char, u32) -> Ret,
    ecc_mode: c"nvmlDeviceGetEccMode" as DeviceMode,
    mig_mode: c"nvmlDeviceGetMigMode" as DeviceMode,
    persistence_mode: c"nvmlDeviceGetPersistenceMode" as DeviceU32,
    pcie_gen_current: c"nvmlDeviceGetCurrPcieLinkGeneration" as DeviceU32,
    pcie_gen_max: c"nvmlDeviceGetMaxPcieLinkGeneration" as DeviceU32,
    pcie_width_current: c"nvmlDeviceGetCurrPcieLinkWidth" as DeviceU32,
    pcie_width_max: c"nvmlDeviceGetMaxPcieLinkWidth" as DeviceU32,
    power_limit: c"nvmlDeviceGetEnforcedPowerLimit" as DeviceU32,
    default_power_limit: c"nvmlDeviceGetPowerManagementDefaultLimit" as DeviceU32,
    max_clock: c"nvmlDeviceGetMaxClockInfo" as DeviceU32Of,
    clock: c"nvmlDeviceGetClockInfo" as DeviceU32Of,
    power_usage: c"nvmlDeviceGetPowerUsage" as DeviceU32,
    temperature: c"nvmlDeviceGetTemperature" as DeviceU32Of,
    pcie_throughput: c"nvmlDeviceGetPcieThroughput" as DeviceU32Of,
    nvlink_state: c"nvmlDeviceGetNvLinkState" as DeviceU32Of,
    utilization: c"nvmlDeviceGetUtilizationRates" as DeviceU32,
    clocks_event_reasons: c"nvmlDeviceGetCurrentClocksEventReasons" as DeviceU64,
    // The name before driver 535.
    clocks_throttle_reasons: c"nvmlDeviceGetCurrentClocksThrottleReasons" as DeviceU64,
    total_ecc_errors: c"nvmlDeviceGetTotalEccErrors" as unsafe extern "C" fn(Handle, u32, u32, *mut u64) -> Ret,
    field_values: c"nvmlDeviceGetFieldValues" as unsafe extern "C" fn(Handle, i32, *mut FieldValue) -> Ret,
    compute_processes: c"nvmlDeviceGetComputeRunningProcesses_v3" as unsafe extern "C" fn(Handle, *mut u32, *mut ProcessInfo) -> Ret,
    handle_by_uuid: c"nvmlDeviceGetHandleByUUID" as unsafe extern "C" fn(*const c_char, *mut Handle) -> Ret,
    gpu_instance_id: c"nvmlDeviceGetGpuInstanceId" as DeviceU32,
    gpm_support: c"nvmlGpmQueryDeviceSupport" as unsafe extern "C" fn(Handle, *mut GpmSupport) -> Ret,
    gpm_sample_alloc: c"nvmlGpmSampleAlloc" as unsafe extern "C" fn(*mut GpmSample) -> Ret,
    gpm_sample_get: c"nvmlGpmSampleGet" as unsafe extern "C" fn(Handle, GpmSample) -> Ret,
    gpm_mig_sample_get: c"nvmlGpmMigSampleGet" as unsafe extern "C" fn(Handle, u32, GpmSample) -> Ret,
    gpm_metrics_get: c"nvmlGpmMetricsGet" as unsafe extern "C" fn(*mut GpmMetricsGet) -> Ret,
}

/// An opened, initialised NVML: its functions, resolved once.
pub struct Nvml {
    f: Functions,
}

// SAFETY: only function pointers into NVML, which is thread-safe.
unsafe impl Send for Nvml {}

const NVML_CLOCK_SM: u32 = 1;
const NVML_CLOCK_MEM: u32 = 2;
const NVML_PCIE_TX: u32 = 0;
const NVML_PCIE_RX: u32 = 1;
const NVML_FI_DEV_MEMORY_TEMP: u32 = 82;
const NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON: u32 = 90;
/// Per link (the scope), for GPUs that lack field 90 (the H200 does).
const NVML_FI_DEV_NVLINK_GET_SPEED: u32 = 164;
/// NVML_NVLINK_MAX_LINKS in current nvml.h.
const NVLINK_MAX_LINKS: u32 = 36;

#[repr(C)]
struct ProcessInfo {
    pid: u32,
    used_gpu_memory: u64,
    gpu_instance_id: u32,
    compute_instance_id: u32,
}

#[repr(C)]
struct FieldValue {
    field_id: u32,
    scope_id: u32,
    timestamp: i64,
    latency_usec: i64,
    value_type: u32,
    nvml_return: u32,
    value: u64,
}

/// `nvmlGpmSample_t`: an opaque buffer NVML allocates.
type GpmSample = *mut c_void;

#[repr(C)]
struct GpmSupport {
    version: u32,
    is_supported_device: u32,
}

/// `nvmlGpmMetric_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct GpmMetric {
    metric_id: u32,
    nvml_return: u32,
    value: f64,
    short_name: *const c_char,
    long_name: *const c_char,
    unit: *const c_char,
}

/// `nvmlGpmMetricsGet_t`. Its array is `NVML_GPM_METRIC_MAX` long, which grew (98, 210,
/// 333) under the same struct version 1; NVML fills `num_metrics` entries, and this one
/// has room for more than the largest header yet, in case a driver touches all of its own.
#[repr(C)]
struct GpmMetricsGet {
    version: u32,
    num_metrics: u32,
    sample1: GpmSample,
    sample2: GpmSample,
    metrics: [GpmMetric; GPM_METRIC_ROOM],
}

const GPM_METRIC_ROOM: usize = 512;
const GPM_SUPPORT_VERSION: u32 = 1;
const GPM_METRICS_GET_VERSION: u32 = 1;
/// GPM's figures need the two samples of a pair at least this far apart.
const GPM_MIN_PAIR_NS: u64 = 100_000_000;

/// GPM sampling of one device (or one MIG GPU instance of it): two sample buffers, the
/// older one taken at `older_at`, paired with each new one. They live as long as the
/// process, like NVML itself, which gpuspy never shuts down.
pub struct GpmSampler {
    /// The MIG GPU instance sampled; None for the whole GPU.
    instance: Option<u32>,
    samples: [GpmSample; 2],
    /// Monotonic ns of `samples[0]`; None before the first sample.
    older_at: Option<u64>,
    request: Box<GpmMetricsGet>,
}

impl GpmSampler {
    /// How this device is sampled, for the dump's note.
    pub fn describe(&self) -> String {
        match self.instance {
            Some(id) => format!("nvmlGpmMigSampleGet, GPU instance {id}"),
            None => "nvmlGpmSampleGet".to_string(),
        }
    }
}

/// Calls an optional NVML function; `u32::MAX` (no NVML return code) where it is missing.
macro_rules! call {
    ($f:expr, $($arg:expr),*) => {{
        match $f {
            // SAFETY: the pointer was resolved by its nvml.h name and has that signature;
            // the arguments follow its contract (out-pointers to live locals).
            Some(f) => unsafe { f($($arg),*) },
            None => u32::MAX,
        }
    }};
}

impl Nvml {
    /// Opens and initialises NVML, or says why not.
    pub fn open() -> Result<Nvml, String> {
        // SAFETY: a valid C string.
        let lib = unsafe {
            libc::dlopen(
                c"libnvidia-ml.so.1".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            )
        };
        if lib.is_null() {
            return Err("libnvidia-ml.so.1 not found".into());
        }
        let mut f = Functions::resolve(lib);
        f.clocks_event_reasons = f.clocks_event_reasons.or(f.clocks_throttle_reasons);
        let r = call!(f.init,);
        if r != 0 {
            return Err(format!("nvmlInit_v2 failed ({r})"));
        }
        Ok(Nvml { f })
    }

    pub fn device_by_pci_bus_id(&self, bus_id: &CStr) -> Option<Handle> {
        let mut dev: Handle = std::ptr::null_mut();
        let r = call!(self.f.handle_by_pci_bus_id, bus_id.as_ptr(), &mut dev);
        (r == 0).then_some(dev)
    }

    fn text(&self, f: impl FnOnce(*mut c_char, u32) -> Ret) -> String {
        let mut buf = [0 as c_char; 96];
        if f(buf.as_mut_ptr(), buf.len() as u32) != 0 {
            return String::new();
        }
        // SAFETY: NVML wrote a NUL-terminated string into the buffer.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    fn device_text(&self, f: Option<DeviceText>, dev: Handle) -> String {
        self.text(|b, n| call!(f, dev, b, n))
    }

    /// A `nvmlReturn_t f(nvmlDevice_t, unsigned int *)` query.
    fn device_u32(&self, f: Option<DeviceU32>, dev: Handle) -> Option<u32> {
        let mut v = 0u32;
        (call!(f, dev, &mut v) == 0).then_some(v)
    }

    /// A `nvmlReturn_t f(nvmlDevice_t, unsigned int which, unsigned int *)` query.
    fn device_u32_of(&self, f: Option<DeviceU32Of>, dev: Handle, which: u32) -> Option<u32> {
        let mut v = 0u32;
        (call!(f, dev, which, &mut v) == 0).then_some(v)
    }

    /// One `nvmlDeviceGetFieldValues` field, of the device or of one link (`scope_id`).
    fn field(&self, dev: Handle, field_id: u32, scope_id: u32) -> Option<f64> {
        let mut v = FieldValue {
            field_id,
            scope_id,
            timestamp: 0,
            latency_usec: 0,
            value_type: 0,
            nvml_return: u32::MAX,
            value: 0,
        };
        (call!(self.f.field_values, dev, 1, &mut v) == 0 && v.nvml_return == 0)
            .then(|| field_as_f64(&v))
    }

    /// Active NVLink links and their common speed; None for a GPU without NVLink.
    fn nvlink(&self, dev: Handle) -> Option<NvLink> {
        // A link index past the GPU's last returns an error, as does every index on a GPU
        // without NVLink.
        let active: Vec<u32> = (0..NVLINK_MAX_LINKS)
            .map_while(|link| {
                self.device_u32_of(self.f.nvlink_state, dev, link)
                    .map(|state| (link, state))
            })
            .filter(|&(_, state)| state != 0)
            .map(|(link, _)| link)
            .collect();
        let &first = active.first()?;
        Some(NvLink {
            active_links: active.len() as u32,
            link_mbytes_per_s: self
                .field(dev, NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON, 0)
                .or_else(|| self.field(dev, NVML_FI_DEV_NVLINK_GET_SPEED, first))
                .map(|v| v as u32),
        })
    }

    fn mode(&self, f: Option<DeviceMode>, dev: Handle) -> (Option<bool>, Option<bool>) {
        let (mut current, mut pending) = (0u32, 0u32);
        if call!(f, dev, &mut current, &mut pending) == 0 {
            (Some(current != 0), Some(pending != 0))
        } else {
            (None, None)
        }
    }

    /// The facts that do not change during a run.
    pub fn facts(&self, dev: Handle, bus_id: &str, own_pid: u32) -> DeviceFacts {
        let f = &self.f;
        let (ecc_enabled, ecc_pending) = self.mode(f.ecc_mode, dev);
        let (mig_mode, _) = self.mode(f.mig_mode, dev);
        DeviceFacts {
            name: self.device_text(f.name, dev),
            uuid: self.device_text(f.uuid, dev),
            pci_bus_id: bus_id.to_string(),
            driver_version: self.text(|b, n| call!(f.driver_version, b, n)),
            // From the driver itself (gpu/mod.rs): NVML's query loads libcuda anew.
            cuda_driver_version: None,
            vbios_version: self.device_text(f.vbios_version, dev),
            sm_count: None,
            pcie: PcieLink {
                gen_current: self.device_u32(f.pcie_gen_current, dev),
                gen_max: self.device_u32(f.pcie_gen_max, dev),
                width_current: self.device_u32(f.pcie_width_current, dev),
                width_max: self.device_u32(f.pcie_width_max, dev),
            },
            ecc_enabled,
            ecc_pending,
            persistence_mode: self.device_u32(f.persistence_mode, dev).map(|m| m != 0),
            mig_mode,
            power_limit_mw: self.device_u32(f.power_limit, dev),
            default_power_limit_mw: self.device_u32(f.default_power_limit, dev),
            max_sm_clock_mhz: self.device_u32_of(f.max_clock, dev, NVML_CLOCK_SM),
            max_mem_clock_mhz: self.device_u32_of(f.max_clock, dev, NVML_CLOCK_MEM),
            other_processes: self.other_processes(dev, own_pid),
            nvlink: self.nvlink(dev),
        }
    }

    /// Compute processes on the GPU other than this one (at most 64 listed).
    pub fn other_processes(&self, dev: Handle, own_pid: u32) -> Vec<GpuProcess> {
        let mut infos: Vec<ProcessInfo> = (0..64)
            .map(|_| ProcessInfo {
                pid: 0,
                used_gpu_memory: 0,
                gpu_instance_id: 0,
                compute_instance_id: 0,
            })
            .collect();
        let mut count = infos.len() as u32;
        let r = call!(
            self.f.compute_processes,
            dev,
            &mut count,
            infos.as_mut_ptr()
        );
        if r != 0 {
            return Vec::new();
        }
        infos
            .iter()
            .take(count as usize)
            .filter(|p| p.pid != own_pid)
            .map(|p| GpuProcess {
                pid: p.pid,
                // NVML_VALUE_NOT_AVAILABLE is all ones.
                used_bytes: (p.used_gpu_memory != u64::MAX).then_some(p.used_gpu_memory),
            })
            .collect()
    }

    /// GPM sampling of `dev`, or why not. `mig_uuid`: the CUDA device's `MIG-...` UUID
    /// when MIG is on, whose GPU instance is then sampled.
    pub fn gpm(&self, dev: Handle, mig_uuid: Option<&CStr>) -> Result<GpmSampler, String> {
        let f = &self.f;
        let mut support = GpmSupport {
            version: GPM_SUPPORT_VERSION,
            is_supported_device: 0,
        };
        match call!(f.gpm_support, dev, &mut support) {
            0 if support.is_supported_device != 0 => {}
            0 => return Err("not supported by this GPU".into()),
            u32::MAX => return Err("this driver's NVML has no GPM".into()),
            r => return Err(format!("nvmlGpmQueryDeviceSupport failed ({r})")),
        }
        let instance = match mig_uuid {
            Some(uuid) => {
                let mut mig: Handle = std::ptr::null_mut();
                let found = call!(f.handle_by_uuid, uuid.as_ptr(), &mut mig) == 0;
                let id = found
                    .then(|| self.device_u32(f.gpu_instance_id, mig))
                    .flatten();
                Some(id.ok_or_else(|| {
                    format!(
                        "MIG is on and NVML knows no GPU instance of {}",
                        uuid.to_string_lossy()
                    )
                })?)
            }
            None => None,
        };
        let mut samples = [std::ptr::null_mut(); 2];
        for s in &mut samples {
            let r = call!(f.gpm_sample_alloc, s);
            if r != 0 {
                return Err(format!("nvmlGpmSampleAlloc failed ({r})"));
            }
        }
        let unused = GpmMetric {
            metric_id: 0,
            nvml_return: u32::MAX,
            value: 0.0,
            short_name: std::ptr::null(),
            long_name: std::ptr::null(),
            unit: std::ptr::null(),
        };
        Ok(GpmSampler {
            instance,
            samples,
            older_at: None,
            request: Box::new(GpmMetricsGet {
                version: GPM_METRICS_GET_VERSION,
                num_metrics: 0,
                sample1: std::ptr::null_mut(),
                sample2: std::ptr::null_mut(),
                metrics: [unused; GPM_METRIC_ROOM],
            }),
        })
    }

    /// Takes a GPM sample and returns the metrics since the previous one; None for the
    /// first sample, when the previous is less than `GPM_MIN_PAIR_NS` old (it is kept for
    /// the next tick), or when NVML fails.
    fn gpm_reading(&self, dev: Handle, g: &mut GpmSampler, now_ns: u64) -> Option<GpmReading> {
        let f = &self.f;
        if g.older_at
            .is_some_and(|at| now_ns.saturating_sub(at) < GPM_MIN_PAIR_NS)
        {
            return None;
        }
        let newer = g.samples[1];
        let r = match g.instance {
            Some(id) => call!(f.gpm_mig_sample_get, dev, id, newer),
            None => call!(f.gpm_sample_get, dev, newer),
        };
        if r != 0 {
            return None;
        }
        g.samples.swap(0, 1);
        let paired = g.older_at.replace(now_ns).is_some();
        if !paired {
            return None;
        }
        let q = &mut *g.request;
        // After the swap, samples[1] is the older.
        (q.sample1, q.sample2) = (g.samples[1], g.samples[0]);
        q.num_metrics = GPM_METRIC_IDS.len() as u32;
        for (m, &id) in q.metrics.iter_mut().zip(&GPM_METRIC_IDS) {
            (m.metric_id, m.nvml_return) = (id, u32::MAX);
        }
        if call!(f.gpm_metrics_get, q) != 0 {
            return None;
        }
        let mut reading: GpmReading = [None; GPM_METRIC_IDS.len()];
        // The H200's driver 580 answered NaN now and then (DRAM bandwidth): no reading,
        // which a dump writes as NO_READING; JSON has no NaN.
        for (v, m) in reading.iter_mut().zip(&q.metrics) {
            *v = (m.nvml_return == 0 && m.value.is_finite()).then_some(m.value);
        }
        Some(reading)
    }

    /// One telemetry sample, GPM first so that its pairs keep their spacing. The slow
    /// queries (PCIe throughput, a 20 ms measurement per direction, and the process list)
    /// only when `slow`.
    pub fn sample(
        &self,
        dev: Handle,
        gpm: Option<&mut GpmSampler>,
        own_pid: u32,
        slow: bool,
    ) -> Sample {
        let f = &self.f;
        let gpm = gpm.and_then(|g| self.gpm_reading(dev, g, crate::clock::monotonic_ns()));
        let t_unix_ns = crate::clock::unix_ns();
        let throughput = |counter: u32| {
            slow.then(|| self.device_u32_of(f.pcie_throughput, dev, counter))
                .flatten()
                .map(f64::from)
        };
        let mut util = [0u32; 2];
        let utilisation = (call!(f.utilization, dev, util.as_mut_ptr()) == 0).then_some(util);
        let mut reasons = 0u64;
        let r = call!(f.clocks_event_reasons, dev, &mut reasons);
        let ecc = |kind: u32| {
            let mut n = 0u64;
            (call!(f.total_ecc_errors, dev, kind, 0, &mut n) == 0).then_some(n)
        };
        let gauge =
            |f: Option<DeviceU32Of>, which: u32| self.device_u32_of(f, dev, which).map(f64::from);
        Sample {
            t_unix_ns,
            gpu_util_pct: utilisation.map(|u| f64::from(u[0])),
            mem_util_pct: utilisation.map(|u| f64::from(u[1])),
            sm_clock_mhz: gauge(f.clock, NVML_CLOCK_SM),
            mem_clock_mhz: gauge(f.clock, NVML_CLOCK_MEM),
            power_mw: self.device_u32(f.power_usage, dev).map(f64::from),
            gpu_temp_c: gauge(f.temperature, 0),
            mem_temp_c: self.field(dev, NVML_FI_DEV_MEMORY_TEMP, 0),
            pcie_tx_kib_per_s: throughput(NVML_PCIE_TX),
            pcie_rx_kib_per_s: throughput(NVML_PCIE_RX),
            clock_event_reasons: (r == 0).then_some(reasons),
            ecc_corrected: ecc(0),
            ecc_uncorrected: ecc(1),
            other_processes: slow.then(|| self.other_processes(dev, own_pid).len() as u32),
            gpm,
        }
    }
}

/// nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort.
fn field_as_f64(v: &FieldValue) -> f64 {
    match v.value_type {
        0 => f64::from_bits(v.value),
        1 | 5 => f64::from(v.value as u32),
        6 => f64::from(v.value as u16),
        4 => v.value as i64 as f64,
        _ => v.value as f64,
    }
}
