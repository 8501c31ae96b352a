//! The backends' agents and the controller's side of them: every backend
//! runs the real Steer agent (crate `agent`, the HTTP server of `steer
//! agent`, shared with port steering), and the controller asks each one
//! over HTTP for its per-queue load and its RSS config (CrossRSS,
//! papers/crossrss-core-aware-lb.txt section 2: "An agent on each server
//! periodically reports to an LB controller the load of each CPU core and
//! the mapping used by RSS to map connections to the cores"; docs/
//! crossrss.md, "Agents").
//!
//! - [`BackendAgents`]: one `agent::Agent` per backend, started inside the
//!   backend's namespace, serving its software-RSS device, listening on the
//!   backend's lab address at [`AGENT_PORT`]. That address is not loopback,
//!   so the agent needs a token: one random token per lab, known only to
//!   this process.
//! - [`AgentLink`]: the client side of one agent (`agent::AgentClient`,
//!   [`AGENT_TIMEOUT`]); turns `GET /v1/load` and `GET /v1/rss?dev=` into an
//!   `lb::AgentReport`.
//! - [`Pollers`]: one thread per agent inside the load balancer's namespace
//!   (the backends' lab addresses are reachable from there; the BPF map fds
//!   the controller writes work from any namespace), asked once per
//!   controller interval; a slow or dead agent only loses its own report.

use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agent::{AgentClient, Devices, ServerOptions, Sources, Token};
use lab::Host;
use lb::AgentReport;
use rss::RssConfig;

use crate::error::LbXdpError;

/// The port every backend's agent listens on (at the backend's lab
/// address): `steer agent`'s default, as on a real backend.
pub const AGENT_PORT: u16 = agent::DEFAULT_PORT;

/// Bound on one HTTP request to an agent (connect, send, answer). Short,
/// because the controller runs at 10-20 Hz and a report older than a few
/// intervals is useless; an agent that does not answer in time counts as
/// not reporting and becomes stale like any silent agent.
pub const AGENT_TIMEOUT: Duration = Duration::from_millis(200);

/// How often each agent samples its queue counters. The controller turns
/// cumulative counts into a load using the agent's own sample times, so
/// this only bounds how old a count can be when it is asked (at most one
/// sample period); 25 ms keeps that under half an interval at 20 Hz.
pub const AGENT_SAMPLE: Duration = Duration::from_millis(25);

/// How often the controller asks an agent for its config again. The agent
/// itself re-reads its configs every 500 ms (`agent::ServerOptions::
/// config_interval`'s default), so asking more often returns the same
/// thing; a changed table (a new attach) is used within one second.
pub const CONFIG_REFRESH: Duration = Duration::from_millis(500);

/// The agents of a lab's backends (server id = index). They stop when this
/// is dropped.
pub struct BackendAgents {
    token: Token,
    hosts: Vec<Host>,
    running: Mutex<Vec<Option<agent::Agent>>>,
}

impl BackendAgents {
    /// Starts one agent per backend. The software RSS must be attached
    /// already: the agent refuses a listed device without a config.
    pub fn start(backends: &[Host]) -> Result<BackendAgents, LbXdpError> {
        // 128 random bits from the thread's CSPRNG: nobody outside this
        // process can guess it, so nothing else in the lab can read the
        // agents (the API is read-only, but it serves the RSS keys).
        let token = Token::new(&format!("{:032x}", rand::random::<u128>()))
            .map_err(|e| LbXdpError::config(e.to_string()))?;
        let agents = BackendAgents {
            token,
            hosts: backends.to_vec(),
            running: Mutex::new(backends.iter().map(|_| None).collect()),
        };
        for i in 0..backends.len() {
            agents.start_agent(i)?;
        }
        Ok(agents)
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Vec<Option<agent::Agent>>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn host(&self, i: usize) -> Result<&Host, LbXdpError> {
        self.hosts
            .get(i)
            .ok_or_else(|| LbXdpError::config(format!("no backend {i}")))
    }

    /// Starts backend `i`'s agent (again); nothing to do if it runs.
    pub fn start_agent(&self, i: usize) -> Result<(), LbXdpError> {
        let host = self.host(i)?;
        let mut running = self.running();
        if running[i].is_some() {
            return Ok(());
        }
        let mut opts = ServerOptions::new(Sources {
            devices: Devices::Listed(vec![host.dev.clone()]),
            files: Vec::new(),
            netns: Some(host.netns.clone()),
        });
        opts.listen = SocketAddr::from((host.ipv4, AGENT_PORT));
        opts.token = Some(self.token.clone());
        opts.load_interval = AGENT_SAMPLE;
        // One poller asks at a time; a second worker serves anyone else.
        opts.workers = 2;
        let name = host.name.clone();
        opts.log = Arc::new(move |line: &str| eprintln!("{name}: {line}"));
        running[i] = Some(agent::Agent::start(opts)?);
        Ok(())
    }

    /// Stops backend `i`'s agent (its listener closes: the controller's
    /// requests are refused from then on). The backend keeps serving.
    pub fn stop_agent(&self, i: usize) {
        let agent = self.running().get_mut(i).and_then(Option::take);
        drop(agent);
    }

    /// Stops every agent (before the lab's namespaces go away).
    pub fn stop_all(&self) {
        let agents: Vec<agent::Agent> =
            self.running().iter_mut().filter_map(Option::take).collect();
        drop(agents);
    }

    /// `http://ADDR:PORT` of backend `i`'s agent.
    pub fn url(&self, i: usize) -> Result<String, LbXdpError> {
        Ok(format!("http://{}:{AGENT_PORT}", self.host(i)?.ipv4))
    }

    /// The controller's clients, one per backend (server id = index).
    pub fn links(&self) -> Result<Vec<AgentLink>, LbXdpError> {
        (0..self.hosts.len())
            .map(|i| {
                let client =
                    AgentClient::new(&self.url(i)?, Some(self.token.expose()), AGENT_TIMEOUT)
                        .map_err(|e| LbXdpError::config(e.to_string()))?;
                Ok(AgentLink {
                    server: i as u32,
                    dev: self.hosts[i].dev.clone(),
                    client,
                    last: None,
                    loads: None,
                    config: None,
                })
            })
            .collect()
    }
}

impl Drop for BackendAgents {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The counters of one earlier answer.
struct Sample {
    /// The agent's clock (`LoadReply::sampled_at_ms`) when it read them.
    at_ms: u64,
    packets: Vec<u64>,
}

/// The controller's client for one backend's agent.
pub struct AgentLink {
    pub server: u32,
    /// The backend's software-RSS device, as the agent serves it.
    pub dev: String,
    client: AgentClient,
    last: Option<Sample>,
    /// The loads of the last report.
    loads: Option<Vec<f64>>,
    /// The served config and when it was asked for.
    config: Option<(Instant, RssConfig)>,
}

impl AgentLink {
    pub fn url(&self) -> &str {
        self.client.url()
    }

    /// Asks the agent for its load and config and makes this interval's
    /// report; any failure (unreachable, timeout, 401, bad JSON, no
    /// software RSS on the device, queue numbers outside the config) is
    /// the error text, and the controller counts it as no report.
    ///
    /// Load = the delta of the cumulative `packets` of each queue since
    /// the last answer, scaled from the agent's own sample times to one
    /// controller `interval`. Not `packets_per_sec`: that rate covers only
    /// the agent's last sample period (25 ms), so most of the interval's
    /// packets would not count and the load would be noisy; the delta
    /// covers every packet since the last report, which is what CrossRSS's
    /// agents report ("the packets each core received during the
    /// interval", docs/crossrss.md). The scaling keeps all backends, and the
    /// load balancer's per-bucket new load (`bucket_stats`, packets per
    /// interval), in the same unit when polls are not exactly one interval
    /// apart.
    pub fn report(&mut self, interval: Duration) -> Result<AgentReport, String> {
        // Queues are the cores here: queue q's packets are its load, and
        // the served config's indirection table entries are the bucket ->
        // core map.
        let config = self.config()?;
        let load = self.client.load().map_err(|e| e.to_string())?;
        let queues = config.queues as usize;
        let bucket_cores = config.indirection_table.entries().to_vec();
        let dev = load
            .devices
            .iter()
            .find(|d| d.dev == self.dev)
            .ok_or_else(|| format!("{}: no queue counters for {}", self.url(), self.dev))?;
        let mut packets = vec![0u64; queues];
        for q in &dev.queues {
            *packets.get_mut(q.queue as usize).ok_or_else(|| {
                // The config changed under us: ask for it at the next poll.
                self.config = None;
                format!(
                    "{}: queue {} outside the served config's {queues} queues",
                    self.url(),
                    q.queue
                )
            })? = q.packets;
        }
        let now = Sample {
            at_ms: load.sampled_at_ms,
            packets,
        };
        let core_loads = match &self.last {
            Some(prev)
                if now.at_ms > prev.at_ms
                    && prev.packets.len() == queues
                    && now.packets.iter().zip(&prev.packets).all(|(n, p)| n >= p) =>
            {
                let scale = interval.as_secs_f64() * 1e3 / (now.at_ms - prev.at_ms) as f64;
                now.packets
                    .iter()
                    .zip(&prev.packets)
                    .map(|(n, p)| (n - p) as f64 * scale)
                    .collect()
            }
            // The same sample as last time (asked again within one sample
            // period): nothing new was measured; the last loads are still
            // the latest measurement, and the last counts stay the baseline.
            Some(prev) if now.at_ms == prev.at_ms && prev.packets == now.packets => self
                .loads
                .clone()
                .filter(|l| l.len() == queues)
                .unwrap_or_else(|| vec![0.0; queues]),
            // First answer, or a restarted agent (its clock went back) or
            // re-attached software RSS (counters went back): no interval
            // to measure yet.
            _ => vec![0.0; queues],
        };
        self.last = Some(now);
        self.loads = Some(core_loads.clone());
        Ok(AgentReport {
            server: self.server,
            core_loads,
            bucket_cores,
        })
    }

    /// The served config (`GET /v1/rss?dev=`), asked again when the copy
    /// here is older than [`CONFIG_REFRESH`]: one request per poll instead
    /// of two in between, which matters on a loaded host where each
    /// request waits for the agent's threads to be scheduled.
    fn config(&mut self) -> Result<RssConfig, String> {
        match &self.config {
            Some((at, config)) if at.elapsed() < CONFIG_REFRESH => Ok(config.clone()),
            _ => {
                let rss = self.client.rss_dev(&self.dev).map_err(|e| e.to_string())?;
                self.config = Some((Instant::now(), rss.config.clone()));
                Ok(rss.config)
            }
        }
    }
}

/// The agents' clients and the namespace their requests leave from.
pub struct Reporters {
    /// A namespace from which every backend's lab address is reachable:
    /// the load balancer's.
    pub netns: String,
    pub links: Vec<AgentLink>,
}

/// What the agents said in one controller interval.
#[derive(Debug, Default)]
pub struct Round {
    pub reports: Vec<AgentReport>,
    /// One text per agent whose answer was a failure.
    pub failures: Vec<String>,
    /// Agents that gave nothing this interval (no answer before the wait
    /// ended, or still busy with an earlier request).
    pub silent: usize,
}

/// One thread per agent, in [`Reporters::netns`], each asking its agent
/// when told to. The controller asks all of them at once and waits a
/// bounded time, so a dead agent (at worst [`AGENT_TIMEOUT`] per request)
/// delays nobody: its poller is still busy at the next interval and is
/// skipped until it answers.
pub struct Pollers {
    ticks: Vec<Option<Sender<()>>>,
    answers: Receiver<(usize, Result<AgentReport, String>)>,
    busy: Vec<bool>,
    handles: Vec<JoinHandle<Result<(), host::HostError>>>,
}

impl Pollers {
    /// Starts the threads; each report's loads are per `interval`.
    pub fn start(reporters: Reporters, interval: Duration) -> Result<Pollers, LbXdpError> {
        let (tx, answers) = mpsc::channel();
        let mut ticks = Vec::new();
        let mut handles = Vec::new();
        for (i, mut link) in reporters.links.into_iter().enumerate() {
            let (tick, tick_rx) = mpsc::channel::<()>();
            let tx = tx.clone();
            handles.push(host::netns::spawn_in(&reporters.netns, move || {
                while tick_rx.recv().is_ok() {
                    if tx.send((i, link.report(interval))).is_err() {
                        break;
                    }
                }
            })?);
            ticks.push(Some(tick));
        }
        Ok(Pollers {
            busy: vec![false; ticks.len()],
            ticks,
            answers,
            handles,
        })
    }

    /// Asks every agent that is not busy, and collects answers until all
    /// of them answered or `wait` passed. A late answer to an earlier
    /// interval's question counts in the interval it arrives in (it is the
    /// agent's latest measurement).
    pub fn collect(&mut self, wait: Duration) -> Round {
        let mut round = Round::default();
        let mut asked = vec![false; self.ticks.len()];
        let mut answered = vec![false; self.ticks.len()];
        for (i, tick) in self.ticks.iter_mut().enumerate() {
            if self.busy[i] {
                continue;
            }
            if tick.as_ref().is_some_and(|t| t.send(()).is_ok()) {
                self.busy[i] = true;
                asked[i] = true;
            } else {
                // Its thread ended (it could not enter the namespace).
                tick.take();
                answered[i] = true;
                round
                    .failures
                    .push(format!("the poller of agent {i} is not running"));
            }
        }
        let deadline = Instant::now() + wait;
        let mut waiting = asked.iter().filter(|&&a| a).count();
        loop {
            let answer = if waiting > 0 {
                let left = deadline.saturating_duration_since(Instant::now());
                self.answers.recv_timeout(left).ok()
            } else {
                self.answers.try_recv().ok()
            };
            let Some((i, result)) = answer else { break };
            self.busy[i] = false;
            answered[i] = true;
            if std::mem::take(&mut asked[i]) {
                waiting -= 1;
            }
            match result {
                Ok(r) => round.reports.push(r),
                Err(e) => round.failures.push(e),
            }
        }
        round.silent = answered.iter().filter(|&&a| !a).count();
        round
    }
}

impl Drop for Pollers {
    fn drop(&mut self) {
        // Closing the channels ends each thread after its current request
        // (at most two requests of AGENT_TIMEOUT).
        self.ticks.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
