//! `steer exp loss`: goodput of real TCP transfers through the lab's wire
//! under random and bursty loss, the toe data path against Linux TCP on
//! the same wire (issue 23, section 4; docs/loss.md).
//!
//! One lab of two hosts joined by the wire (`lab::LabSpec::wired`). Each
//! setting of the grid is a loss process on the data direction (uniform,
//! or Gilbert-Elliott bursts of the same mean rate), a round-trip time
//! split evenly between the two directions, and a rate limit each way.
//! In each setting, one transfer per stack:
//!
//! - `receive`: a Linux sender in the sender's namespace, with the
//!   congestion control asked for (reno, cubic, bbr), to the data path (a
//!   toe endpoint on the receiver's AF_XDP port, each engine in turn), and
//!   to Linux TCP on the receiver (the reference);
//! - `send`: the data path with its NewReno ([`toe::cc::Policy::NewReno`])
//!   to a Linux receiver in the sender's namespace, and Linux reno on the
//!   receiver's host to the same receiver (the reference).
//!
//! A transfer is one connection that sends [`pattern`] for `seconds`, then
//! closes; the receiver checks every byte and takes the goodput from its
//! first byte to its last. Loss counts are the wire's (the data
//! direction's drops); retransmissions and timeouts are the sender's: the
//! namespace's counters for a Linux sender (one connection per namespace
//! at a time: `TcpRetransSegs`, `TcpExtTCPTimeouts`), the endpoint's for
//! the data path ([`toe::Endpoint::flow_info`]'s `retrans_segs`,
//! [`toe::Counters`]'s `timeouts`). Whatever was not measured is null.
//!
//! Every stack of a setting sees the wire with the same seed in a
//! repetition, the order of the stacks rotating between repetitions.

mod text;

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cpus::{pin, PinnedCpus};
use lab::{Host, Lab, LabError, LabSpec};
use plot::text::Text;
use serde::{Serialize, Serializer};
use stats::Stat;
use toe::cc::Policy;
use toe::ooo::OooBound;
use toe::stages::ConnIdx;
use toe::{Endpoint, EndpointConfig, EngineName, ToeError};
use wire::sched::DirectionCounters;
use wire::{Delay, Impairment, Loss, WireConfig, WireHandle};

pub use crate::datapath::Stack;
use crate::datapath::{endpoint, pattern, toe_addr, toe_err, Engines, StreamCheck};
use crate::experiment::{Experiment, Report};
use crate::{refuse_if, wire_err, ExpError};

const PORT: u16 = 5401;
/// How long a transfer may take beyond its `seconds` (connecting, and
/// draining what was queued when sending stopped) before it counts as
/// failed.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// Linux's largest receive buffer by default (`tcp_rmem`'s maximum,
/// 6 MiB): the data path's buffers are as large, so neither stack's window
/// caps a 20 ms path at 1 Gbit/s (2.5 MB in flight) before loss does.
const TOE_BUFFER: u32 = 6 << 20;
/// The mean length of a Gilbert-Elliott burst, frames: the bad state
/// loses every frame and is left with probability 1/4 per frame.
const BURST_FRAMES: f64 = 4.0;
/// The machine-wide list of congestion controls a network namespace other
/// than the initial one may make its default (net/ipv4/tcp_cong.c
/// `tcp_set_default_congestion_control`: EPERM for a restricted one).
const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// Which way the data flows, seen from the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// A Linux sender to the data path.
    Receive,
    /// The data path to a Linux receiver.
    Send,
}

value_enum!(Direction, about);

impl Direction {
    pub const ALL: [Direction; 2] = [Direction::Receive, Direction::Send];

    pub fn name(self) -> &'static str {
        match self {
            Direction::Receive => "receive",
            Direction::Send => "send",
        }
    }

    pub fn about(self) -> &'static str {
        match self {
            Direction::Receive => "A Linux sender (each --cc) to the data path",
            Direction::Send => "The data path's NewReno to a Linux receiver",
        }
    }
}

/// A Linux sender's congestion control (TCP_CONGESTION's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SenderCc {
    Reno,
    Cubic,
    Bbr,
}

value_enum!(SenderCc, about);

impl SenderCc {
    pub const ALL: [SenderCc; 3] = [SenderCc::Reno, SenderCc::Cubic, SenderCc::Bbr];

    pub fn name(self) -> &'static str {
        match self {
            SenderCc::Reno => "reno",
            SenderCc::Cubic => "cubic",
            SenderCc::Bbr => "bbr",
        }
    }

    pub fn about(self) -> &'static str {
        match self {
            SenderCc::Reno => "NewReno (RFC 6582), as the data path sends",
            SenderCc::Cubic => "CUBIC (RFC 9438)",
            SenderCc::Bbr => "BBR (v1, Linux's tcp_bbr)",
        }
    }
}

/// How the wire loses frames at a given mean rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossModel {
    Uniform,
    Bursty,
}

value_enum!(LossModel, about);

impl LossModel {
    pub const ALL: [LossModel; 2] = [LossModel::Uniform, LossModel::Bursty];

    pub fn name(self) -> &'static str {
        match self {
            LossModel::Uniform => "uniform",
            LossModel::Bursty => "bursty",
        }
    }

    pub fn about(self) -> &'static str {
        match self {
            LossModel::Uniform => "Each frame lost independently",
            LossModel::Bursty => {
                "Gilbert-Elliott: bursts of 4 frames on average, the same mean rate"
            }
        }
    }
}

/// A percentage given as `0.1` or `0.1%`; its range is checked with the
/// other parameters ([`LossParams::check`]), so a bad one is one line.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Percent(pub f64);

impl std::str::FromStr for Percent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        t.strip_suffix('%')
            .unwrap_or(t)
            .trim()
            .parse::<f64>()
            .map(Percent)
            .map_err(|_| format!("'{s}' is not a percentage (0.1 or 0.1%)"))
    }
}

impl std::fmt::Display for Percent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", self.0)
    }
}

/// A link rate each way, bit/s; 0 is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(pub u64);

impl std::str::FromStr for Rate {
    type Err = String;
    /// `1gbit`, `500mbit`, `unlimited` (or 0).
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("unlimited") {
            return Ok(Rate(0));
        }
        wire::impair::parse_rate_bps(s)
            .map(Rate)
            .ok_or_else(|| format!("rate '{s}': use 1gbit, 500mbit or unlimited"))
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => f.write_str("unlimited"),
            b if b % 1_000_000_000 == 0 => write!(f, "{}gbit", b / 1_000_000_000),
            b if b % 1_000_000 == 0 => write!(f, "{}mbit", b / 1_000_000),
            b => write!(f, "{b}bit"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The engines by their command-line names (`toe::EngineName` is not
/// serializable itself).

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LossParams {
    /// Mean loss rates of the data direction, percent, comma-separated
    /// (`0.1` or `0.1%`); 0 is a setting without loss.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_name = "PERCENT",
            value_delimiter = ',',
            default_value = "0,0.01,0.1,1,2"
        )
    )]
    pub loss: Vec<Percent>,
    /// How the wire loses frames at each rate, comma-separated.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "uniform,bursty"
        )
    )]
    pub model: Vec<LossModel>,
    /// Round-trip times, ms, comma-separated (half each way).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_name = "MS",
            value_delimiter = ',',
            default_value = "0.2,2,20"
        )
    )]
    pub rtt: Vec<f64>,
    /// Link rates each way, comma-separated: 1gbit, 500mbit, unlimited.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_name = "RATE",
            value_delimiter = ',',
            default_value = "1gbit,unlimited"
        )
    )]
    pub rate: Vec<Rate>,
    #[cfg_attr(feature = "clap", command(flatten))]
    #[serde(flatten)]
    pub engines: Engines,
    /// Directions, comma-separated.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "receive,send"
        )
    )]
    pub direction: Vec<Direction>,
    /// The Linux sender's congestion controls for the receive direction,
    /// comma-separated (the send direction is NewReno against reno).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "reno,cubic,bbr"
        )
    )]
    pub cc: Vec<SenderCc>,
    /// Out-of-order intervals the data path keeps (a number or
    /// `unbounded`). On the Laminar engine the program's one interval
    /// counts: 1 is the thesis's receiver, which drops what does not
    /// touch its interval.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "N", default_value_t = OooBound::default())
    )]
    pub ooo_bound: OooBound,
    /// Seconds each transfer sends for.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "SECONDS", default_value_t = LossParams::default().seconds)
    )]
    pub seconds: f64,
    /// Repetitions of the whole grid (the stacks' order rotating).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "N", default_value_t = LossParams::default().repetitions)
    )]
    pub repetitions: u32,
    /// The reduced run ([`LossParams::quick`]); the binary's `--quick`.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub quick: bool,
}

impl Default for LossParams {
    /// The full grid.
    fn default() -> Self {
        LossParams {
            loss: [0.0, 0.01, 0.1, 1.0, 2.0].map(Percent).to_vec(),
            model: LossModel::ALL.to_vec(),
            rtt: vec![0.2, 2.0, 20.0],
            rate: vec![Rate(1_000_000_000), Rate(0)],
            engines: Engines::default(),
            direction: Direction::ALL.to_vec(),
            cc: SenderCc::ALL.to_vec(),
            ooo_bound: OooBound::default(),
            seconds: 5.0,
            repetitions: 2,
            quick: false,
        }
    }
}

impl LossParams {
    /// The reduced run for CI and the matrix (under 2 minutes): 0.1% and
    /// 1% uniform loss, 2 ms, 1 Gbit/s, both directions, the default
    /// engine, a reno sender, 3 s transfers, 3 repetitions (about 90 s;
    /// on two shared cores one repetition can halve a cell's goodput, and
    /// a third dilutes one such outlier in the cell's mean).
    pub fn quick(mut self) -> Self {
        self.loss = vec![Percent(0.1), Percent(1.0)];
        self.model = vec![LossModel::Uniform];
        self.rtt = vec![2.0];
        self.rate = vec![Rate(1_000_000_000)];
        self.engines = Engines::of(&[EngineName::default()]);
        self.direction = Direction::ALL.to_vec();
        self.cc = vec![SenderCc::Reno];
        self.seconds = 3.0;
        self.repetitions = 3;
        self.quick = true;
        self
    }

    pub fn check(&self) -> Result<(), ExpError> {
        refuse_if(self.loss.is_empty(), "--loss needs at least one rate")?;
        refuse_if(
            self.loss.iter().any(|p| !(0.0..=50.0).contains(&p.0)),
            "--loss must be 0 to 50 percent",
        )?;
        refuse_if(self.model.is_empty(), "--model needs at least one model")?;
        refuse_if(self.rtt.is_empty(), "--rtt needs at least one value")?;
        refuse_if(
            self.rtt.iter().any(|r| !(0.0..=1000.0).contains(r)),
            "--rtt must be 0 to 1000 ms",
        )?;
        refuse_if(self.rate.is_empty(), "--rate needs at least one rate")?;
        refuse_if(
            self.rate.iter().any(|r| r.0 != 0 && r.0 < 1_000_000),
            "--rate must be at least 1mbit (or unlimited)",
        )?;
        refuse_if(
            self.engines.engine.is_empty(),
            "--engine needs at least one engine",
        )?;
        refuse_if(
            self.direction.is_empty(),
            "--direction needs at least one direction",
        )?;
        refuse_if(
            self.direction.contains(&Direction::Receive) && self.cc.is_empty(),
            "--cc needs at least one congestion control for the receive direction",
        )?;
        refuse_if(
            !(self.seconds > 0.0 && self.seconds <= 3600.0),
            "--seconds must be more than 0 and at most 3600",
        )?;
        refuse_if(self.repetitions == 0, "--repetitions must be at least 1")?;
        refuse_if(
            self.engines.engine.contains(&EngineName::Laminar)
                && self.ooo_bound == OooBound::Intervals(0),
            "--ooo-bound 0 with the Laminar engine: its program always keeps one interval (1 is the thesis's receiver)",
        )?;
        let twice = |names: Vec<String>| {
            let mut sorted = names.clone();
            sorted.sort();
            sorted.dedup();
            sorted.len() != names.len()
        };
        for (flag, names) in [
            (
                "--loss",
                self.loss.iter().map(|p| p.0.to_string()).collect(),
            ),
            (
                "--model",
                self.model.iter().map(|m| m.name().into()).collect(),
            ),
            ("--rtt", self.rtt.iter().map(|r| r.to_string()).collect()),
            ("--rate", self.rate.iter().map(|r| r.to_string()).collect()),
            (
                "--engine",
                self.engines
                    .engine
                    .iter()
                    .map(|&e| Stack::from(e).name().into())
                    .collect(),
            ),
            (
                "--direction",
                self.direction.iter().map(|d| d.name().into()).collect(),
            ),
            ("--cc", self.cc.iter().map(|c| c.name().into()).collect()),
        ] {
            if twice(names) {
                return Err(ExpError::Parameter(format!("{flag} names a value twice")));
            }
        }
        Ok(())
    }

    /// The loss processes of the grid, in order: each rate with each
    /// model, a rate of 0 once.
    pub fn loss_points(&self) -> Vec<LossPoint> {
        let mut out = Vec::new();
        for &percent in &self.loss {
            if percent.0 == 0.0 {
                out.push(LossPoint {
                    percent,
                    model: None,
                });
                continue;
            }
            for &model in &self.model {
                out.push(LossPoint {
                    percent,
                    model: Some(model),
                });
            }
        }
        out
    }

    /// Every wire setting of the grid: loss, then RTT, then rate.
    pub fn settings(&self) -> Vec<Setting> {
        let mut out = Vec::new();
        for loss in self.loss_points() {
            for &rtt_ms in &self.rtt {
                for &rate in &self.rate {
                    out.push(Setting { loss, rtt_ms, rate });
                }
            }
        }
        out
    }

    /// The transfers of one setting: per direction (and sender CC), Linux
    /// then each engine.
    pub fn transfers(&self) -> Vec<Transfer> {
        let mut out = Vec::new();
        let stacks = self.engines.stacks();
        for &direction in &self.direction {
            let ccs = match direction {
                Direction::Receive => self.cc.clone(),
                // The data path's NewReno against Linux's reno.
                Direction::Send => vec![SenderCc::Reno],
            };
            for cc in ccs {
                for &stack in &stacks {
                    out.push(Transfer {
                        direction,
                        cc,
                        stack,
                    });
                }
            }
        }
        out
    }

    /// The Linux senders' congestion controls: each --cc for the receive
    /// direction, reno for the send direction's reference.
    fn linux_ccs(&self) -> Vec<SenderCc> {
        let mut ccs: Vec<SenderCc> = self
            .transfers()
            .iter()
            .filter(|t| t.stack == Stack::Linux)
            .map(|t| t.cc)
            .collect();
        ccs.sort();
        ccs.dedup();
        ccs
    }
}

/// One loss process: a mean rate and how frames are lost (none at 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LossPoint {
    pub percent: Percent,
    pub model: Option<LossModel>,
}

impl LossPoint {
    /// The wire's loss process: uniform, or Gilbert-Elliott with a bad
    /// state that loses every frame and lasts [`BURST_FRAMES`] on average
    /// (r = 1/4), entered with p such that the time in it, p / (p + r), is
    /// the mean rate q: p = r q / (1 - q) (tc-netem's `loss gemodel`).
    pub fn wire_loss(&self) -> Loss {
        let q = self.percent.0 / 100.0;
        match self.model {
            None => Loss::None,
            Some(_) if q == 0.0 => Loss::None,
            Some(LossModel::Uniform) => Loss::Uniform { p: q },
            Some(LossModel::Bursty) => {
                let r = 1.0 / BURST_FRAMES;
                Loss::GilbertElliott {
                    p: r * q / (1.0 - q),
                    r,
                    loss_bad: 1.0,
                    loss_good: 0.0,
                }
            }
        }
    }
}

impl std::fmt::Display for LossPoint {
    /// `0%`, `0.1%` (uniform), `ge:0.1%` (bursty).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.model {
            Some(LossModel::Bursty) => write!(f, "ge:{}", self.percent),
            _ => write!(f, "{}", self.percent),
        }
    }
}

/// The wire of one setting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Setting {
    pub loss: LossPoint,
    pub rtt_ms: f64,
    pub rate: Rate,
}

impl Setting {
    /// The data direction's impairment (loss, half the RTT, the rate) and
    /// the ACKs' (half the RTT, the rate).
    fn impairments(&self) -> (Impairment, Impairment) {
        let acks = Impairment {
            delay: Delay::Constant {
                ns: (self.rtt_ms * 1e6 / 2.0).round() as u64,
            },
            rate_bps: self.rate.0,
            ..Impairment::default()
        };
        let data = Impairment {
            loss: self.loss.wire_loss(),
            ..acks
        };
        (data, acks)
    }
}

/// One transfer of a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    pub direction: Direction,
    /// The Linux sender's congestion control (the send direction: reno,
    /// and the data path's NewReno).
    pub cc: SenderCc,
    pub stack: Stack,
}

/// The name of a cell: its direction, sender CC, loss, RTT, rate and
/// stack, e.g. `receive,reno,0.1%,2ms,1gbit,toe` (no `/`: the test
/// matrix's pointers pick a cell by it).
pub fn cell_id(direction: Direction, cc: SenderCc, s: &Setting, stack: Stack) -> String {
    format!(
        "{},{},{},{}ms,{},{}",
        direction.name(),
        cc.name(),
        s.loss,
        s.rtt_ms,
        s.rate,
        stack.name()
    )
}

/// One transfer as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub repetition: u32,
    /// The cell it belongs to ([`cell_id`]).
    pub id: String,
    pub direction: Direction,
    pub cc: SenderCc,
    #[serde(flatten)]
    pub setting: Setting,
    pub stack: Stack,
    /// What the sender wrote and what the receiver read.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// From the receiver's first byte to its last.
    pub seconds: f64,
    /// Null when nothing arrived.
    pub goodput_mbit: Option<f64>,
    /// The whole stream arrived and every byte matched.
    pub byte_exact: bool,
    /// The wire's data direction (policy drops are the loss process's,
    /// overload drops the rate limiter's queue's).
    pub wire: DirectionCounters,
    /// Data frames the wire dropped: policy and overload.
    pub wire_drops: u64,
    /// Data segments the sender sent again.
    pub retransmissions: Option<u64>,
    /// Retransmissions per frame the wire dropped (null without a drop).
    pub retransmissions_per_drop: Option<f64>,
    /// Retransmission timeouts of the sender.
    pub rtos: Option<u64>,
    pub fast_retransmits: Option<u64>,
    /// Tail loss probes: `TcpExtTCPLossProbes` for a Linux sender,
    /// `Counters::tail_loss_probes` for the data path.
    pub loss_probes: Option<u64>,
    /// Retransmissions the receiver reported as duplicates (D-SACK, RFC
    /// 2883): D-SACKs a Linux sender received (`TcpExtTCPDSACKRecv`) or
    /// the data path counted (`Counters::dsacks_received`).
    pub spurious_retransmissions: Option<u64>,
    /// The sender's congestion control as it reported itself (the
    /// namespace's default for Linux, `flow_info` for the data path).
    pub sender_cc: Option<String>,
    /// The data path's own counts (drops by reason, ...); null for Linux.
    pub endpoint: Option<toe::Counters>,
    /// Frames the data path's port dropped before the data path saw them
    /// (the kernel's AF_XDP `rx_dropped` and `rx_ring_full`): loss the
    /// wire did not make, which a slow receive path causes; null for
    /// Linux.
    pub port_drops: Option<u64>,
    /// The Laminar engine's pipeline and control plane counts (drops in
    /// the program and its traffic manager, rollbacks); null otherwise.
    pub laminar: Option<toe::laminar::LaminarCounters>,
}

/// One engine in one setting, direction and sender CC, beside Linux.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub id: String,
    pub direction: Direction,
    pub cc: SenderCc,
    #[serde(flatten)]
    pub setting: Setting,
    pub engine: Stack,
    /// Mean and 95% CI over the repetitions; null if one was not measured.
    pub goodput_mbit: Option<Stat>,
    pub linux_goodput_mbit: Option<Stat>,
    /// Data path / Linux, means (issue 23's goal: at least 0.95).
    pub ratio: Option<f64>,
    pub retransmissions_per_drop: Option<f64>,
    pub linux_retransmissions_per_drop: Option<f64>,
    /// Sums over the repetitions.
    pub rtos: Option<u64>,
    pub linux_rtos: Option<u64>,
    pub spurious_retransmissions: Option<u64>,
    pub linux_spurious_retransmissions: Option<u64>,
    pub wire_drops: u64,
    pub linux_wire_drops: u64,
    /// Every transfer of the engine and of its Linux reference was exact.
    pub byte_exact: bool,
}

/// Whether the kernel has DCTCP (for DCTCP-against-DCTCP cells).
#[derive(Debug, Clone, Serialize)]
pub struct DctcpSupport {
    /// None: the kernel's lists could not be read, so it is not known.
    pub available: Option<bool>,
    pub detail: String,
}

/// `steer exp loss` ([`Experiment`]).
#[derive(Debug)]
pub struct LossExperiment;

/// A loss run's result: its parameters and [`LossOutput`], enveloped.
pub type LossResult = Report<LossExperiment>;

impl Experiment for LossExperiment {
    const NAME: &'static str = "loss";
    const DRAWS: bool = true;
    type Params = LossParams;
    type Output = LossOutput;

    params_do_the_sizing!();

    fn run(params: &LossParams, progress: &mut dyn FnMut(String)) -> Result<LossOutput, ExpError> {
        run(params, |s| progress(s.progress_line()))
    }

    fn text(report: &LossResult) -> Text {
        report.render()
    }

    fn svg(report: &LossResult) -> Option<String> {
        Some(svg(report))
    }

    fn succeeded(output: &LossOutput) -> bool {
        output.byte_exact
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LossOutput {
    /// True only if every transfer of the run arrived whole and exact.
    pub byte_exact: bool,
    pub cells: Vec<Cell>,
    pub samples: Vec<Sample>,
    pub dctcp: DctcpSupport,
    /// Where each side's threads ran: the Linux sender on one CPU, the
    /// receiver (Linux's reader or the data path) and the data path as a
    /// sender on the other.
    pub pinned_cpus: PinnedCpus,
}

/// Runs the grid; `progress` sees every transfer.
fn run(params: &LossParams, mut progress: impl FnMut(&Sample)) -> Result<LossOutput, ExpError> {
    params.check()?;
    let lab = Lab::up(&LabSpec::wired(&lab::unique_name("loss")))?.teardown_on_drop();
    let allowed = AllowedCc::ensure(&params.linux_ccs())?;
    for host in [lab.sender(), lab.receiver()] {
        // No ssthresh or RTT carried from one transfer to the next.
        host::netns::set_sysctl(&host.netns, "net.ipv4.tcp_no_metrics_save", "1")
            .map_err(LabError::from)?;
    }
    let settings = params.settings();
    let transfers = params.transfers();
    let mut samples = Vec::new();
    for rep in 0..params.repetitions {
        for (i, setting) in settings.iter().enumerate() {
            let seed = (u64::from(rep) << 32 | i as u64) + 1;
            for k in 0..transfers.len() {
                let t = transfers[(k + rep as usize) % transfers.len()];
                let s = run_transfer(&lab, params, rep, setting, t, seed)?;
                progress(&s);
                samples.push(s);
            }
        }
    }
    drop(lab);
    drop(allowed);
    Ok(summarize(params, samples, dctcp_support()))
}

/// What a transfer measured before it is a [`Sample`].
struct Measured {
    sent: u64,
    sender_done: bool,
    check: StreamCheck,
    retransmissions: Option<u64>,
    rtos: Option<u64>,
    fast_retransmits: Option<u64>,
    loss_probes: Option<u64>,
    spurious: Option<u64>,
    sender_cc: Option<String>,
    endpoint: Option<toe::Counters>,
    port_drops: Option<u64>,
    laminar: Option<toe::laminar::LaminarCounters>,
}

fn run_transfer(
    lab: &Lab,
    params: &LossParams,
    rep: u32,
    setting: &Setting,
    t: Transfer,
    seed: u64,
) -> Result<Sample, ExpError> {
    let w = lab
        .wire()
        .ok_or_else(|| ExpError::Parameter("the lab has no wire".into()))?;
    let mut wcfg = WireConfig::new(Some(&w.netns), &w.sender_dev, &w.receiver_dev);
    let (data, acks) = setting.impairments();
    // a is the sender's host, b the receiver's.
    (wcfg.a_to_b, wcfg.b_to_a) = match t.direction {
        Direction::Receive => (data, acks),
        Direction::Send => (acks, data),
    };
    wcfg.seed = seed;
    let wire = WireHandle::spawn(&wcfg).map_err(wire_err)?;
    let secs = Duration::from_secs_f64(params.seconds);
    let measured = match (t.direction, t.stack.engine()) {
        (Direction::Receive, None) => linux_to_linux(lab.sender(), lab.receiver(), t.cc, secs),
        (Direction::Send, None) => linux_to_linux(lab.receiver(), lab.sender(), t.cc, secs),
        (Direction::Receive, Some(engine)) => {
            linux_to_toe(lab, toe_config(engine, params.ooo_bound), t.cc, secs)
        }
        (Direction::Send, Some(engine)) => {
            toe_to_linux(lab, toe_config(engine, params.ooo_bound), secs)
        }
    };
    let stats = wire.stop().map_err(wire_err)?;
    let m = measured?;
    let counters = match t.direction {
        Direction::Receive => stats.a_to_b.counters,
        Direction::Send => stats.b_to_a.counters,
    };
    Ok(sample(rep, setting, t, m, counters))
}

fn sample(
    rep: u32,
    setting: &Setting,
    t: Transfer,
    m: Measured,
    wire: DirectionCounters,
) -> Sample {
    let (received, _, matched) = m.check.finish();
    let seconds = m.check.first_to_last();
    let wire_drops = wire.dropped_policy + wire.dropped_overload;
    Sample {
        repetition: rep,
        id: cell_id(t.direction, t.cc, setting, t.stack),
        direction: t.direction,
        cc: t.cc,
        setting: *setting,
        stack: t.stack,
        bytes_sent: m.sent,
        bytes_received: received,
        seconds,
        goodput_mbit: (seconds > 0.0 && received > 0)
            .then(|| received as f64 * 8.0 / seconds / 1e6),
        byte_exact: m.sender_done && matched && received == m.sent && received > 0,
        wire,
        wire_drops,
        retransmissions: m.retransmissions,
        retransmissions_per_drop: m
            .retransmissions
            .filter(|_| wire_drops > 0)
            .map(|r| r as f64 / wire_drops as f64),
        rtos: m.rtos,
        fast_retransmits: m.fast_retransmits,
        loss_probes: m.loss_probes,
        spurious_retransmissions: m.spurious,
        sender_cc: m.sender_cc,
        endpoint: m.endpoint,
        port_drops: m.port_drops,
        laminar: m.laminar,
    }
}

fn io_err(what: &'static str) -> impl Fn(std::io::Error) -> ExpError {
    move |e| ExpError::Program {
        program: what.into(),
        detail: e.to_string(),
    }
}

fn thread_err(what: &str) -> ExpError {
    ExpError::Program {
        program: what.into(),
        detail: "its thread panicked".into(),
    }
}

/// A Linux sender's counters in its namespace, before and after: one
/// connection runs there at a time, so the difference is the transfer's.
struct LinuxCounters {
    netns: String,
    before: host::snmp::Counters,
}

/// The nstat names of what a Linux sender counts.
const RETRANS_SEGS: &str = "TcpRetransSegs";
const TIMEOUTS: &str = "TcpExtTCPTimeouts";
const FAST_RETRANS: &str = "TcpExtTCPFastRetrans";
const LOSS_PROBES: &str = "TcpExtTCPLossProbes";
const DSACK_RECV: &str = "TcpExtTCPDSACKRecv";

impl LinuxCounters {
    fn start(host: &Host) -> Result<Self, ExpError> {
        Ok(LinuxCounters {
            netns: host.netns.clone(),
            before: host::snmp::Counters::read(&host.netns).map_err(LabError::from)?,
        })
    }

    /// Each counter's growth; None for a counter the kernel does not have.
    fn finish(self) -> Result<impl Fn(&str) -> Option<u64>, ExpError> {
        let after = host::snmp::Counters::read(&self.netns).map_err(LabError::from)?;
        let before = self.before;
        Ok(move |name: &str| Some(after.get(name)?.saturating_sub(before.get(name)?)))
    }
}

/// Makes `cc` the default congestion control of `host`'s namespace (for
/// the connections it opens next); the name it reads back.
fn set_cc(host: &Host, cc: SenderCc) -> Result<String, ExpError> {
    host::netns::set_sysctl(&host.netns, "net.ipv4.tcp_congestion_control", cc.name())
        .map_err(LabError::from)?;
    host::netns::run_in(Some(&host.netns), || {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .map(|s| s.trim().to_string())
    })
    .map_err(LabError::from)?
    .map_err(io_err("read the namespace's tcp_congestion_control"))
}

/// Connects to `to` from the calling thread's namespace and writes
/// [`pattern`] for `secs`, then shuts its side down and reads to the
/// receiver's FIN (everything was read); (bytes written, finished).
fn linux_send(to: SocketAddr, secs: Duration) -> (u64, bool) {
    pin(SENDER_CPU);
    let mut sent = 0u64;
    let mut run = || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.set_write_timeout(Some(DRAIN_LIMIT))?;
        s.set_read_timeout(Some(DRAIN_LIMIT))?;
        let until = Instant::now() + secs;
        let mut chunk = vec![0u8; 1 << 16];
        while Instant::now() < until {
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = pattern(sent + i as u64);
            }
            s.write_all(&chunk)?;
            sent += chunk.len() as u64;
        }
        s.shutdown(Shutdown::Write)?;
        let mut rest = [0u8; 1];
        while s.read(&mut rest)? > 0 {}
        Ok(())
    };
    let done = run().is_ok();
    (sent, done)
}

/// Linux to Linux: a reader on `to`'s address, a sender on `from`.
fn linux_to_linux(
    from: &Host,
    to: &Host,
    cc: SenderCc,
    secs: Duration,
) -> Result<Measured, ExpError> {
    let sender_cc = set_cc(from, cc)?;
    let addr = SocketAddr::new(IpAddr::V4(to.ipv4), PORT);
    let listener = host::netns::run_in(Some(&to.netns), move || TcpListener::bind(addr))
        .map_err(LabError::from)?
        .map_err(io_err("bind the Linux receiver"))?;
    let reader = std::thread::spawn(move || linux_read(listener));
    let counters = LinuxCounters::start(from)?;
    let (sent, done) = host::netns::run_in(Some(&from.netns), move || linux_send(addr, secs))
        .map_err(LabError::from)?;
    let check = reader
        .join()
        .map_err(|_| thread_err("the Linux receiver"))?;
    let count = counters.finish()?;
    Ok(Measured {
        sent,
        sender_done: done,
        check,
        retransmissions: count(RETRANS_SEGS),
        rtos: count(TIMEOUTS),
        fast_retransmits: count(FAST_RETRANS),
        loss_probes: count(LOSS_PROBES),
        spurious: count(DSACK_RECV),
        sender_cc: Some(sender_cc),
        endpoint: None,
        port_drops: None,
        laminar: None,
    })
}

/// Accepts one connection and reads it to the end, checking every byte;
/// closes it (the sender reads to this FIN). A failed accept or read
/// ends the check where it is.
fn linux_read(listener: TcpListener) -> StreamCheck {
    pin(RECEIVER_CPU);
    let mut check = StreamCheck::default();
    let Ok((mut s, _)) = listener.accept() else {
        return check;
    };
    let _ = s.set_read_timeout(Some(DRAIN_LIMIT));
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        check.take(&buf[..n]);
    }
    check
}

/// The endpoint's configuration: `engine` with the data path's NewReno,
/// keeping `ooo_bound` out-of-order intervals.
fn toe_config(engine: toe::Engine, ooo_bound: OooBound) -> EndpointConfig {
    EndpointConfig {
        engine,
        congestion: Policy::NewReno,
        rx_buffer: TOE_BUFFER,
        tx_buffer: TOE_BUFFER,
        max_conns: 16,
        ooo_bound,
        ..EndpointConfig::default()
    }
}

/// An endpoint on the receiver's AF_XDP port.
fn toe_endpoint(lab: &Lab, cfg: EndpointConfig) -> Result<Endpoint, ExpError> {
    endpoint(lab.receiver(), toe_addr(lab), cfg)
}

/// Polls `ep` until `done`, sleeping in `wait` when a poll found nothing
/// (the wire's forwarder shares the two cores); false at `deadline`.
fn poll_until(
    ep: &mut Endpoint,
    deadline: Instant,
    mut done: impl FnMut(&mut Endpoint) -> Result<bool, ExpError>,
) -> Result<bool, ExpError> {
    loop {
        if done(ep)? {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        if ep.poll().map_err(toe_err)? == 0 {
            ep.wait(Duration::from_micros(100)).map_err(toe_err)?;
        }
    }
}

/// A Linux sender to the data path on the receiver.
fn linux_to_toe(
    lab: &Lab,
    cfg: EndpointConfig,
    cc: SenderCc,
    secs: Duration,
) -> Result<Measured, ExpError> {
    let snd = lab.sender();
    let sender_cc = set_cc(snd, cc)?;
    let mut ep = toe_endpoint(lab, cfg)?;
    ep.listen(PORT);
    let sender_finished = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + secs + DRAIN_LIMIT;
    let server = {
        let finished = sender_finished.clone();
        std::thread::spawn(move || -> Result<_, ExpError> {
            pin(RECEIVER_CPU);
            let check = toe_read(&mut ep, deadline)?;
            // Our FIN and the last ACKs go out while the sender reads to
            // it.
            poll_until(&mut ep, deadline, |_| Ok(finished.load(Ordering::Relaxed)))?;
            let port_drops = ep.port_drops().map_err(toe_err)?;
            Ok((check, ep.counters(), port_drops, ep.laminar_counters()))
        })
    };
    let to = SocketAddr::new(toe_addr(lab), PORT);
    let counters = LinuxCounters::start(snd)?;
    let sent =
        host::netns::run_in(Some(&snd.netns), move || linux_send(to, secs)).map_err(LabError::from);
    sender_finished.store(true, Ordering::Relaxed);
    let (check, endpoint, port_drops, laminar) = server
        .join()
        .map_err(|_| thread_err("the toe receiver"))??;
    let (sent, done) = sent?;
    let count = counters.finish()?;
    Ok(Measured {
        sent,
        sender_done: done,
        check,
        retransmissions: count(RETRANS_SEGS),
        rtos: count(TIMEOUTS),
        fast_retransmits: count(FAST_RETRANS),
        loss_probes: count(LOSS_PROBES),
        // Every engine reports duplicates as D-SACK (RFC 2883; Laminar's
        // control plane adds them to the program's ACKs).
        spurious: count(DSACK_RECV),
        sender_cc: Some(sender_cc),
        endpoint: Some(endpoint),
        port_drops: Some(port_drops),
        laminar,
    })
}

/// Accepts one connection on `ep` and reads it to the end (or the
/// deadline), checking every byte; then closes it.
fn toe_read(ep: &mut Endpoint, deadline: Instant) -> Result<StreamCheck, ExpError> {
    let mut check = StreamCheck::default();
    let mut conn = None;
    if !poll_until(ep, deadline, |ep| {
        conn = ep.accept(PORT);
        Ok(conn.is_some())
    })? {
        return Ok(check);
    }
    let conn = conn.expect("accepted above");
    let mut buf = vec![0u8; 1 << 16];
    poll_until(ep, deadline, |ep| loop {
        match ep.recv(conn, &mut buf) {
            Ok(0) => return Ok(true),
            Ok(n) => check.take(&buf[..n]),
            Err(ToeError::WouldBlock) => return Ok(false),
            // Reset or gone: the check ends short.
            Err(_) => return Ok(true),
        }
    })?;
    let _ = ep.close(conn);
    Ok(check)
}

/// The data path on the receiver's host sends to a Linux reader on the
/// sender's.
fn toe_to_linux(lab: &Lab, cfg: EndpointConfig, secs: Duration) -> Result<Measured, ExpError> {
    let snd = lab.sender();
    let addr = SocketAddr::new(IpAddr::V4(snd.ipv4), PORT);
    let listener = host::netns::run_in(Some(&snd.netns), move || TcpListener::bind(addr))
        .map_err(LabError::from)?
        .map_err(io_err("bind the Linux receiver"))?;
    let reader = std::thread::spawn(move || linux_read(listener));
    let ep = toe_endpoint(lab, cfg)?;
    let sender = std::thread::spawn(move || toe_send(ep, addr, secs, reader));
    let (sent, done, flow, (endpoint, port_drops, laminar), check) =
        sender.join().map_err(|_| thread_err("the toe sender"))??;
    Ok(Measured {
        sent,
        sender_done: done,
        check,
        retransmissions: flow.as_ref().map(|f| u64::from(f.retrans_segs)),
        rtos: Some(endpoint.timeouts),
        fast_retransmits: Some(endpoint.fast_retransmits),
        loss_probes: Some(endpoint.tail_loss_probes),
        spurious: Some(endpoint.dsacks_received),
        sender_cc: flow.map(|f| f.congestion.to_string()),
        endpoint: Some(endpoint),
        port_drops: Some(port_drops),
        laminar,
    })
}

type ToeSent = (
    u64,
    bool,
    Option<toe::endpoint::FlowInfo>,
    (toe::Counters, u64, Option<toe::laminar::LaminarCounters>),
    StreamCheck,
);

/// Connects `ep` to `to`, sends [`pattern`] for `secs`, waits for all of
/// it to be acknowledged, reads the flow's counts, closes, and polls until
/// the Linux reader has read to the end.
fn toe_send(
    mut ep: Endpoint,
    to: SocketAddr,
    secs: Duration,
    reader: std::thread::JoinHandle<StreamCheck>,
) -> Result<ToeSent, ExpError> {
    pin(RECEIVER_CPU);
    let deadline = Instant::now() + secs + DRAIN_LIMIT;
    let conn: ConnIdx = ep.connect(to).map_err(toe_err)?;
    let mut done = poll_until(&mut ep, deadline, |ep| Ok(ep.is_established(conn)))?;
    let mut sent = 0u64;
    let mut chunk = vec![0u8; 1 << 16];
    let (mut at, mut len) = (0usize, 0usize);
    let until = Instant::now() + secs;
    if done {
        done = poll_until(&mut ep, deadline, |ep| {
            if Instant::now() >= until {
                return Ok(true);
            }
            loop {
                if at == len {
                    for (i, b) in chunk.iter_mut().enumerate() {
                        *b = pattern(sent + i as u64);
                    }
                    (at, len) = (0, chunk.len());
                }
                match ep.send(conn, &chunk[at..len]) {
                    Ok(n) => {
                        at += n;
                        sent += n as u64;
                        if at < len {
                            return Ok(false);
                        }
                    }
                    Err(ToeError::WouldBlock) => return Ok(false),
                    Err(e) => return Err(toe_err(e)),
                }
            }
        })?;
    }
    // Everything sent acknowledged: the flow's counts are complete.
    if done {
        done = poll_until(&mut ep, deadline, |ep| {
            Ok(ep.tcp_info(conn).is_none_or(|i| i.snd_una == i.snd_nxt))
        })?;
    }
    let flow = ep.flow_info(conn);
    let _ = ep.close(conn);
    poll_until(&mut ep, deadline, |_| Ok(reader.is_finished()))?;
    let check = reader
        .join()
        .map_err(|_| thread_err("the Linux receiver"))?;
    let port_drops = ep.port_drops().map_err(toe_err)?;
    let counts = (ep.counters(), port_drops, ep.laminar_counters());
    Ok((sent, done, flow, counts, check))
}

/// The machine-wide list of congestion controls namespaces may default
/// to, with those the run needs added; restored when dropped.
struct AllowedCc {
    previous: Option<String>,
}

impl AllowedCc {
    fn ensure(needed: &[SenderCc]) -> Result<AllowedCc, ExpError> {
        let io = io_err(ALLOWED_CC);
        let previous = std::fs::read_to_string(ALLOWED_CC).map_err(&io)?;
        let mut names: Vec<&str> = previous.split_whitespace().collect();
        let missing: Vec<&str> = needed
            .iter()
            .map(|c| c.name())
            .filter(|n| !names.contains(n))
            .collect();
        if missing.is_empty() {
            return Ok(AllowedCc { previous: None });
        }
        names.extend(missing);
        std::fs::write(ALLOWED_CC, names.join(" ")).map_err(&io)?;
        Ok(AllowedCc {
            previous: Some(previous.trim().to_string()),
        })
    }
}

impl Drop for AllowedCc {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            if let Err(e) = std::fs::write(ALLOWED_CC, previous) {
                eprintln!("restoring {ALLOWED_CC} to {previous}: {e}");
            }
        }
    }
}

/// Whether this kernel has DCTCP: loaded (listed as available) or as a
/// module it could load.
fn dctcp_support() -> DctcpSupport {
    let unknown = |what: &str, e: std::io::Error| DctcpSupport {
        available: None,
        detail: format!("unknown: reading {what}: {e}"),
    };
    let available = match std::fs::read_to_string(AVAILABLE_CC) {
        Ok(a) => a,
        Err(e) => return unknown(AVAILABLE_CC, e),
    };
    if available.split_whitespace().any(|n| n == "dctcp") {
        return DctcpSupport {
            available: Some(true),
            detail: "dctcp is available; DCTCP cells are not part of this experiment yet".into(),
        };
    }
    const RELEASE: &str = "/proc/sys/kernel/osrelease";
    let release = match std::fs::read_to_string(RELEASE) {
        Ok(r) => r,
        Err(e) => return unknown(RELEASE, e),
    };
    let dir = format!("/lib/modules/{}/kernel/net/ipv4", release.trim());
    let module = std::fs::read_dir(&dir).ok().and_then(|d| {
        d.flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("tcp_dctcp.ko"))
    });
    match module {
        Some(_) => DctcpSupport {
            available: Some(true),
            detail: "the tcp_dctcp module is there, not loaded; DCTCP cells are not part of this experiment yet".into(),
        },
        None => DctcpSupport {
            available: Some(false),
            detail: format!(
                "absent: not in {AVAILABLE_CC} ({}) and no tcp_dctcp module in {dir}",
                available.trim()
            ),
        },
    }
}

fn summarize(params: &LossParams, samples: Vec<Sample>, dctcp: DctcpSupport) -> LossOutput {
    let mut cells = Vec::new();
    for setting in params.settings() {
        for t in params
            .transfers()
            .into_iter()
            .filter(|t| t.stack != Stack::Linux)
        {
            let of = |stack: Stack| -> Vec<&Sample> {
                let id = cell_id(t.direction, t.cc, &setting, stack);
                samples.iter().filter(|s| s.id == id).collect()
            };
            let (mine, linux) = (of(t.stack), of(Stack::Linux));
            cells.push(cell(t, setting, &mine, &linux));
        }
    }
    LossOutput {
        byte_exact: !samples.is_empty() && samples.iter().all(|s| s.byte_exact),
        cells,
        samples,
        dctcp,
        pinned_cpus: pinned_cpus(),
    }
}

/// The CPU of the Linux sender's thread.
const SENDER_CPU: usize = 0;
/// The CPU of the receiving thread, and of the data path's.
const RECEIVER_CPU: usize = 1;

fn pinned_cpus() -> PinnedCpus {
    PinnedCpus::of(&[
        ("linux_sender", SENDER_CPU),
        ("receiver", RECEIVER_CPU),
        ("data_path", RECEIVER_CPU),
    ])
}

/// Every sample's value, or None if one was not measured (a missing value
/// never averages into a smaller one) or there is no sample.
fn all<T>(samples: &[&Sample], f: impl Fn(&Sample) -> Option<T>) -> Option<Vec<T>> {
    let v: Option<Vec<T>> = samples.iter().map(|s| f(s)).collect();
    v.filter(|v| !v.is_empty())
}

fn cell(t: Transfer, setting: Setting, mine: &[&Sample], linux: &[&Sample]) -> Cell {
    let goodput = |s: &[&Sample]| all(s, |s| s.goodput_mbit).and_then(|v| stats::stat(&v));
    let per_drop =
        |s: &[&Sample]| all(s, |s| s.retransmissions_per_drop).and_then(|v| stats::mean(&v));
    let sum = |s: &[&Sample], f: fn(&Sample) -> Option<u64>| all(s, f).map(|v| v.iter().sum());
    let drops = |s: &[&Sample]| s.iter().map(|s| s.wire_drops).sum();
    let (g, lg) = (goodput(mine), goodput(linux));
    Cell {
        id: cell_id(t.direction, t.cc, &setting, t.stack),
        direction: t.direction,
        cc: t.cc,
        setting,
        engine: t.stack,
        ratio: g
            .zip(lg)
            .filter(|(_, l)| l.mean > 0.0)
            .map(|(g, l)| g.mean / l.mean),
        goodput_mbit: g,
        linux_goodput_mbit: lg,
        retransmissions_per_drop: per_drop(mine),
        linux_retransmissions_per_drop: per_drop(linux),
        rtos: sum(mine, |s| s.rtos),
        linux_rtos: sum(linux, |s| s.rtos),
        spurious_retransmissions: sum(mine, |s| s.spurious_retransmissions),
        linux_spurious_retransmissions: sum(linux, |s| s.spurious_retransmissions),
        wire_drops: drops(mine),
        linux_wire_drops: drops(linux),
        byte_exact: !mine.is_empty()
            && !linux.is_empty()
            && mine.iter().chain(linux).all(|s| s.byte_exact),
    }
}

/// Goodput against loss: one line per engine and Linux's beside them, for
/// each direction and sender CC, at the first RTT and rate of the run (the
/// JSON has every setting).
pub fn svg(r: &LossResult) -> String {
    let p = &r.params;
    let (Some(&rtt), Some(&rate)) = (p.rtt.first(), p.rate.first()) else {
        return plot::LineChart::new("Goodput under loss", plot::XAxis::Categories(vec![])).svg();
    };
    let points = p.loss_points();
    let mut chart = plot::LineChart::new(
        &format!("Goodput under loss: data path and Linux, RTT {rtt} ms, {rate}"),
        plot::XAxis::Categories(points.iter().map(|l| l.to_string()).collect()),
    )
    .size(760.0, 440.0)
    .x_label("loss on the data direction (ge: Gilbert-Elliott bursts)")
    .y_label("goodput, Mbit/s (mean, 95% CI)");
    let mut lines: Vec<(Direction, SenderCc, Stack)> = Vec::new();
    for t in p.transfers() {
        if !lines.contains(&(t.direction, t.cc, t.stack)) {
            lines.push((t.direction, t.cc, t.stack));
        }
    }
    for (direction, cc, stack) in lines {
        let series: Vec<plot::Point> = points
            .iter()
            .enumerate()
            .filter_map(|(x, &loss)| {
                let setting = Setting {
                    loss,
                    rtt_ms: rtt,
                    rate,
                };
                let id = cell_id(direction, cc, &setting, stack);
                let of: Vec<&Sample> = r.samples.iter().filter(|s| s.id == id).collect();
                let g = all(&of, |s| s.goodput_mbit).and_then(|v| stats::stat(&v))?;
                Some(plot::Point {
                    x: x as f64,
                    value: plot::Value::with_ci(g.mean, g.ci95),
                })
            })
            .collect();
        chart = chart.series(
            &format!("{} {}: {}", direction.name(), cc.name(), stack.name()),
            series,
        );
    }
    chart
        .note("receive: a Linux sender with the named CC to each stack; send: each stack's NewReno/reno to Linux")
        .svg()
}

#[cfg(test)]
mod tests;
