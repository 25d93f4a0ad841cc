//! NCCL collectives on the GPU: kernel time from CUPTI, bytes from the interposed calls, and
//! the two bandwidths nccl-tests reports (docs/multi-rank.md#bandwidth).

use crate::analysis::profile::Profile;
use gpuspy_format::hist::add_count;
use gpuspy_format::prom::nccl_factors as factors;
use std::collections::BTreeMap;

/// One collective over every rank of the profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Collective {
    /// As in the kernel names and the dump's `nccl.ops`: `AllReduce`, `AllGather`, ...
    pub op: String,
    pub kernels: u64,
    /// Kernel time summed over ranks; it includes each rank's wait for the others.
    pub kernel_ns: u64,
    /// The least kernel time of one rank: the rank that arrived last waited least, so its
    /// time is the closest to the transfer itself.
    pub least_rank_kernel_ns: u64,
    /// That least time once per rank that ran the collective: its kernel time net of the
    /// waiting for a straggler.
    pub transfer_ns: u64,
    /// The size nccl-tests calls S (the whole buffer, for all-gather and reduce-scatter),
    /// summed over ranks.
    pub bytes: u64,
    /// The largest communicator's size.
    pub ranks: u32,
    /// One rank's S over the least kernel time of a rank, bytes per second.
    pub algbw: Option<f64>,
    /// The algorithm bandwidth scaled to what each link carried: comparable with the link's
    /// peak whatever the rank count.
    pub busbw: Option<f64>,
    /// A count or time summed over the ranks reached u64::MAX and stopped there.
    pub saturated: bool,
}

/// Every collective that had GPU time (CUPTI) or calls, by name.
pub fn collectives(p: &Profile) -> Vec<Collective> {
    let ranks = p
        .communicators
        .values()
        .map(|c| c.nranks)
        .max()
        .unwrap_or(1);
    #[derive(Default)]
    struct Tally {
        kernels: u64,
        kernel_ns: u64,
        /// Kernel time of each process that ran this collective.
        per_rank_ns: Vec<u64>,
        rank_bytes: u64,
        saturated: bool,
    }
    let mut by_op: BTreeMap<String, Tally> = BTreeMap::new();
    for process in &p.processes {
        let mut mine: BTreeMap<&str, u64> = BTreeMap::new();
        let activities = process.gpu.iter().flat_map(|g| &g.devices);
        for c in activities
            .filter_map(|d| d.activity.as_ref())
            .flat_map(|a| &a.collectives)
        {
            let t = by_op.entry(c.op.clone()).or_default();
            t.saturated |= add_count(&mut t.kernels, c.calls)
                | add_count(&mut t.kernel_ns, c.total_ns)
                | add_count(mine.entry(&c.op).or_default(), c.total_ns);
        }
        for (op, ns) in mine {
            by_op
                .entry(op.to_string())
                .or_default()
                .per_rank_ns
                .push(ns);
        }
    }
    for ((op, _), &(_, bytes)) in &p.nccl_ops {
        let t = by_op.entry(op.clone()).or_default();
        t.saturated |= add_count(&mut t.rank_bytes, bytes);
    }
    by_op
        .into_iter()
        .map(|(op, t)| {
            let f = factors(&op, ranks);
            let bytes = f.map_or(t.rank_bytes, |(_, s)| (t.rank_bytes as f64 * s) as u64);
            let least = t.per_rank_ns.iter().copied().min().unwrap_or(0);
            // Collectives are symmetric: with every rank timed, one rank moved this share.
            let one_rank = bytes as f64 / t.per_rank_ns.len().max(1) as f64;
            let algbw =
                (least > 0 && f.is_some() && bytes > 0).then(|| one_rank * 1e9 / least as f64);
            Collective {
                busbw: algbw.zip(f).map(|(a, (bus, _))| a * bus),
                op,
                kernels: t.kernels,
                kernel_ns: t.kernel_ns,
                least_rank_kernel_ns: least,
                transfer_ns: least.saturating_mul(t.per_rank_ns.len() as u64),
                bytes,
                ranks,
                algbw,
                saturated: t.saturated,
            }
        })
        .collect()
}

/// The slowest link the ranks' GPUs reported, one direction, bytes per second: NVLink
/// (active links times their speed) where a GPU has it, else its PCIe link.
pub fn link_peak(p: &Profile) -> Option<(f64, &'static str)> {
    p.gpu_devices()
        .filter_map(|(_, d)| d.facts.as_ref())
        .filter_map(
            |f| match f.nvlink.as_ref().and_then(|l| l.peak_bytes_per_s()) {
                Some(peak) => Some((peak, "NVLink")),
                None => f.pcie.peak_bytes_per_s().map(|peak| (peak, "PCIe")),
            },
        )
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;
    use crate::analysis::rules::gpu_data::fixtures::*;
    use gpuspy_format::gpu::{CollectiveKernels, NvLink};

    const GIB: u64 = 1 << 30;

    /// Two ranks, each with `ns` of all-reduce kernels that moved 100 GiB.
    fn two_ranks(ns: u64) -> Profile {
        let mut a = activity(5.0);
        a.collectives = vec![CollectiveKernels {
            op: "AllReduce".into(),
            calls: 1593,
            total_ns: ns,
        }];
        let mut facts = h200();
        facts.nvlink = Some(NvLink {
            active_links: 18,
            link_mbytes_per_s: Some(26_562),
        });
        let mut p = run(10.0).gpu(gpu(facts, None, Some(a))).build();
        let one = p.processes[0].clone();
        p.processes.push(one);
        p.nccl_ops
            .insert(("AllReduce".into(), "float32".into()), (3186, 200 * GIB));
        p.communicators.entry("c1".into()).or_default().nranks = 2;
        p
    }

    #[test]
    fn bus_bandwidth_follows_nccl_tests() {
        // 100 GiB per rank in 0.5 s of kernels per rank: algbw 214.7 GB/s; with two ranks
        // an all-reduce moves 2(n-1)/n = 1 times that over each link.
        let mut p = two_ranks(500_000_000);
        // The rank that arrived first waited 1.5 s more: the other rank's time counts.
        p.processes[0].gpu.as_mut().unwrap().devices[0]
            .activity
            .as_mut()
            .unwrap()
            .collectives[0]
            .total_ns = 2_000_000_000;
        let c = collectives(&p);
        assert_eq!(c.len(), 1);
        let c = &c[0];
        assert_eq!((c.op.as_str(), c.kernels, c.ranks), ("AllReduce", 3186, 2));
        assert_eq!(
            (c.bytes, c.kernel_ns, c.least_rank_kernel_ns),
            (200 * GIB, 2_500_000_000, 500_000_000)
        );
        let algbw = 100.0 * GIB as f64 / 0.5;
        assert!((c.algbw.unwrap() - algbw).abs() < 1.0);
        assert!((c.busbw.unwrap() - algbw).abs() < 1.0);
        let (peak, link) = link_peak(&two_ranks(1)).unwrap();
        assert_eq!((peak, link), (18.0 * 26_562e6, "NVLink"));
    }

    #[test]
    fn gathers_count_the_whole_buffer_and_unknown_ops_have_no_bandwidth() {
        assert_eq!(factors("AllGather", 8), Some((7.0 / 8.0, 8.0)));
        assert_eq!(factors("AllReduce", 4), Some((1.5, 1.0)));
        assert_eq!(factors("SendRecv", 4), None);
        // NCCL's generic kernels serve several collectives: their time is listed, and the
        // all-reduce calls keep their bytes but have no kernel time of their own.
        let mut p = two_ranks(1_000);
        for rank in &mut p.processes {
            rank.gpu.as_mut().unwrap().devices[0]
                .activity
                .as_mut()
                .unwrap()
                .collectives[0]
                .op = "Generic".into();
        }
        let c = collectives(&p);
        let generic = c.iter().find(|c| c.op == "Generic").unwrap();
        assert_eq!(
            (generic.kernels, generic.algbw, generic.busbw),
            (3186, None, None)
        );
        let reduce = c.iter().find(|c| c.op == "AllReduce").unwrap();
        assert_eq!(
            (reduce.kernels, reduce.bytes, reduce.algbw),
            (0, 200 * GIB, None)
        );
    }

    #[test]
    fn sums_over_ranks_saturate_and_say_so() {
        let c = collectives(&two_ranks(1 << 63));
        assert_eq!(
            (c[0].kernel_ns, c[0].transfer_ns, c[0].saturated),
            (u64::MAX, u64::MAX, true)
        );
        assert!(!collectives(&two_ranks(1_000))[0].saturated);
    }
}
