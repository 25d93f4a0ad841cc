//! `gpuspy report`: the human-readable tables.

use crate::collectives::{collectives, link_peak, Collective};
use crate::diagnose::{share, Diagnosis, Severity};
use crate::profile::{Latency, ProcessInfo, Profile};
use gpuspy_format::Ending;
use std::fmt::Write;

/// `1.23 ms`-style durations with three significant figures.
pub fn duration(ns: u64) -> String {
    let (value, unit) = match ns {
        0..=999 => return format!("{ns} ns"),
        1_000..=999_999 => (ns as f64 / 1e3, "us"),
        1_000_000..=999_999_999 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {unit}")
}

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// calls, total, p50, p99 and max, right-aligned in columns of 10.
fn latency_columns(l: &Latency) -> String {
    format!(
        "{:>10} {:>10} {:>10} {:>10} {:>10}",
        l.calls,
        duration(l.total_ns),
        duration(l.quantile(0.5)),
        duration(l.quantile(0.99)),
        duration(l.max_ns)
    )
}

/// One row per rank, when the dumps come from a distributed job. Past 16 ranks, the 8 that
/// wait least (straggler candidates) and the 8 that wait most.
fn ranks(out: &mut String, p: &Profile) {
    let mut ranked: Vec<_> = p.processes.iter().filter(|x| x.rank.is_some()).collect();
    if ranked.len() < 2 {
        return;
    }
    ranked.sort_by(|a, b| a.wait_share().total_cmp(&b.wait_share()));
    let _ = writeln!(
        out,
        "\nRanks ({}), by share of time waiting for the GPU",
        ranked.len()
    );
    // The GPU's view of the waiting where CUPTI timed NCCL kernels: the straggler's are
    // the shortest.
    let in_nccl = |x: &ProcessInfo| {
        x.nccl_kernel_ns().map_or_else(
            || "-".to_string(),
            |ns| format!("{:.1}%", share(ns, x.steady_ns) * 100.0),
        )
    };
    let _ = writeln!(
        out,
        "  {:>6}  {:<16} {:>8}  {:>10}  {:>8}  {:>8}  {:>10}",
        "rank", "host", "pid", "steady", "waiting", "in NCCL", "launches"
    );
    const SHOWN: usize = 8;
    for (i, x) in ranked.iter().enumerate() {
        if ranked.len() > 2 * SHOWN && i == SHOWN {
            let _ = writeln!(out, "  ... {} more ranks ...", ranked.len() - 2 * SHOWN);
        }
        if ranked.len() > 2 * SHOWN && (SHOWN..ranked.len() - SHOWN).contains(&i) {
            continue;
        }
        let _ = writeln!(
            out,
            "  {:>6}  {:<16} {:>8}  {:>10}  {:>7.1}%  {:>8}  {:>10}",
            x.rank.unwrap_or_default(),
            x.host,
            x.pid,
            duration(x.steady_ns),
            x.wait_share() * 100.0,
            in_nccl(x),
            x.launches
        );
    }
    let spread: Vec<String> = p
        .rank_imbalance()
        .iter()
        .filter(|i| i.median > 0.0)
        .map(|i| format!("{} {:.2}x (rank {})", i.measure, i.ratio, i.rank))
        .collect();
    if !spread.is_empty() {
        let _ = writeln!(out, "  largest rank / median: {}", spread.join(", "));
    }
    let (common, differ) = p.rank_verdicts();
    if !differ.is_empty() {
        let name = |v: Option<&str>| v.unwrap_or("no warning").to_string();
        let shown: Vec<String> = differ
            .iter()
            .take(16)
            .map(|(rank, v)| format!("rank {rank}: {}", name(*v)))
            .collect();
        let _ = writeln!(
            out,
            "  verdicts that differ from the common one ({}): {}{}",
            name(common),
            shown.join(", "),
            if differ.len() > 16 { ", ..." } else { "" }
        );
    }
}

/// The verdict, then the six layers bottom up, each with its status and findings.
fn diagnosis(out: &mut String, p: &Profile, d: &Diagnosis) {
    match d.verdict() {
        Some(f) => {
            let _ = writeln!(
                out,
                "\nVerdict: {} ({} layer){}: {}",
                f.id,
                f.layer.name(),
                if f.heuristic { ", heuristic" } else { "" },
                f.summary
            );
            let _ = writeln!(
                out,
                "  estimated time lost: {:.0} %; fix: {}",
                f.impact * 100.0,
                f.fix
            );
        }
        None => {
            let _ = match p.gpu_idle_share() {
                Some(idle) if idle <= 0.1 => writeln!(
                    out,
                    "\nVerdict: GPU-bound. Kernels ran {:.1} % of the GPU's activity span and nothing blocks: only faster (or fewer) kernels make this run faster.",
                    (1.0 - idle) * 100.0
                ),
                Some(idle) => writeln!(
                    out,
                    "\nVerdict: no blocking problem found. Kernels ran {:.1} % of the GPU's activity span.",
                    (1.0 - idle) * 100.0
                ),
                None => writeln!(
                    out,
                    "\nVerdict: no blocking problem in the host-side data. The dumps have no GPU busy time (see the GPU section), so a GPU-bound run cannot be confirmed."
                ),
            };
        }
    }
    let _ = writeln!(out, "\nLayers, bottom up");
    for layer in &d.layers {
        let _ = writeln!(out, "  {:<10} {}", layer.layer.name(), layer.status);
        for f in d.findings.iter().filter(|f| f.layer == layer.layer) {
            let _ = writeln!(
                out,
                "    {} {}{}: {} (impact {:.0} %)",
                if f.severity == Severity::Warning {
                    "!"
                } else {
                    "-"
                },
                f.id,
                if f.heuristic { " [heuristic]" } else { "" },
                f.summary,
                f.impact * 100.0
            );
        }
        // One line per missing source: "? a, b: needs NVML telemetry".
        let mut reasons: Vec<&str> = Vec::new();
        for &(_, why) in &layer.no_data {
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
        for why in reasons {
            let ids: Vec<&str> = layer
                .no_data
                .iter()
                .filter(|&&(_, w)| w == why)
                .map(|&(id, _)| id)
                .collect();
            let _ = writeln!(out, "    ? {}: {why}", ids.join(", "));
        }
    }
}

/// Process-devices shown in the GPU section; the rest are in `--json`.
const GPU_SECTIONS_SHOWN: usize = 8;

/// What the GPU itself reported, per process and device; or why nothing was collected.
fn gpu(out: &mut String, p: &Profile) {
    let with_gpu: Vec<_> = p
        .processes
        .iter()
        .filter_map(|x| x.gpu.as_deref().map(|g| (x, g)))
        .collect();
    if with_gpu.is_empty() {
        let _ = writeln!(
            out,
            "\nGPU: no GPU-side data in the dumps (written by a shim without NVML/CUPTI support, or the process never initialised CUDA)"
        );
        return;
    }
    let _ = writeln!(
        out,
        "\nGPU (what the device reported: NVML telemetry, CUPTI activity)"
    );
    let mut shown = 0;
    for (x, g) in &with_gpu {
        for note in [("NVML", &g.nvml), ("CUPTI", &g.cupti)] {
            let state = if note.1.active { "on" } else { "off" };
            let _ = writeln!(out, "  pid {}  {}: {state}, {}", x.pid, note.0, note.1.note);
        }
        for dev in &g.devices {
            shown += 1;
            if shown > GPU_SECTIONS_SHOWN {
                continue;
            }
            gpu_device(out, dev);
        }
        if let Some(um) = &g.unified_memory {
            let _ = writeln!(
                out,
                "    unified memory: {} CPU page faults, {} GPU fault groups; migrated {} to the GPU, {} to the host",
                um.cpu_page_faults,
                um.gpu_page_fault_groups,
                bytes(um.bytes_htod),
                bytes(um.bytes_dtoh)
            );
        }
        if g.dropped_records + g.refused_buffers > 0 {
            let _ = writeln!(
                out,
                "    CUPTI lost records: {} dropped, {} buffers refused (pool full)",
                g.dropped_records, g.refused_buffers
            );
        }
    }
    if shown > GPU_SECTIONS_SHOWN {
        let _ = writeln!(
            out,
            "  ... {} more devices in --json",
            shown - GPU_SECTIONS_SHOWN
        );
    }
}

fn gpu_device(out: &mut String, dev: &gpuspy_format::gpu::Device) {
    let mut head = vec![format!("GPU {}", dev.ordinal)];
    let mut anomalies = Vec::new();
    if let Some(f) = &dev.facts {
        if !f.name.is_empty() {
            head.push(f.name.clone());
        }
        if !f.driver_version.is_empty() {
            head.push(format!("driver {}", f.driver_version));
        }
        if let Some(v) = f.cuda_driver_version {
            head.push(format!("CUDA {}.{}", v / 1000, v % 1000 / 10));
        }
        let l = &f.pcie;
        if let (Some(g), Some(w), Some(gm), Some(wm)) =
            (l.gen_current, l.width_current, l.gen_max, l.width_max)
        {
            head.push(format!("PCIe gen{g} x{w} (max gen{gm} x{wm})"));
            if g < gm || w < wm {
                anomalies.push(format!(
                    "PCIe link below its maximum (gen{g} x{w} of gen{gm} x{wm})"
                ));
            }
        }
        if let Some(on) = f.ecc_enabled {
            head.push(format!("ECC {}", if on { "on" } else { "off" }));
        }
        if let Some(sms) = f.sm_count {
            head.push(format!("{sms} SMs"));
        }
        if let Some(mw) = f.power_limit_mw {
            head.push(format!("power limit {} W", mw / 1000));
        }
        if !f.other_processes.is_empty() {
            let pids: Vec<String> = f
                .other_processes
                .iter()
                .map(|o| o.pid.to_string())
                .collect();
            anomalies.push(format!(
                "other processes on the GPU: pid {}",
                pids.join(", ")
            ));
        }
    }
    let _ = writeln!(out, "    {}", head.join("  ·  "));
    if let Some(a) = &dev.activity {
        let span = a.working_span_ns();
        let gaps = hist_quantiles(&a.gap_hist);
        let (pauses, pause_ns) = a.pauses();
        let paused = if pauses > 0 {
            format!(
                " (and {pauses} pause(s) of 1 s or more, about {}, left out)",
                duration(pause_ns)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "      busy {} of {}{paused} ({} kernels, {} in kernels)  ·  idle gaps {}",
            percent(a.busy_ns, span),
            duration(span),
            a.kernels,
            duration(a.kernel_ns),
            gaps
        );
        // Copies between host and device cross the PCIe link: their rate against its peak,
        // for copies of 1 MiB or more on average (smaller ones are bound by latency).
        let pcie_peak = dev.facts.as_ref().and_then(|f| f.pcie.peak_bytes_per_s());
        for c in &a.copies {
            let large = c.bytes >= c.count.saturating_mul(1 << 20);
            let of_peak = match (c.kind.as_str(), c.bytes_per_s(), pcie_peak) {
                ("HtoD" | "DtoH", Some(r), Some(peak)) if large => {
                    format!(", {:.0} % of the PCIe peak", r / peak * 100.0)
                }
                _ => String::new(),
            };
            let at = c
                .bytes_per_s()
                .map_or_else(String::new, |r| format!(" at {}{of_peak}", rate(r)));
            let _ = writeln!(
                out,
                "      copies {} {}: {} x, {}{}",
                c.kind,
                c.memory,
                c.count,
                bytes(c.bytes),
                at
            );
        }
        if a.late_records + a.untimed_records > 0 {
            let _ = writeln!(
                out,
                "      {} late and {} untimed records (busy time may be slightly low)",
                a.late_records, a.untimed_records
            );
        }
        for (i, k) in a.top_kernels.iter().take(5).enumerate() {
            let name: String = k.name.chars().take(90).collect();
            let _ = writeln!(
                out,
                "      {}. {:>6} {:>8} x  {}",
                i + 1,
                percent(k.total_ns, a.kernel_ns),
                k.calls,
                name
            );
        }
    }
    if let Some(t) = &dev.telemetry {
        let mut parts = vec![format!("{} samples every {} ms", t.samples, t.interval_ms)];
        if let Some(u) = t.gpu_util_pct {
            parts.push(format!("util mean {:.0} %, max {:.0} %", u.mean, u.max));
        }
        if let Some(c) = t.sm_clock_mhz {
            let max = dev.facts.as_ref().and_then(|f| f.max_sm_clock_mhz);
            parts.push(format!(
                "SM clock mean {:.0}{} MHz",
                c.mean,
                max.map_or_else(String::new, |m| format!(" of {m}"))
            ));
        }
        if let Some(pw) = t.power_mw {
            parts.push(format!(
                "power mean {:.0} W, max {:.0} W",
                pw.mean / 1e3,
                pw.max / 1e3
            ));
        }
        if let Some(temp) = t.gpu_temp_c {
            parts.push(format!("GPU {:.0} C max", temp.max));
        }
        let _ = writeln!(out, "      telemetry: {}", parts.join("  ·  "));
        let throttles: Vec<String> = t
            .clock_events
            .iter()
            .filter(|e| e.reason != "gpu-idle")
            .map(|e| format!("{} in {} of {} samples", e.reason, e.samples, t.samples))
            .collect();
        if !throttles.is_empty() {
            anomalies.push(format!("clock events: {}", throttles.join(", ")));
        }
        let (corrected, uncorrected) = t.new_ecc_errors();
        if corrected + uncorrected > 0 {
            anomalies.push(format!(
                "ECC errors during the run: {corrected} corrected, {uncorrected} uncorrected"
            ));
        }
    }
    for a in anomalies {
        let _ = writeln!(out, "      ! {a}");
    }
}

/// `n, p50 x, p99 y, longest z` of a gap histogram, or `none`.
fn hist_quantiles(h: &gpuspy_format::Histogram) -> String {
    let n = h.count();
    if n == 0 {
        return "none".into();
    }
    let max = h.0.last().map_or(0, |&(i, _)| {
        gpuspy_format::hist::bucket_bounds(i as usize).1
    });
    format!(
        "{n}, p50 {}, p99 {}, longest < {}",
        duration(h.quantile(0.5, max)),
        duration(h.quantile(0.99, max)),
        duration(max)
    )
}

pub fn render(p: &Profile, d: &Diagnosis, per_process: bool) -> String {
    let mut out = String::new();
    // Driver and sync times are summed over the processes, so their shares are of the
    // processes' wall time summed; the headline wall time is the job's span.
    let wall = p.process_wall_ns();
    let driver = p.driver_ns();
    let threads = p
        .processes
        .iter()
        .fold(0u32, |n, pr| n.saturating_add(pr.threads));
    // The headline, what shares are "of", and that in a column's width.
    let (wall_label, of_wall, of_wall_column) = if p.processes.len() > 1 {
        (
            format!(
                "wall {} (first start to last dump), process time {} (summed over processes)",
                duration(p.span_ns()),
                duration(wall)
            ),
            "process time",
            "of time",
        )
    } else {
        (format!("wall {}", duration(wall)), "wall", "of wall")
    };
    let _ = writeln!(
        out,
        "gpuspy report: {} process{}, {} thread{}, {wall_label}, inside the driver {} ({} of {of_wall})",
        p.processes.len(),
        if p.processes.len() == 1 { "" } else { "es" },
        threads,
        if threads == 1 { "" } else { "s" },
        duration(driver),
        percent(driver, wall),
    );
    if p.saturated {
        let _ = writeln!(
            out,
            "note: some merged counts reached 2^64-1 and stopped there instead of wrapping around: figures shown as 18446744073709551615 are at least that"
        );
    }
    let incomplete = p.processes.iter().filter(|pr| !pr.complete).count();
    if incomplete > 0 {
        let _ = writeln!(
            out,
            "note: {incomplete} dump(s) come from a periodic flush (process killed or still running): data up to the last flush"
        );
    }
    ranks(&mut out, p);
    if per_process {
        let _ = writeln!(out, "\nProcesses");
        let _ = writeln!(
            out,
            "  {:>8}  {:>10}  {:>10}  {:>10}  {:<22}  command",
            "pid", "wall", "driver", "calls", "ended"
        );
        for pr in &p.processes {
            let _ = writeln!(
                out,
                "  {:>8}  {:>10}  {:>10}  {:>10}  {:<22}  {}",
                pr.pid,
                duration(pr.wall_ns),
                duration(pr.driver_ns),
                pr.calls,
                ending(pr),
                pr.cmdline.join(" "),
            );
        }
    }
    if p.apis.is_empty() {
        let _ = writeln!(out, "\nNo driver calls recorded.");
        return out;
    }
    diagnosis(&mut out, p, d);
    gpu(&mut out, p);
    let _ = writeln!(out, "\nDriver API calls (by total time)");
    let _ = writeln!(
        out,
        "  {:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "api", "calls", "total", "p50", "p99", "max", "errors"
    );
    for (name, api) in p.by_total_time() {
        let _ = writeln!(
            out,
            "  {:<28} {} {:>7}",
            name,
            latency_columns(&api.latency),
            api.errors(),
        );
        if api.symbols.len() > 1 || api.symbols.iter().any(|(s, _)| s != name) {
            let variants: Vec<String> = api
                .symbols
                .iter()
                .map(|(s, n)| format!("{s} {n}"))
                .collect();
            let _ = writeln!(out, "    {}", variants.join(", "));
        }
    }
    if !p.syncs.is_empty() {
        let _ = writeln!(out, "\nImplicit synchronisations (host blocked)");
        let _ = writeln!(
            out,
            "  {:<22} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
            "cause", "calls", "blocked", "p50", "p99", "max", of_wall_column
        );
        for (cause, l) in &p.syncs {
            let _ = writeln!(
                out,
                "  {:<22} {} {:>8}",
                cause.name(),
                latency_columns(l),
                percent(l.total_ns, wall),
            );
        }
    }
    if !p.copies.is_empty() {
        let _ = writeln!(out, "\nCopies (bytes by direction and host memory)");
        let _ = writeln!(
            out,
            "  {:<10} {:<10} {:>10} {:>12}",
            "direction", "host", "calls", "bytes"
        );
        for ((dir, host), (calls, n)) in &p.copies {
            let _ = writeln!(
                out,
                "  {:<10} {:<10} {:>10} {:>12}",
                format!("{dir:?}"),
                host.name(),
                calls,
                bytes(*n)
            );
        }
    }
    if !p.nccl_ops.is_empty() {
        let _ = writeln!(
            out,
            "\nNCCL operations (host-side enqueue; {} communicator(s))",
            p.communicators.len()
        );
        let _ = writeln!(
            out,
            "  {:<14} {:<10} {:>10} {:>12}",
            "op", "datatype", "calls", "bytes"
        );
        for ((op, dt), (calls, n)) in &p.nccl_ops {
            let _ = writeln!(out, "  {op:<14} {dt:<10} {calls:>10} {:>12}", bytes(*n));
        }
        collectives_table(&mut out, p);
        for (key, c) in &p.communicators {
            if let Some((common, odd)) = c.disagreement() {
                let odd: Vec<String> = odd.iter().map(|(m, n)| format!("{m} issued {n}")).collect();
                let _ = writeln!(
                    out,
                    "  ! communicator {key}: members disagree on the operations issued ({}; {common} for the others): such a job hangs in its next collective",
                    odd.join(", ")
                );
            }
        }
    }
    let _ = writeln!(out, "\nTop time sinks");
    for (i, (name, api)) in p.by_total_time().into_iter().take(5).enumerate() {
        let _ = writeln!(
            out,
            "  {}. {:<28} {:>10}  {:>6} of driver time, {:>6} of {of_wall}",
            i + 1,
            name,
            duration(api.latency.total_ns),
            percent(api.latency.total_ns, driver),
            percent(api.latency.total_ns, wall),
        );
    }
    if !p.unwrapped.is_empty() {
        // Runtimes look up the whole driver table at start; the names are in --json.
        const SHOWN: usize = 8;
        let more = p.unwrapped.len().saturating_sub(SHOWN);
        let _ = writeln!(
            out,
            "\n{} driver entry points were looked up but are not wrapped (calls to them are not counted): {}{}",
            p.unwrapped.len(),
            p.unwrapped[..p.unwrapped.len().min(SHOWN)].join(", "),
            if more > 0 { format!(", ... ({more} more in --json)") } else { String::new() },
        );
    }
    out
}

/// How a process ended: its last image's exit, exec or signal, or its last periodic flush.
fn ending(pr: &ProcessInfo) -> String {
    let images = if pr.images > 1 {
        format!(" ({} images)", pr.images)
    } else {
        String::new()
    };
    let how = match pr.ended_by {
        Some(Ending::Exec) => "exec'd".to_string(),
        Some(Ending::Signal(n)) => format!("killed by signal {n}"),
        None if pr.complete => "exited".to_string(),
        None => "periodic flush".to_string(),
    };
    how + &images
}

/// NCCL kernel time per collective and the bandwidths it gives, when CUPTI measured it.
fn collectives_table(out: &mut String, p: &Profile) {
    let timed: Vec<Collective> = collectives(p)
        .into_iter()
        .filter(|c| c.kernel_ns > 0)
        .collect();
    if timed.is_empty() {
        return;
    }
    let peak = link_peak(p);
    let _ = writeln!(
        out,
        "\n  On the GPU (CUPTI). A kernel's time includes its wait for the other ranks; the bandwidths use the rank that waited least."
    );
    let _ = writeln!(
        out,
        "  {:<14} {:>8} {:>10} {:>12} {:>12} {:>12}  {}",
        "op",
        "kernels",
        "GPU time",
        "least rank",
        "algbw",
        "busbw",
        peak.map_or_else(String::new, |(bps, link)| format!(
            "of the {link} peak ({})",
            rate(bps)
        ))
    );
    for c in &timed {
        let mut of_peak = match (c.busbw, peak) {
            (Some(bus), Some((bps, _))) => format!("{:.1} %", bus / bps * 100.0),
            _ => String::new(),
        };
        if c.saturated {
            of_peak += " (a sum over ranks saturated at 2^64-1)";
        }
        let _ = writeln!(
            out,
            "  {:<14} {:>8} {:>10} {:>12} {:>12} {:>12}  {of_peak}",
            c.op,
            c.kernels,
            duration(c.kernel_ns),
            duration(c.least_rank_kernel_ns),
            c.algbw.map_or_else(|| "-".into(), rate),
            c.busbw.map_or_else(|| "-".into(), rate),
        );
    }
}

fn rate(bytes_per_s: f64) -> String {
    format!("{:.1} GB/s", bytes_per_s / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_well() {
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(1_500), "1.50 us");
        assert_eq!(duration(25_000_000), "25.0 ms");
        assert_eq!(duration(3_000_000_000), "3.00 s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn a_busy_gpu_with_nothing_blocking_is_called_gpu_bound() {
        use crate::diagnose::{diagnose, synthetic::run};
        use gpuspy_format::gpu::{Activity, Device, Gpu};
        let with_busy = |busy_ns: u64| {
            let gpu = Gpu {
                devices: vec![Device {
                    activity: Some(Activity {
                        first_unix_ns: 1,
                        last_unix_ns: 1 + 1_000_000_000,
                        busy_ns,
                        ..Activity::default()
                    }),
                    ..Device::default()
                }],
                ..Gpu::default()
            };
            let p = run(1.0).api("cuLaunchKernel", 10, 0.1, 0).gpu(gpu).build();
            render(&p, &diagnose(&p), false)
        };
        let busy = with_busy(950_000_000);
        assert!(
            busy.contains("Verdict: GPU-bound. Kernels ran 95.0 %"),
            "{busy}"
        );
        assert!(!busy.contains("    ! "), "{busy}");
        let half = with_busy(500_000_000);
        assert!(
            half.contains("Verdict: no blocking problem found. Kernels ran 50.0 %"),
            "{half}"
        );
        let none = render(
            &run(1.0).api("cuLaunchKernel", 10, 0.1, 0).build(),
            &diagnose(&run(1.0).api("cuLaunchKernel", 10, 0.1, 0).build()),
            false,
        );
        assert!(none.contains("The dumps have no GPU busy time"), "{none}");
    }
}
