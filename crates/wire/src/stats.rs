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

    /// Several quantiles (ascending) in one pass over the buckets: the
    /// driver takes a snapshot every 50 ms inside its loop.
    fn quantiles_us<const N: usize>(&self, qs: [f64; N]) -> [f64; N] {
        let mut out = [self.max_ns as f64 / 1e3; N];
        if self.count == 0 {
            return [0.0; N];
        }
        let mut k = 0;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n == 0 {
                continue;
            }
            seen += n;
            while k < N && seen >= ((qs[k] * self.count as f64).ceil() as u64).clamp(1, self.count)
            {
                if i != BUCKETS {
                    out[k] = (i + 1) as f64;
                }
                k += 1;
            }
            if k == N {
                break;
            }
        }
        out
    }

    pub fn summary(&self) -> LatencySummary {
        let [p50_us, p90_us, p99_us, p999_us] = self.quantiles_us([0.50, 0.90, 0.99, 0.999]);
        LatencySummary {
            samples: self.count,
            mean_us: if self.count == 0 {
                0.0
            } else {
                self.sum_ns as f64 / self.count as f64 / 1e3
            },
            p50_us,
            p90_us,
            p99_us,
            p999_us,
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

/// A histogram of signed durations with 10 ns buckets over ±1 ms (values
/// outside are clamped into the end buckets; the true extremes are kept).
/// For the sorter's own added delay, which is sub-microsecond and can be
/// negative (a packet the sorter moves earlier in the batch).
#[derive(Debug, Clone)]
pub struct FineHistogram {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: i128,
    min_ns: i64,
    max_ns: i64,
}

const FINE_NS: i64 = 10;
const FINE_SPAN_NS: i64 = 1_000_000;

impl Default for FineHistogram {
    fn default() -> Self {
        FineHistogram {
            buckets: vec![0; (2 * FINE_SPAN_NS / FINE_NS) as usize + 1],
            count: 0,
            sum_ns: 0,
            min_ns: i64::MAX,
            max_ns: i64::MIN,
        }
    }
}

impl FineHistogram {
    pub fn record(&mut self, ns: i64) {
        let b = (ns.clamp(-FINE_SPAN_NS, FINE_SPAN_NS) + FINE_SPAN_NS) / FINE_NS;
        self.buckets[b as usize] += 1;
        self.count += 1;
        self.sum_ns += i128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// The `q` quantile in microseconds: the upper bound of its 10 ns bucket.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let upper = (i as i64 + 1) * FINE_NS - FINE_SPAN_NS;
                return upper.clamp(self.min_ns, self.max_ns) as f64 / 1e3;
            }
        }
        self.max_ns as f64 / 1e3
    }

    /// Several quantiles (ascending) in one pass, as [`Histogram`].
    fn quantiles_us<const N: usize>(&self, qs: [f64; N]) -> [f64; N] {
        let mut out = [self.max_ns as f64 / 1e3; N];
        if self.count == 0 {
            return [0.0; N];
        }
        let mut k = 0;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n == 0 {
                continue;
            }
            seen += n;
            while k < N && seen >= ((qs[k] * self.count as f64).ceil() as u64).clamp(1, self.count)
            {
                let upper = (i as i64 + 1) * FINE_NS - FINE_SPAN_NS;
                out[k] = upper.clamp(self.min_ns, self.max_ns) as f64 / 1e3;
                k += 1;
            }
            if k == N {
                break;
            }
        }
        out
    }

    pub fn summary(&self) -> SignedSummary {
        let empty = self.count == 0;
        let [p50_us, p90_us, p99_us, p999_us] = self.quantiles_us([0.50, 0.90, 0.99, 0.999]);
        SignedSummary {
            samples: self.count,
            mean_us: if empty {
                0.0
            } else {
                self.sum_ns as f64 / self.count as f64 / 1e3
            },
            min_us: if empty { 0.0 } else { self.min_ns as f64 / 1e3 },
            p50_us,
            p90_us,
            p99_us,
            p999_us,
            max_us: if empty { 0.0 } else { self.max_ns as f64 / 1e3 },
        }
    }
}

/// Percentiles of a [`FineHistogram`], microseconds (10 ns resolution).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct SignedSummary {
    pub samples: u64,
    pub mean_us: f64,
    pub min_us: f64,
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

    #[test]
    fn one_pass_summaries_equal_single_quantiles() {
        let (mut h, mut f) = (Histogram::default(), FineHistogram::default());
        for k in 0..5000u64 {
            let ns = (k * 7919) % 3_000_000;
            h.record(ns);
            f.record(ns as i64 - 500_000);
        }
        h.record(200_000_000);
        let (hs, fs) = (h.summary(), f.summary());
        assert_eq!(
            [hs.p50_us, hs.p90_us, hs.p99_us, hs.p999_us],
            [0.5, 0.9, 0.99, 0.999].map(|q| h.quantile_us(q))
        );
        assert_eq!(
            [fs.p50_us, fs.p90_us, fs.p99_us, fs.p999_us],
            [0.5, 0.9, 0.99, 0.999].map(|q| f.quantile_us(q))
        );
        assert_eq!(Histogram::default().summary(), LatencySummary::default());
    }

    #[test]
    fn fine_histogram_is_signed() {
        let mut h = FineHistogram::default();
        for ns in -50..50 {
            h.record(ns * 100);
        }
        assert!((h.quantile_us(0.5) - -0.09).abs() < 1e-9);
        assert!((h.quantile_us(0.01) - -4.99).abs() < 1e-9);
        assert_eq!(h.summary().min_us, -5.0);
        h.record(5_000_000);
        assert_eq!(h.summary().max_us, 5000.0);
    }
}
