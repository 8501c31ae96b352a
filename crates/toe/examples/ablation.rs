//! Thesis Table 4.4's ablation on this machine, printed as a table, with
//! the layouts for the CPUs present (`steer exp toe` reports the same rows
//! in its JSON, and takes `--threads`):
//!
//! ```text
//! cargo run --release -p toe --example ablation -- [SECONDS]
//! ```

use std::time::Duration;

use toe::ablation::{self, AblationConfig};

fn main() {
    let seconds: f64 = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 3.0,
        Some(Ok(s)) if s > 0.0 => s,
        Some(_) => {
            eprintln!("error: SECONDS must be a positive number (usage: ablation [SECONDS])");
            std::process::exit(2);
        }
    };
    println!(
        "{:<42} {:>10} {:>9} {:>9} {:>11} {:>11}",
        "design", "Mbit/s", "p50 us", "p99 us", "p99.99 us", "byte-exact"
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for layout in ablation::layouts(cpus) {
        let r = ablation::run(AblationConfig {
            connections: 64,
            rpc_bytes: 2048,
            duration: Duration::from_secs_f64(seconds),
            pipeline: layout.pipeline,
        });
        let name = layout.design;
        let f = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
        println!(
            "{name:<42} {:>10.1} {:>9} {:>9} {:>11} {:>11}",
            r.mbit_per_s,
            f(r.p50_us),
            f(r.p99_us),
            f(r.p9999_us),
            if r.byte_exact { "yes" } else { "NO" }
        );
    }
}
