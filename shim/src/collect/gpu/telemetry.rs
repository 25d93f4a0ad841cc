//! Telemetry aggregation: NVML samples reduced to fixed-size summaries (one gauge per
//! quantity, clock-event counts, ECC first/last) and a capped series that halves its
//! resolution instead of growing. Pure arithmetic on `Sample`s; nvml.rs takes them.

use gpuspy_format::gpu::{
    ClockEvent, Gauge, Gpm, SourceStatus, Telemetry, TelemetrySeries, NO_READING, SERIES_POINTS,
};

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

/// The GPM metrics gpuspy asks for (`nvmlGpmMetricId_t`), in the order of a `GpmReading`.
pub const GPM_METRIC_IDS: [u32; 11] = [
    2,  // SM_UTIL
    3,  // SM_OCCUPANCY
    5,  // ANY_TENSOR_UTIL
    6,  // DFMA_TENSOR_UTIL
    7,  // HMMA_TENSOR_UTIL
    9,  // IMMA_TENSOR_UTIL
    10, // DRAM_BW_UTIL
    20, // PCIE_TX_PER_SEC (MiB/s)
    21, // PCIE_RX_PER_SEC
    61, // NVLINK_TOTAL_TX_PER_SEC
    60, // NVLINK_TOTAL_RX_PER_SEC
];
// Positions in `GPM_METRIC_IDS`.
const SM_ACTIVE: usize = 0;
const SM_OCCUPANCY: usize = 1;
const TENSOR_ACTIVE: usize = 2;
const DFMA_TENSOR: usize = 3;
const HMMA_TENSOR: usize = 4;
const IMMA_TENSOR: usize = 5;
const DRAM_BW_UTIL: usize = 6;
const PCIE_TX: usize = 7;
const PCIE_RX: usize = 8;
const NVLINK_TX: usize = 9;
const NVLINK_RX: usize = 10;

/// One GPM reading, per `GPM_METRIC_IDS`; None where NVML failed that metric.
pub type GpmReading = [Option<f64>; GPM_METRIC_IDS.len()];

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
    /// None where GPM is off, or this sample had no earlier one to pair with.
    pub gpm: Option<GpmReading>,
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

/// One slot of the series: sums of the sampled values, and how many samples fell in it.
#[derive(Default, Clone, Copy)]
struct SeriesPoint {
    gpu_util_pct: f64,
    sm_clock_mhz: f64,
    power_w: f64,
    gpu_temp_c: f64,
    samples: u32,
    sm_active_pct: f64,
    sm_occupancy_pct: f64,
    tensor_active_pct: f64,
    dram_bw_util_pct: f64,
    gpm_samples: u32,
}

impl SeriesPoint {
    fn merge(self, other: SeriesPoint) -> SeriesPoint {
        SeriesPoint {
            gpu_util_pct: self.gpu_util_pct + other.gpu_util_pct,
            sm_clock_mhz: self.sm_clock_mhz + other.sm_clock_mhz,
            power_w: self.power_w + other.power_w,
            gpu_temp_c: self.gpu_temp_c + other.gpu_temp_c,
            samples: self.samples + other.samples,
            sm_active_pct: self.sm_active_pct + other.sm_active_pct,
            sm_occupancy_pct: self.sm_occupancy_pct + other.sm_occupancy_pct,
            tensor_active_pct: self.tensor_active_pct + other.tensor_active_pct,
            dram_bw_util_pct: self.dram_bw_util_pct + other.dram_bw_util_pct,
            gpm_samples: self.gpm_samples + other.gpm_samples,
        }
    }
}

/// A sum over `n` samples as their mean (0 for none).
fn mean(sum: f64, n: u32) -> f32 {
    if n == 0 {
        0.0
    } else {
        (sum / f64::from(n)) as f32
    }
}

/// Samples reduced to fixed-size summaries and a capped series.
#[derive(Default, Clone)]
pub struct TelemetryAgg {
    interval_ms: u64,
    samples: u64,
    gpu_util_pct: GaugeAcc,
    mem_util_pct: GaugeAcc,
    sm_clock_mhz: GaugeAcc,
    mem_clock_mhz: GaugeAcc,
    power_mw: GaugeAcc,
    gpu_temp_c: GaugeAcc,
    mem_temp_c: GaugeAcc,
    pcie_tx_kib_per_s: GaugeAcc,
    pcie_rx_kib_per_s: GaugeAcc,
    reasons: [u64; CLOCK_EVENT_REASONS.len()],
    ecc_corrected: Option<[u64; 2]>,
    ecc_uncorrected: Option<[u64; 2]>,
    other_processes_max: u32,
    series_start: u64,
    series_step_ns: u64,
    series: Vec<SeriesPoint>,
    /// Whether GPM samples this device, and how or why not; None before it was asked.
    gpm_status: Option<SourceStatus>,
    gpm: [GaugeAcc; GPM_METRIC_IDS.len()],
}

impl TelemetryAgg {
    pub fn new(interval_ms: u64) -> TelemetryAgg {
        TelemetryAgg {
            interval_ms,
            ..TelemetryAgg::default()
        }
    }

    pub fn set_gpm_status(&mut self, status: SourceStatus) {
        self.gpm_status = Some(status);
    }

    pub fn add(&mut self, s: &Sample) {
        self.samples += 1;
        if let Some(reading) = &s.gpm {
            for (acc, &v) in self.gpm.iter_mut().zip(reading) {
                acc.add(v);
            }
        }
        self.gpu_util_pct.add(s.gpu_util_pct);
        self.mem_util_pct.add(s.mem_util_pct);
        self.sm_clock_mhz.add(s.sm_clock_mhz);
        self.mem_clock_mhz.add(s.mem_clock_mhz);
        self.power_mw.add(s.power_mw);
        self.gpu_temp_c.add(s.gpu_temp_c);
        self.mem_temp_c.add(s.mem_temp_c);
        self.pcie_tx_kib_per_s.add(s.pcie_tx_kib_per_s);
        self.pcie_rx_kib_per_s.add(s.pcie_rx_kib_per_s);
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
                .map(|pair| pair.iter().fold(SeriesPoint::default(), |a, &b| a.merge(b)))
                .collect();
            self.series_step_ns *= 2;
        }
        let slot = (offset / self.series_step_ns) as usize;
        if self.series.len() <= slot {
            self.series.resize(slot + 1, SeriesPoint::default());
        }
        let gpm = |i: usize| {
            s.gpm
                .and_then(|r| r.get(i).copied().flatten())
                .unwrap_or(0.0)
        };
        if let Some(point) = self.series.get_mut(slot) {
            *point = point.merge(SeriesPoint {
                gpu_util_pct: s.gpu_util_pct.unwrap_or(0.0),
                sm_clock_mhz: s.sm_clock_mhz.unwrap_or(0.0),
                power_w: s.power_mw.unwrap_or(0.0) / 1000.0,
                gpu_temp_c: s.gpu_temp_c.unwrap_or(0.0),
                samples: 1,
                sm_active_pct: gpm(SM_ACTIVE),
                sm_occupancy_pct: gpm(SM_OCCUPANCY),
                tensor_active_pct: gpm(TENSOR_ACTIVE),
                dram_bw_util_pct: gpm(DRAM_BW_UTIL),
                gpm_samples: u32::from(s.gpm.is_some()),
            });
        }
    }

    pub fn telemetry(&self) -> Telemetry {
        let column = |sum: fn(&SeriesPoint) -> f64| -> Vec<f32> {
            self.series
                .iter()
                .map(|p| mean(sum(p), p.samples))
                .collect()
        };
        let any_gpm = self.series.iter().any(|p| p.gpm_samples > 0);
        let gpm_column = |sum: fn(&SeriesPoint) -> f64| -> Vec<f32> {
            if !any_gpm {
                return Vec::new();
            }
            // A slot without a reading (the first, or one whose pair was put off to keep
            // 100 ms between samples) is NO_READING, not 0: readers skip it.
            self.series
                .iter()
                .map(|p| match p.gpm_samples {
                    0 => NO_READING,
                    n => mean(sum(p), n),
                })
                .collect()
        };
        let gauge = |i: usize| self.gpm.get(i).and_then(GaugeAcc::gauge);
        Telemetry {
            interval_ms: self.interval_ms,
            samples: self.samples,
            gpu_util_pct: self.gpu_util_pct.gauge(),
            mem_util_pct: self.mem_util_pct.gauge(),
            sm_clock_mhz: self.sm_clock_mhz.gauge(),
            mem_clock_mhz: self.mem_clock_mhz.gauge(),
            power_mw: self.power_mw.gauge(),
            gpu_temp_c: self.gpu_temp_c.gauge(),
            mem_temp_c: self.mem_temp_c.gauge(),
            pcie_tx_kib_per_s: self.pcie_tx_kib_per_s.gauge(),
            pcie_rx_kib_per_s: self.pcie_rx_kib_per_s.gauge(),
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
                gpu_util_pct: column(|p| p.gpu_util_pct),
                sm_clock_mhz: column(|p| p.sm_clock_mhz),
                power_w: column(|p| p.power_w),
                gpu_temp_c: column(|p| p.gpu_temp_c),
                sm_active_pct: gpm_column(|p| p.sm_active_pct),
                sm_occupancy_pct: gpm_column(|p| p.sm_occupancy_pct),
                tensor_active_pct: gpm_column(|p| p.tensor_active_pct),
                dram_bw_util_pct: gpm_column(|p| p.dram_bw_util_pct),
            },
            gpm: self.gpm_status.as_ref().map(|status| Gpm {
                active: status.active,
                note: status.note.clone(),
                sm_active_pct: gauge(SM_ACTIVE),
                sm_occupancy_pct: gauge(SM_OCCUPANCY),
                tensor_active_pct: gauge(TENSOR_ACTIVE),
                dfma_tensor_pct: gauge(DFMA_TENSOR),
                hmma_tensor_pct: gauge(HMMA_TENSOR),
                imma_tensor_pct: gauge(IMMA_TENSOR),
                dram_bw_util_pct: gauge(DRAM_BW_UTIL),
                pcie_tx_mib_per_s: gauge(PCIE_TX),
                pcie_rx_mib_per_s: gauge(PCIE_RX),
                nvlink_tx_mib_per_s: gauge(NVLINK_TX),
                nvlink_rx_mib_per_s: gauge(NVLINK_RX),
            }),
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
    fn gpm_readings_reduce_to_gauges_and_series_of_their_own_samples() {
        let mut agg = TelemetryAgg::new(100);
        agg.set_gpm_status(SourceStatus {
            active: true,
            note: "nvmlGpmSampleGet".into(),
        });
        // The first sample has no pair: no reading. Then SM active 10, 20, 30 %; the
        // tensor metric failed in the last reading.
        agg.add(&sample(0, 50.0, 0));
        for i in 1..4u64 {
            let mut reading: GpmReading = [Some(1.0); GPM_METRIC_IDS.len()];
            reading[SM_ACTIVE] = Some(i as f64 * 10.0);
            reading[TENSOR_ACTIVE] = (i < 3).then_some(5.0);
            agg.add(&Sample {
                gpm: Some(reading),
                ..sample(i, 50.0, 0)
            });
        }
        let t = agg.telemetry();
        let gpm = t.gpm.unwrap();
        assert_eq!((gpm.active, gpm.note.as_str()), (true, "nvmlGpmSampleGet"));
        assert_eq!(
            gpm.sm_active_pct,
            Some(Gauge {
                samples: 3,
                min: 10.0,
                mean: 20.0,
                max: 30.0,
                last: 30.0
            })
        );
        assert_eq!(
            gpm.tensor_active_pct.map(|g| (g.samples, g.mean)),
            Some((2, 5.0))
        );
        // Slot 0 had no reading; the GPU-util column still counts it.
        assert_eq!(t.series.sm_active_pct, [NO_READING, 10.0, 20.0, 30.0]);
        assert_eq!(t.series.gpu_util_pct, [50.0; 4]);
        let series = &t.series;
        let from = series.start_unix_ns + 100_000_000;
        assert_eq!(
            series.mean_in(&series.sm_active_pct, from, from + 300_000_000),
            Some(20.0)
        );
        // Half of slot 1 and all of slot 2: (10 * 0.5 + 20) / 1.5.
        assert_eq!(
            series.mean_in(&series.sm_active_pct, from + 50_000_000, from + 200_000_000),
            Some(25.0 / 1.5)
        );
        // Slot 0, without a reading, does not count.
        let start = series.start_unix_ns;
        assert_eq!(
            series.mean_in(&series.sm_active_pct, start, start + 200_000_000),
            Some(10.0)
        );
        assert_eq!(series.mean_in(&series.sm_active_pct, 0, 1), None);
    }

    #[test]
    fn without_gpm_the_dump_has_no_gpm_figures() {
        let mut agg = TelemetryAgg::new(100);
        agg.add(&sample(0, 50.0, 0));
        let t = agg.telemetry();
        assert_eq!(t.gpm, None);
        assert!(t.series.sm_active_pct.is_empty());
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
