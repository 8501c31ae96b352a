//! Counters and a latency histogram.

use serde::Serialize;

/// A histogram of non-negative durations with 1 µs buckets up to 100 ms
/// (one overflow bucket above). Percentiles are bucket upper bounds.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

const BUCKETS: usize = 100_000;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: vec![0; BUCKETS + 1],
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        let b = ((ns / 1000) as usize).min(BUCKETS);
        self.buckets[b] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q` quantile (0..=1) in microseconds: the upper bound of the
    /// bucket holding it (so "p99 = 3" means 99% took less than 3 µs).
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return if i == BUCKETS {
                    self.max_ns as f64 / 1e3
                } else {
                    (i + 1) as f64
                };
            }
        }
        self.max_ns as f64 / 1e3
    }

    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            samples: self.count,
            mean_us: if self.count == 0 {
                0.0
            } else {
                self.sum_ns as f64 / self.count as f64 / 1e3
            },
            p50_us: self.quantile_us(0.50),
            p90_us: self.quantile_us(0.90),
            p99_us: self.quantile_us(0.99),
            p999_us: self.quantile_us(0.999),
            max_us: self.max_ns as f64 / 1e3,
        }
    }
}

/// Percentiles of a [`Histogram`], microseconds (1 µs resolution).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    pub samples: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let mut h = Histogram::default();
        for us in 0..100 {
            h.record(us * 1000 + 500);
        }
        assert_eq!(h.quantile_us(0.5), 50.0);
        assert_eq!(h.quantile_us(0.99), 99.0);
        assert_eq!(h.summary().samples, 100);
        h.record(500_000_000);
        assert_eq!(h.quantile_us(1.0), 500_000.0);
    }
}
