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
    /// bucket holding it (so "p99 = 3" means 99% took less than 3 µs);
    /// `None` with no sample.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        (self.count > 0).then(|| self.quantiles_us([q])[0])
    }

    /// Several quantiles (ascending) in one pass; the overflow bucket's
    /// bound is the largest value seen.
    fn quantiles_us<const N: usize>(&self, qs: [f64; N]) -> [f64; N] {
        let max_us = self.max_ns as f64 / 1e3;
        quantiles(&self.buckets, self.count, qs, max_us, |i| {
            if i == BUCKETS {
                max_us
            } else {
                (i + 1) as f64
            }
        })
    }

    /// The percentiles, or `None` with no sample: an empty histogram has
    /// no latency, and 0 would read as "no delay added".
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.count == 0 {
            return None;
        }
        let [p50_us, p90_us, p99_us, p999_us] = self.quantiles_us([0.50, 0.90, 0.99, 0.999]);
        Some(LatencySummary {
            samples: self.count,
            mean_us: self.sum_ns as f64 / self.count as f64 / 1e3,
            p50_us,
            p90_us,
            p99_us,
            p999_us,
            max_us: self.max_ns as f64 / 1e3,
        })
    }
}

/// Quantiles `qs` (ascending, 0..=1) of a histogram of `count` samples in
/// one pass over its `buckets` (the driver takes a snapshot every 50 ms
/// inside its loop): the value `bound(i)` of the bucket holding each; `max`
/// where the buckets hold fewer than `count`; `max` for all when empty
/// (callers summarise only histograms with samples).
fn quantiles<const N: usize>(
    buckets: &[u64],
    count: u64,
    qs: [f64; N],
    max: f64,
    bound: impl Fn(usize) -> f64,
) -> [f64; N] {
    let mut out = [max; N];
    let mut k = 0;
    let mut seen = 0;
    for (i, &n) in buckets.iter().enumerate() {
        if n == 0 {
            continue;
        }
        seen += n;
        while k < N && seen >= ((qs[k] * count as f64).ceil() as u64).clamp(1, count) {
            out[k] = bound(i);
            k += 1;
        }
        if k == N {
            break;
        }
    }
    out
}

/// Percentiles of a [`Histogram`], microseconds (1 µs resolution).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
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

    /// The `q` quantile in microseconds: the upper bound of its 10 ns
    /// bucket; `None` with no sample.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        (self.count > 0).then(|| self.quantiles_us([q])[0])
    }

    /// Several quantiles (ascending) in one pass; a bucket's bound is kept
    /// within the extremes seen, as the end buckets also hold clamped values.
    fn quantiles_us<const N: usize>(&self, qs: [f64; N]) -> [f64; N] {
        quantiles(
            &self.buckets,
            self.count,
            qs,
            self.max_ns as f64 / 1e3,
            |i| {
                let upper = (i as i64 + 1) * FINE_NS - FINE_SPAN_NS;
                upper.clamp(self.min_ns, self.max_ns) as f64 / 1e3
            },
        )
    }

    /// The percentiles, or `None` with no sample (see [`Histogram::summary`]).
    pub fn summary(&self) -> Option<SignedSummary> {
        if self.count == 0 {
            return None;
        }
        let [p50_us, p90_us, p99_us, p999_us] = self.quantiles_us([0.50, 0.90, 0.99, 0.999]);
        Some(SignedSummary {
            samples: self.count,
            mean_us: self.sum_ns as f64 / self.count as f64 / 1e3,
            min_us: self.min_ns as f64 / 1e3,
            p50_us,
            p90_us,
            p99_us,
            p999_us,
            max_us: self.max_ns as f64 / 1e3,
        })
    }
}

/// Percentiles of a [`FineHistogram`], microseconds (10 ns resolution).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
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
        assert_eq!(h.quantile_us(0.5), Some(50.0));
        assert_eq!(h.quantile_us(0.99), Some(99.0));
        assert_eq!(h.summary().unwrap().samples, 100);
        h.record(500_000_000);
        assert_eq!(h.quantile_us(1.0), Some(500_000.0));
    }

    #[test]
    fn summaries_are_the_buckets_of_the_ranked_samples() {
        let (mut h, mut f) = (Histogram::default(), FineHistogram::default());
        let mut ns: Vec<i64> = (0..5000)
            .map(|k| (k * 7919) % 3_000_000 - 500_000)
            .collect();
        ns.push(200_000_000);
        for &v in &ns {
            h.record(v.unsigned_abs());
            f.record(v);
        }
        let qs = [0.5, 0.9, 0.99, 0.999];
        // The sample of rank ceil(q * n), by its key (the order each histogram keeps).
        let ranked = |key: fn(&i64) -> i64| {
            let mut sorted = ns.clone();
            sorted.sort_by_key(key);
            qs.map(|q| sorted[(q * sorted.len() as f64).ceil() as usize - 1])
        };
        let hs = h.summary().unwrap();
        assert_eq!(
            [hs.p50_us, hs.p90_us, hs.p99_us, hs.p999_us],
            ranked(|v| v.abs()).map(|v| (v.unsigned_abs() / 1000 + 1) as f64)
        );
        let fs = f.summary().unwrap();
        let fine_bound = |v: i64| {
            let b = (v.clamp(-FINE_SPAN_NS, FINE_SPAN_NS) + FINE_SPAN_NS) / FINE_NS;
            ((b + 1) * FINE_NS - FINE_SPAN_NS).clamp(-500_000, 200_000_000) as f64 / 1e3
        };
        assert_eq!(
            [fs.p50_us, fs.p90_us, fs.p99_us, fs.p999_us],
            ranked(|v| *v).map(fine_bound)
        );
    }

    #[test]
    fn an_empty_histogram_has_no_summary() {
        assert_eq!(Histogram::default().summary(), None);
        assert_eq!(FineHistogram::default().summary(), None);
        assert_eq!(Histogram::default().quantile_us(0.5), None);
        assert_eq!(FineHistogram::default().quantile_us(0.5), None);
    }

    #[test]
    fn fine_histogram_is_signed() {
        let mut h = FineHistogram::default();
        for ns in -50..50 {
            h.record(ns * 100);
        }
        assert!((h.quantile_us(0.5).unwrap() - -0.09).abs() < 1e-9);
        assert!((h.quantile_us(0.01).unwrap() - -4.99).abs() < 1e-9);
        assert_eq!(h.summary().unwrap().min_us, -5.0);
        h.record(5_000_000);
        assert_eq!(h.summary().unwrap().max_us, 5000.0);
    }
}
