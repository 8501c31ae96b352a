//! `steer demo`: parallel TCP flows collide on the receiver's queues when the
//! kernel picks their source ports (SRAP paper, section 2: 16 flows on 32
//! cores are collision-free with probability 1.04%), and do not when Steer
//! picks them (section 3), through either binder.
//!
//! Three ways, each run the same number of times against the same receiver:
//! - `random`: iperf3 as it is, kernel-chosen source ports;
//! - `preload`: what `steer exec -- iperf3 ...` does: the LD_PRELOAD binder
//!   ([`binder::preload`]) asking the allocator ([`srap::alloc::Server`],
//!   what `steer ports serve` runs), served from a thread in the sender's
//!   namespace;
//! - `bpf`: what `steer exec --bpf -- iperf3 ...` does: iperf3 in a cgroup
//!   with the cgroup connect4 binder ([`binder::CgroupBinder`]) and the
//!   plans of [`binder::plans`].
//!
//! Every number is read from the datapath: iperf3's JSON says which source
//! ports its data streams got and what each carried; the receiver's XDP
//! software RSS says, from its per-flow counters, which queue each of those
//! flows' packets went to; /proc/stat says how busy each CPU was. The RSS
//! model's prediction is recorded beside the measurement as a cross-check only.

mod text;

use crate::experiment::{Experiment, Report};
use crate::{check_flows_and_queues, refuse_if};
use plot::text::Text;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;

use binder::cgroup::BinderStats;
use binder::{CgroupBinder, TempCgroup};
use lab::{Host, Lab, LabError, LabSpec};
use serde::Serialize;

use crate::iperf::{self, IperfRun};
use crate::ExpError;

/// The first iperf3 port the demo uses (`--processes` uses the next ones too).
const PORT: u16 = 5201;

/// How source ports are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    /// The kernel picks them (the control).
    Random,
    /// The LD_PRELOAD binder asks the allocator.
    Preload,
    /// The cgroup connect4/connect6 BPF binder binds planned ports.
    Bpf,
}

value_enum!(Way, describe);

impl Way {
    pub const ALL: [Way; 3] = [Way::Random, Way::Preload, Way::Bpf];

    pub fn name(self) -> &'static str {
        match self {
            Way::Random => "random",
            Way::Preload => "preload",
            Way::Bpf => "bpf",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Way::Random => "kernel-chosen source ports",
            Way::Preload => "steer exec: LD_PRELOAD binder + allocator",
            Way::Bpf => "steer exec --bpf: cgroup connect4 binder",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DemoParams {
    /// Parallel TCP flows per repetition (iperf3 -P).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'P', long, default_value_t = DemoParams::default().flows)
    )]
    pub flows: u32,
    /// Receive queues of the receiver's software RSS.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoParams::default().queues))]
    pub queues: u32,
    /// Repetitions, each with fresh kernel-chosen source ports.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoParams::default().repetitions))]
    pub repetitions: u32,
    /// Seconds of traffic per repetition.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoParams::default().seconds))]
    pub seconds: u32,
    /// Ways of choosing source ports to compare.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "random,preload,bpf"
        )
    )]
    pub ways: Vec<Way>,
    /// One iperf3 client process per flow instead of one `iperf3 -P FLOWS`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub processes: bool,
    /// Name of the lab the demo builds (and removes).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "NAME", default_value_t = DemoParams::default().lab)
    )]
    pub lab: String,
    /// Leave the lab up afterwards.
    #[cfg_attr(feature = "clap", arg(long))]
    pub keep_lab: bool,
}

impl Default for DemoParams {
    /// SRAP section 2's case: 16 flows on 32 queues, every way 10 times.
    fn default() -> Self {
        DemoParams {
            flows: 16,
            queues: 32,
            repetitions: 10,
            seconds: 1,
            ways: Way::ALL.to_vec(),
            processes: false,
            lab: "steer-demo".into(),
            keep_lab: false,
        }
    }
}

impl DemoParams {
    /// The reduced run for CI and the matrix: 3 repetitions per way.
    pub fn quick(mut self) -> Self {
        self.repetitions = 3;
        self
    }

    pub fn check(&self) -> Result<(), ExpError> {
        check_flows_and_queues(self.flows, self.queues)?;
        refuse_if(self.repetitions == 0, "--repetitions must be at least 1")?;
        refuse_if(self.seconds == 0, "--seconds must be at least 1")?;
        refuse_if(self.ways.is_empty(), "--ways names no way")?;
        Ok(())
    }

    /// The fewest flows the busiest queue can carry: 1 when flows fit.
    pub fn ideal_max(&self) -> u32 {
        self.flows.div_ceil(self.queues)
    }
}

/// One repetition of one way, as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Repetition {
    pub repetition: u32,
    /// The data streams' source ports, in iperf3's order.
    pub source_ports: Vec<u16>,
    /// Their destination ports (all 5201 unless `--processes`).
    pub dest_ports: Vec<u16>,
    /// The queue the datapath put each of those flows on (same order).
    pub flow_queues: Vec<u32>,
    /// The queue the RSS model predicts for each flow: a cross-check, never
    /// used for the counts.
    pub predicted_queues: Vec<u32>,
    /// Flows per queue, index = queue.
    pub flows_per_queue: Vec<u32>,
    pub max_flows_on_a_queue: u32,
    /// No queue carries more than ceil(flows / queues) flows (1:1 when the
    /// flows fit).
    pub perfect: bool,
    pub aggregate_gbps: f64,
    /// Each data stream's goodput (same order as `source_ports`).
    pub flow_gbps: Vec<f64>,
    /// The slowest of them.
    pub min_flow_gbps: f64,
    /// Share of each CPU's time spent busy (not idle or iowait) during the
    /// repetition, from /proc/stat; `None` (JSON null) for a CPU whose
    /// counters did not advance (no time to divide by).
    pub cpu_busy: Vec<Option<f64>>,
    /// What the cgroup binder did during the repetition (bound, failed
    /// binds, fallbacks to a kernel-chosen port); null for ways without it.
    /// A fallback explains a collision under the bpf way.
    pub binder: Option<BinderStats>,
}

/// How many queues carry 0, 1, 2, and 3 or more flows, from flows per
/// queue (the demo's table).
pub fn queue_histogram(flows_per_queue: &[u32]) -> [usize; 4] {
    let mut counts = [0; 4];
    for &n in flows_per_queue {
        counts[(n as usize).min(3)] += 1;
    }
    counts
}

/// One way over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct WayResult {
    pub name: &'static str,
    pub description: &'static str,
    pub repetitions: u32,
    /// Share of repetitions with a perfect mapping.
    pub perfect_fraction: f64,
    /// The largest number of flows on one queue, worst repetition.
    pub max_flows_on_a_queue: u32,
    /// Mean over repetitions of the aggregate goodput.
    pub aggregate_gbps: f64,
    /// Slowest single flow over all repetitions.
    pub min_flow_gbps: f64,
    pub runs: Vec<Repetition>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Theory {
    /// Probability that uniformly random queues are perfect (16 on 32:
    /// collision-free, 1.04%).
    pub perfect_probability: f64,
}

/// `steer exp demo` ([`Experiment`]).
#[derive(Debug)]
pub struct DemoExperiment;

/// A demo run's result: its parameters and [`DemoOutput`], enveloped.
pub type DemoResult = Report<DemoExperiment>;

impl Experiment for DemoExperiment {
    const NAME: &'static str = "demo";
    const DRAWS: bool = false;
    type Params = DemoParams;
    type Output = DemoOutput;

    params_do_the_sizing!();

    fn run(params: &DemoParams, progress: &mut dyn FnMut(String)) -> Result<DemoOutput, ExpError> {
        run(params, |way, rep| progress(rep.progress_line(way)))
    }

    fn text(report: &DemoResult) -> Text {
        report.render()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DemoOutput {
    pub ways: Vec<WayResult>,
    pub theory: Theory,
    /// Queue -> CPU of the receiver's software RSS.
    pub queue_cpus: Vec<u32>,
}

/// Runs the demo; `progress` is called after each repetition.
fn run(
    params: &DemoParams,
    mut progress: impl FnMut(Way, &Repetition),
) -> Result<DemoOutput, ExpError> {
    params.check()?;
    let mut spec = LabSpec::new(&params.lab);
    spec.queues = params.queues;
    spec.track_flows = true;
    let lab = Lab::up(&spec)?;
    let result = run_in_lab(&lab, params, &mut progress);
    if !params.keep_lab {
        Lab::down(&params.lab)?;
    }
    result
}

fn run_in_lab(
    lab: &Lab,
    params: &DemoParams,
    progress: &mut impl FnMut(Way, &Repetition),
) -> Result<DemoOutput, ExpError> {
    let config = lab.rss_config()?;
    let files = RunFiles::create(&params.lab)?;
    let mut ways = Vec::new();
    for &way in &params.ways {
        let setup = Setup::new(lab, params, &config, &files, way)?;
        let mut runs = Vec::new();
        for repetition in 1..=params.repetitions {
            let run = repetition_of(lab, params, &config, &setup, repetition)?;
            progress(way, &run);
            runs.push(run);
        }
        ways.push(
            summarize(way, runs).ok_or_else(|| {
                ExpError::Parameter(format!("way {} ran no repetition", way.name()))
            })?,
        );
    }
    let theory = Theory {
        perfect_probability: srap::odds::max_load_distribution(params.flows, params.queues)
            .map_err(|e| ExpError::Parameter(e.to_string()))?
            .iter()
            .take(params.ideal_max() as usize + 1)
            .sum(),
    };
    Ok(DemoOutput {
        ways,
        theory,
        queue_cpus: config.queue_cpus,
    })
}

/// Where the preload way keeps its files: the allocator's socket and the
/// shim; removed when dropped.
struct RunFiles {
    dir: PathBuf,
    socket: PathBuf,
}

impl RunFiles {
    fn create(lab: &str) -> Result<Self, ExpError> {
        let dir = Path::new("/run/steer/demo").join(lab);
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        Ok(RunFiles {
            socket: dir.join("alloc.sock"),
            dir,
        })
    }
}

impl Drop for RunFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ExpError {
    ExpError::Parameter(format!("{}: {e}", path.display()))
}

/// The allocator, serving the receiver's config on a thread in the
/// sender's namespace so that it sees the sender's port range and ports
/// in use (its sweeper and client threads inherit the namespace: setns(2)
/// moves the calling thread, and threads it creates start in it); stopped
/// when dropped.
fn start_allocator(
    lab: &Lab,
    config: &rss::RssConfig,
    files: &RunFiles,
) -> Result<srap::alloc::ServerHandle, ExpError> {
    // Its threads read the sender's socket tables: srap reads them through
    // /proc/thread-self/net, the reading thread's namespace.
    let options = srap::alloc::ServerOptions::new(&files.socket);
    let handle = host::netns::run_in(Some(&lab.sender().netns), move || {
        srap::alloc::Server::bind(options).map(srap::alloc::Server::spawn)
    })
    .map_err(LabError::from)?
    .map_err(|e| ExpError::Program {
        program: "allocator".into(),
        detail: e.to_string(),
    })?;
    let receiver = IpAddr::V4(lab.receiver().ipv4);
    handle
        .allocator()
        .set_config(receiver, config.clone())
        .map_err(|r| ExpError::Parameter(format!("the receiver's config: {}", r.message)))?;
    Ok(handle)
}

/// A cgroup with the cgroup binder attached and plans installed; the
/// binder is detached before the cgroup is removed (fields drop in order).
struct PlannedCgroup {
    binder: CgroupBinder,
    cgroup: TempCgroup,
    /// Planned slots per destination port.
    ports: u32,
}

impl PlannedCgroup {
    /// Plans `ports` slots from the sender to each of `dest_ports` on the
    /// receiver (what `steer exec --bpf` and `steer attach` install).
    fn attach(
        lab: &Lab,
        config: &rss::RssConfig,
        dest_ports: &[u16],
        ports: u32,
    ) -> Result<Self, ExpError> {
        let cgroup = TempCgroup::create()?;
        let planned = PlannedCgroup {
            binder: CgroupBinder::attach(cgroup.path())?,
            cgroup,
            ports,
        };
        planned.replan(lab, config, dest_ports)?;
        Ok(planned)
    }

    /// Plans afresh around the ports the sender's namespace holds now: the
    /// last repetition's connections may have left some in TIME_WAIT, which
    /// `bpf_bind` cannot take.
    fn replan(
        &self,
        lab: &Lab,
        config: &rss::RssConfig,
        dest_ports: &[u16],
    ) -> Result<(), ExpError> {
        let to: Vec<SocketAddr> = dest_ports
            .iter()
            .map(|&port| SocketAddr::new(lab.receiver().ipv4.into(), port))
            .collect();
        let snd = lab.sender();
        binder::plans::plan_and_install(
            &self.binder,
            config,
            Some(&snd.netns),
            IpAddr::V4(snd.ipv4),
            &to,
            self.ports as usize,
        )?;
        Ok(())
    }
}

/// What a way sets up once for all its repetitions; undone when dropped.
enum Setup {
    /// Kernel-chosen ports: nothing.
    Kernel,
    /// The allocator and the shim that asks it.
    Preload {
        shim: PathBuf,
        socket: PathBuf,
        _allocator: srap::alloc::ServerHandle,
    },
    /// Separate processes share one plan only if they share one cgroup:
    /// attached once (what `steer attach --cgroup` does) and planned for
    /// every destination port of the run, every client started inside it,
    /// every connection of every client taking the next planned slot.
    SharedCgroup(PlannedCgroup),
    /// One client: a cgroup planned afresh for each repetition, as each
    /// `steer exec --bpf` does.
    CgroupPerRun,
}

impl Setup {
    fn new(
        lab: &Lab,
        params: &DemoParams,
        config: &rss::RssConfig,
        files: &RunFiles,
        way: Way,
    ) -> Result<Self, ExpError> {
        Ok(match (way, params.processes) {
            (Way::Random, _) => Setup::Kernel,
            (Way::Preload, _) => Setup::Preload {
                _allocator: start_allocator(lab, config, files)?,
                shim: binder::preload::install_shim_in(&files.dir)?,
                socket: files.socket.clone(),
            },
            (Way::Bpf, true) => {
                let dest_ports: Vec<u16> = (0..params.flows as u16).map(|i| PORT + i).collect();
                let slots = (2 * params.flows).min(binder::cgroup::MAX_PORTS as u32);
                Setup::SharedCgroup(PlannedCgroup::attach(lab, config, &dest_ports, slots)?)
            }
            (Way::Bpf, false) => Setup::CgroupPerRun,
        })
    }
}

/// How one client's connections get their source ports.
enum Steering<'a> {
    Kernel,
    Preload {
        shim: &'a Path,
        socket: &'a Path,
    },
    /// The cgroup it joins (with the binder attached and planned).
    Cgroup(&'a TempCgroup),
}

/// The iperf3 client command of a way, in the sender's namespace.
fn client_command(lab: &Lab, steering: &Steering) -> Result<Command, ExpError> {
    let snd = lab.sender();
    let in_sender = || -> Result<Command, ExpError> {
        let mut cmd = Command::new("iperf3");
        host::netns::enter_in_child(&mut cmd, &snd.netns).map_err(LabError::from)?;
        Ok(cmd)
    };
    Ok(match steering {
        Steering::Kernel => lab.command(&snd.name, "iperf3")?,
        Steering::Preload { shim, socket } => {
            let mut cmd = in_sender()?;
            binder::preload::configure(&mut cmd, shim, Some(socket));
            cmd
        }
        Steering::Cgroup(cgroup) => {
            let mut cmd = in_sender()?;
            cgroup.enter_in_child(&mut cmd)?;
            cmd
        }
    })
}

/// One repetition: servers, clients, then the datapath's counters.
fn repetition_of(
    lab: &Lab,
    params: &DemoParams,
    config: &rss::RssConfig,
    setup: &Setup,
    repetition: u32,
) -> Result<Repetition, ExpError> {
    let rcv = lab.receiver();
    nic::clear_flows(&rcv.dev, Some(&rcv.netns))?;
    let addr = IpAddr::V4(rcv.ipv4);
    let clients = if params.processes { params.flows } else { 1 };
    let streams = if params.processes { 1 } else { params.flows };
    let dest_ports: Vec<u16> = (0..clients as u16).map(|i| PORT + i).collect();
    let _servers = dest_ports
        .iter()
        .map(|&port| iperf::Server::start(lab.command(&rcv.name, "iperf3")?, addr, port))
        .collect::<Result<Vec<_>, _>>()?;
    let own: PlannedCgroup;
    let planned = match setup {
        Setup::Kernel | Setup::Preload { .. } => None,
        Setup::SharedCgroup(shared) => {
            shared.replan(lab, config, &dest_ports)?;
            Some(shared)
        }
        Setup::CgroupPerRun => {
            // One slot per data flow plus iperf3's control connection.
            own = PlannedCgroup::attach(lab, config, &dest_ports, params.flows + 1)?;
            Some(&own)
        }
    };
    let steering = match (setup, planned) {
        (Setup::Preload { shim, socket, .. }, _) => Steering::Preload { shim, socket },
        (_, Some(planned)) => Steering::Cgroup(&planned.cgroup),
        (_, None) => Steering::Kernel,
    };
    let binder_before = binder_stats(planned)?;
    let before = host::cpu::CpuTimes::read().map_err(LabError::from)?;
    let runs = run_clients(&dest_ports, |port| {
        let make = || client_command(lab, &steering);
        iperf::run_client(make, addr, port, streams, params.seconds)
    })?;
    let cpu_busy = host::cpu::CpuTimes::read()
        .map_err(LabError::from)?
        .busy_since(&before);
    let binder = binder_stats(planned)?
        .zip(binder_before)
        .map(|(after, before)| after.since(&before));
    Ok(Repetition {
        binder,
        ..measure(lab, params, repetition, &dest_ports, &runs, cpu_busy)?
    })
}

/// The cgroup binder's counts, for the ways that have one.
fn binder_stats(planned: Option<&PlannedCgroup>) -> Result<Option<BinderStats>, ExpError> {
    Ok(planned.map(|p| p.binder.stats()).transpose()?)
}

/// Runs one client per destination port at the same time.
fn run_clients(
    dest_ports: &[u16],
    client: impl Fn(u16) -> Result<IperfRun, ExpError> + Sync,
) -> Result<Vec<IperfRun>, ExpError> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = dest_ports
            .iter()
            .map(|&port| {
                let client = &client;
                scope.spawn(move || client(port))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ExpError::Parameter(
                        "an iperf3 client thread panicked".into(),
                    ))
                })
            })
            .collect()
    })
}

/// Reads, from the receiver's per-flow counters, where iperf3's flows went.
fn measure(
    lab: &Lab,
    params: &DemoParams,
    repetition: u32,
    dest_ports: &[u16],
    runs: &[IperfRun],
    cpu_busy: Vec<Option<f64>>,
) -> Result<Repetition, ExpError> {
    let rcv = lab.receiver();
    let flows = nic::flows(&rcv.dev, Some(&rcv.netns))?;
    let mut pairs = Vec::new();
    let mut flow_gbps = Vec::new();
    for (run, &dport) in runs.iter().zip(dest_ports) {
        pairs.extend(run.source_ports.iter().map(|&sport| (sport, dport)));
        flow_gbps.extend(run.stream_bits_per_second.iter().map(|b| b / 1e9));
    }
    let flow_queues: Vec<u32> = pairs
        .iter()
        .filter_map(|&(sport, dport)| {
            flows
                .iter()
                .find(|f| {
                    f.tuple.proto == rss::L4Proto::Tcp
                        && f.tuple.src_port == sport
                        && f.tuple.dst_port == dport
                })
                .map(|f| f.queue)
        })
        .collect();
    if flow_queues.len() != pairs.len() {
        return Err(ExpError::FlowsMissing {
            seen: flow_queues.len(),
            expected: pairs.len(),
        });
    }
    let predicted_queues = predict(lab, &pairs)?;
    let flows_per_queue = count_per_queue(&flow_queues, params.queues)?;
    let (Some(max), Some(min_flow_gbps)) = (
        flows_per_queue.iter().copied().max(),
        flow_gbps.iter().copied().reduce(f64::min),
    ) else {
        return Err(ExpError::FlowsMissing {
            seen: 0,
            expected: params.flows as usize,
        });
    };
    Ok(Repetition {
        repetition,
        source_ports: pairs.iter().map(|p| p.0).collect(),
        dest_ports: pairs.iter().map(|p| p.1).collect(),
        flow_queues,
        predicted_queues,
        flows_per_queue,
        max_flows_on_a_queue: max,
        perfect: max <= params.ideal_max(),
        aggregate_gbps: runs.iter().map(|r| r.bits_per_second).sum::<f64>() / 1e9,
        flow_gbps,
        min_flow_gbps,
        cpu_busy,
        binder: None,
    })
}

/// Flows per queue (index = queue) of the queues the datapath reported; a
/// queue outside the receiver's `queues` is an error, not a flow to drop.
fn count_per_queue(flow_queues: &[u32], queues: u32) -> Result<Vec<u32>, ExpError> {
    let mut per_queue = vec![0u32; queues as usize];
    for &q in flow_queues {
        let n = per_queue
            .get_mut(q as usize)
            .ok_or_else(|| ExpError::Program {
                program: "software RSS".into(),
                detail: format!("a flow on queue {q}, but the receiver has {queues} queues"),
            })?;
        *n += 1;
    }
    Ok(per_queue)
}

/// The model's queue for each (source port, destination port).
fn predict(lab: &Lab, pairs: &[(u16, u16)]) -> Result<Vec<u32>, ExpError> {
    let model = |e: rss::RssError| ExpError::Parameter(e.to_string());
    let predictor = rss::Predictor::new(lab.rss_config()?).map_err(model)?;
    let (snd, rcv): (&Host, &Host) = (lab.sender(), lab.receiver());
    pairs
        .iter()
        .map(|&(sport, dport)| {
            let flow = rss::FlowTuple::new(
                snd.ipv4.into(),
                sport,
                rcv.ipv4.into(),
                dport,
                rss::L4Proto::Tcp,
            );
            predictor.place(&flow).map(|p| p.queue).map_err(model)
        })
        .collect()
}

/// One way's summary; `None` without a repetition (nothing measured).
fn summarize(way: Way, runs: Vec<Repetition>) -> Option<WayResult> {
    let n = runs.len() as f64;
    Some(WayResult {
        name: way.name(),
        description: way.describe(),
        repetitions: runs.len() as u32,
        perfect_fraction: runs.iter().filter(|r| r.perfect).count() as f64 / n,
        max_flows_on_a_queue: runs.iter().map(|r| r.max_flows_on_a_queue).max()?,
        aggregate_gbps: stats::mean(&runs.iter().map(|r| r.aggregate_gbps).collect::<Vec<_>>())?,
        min_flow_gbps: runs.iter().map(|r| r.min_flow_gbps).reduce(f64::min)?,
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "clap")]
    #[test]
    fn the_command_line_defaults_are_the_library_defaults() {
        assert!(crate::clap_defaults_are_the_library_defaults::<DemoParams>());
        let p: DemoParams = crate::parse_params(&["-P", "4", "--ways", "bpf,random"]).unwrap();
        assert_eq!(p.flows, 4);
        assert_eq!(p.ways, vec![Way::Bpf, Way::Random]);
        assert!(crate::parse_params::<DemoParams>(&["--ways", "magic"]).is_err());
    }

    #[test]
    fn way_names_are_the_json_names() {
        for way in Way::ALL {
            assert_eq!(serde_json::to_value(way).unwrap(), way.name());
        }
    }

    #[test]
    fn a_queue_outside_the_receiver_is_an_error() {
        assert_eq!(count_per_queue(&[0, 2, 2], 4).unwrap(), vec![1, 0, 2, 0]);
        assert!(count_per_queue(&[0, 4], 4).is_err());
    }

    #[test]
    fn the_histogram_folds_three_and_more_flows_into_one_bin() {
        assert_eq!(queue_histogram(&[0, 1, 1, 2, 3, 7, 0]), [2, 2, 1, 2]);
        assert_eq!(queue_histogram(&[]), [0; 4]);
    }

    #[test]
    fn no_repetition_is_no_summary() {
        assert!(summarize(Way::Random, Vec::new()).is_none());
    }

    #[test]
    fn ideal_max_is_ceiling() {
        let mut p = DemoParams {
            flows: 16,
            queues: 32,
            repetitions: 1,
            seconds: 1,
            ways: vec![Way::Random],
            processes: false,
            lab: "x".into(),
            keep_lab: false,
        };
        assert_eq!(p.ideal_max(), 1);
        p.queues = 6;
        assert_eq!(p.ideal_max(), 3);
    }
}
