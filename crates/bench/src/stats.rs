//! Summary statistics of samples and the noise band used by compare.

use serde::Serialize;

/// Mean and noise band of a metric's samples.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Standard error of the mean; `None` (JSON null) with one sample,
    /// which carries no noise estimate.
    pub std_error: Option<f64>,
    /// The noise band: mean ± 2 standard errors, widened to min..max of the
    /// samples when that is wider. With one sample it is that sample.
    pub low: f64,
    pub high: f64,
}

impl Summary {
    /// The summary of the finite values; `None` when there is none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let mean = stats::mean(&finite)?;
        let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let std_error = stats::std_error(&finite);
        let (low, high) = match std_error {
            Some(se) => ((mean - 2.0 * se).min(min), (mean + 2.0 * se).max(max)),
            None => (min, max),
        };
        Some(Summary {
            n: finite.len(),
            mean,
            min,
            max,
            std_error,
            low,
            high,
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
        assert_eq!(one.std_error, None);
        assert_eq!((one.low, one.high), (30.0, 30.0));
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
    }
}
