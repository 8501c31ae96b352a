//! `steer exp ...`: the experiments, each one subcommand writing one JSON
//! result (`--json`, or `-o FILE` as well) and a table.
//!
//! To add an experiment: its parameters derive `clap::Args` in the exp
//! crate (behind its `clap` feature); here a variant of [`ExpCommand`] with
//! an argument struct flattening them beside [`Common`], a match arm in
//! [`run`], and a function that runs and prints. Then declare it as a case
//! of the test matrix (crates/bench/cases.toml, docs/bench.md).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use exp::xdp_overhead::XdpOverheadParams;
use plot::text::Present;
use serde::Serialize;

use crate::cli::each_once;
use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum ExpCommand {
    /// What the XDP software RSS costs TCP: iperf3 with the program
    /// attached, with no program, and with kernel RPS instead, rotating in
    /// one run, with the drop counters of each (needs root, iperf3).
    XdpOverhead(XdpOverheadArgs),
    /// Live CrossRSS: short and long TCP connections from client namespaces
    /// through the XDP load balancer to backends with software RSS, each
    /// policy in turn; per-core and per-server variance from the datapath
    /// counters, throughput, connection failures (needs root).
    Crossrss(CrossrssArgs),
    /// The SRPIC paper's forward-path experiments (Table 4 reordering,
    /// Table 5 drops) with real Linux TCP through the impairment wire, with
    /// and without sorting in the receiver (needs root, iperf3).
    Srpic(SrpicArgs),
    /// The userspace TCP data path (after FlexTOE) against Linux TCP on the
    /// same lab path: one-connection stream and RPC latency, every byte
    /// checked (needs root).
    Toe(super::exp_toe::ToeArgs),
    /// Out-of-order fidelity (thesis Table 5.3): flow completion times of
    /// short and background flows from Linux NewReno senders to the toe
    /// data path keeping 0, 1, 2 or unboundedly many out-of-order
    /// intervals, through a bottleneck with loss and reordering (needs
    /// root).
    Ooo(super::exp_ooo::OooArgs),
    /// Goodput under loss (uniform and Gilbert-Elliott bursts, RTTs, rate
    /// limits) through the lab's wire: each data path engine receiving
    /// from and sending to Linux TCP, beside Linux to Linux on the same
    /// wire; retransmissions per drop and timeouts (needs root).
    Loss(super::exp_loss::LossArgs),
}

pub fn run(cmd: ExpCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        ExpCommand::XdpOverhead(args) => xdp_overhead(args, json),
        ExpCommand::Crossrss(args) => crossrss(args, json),
        ExpCommand::Srpic(args) => srpic(args, json),
        ExpCommand::Toe(args) => super::exp_toe::run(args, json),
        ExpCommand::Ooo(args) => super::exp_ooo::run(args, json),
        ExpCommand::Loss(args) => super::exp_loss::run(args, json),
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

impl Common {
    /// `params`, or their reduced run (`quick`) with `--quick`.
    pub fn sized<P>(&self, params: P, quick: fn(P) -> P) -> P {
        if self.quick {
            quick(params)
        } else {
            params
        }
    }

    /// Writes `result` to `-o FILE` as well, then prints it: JSON with
    /// `--json`, else its text.
    pub fn finish<T: Serialize + Present>(&self, json: bool, result: &T) -> anyhow::Result<()> {
        if let Some(path) = &self.output {
            std::fs::write(path, serde_json::to_string_pretty(result)? + "\n")?;
        }
        output::print(json, result)
    }
}

/// Where each mode loses frames is shown per sample and per mode: the
/// cpumap (enqueue drops into a full CPU queue), the veth ring (tx drops on
/// the sender's veth), the sender's qdisc (drops; requeues are the ring
/// pushing back), the backlogs (/proc/net/softnet_stat) and iperf3's
/// retransmits.
#[derive(Debug, Args)]
pub struct XdpOverheadArgs {
    #[command(flatten)]
    pub params: XdpOverheadParams,
    #[command(flatten)]
    pub common: Common,
}

fn xdp_overhead(args: XdpOverheadArgs, json: bool) -> anyhow::Result<i32> {
    let params = args.common.sized(args.params, XdpOverheadParams::quick);
    // Bad parameters fail before anything is printed or built.
    params.check()?;
    let progress = output::progress(json);
    progress(&params.progress_header());
    let result = exp::xdp_overhead::run(&params, |s| progress(&s.progress_line()))?;
    args.common.finish(json, &result)?;
    Ok(exit::OK)
}

#[derive(Debug, Args)]
pub struct CrossrssArgs {
    #[command(flatten)]
    pub live: lbxdp::experiment::LiveLoad,
    /// Policies, comma-separated, or all.
    #[arg(long, value_delimiter = ',', default_value = "all",
        value_parser = lbxdp::LivePolicy::names_parser())]
    pub policy: Vec<String>,
    /// Repetitions, each running every policy (--quick uses at most 2).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: u32,
    /// Write an SVG plot of per-core variance per policy (mean, 95% CI).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// The policies `--policy` names, in order, each once.
fn live_policies(names: &[String]) -> anyhow::Result<Vec<lbxdp::LivePolicy>> {
    lbxdp::LivePolicy::named(names)
        .ok_or_else(|| exit::usage(format!("--policy {}: no such policy", names.join(","))))
}

fn crossrss(args: CrossrssArgs, json: bool) -> anyhow::Result<i32> {
    let policies = live_policies(&args.policy)?;
    let params = args.common.sized(
        args.live.params(policies, args.repetitions),
        lbxdp::experiment::CrossRssParams::quick,
    );
    let progress = output::progress(json);
    let result = lbxdp::experiment::run(&params, |rep, p| progress(&p.progress_line(rep)))?;
    if let Some(path) = &args.svg {
        std::fs::write(path, lbxdp::experiment::svg(&result))?;
    }
    args.common.finish(json, &result)?;
    Ok(exit::ok_unless(result.failures > 0))
}

#[derive(Debug, Args)]
pub struct SrpicArgs {
    #[command(flatten)]
    pub params: exp::srpic::SrpicParams,
    /// Receive path, comma-separated: on = the GRO path (GRO merges each
    /// delivered batch; merge ratio = segments per skb reaching TCP), off =
    /// the plain TAP path (no GRO); both = off,on.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "both")]
    pub gro: Vec<GroArg>,
    /// Write the SVG chart (throughput) here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write the chart of GRO's merge ratio (GRO-path cells) here.
    #[arg(long)]
    pub merge_svg: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// The SRPIC driver's receive path (GRO path or plain TAP path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroArg {
    Off,
    On,
    /// Both settings, off then on.
    Both,
}

/// The GRO settings named, in order, each once.
fn gro_settings(args: &[GroArg]) -> Vec<bool> {
    each_once(
        args.iter()
            .flat_map(|arg| match arg {
                GroArg::Off => &[false][..],
                GroArg::On => &[true],
                GroArg::Both => &[false, true],
            })
            .copied(),
    )
}

fn srpic(args: SrpicArgs, json: bool) -> anyhow::Result<i32> {
    use exp::srpic::SrpicParams;
    let params = SrpicParams {
        gro: gro_settings(&args.gro),
        ..args.params
    };
    let params = args.common.sized(params, SrpicParams::quick);
    // Bad parameters fail before anything is printed or built.
    params.check()?;
    let progress = output::progress(json);
    progress(&params.progress_header());
    let result = exp::srpic::run(&params, |s| progress(&s.progress_line()))?;
    if let Some(path) = &args.svg {
        std::fs::write(path, exp::srpic::svg(&result))?;
    }
    if let Some(path) = &args.merge_svg {
        match exp::srpic::merge_svg(&result) {
            Some(svg) => std::fs::write(path, svg)?,
            None => output::note!("--merge-svg: no cell ran on the GRO path, nothing written"),
        }
    }
    args.common.finish(json, &result)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Srpic {
        #[command(flatten)]
        args: SrpicArgs,
    }

    #[derive(Parser)]
    struct Crossrss {
        #[command(flatten)]
        args: CrossrssArgs,
    }

    #[test]
    fn gro_both_is_off_and_on_and_the_default() {
        let gro = |argv: &[&str]| {
            let t = Srpic::try_parse_from([&["t"][..], argv].concat()).unwrap();
            gro_settings(&t.args.gro)
        };
        assert_eq!(gro(&[]), vec![false, true]);
        assert_eq!(gro(&["--gro", "both"]), vec![false, true]);
        assert_eq!(gro(&["--gro", "on"]), vec![true]);
        assert_eq!(gro(&["--gro", "on,both"]), vec![true, false]);
        assert!(Srpic::try_parse_from(["t", "--gro", "maybe"]).is_err());
        assert!(Srpic::try_parse_from(["t", "--senders", "lazy"]).is_err());
    }

    #[test]
    fn live_policies_expand_all_and_drop_repeats() {
        let parse = |argv: &[&str]| {
            let t = Crossrss::try_parse_from([&["t"][..], argv].concat()).unwrap();
            live_policies(&t.args.policy).unwrap()
        };
        assert_eq!(parse(&[]), lbxdp::LivePolicy::ALL.to_vec());
        assert_eq!(
            parse(&["--policy", "hash,crossrss-plus,hash"]),
            vec![lbxdp::LivePolicy::Hash, lbxdp::LivePolicy::CrossRssPlus]
        );
        assert_eq!(parse(&["--policy", "rr,all"]).len(), 5);
        assert!(Crossrss::try_parse_from(["t", "--policy", "pow2"]).is_err());
    }
}
