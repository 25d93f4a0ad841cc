//! `gpuspy report --html FILE` and `gpuspy diff --html FILE`: one self-contained HTML file.
//! The page embeds the part of the `Report` it shows as JSON and draws it with the inline
//! script `html/view.js` (hand-written SVG, no library, no network); this file only picks
//! what the page shows and escapes it. docs/views.md says what each chart reads.

use crate::analysis::diagnose::LayerStatus;
use crate::analysis::diff::DiffReport;
use crate::analysis::report::{
    ActivityFigures, ApiRow, CopyRow, ProcessRow, RankVerdicts, Report, SyncRow, SIMULATED,
};
use crate::analysis::rule::Finding;
use crate::analysis::timelines::{DeviceSeries, Grid, Series, Timelines};
use gpuspy_format::gpu::{GpuCopy, KernelStat, SourceStatus};
use serde::Serialize;
use std::io::Write;

const STYLE: &str = include_str!("html/view.css");
const SCRIPT: &str = include_str!("html/view.js");

/// APIs with a latency histogram on the page, by total time; the rest are in `--json`.
pub const API_HISTOGRAMS: usize = 12;
/// Process-devices whose kernels and copies the page lists (as the text report).
pub const DEVICES_SHOWN: usize = 8;
/// Processes whose NVML and CUPTI status the page lists; the text report lists all.
const SOURCES_SHOWN: usize = 8;

/// What the report page shows: the `Report`'s sections, less the raw per-device data that
/// `--json` carries (1,000 ranks' NVML and CUPTI objects are 14 MB; their series are in
/// `timelines`).
#[derive(Serialize)]
struct ReportPage<'r> {
    /// The SIMULATED line, for a run against the fake driver.
    simulated: Option<&'static str>,
    processes: &'r [ProcessRow],
    wall_ns: u64,
    process_wall_ns: u64,
    driver_ns: u64,
    driver_share: Option<f64>,
    verdict: Option<&'static str>,
    verdict_text: Option<&'r str>,
    findings: &'r [Finding],
    layers: &'r [LayerStatus],
    apis: Vec<ApiRow<'r>>,
    syncs: &'r [SyncRow],
    copies: &'r [CopyRow],
    rank_imbalance: &'r [crate::analysis::analyse::Imbalance],
    rank_verdicts: &'r RankVerdicts,
    devices: Vec<DevicePage<'r>>,
    /// The GPU section: what NVML and CUPTI did in each process (the first
    /// `SOURCES_SHOWN`, of `gpu_processes`), or why no dump has GPU-side data.
    gpu_sources: Vec<SourcesPage<'r>>,
    gpu_processes: usize,
    no_gpu_data: Option<&'static str>,
    timelines: Option<TimelinesPage<'r>>,
    /// The job's phases, `start_ns`/`end_ns` from `start_unix_ns`.
    start_unix_ns: u64,
    phases: &'r [crate::analysis::report::PhaseRow],
}

/// The timelines less the sampled events, which only the trace shows.
#[derive(Serialize)]
struct TimelinesPage<'r> {
    grid: Grid,
    job: &'r Series,
    process_grid: Grid,
    processes: Vec<ProcessPage<'r>>,
}

#[derive(Serialize)]
struct ProcessPage<'r> {
    pid: u32,
    rank: Option<u32>,
    series: &'r Series,
    devices: &'r [DeviceSeries],
}

impl<'r> TimelinesPage<'r> {
    fn of(t: &'r Timelines) -> TimelinesPage<'r> {
        TimelinesPage {
            grid: t.grid,
            job: &t.job,
            process_grid: t.process_grid,
            processes: t
                .processes
                .iter()
                .map(|p| ProcessPage {
                    pid: p.pid,
                    rank: p.rank,
                    series: &p.series,
                    devices: &p.devices,
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct DevicePage<'r> {
    pid: u32,
    rank: Option<u32>,
    ordinal: u32,
    name: Option<&'r str>,
    busy_share: Option<f64>,
    top_kernels: Vec<KernelPage<'r>>,
    copies: &'r [GpuCopy],
    warnings: &'r [String],
}

#[derive(Serialize)]
struct SourcesPage<'r> {
    pid: u32,
    rank: Option<u32>,
    nvml: &'r SourceStatus,
    cupti: &'r SourceStatus,
}

#[derive(Serialize)]
struct KernelPage<'r> {
    #[serde(flatten)]
    kernel: &'r KernelStat,
    share: Option<f64>,
}

fn devices<'r>(r: &'r Report) -> Vec<DevicePage<'r>> {
    r.gpu
        .iter()
        .flat_map(|row| {
            row.gpu
                .devices
                .iter()
                .zip(&row.devices)
                .map(move |(dev, fig)| {
                    let activity = dev.activity.as_ref();
                    let figures: Option<&ActivityFigures> = fig.activity.as_ref();
                    DevicePage {
                        pid: row.pid,
                        rank: row.rank,
                        ordinal: dev.ordinal,
                        name: dev.facts.as_ref().map(|f| f.name.as_str()),
                        busy_share: figures.and_then(|f| f.busy_share),
                        top_kernels: activity
                            .map(|a| {
                                a.top_kernels
                                    .iter()
                                    .zip(figures.map_or(&[][..], |f| &f.top_kernel_shares))
                                    .map(|(kernel, &share)| KernelPage { kernel, share })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        copies: activity.map_or(&[], |a| &a.copies),
                        warnings: &fig.warnings,
                    }
                })
        })
        .take(DEVICES_SHOWN)
        .collect()
}

/// Writes the report page.
pub fn write_report(r: &Report, out: impl Write) -> anyhow::Result<()> {
    let page = ReportPage {
        simulated: r.simulated.then_some(SIMULATED),
        processes: &r.processes,
        wall_ns: r.wall_ns,
        process_wall_ns: r.process_wall_ns,
        driver_ns: r.driver_ns,
        driver_share: r.driver_share,
        verdict: r.verdict,
        verdict_text: r.verdict_text.as_deref(),
        findings: &r.findings,
        layers: &r.layers,
        apis: r.apis.rows().take(API_HISTOGRAMS).collect(),
        syncs: &r.syncs,
        copies: &r.copies,
        rank_imbalance: &r.rank_imbalance,
        rank_verdicts: &r.rank_verdicts,
        devices: devices(r),
        gpu_sources: r
            .gpu
            .iter()
            .take(SOURCES_SHOWN)
            .map(|row| SourcesPage {
                pid: row.pid,
                rank: row.rank,
                nvml: &row.gpu.nvml,
                cupti: &row.gpu.cupti,
            })
            .collect(),
        gpu_processes: r.gpu.len(),
        no_gpu_data: r
            .gpu
            .is_empty()
            .then_some(crate::analysis::report::NO_GPU_DATA),
        timelines: r.timelines.as_ref().map(TimelinesPage::of),
        start_unix_ns: r.start_unix_ns,
        phases: &r.phases,
    };
    // In the title too, which every tab and window list shows, script or not.
    let title = if r.simulated {
        "gpuspy report: SIMULATED"
    } else {
        "gpuspy report"
    };
    write_page(title, "report", &page, out)
}

/// Writes the diff page: the significance results and, per API compared, both sides'
/// latency histograms.
pub fn write_diff(d: &DiffReport, out: impl Write) -> anyhow::Result<()> {
    write_page("gpuspy diff", "diff", d, out)
}

#[derive(Serialize)]
struct Data<'p, P: Serialize> {
    kind: &'static str,
    page: &'p P,
}

fn write_page(
    title: &str,
    kind: &'static str,
    page: &impl Serialize,
    mut out: impl Write,
) -> anyhow::Result<()> {
    let json = serde_json::to_string(&Data { kind, page })?;
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<main id=\"app\"><noscript>This report draws its charts with JavaScript.</noscript></main>\n<script id=\"data\" type=\"application/json\">{}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        script_safe(&json)
    )?;
    Ok(())
}

/// JSON made safe inside a `<script>` element: a `<` only as the JSON escape `\u003c`, so
/// no string in the report (a kernel name, a command line) can close the element.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_report_string_can_close_the_script_element() {
        let json = serde_json::to_string(&"</script><script>alert(1)</script>").unwrap();
        let safe = script_safe(&json);
        assert!(!safe.contains('<'), "{safe}");
        let back: String = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, "</script><script>alert(1)</script>");
    }
}
