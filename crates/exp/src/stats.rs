//! Mean and 95% confidence interval of repeated measurements, the one
//! summary every experiment reports.

use serde::Serialize;

/// Mean and 95% confidence half-width (two-sided Student t).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub mean: f64,
    /// `None` (JSON null) with one sample: one sample has no spread, and
    /// 0 would read as an exact value.
    pub ci95: Option<f64>,
}

/// Two-sided 95% Student t quantile for `df` degrees of freedom (exact to
/// three decimals up to 30; beyond, the value of the next tabulated df
/// below, so the interval is never narrower than it should be).
pub fn t95(df: usize) -> Option<f64> {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => None,
        1..=30 => Some(T[df - 1]),
        31..=40 => Some(2.042),
        41..=60 => Some(2.021),
        61..=120 => Some(2.000),
        _ => Some(1.980),
    }
}

/// Mean and 95% CI of `xs`; `None` when there is no sample.
pub fn stat(xs: &[f64]) -> Option<Stat> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let ci95 = t95(n - 1).map(|t| {
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        t * (var / n as f64).sqrt()
    });
    Some(Stat { mean, ci95 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_interval() {
        let s = stat(&[1.0, 2.0, 3.0]).unwrap();
        assert!((s.mean - 2.0).abs() < 1e-12);
        // sd 1, se 1/sqrt(3), t(2) = 4.303
        assert!((s.ci95.unwrap() - 4.303 / 3f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn no_sample_and_one_sample_are_not_zeros() {
        assert_eq!(stat(&[]), None);
        let one = stat(&[3.0]).unwrap();
        assert_eq!(one.mean, 3.0);
        assert_eq!(one.ci95, None);
        assert!(serde_json::to_value(one).unwrap()["ci95"].is_null());
    }

    #[test]
    fn t_is_monotone_and_never_below_the_normal() {
        let ts: Vec<f64> = (1..200).filter_map(t95).collect();
        assert!(ts.windows(2).all(|w| w[0] >= w[1]));
        assert!(ts.iter().all(|&t| t > 1.96));
    }
}
