//! What limits the per-core balance on a trace (docs/crossrss.md, "What
//! limits the margin"): every policy, the clairvoyant online placement, the
//! offline oracle and the indivisibility floor, per window length.
//!
//! `cargo run --release -p lb --example limits -- TRACE [SPEEDUP] [AMPLIFY]
//! [WINDOWS_S, comma-separated]` (defaults: 1, 1, 0.1,0.25,0.5,1,2,5).
//! Prints one JSON line per window length after the table.

use lb::limits::sweep_windows;
use lb::sim::Replay;
use lb::{Policy, SimConfig, Trace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: limits TRACE [SPEEDUP] [AMPLIFY] [WINDOWS_S]";
    let path = args.next().ok_or(usage)?;
    let speedup: f64 = args.next().map_or(Ok(1.0), |a| a.parse())?;
    let amplify: u32 = args.next().map_or(Ok(1), |a| a.parse())?;
    let windows: Vec<f64> = args
        .next()
        .unwrap_or_else(|| "0.1,0.25,0.5,1,2,5".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let trace = Trace::open(path.as_ref())?;
    let config = SimConfig {
        speedup,
        amplify,
        ..SimConfig::default()
    };
    let replay = Replay::new(&trace, speedup, amplify, (config.max_gap_s * 1e9) as u64)?;
    let points = sweep_windows(&replay, &config, &windows, &Policy::ALL)?;
    let pct = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{:.2}", v * 100.0));
    println!(
        "{path}: speedup {speedup}, amplify {amplify}; per-core variance in %\n\
         window_s windows pkts/core conns new N_eff carried% | rr hash pow2 maglev crossrss plus | online* oracle floor random | plus/best"
    );
    for p in &points {
        let s = p.stats;
        let stat = |f: fn(&lb::limits::WindowStats) -> f64, d: usize| {
            s.map_or("n/a".to_string(), |s| format!("{:.*}", d, f(&s)))
        };
        let policies: Vec<String> = p.policies.iter().map(|v| pct(v.core_variance)).collect();
        let plus = p
            .policies
            .iter()
            .find(|v| v.name == "crossrss-plus")
            .and_then(|v| v.core_variance);
        let ratio = match (plus, p.best_baseline) {
            (Some(a), Some((_, b))) if b > 0.0 => format!("{:.2}", a / b),
            _ => "n/a".into(),
        };
        println!(
            "{} {} {} {} {} {} {} | {} | {} {} {} {} | {}",
            p.window_s,
            s.map_or(0, |s| s.windows),
            stat(|s| s.packets_per_core, 1),
            stat(|s| s.active_connections, 1),
            stat(|s| s.new_connections, 1),
            stat(|s| s.effective_connections, 1),
            stat(|s| s.carried_share * 100.0, 1),
            policies.join(" "),
            pct(p.clairvoyant_online),
            pct(p.oracle),
            pct(s.map(|s| s.floor)),
            pct(s.map(|s| s.random_expectation)),
            ratio
        );
    }
    for p in &points {
        println!("{}", serde_json::to_string(p)?);
    }
    Ok(())
}
