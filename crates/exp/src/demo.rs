//! `steer demo`: parallel TCP flows collide on the receiver's queues when the
//! kernel picks their source ports (SRAP paper, section 2: 16 flows on 32
//! cores are collision-free with probability 1.04%), and do not when Steer
//! picks them (section 3), through either binder.
//!
//! Three ways, each run the same number of times against the same receiver:
//! - `random`: iperf3 as it is, kernel-chosen source ports;
//! - `preload`: `steer exec -- iperf3 ...`, the LD_PRELOAD binder asking the
//!   allocator (`steer ports serve`, run in the sender's namespace);
//! - `bpf`: `steer exec --bpf -- iperf3 ...`, the cgroup connect4 binder.
//!
//! Every number is read from the datapath: iperf3's JSON says which source
//! ports its data streams got and what each carried; the receiver's XDP
//! software RSS says, from its per-flow counters, which queue each of those
//! flows' packets went to; /proc/stat says how busy each CPU was. The RSS
//! model's prediction is recorded beside the measurement as a cross-check only.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lab::{Host, Lab, LabSpec};
use serde::Serialize;
use stats::Meta;

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
pub struct DemoParams {
    pub flows: u32,
    pub queues: u32,
    pub repetitions: u32,
    pub seconds: u32,
    pub ways: Vec<Way>,
    /// One iperf3 process per flow (`-P 1` each) instead of one `-P flows`.
    pub processes: bool,
    pub lab: String,
    pub keep_lab: bool,
    /// The `steer` executable that runs the binders and the allocator.
    pub steer_exe: PathBuf,
}

impl DemoParams {
    pub fn check(&self) -> Result<(), ExpError> {
        let bad = |m: &str| Err(ExpError::Parameter(m.into()));
        if self.flows == 0 || self.flows > 128 {
            return bad("--flows must be 1..=128");
        }
        if self.queues == 0 || self.queues > 256 {
            return bad("--queues must be 1..=256");
        }
        if self.repetitions == 0 {
            return bad("--repetitions must be at least 1");
        }
        if self.seconds == 0 {
            return bad("--seconds must be at least 1");
        }
        if self.ways.is_empty() {
            return bad("--ways names no way");
        }
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

#[derive(Debug, Clone, Serialize)]
pub struct DemoResult {
    pub experiment: &'static str,
    pub params: DemoParams,
    pub ways: Vec<WayResult>,
    pub theory: Theory,
    /// Queue -> CPU of the receiver's software RSS.
    pub queue_cpus: Vec<u32>,
    pub meta: Meta,
}

/// Runs the demo; `progress` is called after each repetition.
pub fn run(
    params: &DemoParams,
    mut progress: impl FnMut(Way, &Repetition),
) -> Result<DemoResult, ExpError> {
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
) -> Result<DemoResult, ExpError> {
    let config = lab.rss_config()?;
    let files = RunFiles::create(&params.lab, &config)?;
    let mut ways = Vec::new();
    for &way in &params.ways {
        let _allocator = match way {
            Way::Preload => Some(Allocator::start(lab, params, &files)?),
            _ => None,
        };
        // Separate processes share one plan only if they share one cgroup:
        // `steer attach --cgroup` once, every client started inside it.
        let shared = match (way, params.processes) {
            (Way::Bpf, true) => Some(SharedCgroup::attach(lab, params, &files)?),
            _ => None,
        };
        let cgroup = shared.as_ref().map(|c| c.dir.as_path());
        let mut runs = Vec::new();
        for repetition in 1..=params.repetitions {
            let run = repetition_of(lab, params, &files, way, cgroup, repetition)?;
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
    Ok(DemoResult {
        experiment: "demo",
        params: params.clone(),
        ways,
        theory,
        queue_cpus: config.queue_cpus,
        meta: Meta::collect(),
    })
}

/// The receiver's config and the allocator's socket, for the binders.
struct RunFiles {
    dir: PathBuf,
    config: PathBuf,
    socket: PathBuf,
}

impl RunFiles {
    fn create(lab: &str, config: &rss::RssConfig) -> Result<Self, ExpError> {
        let dir = Path::new("/run/steer/demo").join(lab);
        let io = |e: std::io::Error| ExpError::Parameter(format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(&dir).map_err(io)?;
        let path = dir.join("receiver.json");
        std::fs::write(&path, config.to_json()).map_err(io)?;
        Ok(RunFiles {
            socket: dir.join("alloc.sock"),
            config: path,
            dir,
        })
    }
}

impl Drop for RunFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `steer ports serve` in the sender's namespace, so it sees the sender's
/// ports in use; killed when dropped.
struct Allocator(Child);

impl Allocator {
    fn start(lab: &Lab, params: &DemoParams, files: &RunFiles) -> Result<Self, ExpError> {
        let rcv = lab.receiver().ipv4.to_string();
        let mut cmd = lab.command(&lab.sender().name, &params.steer_exe.to_string_lossy())?;
        cmd.args(["ports", "serve", "--socket"])
            .arg(&files.socket)
            .arg("--config")
            .arg(&files.config)
            .args(["--for", &rcv])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| program_error("steer ports serve", e))?;
        let mut allocator = Allocator(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::os::unix::net::UnixStream::connect(&files.socket).is_err() {
            if Instant::now() > deadline || allocator.0.try_wait().ok().flatten().is_some() {
                return Err(ExpError::Program {
                    program: "steer ports serve".into(),
                    detail: "the allocator did not start listening".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(allocator)
    }
}

impl Drop for Allocator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A cgroup with the BPF binder attached for every destination port of the
/// run; detached and removed when dropped.
struct SharedCgroup {
    dir: PathBuf,
    steer: PathBuf,
}

impl SharedCgroup {
    fn attach(lab: &Lab, params: &DemoParams, files: &RunFiles) -> Result<Self, ExpError> {
        let root = binder::cgroup::cgroup2_root()
            .map_err(|e| ExpError::Parameter(format!("cgroup v2: {e}")))?;
        let dir = root.join(format!("steer-demo-{}", params.lab));
        std::fs::create_dir_all(&dir).map_err(|e| program_error("mkdir cgroup", e))?;
        let shared = SharedCgroup {
            dir,
            steer: params.steer_exe.clone(),
        };
        let mut cmd = Command::new(&shared.steer);
        cmd.args(["attach", "--cgroup"])
            .arg(&shared.dir)
            .arg("--config")
            .arg(&files.config)
            .args(["--from", &lab.sender().ipv4.to_string()]);
        for i in 0..params.flows as u16 {
            cmd.args(["--to", &format!("{}:{}", lab.receiver().ipv4, PORT + i)]);
        }
        // Every connection of every client takes the next planned slot.
        cmd.args(["--ports", &(2 * params.flows).min(64).to_string()]);
        let out = cmd.output().map_err(|e| program_error("steer attach", e))?;
        if !out.status.success() {
            return Err(ExpError::Program {
                program: "steer attach --cgroup".into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(shared)
    }
}

impl Drop for SharedCgroup {
    fn drop(&mut self) {
        let _ = Command::new(&self.steer)
            .args(["attach", "--detach", "--cgroup"])
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn program_error(program: &str, e: std::io::Error) -> ExpError {
    ExpError::Program {
        program: program.into(),
        detail: e.to_string(),
    }
}

/// The iperf3 client command of a way, in the sender's namespace.
fn client_command(
    lab: &Lab,
    params: &DemoParams,
    files: &RunFiles,
    way: Way,
    cgroup: Option<&Path>,
    dest_ports: &[u16],
) -> Result<Command, ExpError> {
    let snd = lab.sender();
    let steer = || {
        let mut cmd = Command::new(&params.steer_exe);
        cmd.args(["exec", "--netns", &snd.netns]);
        cmd
    };
    Ok(match (way, cgroup) {
        (Way::Random, _) => lab.command(&snd.name, "iperf3")?,
        (Way::Preload, _) => {
            let mut cmd = steer();
            cmd.arg("--socket")
                .arg(&files.socket)
                .args(["--", "iperf3"]);
            cmd
        }
        (Way::Bpf, Some(dir)) => {
            // Join the shared cgroup, then become the client.
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\""])
                .arg(dir)
                .args(["ip", "netns", "exec", &snd.netns, "iperf3"]);
            cmd
        }
        (Way::Bpf, None) => {
            let mut cmd = steer();
            cmd.arg("--bpf").arg("--config").arg(&files.config);
            for port in dest_ports {
                cmd.args(["--to", &format!("{}:{port}", lab.receiver().ipv4)]);
            }
            // One planned port per flow plus iperf3's control connection.
            let per_dest = if params.processes {
                2
            } else {
                params.flows + 1
            };
            cmd.args(["--ports", &per_dest.to_string(), "--", "iperf3"]);
            cmd
        }
    })
}

/// One repetition: servers, clients, then the datapath's counters.
fn repetition_of(
    lab: &Lab,
    params: &DemoParams,
    files: &RunFiles,
    way: Way,
    cgroup: Option<&Path>,
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
    let before = CpuTimes::read()?;
    let runs = run_clients(&dest_ports, |port| {
        let make = || client_command(lab, params, files, way, cgroup, &dest_ports);
        iperf::run_client(make, addr, port, streams, params.seconds)
    })?;
    let cpu_busy = CpuTimes::read()?.busy_since(&before);
    measure(lab, params, repetition, &dest_ports, &runs, cpu_busy)
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

/// Per-CPU jiffies from /proc/stat: (busy, total).
struct CpuTimes(Vec<(u64, u64)>);

impl CpuTimes {
    fn read() -> Result<Self, ExpError> {
        let fail = |detail: String| ExpError::Program {
            program: "/proc/stat".into(),
            detail,
        };
        let text = std::fs::read_to_string("/proc/stat").map_err(|e| fail(e.to_string()))?;
        parse_proc_stat(&text).map(CpuTimes).map_err(fail)
    }

    /// Busy share of each CPU since `before`; `None` for a CPU whose
    /// counters did not advance.
    fn busy_since(&self, before: &CpuTimes) -> Vec<Option<f64>> {
        self.0
            .iter()
            .zip(&before.0)
            .map(|(&(b1, t1), &(b0, t0))| {
                let total = t1.saturating_sub(t0);
                (total > 0).then(|| b1.saturating_sub(b0) as f64 / total as f64)
            })
            .collect()
    }
}

/// `cpuN user nice system idle iowait irq softirq steal ...`: busy is all
/// but idle and iowait. A line without those eight numbers is an error.
fn parse_proc_stat(text: &str) -> Result<Vec<(u64, u64)>, String> {
    let cpus: Vec<(u64, u64)> = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .take(8)
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("'{l}': {e}"))?;
            if v.len() < 8 {
                return Err(format!("'{l}': fewer than 8 counters"));
            }
            let total: u64 = v.iter().sum();
            Ok((total - v[3] - v[4], total))
        })
        .collect::<Result<_, _>>()?;
    if cpus.is_empty() {
        return Err("no cpuN line".into());
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_excludes_idle_and_iowait() {
        let text = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 4 1 5 40 10 0 0 0 0 0\ncpu1 1 0 1 8 0 0 0 0\nintr 5\n";
        assert_eq!(parse_proc_stat(text).unwrap(), vec![(10, 60), (2, 10)]);
        let before = CpuTimes(vec![(10, 60), (2, 10), (5, 5)]);
        let after = CpuTimes(vec![(40, 120), (2, 20), (5, 5)]);
        assert_eq!(after.busy_since(&before), vec![Some(0.5), Some(0.0), None]);
    }

    #[test]
    fn broken_proc_stat_is_an_error() {
        assert!(parse_proc_stat("").is_err());
        assert!(parse_proc_stat("cpu  1 2 3 4 5 6 7 8\nintr 5\n").is_err());
        assert!(parse_proc_stat("cpu0 1 2 3 x 5 6 7 8\n").is_err());
        assert!(parse_proc_stat("cpu0 1 2 3 4\n").is_err());
    }

    #[test]
    fn a_queue_outside_the_receiver_is_an_error() {
        assert_eq!(count_per_queue(&[0, 2, 2], 4).unwrap(), vec![1, 0, 2, 0]);
        assert!(count_per_queue(&[0, 4], 4).is_err());
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
            steer_exe: "steer".into(),
        };
        assert_eq!(p.ideal_max(), 1);
        p.queues = 6;
        assert_eq!(p.ideal_max(), 3);
    }
}
