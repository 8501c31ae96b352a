//! The load balancer in a namespace lab: clients, one load-balancer
//! namespace, backends with software RSS, all on the lab's switch.
//!
//! ```text
//!  c0 ─┐            ┌─ b0  (VIP on lo, software RSS, own indirection table)
//!  c1 ─┼── switch ──┼─ b1
//!      │    (br0)   ├─ ...
//!  lb ─┘            └─ bN-1
//! ```
//!
//! Clients route the VIP via the load balancer's address. The load balancer
//! (XDP on its `veth0`) rewrites the destination MAC to the chosen
//! backend's and sends the frame back out (XDP_TX): L2 direct server return.
//! Backends hold the VIP on their loopback (`arp_ignore=1`,
//! `arp_announce=2`, so they never answer ARP for it) and reply to clients
//! directly. Why DSR and not IP-in-IP: the backends' software RSS must hash
//! the same 4-tuple the load balancer hashed; with L2 DSR the frame a
//! backend receives is the client's packet, unchanged above Ethernet, so
//! "same key, same fields" is all it takes. IP-in-IP would make the
//! backends' RSS hash the outer header (LB -> backend) unless it parsed the
//! inner one, and it costs 20 bytes and an MTU problem. DSR's limit: all
//! backends share the load balancer's L2 segment, which the lab is.
//!
//! The switch ports in front of the load balancer and of every backend get
//! tx checksum offload turned off (the cpumap checksum pitfall, see crate
//! `lab`), and the load balancer's port runs `xdp_pass` so that it accepts
//! the XDP_TX frames (a veth only takes frames from an XDP peer when it
//! runs NAPI, which an XDP program turns on).
//!
//! Every backend also runs the real Steer agent on its lab address
//! (`crate::agents`), which the controller asks for load and config.

use std::net::Ipv4Addr;
use std::sync::Arc;

use lab::{Host, Lab, LabGuard, LabSpec};
use rss::{RssConfig, RssKey};

use crate::agents::{BackendAgents, Reporters};
use crate::error::LbXdpError;
use crate::maps::{self, Datapath};

/// The TCP port the backends' servers listen on (at the VIP).
pub const SERVICE_PORT: u16 = 8080;

/// What to build.
#[derive(Debug, Clone)]
pub struct LiveSpec {
    /// Lab name (see `lab::unique_name`).
    pub name: String,
    pub backends: u32,
    /// Software RSS queues per backend: the "cores" CrossRSS balances.
    pub queues: u32,
    /// Indirection table entries per backend = the load balancer's buckets.
    pub buckets: usize,
    pub clients: u32,
    /// Run seed of the randomised tables (`lb::servers::table_seed`).
    pub seed: u64,
    /// Toeplitz key shared by all backends and the load balancer.
    pub key: RssKey,
}

impl LiveSpec {
    pub fn new(name: &str) -> LiveSpec {
        LiveSpec {
            name: name.to_string(),
            backends: 4,
            queues: 4,
            buckets: lb::servers::DEFAULT_BUCKETS,
            clients: 2,
            seed: 0,
            key: RssKey::microsoft(),
        }
    }
}

/// Backend `host`'s cumulative per-queue packet counts, read from its
/// software RSS's counters in this process (`nic::stats`). This is the
/// experiment's and the tests' measurement of where packets went; the
/// controller never uses it (it asks the agents over HTTP,
/// `crate::agents`).
pub fn queue_counts(host: &Host, queues: u32) -> Result<Vec<u64>, LbXdpError> {
    let failed = |reason: String| LbXdpError::Counters {
        backend: format!("{} ({} in {})", host.name, host.dev, host.netns),
        reason,
    };
    let stats = nic::stats(&host.dev, Some(&host.netns)).map_err(|e| failed(e.to_string()))?;
    (0..queues)
        .map(|queue| {
            // A queue the counters do not list was not measured: 0 would
            // read as an idle core.
            stats
                .queues
                .iter()
                .find(|q| q.queue == queue)
                .map(|q| q.packets)
                .ok_or_else(|| {
                    failed(format!(
                        "no queue {queue} (the software RSS lists {} queues)",
                        stats.queues.len()
                    ))
                })
        })
        .collect()
}

/// A built lab with the load balancer attached and an agent on every
/// backend. Dropping it stops the agents, detaches the software RSS of
/// every backend and tears the lab down.
pub struct LiveLab {
    pub vip: Ipv4Addr,
    pub lb: Host,
    pub backends: Vec<Host>,
    pub clients: Vec<Host>,
    pub configs: Vec<RssConfig>,
    pub macs: Vec<[u8; 6]>,
    pub dp: Arc<Datapath>,
    pub spec: LiveSpec,
    agents: Option<BackendAgents>,
    guard: Option<LabGuard>,
}

/// A backend's software RSS config: `lb::servers::server_config`, with the
/// queues spread over this machine's online CPUs.
pub fn backend_config(spec: &LiveSpec, server: u32) -> Result<RssConfig, LbXdpError> {
    let mut config =
        lb::servers::server_config(&spec.key, server, spec.queues, spec.buckets, spec.seed)?;
    // SAFETY: sysconf has no memory effects.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    config.queue_cpus = (0..spec.queues).map(|q| q % cpus).collect();
    config.validate()?;
    Ok(config)
}

impl LiveLab {
    /// Builds the lab and attaches everything; the data plane starts with
    /// every backend unhealthy until the controller's first step.
    pub fn up(spec: &LiveSpec) -> Result<LiveLab, LbXdpError> {
        if spec.backends == 0 || spec.backends as usize > maps::MAX_BACKENDS {
            return Err(LbXdpError::config(format!(
                "{} backends: 1..={}",
                spec.backends,
                maps::MAX_BACKENDS
            )));
        }
        if spec.clients == 0 {
            return Err(LbXdpError::config("at least one client"));
        }
        let mut hosts: Vec<String> = (0..spec.clients).map(|i| format!("c{i}")).collect();
        hosts.push("lb".into());
        hosts.extend((0..spec.backends).map(|i| format!("b{i}")));
        let mut lspec = LabSpec::new(&spec.name);
        lspec.hosts = hosts;
        lspec.ipv6 = false;
        lspec.software_rss = false;
        lspec.queues = spec.queues;
        if lspec.hosts.len() == 2 {
            return Err(LbXdpError::config("a load balancer lab needs a switch"));
        }
        let guard = Lab::up(&lspec)?.teardown_on_drop();
        let mut live = LiveLab {
            vip: Ipv4Addr::UNSPECIFIED,
            lb: guard.host("lb")?.clone(),
            backends: Vec::new(),
            clients: Vec::new(),
            configs: Vec::new(),
            macs: Vec::new(),
            dp: Arc::new(Datapath::load()?),
            spec: spec.clone(),
            agents: None,
            guard: None,
        };
        live.backends = (0..spec.backends)
            .map(|i| guard.host(&format!("b{i}")).cloned())
            .collect::<Result<_, _>>()?;
        live.clients = (0..spec.clients)
            .map(|i| guard.host(&format!("c{i}")).cloned())
            .collect::<Result<_, _>>()?;
        let o = live.lb.ipv4.octets();
        live.vip = Ipv4Addr::new(10, 78, o[2], 1);
        let switch_port = |host: &str| {
            guard
                .switch_port(host)
                .ok_or_else(|| LbXdpError::config(format!("no switch port for {host}")))
        };
        // Keep the guard in `live` from here on: a failure below tears down.
        let lb_port = switch_port("lb")?;
        let backend_ports: Vec<(String, String)> = (0..spec.backends)
            .map(|i| switch_port(&format!("b{i}")))
            .collect::<Result<_, _>>()?;
        live.guard = Some(guard);

        for (i, b) in live.backends.clone().iter().enumerate() {
            let config = backend_config(spec, i as u32)?;
            let (sw, port) = &backend_ports[i];
            host::link::set_tx_checksum(Some(sw), port, false)?;
            nic::attach(
                &b.dev,
                Some(&b.netns),
                &config,
                &nic::AttachOptions::default(),
            )?;
            host::link::add_address(&b.netns, "lo", live.vip.into(), 32)?;
            for (k, v) in [
                ("net.ipv4.conf.all.arp_ignore", "1"),
                ("net.ipv4.conf.all.arp_announce", "2"),
                ("net.ipv4.conf.veth0.arp_ignore", "1"),
                ("net.ipv4.conf.veth0.arp_announce", "2"),
            ] {
                host::netns::set_sysctl(&b.netns, k, v)?;
            }
            live.macs.push(lab::inject::mac_address(&b.netns, &b.dev)?);
            live.configs.push(config);
        }
        let lb_mac = lab::inject::mac_address(&live.lb.netns, &live.lb.dev)?;
        live.dp.configure(live.vip, &live.configs[0], lb_mac)?;
        host::link::set_tx_checksum(Some(&lb_port.0), &lb_port.1, false)?;
        live.dp
            .attach(&live.lb.dev, &live.lb.netns, Some((&lb_port.0, &lb_port.1)))?;
        for c in &live.clients {
            host::link::add_route(&c.netns, live.vip.into(), 32, live.lb.ipv4.into())?;
        }
        // Last: each agent serves its backend's attached software RSS.
        live.agents = Some(BackendAgents::start(&live.backends)?);
        Ok(live)
    }

    /// (switch namespace, port) of a lab host (`"lb"`, `"b0"`, `"c0"`, ...):
    /// the veth peer of its device, as [`lab::Lab::switch_port`] names it.
    pub fn switch_port(&self, host: &str) -> Option<(String, String)> {
        self.guard.as_ref()?.switch_port(host)
    }

    fn backend_agents(&self) -> Result<&BackendAgents, LbXdpError> {
        self.agents
            .as_ref()
            .ok_or_else(|| LbXdpError::config("the lab's agents are not running"))
    }

    /// The controller's clients of the backends' agents (server id =
    /// index), asking from the load balancer's namespace.
    pub fn reporters(&self) -> Result<Reporters, LbXdpError> {
        Ok(Reporters {
            netns: self.lb.netns.clone(),
            links: self.backend_agents()?.links()?,
        })
    }

    /// Stops backend `i`'s agent: the backend keeps serving connections but
    /// reports nothing (it goes stale).
    pub fn stop_agent(&self, i: usize) -> Result<(), LbXdpError> {
        self.backend_agents()?.stop_agent(i);
        Ok(())
    }

    /// Starts backend `i`'s agent again (same address, port and token).
    pub fn start_agent(&self, i: usize) -> Result<(), LbXdpError> {
        self.backend_agents()?.start_agent(i)
    }

    /// Removes backend `i` from the world: its namespace is deleted (its
    /// connections die with it; nobody else's do).
    pub fn kill_backend(&self, i: usize) -> Result<(), LbXdpError> {
        // Its agent goes with it; requests to its address now go nowhere
        // (they time out, unlike a stopped agent's, which are refused).
        self.stop_agent(i)?;
        let b = &self.backends[i];
        let _ = nic::detach(&b.dev, Some(&b.netns));
        // Sockets keep a deleted namespace alive; without its device it is
        // cut off all the same.
        host::link::delete(&b.netns, &b.dev)?;
        host::netns::delete(&b.netns)?;
        Ok(())
    }
}

impl Drop for LiveLab {
    fn drop(&mut self) {
        // The agents read the software RSS and hold sockets in the
        // backends' namespaces: they go first.
        self.agents.take();
        for b in &self.backends {
            match nic::detach(&b.dev, Some(&b.netns)) {
                Ok(())
                | Err(nic::NicError::NotAttached { .. })
                | Err(nic::NicError::NoSuchDevice { .. })
                | Err(nic::NicError::NoSuchNetns { .. }) => {}
                Err(e) => eprintln!("detach software RSS of {}: {e}", b.netns),
            }
        }
        maps::detach(&self.lb.dev, &self.lb.netns);
        // `guard` drops next and deletes the namespaces.
        self.guard.take();
    }
}
