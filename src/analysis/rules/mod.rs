//! The rules, one unit struct per file with its documentation and tests. The order here is
//! the order of `gpuspy explain --list` and of the README's rule table.

mod alloc_churn;
mod clocks_throttled;
mod comm_bound;
mod ecc;
pub(crate) mod framework;
pub(crate) mod gpu_data;
pub(crate) mod gpu_shared;
mod h2d_bound;
mod input_starved;
mod launch_bound;
mod pageable_memcpy;
pub(crate) mod pcie_link_degraded;
mod rank_straggler;
mod recurrence;
mod slow_startup;
mod small_grid;
mod sync_stalled;
mod um_fault_heavy;

use crate::analysis::rule::Rule;

pub static ALL: &[&dyn Rule] = &[
    &pcie_link_degraded::PcieLinkDegraded,
    &clocks_throttled::ClocksThrottled,
    &ecc::EccOff,
    &ecc::EccErrors,
    &slow_startup::SlowStartup,
    &gpu_shared::GpuShared,
    &pageable_memcpy::PageableMemcpy,
    &h2d_bound::H2dBound,
    &um_fault_heavy::UmFaultHeavy,
    &alloc_churn::AllocChurn,
    &launch_bound::LaunchBound,
    &small_grid::SmallGrid,
    &input_starved::InputStarved,
    &rank_straggler::RankStraggler,
    &sync_stalled::SyncStalled,
    &comm_bound::CommBound,
];

pub fn find(id: &str) -> Option<&'static dyn Rule> {
    ALL.iter().copied().find(|r| r.id() == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_docs_have_a_summary_line() {
        let mut ids: Vec<&str> = ALL.iter().map(|r| r.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL.len());
        for rule in ALL {
            let first = rule.doc().lines().next().unwrap_or_default();
            assert!(
                first.len() > 20 && !first.starts_with('#'),
                "{}: {first}",
                rule.id()
            );
        }
    }
}
