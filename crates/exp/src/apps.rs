//! `steer exp apps`: real servers, unmodified, on Linux TCP and on each
//! engine of the data path, their clients on Linux TCP in the lab's other
//! namespace (issue 24; the thesis's memcached and RPC evaluations,
//! sections 4.5 and 5.5, with the servers people run).
//!
//! Per repetition the stacks take turns (Linux first on even repetitions,
//! last on odd ones); each serves every workload once, with a fresh
//! server: nginx with wrk (a small file and a 1 MiB file), redis with
//! redis-benchmark (GET, SET and LPUSH, plain and 16 deep pipelined) and
//! memcached, whose connections are accepted on one thread and served on
//! others, with the experiment's own closed-loop client. Every run checks
//! contents (files byte for byte, values read back equal what was
//! written), counts the client's errors and the server's, and reads CPU
//! time from /proc/stat on the server CPUs and the client CPUs, so a data
//! path that busy-polls pays for it per request.
//!
//! Placement, the same for every stack and named in the result: the
//! server side (the server, and its TCP: Linux's receive processing
//! steered there with RPS, or the data path's thread) on `--server-cpus`,
//! the clients on `--client-cpus`.

pub mod client;
pub mod http;
pub mod memcached;
pub mod redis;
mod servers;
mod text;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use host::cpu::CpuTimes;
use lab::{Lab, LabSpec};
use plot::text::Text;
use serde::Serialize;
use stats::Stat;
use toe::app::Service;
use toe::EndpointConfig;

use crate::datapath::{endpoint, toe_addr, toe_err, Engines, Stack};
use crate::experiment::{Experiment, Report};
use crate::{refuse_if, ExpError};
use client::{ClientRun, Verification};
use servers::{Placement, Server};

/// A server and the load its client offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    NginxSmall,
    NginxLarge,
    Redis,
    RedisPipelined,
    Memcached,
}

impl Workload {
    pub const ALL: [Workload; 5] = [
        Workload::NginxSmall,
        Workload::NginxLarge,
        Workload::Redis,
        Workload::RedisPipelined,
        Workload::Memcached,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::NginxSmall => "nginx-small",
            Workload::NginxLarge => "nginx-1mb",
            Workload::Redis => "redis",
            Workload::RedisPipelined => "redis-p16",
            Workload::Memcached => "memcached",
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            Workload::NginxSmall => {
                "nginx, wrk on a 1 KiB file (--connections keep-alive connections)"
            }
            Workload::NginxLarge => "nginx, wrk on a 1 MiB file (a quarter of --connections)",
            Workload::Redis => {
                "redis-server, redis-benchmark GET, SET and LPUSH, one request at a time"
            }
            Workload::RedisPipelined => {
                "redis-server, redis-benchmark GET, SET and LPUSH, 16 deep pipelines"
            }
            Workload::Memcached => {
                "memcached (accepts on one thread, serves on 2 others), the experiment's client: \
                 GETs and every 10th a SET, every value checked"
            }
        }
    }

    /// The cells a run of it fills: one per redis-benchmark test.
    fn cells(self) -> Vec<String> {
        match self {
            Workload::Redis | Workload::RedisPipelined => REDIS_TESTS
                .iter()
                .map(|t| format!("{}-{t}", self.name()))
                .collect(),
            _ => vec![self.name().to_string()],
        }
    }
}

value_enum!(Workload, help);

const REDIS_TESTS: [&str; 3] = ["get", "set", "lpush"];
const REDIS_PIPELINE: u32 = 16;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AppsParams {
    /// Workloads, comma-separated.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "nginx-small,nginx-1mb,redis,redis-p16,memcached"
        )
    )]
    pub workload: Vec<Workload>,
    #[cfg_attr(feature = "clap", command(flatten))]
    #[serde(flatten)]
    pub engines: Engines,
    /// Seconds of load per run (wrk and memcached; redis-benchmark sends
    /// --redis-requests).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10.0))]
    pub seconds: f64,
    /// Requests per redis-benchmark test.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 200_000))]
    pub redis_requests: u64,
    /// Client connections: wrk's for the small file, memcached's and
    /// redis-benchmark's clients (the 1 MiB file: a quarter of them).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 32))]
    pub connections: u32,
    /// Repetitions, each running every stack and workload.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3))]
    pub repetitions: u32,
    /// CPUs of the server side: the server and its TCP (Linux's receive
    /// processing by RPS, or the data path's thread), comma-separated.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "1")
    )]
    pub server_cpus: Vec<usize>,
    /// CPUs of the clients, comma-separated.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "0")
    )]
    pub client_cpus: Vec<usize>,
    #[cfg_attr(feature = "clap", arg(skip))]
    pub quick: bool,
}

impl Default for AppsParams {
    fn default() -> Self {
        AppsParams {
            workload: Workload::ALL.to_vec(),
            engines: Engines::default(),
            seconds: 10.0,
            redis_requests: 200_000,
            connections: 32,
            repetitions: 3,
            server_cpus: vec![1],
            client_cpus: vec![0],
            quick: false,
        }
    }
}

impl AppsParams {
    /// The `--quick` variant (under 2 minutes): the small file, plain
    /// redis and memcached, 2 s each, one repetition, every engine.
    pub fn quick(mut self) -> Self {
        self.workload = vec![Workload::NginxSmall, Workload::Redis, Workload::Memcached];
        self.seconds = 2.0;
        self.redis_requests = 20_000;
        self.repetitions = 1;
        self.quick = true;
        self
    }

    pub fn check(&self) -> Result<(), ExpError> {
        refuse_if(self.workload.is_empty(), "--workload: name at least one")?;
        refuse_if(
            crate::repeats(&self.workload) || crate::repeats(&self.engines.engine),
            "--workload and --engine: name each once",
        )?;
        refuse_if(
            !(self.seconds >= 1.0 && self.seconds <= 600.0),
            "--seconds must be 1..=600",
        )?;
        refuse_if(self.repetitions == 0, "--repetitions must be at least 1")?;
        refuse_if(
            self.connections < 4 || self.connections > 1024,
            "--connections must be 4..=1024",
        )?;
        refuse_if(
            self.redis_requests < 1000,
            "--redis-requests must be at least 1000",
        )?;
        refuse_if(
            self.server_cpus.is_empty() || self.client_cpus.is_empty(),
            "--server-cpus and --client-cpus: name at least one CPU each",
        )?;
        refuse_if(
            self.server_cpus
                .iter()
                .any(|c| self.client_cpus.contains(c)),
            "--server-cpus and --client-cpus must not share a CPU",
        )
    }

    /// Linux, then each engine.
    pub fn stacks(&self) -> Vec<Stack> {
        self.engines.stacks()
    }
}

/// `steer exp apps` ([`Experiment`]).
#[derive(Debug)]
pub struct AppsExperiment;

/// An apps run's result: its parameters and [`AppsOutput`], enveloped.
pub type AppsResult = Report<AppsExperiment>;

impl Experiment for AppsExperiment {
    const NAME: &'static str = "apps";
    const DRAWS: bool = true;
    type Params = AppsParams;
    type Output = AppsOutput;

    params_do_the_sizing!();

    fn run(params: &AppsParams, progress: &mut dyn FnMut(String)) -> Result<AppsOutput, ExpError> {
        run(params, progress)
    }

    fn text(report: &AppsResult) -> Text {
        report.render()
    }

    fn svg(report: &AppsResult) -> Option<String> {
        Some(text::svg(report))
    }

    fn succeeded(output: &AppsOutput) -> bool {
        output.verified
    }
}

/// One workload served once by one stack.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub repetition: u32,
    pub stack: Stack,
    pub workload: Workload,
    /// The cell: the workload, and the redis-benchmark test.
    pub cell: String,
    /// `cell,stack`, e.g. `redis-get,toe`.
    pub id: String,
    pub client: ClientRun,
    /// Requests per second, from the client.
    pub rate: Option<f64>,
    /// Contents read back and compared, before and after the load
    /// (memcached: every GET of the load).
    pub verification: Verification,
    /// What the server reported: it exited during the run, or logged an
    /// alert.
    pub server_errors: Vec<String>,
    /// CPU busy time over the load, seconds, summed over the server CPUs
    /// and over the client CPUs (/proc/stat; null if not read).
    pub server_cpu_s: Option<f64>,
    pub client_cpu_s: Option<f64>,
    /// Those per request, µs.
    pub server_cpu_us_per_request: Option<f64>,
    pub client_cpu_us_per_request: Option<f64>,
}

/// A cell on one stack over the repetitions, beside Linux's.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// `cell,stack`, as the samples'.
    pub id: String,
    pub cell: String,
    pub stack: Stack,
    pub samples: usize,
    pub rate: Option<Stat>,
    /// Means over the repetitions, µs (null where the client does not
    /// report the percentile).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub errors: u64,
    pub server_errors: usize,
    pub verified: bool,
    pub server_cpu_us_per_request: Option<f64>,
    pub client_cpu_us_per_request: Option<f64>,
    /// This stack's against Linux's in the same cell (issue 24's goals:
    /// rate at least 1, p99 and CPU per request at most 1); null for
    /// Linux and where either is unmeasured.
    pub rate_vs_linux: Option<f64>,
    pub p99_vs_linux: Option<f64>,
    pub server_cpu_vs_linux: Option<f64>,
}

/// Where the run placed each side.
#[derive(Debug, Clone, Serialize)]
pub struct CpuPlacement {
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    /// Whether this process may run on every CPU named (if not, the
    /// threads ran where the scheduler put them); null when the affinity
    /// mask could not be read.
    pub held: Option<bool>,
}

/// The data path's counters of one stack's turn.
#[derive(Debug, Clone, Serialize)]
pub struct StackCounters {
    pub repetition: u32,
    pub stack: Stack,
    pub counters: toe::Counters,
}

#[derive(Debug, Clone, Serialize)]
pub struct AppsOutput {
    /// True only if every content check of the run passed.
    pub verified: bool,
    /// Client errors over the run (failed or wrong requests).
    pub errors: u64,
    /// Server errors over the run.
    pub server_errors: usize,
    pub cells: Vec<Cell>,
    pub samples: Vec<Sample>,
    pub placement: CpuPlacement,
    /// The data path's counters per engine and repetition (malformed,
    /// dropped, retransmitted ...).
    pub data_path_counters: Vec<StackCounters>,
}

fn run(params: &AppsParams, progress: &mut dyn FnMut(String)) -> Result<AppsOutput, ExpError> {
    params.check()?;
    let mut spec = LabSpec::new(&lab::unique_name("apps"));
    spec.software_rss = false;
    spec.ipv6 = false;
    let lab = Lab::up(&spec)?.teardown_on_drop();
    // AF_XDP sees what the sender leaves to offload: checksums in software
    // towards the receiver, for every stack alike.
    lab::inject::checksums_in_software_towards(&lab, lab.receiver())?;
    let scratch = Scratch::new(lab.name())?;
    let stacks = params.stacks();
    let mut samples = Vec::new();
    let mut counters = Vec::new();
    for rep in 0..params.repetitions {
        let mut order = stacks.clone();
        if rep % 2 == 1 {
            order.reverse();
        }
        for stack in order {
            let side = ServerSide::start(&lab, params, stack)?;
            for &workload in &params.workload {
                let dir = scratch
                    .0
                    .join(format!("{rep}-{}-{}", stack.name(), workload.name()));
                for s in run_workload(&lab, params, &side, workload, rep, &dir)? {
                    progress(s.progress_line());
                    samples.push(s);
                }
            }
            if let Some(counters_of_turn) = side.stop(&lab)? {
                counters.push(StackCounters {
                    repetition: rep,
                    stack,
                    counters: counters_of_turn,
                });
            }
        }
    }
    Ok(summarize(params, samples, counters))
}

/// The server side of one stack: Linux with RPS to the server CPUs, or
/// the data path's service on its own thread there.
struct ServerSide {
    stack: Stack,
    addr: std::net::IpAddr,
    service: Option<(
        PathBuf,
        Arc<AtomicBool>,
        std::thread::JoinHandle<ServiceEnd>,
    )>,
}

type ServiceEnd = Result<toe::Counters, toe::ToeError>;

impl ServerSide {
    fn start(lab: &Lab, params: &AppsParams, stack: Stack) -> Result<ServerSide, ExpError> {
        let cpus: Vec<u32> = params.server_cpus.iter().map(|&c| c as u32).collect();
        let Some(engine) = stack.engine() else {
            crate::cpus::set_rps(lab, &cpus, 0)?;
            return Ok(ServerSide {
                stack,
                addr: servers::address(lab, false),
                service: None,
            });
        };
        let cfg = EndpointConfig {
            engine,
            ..EndpointConfig::default()
        };
        let ep = endpoint(lab.receiver(), toe_addr(lab), cfg)?;
        let socket = toe::app::socket_path(&format!("{}-apps", lab.name()));
        let mut service = Service::new(ep, &socket).map_err(|e| ExpError::Program {
            program: "the data path's service".into(),
            detail: e.to_string(),
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let cpu = params.server_cpus[0];
        let thread = std::thread::Builder::new()
            .name("apps-data-path".into())
            .spawn(move || {
                crate::cpus::pin(cpu);
                service.run(&flag)?;
                Ok(service.endpoint().counters())
            })
            .map_err(|e| ExpError::Program {
                program: "the data path's thread".into(),
                detail: e.to_string(),
            })?;
        Ok(ServerSide {
            stack,
            addr: servers::address(lab, true),
            service: Some((socket, stop, thread)),
        })
    }

    fn placement<'a>(&'a self, lab: &'a Lab, params: &'a AppsParams) -> Placement<'a> {
        Placement {
            netns: &lab.receiver().netns,
            cpus: &params.server_cpus,
            data_path: self.service.as_ref().map(|(socket, _, _)| socket.as_path()),
        }
    }

    /// Stops the service (its counters) or clears RPS.
    fn stop(mut self, lab: &Lab) -> Result<Option<toe::Counters>, ExpError> {
        let Some((_, stop, thread)) = self.service.take() else {
            crate::cpus::set_rps(lab, &[], 0)?;
            return Ok(None);
        };
        stop.store(true, Ordering::Relaxed);
        let end = thread.join().map_err(|_| ExpError::Program {
            program: "the data path's thread".into(),
            detail: "it panicked".into(),
        })?;
        end.map(Some).map_err(toe_err)
    }
}

/// A run that failed half way stops the data path too: its thread would
/// otherwise hold the port (and a CPU) until the process ends.
impl Drop for ServerSide {
    fn drop(&mut self) {
        if let Some((_, stop, thread)) = self.service.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

/// One workload on one stack: a fresh server, contents checked, the
/// load, contents checked again, the server stopped.
fn run_workload(
    lab: &Lab,
    params: &AppsParams,
    side: &ServerSide,
    workload: Workload,
    rep: u32,
    dir: &std::path::Path,
) -> Result<Vec<Sample>, ExpError> {
    let mut server = Server::start(workload, &side.placement(lab, params), dir)?;
    let client_ns = lab.sender().netns.clone();
    let port = match workload {
        Workload::NginxSmall | Workload::NginxLarge => servers::HTTP_PORT,
        Workload::Redis | Workload::RedisPipelined => servers::REDIS_PORT,
        Workload::Memcached => servers::MEMCACHED_PORT,
    };
    let to = SocketAddr::new(side.addr, port);
    server.wait_listening(&client_ns, to)?;
    let ns = Some(client_ns.as_str());
    let mut verification = Verification::default();
    let before = CpuTimes::read().ok();
    let runs: Vec<(String, ClientRun)> = match workload {
        Workload::NginxSmall | Workload::NginxLarge => {
            let files = servers::nginx_files();
            let files: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (*p, b.as_slice())).collect();
            verification.absorb(http::verify_files(ns, to, &files, 2)?);
            let (path, connections) = if workload == Workload::NginxSmall {
                (servers::SMALL_PATH, params.connections)
            } else {
                (servers::LARGE_PATH, (params.connections / 4).max(2))
            };
            let url = format!("http://{to}{path}");
            let threads = params.client_cpus.len().max(2) as u32;
            let run = http::wrk(
                ns,
                &url,
                threads,
                connections,
                params.seconds,
                &params.client_cpus,
            )?;
            verification.absorb(http::verify_files(ns, to, &files, 1)?);
            vec![(workload.name().to_string(), run)]
        }
        Workload::Redis | Workload::RedisPipelined => {
            verification.absorb(redis::verify(ns, to, 16)?);
            let pipeline = if workload == Workload::Redis {
                1
            } else {
                REDIS_PIPELINE
            };
            let rows = redis::run_benchmark(
                ns,
                side.addr,
                port,
                &REDIS_TESTS,
                params.connections,
                params.redis_requests,
                pipeline,
                &params.client_cpus,
            )?;
            verification.absorb(redis::verify(ns, to, 16)?);
            rows.into_iter()
                .map(|(test, run)| (format!("{}-{}", workload.name(), test.to_lowercase()), run))
                .collect()
        }
        Workload::Memcached => {
            let load = memcached::Load {
                connections: params.connections,
                seconds: params.seconds,
                value_bytes: 100,
                set_every: 10,
                keys_per_connection: 64,
            };
            let (run, checked) = memcached::run(ns, to, &load, &params.client_cpus)?;
            verification.absorb(checked);
            vec![(workload.name().to_string(), run)]
        }
    };
    let cpu = before.and_then(|b| Some(CpuTimes::read().ok()?.busy_seconds_since(&b)));
    let server_errors = server.stop();
    let busy = |cpus: &[usize]| -> Option<f64> {
        let per_cpu = cpu.as_ref()?;
        cpus.iter()
            .map(|&c| per_cpu.get(c).copied().flatten())
            .sum()
    };
    // redis-benchmark's tests run one after another: the CPU time of the
    // load is shared out by each test's share of the run's seconds.
    let total_s: f64 = runs.iter().map(|(_, r)| r.seconds).sum();
    Ok(runs
        .into_iter()
        .map(|(cell, client)| {
            let share = (total_s > 0.0).then(|| client.seconds / total_s);
            let server_cpu_s = busy(&params.server_cpus).zip(share).map(|(b, s)| b * s);
            let client_cpu_s = busy(&params.client_cpus).zip(share).map(|(b, s)| b * s);
            let per_request = |s: Option<f64>| {
                s.filter(|_| client.requests > 0)
                    .map(|s| s * 1e6 / client.requests as f64)
            };
            Sample {
                repetition: rep,
                stack: side.stack,
                workload,
                id: format!("{cell},{}", side.stack.name()),
                cell,
                rate: client.rate(),
                verification: verification.clone(),
                server_errors: server_errors.clone(),
                server_cpu_us_per_request: per_request(server_cpu_s),
                client_cpu_us_per_request: per_request(client_cpu_s),
                server_cpu_s,
                client_cpu_s,
                client,
            }
        })
        .collect())
}

/// The scratch directory of a run (configurations, logs, served files);
/// removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(lab: &str) -> Result<Scratch, ExpError> {
        let dir = std::env::temp_dir().join(format!("steer-{lab}"));
        std::fs::create_dir_all(&dir).map_err(|e| ExpError::Program {
            program: "the apps experiment's scratch directory".into(),
            detail: format!("{}: {e}", dir.display()),
        })?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn summarize(
    params: &AppsParams,
    samples: Vec<Sample>,
    data_path_counters: Vec<StackCounters>,
) -> AppsOutput {
    let mut cells = Vec::new();
    for workload in &params.workload {
        for cell in workload.cells() {
            let linux = cell_of(&cell, Stack::Linux, &samples, None);
            for stack in params.stacks() {
                cells.push(if stack == Stack::Linux {
                    linux.clone()
                } else {
                    cell_of(&cell, stack, &samples, Some(&linux))
                });
            }
        }
    }
    let allowed = host::cpu::allowed_cpus();
    AppsOutput {
        verified: !samples.is_empty() && samples.iter().all(|s| s.verification.passed()),
        errors: samples.iter().map(|s| s.client.errors).sum(),
        server_errors: samples.iter().map(|s| s.server_errors.len()).sum(),
        placement: CpuPlacement {
            held: allowed.map(|allowed| {
                params
                    .server_cpus
                    .iter()
                    .chain(&params.client_cpus)
                    .all(|c| allowed.contains(c))
            }),
            server_cpus: params.server_cpus.clone(),
            client_cpus: params.client_cpus.clone(),
        },
        cells,
        samples,
        data_path_counters,
    }
}

/// The cell `cell` on `stack` over its samples, against `linux`'s.
fn cell_of(cell: &str, stack: Stack, samples: &[Sample], linux: Option<&Cell>) -> Cell {
    let mine: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.cell == cell && s.stack == stack)
        .collect();
    // A mean only when every sample measured the value.
    let mean = |f: &dyn Fn(&Sample) -> Option<f64>| -> Option<f64> {
        let v: Option<Vec<f64>> = mine.iter().map(|s| f(s)).collect();
        stats::mean(&v?)
    };
    let rates: Option<Vec<f64>> = mine.iter().map(|s| s.rate).collect();
    let rate = rates.and_then(|r| stats::stat(&r));
    let p99_us = mean(&|s| s.client.p99_us);
    let server_cpu = mean(&|s| s.server_cpu_us_per_request);
    let ratio =
        |a: Option<f64>, b: Option<f64>| a.zip(b).filter(|(_, b)| *b > 0.0).map(|(a, b)| a / b);
    Cell {
        id: format!("{cell},{}", stack.name()),
        cell: cell.to_string(),
        stack,
        samples: mine.len(),
        p50_us: mean(&|s| s.client.p50_us),
        p999_us: mean(&|s| s.client.p999_us),
        errors: mine.iter().map(|s| s.client.errors).sum(),
        server_errors: mine.iter().map(|s| s.server_errors.len()).sum(),
        verified: !mine.is_empty() && mine.iter().all(|s| s.verification.passed()),
        client_cpu_us_per_request: mean(&|s| s.client_cpu_us_per_request),
        rate_vs_linux: linux.and_then(|l| ratio(rate.map(|r| r.mean), l.rate.map(|r| r.mean))),
        p99_vs_linux: linux.and_then(|l| ratio(p99_us, l.p99_us)),
        server_cpu_vs_linux: linux.and_then(|l| ratio(server_cpu, l.server_cpu_us_per_request)),
        rate,
        p99_us,
        server_cpu_us_per_request: server_cpu,
    }
}

#[cfg(test)]
mod tests;
