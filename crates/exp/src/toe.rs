//! `steer exp toe`: the userspace TCP data path (crate `toe`, after
//! FlexTOE, thesis chapter 4) against Linux TCP on the same lab path, with
//! the same cores and MTU (docs/toe.md).
//!
//! One lab (sender `snd` with Linux TCP clients, receiver `rcv`), IPv6 off,
//! tx checksum offload (and with it TSO) off on the sender's veth and GRO
//! off on the receiver's, so neither stack gets a larger segment than the
//! other. Each repetition runs both stacks, the order flipping every
//! repetition:
//!
//! - stream: one connection sends `bytes` (a pattern the receiver checks
//!   byte for byte); goodput measured at the receiver from its first byte
//!   to the FIN;
//! - RPC: one connection, `rpcs` requests of `rpc_size` bytes, each echoed
//!   before the next (the client checks every echo); latency per request
//!   at the client.
//!
//! The data path runs to completion on one core (thesis Table 4.4's
//! baseline), its poll loop pinned to CPU 1; the Linux server thread is
//! pinned there too, the clients to CPU 0 (the result's `pinned_cpus`
//! says which pins this host allowed).
//!
//! Then thesis Table 4.4's ablation ([`toe::ablation`]: the pipeline
//! driven in-process, 64 connections with one 2 KB RPC in flight each) for
//! each layout from 1 thread up to the CPUs present (or `--threads`; more
//! than the host has run with a warning in the result), and the three
//! ways to lock connection state under parallel input
//! ([`toe::input`], OpenBSD's slides): one softnet thread per core, one and
//! ten streams, the modes rotated every repetition; segments per second.

mod text;

use crate::refuse_if;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use lab::{Lab, LabError, LabSpec};
use plot::text::Text;
use serde::Serialize;
use toe::ablation::{AblationConfig, AblationResult, Step};
use toe::cycles::StageCycles;
use toe::input::{InputRun, Locking, Workload};
use toe::{Endpoint, EndpointConfig, ToeError};

use crate::cpus::{pin, PinnedCpus};
use crate::datapath::{endpoint, pattern, toe_addr, toe_err, StreamCheck};
use crate::experiment::{Experiment, Report};
use crate::ExpError;

const STREAM_PORT: u16 = 5201;
const RPC_PORT: u16 = 5202;
/// How long any one transfer may take before the run fails.
const TRANSFER_LIMIT: Duration = Duration::from_secs(120);
/// The CPU of the data path's poll loop and of the Linux server thread.
const SERVER_CPU: usize = 1;
/// The CPU of the clients, on the sender's side.
const CLIENT_CPU: usize = 0;
/// Each role's CPU, as the result names them.
const PINS: [(&str, usize); 3] = [
    ("data_path", SERVER_CPU),
    ("linux_server", SERVER_CPU),
    ("clients", CLIENT_CPU),
];

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ToeParams {
    /// Repetitions; each runs both stacks (order flipped every repetition).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ToeParams::default().repetitions))]
    pub repetitions: u32,
    /// Bytes of the one-connection stream (e.g. 1073741824 for 1 GiB).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ToeParams::default().bytes))]
    pub bytes: u64,
    /// Requests of the RPC test (one in flight, echoed).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ToeParams::default().rpcs))]
    pub rpcs: u32,
    /// Bytes per request and response.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ToeParams::default().rpc_size))]
    pub rpc_size: usize,
    /// Worker threads of the Table 4.4 ablation's largest layout (its
    /// layouts run from 1 thread up to this many); default: the CPUs
    /// present. More than the host has run, with a warning in the output.
    #[cfg_attr(feature = "clap", arg(long))]
    pub threads: Option<usize>,
    /// The reduced run ([`ToeParams::quick`]); the binary's `--quick`.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub quick: bool,
}

impl Default for ToeParams {
    fn default() -> Self {
        ToeParams {
            repetitions: 5,
            bytes: 1 << 30,
            rpcs: 20_000,
            rpc_size: 64,
            threads: None,
            quick: false,
        }
    }
}

impl ToeParams {
    /// The reduced run for CI and the matrix.
    pub fn quick(mut self) -> Self {
        self.repetitions = 2;
        self.bytes = 64 << 20;
        self.rpcs = 2_000;
        self.quick = true;
        self
    }

    pub fn check(&self) -> Result<(), ExpError> {
        refuse_if(self.repetitions == 0, "--repetitions must be at least 1")?;
        refuse_if(self.bytes == 0, "--bytes must be at least 1")?;
        refuse_if(self.rpcs == 0, "--rpcs must be at least 1")?;
        refuse_if(
            self.rpc_size == 0 || self.rpc_size > 65536,
            "--rpc-size must be 1..=65536",
        )?;
        let max = toe::ablation::MAX_THREADS;
        refuse_if(
            self.threads.is_some_and(|t| t == 0 || t > max),
            &format!("--threads must be 1..={max} (the stages of the largest ablation layout)"),
        )?;
        Ok(())
    }

    /// Worker threads of the ablation's largest layout: `--threads`, or
    /// the CPUs present.
    pub fn ablation_threads(&self) -> usize {
        self.threads.unwrap_or_else(crate::cpus::present)
    }
}

/// The warning a run gives when its ablation asks for more threads than
/// the `cpus` present: those layouts share CPUs, so they show contention,
/// not scaling.
fn threads_warning(threads: usize, cpus: usize) -> Option<String> {
    (threads > cpus).then(|| {
        format!(
            "--threads {threads} asks for more threads than the {cpus} CPUs present: the \
             ablation's layouts above {cpus} threads share CPUs, so they measure contention, \
             not scaling"
        )
    })
}

/// Which TCP served the receiver's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    Toe,
    Linux,
}

#[derive(Debug, Clone, Serialize)]
pub struct StreamSample {
    pub repetition: u32,
    pub stack: Stack,
    pub bytes: u64,
    /// Null when nothing arrived (no time to divide by).
    pub gbit_per_s: Option<f64>,
    /// Every byte matched what the client sent.
    pub verified: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RpcSample {
    pub repetition: u32,
    pub stack: Stack,
    pub requests: u32,
    /// Null without a completed request.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p9999_us: Option<f64>,
    /// Every echo matched its request.
    pub verified: bool,
}

/// `steer exp toe` ([`Experiment`]).
#[derive(Debug)]
pub struct ToeExperiment;

/// A toe run's result: its parameters and [`ToeOutput`], enveloped.
pub type ToeResult = Report<ToeExperiment>;

impl Experiment for ToeExperiment {
    const NAME: &'static str = "toe";
    const DRAWS: bool = false;
    type Params = ToeParams;
    type Output = ToeOutput;

    params_do_the_sizing!();

    fn run(params: &ToeParams, progress: &mut dyn FnMut(String)) -> Result<ToeOutput, ExpError> {
        run(params, |p| progress(p.progress_line()))
    }

    fn text(report: &ToeResult) -> Text {
        report.render()
    }

    fn succeeded(output: &ToeOutput) -> bool {
        output.byte_exact
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ToeOutput {
    /// True only if every transfer of the run was checked byte for byte:
    /// both stacks' streams and RPCs, and every echo of the Table 4.4
    /// ablation ([`AblationResult::byte_exact`]).
    pub byte_exact: bool,
    pub stream: Vec<StreamSample>,
    pub rpc: Vec<RpcSample>,
    /// Means over repetitions; null without a sample.
    pub toe_stream_gbit: Option<f64>,
    pub linux_stream_gbit: Option<f64>,
    /// toe / Linux (the goal: at least 1 with offloads off).
    pub stream_ratio: Option<f64>,
    pub toe_rpc_p50_us: Option<f64>,
    pub linux_rpc_p50_us: Option<f64>,
    /// toe / Linux (the goal: at most 1).
    pub rpc_p50_ratio: Option<f64>,
    /// The data path's own counts over the run (drops by reason,
    /// retransmissions, ...).
    pub toe_counters: toe::Counters,
    /// What each stage of the data path cost per segment, over the toe
    /// rounds (thesis Table 2.2's breakdown); null without a segment.
    pub stage_cycles: Option<CyclesPerSegment>,
    /// Table 4.4's designs, one row each (in-process, no lab), from 1
    /// thread up to `ablation_threads`.
    pub ablation: Vec<AblationRow>,
    /// Worker threads of the ablation's largest layout: `--threads`, or
    /// the CPUs present (`meta.cores`).
    pub ablation_threads: usize,
    /// The CPU each role's threads were pinned to (`data_path`,
    /// `linux_server`, `clients`); null where this host has no such CPU.
    /// The ablation's workers are not pinned.
    pub pinned_cpus: PinnedCpus,
    /// What the numbers cannot show by themselves (more ablation threads
    /// than CPUs); also printed with the tables.
    pub warnings: Vec<String>,
    /// Parallel input, every run.
    pub locking: Vec<LockingSample>,
    /// Per stream count, each mode's mean rate against the exclusive
    /// lock's (OpenBSD: per-flow batches +9% with one stream, +240% with
    /// many, on 4 CPUs).
    pub locking_summary: Vec<LockingSummary>,
    /// Every (stream count, locking mode) cell ran in every repetition and
    /// every one of its runs delivered all its bytes in order: a mode that
    /// loses or misorders bytes is a failed run, whatever its rate.
    pub locking_complete: bool,
}

/// Ticks ([`toe::cycles::UNIT`]) per segment, received and sent together.
#[derive(Debug, Clone, Serialize)]
pub struct CyclesPerSegment {
    pub unit: &'static str,
    pub segments: u64,
    pub netif: f64,
    pub pre: f64,
    pub protocol: f64,
    pub post: f64,
    pub copy: f64,
    pub total: f64,
}

fn per_segment(c: &StageCycles) -> Option<CyclesPerSegment> {
    let segments = c.rx_segments + c.tx_segments;
    if segments == 0 {
        return None;
    }
    let per = |v: u64| v as f64 / segments as f64;
    Some(CyclesPerSegment {
        unit: toe::cycles::UNIT,
        segments,
        netif: per(c.netif),
        pre: per(c.pre),
        protocol: per(c.protocol),
        post: per(c.post),
        copy: per(c.copy),
        total: per(c.netif + c.pre + c.protocol + c.post + c.copy),
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct AblationRow {
    /// The step of Table 4.4 the layout adds.
    pub step: Step,
    pub design: String,
    pub threads: usize,
    pub groups: usize,
    pub replicas: usize,
    #[serde(flatten)]
    pub result: AblationResult,
}

#[derive(Debug, Clone, Serialize)]
pub struct LockingSample {
    pub repetition: u32,
    #[serde(flatten)]
    pub run: InputRun,
    /// Every connection delivered all its bytes in order.
    pub complete: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LockingSummary {
    pub streams: usize,
    pub locking: Locking,
    /// Runs of this cell, and how many delivered all their bytes.
    pub runs: usize,
    pub complete_runs: usize,
    /// Null unless every run of the cell was complete: a mean over the
    /// complete ones would hide the others.
    pub mean_segments_per_s: Option<f64>,
    /// Against the exclusive lock with as many streams.
    pub vs_exclusive: Option<f64>,
}

/// What a run reports as it goes.
pub enum Progress<'a> {
    Stream(&'a StreamSample),
    Rpc(&'a RpcSample),
    Locking(&'a LockingSample),
    Ablation(&'a AblationRow),
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> ExpError + '_ {
    move |e| ExpError::Program {
        program: what.to_string(),
        detail: e.to_string(),
    }
}

/// Runs the experiment; `progress` sees every sample.
fn run(params: &ToeParams, mut progress: impl FnMut(Progress<'_>)) -> Result<ToeOutput, ExpError> {
    params.check()?;
    let mut spec = LabSpec::new(&lab::unique_name("toe"));
    spec.software_rss = false;
    spec.ipv6 = false;
    let lab = Lab::up(&spec)?.teardown_on_drop();
    offloads_off(&lab)?;
    let mut stream = Vec::new();
    let mut rpc = Vec::new();
    let mut counters = toe::Counters::default();
    let mut cycles = StageCycles::default();
    for rep in 0..params.repetitions {
        let order = if rep % 2 == 0 {
            [Stack::Toe, Stack::Linux]
        } else {
            [Stack::Linux, Stack::Toe]
        };
        for stack in order {
            let (s, r, c) = match stack {
                Stack::Toe => toe_round(&lab, params, rep)?,
                Stack::Linux => linux_round(&lab, params, rep)?,
            };
            counters += c.0;
            cycles += c.1;
            progress(Progress::Stream(&s));
            progress(Progress::Rpc(&r));
            stream.push(s);
            rpc.push(r);
        }
    }
    drop(lab);
    let ablation = ablation_rows(params, &mut progress);
    let locking = locking_runs(params, &mut progress);
    Ok(ToeOutput {
        stage_cycles: per_segment(&cycles),
        ..summarize(params, stream, rpc, counters, ablation, locking)
    })
}

/// Every layout of [`toe::ablation::layouts`] up to the run's threads,
/// for 1 s (quick) or 5 s.
fn ablation_rows(params: &ToeParams, progress: &mut impl FnMut(Progress<'_>)) -> Vec<AblationRow> {
    let secs = if params.quick { 1 } else { 5 };
    toe::ablation::layouts(params.ablation_threads())
        .into_iter()
        .map(|layout| {
            let pipeline = layout.pipeline;
            let row = AblationRow {
                step: layout.step,
                design: layout.design,
                threads: pipeline.threads,
                groups: pipeline.groups,
                replicas: pipeline.pre,
                result: toe::ablation::run(AblationConfig {
                    connections: 64,
                    rpc_bytes: 2048,
                    duration: Duration::from_secs(secs),
                    pipeline,
                }),
            };
            progress(Progress::Ablation(&row));
            row
        })
        .collect()
}

/// The stream counts of the parallel-input runs: one, and OpenBSD's many.
const LOCKING_STREAMS: [usize; 2] = [1, 10];

/// Parallel input: one softnet thread per core, 1 and 10 streams, every
/// mode in every repetition (rotated).
fn locking_runs(params: &ToeParams, progress: &mut impl FnMut(Progress<'_>)) -> Vec<LockingSample> {
    let threads = crate::cpus::present();
    let segments = if params.quick { 20_000 } else { 200_000 };
    let mut out = Vec::new();
    for rep in 0..params.repetitions {
        for streams in LOCKING_STREAMS {
            let w = Workload {
                streams,
                segments: segments / streams as u32,
                len: 1448,
                threads,
                batch: 64,
            };
            for i in 0..Locking::ALL.len() {
                let locking = Locking::ALL[(i + rep as usize) % Locking::ALL.len()];
                let run = toe::input::run(locking, w);
                let complete =
                    run.delivered == u64::from(w.segments) * u64::from(w.len) * streams as u64;
                let sample = LockingSample {
                    repetition: rep,
                    run,
                    complete,
                };
                progress(Progress::Locking(&sample));
                out.push(sample);
            }
        }
    }
    out
}

/// Each (stream count, mode) cell of the parallel-input runs; a cell's
/// mean only when every one of its runs was complete.
fn locking_summary(samples: &[LockingSample]) -> Vec<LockingSummary> {
    let cell = |streams: usize, l: Locking| {
        samples
            .iter()
            .filter(move |s| s.run.workload.streams == streams && s.run.locking == l)
    };
    let mean = |streams: usize, l: Locking| {
        let rates: Option<Vec<f64>> = cell(streams, l)
            .map(|s| s.complete.then_some(s.run.segments_per_s))
            .collect();
        stats::mean(&rates?)
    };
    let mut out = Vec::new();
    for streams in LOCKING_STREAMS {
        let base = mean(streams, Locking::Exclusive);
        for l in Locking::ALL {
            let m = mean(streams, l);
            out.push(LockingSummary {
                streams,
                locking: l,
                runs: cell(streams, l).count(),
                complete_runs: cell(streams, l).filter(|s| s.complete).count(),
                mean_segments_per_s: m,
                vs_exclusive: m.zip(base).filter(|(_, b)| *b > 0.0).map(|(m, b)| m / b),
            });
        }
    }
    out
}

/// Whether every cell of `summary` ran `repetitions` times, each run
/// complete.
fn locking_complete(summary: &[LockingSummary], repetitions: u32) -> bool {
    !summary.is_empty()
        && summary
            .iter()
            .all(|s| s.runs == repetitions as usize && s.complete_runs == s.runs)
}

fn summarize(
    params: &ToeParams,
    stream: Vec<StreamSample>,
    rpc: Vec<RpcSample>,
    toe_counters: toe::Counters,
    ablation: Vec<AblationRow>,
    locking: Vec<LockingSample>,
) -> ToeOutput {
    let locking_summary = locking_summary(&locking);
    // A mean over every sample of a stack, or none if one was not
    // measured (a missing value never averages into a smaller one).
    let all = |v: Vec<Option<f64>>| -> Option<f64> {
        let v: Option<Vec<f64>> = v.into_iter().collect();
        stats::mean(&v?)
    };
    let stream_mean = |stack: Stack| {
        all(stream
            .iter()
            .filter(|s| s.stack == stack)
            .map(|s| s.gbit_per_s)
            .collect())
    };
    let rpc_mean = |stack: Stack| {
        all(rpc
            .iter()
            .filter(|s| s.stack == stack)
            .map(|s| s.p50_us)
            .collect())
    };
    let toe_gbit = stream_mean(Stack::Toe);
    let linux_gbit = stream_mean(Stack::Linux);
    let (toe_p50, linux_p50) = (rpc_mean(Stack::Toe), rpc_mean(Stack::Linux));
    let ratio =
        |a: Option<f64>, b: Option<f64>| a.zip(b).filter(|(_, b)| *b > 0.0).map(|(a, b)| a / b);
    ToeOutput {
        byte_exact: !stream.is_empty()
            && !rpc.is_empty()
            && stream.iter().all(|s| s.verified)
            && rpc.iter().all(|s| s.verified)
            && ablation.iter().all(|a| a.result.byte_exact),
        toe_stream_gbit: toe_gbit,
        linux_stream_gbit: linux_gbit,
        stream_ratio: ratio(toe_gbit, linux_gbit),
        toe_rpc_p50_us: toe_p50,
        linux_rpc_p50_us: linux_p50,
        rpc_p50_ratio: ratio(toe_p50, linux_p50),
        stream,
        rpc,
        toe_counters,
        locking_complete: locking_complete(&locking_summary, params.repetitions),
        locking_summary,
        locking,
        ablation,
        ablation_threads: params.ablation_threads(),
        pinned_cpus: PinnedCpus::of(&PINS),
        warnings: threads_warning(params.ablation_threads(), crate::cpus::present())
            .into_iter()
            .collect(),
        stage_cycles: None,
    }
}

/// tx checksum (and TSO) off on the sender, GRO off on the receiver.
fn offloads_off(lab: &Lab) -> Result<(), ExpError> {
    let rcv = lab.receiver();
    lab::inject::checksums_in_software_towards(lab, rcv)?;
    host::link::set_gro(Some(&rcv.netns), &rcv.dev, false).map_err(LabError::from)?;
    Ok(())
}

/// Both tests against the data path on the receiver.
fn toe_round(
    lab: &Lab,
    params: &ToeParams,
    rep: u32,
) -> Result<(StreamSample, RpcSample, (toe::Counters, StageCycles)), ExpError> {
    let addr = toe_addr(lab);
    let mut ep = endpoint(lab.receiver(), addr, EndpointConfig::default())?;
    ep.listen(STREAM_PORT);
    ep.listen(RPC_PORT);
    let (bytes, rpcs, size) = (params.bytes, params.rpcs, params.rpc_size);
    let server = std::thread::spawn(move || -> Result<_, ExpError> {
        pin(SERVER_CPU);
        let stream = toe_stream_server(&mut ep, bytes)?;
        toe_echo_server(&mut ep, size)?;
        Ok((stream, (ep.counters(), ep.stage_cycles())))
    });
    let sent = run_clients(lab, addr, params)?;
    let ((received, secs, verified), counters) = server
        .join()
        .map_err(|_| ExpError::Parameter("the toe server thread panicked".into()))??;
    Ok((
        stream_sample(
            rep,
            Stack::Toe,
            received,
            secs,
            verified && received == sent.0,
        ),
        rpc_sample(rep, Stack::Toe, rpcs, &sent.1, sent.2),
        counters,
    ))
}

/// Polls `ep` until `done` says so (busy: the data path owns its core).
fn poll_until(
    ep: &mut Endpoint,
    what: &str,
    mut done: impl FnMut(&mut Endpoint) -> Result<bool, ExpError>,
) -> Result<(), ExpError> {
    let deadline = Instant::now() + TRANSFER_LIMIT;
    let mut polls = 0u32;
    while !done(ep)? {
        polls = polls.wrapping_add(1);
        // The clock is read once every 4096 polls: it costs more than a
        // poll that finds nothing.
        if polls.is_multiple_of(4096) && Instant::now() > deadline {
            return Err(ExpError::Program {
                program: "the toe data path".into(),
                detail: format!(
                    "{what} did not finish in {TRANSFER_LIMIT:?}: {:?}",
                    ep.counters()
                ),
            });
        }
        ep.poll().map_err(toe_err)?;
    }
    Ok(())
}

/// Receives one stream to its FIN, checking every byte; returns (bytes,
/// seconds from the first byte, all matched).
fn toe_stream_server(ep: &mut Endpoint, expect: u64) -> Result<(u64, f64, bool), ExpError> {
    let mut conn = None;
    poll_until(ep, "accepting the stream", |ep| {
        conn = ep.accept(STREAM_PORT);
        Ok(conn.is_some())
    })?;
    let conn = conn.expect("accepted above");
    let mut stream = StreamCheck::default();
    let mut buf = vec![0u8; 1 << 16];
    poll_until(ep, "the stream", |ep| match ep.recv(conn, &mut buf) {
        Ok(0) => Ok(true),
        Ok(n) => {
            stream.take(&buf[..n]);
            Ok(false)
        }
        Err(ToeError::WouldBlock) => Ok(false),
        Err(e) => Err(toe_err(e)),
    })?;
    let (got, secs, ok) = stream.finish();
    ep.close(conn).map_err(toe_err)?;
    Ok((got, secs, ok && got == expect))
}

/// Echoes `size`-byte requests until the client closes.
fn toe_echo_server(ep: &mut Endpoint, size: usize) -> Result<(), ExpError> {
    let mut conn = None;
    poll_until(ep, "accepting the RPC connection", |ep| {
        conn = ep.accept(RPC_PORT);
        Ok(conn.is_some())
    })?;
    let conn = conn.expect("accepted above");
    let mut req = vec![0u8; size];
    let mut have = 0;
    poll_until(ep, "the RPCs", |ep| match ep.recv(conn, &mut req[have..]) {
        Ok(0) => Ok(true),
        Ok(n) => {
            have += n;
            if have == size {
                let mut at = 0;
                while at < size {
                    match ep.send(conn, &req[at..]) {
                        Ok(n) => at += n,
                        Err(ToeError::WouldBlock) => {
                            ep.poll().map_err(toe_err)?;
                        }
                        Err(e) => return Err(toe_err(e)),
                    }
                }
                have = 0;
            }
            Ok(false)
        }
        Err(ToeError::WouldBlock) => Ok(false),
        Err(e) => Err(toe_err(e)),
    })?;
    ep.close(conn).map_err(toe_err)?;
    // Let our FIN and the last ACKs out.
    let until = Instant::now() + Duration::from_millis(50);
    while Instant::now() < until {
        ep.poll().map_err(toe_err)?;
    }
    Ok(())
}

/// Both tests against Linux TCP on the receiver's own address.
fn linux_round(
    lab: &Lab,
    params: &ToeParams,
    rep: u32,
) -> Result<(StreamSample, RpcSample, (toe::Counters, StageCycles)), ExpError> {
    let rcv = lab.receiver().clone();
    let addr = IpAddr::V4(rcv.ipv4);
    let bind = |port: u16| -> Result<TcpListener, ExpError> {
        host::netns::run_in(Some(&rcv.netns), move || {
            TcpListener::bind(SocketAddr::new(addr, port))
        })
        .map_err(LabError::from)?
        .map_err(io_err("bind a Linux TCP server"))
    };
    let (stream_l, rpc_l) = (bind(STREAM_PORT)?, bind(RPC_PORT)?);
    let size = params.rpc_size;
    let server = std::thread::spawn(move || -> std::io::Result<(u64, f64, bool)> {
        pin(SERVER_CPU);
        let (mut s, _) = stream_l.accept()?;
        let mut stream = StreamCheck::default();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            stream.take(&buf[..n]);
        }
        let (got, secs, ok) = stream.finish();
        // Our FIN tells the client everything was read.
        drop(s);
        let (mut r, _) = rpc_l.accept()?;
        r.set_nodelay(true)?;
        let mut req = vec![0u8; size];
        while r.read_exact(&mut req).is_ok() {
            r.write_all(&req)?;
        }
        Ok((got, secs, ok))
    });
    let sent = run_clients(lab, addr, params)?;
    let (received, secs, verified) = server
        .join()
        .map_err(|_| ExpError::Parameter("the Linux server thread panicked".into()))?
        .map_err(io_err("the Linux TCP server"))?;
    Ok((
        stream_sample(
            rep,
            Stack::Linux,
            received,
            secs,
            verified && received == sent.0,
        ),
        rpc_sample(rep, Stack::Linux, params.rpcs, &sent.1, sent.2),
        (toe::Counters::default(), StageCycles::default()),
    ))
}

/// The sender's side of both tests, on [`CLIENT_CPU`]: (stream bytes sent, RPC
/// latencies in microseconds, every echo matched).
fn run_clients(
    lab: &Lab,
    addr: IpAddr,
    params: &ToeParams,
) -> Result<(u64, Vec<f64>, bool), ExpError> {
    let (bytes, rpcs, size) = (params.bytes, params.rpcs, params.rpc_size);
    host::netns::run_in(Some(&lab.sender().netns), move || -> std::io::Result<_> {
        pin(CLIENT_CPU);
        let sent = stream_client(SocketAddr::new(addr, STREAM_PORT), bytes)?;
        let (lat, ok) = rpc_client(SocketAddr::new(addr, RPC_PORT), rpcs, size)?;
        Ok((sent, lat, ok))
    })
    .map_err(LabError::from)?
    .map_err(io_err("the Linux TCP client"))
}

fn connect(to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
    s.set_read_timeout(Some(TRANSFER_LIMIT))?;
    s.set_write_timeout(Some(TRANSFER_LIMIT))?;
    Ok(s)
}

fn stream_client(to: SocketAddr, bytes: u64) -> std::io::Result<u64> {
    let mut s = connect(to)?;
    let mut chunk = vec![0u8; 1 << 16];
    let mut at = 0u64;
    while at < bytes {
        let n = (bytes - at).min(chunk.len() as u64) as usize;
        for (i, b) in chunk[..n].iter_mut().enumerate() {
            *b = pattern(at + i as u64);
        }
        s.write_all(&chunk[..n])?;
        at += n as u64;
    }
    s.shutdown(Shutdown::Write)?;
    // The server's FIN: everything was read.
    let mut rest = [0u8; 1];
    while s.read(&mut rest)? > 0 {}
    Ok(at)
}

fn rpc_client(to: SocketAddr, rpcs: u32, size: usize) -> std::io::Result<(Vec<f64>, bool)> {
    let mut s = connect(to)?;
    s.set_nodelay(true)?;
    let mut lat = Vec::with_capacity(rpcs as usize);
    let (mut req, mut resp) = (vec![0u8; size], vec![0u8; size]);
    let mut ok = true;
    for i in 0..rpcs {
        for (j, b) in req.iter_mut().enumerate() {
            *b = pattern(u64::from(i) * 7919 + j as u64);
        }
        let t = Instant::now();
        s.write_all(&req)?;
        s.read_exact(&mut resp)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        ok &= resp == req;
    }
    s.shutdown(Shutdown::Write)?;
    let mut rest = [0u8; 1];
    while s.read(&mut rest)? > 0 {}
    Ok((lat, ok))
}

fn stream_sample(
    repetition: u32,
    stack: Stack,
    bytes: u64,
    secs: f64,
    verified: bool,
) -> StreamSample {
    StreamSample {
        repetition,
        stack,
        bytes,
        gbit_per_s: (secs > 0.0 && bytes > 0).then(|| bytes as f64 * 8.0 / secs / 1e9),
        verified,
    }
}

fn rpc_sample(
    repetition: u32,
    stack: Stack,
    requests: u32,
    lat: &[f64],
    verified: bool,
) -> RpcSample {
    let p = |q: f64| stats::percentile(lat, q);
    RpcSample {
        repetition,
        stack,
        requests,
        p50_us: p(50.0),
        p99_us: p(99.0),
        p9999_us: p(99.99),
        verified: verified && lat.len() == requests as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "clap")]
    #[test]
    fn the_command_line_defaults_are_the_library_defaults() {
        assert!(crate::clap_defaults_are_the_library_defaults::<ToeParams>());
        let p: ToeParams = crate::parse_params(&["--rpc-size", "128"]).unwrap();
        assert_eq!(p.rpc_size, 128);
        assert!(crate::parse_params::<ToeParams>(&["--rpcs", "many"]).is_err());
    }

    pub(super) fn stream(stack: Stack, gbit: f64, verified: bool) -> StreamSample {
        StreamSample {
            repetition: 0,
            stack,
            bytes: 1,
            gbit_per_s: Some(gbit),
            verified,
        }
    }

    pub(super) fn rpc(stack: Stack, p50: f64) -> RpcSample {
        RpcSample {
            repetition: 0,
            stack,
            requests: 1,
            p50_us: Some(p50),
            p99_us: Some(p50),
            p9999_us: Some(p50),
            verified: true,
        }
    }

    /// The result of these samples, with default parameters and no
    /// locking run.
    pub(super) fn result(stream: Vec<StreamSample>, rpc: Vec<RpcSample>) -> ToeResult {
        let counters = toe::Counters::default();
        let params = ToeParams::default();
        let output = summarize(&params, stream, rpc, counters, Vec::new(), Vec::new());
        Report::new(params, output)
    }

    #[test]
    fn one_unverified_transfer_makes_the_run_not_byte_exact() {
        let p = ToeParams::default();
        let ok = summarize(
            &p,
            vec![
                stream(Stack::Toe, 2.0, true),
                stream(Stack::Linux, 4.0, true),
            ],
            vec![rpc(Stack::Toe, 10.0), rpc(Stack::Linux, 20.0)],
            toe::Counters::default(),
            Vec::new(),
            Vec::new(),
        );
        assert!(ok.byte_exact);
        assert_eq!((ok.stream_ratio, ok.rpc_p50_ratio), (Some(0.5), Some(0.5)));
        let bad = summarize(
            &p,
            vec![stream(Stack::Toe, 2.0, false)],
            vec![rpc(Stack::Toe, 10.0)],
            toe::Counters::default(),
            Vec::new(),
            Vec::new(),
        );
        assert!(!bad.byte_exact);
        // Nothing measured for Linux: no ratio, not a zero.
        assert_eq!((bad.linux_stream_gbit, bad.stream_ratio), (None, None));
        let none = summarize(
            &p,
            Vec::new(),
            Vec::new(),
            toe::Counters::default(),
            Vec::new(),
            Vec::new(),
        );
        // No locking run: every mode's mean is absent, not zero.
        assert!(none
            .locking_summary
            .iter()
            .all(|s| s.mean_segments_per_s.is_none()));
        assert!(!none.byte_exact);
    }

    /// Every parallel-input run of `repetitions`, each delivering all its
    /// bytes except the run of (`streams`, `locking`) in repetition 0
    /// when `short` is given.
    fn locking_runs_of(repetitions: u32, short: Option<(usize, Locking)>) -> Vec<LockingSample> {
        let mut out = Vec::new();
        for rep in 0..repetitions {
            for streams in LOCKING_STREAMS {
                for locking in Locking::ALL {
                    let workload = Workload {
                        streams,
                        segments: 100,
                        len: 1448,
                        threads: 2,
                        batch: 64,
                    };
                    let complete = rep != 0 || short != Some((streams, locking));
                    out.push(LockingSample {
                        repetition: rep,
                        run: InputRun {
                            locking,
                            workload,
                            segments_per_s: 1e6 * streams as f64,
                            delivered: 100 * 1448 * streams as u64 - u64::from(!complete),
                        },
                        complete,
                    });
                }
            }
        }
        out
    }

    fn with_locking(params: &ToeParams, locking: Vec<LockingSample>) -> ToeOutput {
        summarize(
            params,
            vec![stream(Stack::Toe, 1.0, true)],
            vec![rpc(Stack::Toe, 1.0)],
            toe::Counters::default(),
            Vec::new(),
            locking,
        )
    }

    #[test]
    fn an_incomplete_locking_run_in_any_cell_fails_the_run() {
        let params = ToeParams::default().quick();
        let reps = params.repetitions;
        let ok = with_locking(&params, locking_runs_of(reps, None));
        assert!(ok.locking_complete);
        assert_eq!(ok.locking_summary.len(), 6);
        assert!(ok
            .locking_summary
            .iter()
            .all(|s| (s.runs, s.complete_runs, s.vs_exclusive) == (2, 2, Some(1.0))));
        // One short run in any cell: that cell has no mean (the old mean
        // skipped it and stayed a number), and the run fails the matrix.
        for streams in LOCKING_STREAMS {
            for locking in Locking::ALL {
                let bad = with_locking(&params, locking_runs_of(reps, Some((streams, locking))));
                assert!(!bad.locking_complete, "{streams} {locking:?}");
                let cell = bad
                    .locking_summary
                    .iter()
                    .find(|s| (s.streams, s.locking) == (streams, locking))
                    .unwrap();
                assert_eq!((cell.runs, cell.complete_runs), (2, 1));
                assert_eq!((cell.mean_segments_per_s, cell.vs_exclusive), (None, None));
                // The matrix reads `/locking_complete` (bench's tests
                // judge it).
                let json = serde_json::to_value(&bad).unwrap();
                assert_eq!(json["locking_complete"], false);
            }
        }
        // A repetition that ran no input at all is not complete either.
        let missing = with_locking(&params, locking_runs_of(reps - 1, None));
        assert!(!missing.locking_complete);
        assert!(!with_locking(&params, Vec::new()).locking_complete);
    }

    #[test]
    fn an_ablation_echo_that_differs_makes_the_run_not_byte_exact() {
        let row = |byte_exact: bool| AblationRow {
            step: Step::RunToCompletion,
            design: "run to completion (1 thread)".into(),
            threads: 1,
            groups: 1,
            replicas: 1,
            result: AblationResult {
                rpcs: 10,
                mismatched_segments: u64::from(!byte_exact),
                byte_exact,
                mbit_per_s: 1.0,
                p50_us: Some(1.0),
                p99_us: Some(1.0),
                p9999_us: Some(1.0),
            },
        };
        let run = |rows: Vec<AblationRow>| {
            summarize(
                &ToeParams::default(),
                vec![stream(Stack::Toe, 1.0, true)],
                vec![rpc(Stack::Toe, 1.0)],
                toe::Counters::default(),
                rows,
                Vec::new(),
            )
        };
        assert!(run(vec![row(true), row(true)]).byte_exact);
        let bad = run(vec![row(true), row(false)]);
        assert!(!bad.byte_exact);
        // The matrix reads `/byte_exact` (bench's tests judge it).
        assert_eq!(serde_json::to_value(&bad).unwrap()["byte_exact"], false);
    }

    #[test]
    fn bad_parameters_are_refused() {
        for p in [
            ToeParams {
                repetitions: 0,
                ..ToeParams::default()
            },
            ToeParams {
                bytes: 0,
                ..ToeParams::default()
            },
            ToeParams {
                rpc_size: 0,
                ..ToeParams::default()
            },
            ToeParams {
                threads: Some(0),
                ..ToeParams::default()
            },
            ToeParams {
                threads: Some(toe::ablation::MAX_THREADS + 1),
                ..ToeParams::default()
            },
        ] {
            assert!(matches!(p.check(), Err(ExpError::Parameter(_))));
        }
        let many = ToeParams {
            threads: Some(toe::ablation::MAX_THREADS),
            ..ToeParams::default()
        };
        assert!(many.check().is_ok());
    }

    /// The ablation's threads follow the host unless --threads says
    /// otherwise, and asking for more than the host has is said in the
    /// result (JSON and text), not refused. The fixed layouts stopped at
    /// 2 threads whatever the host had.
    #[test]
    fn more_ablation_threads_than_cpus_run_with_a_warning() {
        let cpus = crate::cpus::present();
        assert_eq!(ToeParams::default().ablation_threads(), cpus);
        assert_eq!(threads_warning(cpus, cpus), None);
        let warning = threads_warning(8, 2).unwrap();
        assert!(
            warning.starts_with("--threads 8 asks for more threads than the 2 CPUs present"),
            "{warning}"
        );
        let asked = ToeParams {
            threads: Some(cpus + 2),
            ..ToeParams::default()
        };
        assert!(asked.check().is_ok());
        let output = summarize(
            &asked,
            vec![stream(Stack::Toe, 1.0, true)],
            vec![rpc(Stack::Toe, 1.0)],
            toe::Counters::default(),
            Vec::new(),
            Vec::new(),
        );
        let r: ToeResult = Report::new(asked, output);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["ablation_threads"], cpus + 2);
        assert_eq!(
            json["warnings"][0],
            threads_warning(cpus + 2, cpus).unwrap()
        );
        let text = plot::text::Present::text(&r).to_string();
        assert!(text.contains("warning: --threads"), "{text}");
        // The result names where its threads were pinned.
        assert_eq!(json["pinned_cpus"]["clients"], 0, "{json}");
        assert_eq!(
            json["pinned_cpus"]["data_path"],
            json["pinned_cpus"]["linux_server"]
        );
        assert!(result(Vec::new(), Vec::new()).warnings.is_empty());
    }

    #[cfg(feature = "clap")]
    #[test]
    fn threads_is_a_flag() {
        let p: ToeParams = crate::parse_params(&["--threads", "8"]).unwrap();
        assert_eq!((p.threads, p.ablation_threads()), (Some(8), 8));
    }
}
