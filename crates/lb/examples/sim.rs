//! The simulator without the CLI: `cargo run --release -p lb --example sim --
//! TRACE [SPEEDUP] [AMPLIFY]`.

use lb::{simulate, Policy, SimConfig, Trace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: sim TRACE [SPEEDUP] [AMPLIFY]")?;
    let speedup: f64 = args.next().map_or(Ok(1.0), |a| a.parse())?;
    let amplify: u32 = args.next().map_or(Ok(1), |a| a.parse())?;
    let trace = Trace::open(path.as_ref())?;
    let config = SimConfig {
        speedup,
        amplify,
        ..SimConfig::default()
    };
    let report = simulate(&path, &trace, config, &Policy::ALL, |_, _| {})?;
    println!(
        "{} packets, {:.1} s, {} packets/core/window",
        report.replay.packets,
        report.replay.duration_s,
        report
            .replay
            .packets_per_core_window
            .map_or("n/a".into(), |v| format!("{v:.1}"))
    );
    for p in &report.policies {
        println!(
            "{:>14} server {}% core {}%  peak/mean {}  changes {}",
            p.name,
            percent(p.server_variance),
            percent(p.core_variance),
            p.peak_to_mean.map_or("n/a".into(), |v| format!("{v:.3}")),
            p.table_changes
        );
    }
    Ok(())
}

/// A variance in percent, or "n/a" when no window had a packet.
fn percent(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{:7.4}", v * 100.0))
}
