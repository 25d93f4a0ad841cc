//! `analyse`, the second stage of the pipeline (docs/design.md): every judgement, made once.
//! Once per process (its own diagnosis, which the per-rank comparison needs) and once per
//! job (the diagnosis, its verdict, GPU-bound or not, the device warnings). The report and
//! the gates (`check`, `diff`) take their judgements from here, never from the rules
//! directly.

use crate::analysis::diagnose::{diagnose, Diagnosis};
use crate::analysis::gpm::{self, GpuUse};
use crate::analysis::load;
use crate::analysis::phases::{PhaseKind, TimeAxis};
use crate::analysis::profile::{ProcessInfo, Profile};
use crate::analysis::rule::Input;
use crate::analysis::rules::{gpu_shared, pcie_link_degraded};
use gpuspy_format::gpu::Device;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The share of the GPU's working span with no kernel running at or under which a run
/// with no warning is called GPU-bound: only faster (or fewer) kernels make it faster.
pub const GPU_BOUND_IDLE: f64 = 0.1;

/// The share of the steady state the GPU may idle, with no warning to explain it, before
/// the verdict says so ("GPU idle 45 % of the steady state; cause not identified").
pub const UNEXPLAINED_IDLE: f64 = 0.25;

/// One process's own diagnosis, made on its dumps alone.
#[derive(Debug, Clone)]
pub struct ProcessVerdict {
    pub pid: u32,
    pub host: String,
    pub start_unix_ns: u64,
    pub rank: Option<u32>,
    /// Its verdict, if it had a warning.
    pub verdict: Option<&'static str>,
    /// Every finding of that diagnosis, warnings and below (`rank_verdicts` compares them).
    pub findings: Vec<&'static str>,
}

impl ProcessVerdict {
    /// Whether this is the verdict of `p` (same host, pid and start).
    pub fn of(&self, p: &ProcessInfo) -> bool {
        (self.pid, self.start_unix_ns, &self.host) == (p.pid, p.start_unix_ns, &p.host)
    }
}

/// A loaded profile with every judgement made on it.
pub struct Analysed {
    pub profile: Profile,
    /// One per process, in the order of `profile.processes`.
    pub processes: Vec<ProcessVerdict>,
    pub job: Job,
}

/// What the job's GPU busy share is a share of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BusyBase {
    /// The steady state's device time, where the timelines have its GPU side.
    SteadyState,
    /// The activity span less its pauses of 1 s or more (`Activity::working_span_ns`).
    WorkingSpan,
    /// The steady state by NVML's utilisation, where CUPTI's records came late or are
    /// missing (`SteadyState::records_incomplete`).
    SteadyStateByNvml,
}

impl BusyBase {
    pub fn describe(self) -> &'static str {
        match self {
            BusyBase::SteadyState => "the steady state's GPU time",
            BusyBase::WorkingSpan => "the GPU's activity span",
            BusyBase::SteadyStateByNvml => {
                "the steady state by NVML's utilisation (CUPTI's records incomplete)"
            }
        }
    }
}

/// The judgements on the whole job.
pub struct Job {
    pub diagnosis: Diagnosis,
    /// Kernel busy share, over every device with CUPTI activity, of `gpu_busy_of`.
    pub gpu_busy_share: Option<f64>,
    pub gpu_busy_of: Option<BusyBase>,
    /// No warning, and the GPU was busy: see `GPU_BOUND_IDLE` (judged on the steady state
    /// where the timelines have its GPU side).
    pub gpu_bound: bool,
    /// The phases and the steady state, from the dumps' timelines; None for dumps without.
    pub time_axis: Option<TimeAxis>,
    /// The steady state's GPU idle share, when it is `UNEXPLAINED_IDLE` or more and no
    /// warning explains it.
    pub unexplained_idle: Option<f64>,
    /// How much of the GPU the kernels used, from GPM; None without it.
    pub gpu_use: Option<GpuUse>,
}

impl Analysed {
    /// The verdict of `p`'s own diagnosis.
    pub fn process_verdict(&self, p: &ProcessInfo) -> Option<&ProcessVerdict> {
        self.processes.iter().find(|v| v.of(p))
    }
}

/// A note when the run's data is incomplete: calls the shim forwarded without recording
/// them (threads beyond its limit). The assertions still hold on what was recorded, but
/// counts and times are lower bounds, so a pass is weaker than it looks.
pub fn incomplete(a: &Analysed, run: &str) -> Option<String> {
    let n = a.profile.unrecorded_calls();
    (n > 0).then(|| {
        format!(
            "{}incomplete data: {n} call(s) from threads beyond the shim's limit were forwarded without being recorded; counts and times are lower bounds",
            if run.is_empty() { String::new() } else { format!("{run}: ") }
        )
    })
}

/// Loads the dumps under `paths` of the `runs` asked for and analyses them: each process
/// as its dumps are read, then the merged job.
pub fn load(paths: &[PathBuf], runs: load::Runs) -> anyhow::Result<Analysed> {
    let mut processes: Vec<ProcessVerdict> = Vec::new();
    let profile = load::profile(paths, runs, |one| {
        let Some(me) = one.processes.first() else {
            return;
        };
        let d = diagnose(&Input::new(one));
        let mine = ProcessVerdict {
            pid: me.pid,
            host: me.host.clone(),
            start_unix_ns: me.start_unix_ns,
            rank: me.rank,
            verdict: d.verdict().map(|f| f.id),
            findings: d.findings.iter().map(|f| f.id).collect(),
        };
        // Another image of a process already read: the first image with a warning decides,
        // as the images are merged.
        match processes.iter_mut().find(|v| v.of(me)) {
            Some(v) => v.verdict = v.verdict.or(mine.verdict),
            None => processes.push(mine),
        }
    })?;
    Ok(Analysed {
        job: job(&profile),
        profile,
        processes,
    })
}

/// A profile merged from others (a test's synthetic
/// profile), analysed as a job: its processes' own verdicts are not known.
#[cfg(test)]
pub fn merged(profile: Profile) -> Analysed {
    Analysed {
        job: job(&profile),
        profile,
        processes: Vec::new(),
    }
}

/// The job-level judgements on a (merged) profile.
pub fn job(p: &Profile) -> Job {
    let input = Input::new(p);
    let diagnosis = diagnose(&input);
    let idle = p.gpu_idle_share();
    let time_axis = input.axis;
    let steady = time_axis.as_ref().and_then(|a| a.steady.as_ref());
    // With records missing, the GPU side's idle is the periods CUPTI left empty.
    let steady_gpu = steady
        .filter(|s| s.records_missing.is_none())
        .and_then(|s| s.gpu.as_ref());
    let steady_idle = steady_gpu.map(|g| crate::units::share(g.idle_ns(), g.ns));
    // Late or missing records make CUPTI's busy time too low everywhere; NVML's sampling
    // does not depend on them.
    let nvml_busy = time_axis
        .as_ref()
        .filter(|_| steady.is_some_and(|s| s.records_incomplete()))
        .and_then(|a| nvml_steady_busy(p, a));
    let quiet = diagnosis.verdict().is_none();
    let (busy, busy_of) = match (steady_gpu, nvml_busy, idle) {
        (Some(g), _, _) => (
            Some(crate::units::share(g.busy_ns, g.ns)),
            Some(BusyBase::SteadyState),
        ),
        (None, Some(b), _) => (Some(b), Some(BusyBase::SteadyStateByNvml)),
        (None, None, Some(i)) => (Some(1.0 - i), Some(BusyBase::WorkingSpan)),
        (None, None, None) => (None, None),
    };
    Job {
        gpu_bound: quiet
            && steady_idle
                .or(nvml_busy.map(|b| 1.0 - b))
                .or(idle)
                .is_some_and(|i| i <= GPU_BOUND_IDLE),
        gpu_busy_share: busy,
        gpu_busy_of: busy_of,
        unexplained_idle: steady_idle.filter(|&i| quiet && i >= UNEXPLAINED_IDLE),
        time_axis,
        gpu_use: gpm::gpu_use(p),
        diagnosis,
    }
}

/// NVML's utilisation (the share of each sample's time a kernel ran) over the job's steady
/// phases, the mean over the devices that sampled it; None without its series.
fn nvml_steady_busy(p: &Profile, a: &TimeAxis) -> Option<f64> {
    let spans: Vec<(u64, u64)> = a
        .phases
        .iter()
        .filter(|ph| ph.kind == PhaseKind::Steady)
        .map(|ph| (ph.start_unix_ns, ph.end_unix_ns))
        .collect();
    let device_means: Vec<f64> = p
        .gpu_devices()
        .filter_map(|(_, d)| {
            let s = &d.telemetry.as_ref()?.series;
            Some(s.mean_over(&s.gpu_util_pct, &spans)? / 100.0)
        })
        .collect();
    (!device_means.is_empty()).then(|| device_means.iter().sum::<f64>() / device_means.len() as f64)
}

/// One run of a comparison or a gate: a dump, or a directory of one run's dumps.
pub struct Run {
    pub name: String,
    pub analysed: Analysed,
}

/// The runs under `paths` (`load::run_paths`), each loaded and analysed.
pub fn runs(paths: &[PathBuf]) -> anyhow::Result<Vec<Run>> {
    load::run_paths(paths)?
        .into_iter()
        .map(|run_path| {
            Ok(Run {
                name: run_path.display().to_string(),
                analysed: load(std::slice::from_ref(&run_path), load::Runs::All)?,
            })
        })
        .collect()
}

/// Per-rank imbalance: for each measure, the largest rank's value against the median,
/// with the rank that has it. Empty outside a distributed job.
pub fn rank_imbalance(p: &Profile) -> Vec<Imbalance> {
    let ranked: Vec<&ProcessInfo> = p.processes.iter().filter(|p| p.rank.is_some()).collect();
    if ranked.len() < 2 {
        return Vec::new();
    }
    let measures: [(&'static str, Measure); 4] = [
        ("launches", |p| p.launches as f64),
        ("blocked_ns", |p| p.blocked_ns as f64),
        ("steady_ns", |p| p.steady_ns as f64),
        ("copied_bytes", |p| p.copied_bytes as f64),
    ];
    measures
        .iter()
        .map(|&(measure, value)| {
            let median = crate::analysis::stats::median(ranked.iter().map(|p| value(p)).collect());
            let top = ranked
                .iter()
                .max_by(|a, b| value(a).total_cmp(&value(b)))
                .copied();
            let max = top.map_or(0.0, value);
            Imbalance {
                measure,
                max,
                median,
                ratio: if median > 0.0 { max / median } else { 0.0 },
                rank: top.and_then(|p| p.rank).unwrap_or_default(),
            }
        })
        .collect()
}

/// One per-process quantity compared across ranks.
type Measure = fn(&ProcessInfo) -> f64;

/// How far the largest rank is from the median rank on one measure.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Imbalance {
    pub measure: &'static str,
    pub max: f64,
    pub median: f64,
    /// max / median; 0 when the median is 0.
    pub ratio: f64,
    /// The rank with the largest value.
    pub rank: u32,
}

/// Ranks whose own verdict differs from the most common verdict among the ranks, as
/// `(rank, verdict)`; the common verdict first. Empty outside a distributed job.
///
/// A difference in severity alone is not a difference. Ranks staged alike still differ a
/// little (a sleep that overshot, a preempted thread), so a problem that sits near the
/// warning level (`WARNING_IMPACT`) is a warning on some ranks and informational on
/// others; naming those ranks would send the user looking for a difference that is not
/// there. So a rank without a warning agrees when its own findings include the common
/// verdict, and a rank with a warning agrees with ranks that have none when at least
/// half of them find the same problem below the warning level. Two different warnings
/// are a difference, however close their impacts.
pub fn rank_verdicts(
    processes: &[ProcessVerdict],
) -> (Option<&'static str>, Vec<(u32, Option<&'static str>)>) {
    let ranked: Vec<&ProcessVerdict> = processes.iter().filter(|p| p.rank.is_some()).collect();
    let mut tally: BTreeMap<Option<&'static str>, usize> = BTreeMap::new();
    for p in &ranked {
        *tally.entry(p.verdict).or_default() += 1;
    }
    let common = tally.iter().max_by_key(|(_, n)| **n).and_then(|(v, _)| *v);
    let holders: Vec<&&ProcessVerdict> = ranked.iter().filter(|p| p.verdict == common).collect();
    let agrees = |p: &ProcessVerdict| match (p.verdict, common) {
        (None, None) => true,
        (None, Some(common)) => p.findings.contains(&common),
        (Some(mine), None) => {
            2 * holders
                .iter()
                .filter(|h| h.findings.contains(&mine))
                .count()
                >= holders.len()
        }
        (Some(mine), Some(common)) => mine == common,
    };
    let mut differ: Vec<(u32, Option<&'static str>)> = ranked
        .iter()
        .filter(|p| !agrees(p))
        .map(|p| (p.rank.unwrap_or_default(), p.verdict))
        .collect();
    differ.sort_unstable();
    (common, differ)
}

/// What is wrong with one device as its own facts and telemetry show it, one line each: a
/// PCIe link below its maximum, other processes, clock events other than idling, ECC errors
/// during the run. Shown beside the device; the job's findings weigh the same facts against
/// the run's time. The first two use the tests of the pcie-link-degraded and gpu-shared
/// rules themselves, so a device is flagged exactly when its rule looks at it.
pub fn device_warnings(dev: &Device) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(f) = &dev.facts {
        if let Some(b) = pcie_link_degraded::below_max(&f.pcie) {
            warnings.push(format!(
                "PCIe link below its maximum (gen{} x{} of gen{} x{})",
                b.gen, b.width, b.gen_max, b.width_max
            ));
        }
        let seen = gpu_shared::others_seen(f, dev.telemetry.as_ref());
        if seen > 0 {
            let pids: Vec<String> = f
                .other_processes
                .iter()
                .map(|o| o.pid.to_string())
                .collect();
            warnings.push(if pids.is_empty() {
                format!("other processes on the GPU: {seen} seen in NVML samples")
            } else {
                format!("other processes on the GPU: pid {}", pids.join(", "))
            });
        }
    }
    if let Some(t) = &dev.telemetry {
        let throttles: Vec<String> = t
            .clock_events
            .iter()
            .filter(|e| e.reason != "gpu-idle")
            .map(|e| format!("{} in {} of {} samples", e.reason, e.samples, t.samples))
            .collect();
        if !throttles.is_empty() {
            warnings.push(format!("clock events: {}", throttles.join(", ")));
        }
        let (corrected, uncorrected) = t.new_ecc_errors();
        if corrected + uncorrected > 0 {
            warnings.push(format!(
                "ECC errors during the run: {corrected} corrected, {uncorrected} uncorrected"
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks 0.., each with its verdict and its findings.
    fn ranks(each: &[(Option<&'static str>, &[&'static str])]) -> Vec<ProcessVerdict> {
        each.iter()
            .enumerate()
            .map(|(rank, &(verdict, findings))| ProcessVerdict {
                pid: 100 + rank as u32,
                host: "test".into(),
                start_unix_ns: 0,
                rank: Some(rank as u32),
                verdict,
                findings: findings.to_vec(),
            })
            .collect()
    }

    #[test]
    fn a_rank_differs_by_its_problem_not_by_its_severity() {
        const SYNC: &str = "sync-stalled";
        const LAUNCH: &str = "launch-bound";
        // Rank 1 alone is launch-bound: named.
        let one = ranks(&[
            (Some(SYNC), &[SYNC]),
            (Some(LAUNCH), &[LAUNCH, SYNC]),
            (Some(SYNC), &[SYNC]),
        ]);
        assert_eq!(rank_verdicts(&one), (Some(SYNC), vec![(1, Some(LAUNCH))]));
        // Ranks whose sync stall is just under the warning level, or just over it while
        // most are under: the same diagnosis.
        let under = ranks(&[
            (Some(SYNC), &[SYNC]),
            (None, &[SYNC]),
            (Some(SYNC), &[SYNC]),
        ]);
        assert_eq!(rank_verdicts(&under), (Some(SYNC), vec![]));
        let over = ranks(&[(None, &[SYNC]), (Some(SYNC), &[SYNC]), (None, &[SYNC])]);
        assert_eq!(rank_verdicts(&over), (None, vec![]));
        // A rank without the common problem at all, or with a warning the others lack, is
        // named.
        let clean = ranks(&[(Some(SYNC), &[SYNC]), (None, &[]), (Some(SYNC), &[SYNC])]);
        assert_eq!(rank_verdicts(&clean), (Some(SYNC), vec![(1, None)]));
        let alone = ranks(&[(None, &[SYNC]), (Some(LAUNCH), &[LAUNCH]), (None, &[])]);
        assert_eq!(rank_verdicts(&alone), (None, vec![(1, Some(LAUNCH))]));
        // Outside a distributed job: nothing.
        assert_eq!(rank_verdicts(&ranks(&[])), (None, vec![]));
    }
}
