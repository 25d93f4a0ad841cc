//! `gpuspy report`: the human-readable tables. Formats a `Report` and nothing else: every
//! figure shown is in the report (and so in `--json`), this file only chooses units and
//! layout (`numbers` below checks that).

use crate::analysis::gpm::GpuUse;
use crate::analysis::phases::{PhaseCopies, StepSource};
use crate::analysis::report::{
    ActivityFigures, DeviceFigures, LatencyRow, ProcessRow, Report, SIMULATED,
};
use crate::analysis::rule::{Finding, Severity};
use crate::safe_text::{self, Escaped};
use crate::units::{bytes, duration, percent, whole_percent};
use gpuspy_format::Ending;
use std::fmt::Write;

/// calls, total, p50, p99 and max, right-aligned in columns of 10.
fn latency_columns(l: &LatencyRow) -> String {
    format!(
        "{:>10} {:>10} {:>10} {:>10} {:>10}",
        l.count,
        duration(l.total_ns),
        duration(l.p50_ns),
        duration(l.p99_ns),
        duration(l.max_ns)
    )
}

/// One row per rank, when the dumps come from a distributed job. Past 16 ranks, the 8 that
/// wait least (straggler candidates) and the 8 that wait most.
fn ranks(out: &mut String, r: &Report) {
    let mut ranked: Vec<&ProcessRow> = r.processes.iter().filter(|x| x.rank.is_some()).collect();
    if ranked.len() < 2 {
        return;
    }
    ranked.sort_by(|a, b| a.wait_share.total_cmp(&b.wait_share));
    let _ = writeln!(
        out,
        "\nRanks ({}), least waiting first; waiting and in NCCL are shares of each rank's steady-state time",
        ranked.len()
    );
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
            "  {:>6}  {:<16} {:>8}  {:>10}  {:>8}  {:>8}  {:>10}",
            x.rank.unwrap_or_default(),
            Escaped(&x.host),
            x.pid,
            duration(x.steady_ns),
            percent(Some(x.wait_share)),
            // The GPU's view of the waiting where CUPTI timed NCCL kernels: the
            // straggler's are the shortest.
            percent(x.nccl_share),
            x.launches
        );
    }
    let spread: Vec<String> = r
        .rank_imbalance
        .iter()
        .filter(|i| i.median > 0.0)
        .map(|i| format!("{} {:.2}x (rank {})", i.measure, i.ratio, i.rank))
        .collect();
    if !spread.is_empty() {
        let _ = writeln!(out, "  largest rank / median: {}", spread.join(", "));
    }
    let v = &r.rank_verdicts;
    if !v.differ.is_empty() {
        let name = |v: Option<&str>| v.unwrap_or("no warning").to_string();
        let shown: Vec<String> = v
            .differ
            .iter()
            .take(16)
            .map(|d| format!("rank {}: {}", d.rank, name(d.verdict)))
            .collect();
        let _ = writeln!(
            out,
            "  verdicts that differ from the common one ({}): {}{}",
            name(v.common),
            shown.join(", "),
            if v.differ.len() > 16 { ", ..." } else { "" }
        );
    }
}

/// The verdict, then the six layers bottom up, each with its status and findings.
fn diagnosis(out: &mut String, r: &Report) {
    let verdict = r
        .verdict
        .and_then(|id| r.findings.iter().find(|f| f.id == id));
    match verdict {
        Some(f) => {
            // The fix first, then what it saves, then why.
            let _ = writeln!(
                out,
                "\nVerdict: {} ({} layer){}\n  fix: {}\n  estimated time lost: {} of the run's time\n  evidence: {}",
                f.id,
                f.layer.name(),
                if f.heuristic { ", heuristic" } else { "" },
                Escaped(f.fix),
                whole_percent(f.impact),
                Escaped(&f.summary)
            );
            call_sites(out, f, "  ");
        }
        None => {
            if let Some(text) = &r.verdict_text {
                let _ = writeln!(out, "\nVerdict: {}", Escaped(text));
            }
            if let Some(u) = &r.gpu_use {
                gpu_use(out, u);
            }
        }
    }
    let _ = writeln!(out, "\nLayers, bottom up");
    for layer in &r.layers {
        let _ = writeln!(out, "  {:<10} {}", layer.layer.name(), layer.status);
        for f in r.findings.iter().filter(|f| f.layer == layer.layer) {
            let _ = writeln!(
                out,
                "    {} {}{}: {} (impact {} of the run's time)",
                if f.severity == Severity::Warning {
                    "!"
                } else {
                    "-"
                },
                f.id,
                if f.heuristic { " [heuristic]" } else { "" },
                Escaped(&f.summary),
                whole_percent(f.impact)
            );
            call_sites(out, f, "      ");
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

/// Python lines shown per finding; the rest are in `--json`.
const CALL_SITES_SHOWN: usize = 3;

/// "sync-stalled: 96 % of the blocked time at train.py:42 in step() (30 calls)", per line
/// of Python behind the finding.
fn call_sites(out: &mut String, f: &Finding, indent: &str) {
    for site in f.call_sites.iter().take(CALL_SITES_SHOWN) {
        let file = site.file.rsplit('/').next().unwrap_or(&site.file);
        let _ = writeln!(
            out,
            "{indent}{}: {} of the blocked time at {}:{} in {}() ({} calls)",
            f.id,
            whole_percent(site.share),
            Escaped(file),
            site.line,
            Escaped(&site.function),
            site.calls
        );
    }
}

/// Phases shown in the text; the rest are in `--json`.
const PHASES_SHOWN: usize = 12;

/// The job's phases with their times, what start-up went on, and the steady state's GPU
/// idle time by cause; nothing for dumps without a timeline.
fn phases(out: &mut String, r: &Report) {
    if r.phases.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nPhases (from the first process start)");
    for ph in r.phases.iter().take(PHASES_SHOWN) {
        let labels: Vec<String> = (ph.name.as_deref().map(|n| Escaped(n).to_string()))
            .into_iter()
            .chain(ph.copies.as_ref().map(phase_copies))
            .collect();
        let _ = writeln!(
            out,
            "  {:<9} {:>10} to {:<10}{}",
            ph.kind.name(),
            duration(ph.start_ns),
            duration(ph.end_ns),
            labels.iter().map(|l| format!("  {l}")).collect::<String>()
        );
    }
    if r.phases.len() > PHASES_SHOWN {
        let _ = writeln!(
            out,
            "  ... {} more in --json",
            r.phases.len() - PHASES_SHOWN
        );
    }
    if let Some(n) = &r.nvtx {
        let _ = writeln!(out, "  {}", nvtx_line(n));
    }
    if let Some(st) = &r.startup {
        let _ = writeln!(
            out,
            "  start-up {}: CUDA init {}, module loading and JIT {}, other driver calls {}, outside the driver {}",
            duration(st.ns),
            duration(st.init_ns),
            duration(st.module_ns),
            duration(st.other_driver_ns),
            duration(st.outside_driver_ns)
        );
    }
    let Some(s) = &r.steady_state else {
        let _ = writeln!(out, "  no steady state: no stretch of GPU work");
        return;
    };
    let mut line = format!(
        "  steady state {}: {} launches/s, host blocked in syncs {} of it",
        duration(s.ns),
        s.launches_per_s,
        percent(Some(s.blocked_share))
    );
    if let Some(idle) = s.gpu_idle_share {
        let causes: Vec<String> = s
            .idle
            .iter()
            .map(|i| format!("{} {} of it", i.cause.describe(), percent(Some(i.share))))
            .collect();
        let _ = write!(line, ", GPU idle {} of it", percent(Some(idle)));
        if !causes.is_empty() {
            let _ = write!(line, " ({})", causes.join(", "));
        }
        if let Some(copying) = s.gpu_transfer_share.filter(|&share| share > 0.0) {
            let _ = write!(line, ", copying {} of it", percent(Some(copying)));
        }
    }
    if let Some(late) = s.gpu_records_late {
        let _ = write!(
            line,
            ", GPU side left out: CUPTI's records came late for {} of a device's kernel time (a launch queue deeper than the shim waits for)",
            percent(Some(late))
        );
    }
    if let Some(m) = s.gpu_records_missing {
        let evidence: Vec<String> = [
            m.sm_active_share
                .map(|sm| format!("GPM saw the SMs active {} of it", percent(Some(sm)))),
            m.kernels_per_launch.map(|k| {
                format!(
                    "kernel records came for {} of a process's launches",
                    percent(Some(k))
                )
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        let _ = write!(
            line,
            "; CUPTI's records kept a kernel running {} of it, while {}: records of kernels that ran are missing, and the verdict takes NVML's utilisation",
            percent(Some(m.busy_share)),
            evidence.join(" and ")
        );
    }
    if let Some(step) = &s.step {
        let _ = write!(
            line,
            "; step {} ({})",
            duration(step.ns),
            match &step.source {
                StepSource::Nvtx(name) => format!("NVTX {}", Escaped(name)),
                StepSource::SyncPeriod => "sync period".to_string(),
            }
        );
    }
    let _ = writeln!(out, "{line}");
}

/// A phase's one-off copies: what they moved and the host's wait, said to be outside the
/// steady state the findings judge. A direction that moved under 1 MiB (a loss read back)
/// is left out.
fn phase_copies(c: &PhaseCopies) -> String {
    let moved: Vec<String> = [
        (c.htod_bytes, "to the device"),
        (c.dtoh_bytes, "to the host"),
    ]
    .iter()
    .filter(|(n, _)| *n >= 1 << 20)
    .map(|(n, to)| format!("{} {to}, ", bytes(*n)))
    .collect();
    format!(
        "one-off copies: {}the host blocked {} in them (not part of the steady state)",
        moved.concat(),
        duration(c.blocked_ns)
    )
}

/// What the program's NVTX ranges gave the phases.
fn nvtx_line(n: &crate::analysis::nvtx::Summary) -> String {
    if let Some(tool) = &n.other_tool {
        return format!(
            "NVTX: none recorded: NVTX_INJECTION64_PATH names another tool ({})",
            Escaped(tool)
        );
    }
    let quoted = |names: &[String]| {
        let q: Vec<String> = names
            .iter()
            .map(|n| format!("\"{}\"", Escaped(n)))
            .collect();
        q.join(", ")
    };
    let mut line = format!("NVTX: {} ranges of {} names", n.ranges, n.names);
    if !n.steps.is_empty() {
        let _ = write!(line, "; steps {}", quoted(&n.steps));
    }
    if !n.pauses.is_empty() {
        let _ = write!(line, ", pauses {}", quoted(&n.pauses));
    }
    if n.lost > 0 {
        let _ = write!(line, " ({} not recorded in full)", n.lost);
    }
    line
}

/// Process-devices shown in the GPU section; the rest are in `--json`.
const GPU_SECTIONS_SHOWN: usize = 8;

/// What the GPU itself reported, per process and device; or why nothing was collected.
fn gpu(out: &mut String, r: &Report) {
    if r.gpu.is_empty() {
        let _ = writeln!(out, "\nGPU: {}", crate::analysis::report::NO_GPU_DATA);
        return;
    }
    let _ = writeln!(
        out,
        "\nGPU (what the device reported: NVML telemetry, CUPTI activity)"
    );
    let mut shown = 0;
    for row in &r.gpu {
        let g = &row.gpu;
        for note in [("NVML", &g.nvml), ("CUPTI", &g.cupti)] {
            let state = if note.1.active { "on" } else { "off" };
            let _ = writeln!(
                out,
                "  pid {}  {}: {state}, {}",
                row.pid,
                note.0,
                Escaped(&note.1.note)
            );
        }
        for (dev, figures) in g.devices.iter().zip(&row.devices) {
            shown += 1;
            if shown > GPU_SECTIONS_SHOWN {
                continue;
            }
            gpu_device(out, dev, figures, g.cupti.active);
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

/// `cupti_on`: CUPTI recorded activity in the process (a device with none says so).
fn gpu_device(
    out: &mut String,
    dev: &gpuspy_format::gpu::Device,
    figures: &DeviceFigures,
    cupti_on: bool,
) {
    let mut head = vec![format!("GPU {}", dev.ordinal)];
    if let Some(f) = &dev.facts {
        if !f.name.is_empty() {
            head.push(Escaped(&f.name).to_string());
        }
        if !f.driver_version.is_empty() {
            head.push(format!("driver {}", Escaped(&f.driver_version)));
        }
        if let Some(v) = &figures.cuda_version {
            head.push(format!("CUDA {}", Escaped(v)));
        }
        let l = &f.pcie;
        if let (Some(g), Some(w), Some(gm), Some(wm)) =
            (l.gen_current, l.width_current, l.gen_max, l.width_max)
        {
            head.push(format!("PCIe gen{g} x{w} (max gen{gm} x{wm})"));
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
    }
    let _ = writeln!(out, "    {}", head.join("  ·  "));
    match (&dev.activity, &figures.activity) {
        (Some(a), Some(fig)) => activity(out, a, fig),
        // Sampled, a program with a few long kernels can launch none inside a slot.
        _ if cupti_on => {
            let _ = writeln!(
                out,
                "      activity: none recorded (no kernel, copy or memset began while CUPTI's activity kinds were on)"
            );
        }
        _ => {}
    }
    if let Some(t) = &dev.telemetry {
        let mut parts = vec![format!("{} samples every {} ms", t.samples, t.interval_ms)];
        if let Some(u) = t.gpu_util_pct {
            parts.push(format!(
                "util mean {:.0} %, max {:.0} % of each sample's time (a kernel running)",
                u.mean, u.max
            ));
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
        if let Some(gpm) = t.gpm.as_ref().filter(|g| !g.active) {
            let _ = writeln!(out, "      GPM: {}", Escaped(&gpm.note));
        }
    }
    for w in &figures.warnings {
        let _ = writeln!(out, "      ! {}", Escaped(w));
    }
}

/// How much of the GPU the kernels used (GPM), under a verdict that found nothing
/// blocking: the shares, and whether the run is memory-bandwidth-bound or leaves the
/// tensor pipes idle on matmul-heavy work.
fn gpu_use(out: &mut String, u: &GpuUse) {
    let s = &u.shares;
    let _ = writeln!(
        out,
        "  The kernels kept the SMs active {} of the span (occupancy {} of the warp slots), the tensor pipes {} of it, DRAM bandwidth {} of its peak (GPM).",
        percent(s.sm_active_share),
        percent(s.sm_occupancy_share),
        percent(s.tensor_active_share),
        percent(s.dram_bw_share)
    );
    if u.memory_bound {
        let _ = writeln!(
            out,
            "  Memory-bandwidth-bound (DRAM bandwidth at {} of its peak): moving fewer bytes (fused kernels, lower precision, data reused from cache) makes it faster, more FLOPs do not.",
            percent(s.dram_bw_share)
        );
    }
    if u.low_tensor_use {
        let _ = writeln!(
            out,
            "  Low tensor-pipe use: matmul kernels hold {} of kernel time, but the tensor pipes worked {} of the span. fp32 matmuls skip the tensor cores unless TF32 is allowed (torch.backends.cuda.matmul.allow_tf32 = True); bf16 or fp16 (autocast) use them fully.",
            percent(u.matmul_share),
            percent(s.tensor_active_share)
        );
    }
}

/// One device's CUPTI activity: busy share, gaps, copies, top kernels.
fn activity(out: &mut String, a: &gpuspy_format::gpu::Activity, fig: &ActivityFigures) {
    let gaps = fig.gaps.as_ref().map_or_else(
        || "none".to_string(),
        |g| {
            format!(
                "{}, p50 {}, p99 {}, longest < {}",
                g.count,
                duration(g.p50_ns),
                duration(g.p99_ns),
                duration(g.longest_below_ns)
            )
        },
    );
    let paused = if fig.pauses > 0 {
        format!(
            " (and {} pause(s) of 1 s or more, about {}, left out)",
            fig.pauses,
            duration(fig.pause_ns)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "      busy {} of {}{paused} ({} kernels, {} in kernels)  ·  idle gaps {}",
        percent(fig.busy_share),
        duration(fig.working_span_ns),
        a.kernels,
        duration(a.kernel_ns),
        gaps
    );
    let g = &fig.gpm;
    if g.sm_active_share.is_some() {
        let _ = writeln!(
            out,
            "      GPM: SM active {} of the span, occupancy {} of the warp slots, tensor pipes active {} of the span, DRAM bandwidth {} of its peak",
            percent(g.sm_active_share),
            percent(g.sm_occupancy_share),
            percent(g.tensor_active_share),
            percent(g.dram_bw_share)
        );
    }
    // Copies between host and device cross the PCIe link: their rate against its peak.
    for (c, cf) in a.copies.iter().zip(&fig.copies) {
        let of_peak = cf.pcie_peak_share.map_or_else(String::new, |s| {
            format!(", {} of the PCIe peak", whole_percent(s))
        });
        let at = cf
            .bytes_per_s
            .map_or_else(String::new, |r| format!(" at {}{of_peak}", rate(r)));
        let _ = writeln!(
            out,
            "      copies {} {}: {} x, {}{}",
            Escaped(&c.kind),
            Escaped(&c.memory),
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
    if a.lost_tail_ns > 0 {
        let _ = writeln!(
            out,
            "      {} recording period(s) lost the records of queued kernels: their last {} left unobserved",
            a.lost_tails,
            duration(a.lost_tail_ns)
        );
    }
    if !a.top_kernels.is_empty() {
        let _ = writeln!(
            out,
            "      top kernels: share of the time in kernels, calls, name"
        );
    }
    for (i, (k, share)) in a
        .top_kernels
        .iter()
        .zip(&fig.top_kernel_shares)
        .take(5)
        .enumerate()
    {
        let name: String = k.name.chars().take(90).collect();
        let _ = writeln!(
            out,
            "      {}. {:>6} {:>8} x  {}",
            i + 1,
            percent(*share),
            k.calls,
            Escaped(&name)
        );
    }
}

/// The hung calls and, for each communicator some members wait on, who never entered the
/// collective: first, since a hung job's other figures stop at its last flush.
fn hangs(out: &mut String, r: &Report) {
    if r.hangs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nHANG: {} call(s) in flight past GPUSPY_HANG_S",
        r.hangs.len()
    );
    for h in &r.hangs {
        let who = match h.rank {
            Some(rank) => format!("rank {rank} (pid {}, {})", h.pid, Escaped(&h.host)),
            None => format!("pid {} ({})", h.pid, Escaped(&h.host)),
        };
        let collective = match (&h.communicator, h.sequence) {
            (Some(c), Some(seq)) => {
                format!(", operation {seq} on communicator {}", Escaped(c))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {who}: thread {} in {} for {}{collective}",
            h.thread,
            Escaped(&h.api),
            duration(h.elapsed_ns)
        );
    }
    for w in &r.hang_waits {
        let behind: Vec<String> = w
            .behind
            .iter()
            .map(|(member, n)| format!("{} (issued {n})", Escaped(member)))
            .collect();
        let _ = writeln!(
            out,
            "  communicator {}: {} issued {} (operation {}) and wait in it; {} never entered it: the suspect{}",
            Escaped(&w.communicator),
            safe_text::join(&w.waiting, ", "),
            Escaped(w.collective.as_deref().unwrap_or("an operation")),
            w.sequence,
            behind.join(", "),
            if behind.len() == 1 { "" } else { "s" },
        );
    }
}

/// The report as text. Strings from dumps are escaped where they are written (`Escaped`),
/// so that a newline in one cannot start a line; the whole text is escaped again but for
/// its newlines, so that no control character reaches the terminal from a string written
/// without it.
pub fn render(r: &Report, per_process: bool) -> String {
    safe_text::lines(&tables(r, per_process))
}

fn tables(r: &Report, per_process: bool) -> String {
    let mut out = String::new();
    // Driver and sync times are summed over the processes, so their shares are of the
    // processes' wall time summed; the headline wall time is the job's span.
    let wall = r.process_wall_ns;
    let threads = r.threads;
    // The headline, what shares are "of", and that in a column's width.
    let (wall_label, of_wall) = if r.processes.len() > 1 {
        (
            format!(
                "wall {} (first start to last dump), process time {} (summed over processes)",
                duration(r.wall_ns),
                duration(wall)
            ),
            "process time",
        )
    } else {
        (format!("wall {}", duration(wall)), "wall")
    };
    let _ = writeln!(
        out,
        "gpuspy report: {} process{}, {} thread{}, {wall_label}, inside the driver {} ({} of {of_wall})",
        r.processes.len(),
        if r.processes.len() == 1 { "" } else { "es" },
        threads,
        if threads == 1 { "" } else { "s" },
        duration(r.driver_ns),
        percent(r.driver_share),
    );
    if r.simulated {
        let _ = writeln!(out, "{SIMULATED}");
    }
    if r.unrecorded_calls > 0 {
        let _ = writeln!(
            out,
            "note: INCOMPLETE DATA: {} call(s) from threads beyond the shim's limit were forwarded without being recorded: counts and times below are lower bounds",
            r.unrecorded_calls
        );
    }
    if r.saturated {
        let _ = writeln!(
            out,
            "note: some merged counts reached 2^64-1 and stopped there instead of wrapping around: figures shown as 18446744073709551615 are at least that"
        );
    }
    let incomplete = r.incomplete_processes;
    if incomplete > 0 {
        let _ = writeln!(
            out,
            "note: {incomplete} dump(s) come from a periodic flush (process killed or still running): data up to the last flush"
        );
    }
    mixed_runs(&mut out, r);
    // A hang first, then the diagnosis (README), then who the processes were.
    hangs(&mut out, r);
    if !r.apis.is_empty() {
        diagnosis(&mut out, r);
        phases(&mut out, r);
    }
    ranks(&mut out, r);
    if per_process {
        let _ = writeln!(out, "\nProcesses");
        let _ = writeln!(
            out,
            "  {:>8}  {:>10}  {:>10}  {:>10}  {:<22}  command",
            "pid", "wall", "driver", "calls", "ended"
        );
        for pr in &r.processes {
            let _ = writeln!(
                out,
                "  {:>8}  {:>10}  {:>10}  {:>10}  {:<22}  {}",
                pr.pid,
                duration(pr.wall_ns),
                duration(pr.driver_ns),
                pr.calls,
                ending(pr),
                safe_text::join(&pr.cmdline, " "),
            );
        }
    }
    if r.apis.is_empty() {
        let _ = writeln!(out, "\nNo driver calls recorded.");
        return out;
    }
    gpu(&mut out, r);
    let _ = writeln!(out, "\nDriver API calls (by total time)");
    let _ = writeln!(
        out,
        "  {:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "api", "calls", "total", "p50", "p99", "max", "errors"
    );
    for api in r.apis.rows() {
        let name = api.api;
        let _ = writeln!(
            out,
            "  {:<28} {} {:>7}",
            Escaped(name),
            latency_columns(&api.latency),
            api.errors,
        );
        if api.symbols.len() > 1 || api.symbols.iter().any(|s| s.symbol != name) {
            let variants: Vec<String> = api
                .symbols
                .iter()
                .map(|s| format!("{} {}", Escaped(s.symbol), s.count))
                .collect();
            let _ = writeln!(out, "    {}", variants.join(", "));
        }
    }
    if !r.syncs.is_empty() {
        let _ = writeln!(out, "\nImplicit synchronisations (host blocked)");
        let _ = writeln!(
            out,
            "  {:<22} {:>10} {:>10} {:>10} {:>10} {:>10} {:>16}",
            "cause",
            "calls",
            "blocked",
            "p50",
            "p99",
            "max",
            format!("of {of_wall}")
        );
        for s in &r.syncs {
            let _ = writeln!(
                out,
                "  {:<22} {} {:>16}",
                s.cause.name(),
                latency_columns(&s.latency),
                percent(s.wall_share),
            );
        }
    }
    if !r.copies.is_empty() {
        let _ = writeln!(out, "\nCopies (bytes by direction and host memory)");
        let _ = writeln!(
            out,
            "  {:<10} {:<10} {:>10} {:>12}",
            "direction", "host", "calls", "bytes"
        );
        for c in &r.copies {
            let _ = writeln!(
                out,
                "  {:<10} {:<10} {:>10} {:>12}",
                format!("{:?}", c.direction),
                c.host.name(),
                c.count,
                bytes(c.bytes)
            );
        }
    }
    if !r.nccl.ops.is_empty() {
        let _ = writeln!(
            out,
            "\nNCCL operations (host-side enqueue; {} communicator(s))",
            r.nccl.communicators.len()
        );
        let _ = writeln!(
            out,
            "  {:<14} {:<10} {:>10} {:>12}",
            "op", "datatype", "calls", "bytes"
        );
        for o in &r.nccl.ops {
            let _ = writeln!(
                out,
                "  {:<14} {:<10} {:>10} {:>12}",
                Escaped(&o.op),
                Escaped(&o.datatype),
                o.calls,
                bytes(o.bytes)
            );
        }
        collectives_table(&mut out, r);
        for c in &r.nccl.communicators {
            if let Some(d) = &c.disagreement {
                let odd: Vec<String> = d
                    .members
                    .iter()
                    .map(|m| format!("{} issued {}", Escaped(&m.member), m.operations))
                    .collect();
                let _ = writeln!(
                    out,
                    "  ! communicator {}: members disagree on the operations issued ({}; {} for the others): such a job hangs in its next collective",
                    Escaped(&c.key),
                    odd.join(", "),
                    d.common_operations
                );
            }
        }
    }
    let _ = writeln!(out, "\nTop time sinks");
    for (i, api) in r.apis.rows().take(5).enumerate() {
        let _ = writeln!(
            out,
            "  {}. {:<28} {:>10}  {:>6} of driver time, {:>6} of {of_wall}",
            i + 1,
            Escaped(api.api),
            duration(api.latency.total_ns),
            percent(api.driver_share),
            percent(api.wall_share),
        );
    }
    if !r.unwrapped_symbols.is_empty() {
        // Runtimes look up the whole driver table at start; the names are in --json.
        const SHOWN: usize = 8;
        let unwrapped = &r.unwrapped_symbols;
        let more = unwrapped.len().saturating_sub(SHOWN);
        let _ = writeln!(
            out,
            "\n{} driver entry points were looked up but are not wrapped (calls to them are not counted): {}{}",
            unwrapped.len(),
            safe_text::join(&unwrapped[..unwrapped.len().min(SHOWN)], ", "),
            if more > 0 { format!(", ... ({more} more in --json)") } else { String::new() },
        );
    }
    out
}

/// A note naming each run when the dumps come from several: their merged figures describe
/// none of them.
fn mixed_runs(out: &mut String, r: &Report) {
    if r.runs.len() < 2 {
        return;
    }
    let _ = writeln!(
        out,
        "note: these dumps come from {} runs, merged into this one report; report on one run's dumps to see it alone:",
        r.runs.len()
    );
    for (i, run) in r.runs.iter().enumerate() {
        let started = if i == 0 {
            "first".to_string()
        } else {
            format!("{} after the first", duration(run.after_first_ns))
        };
        let dirs: Vec<String> = run
            .dirs
            .iter()
            .map(|d| Escaped(&d.display().to_string()).to_string())
            .collect();
        let _ = writeln!(
            out,
            "  run {}: started {started}, {} process{}, {}, dumps in {}: {}",
            i + 1,
            run.processes,
            if run.processes == 1 { "" } else { "es" },
            run.token.as_ref().map_or_else(
                || "no run token".to_string(),
                |t| format!("run token {}", Escaped(t))
            ),
            dirs.join(", "),
            safe_text::join(&run.command, " ")
        );
    }
}

/// How a process ended: its last image's exit, exec or signal, or its last periodic flush.
fn ending(pr: &ProcessRow) -> String {
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
fn collectives_table(out: &mut String, r: &Report) {
    let timed: Vec<_> = r
        .nccl
        .collectives
        .iter()
        .filter(|c| c.kernel_ns > 0)
        .collect();
    if timed.is_empty() {
        return;
    }
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
        r.nccl
            .link_peak
            .as_ref()
            .map_or_else(String::new, |l| format!(
                "of the {} peak ({})",
                l.link,
                rate(l.bytes_per_s)
            ))
    );
    for c in &timed {
        let mut of_peak = c
            .busbw_peak_share
            .map_or_else(String::new, |s| format!("{:.1} %", s * 100.0));
        if c.saturated {
            of_peak += " (a sum over ranks saturated at 2^64-1)";
        }
        let _ = writeln!(
            out,
            "  {:<14} {:>8} {:>10} {:>12} {:>12} {:>12}  {of_peak}",
            Escaped(&c.op),
            c.kernels,
            duration(c.kernel_ns),
            duration(c.least_rank_kernel_ns),
            c.algbw_bytes_per_s.map_or_else(|| "-".into(), rate),
            c.busbw_bytes_per_s.map_or_else(|| "-".into(), rate),
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

    /// The report opens with the diagnosis, with one rank or several (README).
    #[test]
    fn the_diagnosis_comes_before_the_ranks() {
        let ddp = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-ddp-slow");
        let analysed =
            crate::analysis::analyse::load(&[ddp], crate::analysis::load::Runs::All).unwrap();
        let text = render(&Report::new(&analysed), true);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("no {s}: {text}"));
        assert!(at("\nVerdict: ") < at("\nRanks (2)"), "{text}");
        assert!(at("\nLayers, bottom up") < at("\nRanks (2)"), "{text}");
        assert!(at("\nRanks (2)") < at("\nProcesses\n"), "{text}");
    }

    #[test]
    fn a_busy_gpu_with_nothing_blocking_is_called_gpu_bound() {
        use crate::analysis::diagnose::synthetic::run;
        use crate::analysis::profile::Profile;
        use crate::analysis::report::Report;
        use gpuspy_format::gpu::{Activity, Device, Gpu};
        let render = |p: &Profile, per_process| {
            render(
                &Report::new(&crate::analysis::analyse::merged(p.clone())),
                per_process,
            )
        };
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
            render(&p, false)
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
        let none = render(&run(1.0).api("cuLaunchKernel", 10, 0.1, 0).build(), false);
        assert!(none.contains("The dumps have no GPU busy time"), "{none}");
        // CUPTI on, nothing recorded on the device: the GPU section says so.
        let mut unrecorded = Gpu {
            devices: vec![Device::default()],
            ..Gpu::default()
        };
        unrecorded.cupti.active = true;
        let p = run(1.0)
            .api("cuLaunchKernel", 10, 0.1, 0)
            .gpu(unrecorded)
            .build();
        let text = render(&p, false);
        assert!(text.contains("The dumps have no GPU busy time"), "{text}");
        assert!(
            text.contains("      activity: none recorded (no kernel"),
            "{text}"
        );
    }

    #[test]
    fn a_gpu_bound_verdict_says_how_much_of_the_gpu_the_kernels_used() {
        use crate::analysis::diagnose::synthetic::run;
        use crate::analysis::report::Report;
        use gpuspy_format::gpu::{Activity, Device, Gpu, KernelStat, Telemetry, TelemetrySeries};
        // 95 % busy over 1 s, one kernel; GPM reads the same in each of ten 100 ms slots.
        let render_with = |tensor: f32, dram: f32, kernel: &str| {
            let busy = 950_000_000;
            let gpu = Gpu {
                devices: vec![Device {
                    activity: Some(Activity {
                        first_unix_ns: 1,
                        last_unix_ns: 1 + 1_000_000_000,
                        busy_ns: busy,
                        kernel_ns: busy,
                        top_kernels: vec![KernelStat {
                            name: kernel.into(),
                            total_ns: busy,
                            ..KernelStat::default()
                        }],
                        ..Activity::default()
                    }),
                    telemetry: Some(Telemetry {
                        series: TelemetrySeries {
                            start_unix_ns: 1,
                            step_ms: 100,
                            sm_active_pct: vec![90.0; 10],
                            sm_occupancy_pct: vec![40.0; 10],
                            tensor_active_pct: vec![tensor; 10],
                            dram_bw_util_pct: vec![dram; 10],
                            ..TelemetrySeries::default()
                        },
                        ..Telemetry::default()
                    }),
                    ..Device::default()
                }],
                ..Gpu::default()
            };
            let p = run(1.0).api("cuLaunchKernel", 10, 0.1, 0).gpu(gpu).build();
            render(&Report::new(&crate::analysis::analyse::merged(p)), false)
        };
        let fp32 = render_with(0.0, 5.0, "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n");
        assert!(fp32.contains("Verdict: GPU-bound."), "{fp32}");
        assert!(fp32.contains("The kernels kept the SMs active 90.0 % of the span (occupancy 40.0 % of the warp slots), the tensor pipes 0.0 % of it, DRAM bandwidth 5.0 % of its peak (GPM)."), "{fp32}");
        assert!(fp32.contains("Low tensor-pipe use: matmul kernels hold 100.0 % of kernel time, but the tensor pipes worked 0.0 % of the span."), "{fp32}");
        assert!(!fp32.contains("Memory-bandwidth-bound"), "{fp32}");
        let elementwise = render_with(0.0, 86.0, "vectorized_elementwise_kernel");
        assert!(
            elementwise.contains("Memory-bandwidth-bound"),
            "{elementwise}"
        );
        assert!(
            !elementwise.contains("Low tensor-pipe use"),
            "{elementwise}"
        );
        let bf16 = render_with(93.0, 17.0, "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT");
        assert!(
            !bf16.contains("Memory-bandwidth-bound") && !bf16.contains("Low tensor-pipe use"),
            "{bf16}"
        );
        assert!(bf16.contains("GPM: SM active 90.0 % of the span, occupancy 40.0 % of the warp slots, tensor pipes active 93.0 % of the span, DRAM bandwidth 17.0 % of its peak"), "{bf16}");
    }
}

/// Every figure of the text report is in the serialised `Report`: the text renderer only
/// formats. Checked on every checked-in dump (tests/data).
///
/// A figure is a run of digits, with a decimal part if any, that stands as a word of its
/// own: not part of a name (`cuMemcpyHtoD_v2`, `gen5`, `x16`, `H200`) and not a list's
/// ordinal (`1.` at the start of a line). A figure with a unit (`22.9 s`, `3.0 MiB`,
/// `12.3 GB/s`) is found when the report holds a number that the same formatter renders
/// to that text; a bare figure when the report holds a number that renders to it as an
/// integer, with 0, 1 or 2 decimals, as a percentage (times 100) or after the unit
/// conversions the text makes (mW to W, B/s to GB/s). Numbers inside the report's strings
/// (summaries, notes, command lines, names) count, split into figures the same way, and so
/// does every list's length (counts such as "3 processes"), less the rows shown when the
/// text cuts a list short ("... (12 more in --json)"). Fixed wording is not a figure:
/// "2^64-1", "1 s or more".
#[cfg(test)]
mod numbers {
    use super::{bytes, duration, rate};
    use crate::analysis::report::Report;
    use serde_json::Value;
    use std::collections::BTreeSet;

    const UNITS: &[&str] = &[
        " ns", " us", " ms", " s", " B", " KiB", " MiB", " GiB", " TiB", " GB/s",
    ];
    const PROSE: &[&str] = &["2^64-1", "18446744073709551615", "1 s or more"];

    /// The figures of `text`, each with its unit if it has one.
    fn figures(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for line in text.lines() {
            let mut line = line.to_string();
            for prose in PROSE {
                line = line.replace(prose, " ");
            }
            let chars: Vec<char> = line.chars().collect();
            let word = |c: char| c.is_alphanumeric() || c == '_';
            let mut i = 0;
            while i < chars.len() {
                if !chars[i].is_ascii_digit()
                    || (i > 0 && (word(chars[i - 1]) || chars[i - 1] == '.'))
                {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                if i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit() {
                    i += 1;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                let number: String = chars[start..i].iter().collect();
                let rest: String = chars[i..].iter().collect();
                let ordinal =
                    rest.starts_with(". ") && chars[..start].iter().all(|c| c.is_whitespace());
                // A ratio: `1.00x`.
                let after = rest.strip_prefix('x').unwrap_or(&rest);
                if ordinal || after.chars().next().is_some_and(word) {
                    while i < chars.len() && word(chars[i]) {
                        i += 1;
                    }
                    continue;
                }
                let unit = UNITS.iter().find(|u| {
                    after.starts_with(*u) && !after[u.len()..].chars().next().is_some_and(word)
                });
                out.push(match unit {
                    Some(u) => format!("{number}{u}"),
                    None => number,
                });
            }
        }
        out
    }

    /// How the report's numbers can read in the text.
    fn renderings(key: &str, v: &Value, into: &mut BTreeSet<String>) {
        match v {
            Value::Number(n) => {
                let f = n.as_f64().unwrap_or_default();
                if let Some(u) = n.as_u64() {
                    into.insert(u.to_string());
                    into.insert(duration(u));
                    into.insert(bytes(u));
                    into.insert((u / 1000).to_string());
                    if key.ends_with("_ms") {
                        into.insert(format!("{u} ms"));
                    }
                }
                for x in [f, f * 100.0, f / 1e3] {
                    for digits in 0..=2 {
                        into.insert(format!("{x:.digits$}"));
                    }
                }
                into.insert(rate(f));
            }
            Value::String(s) => into.extend(figures(s)),
            Value::Array(a) => {
                for n in [
                    a.len(),
                    a.len().saturating_sub(8),
                    a.len().saturating_sub(16),
                ] {
                    into.insert(n.to_string());
                }
                for x in a {
                    renderings(key, x, into);
                }
            }
            Value::Object(o) => {
                for (k, x) in o {
                    renderings(k, x, into);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn figures_are_words_of_their_own_with_their_units() {
        assert_eq!(
            figures("report: 3 processes, wall 22.9 s, 15.4% cuMemcpy_v2 gen5 x16 1.00x (rank 1)\n  1. top 3.0 MiB at 12.5 GB/s 2^64-1"),
            ["3", "22.9 s", "15.4", "1.00", "1", "3.0 MiB", "12.5 GB/s"]
        );
    }

    #[test]
    fn every_figure_of_the_text_report_is_in_the_json_report() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let mut fixtures: Vec<_> = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("h200-")
            })
            .collect();
        fixtures.sort();
        assert!(fixtures.len() >= 6, "{fixtures:?}");
        // Each alone, and two runs recorded apart merged (the mixed-runs note).
        let mut cases: Vec<Vec<_>> = fixtures.iter().map(|f| vec![f.clone()]).collect();
        cases.push(vec![
            data.join("h200-ddp-slow"),
            data.join("h200-torch-pageable.json"),
        ]);
        for paths in cases {
            let analysed =
                crate::analysis::analyse::load(&paths, crate::analysis::load::Runs::All).unwrap();
            let report = Report::new(&analysed);
            let text = super::render(&report, true);
            let mut known = BTreeSet::new();
            renderings("", &serde_json::to_value(&report).unwrap(), &mut known);
            let all = figures(&text);
            assert!(all.len() > 100, "{paths:?}: {all:?}");
            assert_eq!(text.contains("runs, merged"), paths.len() > 1, "{text}");
            let missing: Vec<String> = all.into_iter().filter(|f| !known.contains(f)).collect();
            assert!(
                missing.is_empty(),
                "{paths:?}: figures of the text report not in the JSON report: {missing:?}\n{text}",
            );
        }
    }
}

/// The text report's units and shares, checked on every checked-in dump (tests/data): a
/// percentage has a space before its sign and names its whole, in the words after it
/// (" of wall") or, in a table, in the lines above its rows that hold no percentage (the
/// title and column headers); sizes are in binary units (KiB, MiB, GiB) in the verdict as in
/// the tables, and decimal units appear only in rates (GB/s).
#[cfg(test)]
mod style {
    use crate::analysis::report::Report;

    /// The lines with a percentage whose whole is not named.
    fn unlabelled_shares(text: &str) -> Vec<String> {
        let lines: Vec<&str> = text.lines().collect();
        let has_share = |l: &str| l.contains('%');
        let mut bad = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let chars: Vec<char> = line.chars().collect();
            for (j, &c) in chars.iter().enumerate() {
                if c != '%' {
                    continue;
                }
                let spaced = j >= 2 && chars[j - 1] == ' ' && chars[j - 2].is_ascii_digit();
                if !spaced {
                    bad.push(format!("unspaced: {line}"));
                    continue;
                }
                let after: String = chars[j + 1..].iter().collect();
                if after.starts_with(" of ") {
                    continue;
                }
                // A table row: skip the rows above it, then read the title and headers.
                let header: Vec<&str> = lines[..i]
                    .iter()
                    .rev()
                    .skip_while(|l| has_share(l))
                    .take_while(|l| !l.trim().is_empty() && !has_share(l))
                    .copied()
                    .collect();
                if !header.iter().any(|h| h.contains(" of ")) {
                    bad.push(format!("whole not named: {line}"));
                }
            }
        }
        bad
    }

    /// Sizes written in decimal units (`0.04 GB`, `12 MB`): not rates.
    fn decimal_sizes(text: &str) -> Vec<String> {
        let mut bad = Vec::new();
        for unit in [" kB", " KB", " MB", " GB", " TB"] {
            for (at, _) in text.match_indices(unit) {
                let before = text[..at].chars().last();
                let after = text[at + unit.len()..].chars().next();
                if before.is_some_and(|c| c.is_ascii_digit()) && after != Some('/') {
                    bad.push(text[at.saturating_sub(12)..at + unit.len()].to_string());
                }
            }
        }
        bad
    }

    #[test]
    fn the_checks_find_what_they_look_for() {
        let text = "a 12.5% b\n  copies 3 x 0.04 GB at 7.3 GB/s\nbusy 5.0 % of wall\n\nTable, shares of steady\n  x  1.0 %\n  y  2.0 %\n\nbare\n  z  3.0 %\n";
        assert_eq!(
            unlabelled_shares(text),
            ["unspaced: a 12.5% b", "whole not named:   z  3.0 %"]
        );
        let sizes = decimal_sizes(text);
        assert!(
            sizes.len() == 1 && sizes[0].ends_with(" 0.04 GB"),
            "{sizes:?}"
        );
    }

    #[test]
    fn every_share_names_its_whole_and_sizes_are_binary() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let mut checked = 0;
        for entry in std::fs::read_dir(&data).unwrap() {
            let fixture = entry.unwrap().path();
            if !fixture
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("h200-")
            {
                continue;
            }
            let analysed = crate::analysis::analyse::load(
                std::slice::from_ref(&fixture),
                crate::analysis::load::Runs::All,
            )
            .unwrap();
            let text = super::render(&Report::new(&analysed), true);
            assert!(text.contains(" %"), "{}", fixture.display());
            let bad = unlabelled_shares(&text);
            assert!(bad.is_empty(), "{}: {bad:#?}\n{text}", fixture.display());
            let bad = decimal_sizes(&text);
            assert!(bad.is_empty(), "{}: {bad:?}\n{text}", fixture.display());
            checked += 1;
        }
        assert!(checked >= 6);
    }
}
