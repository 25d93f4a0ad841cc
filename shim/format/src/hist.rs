//! The latency histogram layout: log-linear, like HdrHistogram with 16 sub-buckets per
//! power of two.
//!
//! Values are nanoseconds. Values below 32 get a bucket each; above that every power of two
//! `[2^e, 2^(e+1))` is split into 16 equal buckets, so a bucket is at most 1/16 (6.25 %) of
//! its lower bound wide. The buckets cover every u64, so recording needs no clamp: the
//! index is computed from `leading_zeros` in a handful of instructions, which is why the
//! shim uses this layout rather than the hdrhistogram crate on its hot path.

use serde::{Deserialize, Serialize};

/// log2 of the number of sub-buckets per power of two.
pub const SUB_BUCKET_BITS: u32 = 4;
const SUB_BUCKETS: u64 = 1 << SUB_BUCKET_BITS;
/// Buckets cover `[0, 2^MAX_EXPONENT)` ns: all of u64.
pub const MAX_EXPONENT: u32 = 64;
/// Number of buckets: exponents SUB_BUCKET_BITS..MAX_EXPONENT plus the linear range below.
pub const BUCKETS: usize = ((MAX_EXPONENT - SUB_BUCKET_BITS + 1) as usize) << SUB_BUCKET_BITS;

/// The bucket that holds `ns`.
#[inline(always)]
pub fn bucket_index(v: u64) -> usize {
    if v < SUB_BUCKETS {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let sub = (v >> (exp - SUB_BUCKET_BITS)) & (SUB_BUCKETS - 1);
    (((exp - SUB_BUCKET_BITS + 1) as usize) << SUB_BUCKET_BITS) | sub as usize
}

/// `[low, high)` in ns of bucket `index`.
pub fn bucket_bounds(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return (index, index + 1);
    }
    let exp = (index >> SUB_BUCKET_BITS) as u32 + SUB_BUCKET_BITS - 1;
    let sub = index & (SUB_BUCKETS - 1);
    let width = 1u64 << (exp - SUB_BUCKET_BITS);
    let low = (SUB_BUCKETS + sub) * width;
    // The last bucket's end, 2^64, saturates to u64::MAX.
    (low, low.saturating_add(width))
}

/// The layout a dump was written with; readers refuse any other.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Layout {
    pub kind: String,
    pub unit: String,
    pub sub_bucket_bits: u32,
    pub max_exponent: u32,
    pub buckets: usize,
}

impl Layout {
    pub fn current() -> Layout {
        Layout {
            kind: "log-linear".into(),
            unit: "ns".into(),
            sub_bucket_bits: SUB_BUCKET_BITS,
            max_exponent: MAX_EXPONENT,
            buckets: BUCKETS,
        }
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if *self == Layout::current() {
            Ok(())
        } else {
            Err(format!(
                "histogram layout {self:?} is not the one this gpuspy reads"
            ))
        }
    }
}

/// A histogram stored sparsely: `[bucket index, count]` pairs for non-empty buckets, ascending.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Histogram(pub Vec<(u32, u64)>);

impl Histogram {
    pub fn from_dense(counts: &[u64]) -> Histogram {
        Histogram(
            counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (i as u32, c))
                .collect(),
        )
    }

    pub fn to_dense(&self) -> Vec<u64> {
        let mut dense = vec![0; BUCKETS];
        self.add_to(&mut dense);
        dense
    }

    /// Adds this histogram's counts into a dense array of `BUCKETS` counters (saturating).
    pub fn add_to(&self, dense: &mut [u64]) {
        for &(i, c) in &self.0 {
            if let Some(slot) = dense.get_mut(i as usize) {
                add_count(slot, c);
            }
        }
    }

    /// Adds another histogram's counts into this one, keeping it sparse: a reader holds one
    /// histogram per API family, and a dense one would be 7.8 KB each. Returns whether a
    /// count saturated (see `add_count`).
    pub fn merge(&mut self, other: &Histogram) -> bool {
        let mut clipped = false;
        let mut all: Vec<(u32, u64)> = self.0.drain(..).chain(other.0.iter().copied()).collect();
        all.sort_by_key(|&(i, _)| i);
        for (i, c) in all {
            match self.0.last_mut() {
                Some((j, n)) if *j == i => clipped |= add_count(n, c),
                _ => self.0.push((i, c)),
            }
        }
        clipped
    }

    pub fn count(&self) -> u64 {
        self.0.iter().fold(0, |n, &(_, c)| n.saturating_add(c))
    }

    /// The value at quantile `q` (0..=1): see `quantile`.
    pub fn quantile(&self, q: f64, max: u64) -> u64 {
        quantile_of(self.0.iter().map(|&(i, c)| (i as usize, c)), q, max)
    }

    /// Values of at least `min` (by their bucket's lower bound): how many, and their
    /// approximate sum from bucket midpoints.
    pub fn at_least(&self, min: u64) -> (u64, u64) {
        self.0
            .iter()
            .map(|&(i, n)| (bucket_bounds(i as usize), n))
            .filter(|&((low, _), _)| low >= min)
            .fold((0, 0), |(count, sum), ((low, high), n)| {
                (count + n, sum + n * (low / 2 + high / 2))
            })
    }

    pub(crate) fn check(&self, layout: &Layout) -> Result<(), String> {
        let in_range = self.0.iter().all(|&(i, _)| (i as usize) < layout.buckets);
        let ascending = self.0.windows(2).all(|w| w[0].0 < w[1].0);
        if in_range && ascending {
            Ok(())
        } else {
            Err("malformed dump (histogram buckets out of range or out of order)".into())
        }
    }
}

/// Adds `n` to a count, saturating at u64::MAX instead of wrapping (two dumps of 2^63 calls
/// merged would read 0). Returns whether it saturated, so that a report can say so.
pub fn add_count(total: &mut u64, n: u64) -> bool {
    let (sum, overflowed) = total.overflowing_add(n);
    *total = if overflowed { u64::MAX } else { sum };
    overflowed
}

/// The value at quantile `q` (0..=1) of a dense histogram: the midpoint of the bucket that
/// holds it, capped at `max` (the exact largest value seen), or 0 for an empty histogram.
pub fn quantile(dense: &[u64], q: f64, max: u64) -> u64 {
    quantile_of(dense.iter().copied().enumerate(), q, max)
}

/// `quantile` over `(bucket index, count)` pairs in ascending bucket order.
fn quantile_of(buckets: impl Iterator<Item = (usize, u64)> + Clone, q: f64, max: u64) -> u64 {
    let total = buckets.clone().fold(0u64, |n, (_, c)| n.saturating_add(c));
    if total == 0 {
        return 0;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0u64;
    for (i, c) in buckets {
        seen = seen.saturating_add(c);
        if seen >= rank {
            let (low, high) = bucket_bounds(i);
            return (low + (high - 1 - low) / 2).min(max);
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_get_exact_buckets() {
        for v in 0..32 {
            assert_eq!(bucket_index(v), v as usize);
            assert_eq!(bucket_bounds(v as usize), (v, v + 1));
        }
    }

    #[test]
    fn every_value_lies_inside_its_bucket() {
        let mut v = 1u64;
        while v < 1 << 62 {
            for probe in [v - 1, v, v + 1, v + v / 3] {
                let (low, high) = bucket_bounds(bucket_index(probe));
                assert!(
                    low <= probe && probe < high,
                    "{probe} not in [{low},{high})"
                );
                // Relative width stays within 1/16 of the lower bound.
                assert!(
                    low < 32 || (high - low) * 16 <= low,
                    "bucket [{low},{high}) too wide"
                );
            }
            v *= 2;
        }
    }

    #[test]
    fn buckets_are_contiguous_and_cover_the_range() {
        let mut expected_low = 0;
        for i in 0..BUCKETS {
            let (low, high) = bucket_bounds(i);
            assert_eq!(low, expected_low, "gap before bucket {i}");
            assert_eq!(bucket_index(low), i);
            assert_eq!(bucket_index(high - 1), i);
            expected_low = high;
        }
        assert_eq!(expected_low, u64::MAX);
        assert_eq!(bucket_index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn a_2ms_delay_lands_in_the_2ms_bucket() {
        let (low, high) = bucket_bounds(bucket_index(2_000_000));
        assert!(low <= 2_000_000 && 2_000_000 < high);
        assert!(high - low <= 2_000_000 / 16);
    }

    #[test]
    fn quantiles_pick_the_right_bucket() {
        let mut dense = vec![0; BUCKETS];
        dense[bucket_index(1_000)] = 99;
        dense[bucket_index(1_000_000)] = 1;
        let p50 = quantile(&dense, 0.5, 1_000_000);
        let p99 = quantile(&dense, 0.99, 1_000_000);
        let p100 = quantile(&dense, 1.0, 1_000_000);
        assert!((960..=1_040).contains(&p50), "p50 {p50}");
        assert!((960..=1_040).contains(&p99), "p99 {p99}");
        assert!((960_000..=1_000_000).contains(&p100), "max {p100}");
        assert_eq!(quantile(&vec![0; BUCKETS], 0.5, 0), 0);
    }

    #[test]
    fn sparse_round_trip() {
        let mut dense = vec![0; BUCKETS];
        dense[3] = 5;
        dense[400] = 7;
        let sparse = Histogram::from_dense(&dense);
        assert_eq!(sparse.0, vec![(3, 5), (400, 7)]);
        assert_eq!(sparse.count(), 12);
        assert_eq!(sparse.to_dense(), dense);
    }

    #[test]
    fn merging_keeps_buckets_sparse_and_saturates() {
        let mut a = Histogram(vec![(3, 5), (400, u64::MAX - 1)]);
        assert!(!a.merge(&Histogram(vec![(1, 2), (3, 1)])));
        assert_eq!(a.0, vec![(1, 2), (3, 6), (400, u64::MAX - 1)]);
        assert!(a.merge(&Histogram(vec![(400, 2), (900, 1)])));
        assert_eq!(a.0, vec![(1, 2), (3, 6), (400, u64::MAX), (900, 1)]);
        assert_eq!(a.count(), u64::MAX);
        let dense = a.to_dense();
        assert_eq!(a.quantile(0.5, u64::MAX), quantile(&dense, 0.5, u64::MAX));
    }
}
