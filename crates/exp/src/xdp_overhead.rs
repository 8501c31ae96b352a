//! `steer exp xdp-overhead`: what the XDP software RSS costs TCP, against
//! no steering and against the kernel's own software steering, RPS
//! (docs/performance.md, "What the XDP software RSS costs TCP").
//!
//! One lab (sender `snd`, receiver `rcv`, IPv6 off, tx checksum offload off
//! on the sender's veth in every mode), `streams` parallel iperf3 flows,
//! rotating in one run between three modes of the receiving veth (the order
//! rotates every repetition, so drift hits all alike):
//!
//! - software RSS: Steer's XDP program redirecting through a cpumap;
//! - no program: the veth as created, every frame handled on the CPU that
//!   sent it;
//! - RPS: no program, `rps_cpus` of every receive queue set to the CPUs the
//!   software RSS delivers to (Documentation/networking/scaling.rst, "RPS");
//! - RFS, only when asked for (`rfs`): RPS plus flow steering to the CPU
//!   where each flow's reader runs (scaling.rst, "RFS"). It needs the
//!   machine-wide `net.core.rps_sock_flow_entries`, which the run sets and
//!   restores, so it changes every namespace's steering while it runs.
//!
//! The sender is the same in every mode, by default with a pfifo qdisc on
//! its veth, so that a full ring on the receiving veth pushes back instead
//! of dropping; GRO on the receiving veth is on, by default, only while the
//! software RSS is attached (see [`ReceiverGro`]). Every sample comes from the datapath: received Gbit/s and sender
//! retransmits from `iperf3 --json`, and the drop counters of
//! [`counters`] read before and after the run, so a lost frame is counted
//! where it was lost.

pub mod counters;
mod text;

use crate::cpus::set_rps;
use crate::experiment::{Experiment, Report};
use crate::{check_flows_and_queues, refuse_if};
use plot::text::Text;
use std::time::Duration;

use lab::{Lab, LabSpec};
use serde::Serialize;
use stats::stat;

pub use counters::Drops;
use counters::{CpumapCounters, Snapshot};

use crate::iperf;
use crate::ExpError;

/// The iperf3 port.
const PORT: u16 = 5201;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct XdpOverheadParams {
    /// Repetitions; each runs the three modes (software RSS, no program,
    /// RPS), the order rotating every repetition.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = XdpOverheadParams::default().repetitions)
    )]
    pub repetitions: u32,
    /// Seconds of iperf3 traffic per sample.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XdpOverheadParams::default().seconds))]
    pub seconds: u32,
    /// Parallel TCP flows (iperf3 -P).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'P', long = "flows", alias = "streams",
            default_value_t = XdpOverheadParams::default().streams)
    )]
    pub streams: u32,
    /// Receive queues of the software RSS.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XdpOverheadParams::default().queues))]
    pub queues: u32,
    /// XDP_PASS when the target CPU is the current one (reorders TCP).
    #[cfg_attr(feature = "clap", arg(long))]
    pub same_cpu_pass: bool,
    /// cpumap queue size (frames per destination CPU, 1..=16384).
    #[cfg_attr(
        feature = "clap",
        arg(long = "qsize", value_name = "QSIZE",
            default_value_t = XdpOverheadParams::default().queue_size)
    )]
    pub queue_size: u32,
    /// A pfifo qdisc of this many packets on the sender's veth, in every
    /// mode (0: none, veth's default noqueue). With it, a full ring on the
    /// receiving veth stops the queue instead of dropping the frame.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = XdpOverheadParams::default().sender_pfifo)
    )]
    pub sender_pfifo: u32,
    /// Where GRO is on on the receiving veth: `software-rss` (while the
    /// program is attached, so the cpumap kthread coalesces each flow's
    /// frames; the other modes keep veth's default), `all`, or `off`.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_enum, default_value_t = XdpOverheadParams::default().receiver_gro)
    )]
    pub receiver_gro: ReceiverGro,
    /// Add RFS (RPS plus steering to the reader's CPU) as a fourth mode. It
    /// sets the machine-wide net.core.rps_sock_flow_entries for the run
    /// (restored after), so every namespace's steering changes meanwhile.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rfs: bool,
    /// The reduced run ([`XdpOverheadParams::quick`]); the binary's `--quick`.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub quick: bool,
}

impl Default for XdpOverheadParams {
    fn default() -> Self {
        XdpOverheadParams {
            repetitions: 5,
            seconds: 5,
            streams: 4,
            queues: 4,
            same_cpu_pass: false,
            queue_size: 16384,
            sender_pfifo: 1000,
            receiver_gro: ReceiverGro::SoftwareRss,
            rfs: false,
            quick: false,
        }
    }
}

impl XdpOverheadParams {
    /// The reduced run for CI and the matrix: 2 repetitions of 2 s.
    pub fn quick(mut self) -> Self {
        self.repetitions = 2;
        self.seconds = 2;
        self.quick = true;
        self
    }

    pub fn check(&self) -> Result<(), ExpError> {
        refuse_if(self.repetitions == 0, "--repetitions must be at least 1")?;
        refuse_if(self.seconds == 0, "--seconds must be at least 1")?;
        check_flows_and_queues(self.streams, self.queues)?;
        refuse_if(
            self.queue_size == 0 || self.queue_size > nic::MAX_CPUMAP_QSIZE,
            "--qsize must be 1..=16384",
        )?;
        refuse_if(
            self.sender_pfifo > 100_000,
            "--sender-pfifo must be 0..=100000 packets",
        )?;
        Ok(())
    }
}

/// GRO on the receiving veth, per mode. GRO is what lets the cpumap kthread
/// coalesce a flow's frames before the stack: kernel/bpf/cpumap.c hands
/// them to GRO, which skips a device without NETIF_F_GRO (veth's default).
/// Without an XDP program, GRO on also switches the veth to its NAPI ring,
/// a different path from the one a user of RPS has by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiverGro {
    /// Off in every mode (veth's default).
    Off,
    /// On while the software RSS is attached, veth's default otherwise.
    SoftwareRss,
    /// On in every mode.
    All,
}

value_enum!(ReceiverGro, about);

impl ReceiverGro {
    pub const ALL: [ReceiverGro; 3] =
        [ReceiverGro::Off, ReceiverGro::SoftwareRss, ReceiverGro::All];

    /// "off", "software-rss" or "all" (as in the JSON).
    pub fn name(self) -> &'static str {
        match self {
            ReceiverGro::Off => "off",
            ReceiverGro::SoftwareRss => "software-rss",
            ReceiverGro::All => "all",
        }
    }

    /// Where GRO is on, in one line without a full stop.
    pub fn about(self) -> &'static str {
        match self {
            ReceiverGro::Off => "Off in every mode (veth's default)",
            ReceiverGro::SoftwareRss => {
                "On while the software RSS is attached, veth's default otherwise"
            }
            ReceiverGro::All => "On in every mode",
        }
    }

    fn on_in(self, mode: Mode) -> bool {
        match self {
            ReceiverGro::Off => false,
            ReceiverGro::SoftwareRss => mode == Mode::SoftwareRss,
            ReceiverGro::All => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    SoftwareRss,
    NoProgram,
    Rps,
    Rfs,
}

impl Mode {
    /// The modes every run has (RFS only on request).
    pub const ALL: [Mode; 3] = [Mode::SoftwareRss, Mode::NoProgram, Mode::Rps];

    pub fn name(self) -> &'static str {
        match self {
            Mode::SoftwareRss => "software-rss",
            Mode::NoProgram => "no-program",
            Mode::Rps => "rps",
            Mode::Rfs => "rfs",
        }
    }

    /// The modes of repetition `r`: [`Mode::ALL`] (and RFS if `rfs`)
    /// rotated by `r`, so each mode runs in each position equally often.
    pub fn order(r: u32, rfs: bool) -> Vec<Mode> {
        let mut modes = Mode::ALL.to_vec();
        if rfs {
            modes.push(Mode::Rfs);
        }
        let n = modes.len();
        modes.rotate_left(r as usize % n);
        modes
    }
}

/// One iperf3 run in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub repetition: u32,
    pub mode: Mode,
    pub gbit_per_s: f64,
    pub retransmits: u64,
    pub drops: Drops,
}

/// One mode's samples: throughput mean and 95% confidence interval
/// (Student t), retransmits, and every drop counter summed.
#[derive(Debug, Clone, Serialize)]
pub struct ModeSummary {
    pub n: usize,
    pub mean_gbit: f64,
    /// `None` (JSON null) with one sample.
    pub ci95_gbit: Option<f64>,
    pub median_retransmits: f64,
    pub max_retransmits: u64,
    /// Summed over the mode's samples.
    pub drops: Drops,
    /// Frames lost anywhere on the path, summed over the samples.
    pub total_drops: u64,
}

/// `steer exp xdp-overhead` ([`Experiment`]).
#[derive(Debug)]
pub struct XdpOverheadExperiment;

/// A xdp-overhead run's result: its parameters and [`XdpOverheadOutput`], enveloped.
pub type XdpOverheadResult = Report<XdpOverheadExperiment>;

impl Experiment for XdpOverheadExperiment {
    const NAME: &'static str = "xdp-overhead";
    const DRAWS: bool = false;
    type Params = XdpOverheadParams;
    type Output = XdpOverheadOutput;

    params_do_the_sizing!();

    fn run(
        params: &XdpOverheadParams,
        progress: &mut dyn FnMut(String),
    ) -> Result<XdpOverheadOutput, ExpError> {
        run(params, |s| progress(s.progress_line()))
    }

    fn text(report: &XdpOverheadResult) -> Text {
        report.render()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct XdpOverheadOutput {
    /// The CPUs the software RSS delivers to, and RPS spreads over.
    pub cpus: Vec<u32>,
    pub samples: Vec<Sample>,
    pub with_software_rss: ModeSummary,
    pub without_program: ModeSummary,
    pub with_rps: ModeSummary,
    /// `None` (JSON null) unless RFS was asked for.
    pub with_rfs: Option<ModeSummary>,
    pub mean_with_gbit: f64,
    pub mean_without_gbit: f64,
    pub mean_rps_gbit: f64,
    /// software RSS / no program (goal: >= 0.70); `None` (JSON null) when
    /// nothing flowed without the program.
    pub ratio: Option<f64>,
    /// software RSS / RPS (goal: >= 1.0).
    pub ratio_to_rps: Option<f64>,
    /// RPS / no program.
    pub rps_ratio: Option<f64>,
    /// The baseline's own retransmit noise: the most retransmits of one
    /// sample with no program or with RPS. The software RSS adds none of its
    /// own while its median stays at or under this.
    pub retransmit_noise: u64,
}

/// Runs the benchmark; `progress` sees every sample.
fn run(
    params: &XdpOverheadParams,
    mut progress: impl FnMut(&Sample),
) -> Result<XdpOverheadOutput, ExpError> {
    params.check()?;
    let mut spec = LabSpec::new(&lab::unique_name("xo"));
    spec.queues = params.queues;
    spec.ipv6 = false;
    let lab = Lab::up(&spec)?.teardown_on_drop();
    let rcv = lab.receiver().clone();
    let config = lab.rss_config()?;
    let cpus = config.cpus();
    let addr = std::net::IpAddr::V4(rcv.ipv4);
    let opts = nic::AttachOptions {
        same_cpu_pass: params.same_cpu_pass,
        queue_size: params.queue_size,
        ..nic::AttachOptions::default()
    };
    // The lab attached with defaults; apply this run's options.
    nic::attach(&rcv.dev, Some(&rcv.netns), &config, &opts)?;
    if params.sender_pfifo > 0 {
        set_sender_pfifo(&lab, params.sender_pfifo)?;
    }
    let _rfs_table = params.rfs.then(RfsTable::enable).transpose()?;
    let path = Path {
        lab: &lab,
        config: &config,
        opts: &opts,
        cpus: &cpus,
        gro: params.receiver_gro,
    };
    let mut samples = Vec::new();
    for repetition in 0..params.repetitions {
        for mode in Mode::order(repetition, params.rfs) {
            path.enter(mode)?;
            let _server = iperf::Server::start(lab.command(&rcv.name, "iperf3")?, addr, PORT)?;
            let before = snapshot(&lab, mode)?;
            let (gbit_per_s, retransmits) = client(&lab, addr, params)?;
            let drops = counters::delta(&before, &snapshot(&lab, mode)?)?;
            let sample = Sample {
                repetition,
                mode,
                gbit_per_s,
                retransmits,
                drops,
            };
            progress(&sample);
            samples.push(sample);
            // Let the one-off server exit before the next one binds the port.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    summarize_run(params, cpus, samples)
}

/// The receiving side of the lab and how each mode sets it up.
struct Path<'a> {
    lab: &'a Lab,
    config: &'a rss::RssConfig,
    opts: &'a nic::AttachOptions,
    cpus: &'a [u32],
    gro: ReceiverGro,
}

impl Path<'_> {
    /// Attaches or detaches the software RSS, sets RPS/RFS and GRO on the
    /// receiving veth for `mode`.
    fn enter(&self, mode: Mode) -> Result<(), ExpError> {
        let rcv = self.lab.receiver();
        let netns = Some(rcv.netns.as_str());
        let attached = nic::attached_config(&rcv.dev, netns)?.is_some();
        match (mode, attached) {
            (Mode::SoftwareRss, false) => nic::attach(&rcv.dev, netns, self.config, self.opts)?,
            (Mode::NoProgram | Mode::Rps | Mode::Rfs, true) => nic::detach(&rcv.dev, netns)?,
            _ => {}
        }
        match mode {
            Mode::Rps => set_rps(self.lab, self.cpus, 0)?,
            Mode::Rfs => set_rps(self.lab, self.cpus, RFS_FLOW_CNT)?,
            Mode::SoftwareRss | Mode::NoProgram => set_rps(self.lab, &[], 0)?,
        }
        set_receiver_gro(self.lab, self.gro.on_in(mode))
    }
}

/// The result of a run's samples.
fn summarize_run(
    params: &XdpOverheadParams,
    cpus: Vec<u32>,
    samples: Vec<Sample>,
) -> Result<XdpOverheadOutput, ExpError> {
    let summary = |m: Mode| {
        let of: Vec<&Sample> = samples.iter().filter(|s| s.mode == m).collect();
        summarize(&of).ok_or_else(|| ExpError::Program {
            program: "xdp-overhead".into(),
            detail: format!("no sample in mode {}", m.name()),
        })
    };
    let with = summary(Mode::SoftwareRss)?;
    let without = summary(Mode::NoProgram)?;
    let rps = summary(Mode::Rps)?;
    let rfs = params.rfs.then(|| summary(Mode::Rfs)).transpose()?;
    Ok(XdpOverheadOutput {
        cpus,
        mean_with_gbit: with.mean_gbit,
        mean_without_gbit: without.mean_gbit,
        mean_rps_gbit: rps.mean_gbit,
        ratio: ratio(with.mean_gbit, without.mean_gbit),
        ratio_to_rps: ratio(with.mean_gbit, rps.mean_gbit),
        rps_ratio: ratio(rps.mean_gbit, without.mean_gbit),
        retransmit_noise: without.max_retransmits.max(rps.max_retransmits),
        with_software_rss: with,
        without_program: without,
        with_rps: rps,
        with_rfs: rfs,
        samples,
    })
}

/// One `iperf3 -c --json` run: (received Gbit/s, sender retransmits).
fn client(
    lab: &Lab,
    server: std::net::IpAddr,
    params: &XdpOverheadParams,
) -> Result<(f64, u64), ExpError> {
    let make = || Ok(lab.command(&lab.sender().name, "iperf3")?);
    let run = iperf::run_client(make, server, PORT, params.streams, params.seconds)?;
    let retransmits = run
        .retransmits
        .ok_or_else(|| ExpError::IperfOutput("no end.sum_sent.retransmits in a TCP run".into()))?;
    Ok((run.bits_per_second / 1e9, retransmits))
}

/// The drop counters now; the cpumap's only in software RSS mode.
fn snapshot(lab: &Lab, mode: Mode) -> Result<Snapshot, ExpError> {
    let (snd, rcv) = (lab.sender(), lab.receiver());
    // (rx dropped, tx dropped) from IFLA_STATS64; a device the kernel
    // sends no counters for is an error, never a zero.
    let link = |host: &lab::Host| -> Result<(u64, u64), ExpError> {
        let link = host::link::link(Some(&host.netns), &host.dev).map_err(lab::LabError::from)?;
        let stats = link.stats.ok_or_else(|| ExpError::Program {
            program: format!("reading the counters of {} in {}", host.dev, host.netns),
            detail: "the kernel sent no IFLA_STATS64".into(),
        })?;
        Ok((stats.rx_dropped, stats.tx_dropped))
    };
    let qdiscs = host::link::qdiscs(Some(&snd.netns), &snd.dev).map_err(lab::LabError::from)?;
    let softnet =
        std::fs::read_to_string("/proc/net/softnet_stat").map_err(|e| ExpError::Program {
            program: "read /proc/net/softnet_stat".into(),
            detail: e.to_string(),
        })?;
    let cpumap = match mode {
        Mode::SoftwareRss => {
            let stats = nic::stats(&rcv.dev, Some(&rcv.netns))?;
            Some(
                stats
                    .cpumap
                    .iter()
                    .fold(CpumapCounters::default(), |sum, c| CpumapCounters {
                        enqueued: sum.enqueued + c.enqueued,
                        enqueue_drops: sum.enqueue_drops + c.enqueue_drops,
                        kthread_drops: sum.kthread_drops + c.kthread_drops,
                    }),
            )
        }
        Mode::NoProgram | Mode::Rps | Mode::Rfs => None,
    };
    Ok(Snapshot {
        sender_tx_dropped: link(snd)?.1,
        receiver_rx_dropped: link(rcv)?.0,
        sender_qdisc: counters::qdisc_counters(&qdiscs)?,
        backlog_dropped: counters::parse_softnet_dropped(&softnet)?,
        cpumap,
    })
}

/// A pfifo of `limit` packets as the root qdisc of the sender's veth.
fn set_sender_pfifo(lab: &Lab, limit: u32) -> Result<(), ExpError> {
    let snd = lab.sender();
    host::link::replace_root_pfifo(&snd.netns, &snd.dev, limit).map_err(lab::LabError::from)?;
    Ok(())
}

/// GRO on or off on the receiving veth.
fn set_receiver_gro(lab: &Lab, on: bool) -> Result<(), ExpError> {
    let rcv = lab.receiver();
    host::link::set_gro(Some(&rcv.netns), &rcv.dev, on).map_err(lab::LabError::from)?;
    Ok(())
}

/// Entries of the RFS flow tables, global (`rps_sock_flow_entries`) and
/// per receive queue (`rps_flow_cnt`), as scaling.rst suggests for a
/// moderately loaded server.
const RFS_FLOW_CNT: u32 = 32768;

/// The machine-wide RFS socket flow table, set for the run and restored to
/// its previous size when dropped.
struct RfsTable {
    previous: String,
}

const RPS_SOCK_FLOW_ENTRIES: &str = "/proc/sys/net/core/rps_sock_flow_entries";

impl RfsTable {
    fn enable() -> Result<RfsTable, ExpError> {
        let io = |e: std::io::Error| ExpError::Program {
            program: RPS_SOCK_FLOW_ENTRIES.into(),
            detail: e.to_string(),
        };
        let previous = std::fs::read_to_string(RPS_SOCK_FLOW_ENTRIES).map_err(io)?;
        std::fs::write(RPS_SOCK_FLOW_ENTRIES, RFS_FLOW_CNT.to_string()).map_err(io)?;
        Ok(RfsTable {
            previous: previous.trim().to_string(),
        })
    }
}

impl Drop for RfsTable {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(RPS_SOCK_FLOW_ENTRIES, &self.previous) {
            eprintln!(
                "restoring {RPS_SOCK_FLOW_ENTRIES} to {}: {e}",
                self.previous
            );
        }
    }
}

/// One mode's summary; `None` without samples.
fn summarize(samples: &[&Sample]) -> Option<ModeSummary> {
    let gbit: Vec<f64> = samples.iter().map(|s| s.gbit_per_s).collect();
    let s = stat(&gbit)?;
    let mut retransmits: Vec<f64> = samples.iter().map(|s| s.retransmits as f64).collect();
    retransmits.sort_by(f64::total_cmp);
    let drops = samples
        .iter()
        .skip(1)
        .fold(samples[0].drops.clone(), |sum, s| sum.add(&s.drops));
    Some(ModeSummary {
        n: samples.len(),
        mean_gbit: s.mean,
        ci95_gbit: s.ci95,
        median_retransmits: median(&retransmits),
        max_retransmits: samples.iter().map(|s| s.retransmits).max()?,
        total_drops: drops.total(),
        drops,
    })
}

/// Median of sorted, non-empty values.
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// a / b; `None` when nothing flowed in b.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "clap")]
    #[test]
    fn the_command_line_defaults_are_the_library_defaults() {
        assert!(crate::clap_defaults_are_the_library_defaults::<
            XdpOverheadParams,
        >());
        let p: XdpOverheadParams =
            crate::parse_params(&["--qsize", "64", "--streams", "2", "--receiver-gro", "all"])
                .unwrap();
        assert_eq!((p.queue_size, p.streams), (64, 2));
        assert_eq!(p.receiver_gro, ReceiverGro::All);
        assert!(crate::parse_params::<XdpOverheadParams>(&["--receiver-gro", "on"]).is_err());
    }

    #[test]
    fn receiver_gro_names_are_the_json_names() {
        for gro in ReceiverGro::ALL {
            assert_eq!(serde_json::to_value(gro).unwrap(), gro.name());
            assert!(!gro.about().ends_with('.'));
        }
    }

    pub(super) fn sample(repetition: u32, mode: Mode, gbit_per_s: f64, retransmits: u64) -> Sample {
        Sample {
            repetition,
            mode,
            gbit_per_s,
            retransmits,
            drops: Drops {
                sender_tx_dropped: retransmits,
                ..Drops::default()
            },
        }
    }

    #[test]
    fn summary_of_samples() {
        let xs = [
            sample(0, Mode::Rps, 4.0, 1),
            sample(1, Mode::Rps, 5.0, 9),
            sample(2, Mode::Rps, 6.0, 4),
        ];
        let refs: Vec<&Sample> = xs.iter().collect();
        let s = summarize(&refs).unwrap();
        assert_eq!(s.n, 3);
        assert!((s.mean_gbit - 5.0).abs() < 1e-12);
        // sd 1, se 1/sqrt(3), t(0.975, 2) = 4.302653
        assert!((s.ci95_gbit.unwrap() - 4.302653 / 3f64.sqrt()).abs() < 1e-5);
        assert_eq!(s.median_retransmits, 4.0);
        assert_eq!(s.max_retransmits, 9);
        assert_eq!(s.drops.sender_tx_dropped, 14);
        assert_eq!(s.total_drops, 14);
        assert_eq!(summarize(&refs[..1]).unwrap().ci95_gbit, None);
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn every_mode_runs_in_every_position() {
        assert_eq!(Mode::order(0, false), Mode::ALL.to_vec());
        let firsts: Vec<Mode> = (0..3).map(|r| Mode::order(r, false)[0]).collect();
        for m in Mode::ALL {
            assert!(firsts.contains(&m));
        }
        assert_eq!(Mode::order(3, false), Mode::order(0, false));
        let with_rfs: Vec<Mode> = (0..4).map(|r| Mode::order(r, true)[3]).collect();
        assert_eq!(with_rfs.len(), 4);
        assert!(Mode::order(1, true).contains(&Mode::Rfs));
        assert!((0..4).all(|r| Mode::order(r, true).len() == 4));
        assert!(with_rfs.contains(&Mode::Rfs) && with_rfs.contains(&Mode::SoftwareRss));
    }

    #[test]
    fn result_ratios_and_noise() {
        let samples = vec![
            sample(0, Mode::SoftwareRss, 3.0, 50),
            sample(0, Mode::NoProgram, 4.0, 300),
            sample(0, Mode::Rps, 6.0, 20),
        ];
        let r = summarize_run(&XdpOverheadParams::default(), vec![0, 1], samples).unwrap();
        assert_eq!(r.ratio, Some(0.75));
        assert_eq!(r.ratio_to_rps, Some(0.5));
        assert_eq!(r.rps_ratio, Some(1.5));
        assert_eq!(r.retransmit_noise, 300);
        // A mode without samples is an error, not a zero.
        let missing = vec![sample(0, Mode::SoftwareRss, 3.0, 0)];
        assert!(summarize_run(&XdpOverheadParams::default(), vec![0], missing).is_err());
    }

    #[test]
    fn gro_follows_the_mode() {
        use ReceiverGro::*;
        assert!(SoftwareRss.on_in(Mode::SoftwareRss));
        assert!(!SoftwareRss.on_in(Mode::Rps));
        assert!(!SoftwareRss.on_in(Mode::NoProgram));
        assert!(Mode::ALL.iter().all(|&m| All.on_in(m) && !Off.on_in(m)));
    }

    #[test]
    fn no_traffic_in_the_baseline_has_no_ratio() {
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(0.0, 0.0), None);
        assert_eq!(ratio(3.0, 4.0), Some(0.75));
    }

    #[test]
    fn bad_parameters() {
        for p in [
            XdpOverheadParams {
                streams: 0,
                ..XdpOverheadParams::default()
            },
            XdpOverheadParams {
                queue_size: 20000,
                ..XdpOverheadParams::default()
            },
            XdpOverheadParams {
                repetitions: 0,
                ..XdpOverheadParams::default()
            },
        ] {
            assert!(matches!(p.check(), Err(ExpError::Parameter(_))));
        }
        assert!(XdpOverheadParams::default().quick().check().is_ok());
    }
}
