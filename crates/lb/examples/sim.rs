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
        "{} packets, {:.1} s, {:.1} packets/core/window",
        report.replay.packets, report.replay.duration_s, report.replay.packets_per_core_window
    );
    for p in &report.policies {
        println!(
            "{:>14} server {:7.4}% core {:7.4}%  peak/mean {:.3}  changes {}",
            p.name,
            p.server_variance * 100.0,
            p.core_variance * 100.0,
            p.peak_to_mean,
            p.table_changes
        );
    }
    Ok(())
}
