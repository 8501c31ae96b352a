//! `steer exp ...`: the experiments, each one subcommand writing one JSON
//! result (`--json`, or `-o FILE` as well) and a table.
//!
//! To add an experiment: a type implementing [`Experiment`] in the exp
//! crate (its parameters derive `clap::Args` behind the crate's `clap`
//! feature), then a variant of [`ExpCommand`] holding [`ExpArgs`] of its
//! parameters and a match arm in [`run`] naming the type. Then declare it
//! as a case of the test matrix (crates/bench/cases.toml, docs/bench.md).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use exp::apps::{AppsExperiment, AppsParams};
use exp::crossrss::CrossRssExperiment;
use exp::experiment::{Experiment, Report};
use exp::loss::{LossExperiment, LossParams};
use exp::ooo::{OooExperiment, OooParams};
use exp::srpic::{SrpicExperiment, SrpicParams};
use exp::toe::{ToeExperiment, ToeParams};
use exp::xdp_overhead::{XdpOverheadExperiment, XdpOverheadParams};

use crate::cli::each_once;
use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum ExpCommand {
    /// What the XDP software RSS costs TCP: iperf3 with the program
    /// attached, with no program, and with kernel RPS instead, rotating in
    /// one run, with the drop counters of each (needs root, iperf3).
    ///
    /// Where each mode loses frames is shown per sample and per mode: the
    /// cpumap (enqueue drops into a full CPU queue), the veth ring (tx drops
    /// on the sender's veth), the sender's qdisc (drops; requeues are the
    /// ring pushing back), the backlogs (/proc/net/softnet_stat) and
    /// iperf3's retransmits.
    XdpOverhead(ExpArgs<XdpOverheadParams>),
    /// Live CrossRSS: short and long TCP connections from client namespaces
    /// through the XDP load balancer to backends with software RSS, each
    /// policy in turn; per-core and per-server variance from the datapath
    /// counters, throughput, connection failures (needs root).
    ///
    /// --svg draws per-core variance per policy (mean, 95% CI).
    Crossrss(CrossrssArgs),
    /// The SRPIC paper's forward-path experiments (Table 4 reordering,
    /// Table 5 drops) with real Linux TCP through the impairment wire, with
    /// and without sorting in the receiver (needs root, iperf3).
    ///
    /// --svg draws throughput per cell without and with sorting (mean, 95%
    /// CI).
    Srpic(SrpicArgs),
    /// The userspace TCP data path (after FlexTOE) against Linux TCP on the
    /// same lab path: one-connection stream and RPC latency, every byte
    /// checked (needs root).
    Toe(ExpArgs<ToeParams>),
    /// Out-of-order fidelity (thesis Table 5.3): flow completion times of
    /// short and background flows from Linux NewReno senders to the toe
    /// data path keeping 0, 1, 2 or unboundedly many out-of-order
    /// intervals, through a bottleneck with loss and reordering (needs
    /// root).
    ///
    /// Short requests and background uploads go to the toe data path
    /// through the lab's wire (bottleneck, loss, reordering), sent by Linux
    /// NewReno and by the data path's DCTCP (a toe endpoint in the sender's
    /// namespace; the bottleneck marks CE past --ecn-mark-frames); the
    /// receiver keeps each bound of out-of-order intervals in turn (thesis
    /// Table 5.3). --svg draws p90 FCT per sender and bound against the
    /// same sender's unbounded receiver, beside Table 5.3.
    ///
    /// Example: sudo steer exp ooo --quick --svg ooo.svg
    Ooo(ExpArgs<OooParams>),
    /// Goodput under loss (uniform and Gilbert-Elliott bursts, RTTs, rate
    /// limits) through the lab's wire: each data path engine receiving
    /// from and sending to Linux TCP, beside Linux to Linux on the same
    /// wire; retransmissions per drop and timeouts (needs root).
    ///
    /// Every cell of the grid (loss, RTT, rate, direction, sender CC) runs
    /// one transfer per data path engine and one Linux to Linux on the same
    /// wire; the table shows each engine's goodput beside Linux's and their
    /// ratio, retransmissions per frame the wire dropped, and timeouts.
    /// --svg draws goodput against loss, one line per engine and Linux's
    /// beside them (at the first --rtt and --rate).
    ///
    /// Example: sudo steer exp loss --quick --svg loss.svg
    ///
    /// Example: sudo steer exp loss --loss 1 --rtt 2 --rate 1gbit --engine toe --direction receive --cc bbr
    Loss(ExpArgs<LossParams>),
    /// Real servers, unmodified, on Linux TCP and on each engine of the
    /// data path: nginx with wrk, redis with redis-benchmark, memcached
    /// (multi-threaded) with Steer's client; throughput, p50/p99/p99.9,
    /// errors, contents verified and CPU time per request on each side
    /// (needs root, nginx, redis, memcached, wrk).
    ///
    /// The server side (the server and its TCP: Linux's receive
    /// processing steered there by RPS, or the data path's thread) runs on
    /// --server-cpus, the clients on --client-cpus, the same for every
    /// stack; the stacks take turns, the order alternating per repetition.
    /// --svg draws each engine's throughput and p99 against Linux's per
    /// cell.
    ///
    /// Example: sudo steer exp apps --quick --svg apps.svg
    ///
    /// Example: sudo steer exp apps --workload nginx-small --engine toe --seconds 20
    Apps(ExpArgs<AppsParams>),
}

pub fn run(cmd: ExpCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        ExpCommand::XdpOverhead(args) => run_experiment::<XdpOverheadExperiment>(args, json),
        ExpCommand::Crossrss(args) => crossrss(args, json),
        ExpCommand::Srpic(args) => srpic(args, json),
        ExpCommand::Toe(args) => run_experiment::<ToeExperiment>(args, json),
        ExpCommand::Ooo(args) => run_experiment::<OooExperiment>(args, json),
        ExpCommand::Loss(args) => run_experiment::<LossExperiment>(args, json),
        ExpCommand::Apps(args) => run_experiment::<AppsExperiment>(args, json),
    }
}

/// An experiment's command line: its parameters (the exp crate's, as
/// flags) and the options every experiment has.
#[derive(Debug, Args)]
pub struct ExpArgs<P: Args> {
    #[command(flatten)]
    pub params: P,
    #[command(flatten)]
    pub common: Common,
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
    /// Write the result's chart as SVG (the experiments that draw one say
    /// what it shows; the others refuse it before they run).
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Runs experiment `E` as `args` ask: progress on stderr unless `--json`,
/// the chart to `--svg`, the JSON to `-o`, then the result printed. Exits
/// 1 when the run failed what it exists to show.
pub fn run_experiment<E: Experiment>(args: ExpArgs<E::Params>, json: bool) -> anyhow::Result<i32>
where
    E::Params: Args,
{
    let report = measure::<E>(args.params, &args.common, json)?;
    Ok(exit::ok_unless(!report.succeeded()))
}

/// [`run_experiment`]'s work, returning the report for a command that
/// writes more of it.
pub fn measure<E: Experiment>(
    params: E::Params,
    common: &Common,
    json: bool,
) -> anyhow::Result<Report<E>> {
    exp::experiment::check_chart::<E>(common.svg.is_some())?;
    let progress = output::progress(json);
    let report = exp::experiment::run::<E>(params, common.quick, &mut |line| progress(&line))?;
    if let (Some(path), Some(svg)) = (&common.svg, report.svg()) {
        std::fs::write(path, svg)?;
    }
    if let Some(path) = &common.output {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
    }
    output::print(json, &report)?;
    Ok(report)
}

#[derive(Debug, Args)]
pub struct CrossrssArgs {
    #[command(flatten)]
    pub live: exp::crossrss::LiveLoad,
    /// Policies, comma-separated, or all.
    #[arg(long, value_delimiter = ',', default_value = "all",
        value_parser = lbxdp::LivePolicy::names_parser())]
    pub policy: Vec<String>,
    /// Repetitions, each running every policy (--quick uses at most 2).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: u32,
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
    let params = args.live.params(policies, args.repetitions);
    let report = measure::<CrossRssExperiment>(params, &args.common, json)?;
    Ok(exit::ok_unless(!report.succeeded()))
}

#[derive(Debug, Args)]
pub struct SrpicArgs {
    #[command(flatten)]
    pub exp: ExpArgs<SrpicParams>,
    /// Receive path, comma-separated: on = the GRO path (GRO merges each
    /// delivered batch; merge ratio = segments per skb reaching TCP), off =
    /// the plain TAP path (no GRO); both = off,on.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "both")]
    pub gro: Vec<GroArg>,
    /// Write the chart of GRO's merge ratio (GRO-path cells) here.
    #[arg(long)]
    pub merge_svg: Option<PathBuf>,
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
    let params = SrpicParams {
        gro: gro_settings(&args.gro),
        ..args.exp.params
    };
    let report = measure::<SrpicExperiment>(params, &args.exp.common, json)?;
    if let Some(path) = &args.merge_svg {
        match exp::srpic::merge_svg(&report) {
            Some(svg) => std::fs::write(path, svg)?,
            None => output::note!("--merge-svg: no cell ran on the GRO path, nothing written"),
        }
    }
    Ok(exit::ok_unless(!report.succeeded()))
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
