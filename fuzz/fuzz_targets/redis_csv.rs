//! What redis-benchmark prints with `--csv` for `steer exp apps`:
//! parsing arbitrary text never panics, and a row it reads has a finite,
//! non-negative interval and latencies, and no 99.9th percentile (the
//! CSV has none).
#![no_main]

use exp::apps::redis::parse_benchmark_csv;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for requests in [0, 100_000, u64::MAX] {
        let Ok(rows) = parse_benchmark_csv(text, requests) else {
            continue;
        };
        for (test, run) in rows {
            assert!(
                run.seconds.is_finite() && run.seconds >= 0.0,
                "{test}: {run:?}"
            );
            for p in [run.p50_us, run.p99_us].into_iter().flatten() {
                assert!(p.is_finite() && p >= 0.0, "{test}: {run:?}");
            }
            assert_eq!(run.p999_us, None);
        }
    }
});
