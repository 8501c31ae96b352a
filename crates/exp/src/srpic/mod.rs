//! `steer exp srpic`: the SRPIC paper's forward-path experiments (section
//! 4.1.1, Table 4; section 4.1.2, Table 5) with real Linux TCP on both ends.
//!
//! Lab: `snd —veth— wire —veth— rcv` (lab::LabSpec::wire). The wire
//! (crate `wire`, SCHED_FIFO forwarder) serializes at 1 Gbit/s each way,
//! delays the forward path by normal(2.5 ms, spread * 2.5 ms) and the
//! reverse path by a fixed 2.5 ms; in the drop runs both paths are a fixed
//! 2.5 ms and the forward path loses uniformly. The receiver's TCP is fed by
//! the SRPIC driver through a TAP, sorting (SRPIC) or not (the control, same
//! path). Senders run CUBIC; the S-sender has a static dupthresh
//! (tcp_reordering=3, tcp_max_reordering=3, tcp_recovery=0), the A-sender
//! Linux's defaults. SACK is off for reordering runs and on for drop runs.
//!
//! Per run: iperf3 goodput; retransmitted segments (sender's
//! TcpRetransSegs); duplicate ACKs the sender received (counted by the wire
//! on the reverse path: pure ACKs repeating the flow's last ACK number);
//! the receiver's TcpExtTCPOFOQueue; the driver's per-flow block sizes.
//! All per Mbit transferred. And GRO's merge ratio: segments per skb
//! reaching TCP, from the receiver's counters (see [`merge_ratio`]).
//!
//! `gro` selects the driver's receive path (wire::driver): the GRO path,
//! where one NAPI poll takes each delivered batch and GRO merges across it,
//! or the plain TAP path, where every frame is its own skb.

use crate::experiment::{Experiment, Report};
use crate::refuse_if;
use plot::text::Text;
use std::net::IpAddr;

use lab::{Lab, LabSpec};
use serde::Serialize;
use stats::{stat, Stat};
use wire::stats::{LatencySummary, SignedSummary};
use wire::{Delay, DriverConfig, DriverHandle, Impairment, Loss, WireConfig, WireHandle};

use crate::{wire_err, ExpError};

mod effect;
mod text;
pub use effect::{Change, Effect, GroEffect};

const PORT: u16 = 5211;
const MEAN_DELAY_NS: u64 = 2_500_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SenderKind {
    /// Static dupthresh 3 (the paper's S-Sender).
    Static,
    /// Linux's adaptive reordering threshold (A-Sender).
    Adaptive,
}

value_enum!(SenderKind, about);

impl SenderKind {
    pub const ALL: [SenderKind; 2] = [SenderKind::Static, SenderKind::Adaptive];

    /// "static" or "adaptive" (as in the JSON).
    pub fn name(self) -> &'static str {
        match self {
            SenderKind::Static => "static",
            SenderKind::Adaptive => "adaptive",
        }
    }

    /// What the sender does, in one line without a full stop.
    pub fn about(self) -> &'static str {
        match self {
            SenderKind::Static => "Static dupthresh 3 (the paper's S-sender)",
            SenderKind::Adaptive => "Linux's adaptive reordering threshold (the paper's A-sender)",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SrpicParams {
    /// Sender kinds, comma-separated.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "static,adaptive"
        )
    )]
    pub senders: Vec<SenderKind>,
    /// Parallel TCP flows (the paper's streams, iperf3 -P), one cell per
    /// value.
    #[cfg_attr(
        feature = "clap",
        arg(
            short = 'P',
            long = "flows",
            alias = "streams",
            value_delimiter = ',',
            default_value = "1,5,10"
        )
    )]
    pub streams: Vec<u32>,
    /// Relative spreads of the forward delay (sd / 2.5 ms).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "0.1,0.02,0.01,0.002")
    )]
    pub spreads: Vec<f64>,
    /// Forward loss rates of the drop runs (Table 5); `--drops` with no
    /// value: no drop runs.
    #[cfg_attr(
        feature = "clap",
        arg(long = "drops", value_name = "DROPS", value_delimiter = ',', num_args = 0..,
            default_value = "0.001,0.0001,0.00001,0.000001")
    )]
    pub drop_rates: Vec<f64>,
    /// Receive paths to run: GRO path (true) or plain TAP path (false).
    #[cfg_attr(feature = "clap", arg(skip = SrpicParams::default().gro))]
    pub gro: Vec<bool>,
    /// Repetitions of every configuration.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SrpicParams::default().repetitions))]
    pub repetitions: u32,
    /// Seconds of iperf3 traffic per run (the paper: 50).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SrpicParams::default().seconds))]
    pub seconds: u32,
    #[cfg_attr(feature = "clap", arg(skip = SrpicParams::default().rate_bps))]
    pub rate_bps: u64,
    #[cfg_attr(feature = "clap", arg(skip = SrpicParams::default().budget))]
    pub budget: usize,
    #[cfg_attr(feature = "clap", arg(skip = SrpicParams::default().coalesce_us))]
    pub coalesce_us: u64,
    #[cfg_attr(feature = "clap", arg(skip = SrpicParams::default().block_size))]
    pub block_size: u32,
    /// The reduced run ([`SrpicParams::quick`]); the binary's `--quick`.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub quick: bool,
}

impl Default for SrpicParams {
    fn default() -> Self {
        SrpicParams {
            senders: vec![SenderKind::Static, SenderKind::Adaptive],
            streams: vec![1, 5, 10],
            spreads: vec![0.10, 0.02, 0.01, 0.002],
            drop_rates: vec![0.001, 0.0001, 0.00001, 0.000001],
            gro: vec![false, true],
            repetitions: 3,
            seconds: 10,
            rate_bps: 1_000_000_000,
            budget: 64,
            coalesce_us: 50,
            block_size: 32,
            quick: false,
        }
    }
}

impl SrpicParams {
    /// About 2.5 minutes: the GRO path, the S-sender, 1 stream, spread 10%
    /// and no reordering (spread 0), 8 repetitions of 4 s, with and without
    /// SRPIC: enough for the checks of [`GroEffect`]. With 4 repetitions, one
    /// slow run without SRPIC (49-70 Mbit/s against 103-183 in the others,
    /// in 3 of 4 quick runs on this machine) pushed the interval of the
    /// reordered cell's change in duplicate ACKs past 0 in 2 of them.
    pub fn quick(mut self) -> Self {
        self.senders = vec![SenderKind::Static];
        self.streams = vec![1];
        self.spreads = vec![0.10, 0.0];
        self.drop_rates = Vec::new();
        self.gro = vec![true];
        self.repetitions = 8;
        self.seconds = 4;
        self.quick = true;
        self
    }

    pub fn check(&self) -> Result<(), ExpError> {
        refuse_if(
            self.repetitions == 0 || self.seconds == 0,
            "repetitions and seconds must be at least 1",
        )?;
        refuse_if(
            self.senders.is_empty() || self.streams.is_empty() || self.gro.is_empty(),
            "at least one sender kind, stream count and GRO setting",
        )?;
        refuse_if(
            self.streams.iter().any(|&s| s == 0 || s > 128),
            "streams must be 1..=128",
        )?;
        refuse_if(
            self.spreads.iter().any(|s| !(0.0..=1.0).contains(s)),
            "spreads are fractions of the mean delay, 0..=1",
        )?;
        refuse_if(
            self.drop_rates.iter().any(|s| !(0.0..=1.0).contains(s)),
            "drop rates are 0..=1",
        )?;
        Ok(())
    }
}

/// One configuration (a row of Table 4 or 5, one side).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cell {
    /// "reorder" (Table 4) or "drop" (Table 5).
    pub kind: &'static str,
    pub sender: SenderKind,
    pub streams: u32,
    /// Forward delay spread (reorder) or 0.
    pub spread: f64,
    /// Forward loss rate (drop) or 0.
    pub drop: f64,
    pub gro: bool,
    pub srpic: bool,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    #[serde(flatten)]
    pub cell: Cell,
    pub repetition: u32,
    pub mbit_per_s: f64,
    pub mbit: f64,
    pub retrans_segs: u64,
    /// Retransmission timeouts at the sender (nstat TcpExtTCPTimeouts):
    /// without SACK a timeout resends the whole window after the hole, so
    /// retransmissions then exceed the segments lost.
    pub timeouts: u64,
    pub dup_acks: u64,
    pub ofo_queue: u64,
    pub retrans_per_mbit: f64,
    pub dup_acks_per_mbit: f64,
    pub ofo_per_mbit: f64,
    pub mean_block: f64,
    pub reordered_by_wire: u64,
    /// Forward frames lost to congestion, not to the loss process: the
    /// wire's full queue or ring (`dropped_overload` + `ring_drops`);
    /// `None` (JSON null) when a ring's counter could not be read.
    pub wire_congestion_drops: Option<u64>,
    /// Frames the kernel dropped before the driver read them (ring full);
    /// `None` when the counter could not be read.
    pub driver_ring_drops: Option<u64>,
    /// Frames the driver wrote to the TAP.
    pub frames_delivered: u64,
    /// IP segments the receiver took in, a GRO'd skb counting as its
    /// segments (nstat IpExtIn{NoECT,ECT0,ECT1,CE}Pkts).
    pub segments_in: u64,
    /// Skbs handed to TCP (nstat TcpInSegs, one per skb).
    pub skbs_to_tcp: u64,
    /// `segments_in / skbs_to_tcp`; `None` (JSON null) when TCP got no skb.
    pub merge_ratio: Option<f64>,
    pub driver_added_delay_p99_us: f64,
    /// Device receive to TAP write, per packet (`wire::DriverStats::added_delay`).
    pub driver_added_delay: LatencySummary,
    /// Coalescing wait + batch processing time, per batch.
    pub poll_cycle: LatencySummary,
    /// What sorting adds per packet relative to ring order (0 without SRPIC).
    pub sort_added_delay: SignedSummary,
    /// From `push` to release, per packet the sorter held; `None` (JSON
    /// null) when it held none (no sorting, or nothing out of order).
    pub sorter_hold: Option<SignedSummary>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    #[serde(flatten)]
    pub cell: Cell,
    pub n: usize,
    pub mbit_per_s: Stat,
    pub retrans_per_mbit: Stat,
    pub dup_acks_per_mbit: Stat,
    pub ofo_per_mbit: Stat,
    pub mean_block: Stat,
    /// `None` (JSON null) when no run of the cell measured it.
    pub merge_ratio: Option<Stat>,
}

/// `steer exp srpic` ([`Experiment`]).
#[derive(Debug)]
pub struct SrpicExperiment;

/// A srpic run's result: its parameters and [`SrpicOutput`], enveloped.
pub type SrpicResult = Report<SrpicExperiment>;

impl Experiment for SrpicExperiment {
    const NAME: &'static str = "srpic";
    const DRAWS: bool = true;
    type Params = SrpicParams;
    type Output = SrpicOutput;

    params_do_the_sizing!();

    fn run(
        params: &SrpicParams,
        progress: &mut dyn FnMut(String),
    ) -> Result<SrpicOutput, ExpError> {
        run(params, |s| progress(s.progress_line()))
    }

    fn text(report: &SrpicResult) -> Text {
        report.render()
    }

    fn svg(report: &SrpicResult) -> Option<String> {
        Some(svg(report))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SrpicOutput {
    pub samples: Vec<Sample>,
    pub summaries: Vec<Summary>,
    /// Mean over the reordering cells of SRPIC / no-SRPIC duplicate ACKs
    /// per Mbit; `None` (JSON null) when no cell has both sides with a
    /// non-zero control (nothing to compare).
    pub dup_ack_ratio: Option<f64>,
    /// Mean over the reordering cells of SRPIC / no-SRPIC throughput;
    /// `None` as above.
    pub throughput_ratio: Option<f64>,
    /// Mean over the cells run on both paths of GRO path / TAP path
    /// throughput; `None` when no cell ran on both.
    pub gro_path_throughput_ratio: Option<f64>,
    /// What sorting does to GRO's merging and to duplicate ACKs.
    pub gro_effect: GroEffect,
}

fn program_err(program: &str, detail: impl ToString) -> ExpError {
    ExpError::Program {
        program: program.into(),
        detail: detail.to_string(),
    }
}

/// A driver figure every run that moved data has (the data went through
/// the driver); absent means the driver saw none of it, and the run is void.
fn driver_measured<T>(what: &str, value: Option<T>) -> Result<T, ExpError> {
    value.ok_or_else(|| {
        program_err(
            "SRPIC driver",
            format!("measured no {what}: no TCP data went through the driver"),
        )
    })
}

/// Absolute counters `names` (nstat's names) of a host's namespace, from
/// its /proc/net/snmp and netstat; a counter that is not there is an error
/// naming it (0 would read as "never happened").
fn nstat(lab: &Lab, host: &str, names: &[&str]) -> Result<Vec<u64>, ExpError> {
    let netns = &lab.host(host)?.netns;
    let counters = host::snmp::Counters::read(netns).map_err(lab::LabError::from)?;
    pick_counters(&counters, host, names)
}

/// The counters `names` of `counters`, each or an error naming it.
fn pick_counters(
    counters: &host::snmp::Counters,
    host: &str,
    names: &[&str],
) -> Result<Vec<u64>, ExpError> {
    names
        .iter()
        .map(|name| {
            counters.get(name).ok_or_else(|| ExpError::MissingCounter {
                program: "/proc/net/snmp and netstat".into(),
                host: host.into(),
                counter: (*name).into(),
            })
        })
        .collect()
}

fn configure_sender(lab: &Lab, kind: SenderKind, sack: bool) -> Result<(), ExpError> {
    let snd = lab.sender().netns.clone();
    let sysctl = |key: &str, value: &str| {
        host::netns::set_sysctl(&snd, key, value)
            .map_err(|e| ExpError::from(lab::LabError::from(e)))
    };
    // A namespace may only default to a congestion control listed in
    // tcp_allowed_congestion_control (EPERM otherwise); iperf3 -C cubic sets
    // it per socket in any case, so this is best effort.
    let _ = sysctl("net.ipv4.tcp_congestion_control", "cubic");
    sysctl("net.ipv4.tcp_sack", if sack { "1" } else { "0" })?;
    let (reordering, max, recovery) = match kind {
        SenderKind::Static => ("3", "3", "0"),
        SenderKind::Adaptive => ("3", "300", "1"),
    };
    sysctl("net.ipv4.tcp_reordering", reordering)?;
    sysctl("net.ipv4.tcp_max_reordering", max)?;
    sysctl("net.ipv4.tcp_recovery", recovery)?;
    // No cached metrics (ssthresh, reordering) carried between runs.
    sysctl("net.ipv4.tcp_no_metrics_save", "1")?;
    Ok(())
}

/// The receiver's counters behind the merge ratio: IP segments (the ECN
/// class counters add `gso_segs` per skb, net/ipv4/ip_input.c
/// `ip_rcv_core`) and TCP's skbs (TcpInSegs: one per skb, net/ipv4/tcp_ipv4.c
/// `tcp_v4_rcv`).
const RCV_COUNTERS: [&str; 6] = [
    "TcpExtTCPOFOQueue",
    "TcpInSegs",
    "IpExtInNoECTPkts",
    "IpExtInECT0Pkts",
    "IpExtInECT1Pkts",
    "IpExtInCEPkts",
];

/// GRO's merge ratio: segments per skb reaching TCP; `None` without an skb.
pub fn merge_ratio(segments_in: u64, skbs_to_tcp: u64) -> Option<f64> {
    (skbs_to_tcp > 0).then(|| segments_in as f64 / skbs_to_tcp as f64)
}

/// One iperf3 run (CUBIC, as in the paper): receiver goodput, Mbit/s.
fn iperf(lab: &Lab, server: IpAddr, streams: u32, seconds: u32) -> Result<f64, ExpError> {
    let rcv = lab.receiver().name.clone();
    let _server = crate::iperf::Server::start(lab.command(&rcv, "iperf3")?, server, PORT)?;
    let make = || {
        let mut cmd = lab.command(&lab.sender().name, "iperf3")?;
        cmd.args(["-C", "cubic"]);
        Ok(cmd)
    };
    let run = crate::iperf::run_client(make, server, PORT, streams, seconds)?;
    Ok(run.bits_per_second / 1e6)
}

fn run_cell(
    lab: &Lab,
    params: &SrpicParams,
    cell: Cell,
    repetition: u32,
) -> Result<Sample, ExpError> {
    configure_sender(lab, cell.sender, cell.kind == "drop")?;
    let w = lab
        .wire()
        .ok_or_else(|| ExpError::Parameter("lab without a wire".into()))?;
    let rcv = lab.receiver().clone();
    let mut wcfg = WireConfig::new(Some(&w.netns), &w.sender_dev, &w.receiver_dev);
    wcfg.seed = 0x5eed ^ u64::from(repetition) << 32 ^ (cell.spread * 1e6) as u64;
    wcfg.a_to_b = Impairment {
        delay: if cell.kind == "reorder" {
            Delay::Normal {
                mean_ns: MEAN_DELAY_NS,
                sd_ns: (MEAN_DELAY_NS as f64 * cell.spread) as u64,
            }
        } else {
            Delay::Constant { ns: MEAN_DELAY_NS }
        },
        loss: if cell.drop > 0.0 {
            Loss::Uniform { p: cell.drop }
        } else {
            Loss::None
        },
        rate_bps: params.rate_bps,
        ..Impairment::default()
    };
    wcfg.b_to_a = Impairment {
        delay: Delay::Constant { ns: MEAN_DELAY_NS },
        rate_bps: params.rate_bps,
        ..Impairment::default()
    };
    let mut dcfg = DriverConfig::new(&rcv.netns, &rcv.dev, rcv.ipv4, 24);
    dcfg.sort = cell.srpic;
    dcfg.gro = cell.gro;
    dcfg.budget = params.budget;
    dcfg.coalesce_us = params.coalesce_us;
    dcfg.sorter.block_size = params.block_size;
    let driver = DriverHandle::spawn(&dcfg).map_err(wire_err)?;
    let wire = WireHandle::spawn(&wcfg).map_err(wire_err)?;
    let snd_names = ["TcpRetransSegs", "TcpExtTCPTimeouts"];
    let s0 = nstat(lab, &lab.sender().name, &snd_names)?;
    let r0 = nstat(lab, &rcv.name, &RCV_COUNTERS)?;
    let mbit_per_s = iperf(lab, IpAddr::V4(rcv.ipv4), cell.streams, params.seconds)?;
    let s1 = nstat(lab, &lab.sender().name, &snd_names)?;
    let r1 = nstat(lab, &rcv.name, &RCV_COUNTERS)?;
    let ws = wire.stop().map_err(wire_err)?;
    let ds = driver.stop().map_err(wire_err)?;
    // Every count below is per Mbit: a run that moved nothing (or a NaN
    // rate) has none.
    if mbit_per_s.is_nan() || mbit_per_s <= 0.0 {
        return Err(program_err(
            "iperf3 -c",
            format!(
                "no goodput through the wire in {} s ({cell:?})",
                params.seconds
            ),
        ));
    }
    let mbit = mbit_per_s * f64::from(params.seconds);
    let retrans_segs = s1[0].saturating_sub(s0[0]);
    let timeouts = s1[1].saturating_sub(s0[1]);
    let rcv_delta: Vec<u64> = r1
        .iter()
        .zip(&r0)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let ofo_queue = rcv_delta[0];
    let skbs_to_tcp = rcv_delta[1];
    let segments_in: u64 = rcv_delta[2..].iter().sum();
    let dup_acks = ws.b_to_a.dup_acks;
    let driver_added_delay = driver_measured("added delay", ds.added_delay)?;
    Ok(Sample {
        cell,
        repetition,
        mbit_per_s,
        mbit,
        retrans_segs,
        timeouts,
        dup_acks,
        ofo_queue,
        retrans_per_mbit: retrans_segs as f64 / mbit,
        dup_acks_per_mbit: dup_acks as f64 / mbit,
        ofo_per_mbit: ofo_queue as f64 / mbit,
        mean_block: driver_measured("per-flow block size", ds.mean_block)?,
        reordered_by_wire: ws.a_to_b.counters.reordered,
        wire_congestion_drops: ws
            .a_to_b
            .counters
            .ring_drops
            .map(|ring| ws.a_to_b.counters.dropped_overload + ring),
        driver_ring_drops: ds.ring_drops,
        frames_delivered: ds.packets_out,
        segments_in,
        skbs_to_tcp,
        merge_ratio: merge_ratio(segments_in, skbs_to_tcp),
        driver_added_delay_p99_us: driver_added_delay.p99_us,
        driver_added_delay,
        poll_cycle: driver_measured("poll cycle", ds.poll_cycle)?,
        sort_added_delay: driver_measured("sorting's added delay", ds.sort_added_delay)?,
        sorter_hold: ds.sorter_hold,
    })
}

/// The cells to run, in order, each once (a sender, stream count, spread
/// or drop rate named twice runs once).
pub fn cells(params: &SrpicParams) -> Vec<Cell> {
    let mut out = Vec::new();
    let mut push = |cell: Cell| {
        if !out.contains(&cell) {
            out.push(cell);
        }
    };
    for &gro in &params.gro {
        for &sender in &params.senders {
            for &streams in &params.streams {
                for &spread in &params.spreads {
                    for srpic in [false, true] {
                        push(Cell {
                            kind: "reorder",
                            sender,
                            streams,
                            spread,
                            drop: 0.0,
                            gro,
                            srpic,
                        });
                    }
                }
            }
            // Table 5: one stream.
            for &drop in &params.drop_rates {
                for srpic in [false, true] {
                    push(Cell {
                        kind: "drop",
                        sender,
                        streams: 1,
                        spread: 0.0,
                        drop,
                        gro,
                        srpic,
                    });
                }
            }
        }
    }
    out
}

/// Runs the experiment; `progress` sees every sample.
fn run(params: &SrpicParams, mut progress: impl FnMut(&Sample)) -> Result<SrpicOutput, ExpError> {
    params.check()?;
    let spec = LabSpec::wired(&lab::unique_name("sp"));
    let lab = Lab::up(&spec)?.teardown_on_drop();
    let cells = cells(params);
    let mut samples = Vec::new();
    for repetition in 0..params.repetitions {
        for &cell in &cells {
            let s = run_cell(&lab, params, cell, repetition)?;
            progress(&s);
            samples.push(s);
        }
    }
    let summaries: Vec<Summary> = cells.iter().filter_map(|c| summary(*c, &samples)).collect();
    Ok(SrpicOutput {
        dup_ack_ratio: ratio(&summaries, &|s| s.dup_acks_per_mbit.mean),
        throughput_ratio: ratio(&summaries, &|s| s.mbit_per_s.mean),
        gro_path_throughput_ratio: gro_path_ratio(&summaries),
        gro_effect: effect::gro_effect(&samples),
        summaries,
        samples,
    })
}

/// One cell's statistics; `None` when the cell has no sample.
fn summary(cell: Cell, samples: &[Sample]) -> Option<Summary> {
    let of: Vec<&Sample> = samples.iter().filter(|s| s.cell == cell).collect();
    let st = |f: &dyn Fn(&Sample) -> f64| stat(&of.iter().map(|s| f(s)).collect::<Vec<_>>());
    Some(Summary {
        cell,
        n: of.len(),
        mbit_per_s: st(&|s| s.mbit_per_s)?,
        retrans_per_mbit: st(&|s| s.retrans_per_mbit)?,
        dup_acks_per_mbit: st(&|s| s.dup_acks_per_mbit)?,
        ofo_per_mbit: st(&|s| s.ofo_per_mbit)?,
        mean_block: st(&|s| s.mean_block)?,
        merge_ratio: stat(&of.iter().filter_map(|s| s.merge_ratio).collect::<Vec<_>>()),
    })
}

/// Mean over the cells run on both receive paths of GRO path / TAP path
/// throughput; `None` when no cell ran on both.
fn gro_path_ratio(summaries: &[Summary]) -> Option<f64> {
    let pairs: Vec<f64> = summaries
        .iter()
        .filter(|s| s.cell.gro)
        .filter_map(|on| {
            let tap = summaries.iter().find(|o| {
                o.cell
                    == Cell {
                        gro: false,
                        ..on.cell
                    }
            })?;
            (tap.mbit_per_s.mean > 0.0).then(|| on.mbit_per_s.mean / tap.mbit_per_s.mean)
        })
        .collect();
    stats::mean(&pairs)
}

/// Mean over the reordering cells (spread above 0) of `f(SRPIC) / f(no
/// SRPIC)`, over the cells that have both sides and a non-zero control;
/// `None` when there is no such cell.
fn ratio(summaries: &[Summary], f: &dyn Fn(&Summary) -> f64) -> Option<f64> {
    let pairs: Vec<f64> = summaries
        .iter()
        .filter(|s| s.cell.srpic && s.cell.kind == "reorder" && s.cell.spread > 0.0)
        .filter_map(|on| {
            let off = summaries.iter().find(|o| {
                o.cell
                    == Cell {
                        srpic: false,
                        ..on.cell
                    }
            })?;
            (f(off) > 0.0).then(|| f(on) / f(off))
        })
        .collect();
    stats::mean(&pairs)
}

/// A grouped bar chart: throughput without and with SRPIC per cell (mean
/// and 95% CI); a side without samples has no bar.
pub fn svg(result: &SrpicResult) -> String {
    chart(
        &result.summaries,
        "SRPIC: TCP throughput, mean and 95% CI",
        "throughput (Mbit/s)",
        &|s| Some(s.mbit_per_s),
    )
}

/// The same chart of GRO's merge ratio (segments per skb reaching TCP)
/// over the GRO-path cells; `None` when no cell ran on the GRO path.
pub fn merge_svg(result: &SrpicResult) -> Option<String> {
    let gro: Vec<Summary> = result
        .summaries
        .iter()
        .filter(|s| s.cell.gro)
        .cloned()
        .collect();
    (!gro.is_empty()).then(|| {
        chart(
            &gro,
            "SRPIC on the GRO path: segments per skb reaching TCP, mean and 95% CI",
            "GRO merge ratio (segments / skb)",
            &|s| s.merge_ratio,
        )
    })
}

/// Every cell once, as its no-SRPIC side, in the order measured; bars of
/// `value` without and with SRPIC.
fn chart(
    summaries: &[Summary],
    title: &str,
    y_label: &str,
    value: &dyn Fn(&Summary) -> Option<Stat>,
) -> String {
    let mut cells: Vec<Cell> = Vec::new();
    for s in summaries {
        let off = Cell {
            srpic: false,
            ..s.cell
        };
        if !cells.contains(&off) {
            cells.push(off);
        }
    }
    let side = |c: &Cell, srpic: bool| {
        summaries
            .iter()
            .find(|s| s.cell == Cell { srpic, ..*c })
            .and_then(value)
            .map(|v| plot::Value::with_ci(v.mean, v.ci95))
    };
    let label = |c: &Cell| {
        let what = if c.kind == "reorder" {
            format!("{:?} {}s {}%", c.sender, c.streams, c.spread * 100.0)
        } else {
            format!("{:?} drop {}%", c.sender, c.drop * 100.0)
        };
        format!("{what}\n{}", if c.gro { "GRO path" } else { "TAP path" })
    };
    plot::BarChart::new(title)
        .size((120 * cells.len() + 80).max(640) as f64, 360.0)
        .x_label("cell (sender, flows, delay spread or drop rate, receive path)")
        .y_label(y_label)
        .groups(cells.iter().map(label))
        .series("no SRPIC", cells.iter().map(|c| side(c, false)).collect())
        .series("SRPIC", cells.iter().map(|c| side(c, true)).collect())
        .note("whiskers: 95% CI")
        .svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "clap")]
    #[test]
    fn the_command_line_defaults_are_the_library_defaults() {
        assert!(crate::clap_defaults_are_the_library_defaults::<SrpicParams>());
        let p: SrpicParams =
            crate::parse_params(&["--streams", "2,4", "--drops", "--senders", "adaptive"]).unwrap();
        assert_eq!(p.streams, vec![2, 4]);
        assert!(p.drop_rates.is_empty());
        assert_eq!(p.senders, vec![SenderKind::Adaptive]);
        assert!(crate::parse_params::<SrpicParams>(&["--senders", "lazy"]).is_err());
    }

    #[test]
    fn sender_names_are_the_json_names() {
        for kind in SenderKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
            assert!(!kind.about().ends_with('.'));
        }
    }

    #[test]
    fn quick_is_small_and_valid() {
        let p = SrpicParams::default().quick();
        assert!(p.check().is_ok());
        // reorder: 1 sender x 1 stream x 2 spreads x 2, no drop runs
        assert_eq!(cells(&p).len(), 4);
        assert!(cells(&p).iter().all(|c| c.gro && c.kind == "reorder"));
        let full = SrpicParams::default();
        assert_eq!(cells(&full).len(), 2 * 2 * (3 * 4 * 2 + 4 * 2));
    }

    #[test]
    fn a_value_named_twice_runs_once() {
        let p = SrpicParams::default().quick();
        let twice = SrpicParams {
            senders: [p.senders.clone(), p.senders.clone()].concat(),
            streams: vec![1, 1],
            spreads: [p.spreads.clone(), p.spreads.clone()].concat(),
            gro: vec![true, true],
            ..p.clone()
        };
        assert_eq!(cells(&twice), cells(&p));
        let drops = |d: Vec<f64>| SrpicParams {
            drop_rates: d,
            ..p.clone()
        };
        assert_eq!(cells(&drops(vec![0.01, 0.01])), cells(&drops(vec![0.01])));
    }

    #[test]
    fn bad_params() {
        let p = SrpicParams {
            spreads: vec![2.0],
            ..SrpicParams::default()
        };
        assert!(p.check().is_err());
    }

    pub(super) fn cell(kind: &'static str, srpic: bool) -> Cell {
        Cell {
            kind,
            sender: SenderKind::Static,
            streams: 1,
            spread: if kind == "reorder" { 0.01 } else { 0.0 },
            drop: if kind == "drop" { 0.0001 } else { 0.0 },
            gro: false,
            srpic,
        }
    }

    pub(super) fn summary_of(c: Cell, mbit: f64, dup: f64) -> Summary {
        let st = |x: f64| stat(&[x]).unwrap();
        Summary {
            cell: c,
            n: 1,
            mbit_per_s: st(mbit),
            retrans_per_mbit: st(0.0),
            dup_acks_per_mbit: st(dup),
            ofo_per_mbit: st(0.0),
            mean_block: st(1.0),
            merge_ratio: None,
        }
    }

    #[test]
    fn ratios_without_an_on_off_pair_are_absent() {
        let dup = |s: &Summary| s.dup_acks_per_mbit.mean;
        // Nothing at all.
        assert_eq!(ratio(&[], &dup), None);
        // SRPIC side only, or only drop cells: no reordering pair.
        let only_on = [summary_of(cell("reorder", true), 900.0, 1.0)];
        assert_eq!(ratio(&only_on, &dup), None);
        let drops = [
            summary_of(cell("drop", false), 900.0, 4.0),
            summary_of(cell("drop", true), 900.0, 1.0),
        ];
        assert_eq!(ratio(&drops, &dup), None);
        // A control with no duplicate ACK: nothing to divide by.
        let zero = [
            summary_of(cell("reorder", false), 900.0, 0.0),
            summary_of(cell("reorder", true), 900.0, 0.0),
        ];
        assert_eq!(ratio(&zero, &dup), None);
        let pair = [
            summary_of(cell("reorder", false), 800.0, 4.0),
            summary_of(cell("reorder", true), 900.0, 1.0),
        ];
        assert_eq!(ratio(&pair, &dup), Some(0.25));
        // An in-order cell (spread 0) has nothing to reorder: not counted.
        let in_order = |srpic, d| {
            let mut s = summary_of(cell("reorder", srpic), 900.0, d);
            s.cell.spread = 0.0;
            s
        };
        assert_eq!(
            ratio(&[in_order(false, 1.0), in_order(true, 5.0)], &dup),
            None
        );
        // A cell without samples has no summary, so no pair.
        assert!(summary(cell("reorder", false), &[]).is_none());
    }

    #[test]
    fn absent_ratio_is_json_null() {
        let r = SrpicOutput {
            samples: Vec::new(),
            summaries: Vec::new(),
            dup_ack_ratio: None,
            throughput_ratio: None,
            gro_path_throughput_ratio: None,
            gro_effect: GroEffect::default(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["dup_ack_ratio"].is_null() && v["throughput_ratio"].is_null());
    }

    pub(super) fn result_of(summaries: Vec<Summary>) -> SrpicResult {
        let output = SrpicOutput {
            samples: Vec::new(),
            summaries,
            dup_ack_ratio: None,
            throughput_ratio: None,
            gro_path_throughput_ratio: None,
            gro_effect: GroEffect::default(),
        };
        Report::new(SrpicParams::default().quick(), output)
    }

    #[test]
    fn figure_pairs_each_cell_without_and_with_srpic() {
        let mut on = summary_of(cell("reorder", true), 900.0, 1.0);
        on.mbit_per_s = stat(&[880.0, 900.0, 920.0]).unwrap();
        let r = result_of(vec![
            summary_of(cell("reorder", false), 800.0, 4.0),
            on,
            summary_of(cell("drop", false), 700.0, 4.0),
            summary_of(cell("drop", true), 750.0, 1.0),
        ]);
        let o = plot::outline(&svg(&r)).unwrap();
        assert_eq!(o.title, "SRPIC: TCP throughput, mean and 95% CI");
        assert_eq!(o.y_label, "throughput (Mbit/s)");
        assert!(o.x_label.starts_with("cell"));
        assert_eq!(o.legend, vec!["no SRPIC", "SRPIC"]);
        assert_eq!(
            o.x_ticks,
            vec!["Static 1s 1%\nTAP path", "Static drop 0.01%\nTAP path"]
        );
        // One sample per side has no interval; the three-sample side has.
        assert_eq!((o.bars, o.whiskers, o.not_available), (4, 1, 0));
    }

    #[test]
    fn merge_figure_has_the_gro_path_cells_only() {
        let mut on = summary_of(cell("reorder", true), 900.0, 1.0);
        on.cell.gro = true;
        on.merge_ratio = stat(&[4.0, 4.2, 4.4]);
        let mut off = summary_of(cell("reorder", false), 800.0, 4.0);
        off.cell.gro = true;
        off.merge_ratio = stat(&[1.2, 1.2, 1.3]);
        let tap = summary_of(cell("drop", false), 700.0, 4.0);
        // The TAP path alone: no merge figure.
        assert!(merge_svg(&result_of(vec![tap.clone()])).is_none());
        let o = plot::outline(&merge_svg(&result_of(vec![off, on, tap])).unwrap()).unwrap();
        assert_eq!(o.y_label, "GRO merge ratio (segments / skb)");
        assert_eq!(o.x_ticks, vec!["Static 1s 1%\nGRO path"]);
        assert_eq!((o.bars, o.whiskers, o.not_available), (2, 2, 0));
    }

    #[test]
    fn figure_marks_a_side_without_samples() {
        let r = result_of(vec![summary_of(cell("reorder", true), 900.0, 1.0)]);
        let o = plot::outline(&svg(&r)).unwrap();
        assert_eq!((o.bars, o.not_available), (1, 1));
        assert_eq!(
            o.note.as_deref(),
            Some("n/a: not measured; whiskers: 95% CI")
        );
        let empty = plot::outline(&svg(&result_of(Vec::new()))).unwrap();
        assert_eq!((empty.bars, empty.x_ticks.len()), (0, 0));
    }

    #[test]
    fn a_driver_figure_not_measured_voids_the_run() {
        let err = driver_measured::<f64>("poll cycle", None).unwrap_err();
        assert!(err.to_string().contains("poll cycle"), "{err}");
        assert_eq!(driver_measured("poll cycle", Some(2.0)).unwrap(), 2.0);
    }

    #[test]
    fn counters_are_picked_and_a_missing_one_is_named() {
        let text = "Tcp: RetransSegs MaxConn\nTcp: 12 -1\nTcpExt: TCPOFOQueue\nTcpExt: 0\n";
        let counters: host::snmp::Counters = host::snmp::parse(text).unwrap().into_iter().collect();
        assert_eq!(
            pick_counters(&counters, "snd", &["TcpRetransSegs", "TcpExtTCPOFOQueue"]).unwrap(),
            vec![12, 0]
        );
        for (missing, why) in [("TcpExtTCPTimeouts", "absent"), ("TcpMaxConn", "negative")] {
            match pick_counters(&counters, "rcv", &["TcpRetransSegs", missing]) {
                Err(e @ ExpError::MissingCounter { .. }) => {
                    let text = e.to_string();
                    assert!(
                        text.contains(missing) && text.contains("rcv"),
                        "{why}: {text}"
                    );
                }
                other => panic!("{why}: expected a missing counter, got {other:?}"),
            }
        }
    }
}
