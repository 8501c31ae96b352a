//! The values a figure draws: one measured value with its whisker, a
//! point of a line, a named series.

/// One measured value, with an optional range drawn as a whisker (a
/// confidence interval, or min..max of the samples).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value {
    pub y: f64,
    pub range: Option<(f64, f64)>,
}

impl Value {
    pub fn new(y: f64) -> Self {
        Value { y, range: None }
    }

    /// `y` with the whisker `low..high`.
    pub fn with_range(y: f64, low: f64, high: f64) -> Self {
        Value {
            y,
            range: Some((low, high)),
        }
    }

    /// `y ± half` (a confidence interval); no whisker when `half` is `None`
    /// (one sample has no interval).
    pub fn with_ci(y: f64, half: Option<f64>) -> Self {
        Value {
            y,
            range: half.map(|h| (y - h, y + h)),
        }
    }

    pub(crate) fn low(&self) -> f64 {
        self.range.map_or(self.y, |(l, _)| l.min(self.y))
    }

    pub(crate) fn high(&self) -> f64 {
        self.range.map_or(self.y, |(_, h)| h.max(self.y))
    }
}

/// A point of a line chart: `x` on a linear axis, or the category index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub value: Value,
}

/// A named series; one value per group (bar chart) or a list of points.
#[derive(Debug, Clone)]
pub(crate) struct Series<T> {
    pub(crate) name: String,
    pub(crate) data: Vec<T>,
}
