//! `steer exp ...`: the experiments, each one subcommand writing one JSON
//! result (`--json`, or `-o FILE` as well) and a table.
//!
//! To add an experiment: a variant of [`ExpCommand`] with its argument
//! struct below, a match arm in [`run`], and a function that turns the
//! arguments into the library's parameters and prints. Then declare it as a
//! case of the test matrix (crates/bench/cases.toml, docs/bench.md).

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use exp::xdp_overhead::{Mode, Sample, XdpOverheadParams, XdpOverheadResult};

use crate::output;

#[derive(Debug, Subcommand)]
pub enum ExpCommand {
    /// What the XDP software RSS costs TCP: iperf3 with the program attached
    /// and with no program, alternating in one run (needs root and iperf3).
    XdpOverhead(XdpOverheadArgs),
}

pub fn run(cmd: ExpCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        ExpCommand::XdpOverhead(args) => xdp_overhead(args, json),
    }
}

/// Options every experiment has.
#[derive(Debug, Args)]
pub struct Common {
    /// A reduced run (under 2 minutes) for CI and the test matrix.
    #[arg(long)]
    pub quick: bool,
    /// Write the JSON result to this file as well.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct XdpOverheadArgs {
    /// Repetitions; each runs both modes (order flipped every repetition).
    #[arg(long, default_value_t = 5)]
    pub repetitions: u32,
    /// Seconds of iperf3 traffic per sample.
    #[arg(long, default_value_t = 5)]
    pub seconds: u32,
    /// Parallel TCP flows (iperf3 -P).
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
    /// Receive queues of the software RSS.
    #[arg(long, default_value_t = 4)]
    pub queues: u32,
    /// XDP_PASS when the target CPU is the current one (reorders TCP).
    #[arg(long)]
    pub same_cpu_pass: bool,
    /// cpumap queue size.
    #[arg(long, default_value_t = 2048)]
    pub qsize: u32,
    #[command(flatten)]
    pub common: Common,
}

fn xdp_overhead(args: XdpOverheadArgs, json: bool) -> anyhow::Result<i32> {
    let mut params = XdpOverheadParams {
        repetitions: args.repetitions,
        seconds: args.seconds,
        streams: args.streams,
        queues: args.queues,
        same_cpu_pass: args.same_cpu_pass,
        queue_size: args.qsize,
        quick: false,
    };
    if args.common.quick {
        params = params.quick();
    }
    let show = !json || std::io::stderr().is_terminal();
    if show {
        eprintln!(
            "xdp-overhead: {} iperf3 flows, {} queues, {} repetitions x {} s per mode",
            params.streams, params.queues, params.repetitions, params.seconds
        );
    }
    let result = exp::xdp_overhead::run(&params, |s| {
        if show {
            eprintln!("{}", sample_line(s));
        }
    })?;
    write_output(&args.common, &result)?;
    if json {
        output::json(&result)?;
    } else {
        print_table(&result)?;
    }
    Ok(0)
}

fn write_output<T: serde::Serialize>(common: &Common, result: &T) -> anyhow::Result<()> {
    if let Some(path) = &common.output {
        std::fs::write(path, serde_json::to_string_pretty(result)? + "\n")?;
    }
    Ok(())
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::SoftwareRss => "software-rss",
        Mode::NoProgram => "no-program",
    }
}

fn sample_line(s: &Sample) -> String {
    format!(
        "  rep {} {:>12}: {:6.2} Gbit/s ({} retransmits)",
        s.repetition,
        mode_name(s.mode),
        s.gbit_per_s,
        s.retransmits
    )
}

fn print_table(r: &XdpOverheadResult) -> anyhow::Result<()> {
    let body: Vec<Vec<String>> = [
        ("no program", &r.without_program),
        ("software RSS", &r.with_software_rss),
    ]
    .iter()
    .map(|(name, s)| {
        vec![
            name.to_string(),
            s.n.to_string(),
            format!("{:.2}", s.mean_gbit),
            format!("{:.2}", s.ci95_gbit),
        ]
    })
    .collect();
    output::table(&["mode", "samples", "mean Gbit/s", "95% CI ±"], &body)?;
    println!(
        "ratio {:.2} (software RSS / no program; goal >= 0.70)",
        r.ratio
    );
    Ok(())
}
