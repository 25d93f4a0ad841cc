//! Two-sample tests for `gpuspy diff`: Mann-Whitney U on two latency histograms (every
//! call a sample, ties within a bucket), and on small sets of per-run values; and the
//! median the cross-rank comparisons use.

use statrs::distribution::{ContinuousCDF, Normal};

/// A test's two-sided p-value and its direction: positive when the second sample tends to
/// be larger.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Test {
    pub p_value: f64,
    pub direction: f64,
}

/// The median (the upper one of an even count), 0 for no values.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn normal_tail(z: f64) -> f64 {
    match Normal::new(0.0, 1.0) {
        Ok(n) => 2.0 * (1.0 - n.cdf(z.abs())),
        Err(_) => 1.0,
    }
}

/// Mann-Whitney U between two histograms over the same buckets, with mid-ranks for ties and
/// the tie-corrected normal approximation (the samples are calls, so thousands).
pub fn histograms(a: &[u64], b: &[u64]) -> Test {
    // In f64 throughout: merged counts may be saturated at u64::MAX.
    let n1: f64 = a.iter().map(|&c| c as f64).sum();
    let n2: f64 = b.iter().map(|&c| c as f64).sum();
    let n = n1 + n2;
    if n1 == 0.0 || n2 == 0.0 {
        return Test {
            p_value: 1.0,
            direction: 0.0,
        };
    }
    let (mut below, mut rank_sum_b, mut ties) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let t = x as f64 + y as f64;
        if t == 0.0 {
            continue;
        }
        let mid_rank = below + (t + 1.0) / 2.0;
        rank_sum_b += y as f64 * mid_rank;
        ties += t * t * t - t;
        below += t;
    }
    let u_b = rank_sum_b - n2 * (n2 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if variance <= 0.0 {
        return Test {
            p_value: 1.0,
            direction: 0.0,
        };
    }
    let z = (u_b - mean) / variance.sqrt();
    Test {
        p_value: normal_tail(z),
        direction: z.signum(),
    }
}

/// Mann-Whitney U between two small samples (per-run values), exact for up to 10 a side
/// (ties counted as half), normal approximation above.
pub fn samples(a: &[f64], b: &[f64]) -> Test {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return Test {
            p_value: 1.0,
            direction: 0.0,
        };
    }
    // U for b: pairs where b beats a, ties half.
    let u: f64 = b
        .iter()
        .map(|&y| {
            a.iter()
                .map(|&x| match y.partial_cmp(&x) {
                    Some(std::cmp::Ordering::Greater) => 1.0,
                    Some(std::cmp::Ordering::Equal) => 0.5,
                    _ => 0.0,
                })
                .sum::<f64>()
        })
        .sum();
    let mean = (n1 * n2) as f64 / 2.0;
    let direction = (u - mean).signum();
    if n1 <= 10 && n2 <= 10 {
        // Distribution of U under H0: counts of arrangements, by recursion on sizes.
        let counts = u_distribution(n1, n2);
        let total: f64 = counts.iter().sum();
        let extreme = (u - mean).abs();
        let p = counts
            .iter()
            .enumerate()
            .filter(|(k, _)| (*k as f64 - mean).abs() >= extreme - 1e-9)
            .map(|(_, c)| c)
            .sum::<f64>()
            / total;
        return Test {
            p_value: p.min(1.0),
            direction,
        };
    }
    let sd = ((n1 * n2 * (n1 + n2 + 1)) as f64 / 12.0).sqrt();
    Test {
        p_value: normal_tail((u - mean) / sd),
        direction,
    }
}

/// `counts[u]` = number of orderings of n1 + n2 distinct values with statistic u.
fn u_distribution(n1: usize, n2: usize) -> Vec<f64> {
    // f[i][j] = distribution for sizes i and j.
    let mut f: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n2 + 1]; n1 + 1];
    for i in 0..=n1 {
        for j in 0..=n2 {
            let mut d = vec![0.0; i * j + 1];
            if i == 0 || j == 0 {
                d[0] = 1.0;
            } else {
                // The largest value is from the second sample (adds i to U) or the first.
                for (u, c) in f[i][j - 1].iter().enumerate() {
                    d[u + i] += c;
                }
                for (u, c) in f[i - 1][j].iter().enumerate() {
                    d[u] += c;
                }
            }
            f[i][j] = d;
        }
    }
    std::mem::take(&mut f[n1][n2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_tail_is_two_sided() {
        assert_eq!(normal_tail(0.0), 1.0);
        assert!((normal_tail(1.959_963_985) - 0.05).abs() < 1e-9);
        assert!((normal_tail(-2.575_829_304) - 0.01).abs() < 1e-9);
        assert!(normal_tail(40.0) < 1e-300);
    }

    #[test]
    fn identical_histograms_are_not_different() {
        let a = [0, 10, 50, 10, 0];
        let t = histograms(&a, &a);
        assert!(t.p_value > 0.99, "{t:?}");
    }

    #[test]
    fn a_shifted_histogram_is_significant_and_points_up() {
        let a = [0, 100, 300, 100, 0, 0];
        let b = [0, 0, 100, 300, 100, 0];
        let t = histograms(&a, &b);
        assert!(t.p_value < 1e-6, "{t:?}");
        assert_eq!(t.direction, 1.0);
        assert_eq!(histograms(&b, &a).direction, -1.0);
    }

    #[test]
    fn exact_small_sample_p_values() {
        // Three against three, fully separated: p = 2/20 = 0.1 (two-sided, exact).
        let t = samples(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((t.p_value - 0.1).abs() < 1e-9, "{t:?}");
        assert_eq!(t.direction, 1.0);
        // Five against five, fully separated: 2/252.
        let t = samples(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((t.p_value - 2.0 / 252.0).abs() < 1e-9, "{t:?}");
        // Interleaved: nothing to see.
        assert!(samples(&[1.0, 3.0, 5.0], &[2.0, 4.0, 6.0]).p_value > 0.5);
    }

    #[test]
    fn u_distribution_sums_to_the_number_of_orderings() {
        let d = u_distribution(4, 3);
        assert_eq!(d.iter().sum::<f64>(), 35.0); // C(7, 3)
        assert_eq!(d.len(), 13);
    }
}
