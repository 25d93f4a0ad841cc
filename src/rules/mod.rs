//! The rules, one unit struct per file with its documentation and tests. The order here is
//! the order of `gpuspy explain --list` and of the README's rule table.

mod alloc_churn;
mod gpu_side;
mod h2d_bound;
mod launch_bound;
mod pageable_memcpy;
mod rank_straggler;
mod slow_startup;
mod sync_stalled;

use crate::diagnose::Rule;

pub static ALL: &[&dyn Rule] = &[
    &gpu_side::PcieLinkDegraded,
    &gpu_side::ClocksThrottled,
    &gpu_side::EccOff,
    &gpu_side::EccErrors,
    &slow_startup::SlowStartup,
    &gpu_side::GpuShared,
    &pageable_memcpy::PageableMemcpy,
    &h2d_bound::H2dBound,
    &gpu_side::UmFaultHeavy,
    &alloc_churn::AllocChurn,
    &launch_bound::LaunchBound,
    &gpu_side::SmallGrid,
    &gpu_side::InputStarved,
    &rank_straggler::RankStraggler,
    &sync_stalled::SyncStalled,
    &gpu_side::CommBound,
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
