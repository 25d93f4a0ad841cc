use crate::analysis::profile::ProcessInfo;
use crate::analysis::rule::{ms, Finding, Input, Layer, Outcome, Rule};
use crate::analysis::stats::median;
use crate::units::share;

/// One rank holds the others back.
pub struct RankStraggler;

/// The other ranks must wait this many points more of their time than the straggler.
const MIN_EXTRA_WAIT: f64 = 0.10;

impl Rule for RankStraggler {
    fn id(&self) -> &'static str {
        "rank-straggler"
    }
    fn layer(&self) -> Layer {
        Layer::Pipeline
    }
    fn doc(&self) -> &'static str {
        "One rank of a distributed job is slower than the others, which wait for it at every collective.

A collective finishes only when the last rank arrives, so the ranks that arrive early wait
and the straggler waits least. How long each rank waited comes from the GPU where CUPTI
measured it: the time of its NCCL kernels, which spin until every rank has arrived. The
rule then names the rank whose NCCL kernels took the smallest share of its steady-state
time, when the median of the other ranks' shares is 10 points or more above it. Without
NCCL kernel time for every rank it falls back to the host (a heuristic): the share of
steady-state time each rank's host spent blocked in synchronisations, which only shows the
wait when the program synchronises (a `.item()` each step). The evidence also gives the
straggler's host-busy share and its launches against the median, to tell host work (data
loading, preprocessing) from extra GPU work. Neither measure needs a cross-node clock.

Impact: the extra share of time the other ranks wait, which balancing the straggler would
give back to the whole job.

Fix: look at the straggler's own report (`gpuspy report` on its dump). For data loading,
raise `num_workers` and use `persistent_workers=True` and prefetching on that node. For a
shared or throttled GPU, check its node. For uneven work, balance the shards or batch
sizes."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let ranked: Vec<&ProcessInfo> = p.processes.iter().filter(|x| x.rank.is_some()).collect();
        if ranked.len() < 2 {
            return Outcome::Clear;
        }
        // Waiting inside NCCL kernels where every rank has it, else blocked in syncs.
        let gpu_waits: Option<Vec<u64>> = ranked.iter().map(|x| x.nccl_kernel_ns()).collect();
        let gpu_measured = gpu_waits
            .as_ref()
            .is_some_and(|w| w.iter().any(|&ns| ns > 0));
        let waits: Vec<f64> = match gpu_waits {
            Some(ns) if gpu_measured => ranked
                .iter()
                .zip(ns)
                .map(|(x, ns)| share(ns, x.steady_ns))
                .collect(),
            _ => ranked.iter().map(|x| x.wait_share()).collect(),
        };
        let Some(at) = (0..ranked.len()).min_by(|&a, &b| waits[a].total_cmp(&waits[b])) else {
            return Outcome::Clear;
        };
        let straggler = ranked[at];
        let others = || (0..ranked.len()).filter(move |&i| i != at);
        let others_wait = median(others().map(|i| waits[i]).collect());
        let extra = others_wait - waits[at];
        if extra < MIN_EXTRA_WAIT {
            return Outcome::Clear;
        }
        let launches_median = median(others().map(|i| ranked[i].launches as f64).collect());
        let rank = straggler.rank.unwrap_or_default();
        let host_busy = 1.0 - straggler.wait_share();
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        let waited_in = if gpu_measured {
            "NCCL kernels (GPU)"
        } else {
            "synchronisations (host)"
        };
        let f = Finding::new(
            self,
            share((extra * 1000.0) as u64, 1000),
            format!(
                "The other ranks wait for rank {rank} ({}, pid {}). They wait a median of {:.0} % of their time in {waited_in}. Rank {rank} waits {:.0} % of its own.",
                straggler.host,
                straggler.pid,
                others_wait * 100.0,
                waits[at] * 100.0
            ),
            "Read the straggler's own report; raise num_workers/persistent_workers/prefetching on its node; check its GPU and node; balance shards.",
        )
        .evidence("rank", rank)
        .evidence("host", straggler.host.clone())
        .evidence("pid", straggler.pid)
        .evidence("measured_on", if gpu_measured { "gpu" } else { "host" })
        .evidence("wait_share", round(waits[at]))
        .evidence("others_median_wait_share", round(others_wait))
        .evidence("host_busy_share", round(host_busy))
        .evidence("steady_ms", ms(straggler.steady_ns))
        .evidence("launches", straggler.launches)
        .evidence("others_median_launches", launches_median);
        Outcome::Found(if gpu_measured { f } else { f.heuristic() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::profile::Profile;
    use crate::analysis::rules::gpu_data::fixtures::nccl_only;

    #[test]
    fn the_rank_that_waits_least_is_named() {
        // Ranks 0, 2, 3 wait 60 % of 10 s for rank 1, which waits 5 %.
        let p = run(0.0)
            .rank(0, 10.0, 6.0)
            .rank(1, 10.0, 0.5)
            .rank(2, 10.0, 6.1)
            .rank(3, 10.0, 5.9)
            .build();
        let Outcome::Found(f) = RankStraggler.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert_eq!(f.evidence["rank"], 1);
        assert!((f.impact - 0.55).abs() < 0.01, "{}", f.impact);
        assert!(f.summary.contains("The other ranks wait for rank 1 ("));
        assert!(f.heuristic);
    }

    /// Gives the process of `rank` CUPTI activity with `nccl_s` of all-reduce kernels.
    fn nccl_time(p: &mut Profile, rank: u32, nccl_s: f64) {
        let x = p
            .processes
            .iter_mut()
            .find(|x| x.rank == Some(rank))
            .unwrap();
        x.gpu = Some(Box::new(nccl_only(&[(
            "AllReduce",
            1593,
            (nccl_s * 1e9) as u64,
        )])));
    }

    #[test]
    fn with_nccl_kernel_time_the_gpu_names_the_rank() {
        // The H200 DDP run: no rank blocks much on the host, but rank 0's all-reduce
        // kernels spin 4.7 s of 14.5 s waiting for rank 1 (0.44 s of 15.2 s).
        let mut p = run(0.0).rank(0, 14.5, 0.6).rank(1, 15.2, 0.5).build();
        nccl_time(&mut p, 0, 4.71);
        nccl_time(&mut p, 1, 0.44);
        let Outcome::Found(f) = RankStraggler.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert_eq!(f.evidence["rank"], 1);
        assert_eq!(f.evidence["measured_on"], "gpu");
        assert!(!f.heuristic);
        assert!(
            (f.impact - (4.71 / 14.5 - 0.44 / 15.2)).abs() < 0.01,
            "{}",
            f.impact
        );
        assert!(f.summary.contains("in NCCL kernels (GPU)"), "{}", f.summary);
        // Without CUPTI on one rank the host decides, and says it is a heuristic.
        let mut partial = run(0.0).rank(0, 10.0, 6.0).rank(1, 10.0, 0.5).build();
        nccl_time(&mut partial, 0, 4.0);
        let Outcome::Found(f) = RankStraggler.check(&Input::new(&partial)) else {
            panic!("no finding")
        };
        assert_eq!(
            (f.evidence["measured_on"].as_str(), f.heuristic),
            (Some("host"), true)
        );
    }

    #[test]
    fn an_even_job_names_nobody() {
        let p = run(0.0)
            .rank(0, 10.0, 3.0)
            .rank(1, 10.0, 2.6)
            .rank(2, 10.0, 3.1)
            .rank(3, 10.0, 2.9)
            .build();
        assert!(matches!(
            RankStraggler.check(&Input::new(&p)),
            Outcome::Clear
        ));
        assert!(matches!(
            RankStraggler.check(&Input::new(&run(1.0).build())),
            Outcome::Clear
        ));
    }
}
