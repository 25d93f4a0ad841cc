//! A dump as Prometheus text exposition (version 0.0.4), for node_exporter's textfile
//! collector: the shim writes one file per process at every flush, the CLI one for the
//! job's first finding (docs/prometheus.md lists every metric).
//!
//! Two files must never carry the same series (node_exporter refuses the whole scrape), so
//! every series carries the process's labels: `host`, `rank` and `job` in a distributed
//! job, `host` and `pid` outside one. Label values come from bounded sets only (API
//! families, sync causes, copy kinds, devices, collectives, communicators, threads): never
//! kernel names.

use crate::gpu::Gauge;
use crate::hist::{bucket_bounds, Histogram};
use crate::{base_name, Dump, SyncCause};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Upper bounds of the latency histograms' buckets: 2^k - 1 ns for k = 10, 13, ..., 34
/// (about 1 µs to 17 s, a factor of 8 apart). Each is the last value of one of the dump's
/// own buckets, so the counts are exact, not interpolated.
pub const LATENCY_BUCKET_BITS: [u32; 9] = [10, 13, 16, 19, 22, 25, 28, 31, 34];

/// Whose series a file holds: the labels every series of it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub host: String,
    /// The launcher's rank; None outside a job and for a process forked from a rank (a
    /// DataLoader worker inherits its rank's variables), which the pid then names.
    pub rank: Option<u32>,
    pub job: Option<String>,
    pub pid: u32,
}

impl Identity {
    /// The identity of the process that wrote `dump`; `forked` for a child forked from a
    /// recorded process.
    pub fn of(dump: &Dump, forked: bool) -> Identity {
        let rank = dump.process.rank.as_ref().filter(|_| !forked);
        Identity {
            host: dump.process.host.clone(),
            rank: rank.map(|r| r.rank),
            job: rank.and_then(|r| r.job_id.clone()),
            pid: dump.process.pid,
        }
    }

    /// `gpuspy-<rank or pid>-<host>.prom`: `r<rank>` in a job, `p<pid>` outside one.
    pub fn file_name(&self) -> String {
        let who = match self.rank {
            Some(rank) => format!("r{rank}"),
            None => format!("p{}", self.pid),
        };
        format!("gpuspy-{who}-{}.prom", crate::file_safe(&self.host))
    }

    fn labels(&self) -> Vec<(&'static str, String)> {
        let mut labels = vec![("host", self.host.clone())];
        match self.rank {
            Some(rank) => labels.push(("rank", rank.to_string())),
            None => labels.push(("pid", self.pid.to_string())),
        }
        if let Some(job) = &self.job {
            labels.push(("job_id", job.clone()));
        }
        labels
    }
}

/// The exposition text: families in a fixed order, each `# HELP` and `# TYPE` once.
pub struct Exposition {
    text: String,
    common: String,
}

impl Exposition {
    pub fn new(identity: &Identity) -> Exposition {
        Exposition {
            text: String::new(),
            common: label_text(&identity.labels()),
        }
    }

    /// Starts a family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Exposition {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
        self
    }

    /// One sample of the current family, with labels beyond the process's own.
    pub fn sample(&mut self, name: &str, labels: &[(&str, String)], value: f64) -> &mut Self {
        let mut all = self.common.clone();
        if !labels.is_empty() {
            all.push(',');
            all.push_str(&label_text(labels));
        }
        let _ = writeln!(self.text, "{name}{{{all}}} {}", number(value));
        self
    }

    pub fn finish(self) -> String {
        self.text
    }
}

fn label_text(labels: &[(&str, String)]) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A label value escaped as the exposition format requires.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Cumulative counts at each `LATENCY_BUCKET_BITS` bound, then the total.
fn cumulative(hist: &Histogram) -> ([u64; LATENCY_BUCKET_BITS.len()], u64) {
    let mut at = [0u64; LATENCY_BUCKET_BITS.len()];
    let mut total = 0u64;
    for &(index, count) in &hist.0 {
        total = total.saturating_add(count);
        // Values in the bucket are below its (exclusive) upper end.
        let (_, high) = bucket_bounds(index as usize);
        for (slot, &bits) in at.iter_mut().zip(&LATENCY_BUCKET_BITS) {
            if high <= 1u64 << bits {
                *slot = slot.saturating_add(count);
            }
        }
    }
    (at, total)
}

/// nccl-tests' bus-bandwidth factor for `op` over `n` ranks, and the factor from the
/// per-rank bytes the dump records to its S (docs/multi-rank.md#bandwidth). None for
/// operations it does not define.
pub fn nccl_factors(op: &str, n: u32) -> Option<(f64, f64)> {
    let n = f64::from(n.max(1));
    match op {
        "AllReduce" => Some((2.0 * (n - 1.0) / n, 1.0)),
        "AllGather" | "ReduceScatter" => Some(((n - 1.0) / n, n)),
        "Broadcast" | "Reduce" => Some((1.0, 1.0)),
        _ => None,
    }
}

/// The metrics of one process's dump.
pub fn render(dump: &Dump, identity: &Identity) -> String {
    let mut e = Exposition::new(identity);
    e.family(
        "gpuspy_start_timestamp_seconds",
        "gauge",
        "When the process started (Unix time).",
    )
    .sample(
        "gpuspy_start_timestamp_seconds",
        &[],
        seconds(dump.start_unix_ns),
    );
    e.family(
        "gpuspy_last_flush_timestamp_seconds",
        "gauge",
        "When gpuspy last wrote this file (Unix time): older than two flush periods means the process is gone or stuck in a way the shim cannot see.",
    )
    .sample(
        "gpuspy_last_flush_timestamp_seconds",
        &[],
        seconds(dump.stop_unix_ns),
    );
    e.family(
        "gpuspy_driver_seconds_total",
        "counter",
        "Time spent inside outermost intercepted calls, all threads.",
    )
    .sample("gpuspy_driver_seconds_total", &[], seconds(dump.driver_ns));
    api_metrics(&mut e, dump);
    sync_and_copy_metrics(&mut e, dump);
    gpu_metrics(&mut e, dump);
    nccl_metrics(&mut e, dump);
    hang_metrics(&mut e, dump);
    e.finish()
}

/// Latency histograms and bytes per API family (`cuMemcpyHtoDAsync`, not each versioned
/// symbol): its `_count` is the call counter.
fn api_metrics(e: &mut Exposition, dump: &Dump) {
    let mut families: BTreeMap<&str, (Histogram, u64, u64)> = BTreeMap::new();
    for a in &dump.apis {
        let f = families.entry(base_name(&a.symbol)).or_default();
        f.0.merge(&a.hist);
        f.1 = f.1.saturating_add(a.total_ns);
        f.2 = f.2.saturating_add(a.bytes);
    }
    let name = "gpuspy_api_latency_seconds";
    e.family(
        name,
        "histogram",
        "Latency of outermost calls per API family; _count is the call counter.",
    );
    for (api, (hist, total_ns, _)) in &families {
        let (at, count) = cumulative(hist);
        for (&bits, &n) in LATENCY_BUCKET_BITS.iter().zip(&at) {
            let le = number(seconds((1u64 << bits) - 1));
            let labels = [("api", api.to_string()), ("le", le)];
            e.sample(&format!("{name}_bucket"), &labels, n as f64);
        }
        let labels = [("api", api.to_string()), ("le", "+Inf".to_string())];
        e.sample(&format!("{name}_bucket"), &labels, count as f64);
        e.sample(
            &format!("{name}_sum"),
            &[("api", api.to_string())],
            seconds(*total_ns),
        );
        e.sample(
            &format!("{name}_count"),
            &[("api", api.to_string())],
            count as f64,
        );
    }
    e.family(
        "gpuspy_api_bytes_total",
        "counter",
        "Bytes named by the calls of an API family (copy and memset sizes, allocations).",
    );
    for (api, (_, _, bytes)) in families.iter().filter(|(_, f)| f.2 > 0) {
        e.sample(
            "gpuspy_api_bytes_total",
            &[("api", api.to_string())],
            *bytes as f64,
        );
    }
}

fn sync_and_copy_metrics(e: &mut Exposition, dump: &Dump) {
    e.family(
        "gpuspy_sync_blocked_seconds_total",
        "counter",
        "Time host threads spent blocked until the GPU caught up, per cause.",
    );
    for cause in SyncCause::ALL {
        let total = dump
            .syncs
            .iter()
            .find(|s| s.cause == cause)
            .map_or(0, |s| s.total_ns);
        e.sample(
            "gpuspy_sync_blocked_seconds_total",
            &[("cause", cause.name().to_string())],
            seconds(total),
        );
    }
    e.family(
        "gpuspy_copy_bytes_total",
        "counter",
        "Bytes copied, per direction and kind of host memory.",
    );
    for c in &dump.copies {
        let labels = [
            ("direction", format!("{:?}", c.direction)),
            ("memory", c.host.name().to_string()),
        ];
        e.sample("gpuspy_copy_bytes_total", &labels, c.bytes as f64);
    }
}

/// CUPTI's kernel busy share and NVML's last samples, per device.
fn gpu_metrics(e: &mut Exposition, dump: &Dump) {
    let devices = dump.gpu.iter().flat_map(|g| &g.devices);
    let busy: Vec<(String, f64)> = devices
        .clone()
        .filter_map(|d| Some((d.ordinal.to_string(), d.activity.as_ref()?.busy_share()?)))
        .collect();
    if !busy.is_empty() {
        e.family(
            "gpuspy_gpu_busy_ratio",
            "gauge",
            "Share of the GPU's working span with a kernel running (CUPTI).",
        );
        for (device, share) in busy {
            e.sample("gpuspy_gpu_busy_ratio", &[("device", device)], share);
        }
    }
    type Pick = fn(&crate::gpu::Telemetry) -> Option<&Gauge>;
    let gauges: [(&str, &str, Pick, f64); 6] = [
        (
            "gpuspy_nvml_gpu_utilization_ratio",
            "NVML GPU utilisation, last sample.",
            |t| t.gpu_util_pct.as_ref(),
            0.01,
        ),
        (
            "gpuspy_nvml_memory_utilization_ratio",
            "NVML memory-controller utilisation, last sample.",
            |t| t.mem_util_pct.as_ref(),
            0.01,
        ),
        (
            "gpuspy_nvml_sm_clock_hertz",
            "NVML SM clock, last sample.",
            |t| t.sm_clock_mhz.as_ref(),
            1e6,
        ),
        (
            "gpuspy_nvml_power_watts",
            "NVML board power, last sample.",
            |t| t.power_mw.as_ref(),
            1e-3,
        ),
        (
            "gpuspy_nvml_gpu_temperature_celsius",
            "NVML GPU temperature, last sample.",
            |t| t.gpu_temp_c.as_ref(),
            1.0,
        ),
        (
            "gpuspy_nvml_memory_temperature_celsius",
            "NVML memory temperature, last sample.",
            |t| t.mem_temp_c.as_ref(),
            1.0,
        ),
    ];
    for (name, help, pick, scale) in gauges {
        let values: Vec<(String, f64)> = devices
            .clone()
            .filter_map(|d| {
                let gauge = pick(d.telemetry.as_ref()?)?;
                Some((d.ordinal.to_string(), gauge.last * scale))
            })
            .collect();
        if values.is_empty() {
            continue;
        }
        e.family(name, "gauge", help);
        for (device, value) in values {
            e.sample(name, &[("device", device)], value);
        }
    }
}

/// Calls and bytes per collective, the bus bandwidth where CUPTI timed its kernels, and
/// each communicator's operation count (its sequence number: equal on every member of a
/// job in step).
fn nccl_metrics(e: &mut Exposition, dump: &Dump) {
    let Some(nccl) = &dump.nccl else { return };
    let mut by_op: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for o in &nccl.ops {
        let t = by_op.entry(&o.op).or_default();
        t.0 = t.0.saturating_add(o.calls);
        t.1 = t.1.saturating_add(o.bytes);
    }
    e.family(
        "gpuspy_nccl_calls_total",
        "counter",
        "NCCL operations issued, per collective.",
    );
    for (op, (calls, _)) in &by_op {
        e.sample(
            "gpuspy_nccl_calls_total",
            &[("collective", op.to_string())],
            *calls as f64,
        );
    }
    e.family(
        "gpuspy_nccl_bytes_total",
        "counter",
        "Bytes this rank passed to NCCL operations, per collective.",
    );
    for (op, (_, bytes)) in &by_op {
        e.sample(
            "gpuspy_nccl_bytes_total",
            &[("collective", op.to_string())],
            *bytes as f64,
        );
    }
    let ranks = nccl
        .communicators
        .iter()
        .map(|c| u32::try_from(c.nranks).unwrap_or(0))
        .max()
        .unwrap_or(1);
    let mut kernel_ns: BTreeMap<&str, u64> = BTreeMap::new();
    for c in dump
        .gpu
        .iter()
        .flat_map(|g| &g.devices)
        .filter_map(|d| d.activity.as_ref())
        .flat_map(|a| &a.collectives)
    {
        let t = kernel_ns.entry(&c.op).or_default();
        *t = t.saturating_add(c.total_ns);
    }
    let busbw: Vec<(&str, f64)> = by_op
        .iter()
        .filter_map(|(op, &(_, bytes))| {
            let (bus, size) = nccl_factors(op, ranks)?;
            let ns = *kernel_ns.get(op).filter(|&&ns| ns > 0)?;
            (bytes > 0).then(|| (*op, bytes as f64 * size * 1e9 / ns as f64 * bus))
        })
        .collect();
    if !busbw.is_empty() {
        e.family(
            "gpuspy_nccl_bus_bandwidth_bytes_per_second",
            "gauge",
            "nccl-tests bus bandwidth from this rank's NCCL kernel time (which includes its waits for the other ranks).",
        );
        for (op, bw) in busbw {
            e.sample(
                "gpuspy_nccl_bus_bandwidth_bytes_per_second",
                &[("collective", op.to_string())],
                bw,
            );
        }
    }
    if !nccl.communicators.is_empty() {
        e.family(
            "gpuspy_nccl_communicator_operations_total",
            "counter",
            "Operations issued on a communicator: a member behind the others has not entered the collective they wait in.",
        );
        for c in &nccl.communicators {
            e.sample(
                "gpuspy_nccl_communicator_operations_total",
                &[("communicator", c.key.clone())],
                c.operations as f64,
            );
        }
    }
}

fn hang_metrics(e: &mut Exposition, dump: &Dump) {
    e.family(
        "gpuspy_hung_calls",
        "gauge",
        "Calls in flight for GPUSPY_HANG_S or longer (the hang watchdog).",
    )
    .sample("gpuspy_hung_calls", &[], dump.hangs.len() as f64);
    if dump.hangs.is_empty() {
        return;
    }
    e.family(
        "gpuspy_hung_call_seconds",
        "gauge",
        "How long each hung call had been in flight, per API and thread.",
    );
    for h in &dump.hangs {
        let labels = [("api", h.api.clone()), ("thread", h.thread.to_string())];
        e.sample("gpuspy_hung_call_seconds", &labels, seconds(h.elapsed_ns));
    }
}

/// The CLI's file: the job's current first finding, as an id label and its impact.
pub fn render_finding(identity: &Identity, finding: Option<(&str, f64)>) -> String {
    let mut e = Exposition::new(identity);
    e.family(
        "gpuspy_finding_impact_ratio",
        "gauge",
        "The job's first finding (gpuspy run --prom diagnoses every flush) and its estimated share of the run's time.",
    );
    if let Some((id, impact)) = finding {
        e.sample(
            "gpuspy_finding_impact_ratio",
            &[("finding", id.to_string())],
            impact,
        );
    }
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::bucket_index;

    #[test]
    fn buckets_are_exact_at_their_bounds() {
        let mut dense = vec![0u64; crate::hist::BUCKETS];
        for ns in [1_023, 1_024, 8_191, 8_192, 20_000_000_000] {
            dense[bucket_index(ns)] += 1;
        }
        let (at, total) = cumulative(&Histogram::from_dense(&dense));
        assert_eq!(total, 5);
        // 1023 ns is at or under 2^10 - 1; 1024 is not; 8191 is under 2^13 - 1.
        assert_eq!(&at[..3], &[1, 3, 4]);
        // 20 s is over the last bound (2^34 - 1 ns, 17.2 s): only in +Inf.
        assert_eq!(at[8], 4);
    }

    #[test]
    fn identities_name_files_and_label_values_are_escaped() {
        let ranked = Identity {
            host: "node 1".into(),
            rank: Some(3),
            job: Some("j\"1".into()),
            pid: 9,
        };
        assert_eq!(ranked.file_name(), "gpuspy-r3-node_1.prom");
        let mut e = Exposition::new(&ranked);
        e.family("x", "gauge", "h").sample("x", &[], 1.5);
        assert_eq!(
            e.finish(),
            "# HELP x h\n# TYPE x gauge\nx{host=\"node 1\",rank=\"3\",job_id=\"j\\\"1\"} 1.5\n"
        );
        let alone = Identity {
            rank: None,
            job: None,
            ..ranked
        };
        assert_eq!(alone.file_name(), "gpuspy-p9-node_1.prom");
    }
}
