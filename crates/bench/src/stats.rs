//! Summary statistics of samples and the noise band used by compare.

use serde::Serialize;

/// Mean and noise band of a metric's samples.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Standard error of the mean (0 with one sample).
    pub std_error: f64,
    /// The noise band: mean ± 2 standard errors, widened to min..max of the
    /// samples when that is wider. With one sample it is that sample.
    pub low: f64,
    pub high: f64,
}

impl Summary {
    pub fn of(values: &[f64]) -> Option<Summary> {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if finite.is_empty() {
            return None;
        }
        let n = finite.len();
        let mean = finite.iter().sum::<f64>() / n as f64;
        let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let std_error = if n > 1 {
            let var = finite.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            (var / n as f64).sqrt()
        } else {
            0.0
        };
        Some(Summary {
            n,
            mean,
            min,
            max,
            std_error,
            low: (mean - 2.0 * std_error).min(min),
            high: (mean + 2.0 * std_error).max(max),
        })
    }

    /// True when the two bands do not overlap and both have at least two
    /// samples (one sample carries no noise estimate: never judged).
    pub fn differs_from(&self, other: &Summary) -> bool {
        self.n >= 2 && other.n >= 2 && (self.high < other.low || other.high < self.low)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_and_difference() {
        let a = Summary::of(&[10.0, 11.0, 9.0]).unwrap();
        assert_eq!(a.mean, 10.0);
        assert!(a.low <= 9.0 && a.high >= 11.0);
        let b = Summary::of(&[20.0, 21.0, 19.0]).unwrap();
        assert!(a.differs_from(&b));
        let c = Summary::of(&[10.5, 12.0]).unwrap();
        assert!(!a.differs_from(&c));
        let one = Summary::of(&[30.0]).unwrap();
        assert!(!a.differs_from(&one), "one sample is never judged");
        assert!(Summary::of(&[]).is_none());
    }
}
