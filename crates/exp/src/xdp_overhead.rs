//! `steer exp xdp-overhead`: what the XDP software RSS costs TCP throughput
//! (docs/performance.md, "What the XDP software RSS costs TCP").
//!
//! One lab (sender `snd`, receiver `rcv`, IPv6 off, tx checksum offload off
//! on the sender's veth in both modes), `streams` parallel iperf3 flows,
//! alternating in one run between "software RSS attached" and "no program"
//! (the order flips every repetition, so drift hits both alike). Every
//! sample comes from `iperf3 --json`: received Gbit/s and sender retransmits.

use std::time::Duration;

use lab::{Lab, LabSpec};
use serde::Serialize;
use stats::{stat, Meta};

use crate::iperf;
use crate::ExpError;

/// The iperf3 port.
const PORT: u16 = 5201;

#[derive(Debug, Clone, Serialize)]
pub struct XdpOverheadParams {
    pub repetitions: u32,
    pub seconds: u32,
    pub streams: u32,
    pub queues: u32,
    /// XDP_PASS when the target CPU is the current one (reorders TCP).
    pub same_cpu_pass: bool,
    /// cpumap queue size.
    pub queue_size: u32,
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
            queue_size: 2048,
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
        let bad = |m: &str| Err(ExpError::Parameter(m.into()));
        if self.repetitions == 0 {
            return bad("--repetitions must be at least 1");
        }
        if self.seconds == 0 {
            return bad("--seconds must be at least 1");
        }
        if self.streams == 0 || self.streams > 128 {
            return bad("--flows must be 1..=128");
        }
        if self.queues == 0 || self.queues > 256 {
            return bad("--queues must be 1..=256");
        }
        if self.queue_size == 0 {
            return bad("--qsize must be at least 1");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    SoftwareRss,
    NoProgram,
}

/// One iperf3 run in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub repetition: u32,
    pub mode: Mode,
    pub gbit_per_s: f64,
    pub retransmits: u64,
}

/// Mean and 95% confidence interval (Student t) of one mode's samples.
#[derive(Debug, Clone, Serialize)]
pub struct ModeSummary {
    pub n: usize,
    pub mean_gbit: f64,
    /// `None` (JSON null) with one sample.
    pub ci95_gbit: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct XdpOverheadResult {
    pub experiment: &'static str,
    pub params: XdpOverheadParams,
    pub samples: Vec<Sample>,
    pub with_software_rss: ModeSummary,
    pub without_program: ModeSummary,
    pub mean_with_gbit: f64,
    pub mean_without_gbit: f64,
    /// mean with / mean without (goal: >= 0.70); `None` (JSON null) when
    /// nothing flowed without the program (no ratio to take).
    pub ratio: Option<f64>,
    pub meta: Meta,
}

/// Runs the benchmark; `progress` sees every sample.
pub fn run(
    params: &XdpOverheadParams,
    mut progress: impl FnMut(&Sample),
) -> Result<XdpOverheadResult, ExpError> {
    params.check()?;
    let mut spec = LabSpec::new(&lab::unique_name("xo"));
    spec.queues = params.queues;
    spec.ipv6 = false;
    let lab = Lab::up(&spec)?.teardown_on_drop();
    let rcv = lab.receiver().clone();
    let config = lab.rss_config()?;
    let addr = std::net::IpAddr::V4(rcv.ipv4);
    let opts = nic::AttachOptions {
        same_cpu_pass: params.same_cpu_pass,
        queue_size: params.queue_size,
        ..nic::AttachOptions::default()
    };
    // The lab attached with defaults; apply this run's options.
    nic::attach(&rcv.dev, Some(&rcv.netns), &config, &opts)?;
    let mut samples = Vec::new();
    for repetition in 0..params.repetitions {
        let order = if repetition % 2 == 0 {
            [Mode::SoftwareRss, Mode::NoProgram]
        } else {
            [Mode::NoProgram, Mode::SoftwareRss]
        };
        for mode in order {
            let attached = nic::attached_config(&rcv.dev, Some(&rcv.netns))?.is_some();
            match (mode, attached) {
                (Mode::SoftwareRss, false) => {
                    nic::attach(&rcv.dev, Some(&rcv.netns), &config, &opts)?
                }
                (Mode::NoProgram, true) => nic::detach(&rcv.dev, Some(&rcv.netns))?,
                _ => {}
            }
            let _server = iperf::Server::start(lab.command(&rcv.name, "iperf3")?, addr, PORT)?;
            let (gbit_per_s, retransmits) = client(&lab, addr, params)?;
            let sample = Sample {
                repetition,
                mode,
                gbit_per_s,
                retransmits,
            };
            progress(&sample);
            samples.push(sample);
            // Let the one-off server exit before the next one binds the port.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let of = |m: Mode| -> Vec<f64> {
        samples
            .iter()
            .filter(|s| s.mode == m)
            .map(|s| s.gbit_per_s)
            .collect()
    };
    let summary = |m: Mode| {
        summarize(&of(m)).ok_or_else(|| ExpError::Parameter(format!("no sample in mode {m:?}")))
    };
    let with = summary(Mode::SoftwareRss)?;
    let without = summary(Mode::NoProgram)?;
    Ok(XdpOverheadResult {
        experiment: "xdp-overhead",
        params: params.clone(),
        mean_with_gbit: with.mean_gbit,
        mean_without_gbit: without.mean_gbit,
        ratio: ratio(with.mean_gbit, without.mean_gbit),
        with_software_rss: with,
        without_program: without,
        samples,
        meta: Meta::collect(),
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

/// Mean and 95% CI half-width (Student t, two-sided); `None` without samples.
pub fn summarize(xs: &[f64]) -> Option<ModeSummary> {
    stat(xs).map(|s| ModeSummary {
        n: xs.len(),
        mean_gbit: s.mean,
        ci95_gbit: s.ci95,
    })
}

/// with / without; `None` when nothing flowed without the program.
fn ratio(with: f64, without: f64) -> Option<f64> {
    (without > 0.0).then(|| with / without)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_samples() {
        let s = summarize(&[4.0, 5.0, 6.0]).unwrap();
        assert_eq!(s.n, 3);
        assert!((s.mean_gbit - 5.0).abs() < 1e-12);
        // sd 1, se 1/sqrt(3), t(0.975, 2) = 4.302653
        assert!((s.ci95_gbit.unwrap() - 4.302653 / 3f64.sqrt()).abs() < 1e-5);
        assert_eq!(summarize(&[3.0]).unwrap().ci95_gbit, None);
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn no_traffic_without_the_program_has_no_ratio() {
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(0.0, 0.0), None);
        assert_eq!(ratio(3.0, 4.0), Some(0.75));
    }

    #[test]
    fn bad_parameters() {
        let p = XdpOverheadParams {
            streams: 0,
            ..XdpOverheadParams::default()
        };
        assert!(p.check().is_err());
        assert!(XdpOverheadParams::default().quick().check().is_ok());
    }
}
