//! Controller recompute time for 1,000 servers x 64 cores x 512 buckets, as
//! wall time and as CPU time of this thread (getrusage is not portable, so
//! CPU time comes from /proc/thread-self/schedstat: on a shared machine the
//! wall time includes waiting for a core, the CPU time does not).
//!
//! `cargo run --release -p lb --example controller_time`

use std::time::Instant;

use lb::controller::{crossrss_table, AgentReport, CrossRssPlus, PlusParams};
use lb::rng::SplitMix64;

fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn main() {
    let (servers, cores, buckets, rounds) = (1000u32, 64usize, 512usize, 50u32);
    let mut rng = SplitMix64::new(42);
    let reports: Vec<AgentReport> = (0..servers)
        .map(|s| AgentReport::random(s, cores, buckets, 100_000, &mut rng))
        .collect();
    let new_load: Vec<f64> = (0..buckets).map(|b| (b % 17) as f64).collect();
    let mut plus = CrossRssPlus::new(buckets, PlusParams::default());
    let measure = |name: &str, f: &mut dyn FnMut()| {
        f();
        let (w0, c0) = (Instant::now(), cpu_ns());
        for _ in 0..rounds {
            f();
        }
        let wall = w0.elapsed().as_secs_f64() * 1e3 / f64::from(rounds);
        let cpu = match (c0, cpu_ns()) {
            (Some(a), Some(b)) => format!("{:.2} ms", (b - a) as f64 / 1e6 / f64::from(rounds)),
            _ => "n/a".into(),
        };
        println!("{name:>14}: wall {wall:.2} ms, cpu {cpu} per recompute");
    };
    measure("crossrss", &mut || {
        crossrss_table(&reports, buckets).expect("table");
    });
    measure("crossrss-plus", &mut || {
        plus.update(&reports, &new_load, 1000.0).expect("table");
    });
}
