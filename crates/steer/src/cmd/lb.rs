//! `steer lb sim`: the trace-driven comparison of load-balancing policies
//! (crate `lb`, docs/crossrss.md).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, Subcommand};
use lb::sim::{simulate, Policy, SimConfig};
use lb::Trace;
use lbxdp::LivePolicy;

use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum LbCommand {
    /// Replay a capture through load-balancing policies and compare the
    /// per-server and per-core balance (CrossRSS, CoNEXT '20, Fig. 2).
    ///
    /// Each connection stays on the server chosen at its first packet; the
    /// server's RSS (same key everywhere, indirection table shuffled by a PRNG
    /// seeded with the server id) picks the core; agents report per-core
    /// packet counts at --rate-hz.
    ///
    /// Example: steer lb sim --trace auckland.pcap --speedup 10 --amplify 16 --svg out/
    Sim(Box<SimArgs>),
    /// Run the XDP load balancer live in a namespace lab: clients, a
    /// load-balancer namespace (VIP, L2 direct server return), backends with
    /// software RSS and their own randomised tables, agents and the
    /// controller at --rate-hz; TCP traffic for --seconds, then per-policy
    /// counters (docs/crossrss.md, "The live data plane"). Needs root.
    ///
    /// Example: steer lb run --policy crossrss-plus --backends 4 --seconds 10
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Policies, comma-separated, or all.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "crossrss-plus",
        value_parser = policy_names(LivePolicy::ALL.map(|p| (p.name(), p.about())))
    )]
    pub policy: Vec<String>,
    #[command(flatten)]
    pub live: exp::crossrss::LiveLoad,
}

fn live_run(args: RunArgs, json: bool) -> anyhow::Result<i32> {
    let policies = LivePolicy::named(&args.policy).ok_or_else(|| no_such_policy(&args.policy))?;
    let params = args.live.params(policies, 1);
    let report =
        exp::experiment::run::<exp::crossrss::CrossRssExperiment>(params, false, &mut |_| {})?;
    output::print(json, &exp::crossrss::FirstRepetition(&report))?;
    Ok(exit::ok_unless(!report.succeeded()))
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// A pcap or pcapng capture (Ethernet, raw IP, Linux SLL/SLL2, loopback).
    #[arg(long)]
    pub trace: PathBuf,
    /// Policies, comma-separated, or all.
    #[arg(long, value_delimiter = ',', default_value = Policy::ALL_NAME, value_parser = policy_names(Policy::ALL.map(|p| (p.name(), p.about()))))]
    pub policy: Vec<String>,
    /// Toeplitz key shared by all servers: hex, `microsoft`, `symmetric` or
    /// @FILE (a file holding the hex).
    #[arg(long, default_value = "microsoft")]
    pub key: String,
    /// Use only the first N packets of the capture.
    #[arg(long)]
    pub max_packets: Option<usize>,
    #[command(flatten)]
    pub config: SimConfig,
    /// Write variance.svg and throughput.svg into this directory
    /// (window-sweep.svg with --sweep-window).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Instead of one comparison, what limits it at each window length
    /// (seconds, comma-separated): every policy, a clairvoyant online
    /// placement (knows each connection's future packets), an offline
    /// oracle, the indivisibility floor no placement goes below, and the
    /// connections per window (docs/crossrss.md, "What limits the margin").
    ///
    /// Example: steer lb sim --trace auckland.pcap --sweep-window 0.1,0.5,1,2,5
    #[arg(long, value_delimiter = ',')]
    pub sweep_window: Option<Vec<f64>>,
}

/// `--policy`: a policy's name (its help is the library's), or `all`.
fn policy_names(
    named: impl IntoIterator<Item = (&'static str, &'static str)>,
) -> PossibleValuesParser {
    let all = PossibleValue::new(Policy::ALL_NAME).help("Every policy below");
    let each = named
        .into_iter()
        .map(|(name, about)| PossibleValue::new(name).help(about));
    PossibleValuesParser::new(std::iter::once(all).chain(each))
}

/// The policies `--policy` names, in order, each once.
fn sim_policies(names: &[String]) -> anyhow::Result<Vec<Policy>> {
    Policy::named(names).ok_or_else(|| no_such_policy(names))
}

fn no_such_policy(names: &[String]) -> anyhow::Error {
    exit::usage(format!("--policy {}: no such policy", names.join(",")))
}

pub fn run(cmd: LbCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        LbCommand::Sim(args) => sim(*args, json),
        LbCommand::Run(args) => live_run(args, json),
    }
}

fn sim(args: SimArgs, json: bool) -> anyhow::Result<i32> {
    let policies = sim_policies(&args.policy)?;
    let key = rss::RssKey::from_arg(&args.key).context("--key")?;
    key.check_input_len(rss::toeplitz::V6_TUPLE_LEN)
        .context("--key")?;
    let config = SimConfig { key, ..args.config };
    config.validate()?;
    let mut trace =
        Trace::open(&args.trace).with_context(|| format!("--trace {}", args.trace.display()))?;
    if let Some(n) = args.max_packets {
        anyhow::ensure!(n > 0, "--max-packets must be at least 1");
        trace.truncate(n);
    }
    let name = args.trace.display().to_string();
    if let Some(windows) = &args.sweep_window {
        let report = lb::limits::sweep(&name, &trace, config, windows, &policies)?;
        if let Some(dir) = &args.svg {
            write_svgs(
                dir,
                &[("window-sweep.svg", lb::svg::window_sweep_plot(&report))],
            )?;
        }
        output::print(json, &report)?;
        return Ok(exit::OK);
    }
    let terminal = std::io::stderr().is_terminal();
    let n = policies.len();
    let report = simulate(&name, &trace, config, &policies, |i, p| {
        if terminal {
            eprint!("\rsteer lb sim: {}    ", lb::sim::text::replaying(i, n, p));
        }
    })?;
    if terminal {
        eprint!("\r{:60}\r", "");
    }
    if let Some(dir) = &args.svg {
        write_svgs(
            dir,
            &[
                ("variance.svg", lb::svg::variance_plot(&report)),
                ("throughput.svg", lb::svg::throughput_plot(&report)),
            ],
        )?;
    }
    output::print(json, &report)?;
    Ok(exit::OK)
}

/// Writes each (file name, SVG text) into `dir`, creating it.
fn write_svgs(dir: &std::path::Path, files: &[(&str, String)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--svg {}", dir.display()))?;
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Sim {
        #[command(flatten)]
        args: SimArgs,
    }

    #[test]
    fn sim_policies_expand_all_and_drop_repeats() {
        let parse = |policy: &str| {
            let t = Sim::try_parse_from(["t", "--trace", "x.pcap", "--policy", policy]).unwrap();
            sim_policies(&t.args.policy).unwrap()
        };
        assert_eq!(parse("all"), Policy::ALL.to_vec());
        assert_eq!(
            parse("rr,crossrss-plus,rr"),
            vec![Policy::Rr, Policy::CrossrssPlus]
        );
        assert_eq!(parse("pow2,all").len(), 6);
        assert!(Sim::try_parse_from(["t", "--trace", "x", "--policy", "fastest"]).is_err());
    }

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        args: RunArgs,
    }

    #[test]
    fn live_policies_are_the_library_s_named_or_all() {
        let parse = |argv: &[&str]| {
            let t = Run::try_parse_from([&["t"][..], argv].concat()).unwrap();
            LivePolicy::named(&t.args.policy).unwrap()
        };
        assert_eq!(parse(&[]), vec![LivePolicy::CrossRssPlus]);
        assert_eq!(parse(&["--policy", "all"]), LivePolicy::ALL.to_vec());
        assert_eq!(
            parse(&["--policy", "rr,crossrss-plus,rr"]),
            vec![LivePolicy::Rr, LivePolicy::CrossRssPlus]
        );
        assert!(Run::try_parse_from(["t", "--policy", "pow2"]).is_err());
    }
}
