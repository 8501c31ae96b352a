//! What wrk prints for `steer exp apps` (its own report and the summary
//! line of Steer's script): parsing arbitrary text never panics, and a
//! latency it reads is never negative.
#![no_main]

use exp::apps::http::parse_wrk;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(run) = parse_wrk(text) {
        for p in [run.p50_us, run.p99_us, run.p999_us].into_iter().flatten() {
            assert!(p >= 0.0, "latency {p} from {text:?}");
        }
    }
});
