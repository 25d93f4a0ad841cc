//! NVML: facts read once per device and telemetry sampled on the gpuspy thread.
//!
//! libnvidia-ml.so.1 is opened at run time, initialised once per process on the gpuspy
//! thread (never from a constructor or inside a driver call: NVML init has hung in other
//! interposers' hooks), and never shut down. Devices are matched by PCI bus id, since NVML
//! and CUDA number them differently. Calls that a GPU or driver does not support leave
//! their field empty.

use crate::resolve::lookup;
use gpuspy_format::gpu::{
    ClockEvent, DeviceFacts, Gauge, GpuProcess, NvLink, PcieLink, Telemetry, TelemetrySeries,
    SERIES_POINTS,
};
use std::ffi::{c_char, c_void, CStr};

type Ret = u32;
type Handle = *mut c_void;

/// NVML entry points, each optional: older drivers lack some.
pub struct Nvml {
    lib: *mut c_void,
}

// SAFETY: the handle is only used with dlsym, and NVML is thread-safe.
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

/// Clock-event reason bits (nvmlClocksEventReason*), with the names the dump uses.
pub const CLOCK_EVENT_REASONS: [(u64, &str); 9] = [
    (0x1, "gpu-idle"),
    (0x2, "applications-clocks-setting"),
    (0x4, "sw-power-cap"),
    (0x8, "hw-slowdown"),
    (0x10, "sync-boost"),
    (0x20, "sw-thermal-slowdown"),
    (0x40, "hw-thermal-slowdown"),
    (0x80, "hw-power-brake-slowdown"),
    (0x100, "display-clock-setting"),
];

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

macro_rules! call {
    ($nvml:expr, $name:literal, fn($($t:ty),*), $($arg:expr),*) => {{
        match $nvml.symbol_named($name) {
            // SAFETY: the NVML function of this name has this C signature (nvml.h).
            Some(f) => unsafe {
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($t),*) -> Ret>(f)($($arg),*)
            },
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
        let nvml = Nvml { lib };
        let r = call!(nvml, "nvmlInit_v2", fn(),);
        if r != 0 {
            return Err(format!("nvmlInit_v2 failed ({r})"));
        }
        Ok(nvml)
    }

    pub fn device_by_pci_bus_id(&self, bus_id: &CStr) -> Option<Handle> {
        let mut dev: Handle = std::ptr::null_mut();
        let r = call!(
            self,
            "nvmlDeviceGetHandleByPciBusId_v2",
            fn(*const c_char, *mut Handle),
            bus_id.as_ptr(),
            &mut dev
        );
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

    /// A `nvmlReturn_t name(nvmlDevice_t, unsigned int *)` query.
    fn device_u32(&self, dev: Handle, name: &'static str) -> Option<u32> {
        let f = self.symbol_named(name)?;
        let mut v = 0u32;
        // SAFETY: NVML functions of this shape take a device and an out-pointer (nvml.h).
        let r = unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(Handle, *mut u32) -> Ret>(f)(
                dev, &mut v,
            )
        };
        (r == 0).then_some(v)
    }

    /// A `nvmlReturn_t name(nvmlDevice_t, unsigned int which, unsigned int *)` query.
    fn device_u32_of(&self, dev: Handle, name: &'static str, which: u32) -> Option<u32> {
        let f = self.symbol_named(name)?;
        let mut v = 0u32;
        // SAFETY: NVML functions of this shape take a device, a selector and an out-pointer.
        let r = unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(Handle, u32, *mut u32) -> Ret>(
                f,
            )(dev, which, &mut v)
        };
        (r == 0).then_some(v)
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
        (call!(
            self,
            "nvmlDeviceGetFieldValues",
            fn(Handle, i32, *mut FieldValue),
            dev,
            1,
            &mut v
        ) == 0
            && v.nvml_return == 0)
            .then(|| field_as_f64(&v))
    }

    /// Active NVLink links and their common speed; None for a GPU without NVLink.
    fn nvlink(&self, dev: Handle) -> Option<NvLink> {
        // A link index past the GPU's last returns an error, as does every index on a GPU
        // without NVLink.
        let active: Vec<u32> = (0..NVLINK_MAX_LINKS)
            .map_while(|link| {
                self.device_u32_of(dev, "nvmlDeviceGetNvLinkState", link)
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

    fn symbol_named(&self, name: &'static str) -> Option<*mut c_void> {
        let name = std::ffi::CString::new(name).ok()?;
        let f = lookup(self.lib, &name);
        (!f.is_null()).then_some(f)
    }

    fn mode(&self, f: impl FnOnce(*mut u32, *mut u32) -> Ret) -> (Option<bool>, Option<bool>) {
        let (mut current, mut pending) = (0u32, 0u32);
        if f(&mut current, &mut pending) == 0 {
            (Some(current != 0), Some(pending != 0))
        } else {
            (None, None)
        }
    }

    /// The facts that do not change during a run.
    pub fn facts(&self, dev: Handle, bus_id: &str, own_pid: u32) -> DeviceFacts {
        let (ecc_enabled, ecc_pending) = self.mode(|c, p| {
            call!(
                self,
                "nvmlDeviceGetEccMode",
                fn(Handle, *mut u32, *mut u32),
                dev,
                c,
                p
            )
        });
        let (mig_mode, _) = self.mode(|c, p| {
            call!(
                self,
                "nvmlDeviceGetMigMode",
                fn(Handle, *mut u32, *mut u32),
                dev,
                c,
                p
            )
        });
        DeviceFacts {
            name: self.text(|b, n| {
                call!(
                    self,
                    "nvmlDeviceGetName",
                    fn(Handle, *mut c_char, u32),
                    dev,
                    b,
                    n
                )
            }),
            uuid: self.text(|b, n| {
                call!(
                    self,
                    "nvmlDeviceGetUUID",
                    fn(Handle, *mut c_char, u32),
                    dev,
                    b,
                    n
                )
            }),
            pci_bus_id: bus_id.to_string(),
            driver_version: self.text(|b, n| {
                call!(
                    self,
                    "nvmlSystemGetDriverVersion",
                    fn(*mut c_char, u32),
                    b,
                    n
                )
            }),
            // From the driver itself (gpu/mod.rs): NVML's query loads libcuda anew.
            cuda_driver_version: None,
            vbios_version: self.text(|b, n| {
                call!(
                    self,
                    "nvmlDeviceGetVbiosVersion",
                    fn(Handle, *mut c_char, u32),
                    dev,
                    b,
                    n
                )
            }),
            sm_count: None,
            pcie: PcieLink {
                gen_current: self.device_u32(dev, "nvmlDeviceGetCurrPcieLinkGeneration"),
                gen_max: self.device_u32(dev, "nvmlDeviceGetMaxPcieLinkGeneration"),
                width_current: self.device_u32(dev, "nvmlDeviceGetCurrPcieLinkWidth"),
                width_max: self.device_u32(dev, "nvmlDeviceGetMaxPcieLinkWidth"),
            },
            ecc_enabled,
            ecc_pending,
            persistence_mode: self
                .device_u32(dev, "nvmlDeviceGetPersistenceMode")
                .map(|m| m != 0),
            mig_mode,
            power_limit_mw: self.device_u32(dev, "nvmlDeviceGetEnforcedPowerLimit"),
            default_power_limit_mw: self
                .device_u32(dev, "nvmlDeviceGetPowerManagementDefaultLimit"),
            max_sm_clock_mhz: self.device_u32_of(dev, "nvmlDeviceGetMaxClockInfo", NVML_CLOCK_SM),
            max_mem_clock_mhz: self.device_u32_of(dev, "nvmlDeviceGetMaxClockInfo", NVML_CLOCK_MEM),
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
            self,
            "nvmlDeviceGetComputeRunningProcesses_v3",
            fn(Handle, *mut u32, *mut ProcessInfo),
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

    /// One telemetry sample. The slow queries (PCIe throughput, a 20 ms measurement per
    /// direction, and the process list) only when `slow`.
    pub fn sample(&self, dev: Handle, t_unix_ns: u64, own_pid: u32, slow: bool) -> Sample {
        let throughput = |counter: u32| {
            slow.then(|| self.device_u32_of(dev, "nvmlDeviceGetPcieThroughput", counter))
                .flatten()
                .map(f64::from)
        };
        let mut util = [0u32; 2];
        let utilisation = (call!(
            self,
            "nvmlDeviceGetUtilizationRates",
            fn(Handle, *mut u32),
            dev,
            util.as_mut_ptr()
        ) == 0)
            .then_some(util);
        let mut reasons = 0u64;
        let mut r = call!(
            self,
            "nvmlDeviceGetCurrentClocksEventReasons",
            fn(Handle, *mut u64),
            dev,
            &mut reasons
        );
        if r == u32::MAX {
            r = call!(
                self,
                "nvmlDeviceGetCurrentClocksThrottleReasons",
                fn(Handle, *mut u64),
                dev,
                &mut reasons
            );
        }
        let ecc = |kind: u32| {
            let mut n = 0u64;
            (call!(
                self,
                "nvmlDeviceGetTotalEccErrors",
                fn(Handle, u32, u32, *mut u64),
                dev,
                kind,
                0,
                &mut n
            ) == 0)
                .then_some(n)
        };
        Sample {
            t_unix_ns,
            gpu_util_pct: utilisation.map(|u| f64::from(u[0])),
            mem_util_pct: utilisation.map(|u| f64::from(u[1])),
            sm_clock_mhz: self
                .device_u32_of(dev, "nvmlDeviceGetClockInfo", NVML_CLOCK_SM)
                .map(f64::from),
            mem_clock_mhz: self
                .device_u32_of(dev, "nvmlDeviceGetClockInfo", NVML_CLOCK_MEM)
                .map(f64::from),
            power_mw: self
                .device_u32(dev, "nvmlDeviceGetPowerUsage")
                .map(f64::from),
            gpu_temp_c: self
                .device_u32_of(dev, "nvmlDeviceGetTemperature", 0)
                .map(f64::from),
            mem_temp_c: self.field(dev, NVML_FI_DEV_MEMORY_TEMP, 0),
            pcie_tx_kib_per_s: throughput(NVML_PCIE_TX),
            pcie_rx_kib_per_s: throughput(NVML_PCIE_RX),
            clock_event_reasons: (r == 0).then_some(reasons),
            ecc_corrected: ecc(0),
            ecc_uncorrected: ecc(1),
            other_processes: slow.then(|| self.other_processes(dev, own_pid).len() as u32),
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

/// One NVML sample; None where the call is unsupported.
#[derive(Debug, Default, Clone)]
pub struct Sample {
    pub t_unix_ns: u64,
    pub gpu_util_pct: Option<f64>,
    pub mem_util_pct: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_mw: Option<f64>,
    pub gpu_temp_c: Option<f64>,
    pub mem_temp_c: Option<f64>,
    pub pcie_tx_kib_per_s: Option<f64>,
    pub pcie_rx_kib_per_s: Option<f64>,
    pub clock_event_reasons: Option<u64>,
    pub ecc_corrected: Option<u64>,
    pub ecc_uncorrected: Option<u64>,
    pub other_processes: Option<u32>,
}

#[derive(Default, Clone, Copy)]
struct GaugeAcc {
    n: u64,
    min: f64,
    max: f64,
    sum: f64,
    last: f64,
}

impl GaugeAcc {
    fn add(&mut self, v: Option<f64>) {
        let Some(v) = v else { return };
        if self.n == 0 {
            (self.min, self.max) = (v, v);
        }
        self.n += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v;
        self.last = v;
    }

    fn gauge(&self) -> Option<Gauge> {
        (self.n > 0).then(|| Gauge {
            samples: self.n,
            min: self.min,
            mean: self.sum / self.n as f64,
            max: self.max,
            last: self.last,
        })
    }
}

/// Samples reduced to fixed-size summaries and a capped series.
#[derive(Default, Clone)]
pub struct TelemetryAgg {
    interval_ms: u64,
    samples: u64,
    gauges: [GaugeAcc; 9],
    reasons: [u64; CLOCK_EVENT_REASONS.len()],
    ecc_corrected: Option<[u64; 2]>,
    ecc_uncorrected: Option<[u64; 2]>,
    other_processes_max: u32,
    series_start: u64,
    series_step_ns: u64,
    /// Per slot: sums of (gpu util, SM clock, power W, temperature) and the sample count.
    series: Vec<([f64; 4], u32)>,
}

impl TelemetryAgg {
    pub fn new(interval_ms: u64) -> TelemetryAgg {
        TelemetryAgg {
            interval_ms,
            ..TelemetryAgg::default()
        }
    }

    pub fn add(&mut self, s: &Sample) {
        self.samples += 1;
        let values = [
            s.gpu_util_pct,
            s.mem_util_pct,
            s.sm_clock_mhz,
            s.mem_clock_mhz,
            s.power_mw,
            s.gpu_temp_c,
            s.mem_temp_c,
            s.pcie_tx_kib_per_s,
            s.pcie_rx_kib_per_s,
        ];
        for (g, v) in self.gauges.iter_mut().zip(values) {
            g.add(v);
        }
        if let Some(bits) = s.clock_event_reasons {
            for (count, (bit, _)) in self.reasons.iter_mut().zip(CLOCK_EVENT_REASONS) {
                *count += u64::from(bits & bit != 0);
            }
        }
        let first_last = |acc: &mut Option<[u64; 2]>, v: Option<u64>| {
            if let Some(v) = v {
                acc.get_or_insert([v, v])[1] = v;
            }
        };
        first_last(&mut self.ecc_corrected, s.ecc_corrected);
        first_last(&mut self.ecc_uncorrected, s.ecc_uncorrected);
        self.other_processes_max = self.other_processes_max.max(s.other_processes.unwrap_or(0));
        self.add_to_series(s);
    }

    fn add_to_series(&mut self, s: &Sample) {
        if self.series_step_ns == 0 {
            self.series_start = s.t_unix_ns;
            self.series_step_ns = self.interval_ms.max(1) * 1_000_000;
        }
        let offset = s.t_unix_ns.saturating_sub(self.series_start);
        while offset >= self.series_step_ns * SERIES_POINTS as u64 {
            self.series = self
                .series
                .chunks(2)
                .map(|pair| {
                    pair.iter().fold(([0.0; 4], 0), |(sum, n), (s, m)| {
                        (
                            [sum[0] + s[0], sum[1] + s[1], sum[2] + s[2], sum[3] + s[3]],
                            n + m,
                        )
                    })
                })
                .collect();
            self.series_step_ns *= 2;
        }
        let slot = (offset / self.series_step_ns) as usize;
        if self.series.len() <= slot {
            self.series.resize(slot + 1, ([0.0; 4], 0));
        }
        let point = [
            s.gpu_util_pct.unwrap_or(0.0),
            s.sm_clock_mhz.unwrap_or(0.0),
            s.power_mw.unwrap_or(0.0) / 1000.0,
            s.gpu_temp_c.unwrap_or(0.0),
        ];
        let (sum, n) = &mut self.series[slot];
        for (acc, v) in sum.iter_mut().zip(point) {
            *acc += v;
        }
        *n += 1;
    }

    pub fn telemetry(&self) -> Telemetry {
        let g = |i: usize| self.gauges[i].gauge();
        let column = |i: usize| -> Vec<f32> {
            self.series
                .iter()
                .map(|(sum, n)| {
                    if *n == 0 {
                        0.0
                    } else {
                        (sum[i] / f64::from(*n)) as f32
                    }
                })
                .collect()
        };
        Telemetry {
            interval_ms: self.interval_ms,
            samples: self.samples,
            gpu_util_pct: g(0),
            mem_util_pct: g(1),
            sm_clock_mhz: g(2),
            mem_clock_mhz: g(3),
            power_mw: g(4),
            gpu_temp_c: g(5),
            mem_temp_c: g(6),
            pcie_tx_kib_per_s: g(7),
            pcie_rx_kib_per_s: g(8),
            clock_events: self
                .reasons
                .iter()
                .zip(CLOCK_EVENT_REASONS)
                .filter(|(&n, _)| n > 0)
                .map(|(&samples, (_, reason))| ClockEvent {
                    reason: reason.to_string(),
                    samples,
                })
                .collect(),
            ecc_corrected: self.ecc_corrected,
            ecc_uncorrected: self.ecc_uncorrected,
            other_processes_max: self.other_processes_max,
            series: TelemetrySeries {
                start_unix_ns: self.series_start,
                step_ms: self.series_step_ns / 1_000_000,
                gpu_util_pct: column(0),
                sm_clock_mhz: column(1),
                power_w: column(2),
                gpu_temp_c: column(3),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u64, util: f64, reasons: u64) -> Sample {
        Sample {
            t_unix_ns: 1_000_000_000_000 + i * 100_000_000,
            gpu_util_pct: Some(util),
            sm_clock_mhz: Some(1980.0),
            power_mw: Some(300_000.0),
            clock_event_reasons: Some(reasons),
            ecc_corrected: Some(5 + i / 10),
            ..Sample::default()
        }
    }

    #[test]
    fn samples_reduce_to_exact_summaries() {
        let mut agg = TelemetryAgg::new(100);
        for i in 0..10 {
            // 0x1 idle in the first 4 samples, 0x4 power cap in the last 3.
            let reasons = if i < 4 {
                0x1
            } else if i >= 7 {
                0x4
            } else {
                0
            };
            agg.add(&sample(i, (i * 10) as f64, reasons));
        }
        agg.add(&Sample {
            t_unix_ns: 1_000_000_000_000 + 10 * 100_000_000,
            other_processes: Some(2),
            ..Sample::default()
        });
        let t = agg.telemetry();
        assert_eq!(t.samples, 11);
        assert_eq!(
            t.gpu_util_pct,
            Some(Gauge {
                samples: 10,
                min: 0.0,
                mean: 45.0,
                max: 90.0,
                last: 90.0
            })
        );
        assert_eq!(t.mem_util_pct, None);
        let events: Vec<(&str, u64)> = t
            .clock_events
            .iter()
            .map(|e| (e.reason.as_str(), e.samples))
            .collect();
        assert_eq!(events, [("gpu-idle", 4), ("sw-power-cap", 3)]);
        assert_eq!(t.ecc_corrected, Some([5, 5]));
        assert_eq!(t.other_processes_max, 2);
        assert_eq!(t.series.step_ms, 100);
        assert_eq!(t.series.gpu_util_pct.len(), 11);
        assert_eq!(t.series.power_w[0], 300.0);
    }

    #[test]
    fn the_series_halves_its_resolution_instead_of_growing() {
        let mut agg = TelemetryAgg::new(100);
        for i in 0..1000 {
            agg.add(&sample(i, 50.0, 0));
        }
        let t = agg.telemetry();
        assert!(t.series.gpu_util_pct.len() <= SERIES_POINTS);
        assert_eq!(t.series.step_ms, 800);
        assert!(t.series.gpu_util_pct.iter().all(|&u| u == 50.0));
        assert_eq!(t.gpu_util_pct.map(|g| g.samples), Some(1000));
    }
}
