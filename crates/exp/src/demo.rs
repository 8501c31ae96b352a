//! `steer demo`: parallel TCP flows with kernel-chosen source ports collide on
//! the receiver's queues (SRAP paper, section 2: 16 flows on 32 cores are
//! collision-free with probability 1.04%).
//!
//! Every number is read from the datapath: iperf3 reports which source ports
//! its data streams got, and the receiver's XDP software RSS reports, from its
//! per-flow counters, which queue each of those flows' packets went to.

use lab::{Lab, LabSpec};
use serde::Serialize;

use crate::iperf::{self, IperfRun};
use crate::meta::Meta;
use crate::{odds, ExpError};

/// The iperf3 port the demo uses.
const PORT: u16 = 5201;

#[derive(Debug, Clone, Serialize)]
pub struct DemoParams {
    pub flows: u32,
    pub queues: u32,
    pub repetitions: u32,
    pub seconds: u32,
    pub lab: String,
    pub keep_lab: bool,
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
        Ok(())
    }
}

/// One repetition, as measured.
#[derive(Debug, Clone, Serialize)]
pub struct Repetition {
    pub repetition: u32,
    /// The data streams' source ports, in iperf3's order.
    pub source_ports: Vec<u16>,
    /// The queue the datapath put each of those flows on (same order).
    pub flow_queues: Vec<u32>,
    /// The queue the RSS model predicts for each flow: a cross-check, never
    /// used for the counts.
    pub predicted_queues: Vec<u32>,
    /// Flows per queue, index = queue.
    pub flows_per_queue: Vec<u32>,
    pub max_flows_on_a_queue: u32,
    pub collision_free: bool,
    pub goodput_gbps: f64,
}

/// One way of choosing source ports, over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Way {
    pub name: String,
    pub repetitions: u32,
    /// Share of repetitions in which no two flows shared a queue.
    pub perfect_fraction: f64,
    /// The largest number of flows on one queue, worst repetition.
    pub max_flows_on_a_queue: u32,
    pub mean_goodput_gbps: f64,
    pub runs: Vec<Repetition>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Theory {
    /// Probability of a collision-free mapping with uniformly random queues.
    pub perfect_probability: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DemoResult {
    pub experiment: &'static str,
    pub params: DemoParams,
    pub ways: Vec<Way>,
    pub theory: Theory,
    /// Queue -> CPU of the receiver's software RSS.
    pub queue_cpus: Vec<u32>,
    pub meta: Meta,
}

/// Runs the demo; `progress` is called after each repetition.
pub fn run(
    params: &DemoParams,
    mut progress: impl FnMut(&Repetition),
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
    progress: &mut impl FnMut(&Repetition),
) -> Result<DemoResult, ExpError> {
    let config = lab.rss_config()?;
    let mut runs = Vec::new();
    for repetition in 1..=params.repetitions {
        let run = repetition_random(lab, params, repetition)?;
        progress(&run);
        runs.push(run);
    }
    Ok(DemoResult {
        experiment: "demo",
        params: params.clone(),
        ways: vec![summarize("random", runs)],
        theory: Theory {
            perfect_probability: odds::collision_free(params.flows, params.queues),
        },
        queue_cpus: config.queue_cpus,
        meta: Meta::collect(),
    })
}

/// One repetition with kernel-chosen source ports.
fn repetition_random(
    lab: &Lab,
    params: &DemoParams,
    repetition: u32,
) -> Result<Repetition, ExpError> {
    let rcv = lab.receiver().clone();
    let snd = lab.sender().clone();
    nic::clear_flows(&rcv.dev, Some(&rcv.netns))?;
    let addr = std::net::IpAddr::V4(rcv.ipv4);
    let _server = iperf::Server::start(lab.command(&rcv.name, "iperf3")?, addr, PORT)?;
    let run = iperf::run_client(
        || Ok(lab.command(&snd.name, "iperf3")?),
        addr,
        PORT,
        params.flows,
        params.seconds,
    )?;
    measure(lab, params, repetition, &run)
}

/// Reads, from the receiver's per-flow counters, where iperf3's flows went.
fn measure(
    lab: &Lab,
    params: &DemoParams,
    repetition: u32,
    run: &IperfRun,
) -> Result<Repetition, ExpError> {
    let rcv = lab.receiver();
    let flows = nic::flows(&rcv.dev, Some(&rcv.netns))?;
    let predictor =
        rss::Predictor::new(lab.rss_config()?).map_err(|e| ExpError::Parameter(e.to_string()))?;
    let predicted_queues = run
        .source_ports
        .iter()
        .map(|&port| {
            let flow = rss::FlowTuple::new(
                lab.sender().ipv4.into(),
                port,
                rcv.ipv4.into(),
                PORT,
                rss::L4Proto::Tcp,
            );
            predictor.place(&flow).map(|p| p.queue)
        })
        .collect::<Result<Vec<u32>, _>>()
        .map_err(|e| ExpError::Parameter(e.to_string()))?;
    let mut flow_queues = Vec::new();
    for port in &run.source_ports {
        let seen = flows.iter().find(|f| {
            f.tuple.proto == rss::L4Proto::Tcp
                && f.tuple.dst_port == PORT
                && f.tuple.src_port == *port
        });
        if let Some(flow) = seen {
            flow_queues.push(flow.queue);
        }
    }
    if flow_queues.len() != run.source_ports.len() {
        return Err(ExpError::FlowsMissing {
            seen: flow_queues.len(),
            expected: run.source_ports.len(),
        });
    }
    let mut flows_per_queue = vec![0u32; params.queues as usize];
    for &q in &flow_queues {
        if let Some(n) = flows_per_queue.get_mut(q as usize) {
            *n += 1;
        }
    }
    let max = flows_per_queue.iter().copied().max().unwrap_or(0);
    Ok(Repetition {
        repetition,
        source_ports: run.source_ports.clone(),
        flow_queues,
        predicted_queues,
        flows_per_queue,
        max_flows_on_a_queue: max,
        collision_free: max <= 1,
        goodput_gbps: run.bits_per_second / 1e9,
    })
}

fn summarize(name: &str, runs: Vec<Repetition>) -> Way {
    let n = runs.len().max(1) as f64;
    Way {
        name: name.into(),
        repetitions: runs.len() as u32,
        perfect_fraction: runs.iter().filter(|r| r.collision_free).count() as f64 / n,
        max_flows_on_a_queue: runs
            .iter()
            .map(|r| r.max_flows_on_a_queue)
            .max()
            .unwrap_or(0),
        mean_goodput_gbps: runs.iter().map(|r| r.goodput_gbps).sum::<f64>() / n,
        runs,
    }
}
