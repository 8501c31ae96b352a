//! What random source ports give: each flow's CPU uniform and independent
//! (a well-mixed hash, an equal indirection table, one queue per CPU).
//!
//! - [`collision_free`]: the probability that no two of N flows share one
//!   of M cores (the birthday problem); 16 flows on 32 cores: 1.04% (SRAP
//!   paper, sections 2 and 5).
//! - [`max_load_distribution`]: the exact distribution of the most flows on
//!   one core, `P(max = k)` for `k = 0..=N`.
//! - [`monte_carlo`]: the same, sampled, as a cross-check.
//!
//! # The exact distribution
//!
//! `F_c(t)` is the probability that `t` flows thrown on `c` cores leave every
//! core with at most `k`. Two groups of `a` and `b` cores combine by how many
//! of the `t` flows fall in the first group, binomially with `p = a/(a+b)`:
//! `F_{a+b}(t) = sum_j C(t,j) p^j (1-p)^(t-j) F_a(j) F_b(t-j)`. Doubling
//! (1, 2, 4, ... cores) and the binary digits of M give `F_M(N)` in
//! `O(N^2 log M)` per `k`. `P(max = k)` is not computed as the difference
//! `F^(k) - F^(k-1)`, which would lose tiny tails to cancellation, but
//! directly: the probability that all cores hold at most `k` and some core
//! exactly `k`, `G`, combines as `G_{a+b} = sum w (G_a F_b + F'_a G_b)` with
//! `F'` the "at most k-1" probability. Only sums of non-negative terms, so
//! every value keeps f64's relative precision; values below ~1e-308
//! underflow to 0.

use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::Serialize;

use crate::error::SrapError;

mod text;

pub use text::percent;

/// Largest flow count [`max_load_distribution`] accepts (its cost grows as
/// N^3 log M).
pub const MAX_EXACT_FLOWS: u32 = 256;
/// Largest core count accepted.
pub const MAX_CORES: u32 = 1 << 20;

/// Probability that `flows` flows land on `cores` cores with no two sharing
/// one: `prod_{i<flows} (cores - i) / cores`. 16 flows on 32 cores: 0.0104.
pub fn collision_free(flows: u32, cores: u32) -> f64 {
    if flows > cores {
        return 0.0;
    }
    (0..flows).fold(1.0, |p, i| p * f64::from(cores - i) / f64::from(cores))
}

/// Per-group probabilities for one `k`, indexed by flow count `t`.
#[derive(Clone)]
struct Group {
    /// Every core holds at most k.
    at_most: Vec<f64>,
    /// Every core holds at most k - 1.
    below: Vec<f64>,
    /// Every core holds at most k, and some core exactly k.
    hit: Vec<f64>,
}

/// `w[t][j]`: probability that `j` of `t` flows fall in a group holding a
/// share `p` of the cores.
fn binomial_weights(n: usize, a: f64, b: f64, ln_fact: &[f64]) -> Vec<Vec<f64>> {
    let (lp, lq) = ((a / (a + b)).ln(), (b / (a + b)).ln());
    (0..=n)
        .map(|t| {
            (0..=t)
                .map(|j| {
                    let ln_c = ln_fact[t] - ln_fact[j] - ln_fact[t - j];
                    (ln_c + j as f64 * lp + (t - j) as f64 * lq).exp()
                })
                .collect()
        })
        .collect()
}

fn combine(x: &Group, y: &Group, w: &[Vec<f64>]) -> Group {
    let n = x.at_most.len() - 1;
    let mut out = Group {
        at_most: vec![0.0; n + 1],
        below: vec![0.0; n + 1],
        hit: vec![0.0; n + 1],
    };
    for (t, wt) in w.iter().enumerate().take(n + 1) {
        let (mut f, mut fb, mut g) = (0.0, 0.0, 0.0);
        for (j, &wj) in wt.iter().enumerate() {
            let r = t - j;
            f += wj * x.at_most[j] * y.at_most[r];
            fb += wj * x.below[j] * y.below[r];
            g += wj * (x.hit[j] * y.at_most[r] + x.below[j] * y.hit[r]);
        }
        out.at_most[t] = f;
        out.below[t] = fb;
        out.hit[t] = g;
    }
    out
}

fn check(flows: u32, cores: u32) -> Result<(), SrapError> {
    if cores == 0 || cores > MAX_CORES {
        return Err(SrapError::Parameter(format!(
            "cores must be 1..={MAX_CORES}, not {cores}"
        )));
    }
    if flows == 0 || flows > MAX_EXACT_FLOWS {
        return Err(SrapError::Parameter(format!(
            "flows must be 1..={MAX_EXACT_FLOWS} for the exact distribution, not {flows}"
        )));
    }
    Ok(())
}

/// `P(max = k)` for `k = 0..=flows`: the exact distribution of the most
/// flows on one core when `flows` flows pick among `cores` cores uniformly
/// and independently.
pub fn max_load_distribution(flows: u32, cores: u32) -> Result<Vec<f64>, SrapError> {
    check(flows, cores)?;
    let n = flows as usize;
    let ln_fact: Vec<f64> = std::iter::once(0.0)
        .chain((1..=n).scan(0.0, |acc, i| {
            *acc += (i as f64).ln();
            Some(*acc)
        }))
        .collect();
    // Combination steps, the same for every k: squarings, then one merge
    // per set bit of `cores`.
    let top = 31 - cores.leading_zeros();
    let halves = binomial_weights(n, 1.0, 1.0, &ln_fact);
    let mut merges = Vec::new();
    let mut size = 0u64;
    for bit in 0..=top {
        if cores & (1 << bit) != 0 {
            if size > 0 {
                let weights = binomial_weights(n, size as f64, f64::from(1u32 << bit), &ln_fact);
                merges.push((bit, Some(weights)));
            } else {
                merges.push((bit, None));
            }
            size += 1 << bit;
        }
    }
    let mut dist = vec![0.0; n + 1];
    let min_k = flows.div_ceil(cores) as usize;
    for (k, slot) in dist.iter_mut().enumerate().skip(min_k.max(1)) {
        let mut power = Group {
            at_most: (0..=n).map(|t| f64::from(u8::from(t <= k))).collect(),
            below: (0..=n).map(|t| f64::from(u8::from(t < k))).collect(),
            hit: (0..=n).map(|t| f64::from(u8::from(t == k))).collect(),
        };
        let mut acc: Option<Group> = None;
        let mut power_bit = 0;
        for (bit, weights) in &merges {
            while power_bit < *bit {
                power = combine(&power, &power, &halves);
                power_bit += 1;
            }
            acc = Some(match (acc, weights) {
                (Some(a), Some(w)) => combine(&a, &power, w),
                _ => power.clone(),
            });
        }
        *slot = acc.map_or(0.0, |a| a.hit[n]);
    }
    Ok(dist)
}

/// Most flows on one core in each of `trials` random assignments, as counts
/// per `k = 0..=flows`. Seeded, so a run can be repeated.
pub fn monte_carlo(flows: u32, cores: u32, trials: u64, seed: u64) -> Result<Vec<u64>, SrapError> {
    check(flows, cores)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut bins = vec![0u32; cores as usize];
    let mut touched = Vec::with_capacity(flows as usize);
    let mut counts = vec![0u64; flows as usize + 1];
    for _ in 0..trials {
        let mut max = 0;
        for _ in 0..flows {
            let c = rng.gen_range(0..cores) as usize;
            bins[c] += 1;
            touched.push(c);
            max = max.max(bins[c]);
        }
        for &c in &touched {
            bins[c] = 0;
        }
        touched.clear();
        counts[max as usize] += 1;
    }
    Ok(counts)
}

/// One row of [`Odds`].
#[derive(Debug, Clone, Serialize)]
pub struct MaxLoadRow {
    /// Most flows on one core.
    pub max: u32,
    /// Exact probability.
    pub exact: f64,
    /// Fraction of Monte Carlo trials.
    pub sampled: f64,
}

/// The result of `steer ports odds`.
#[derive(Debug, Clone, Serialize)]
pub struct Odds {
    pub flows: u32,
    pub cores: u32,
    /// Exact probability that no two flows share a core (= `P(max = 1)`).
    pub collision_free: f64,
    /// Expected most flows on one core.
    pub expected_max: f64,
    pub trials: u64,
    pub seed: u64,
    /// Fraction of trials with no two flows on one core.
    pub sampled_collision_free: f64,
    /// `k = 1..=flows`.
    pub distribution: Vec<MaxLoadRow>,
}

/// Exact odds and a seeded Monte Carlo cross-check, side by side.
pub fn odds(flows: u32, cores: u32, trials: u64, seed: u64) -> Result<Odds, SrapError> {
    let exact = max_load_distribution(flows, cores)?;
    let counts = monte_carlo(flows, cores, trials, seed)?;
    let frac = |c: u64| {
        if trials == 0 {
            0.0
        } else {
            c as f64 / trials as f64
        }
    };
    Ok(Odds {
        flows,
        cores,
        collision_free: collision_free(flows, cores),
        expected_max: exact.iter().enumerate().map(|(k, p)| k as f64 * p).sum(),
        trials,
        seed,
        sampled_collision_free: frac(counts[1]),
        distribution: (1..=flows as usize)
            .map(|k| MaxLoadRow {
                max: k as u32,
                exact: exact[k],
                sampled: frac(counts[k]),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_flows_on_thirty_two_cores_is_about_one_percent() {
        let p = collision_free(16, 32);
        assert!((p - 0.0104).abs() < 0.00005, "{p}");
    }

    #[test]
    fn collision_free_edge_cases() {
        assert_eq!(collision_free(1, 32), 1.0);
        assert_eq!(collision_free(0, 4), 1.0);
        assert_eq!(collision_free(5, 4), 0.0);
    }

    /// Counts assignments with every core at most `k`, exactly, in u128.
    fn count_at_most(n: usize, m: usize, k: usize) -> u128 {
        let binom = |t: usize, j: usize| -> u128 {
            (0..j).fold(1u128, |acc, i| acc * (t - i) as u128 / (i + 1) as u128)
        };
        let mut ways = vec![0u128; n + 1];
        ways[0] = 1;
        for _ in 0..m {
            let prev = ways.clone();
            for t in 0..=n {
                ways[t] = (0..=t.min(k)).map(|j| binom(t, j) * prev[t - j]).sum();
            }
        }
        ways[n]
    }

    #[test]
    fn exact_against_integer_counting_16_on_32() {
        let dist = max_load_distribution(16, 32).unwrap();
        let total = 32u128.pow(16);
        for (k, &p) in dist.iter().enumerate().skip(1) {
            let count = count_at_most(16, 32, k) - count_at_most(16, 32, k - 1);
            let want = count as f64 / total as f64;
            let rel = (p - want).abs() / want;
            assert!(rel < 1e-9, "k={k}: {p} vs {want}");
        }
        assert!((dist[1] - collision_free(16, 32)).abs() < 1e-15);
        // The tail: all 16 on one core, 32 / 32^16.
        assert!((dist[16] / (32.0 / 32f64.powi(16)) - 1.0).abs() < 1e-9);
        assert!((dist.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn exact_against_brute_force_small() {
        for (n, m) in [(4u32, 3u32), (5, 5), (3, 7), (6, 2)] {
            let dist = max_load_distribution(n, m).unwrap();
            let mut counts = vec![0u64; n as usize + 1];
            for code in 0..m.pow(n) {
                let mut bins = vec![0; m as usize];
                let mut c = code;
                for _ in 0..n {
                    bins[(c % m) as usize] += 1;
                    c /= m;
                }
                counts[*bins.iter().max().unwrap()] += 1;
            }
            for k in 0..=n as usize {
                let want = counts[k] as f64 / f64::from(m.pow(n));
                assert!((dist[k] - want).abs() < 1e-12, "{n} on {m}, k={k}");
            }
        }
    }

    #[test]
    fn non_power_of_two_cores_and_more_flows_than_cores() {
        let dist = max_load_distribution(20, 6).unwrap();
        assert_eq!(dist[..4], [0.0; 4]);
        assert!(dist[4] > 0.0);
        assert!((dist.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn monte_carlo_agrees_and_is_seeded() {
        let a = odds(16, 32, 20_000, 7).unwrap();
        let b = odds(16, 32, 20_000, 7).unwrap();
        assert_eq!(a.sampled_collision_free, b.sampled_collision_free);
        for row in &a.distribution {
            // 20k trials: a few standard errors of the largest cell (~0.0035).
            assert!((row.exact - row.sampled).abs() < 0.015, "{row:?}");
        }
    }

    #[test]
    fn bad_parameters() {
        assert!(max_load_distribution(0, 4).is_err());
        assert!(max_load_distribution(4, 0).is_err());
        assert!(max_load_distribution(MAX_EXACT_FLOWS + 1, 4).is_err());
    }
}
