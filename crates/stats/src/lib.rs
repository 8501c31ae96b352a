//! Summary statistics of repeated measurements, the one set every
//! experiment, benchmark and the test matrix report: mean, sample standard
//! deviation, the two-sided 95% confidence interval of the mean by
//! Student's t, and percentiles; plus [`meta::Meta`], the machine and code
//! they were measured on.
//!
//! A value that cannot be computed is absent (`None`, JSON null), never 0:
//! an empty sample has no mean, one sample has no spread and no interval.
//! The distribution functions come from `statrs` (the t quantile is its
//! inverse CDF, not a hand table).

pub mod meta;

pub use meta::Meta;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::statistics::{Data, OrderStatistics, Statistics};

/// Mean and 95% confidence half-width (two-sided Student t) of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub mean: f64,
    /// `None` (JSON null) with one sample: one sample has no spread, and
    /// 0 would read as an exact value.
    pub ci95: Option<f64>,
}

/// The arithmetic mean; `None` without a sample.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.mean())
}

/// The sample standard deviation (Bessel's n - 1); `None` with fewer than
/// two samples.
pub fn stddev(xs: &[f64]) -> Option<f64> {
    (xs.len() >= 2).then(|| xs.std_dev())
}

/// The standard error of the mean, `stddev / sqrt(n)`; `None` with fewer
/// than two samples.
pub fn std_error(xs: &[f64]) -> Option<f64> {
    stddev(xs).map(|sd| sd / (xs.len() as f64).sqrt())
}

/// The two-sided 95% Student t quantile, t(0.975, df); `None` for df 0.
pub fn t95(df: usize) -> Option<f64> {
    if df == 0 {
        return None;
    }
    // 0.975 is in (0, 1) and df > 0: the distribution exists and its
    // inverse CDF is finite.
    StudentsT::new(0.0, 1.0, df as f64)
        .ok()
        .map(|t| t.inverse_cdf(0.975))
}

/// Half-width of the 95% confidence interval of the mean,
/// `t(0.975, n - 1) * stddev / sqrt(n)`; `None` with fewer than two samples.
pub fn ci95(xs: &[f64]) -> Option<f64> {
    Some(t95(xs.len().checked_sub(1)?)? * std_error(xs)?)
}

/// Mean and 95% CI of `xs`; `None` when there is no sample.
pub fn stat(xs: &[f64]) -> Option<Stat> {
    Some(Stat {
        mean: mean(xs)?,
        ci95: ci95(xs),
    })
}

/// The difference of two sample means, `mean(a) - mean(b)`, with the
/// half-width of its two-sided 95% confidence interval by Welch's t
/// (unequal variances; degrees of freedom by Welch-Satterthwaite, as R's
/// `t.test`). `None` without a sample on either side; `ci95` `None` with
/// fewer than two samples on a side, and 0 when both sides have no spread
/// at all (the difference is then exact).
pub fn diff_ci95(a: &[f64], b: &[f64]) -> Option<Stat> {
    let mean_diff = mean(a)? - mean(b)?;
    let var_of_mean = |xs: &[f64]| stddev(xs).map(|sd| sd * sd / xs.len() as f64);
    let ci95 = match (var_of_mean(a), var_of_mean(b)) {
        (Some(va), Some(vb)) if va + vb == 0.0 => Some(0.0),
        (Some(va), Some(vb)) => {
            let df = (va + vb).powi(2)
                / (va * va / (a.len() - 1) as f64 + vb * vb / (b.len() - 1) as f64);
            StudentsT::new(0.0, 1.0, df)
                .ok()
                .map(|t| t.inverse_cdf(0.975) * (va + vb).sqrt())
        }
        _ => None,
    };
    Some(Stat {
        mean: mean_diff,
        ci95,
    })
}

/// The `q` quantile (0 <= q <= 1) of `xs`, interpolated as R's and
/// Hyndman & Fan's type 8 (approximately median-unbiased, the estimator
/// `statrs` implements); `None` without a sample or for `q` outside 0..=1.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    Some(Data::new(xs.to_vec()).quantile(q))
}

/// The `p`th percentile (0 <= p <= 100); see [`quantile`].
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    quantile(xs, p / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() < eps
    }

    #[test]
    fn t_quantiles_match_the_published_table() {
        // Two-sided 95% values of Student's t (NIST/SEMATECH e-Handbook of
        // Statistical Methods, 1.3.6.7.2, to the digits printed there).
        let table = [
            (1, 12.7062),
            (2, 4.3027),
            (5, 2.5706),
            (10, 2.2281),
            (11, 2.2010),
            (30, 2.0423),
            (100, 1.9840),
        ];
        for (df, t) in table {
            let got = t95(df).unwrap();
            assert!(close(got, t, 5e-5), "df {df}: {got} vs {t}");
        }
        assert!(close(t95(11).unwrap(), 2.200985, 1e-6));
        assert!(close(t95(1).unwrap(), 12.706205, 1e-6));
        assert_eq!(t95(0), None);
    }

    #[test]
    fn t_is_monotone_and_never_below_the_normal() {
        let ts: Vec<f64> = (1..300).filter_map(t95).collect();
        assert!(ts.windows(2).all(|w| w[0] > w[1]));
        assert!(ts.iter().all(|&t| t > 1.959964));
    }

    #[test]
    fn a_textbook_sample() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sample
        // variance 32/7, t(0.975, 7) = 2.364624.
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs), Some(5.0));
        let sd = stddev(&xs).unwrap();
        assert!(close(sd, (32.0f64 / 7.0).sqrt(), 1e-12));
        let s = stat(&xs).unwrap();
        assert!(close(s.mean, 5.0, 1e-12));
        let want = 2.364624 * (32.0f64 / 7.0).sqrt() / 8f64.sqrt();
        assert!(close(s.ci95.unwrap(), want, 1e-5), "{:?}", s.ci95);
        // 1, 2, 3: sd 1, t(2) = 4.302653.
        let s = stat(&[1.0, 2.0, 3.0]).unwrap();
        assert!(close(s.ci95.unwrap(), 4.302653 / 3f64.sqrt(), 1e-5));
    }

    #[test]
    fn no_sample_and_one_sample_are_not_zeros() {
        assert_eq!(stat(&[]), None);
        assert_eq!(mean(&[]), None);
        assert_eq!(stddev(&[4.0]), None);
        assert_eq!(std_error(&[4.0]), None);
        assert_eq!(ci95(&[4.0]), None);
        assert_eq!(quantile(&[], 0.5), None);
        let one = stat(&[3.0]).unwrap();
        assert_eq!(one.mean, 3.0);
        assert_eq!(one.ci95, None);
        assert!(serde_json::to_value(one).unwrap()["ci95"].is_null());
    }

    #[test]
    fn welch_difference_by_hand() {
        // a = 10, 12, 11, 13: mean 11.5, variance 5/3; b = 7, 9, 8: mean 8,
        // variance 1. se^2 = (5/3)/4 + 1/3 = 0.75; Welch-Satterthwaite
        // df = 0.75^2 / ((5/12)^2/3 + (1/3)^2/2) = 4.96.
        let d = diff_ci95(&[10.0, 12.0, 11.0, 13.0], &[7.0, 9.0, 8.0]).unwrap();
        assert!(close(d.mean, 3.5, 1e-12));
        let df = 0.5625 / ((5.0f64 / 12.0).powi(2) / 3.0 + (1.0f64 / 3.0).powi(2) / 2.0);
        assert!(close(df, 4.959, 1e-3));
        let t = StudentsT::new(0.0, 1.0, df).unwrap().inverse_cdf(0.975);
        let half = d.ci95.unwrap();
        assert!(close(half, t * 0.75f64.sqrt(), 1e-12));
        // df between 4 and 5: t between the tabled t(5) and t(4).
        let se = 0.75f64.sqrt();
        assert!(
            half > t95(5).unwrap() * se && half < t95(4).unwrap() * se,
            "{half}"
        );
        // Equal variances and sizes: df = 2(n - 1), as the pooled test.
        let e = diff_ci95(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0]).unwrap();
        assert!(close(
            e.ci95.unwrap(),
            t95(4).unwrap() * (2.0f64 / 3.0).sqrt(),
            1e-9
        ));
    }

    #[test]
    fn welch_difference_without_spread_or_samples() {
        let exact = diff_ci95(&[2.0, 2.0], &[1.0, 1.0]).unwrap();
        assert_eq!((exact.mean, exact.ci95), (1.0, Some(0.0)));
        let one = diff_ci95(&[2.0], &[1.0, 3.0]).unwrap();
        assert_eq!((one.mean, one.ci95), (0.0, None));
        assert_eq!(diff_ci95(&[], &[1.0]), None);
        assert_eq!(diff_ci95(&[1.0], &[]), None);
    }

    #[test]
    fn percentiles() {
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.0), Some(1.0));
        assert_eq!(percentile(&xs, 100.0), Some(10.0));
        assert!(close(percentile(&xs, 50.0).unwrap(), 5.5, 1e-12));
        // Type 8 on 1..10: h = (n + 1/3) q + 1/3 = 2.9167 at q = 0.25, so
        // x(2) + 0.9167 (x(3) - x(2)) (R: quantile(1:10, 0.25, type = 8)
        // = 2.916667).
        assert!(close(quantile(&xs, 0.25).unwrap(), 2.916667, 1e-6));
        assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
        assert_eq!(quantile(&xs, 1.5), None);
        assert_eq!(quantile(&xs, -0.1), None);
    }
}
