use crate::diagnose::{ms, share, Finding, Layer, Outcome, Rule};
use crate::profile::{ProcessInfo, Profile};

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

Evidence: for each rank, the share of its steady-state time its host spent blocked in
synchronisations. A collective finishes only when the last rank arrives, so the ranks that
arrive early wait (their syncs take longer) and the straggler waits least. The rule names
the rank that waits least when the median of the other ranks waits 10 points or more
longer. It also reports how busy that rank's host was and how many kernels it launched
against the median, so that host work (data loading, preprocessing) can be told from
extra GPU work. This needs no cross-node clock. It is a heuristic until the GPU time of
the NCCL kernels is measured.

Impact: the extra share of time the other ranks wait, which balancing the straggler would
give back to the whole job.

Fix: look at the straggler's own report (`gpuspy report` on its dump). For data loading,
raise `num_workers` and use `persistent_workers=True` and prefetching on that node. For a
shared or throttled GPU, check its node. For uneven work, balance the shards or batch
sizes."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let ranked: Vec<&ProcessInfo> = p.processes.iter().filter(|x| x.rank.is_some()).collect();
        if ranked.len() < 2 {
            return Outcome::Clear;
        }
        let Some(straggler) = ranked
            .iter()
            .copied()
            .min_by(|a, b| a.wait_share().total_cmp(&b.wait_share()))
        else {
            return Outcome::Clear;
        };
        let median = |values: Vec<f64>| -> f64 {
            let mut v = values;
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or_default()
        };
        let others: Vec<&&ProcessInfo> = ranked
            .iter()
            .filter(|x| !std::ptr::eq(**x, straggler))
            .collect();
        let others_wait = median(others.iter().map(|x| x.wait_share()).collect());
        let extra = others_wait - straggler.wait_share();
        if extra < MIN_EXTRA_WAIT {
            return Outcome::Clear;
        }
        let launches_median = median(others.iter().map(|x| x.launches as f64).collect());
        let rank = straggler.rank.unwrap_or_default();
        let host_busy = 1.0 - straggler.wait_share();
        Outcome::Found(
            Finding::new(
                self,
                share((extra * 1000.0) as u64, 1000),
                format!(
                    "rank {rank} ({}, pid {}) waits {:.0} % of its time, the other {} ranks a median {:.0} %: they wait for rank {rank}",
                    straggler.host,
                    straggler.pid,
                    straggler.wait_share() * 100.0,
                    others.len(),
                    others_wait * 100.0
                ),
                "Read the straggler's own report; raise num_workers/persistent_workers/prefetching on its node; check its GPU and node; balance shards.",
            )
            .evidence("rank", rank)
            .evidence("host", straggler.host.clone())
            .evidence("pid", straggler.pid)
            .evidence("wait_share", share(straggler.blocked_ns, straggler.steady_ns))
            .evidence("others_median_wait_share", (others_wait * 1000.0).round() / 1000.0)
            .evidence("host_busy_share", (host_busy * 1000.0).round() / 1000.0)
            .evidence("steady_ms", ms(straggler.steady_ns))
            .evidence("launches", straggler.launches)
            .evidence("others_median_launches", launches_median)
            .heuristic(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::synthetic::run;

    #[test]
    fn the_rank_that_waits_least_is_named() {
        // Ranks 0, 2, 3 wait 60 % of 10 s for rank 1, which waits 5 %.
        let p = run(0.0)
            .rank(0, 10.0, 6.0)
            .rank(1, 10.0, 0.5)
            .rank(2, 10.0, 6.1)
            .rank(3, 10.0, 5.9)
            .build();
        let Outcome::Found(f) = RankStraggler.check(&p) else {
            panic!("no finding")
        };
        assert_eq!(f.evidence["rank"], 1);
        assert!((f.impact - 0.55).abs() < 0.01, "{}", f.impact);
        assert!(f.summary.contains("they wait for rank 1"));
    }

    #[test]
    fn an_even_job_names_nobody() {
        let p = run(0.0)
            .rank(0, 10.0, 3.0)
            .rank(1, 10.0, 2.6)
            .rank(2, 10.0, 3.1)
            .rank(3, 10.0, 2.9)
            .build();
        assert!(matches!(RankStraggler.check(&p), Outcome::Clear));
        assert!(matches!(
            RankStraggler.check(&run(1.0).build()),
            Outcome::Clear
        ));
    }
}
