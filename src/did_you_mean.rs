//! "Did you mean": the closest known name to a misspelt one, for budgets' API names and
//! `gpuspy explain`'s rule ids.

/// The known name most like `name` (Jaro-Winkler, case-insensitive), where it is close
/// enough (0.8) to be what was meant rather than a guess.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(&lower, &k.to_ascii_lowercase()), k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|&(similarity, _)| similarity >= 0.8)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_name_is_suggested_and_a_far_one_is_not() {
        let known = ["sync-stalled", "launch-bound", "pageable-memcpy"];
        assert_eq!(closest("sync-stall", known), Some("sync-stalled"));
        assert_eq!(closest("SYNC_STALLED", known), Some("sync-stalled"));
        assert_eq!(closest("zzz", known), None);
    }
}
