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
use exp::xdp_overhead::{Sample, XdpOverheadParams, XdpOverheadResult};

use crate::cli::each_once;
use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum ExpCommand {
    /// What the XDP software RSS costs TCP: iperf3 with the program
    /// attached, with no program, and with kernel RPS instead, rotating in
    /// one run, with the drop counters of each (needs root, iperf3, tc,
    /// ethtool).
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
}

pub fn run(cmd: ExpCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        ExpCommand::XdpOverhead(args) => xdp_overhead(args, json),
        ExpCommand::Crossrss(args) => crossrss(args, json),
        ExpCommand::Srpic(args) => srpic(args, json),
        ExpCommand::Toe(args) => super::exp_toe::run(args, json),
        ExpCommand::Ooo(args) => super::exp_ooo::run(args, json),
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
    /// `--json`, else with `table`.
    pub fn finish<T: serde::Serialize>(
        &self,
        json: bool,
        result: &T,
        table: impl FnOnce(&T) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if let Some(path) = &self.output {
            std::fs::write(path, serde_json::to_string_pretty(result)? + "\n")?;
        }
        output::json_or(json, result, table)
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
    progress(&format!(
        "xdp-overhead: {} iperf3 flows, {} queues, {} repetitions x {} s per mode \
         (software RSS, no program, RPS)",
        params.streams, params.queues, params.repetitions, params.seconds
    ));
    let result = exp::xdp_overhead::run(&params, |s| progress(&sample_line(s)))?;
    args.common.finish(json, &result, print_table)?;
    Ok(exit::OK)
}

fn sample_line(s: &Sample) -> String {
    let d = &s.drops;
    format!(
        "  rep {} {:>12}: {:6.2} Gbit/s, {} retransmits; dropped: cpumap {}, veth ring {}, \
         qdisc {}, backlog {}",
        s.repetition,
        s.mode.name(),
        s.gbit_per_s,
        s.retransmits,
        output::or_na(d.cpumap_enqueue_drops, |v| v.to_string()),
        d.sender_tx_dropped,
        output::or_na(d.sender_qdisc_dropped, |v| v.to_string()),
        d.backlog_dropped,
    )
}

fn print_table(r: &XdpOverheadResult) -> anyhow::Result<()> {
    let mut modes = vec![("no program", &r.without_program), ("RPS", &r.with_rps)];
    if let Some(rfs) = &r.with_rfs {
        modes.push(("RFS", rfs));
    }
    modes.push(("software RSS", &r.with_software_rss));
    output::table_of(
        &[
            "mode",
            "samples",
            "mean Gbit/s",
            "95% CI ±",
            "median retransmits",
        ],
        modes.iter(),
        |(name, s)| {
            vec![
                name.to_string(),
                s.n.to_string(),
                format!("{:.2}", s.mean_gbit),
                output::measured(s.ci95_gbit, 2),
                format!("{:.0}", s.median_retransmits),
            ]
        },
    )?;
    println!("\nframes dropped, summed over each mode's samples:");
    output::table_of(
        &[
            "mode",
            "cpumap enqueue",
            "cpumap kthread",
            "veth ring (sender tx)",
            "sender qdisc",
            "qdisc requeues",
            "receiver rx",
            "backlog",
        ],
        modes.iter(),
        |(name, s)| {
            let d = &s.drops;
            vec![
                name.to_string(),
                output::or_na(d.cpumap_enqueue_drops, |v| v.to_string()),
                output::or_na(d.cpumap_kthread_drops, |v| v.to_string()),
                d.sender_tx_dropped.to_string(),
                output::or_na(d.sender_qdisc_dropped, |v| v.to_string()),
                output::or_na(d.sender_qdisc_requeues, |v| v.to_string()),
                d.receiver_rx_dropped.to_string(),
                d.backlog_dropped.to_string(),
            ]
        },
    )?;
    println!(
        "ratio {} (software RSS / no program; goal >= 0.70), {} (software RSS / RPS; goal >= 1.0), \
         RPS / no program {}",
        output::measured(r.ratio, 2),
        output::measured(r.ratio_to_rps, 2),
        output::measured(r.rps_ratio, 2),
    );
    println!(
        "retransmit noise (most in one no-program or RPS sample): {}",
        r.retransmit_noise
    );
    Ok(())
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
    let result = lbxdp::experiment::run(&params, |rep, p| {
        let v = |x: Option<f64>| output::measured(x, 4);
        progress(&format!(
            "  rep {rep} {:<14} core variance {} server variance {} {} connections, {} failed",
            p.name,
            v(p.core_variance),
            v(p.server_variance),
            p.connections,
            p.failures
        ));
    })?;
    if let Some(path) = &args.svg {
        std::fs::write(path, lbxdp::experiment::svg(&result))?;
    }
    let pm_or_na = |s: Option<stats::Stat>, scale: f64, digits: usize| {
        output::or_na(s, |s| output::pm(s, scale, digits))
    };
    args.common.finish(json, &result, |result| {
        output::table_of(
            &[
                "policy",
                "reps",
                "core var % (95% CI)",
                "server var %",
                "Mbit/s",
                "LB pkt/s",
                "connections",
                "failures",
            ],
            result.policies.iter(),
            |p| {
                vec![
                    p.name.to_string(),
                    p.stats.n.to_string(),
                    pm_or_na(p.stats.core_variance, 100.0, 3),
                    pm_or_na(p.stats.server_variance, 100.0, 3),
                    output::pm(p.stats.throughput_mbit, 1.0, 1),
                    format!("{:.0}", p.lb_packets_per_s),
                    p.connections.to_string(),
                    output::pm(p.stats.failures, 1.0, 1),
                ]
            },
        )
    })?;
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
        senders: each_once(args.params.senders),
        gro: gro_settings(&args.gro),
        ..args.params
    };
    let params = args.common.sized(params, SrpicParams::quick);
    let progress = output::progress(json);
    progress(&format!(
        "srpic: {} configurations x {} repetitions x {} s",
        exp::srpic::cells(&params).len(),
        params.repetitions,
        params.seconds
    ));
    let result = exp::srpic::run(&params, |s| {
        progress(&format!(
            "  rep {} {} {:?} {} streams spread {} drop {} gro {} srpic {}: {:.0} Mbit/s, {:.2} retrans/Mbit, {:.1} dup ACKs/Mbit, block {:.1}, merge {}",
            s.repetition, s.cell.kind, s.cell.sender, s.cell.streams, s.cell.spread, s.cell.drop,
            s.cell.gro, s.cell.srpic, s.mbit_per_s, s.retrans_per_mbit, s.dup_acks_per_mbit, s.mean_block,
            output::or_na(s.merge_ratio, |m| format!("{m:.2}"))
        ));
    })?;
    if let Some(path) = &args.svg {
        std::fs::write(path, exp::srpic::svg(&result))?;
    }
    if let Some(path) = &args.merge_svg {
        match exp::srpic::merge_svg(&result) {
            Some(svg) => std::fs::write(path, svg)?,
            None => output::note!("--merge-svg: no cell ran on the GRO path, nothing written"),
        }
    }
    args.common.finish(json, &result, print_srpic)?;
    Ok(exit::OK)
}

fn print_srpic(result: &exp::srpic::SrpicResult) -> anyhow::Result<()> {
    output::table_of(
        &[
            "runs",
            "sender",
            "streams",
            "spread",
            "drop",
            "GRO",
            "receiver",
            "Mbit/s",
            "retrans/Mbit",
            "dupACK/Mbit",
            "OFO/Mbit",
            "block",
            "segs/skb",
        ],
        result.summaries.iter(),
        |s| {
            let c = s.cell;
            let pm = |st: stats::Stat, digits: usize| output::pm(st, 1.0, digits);
            vec![
                c.kind.to_string(),
                c.sender.name().to_string(),
                c.streams.to_string(),
                format!("{}%", c.spread * 100.0),
                format!("{}%", c.drop * 100.0),
                if c.gro { "on" } else { "off" }.into(),
                if c.srpic { "SRPIC" } else { "none" }.into(),
                pm(s.mbit_per_s, 0),
                pm(s.retrans_per_mbit, 2),
                pm(s.dup_acks_per_mbit, 1),
                pm(s.ofo_per_mbit, 1),
                format!("{:.1}", s.mean_block.mean),
                output::or_na(s.merge_ratio, |m| pm(m, 2)),
            ]
        },
    )?;
    let x = |r: Option<f64>| output::or_na(r, |r| format!("x{r:.2}"));
    println!(
        "SRPIC / none, reordering runs: dup ACKs {}, throughput {}",
        x(result.dup_ack_ratio),
        x(result.throughput_ratio)
    );
    println!(
        "GRO path / TAP path throughput: {}",
        x(result.gro_path_throughput_ratio)
    );
    let effect = |name: &str, e: &Option<exp::srpic::Effect>| {
        let change = |c: exp::srpic::Change| match (c.low, c.high) {
            (Some(l), Some(h)) => format!("{:+.2} [{l:+.2}, {h:+.2}]", c.mean),
            _ => format!("{:+.2} [n/a]", c.mean),
        };
        match e {
            Some(e) => println!(
                "GRO path, {name} (spread {}%): SRPIC changes segs/skb by {}, dup ACKs/Mbit by {} (95% CI)",
                e.spread * 100.0,
                change(e.merge_ratio_change),
                change(e.dup_acks_per_mbit_change)
            ),
            None => println!("GRO path, {name}: n/a"),
        }
    };
    effect("most reordered", &result.gro_effect.reordered);
    effect("in order", &result.gro_effect.in_order);
    Ok(())
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
