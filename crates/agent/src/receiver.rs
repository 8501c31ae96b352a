//! What a sender knows of a receiver before it plans source ports: the
//! receiver's RSS config and, when its agent tells, its per-CPU load and the
//! source address it sees from us. One [`Receiver`] whichever way it was
//! learned: from the receiver's agent, from a config file, or from stated
//! assumptions (a key and a queue count). SRAP's "RSS information exchange"
//! (papers/srap-source-port-selection.txt, section 3 (1)); docs/srap.md.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use rss::{L4Proto, RssConfig, RssError, StatedConfig};
use srap::{Plan, PortRange, SrapError};
use thiserror::Error;

use crate::client::{AgentClient, ClientError};

/// Where a receiver's config comes from.
#[derive(Debug, Clone)]
pub enum ReceiverSource {
    /// The receiver's agent at `url` (with `token` for a non-loopback one):
    /// its live config for the destination address, its per-CPU load, and
    /// a check that source ports reach it unchanged.
    Agent { url: String, token: Option<String> },
    /// A file holding the receiver's `RssConfig` JSON.
    File(PathBuf),
    /// Stated assumptions (key, queues, table), built as the receiver's
    /// driver would fill its table.
    Stated(StatedConfig),
}

/// What a sender knows about a receiver before planning.
#[derive(Debug, Clone)]
pub struct Receiver {
    pub config: RssConfig,
    /// Per-CPU load (the agent's softirq share), for least-loaded first.
    pub loads: BTreeMap<u32, f64>,
    /// The source address the receiver saw from us (the agent's
    /// `/v1/whoami`): behind NAT this, not our own address, is what the
    /// receiver's NIC hashes.
    pub seen_from: Option<IpAddr>,
    /// Where the config came from, for the table.
    pub origin: String,
}

/// Why a receiver or a source address could not be had.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReceiverError {
    #[error("cannot get the receiver's RSS config from its agent")]
    Agent(#[source] ClientError),
    #[error(transparent)]
    Config(#[from] RssError),
    /// The stated key (`--key`) is not one.
    #[error("--key")]
    Key(#[source] RssError),
    /// A key was stated without the receiver's queue count.
    #[error("--key needs --queues N (the receiver's receive queue count)")]
    QueuesNeeded,
    #[error(transparent)]
    Host(#[from] host::HostError),
    /// A plan for no flow was asked for.
    #[error("--flows must be at least 1")]
    NoFlows,
    /// The planner refused (a range too small, a config it cannot steer).
    #[error(transparent)]
    Plan(#[from] SrapError),
    /// The kernel has no route towards the receiver, so it cannot say which
    /// of our addresses the flows would leave from.
    #[error("no route to {to}: cannot tell which local address the flows would leave from (name the source address)")]
    NoRoute {
        to: SocketAddr,
        #[source]
        source: io::Error,
    },
}

impl ReceiverError {
    /// True for missing privilege or a missing kernel feature (exit 3).
    pub fn is_environment(&self) -> bool {
        match self {
            ReceiverError::Agent(e) => e.is_environment(),
            ReceiverError::Config(e) | ReceiverError::Key(e) => e.is_environment(),
            ReceiverError::QueuesNeeded | ReceiverError::NoFlows => false,
            ReceiverError::Host(e) => e.is_environment(),
            ReceiverError::Plan(e) => e.is_environment(),
            ReceiverError::NoRoute { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::Unsupported
            ),
        }
    }

    /// True for bad input (exit 2): an agent URL, config file or stated
    /// config that is wrong, or a destination the route lookup refuses.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ReceiverError::Agent(e) => e.is_bad_input(),
            ReceiverError::Config(e) | ReceiverError::Key(e) => e.is_bad_input(),
            ReceiverError::QueuesNeeded | ReceiverError::NoFlows => true,
            ReceiverError::Host(e) => e.is_bad_input(),
            ReceiverError::Plan(e) => e.is_bad_input(),
            ReceiverError::NoRoute { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::NotFound
                    | io::ErrorKind::InvalidInput
                    | io::ErrorKind::InvalidData
                    | io::ErrorKind::IsADirectory
                    | io::ErrorKind::NotADirectory
            ),
        }
    }
}

impl Receiver {
    /// The receiver of flows to `to`, from `source`: the one way every
    /// front end learns it.
    pub fn resolve(source: &ReceiverSource, to: SocketAddr) -> Result<Receiver, ReceiverError> {
        match source {
            ReceiverSource::Agent { url, token } => {
                Receiver::from_agent(url, token.as_deref(), to).map_err(ReceiverError::Agent)
            }
            ReceiverSource::File(path) => Ok(Receiver::from_file(path)?),
            ReceiverSource::Stated(stated) => Ok(Receiver::stated(stated)?),
        }
    }

    /// The receiver's config from its agent at `url`, for destination
    /// `to`: first the path check (source ports must arrive unchanged, or
    /// no choice of port can steer), then `/v1/rss` for the destination
    /// address and `/v1/load`.
    pub fn from_agent(
        url: &str,
        token: Option<&str>,
        to: SocketAddr,
    ) -> Result<Receiver, ClientError> {
        let client = AgentClient::new(url, token, AgentClient::DEFAULT_TIMEOUT)?;
        let path = client.require_steerable_path(0)?;
        let rss = client.rss(to.ip())?;
        let load = client.load()?;
        Ok(Receiver {
            config: rss.config,
            // A CPU whose load the agent could not measure yet is left out:
            // the planner treats it as it treats an unreported CPU.
            loads: load
                .cpus
                .iter()
                .filter_map(|c| Some((c.cpu, c.softirq_busy?)))
                .collect(),
            seen_from: path.nat.then_some(path.seen_addr),
            origin: format!(
                "agent {} ({}, config version {})",
                client.url(),
                rss.origin.name(),
                rss.config_version
            ),
        })
    }

    /// The receiver's config from a file (`RssConfig` JSON, e.g. from
    /// `steer rss show --json` on the receiver); no load, no NAT known.
    pub fn from_file(path: &std::path::Path) -> Result<Receiver, RssError> {
        Ok(Receiver {
            config: RssConfig::from_file(path)?,
            loads: BTreeMap::new(),
            seen_from: None,
            origin: format!("file {}", path.display()),
        })
    }

    /// The receiver as stated: the config `stated` builds; no load, no NAT
    /// known.
    pub fn stated(stated: &StatedConfig) -> Result<Receiver, RssError> {
        Ok(Receiver {
            config: stated.build()?,
            loads: BTreeMap::new(),
            seen_from: None,
            origin: "stated assumptions".to_string(),
        })
    }

    /// Plans `flows` source ports from `from` to `to` for this receiver
    /// (least-loaded CPUs first), honouring this host's
    /// ip_local_port_range, reserved ports and ports in use, or
    /// `port_range` instead of the host's range. Returns the plan and the
    /// range it chose from.
    pub fn plan(
        &self,
        from: IpAddr,
        to: SocketAddr,
        proto: L4Proto,
        flows: usize,
        port_range: Option<PortRange>,
        seed: Option<u64>,
    ) -> Result<(Plan, PortRange), SrapError> {
        srap::plan_on_this_host(&self.config, &self.loads, from, to, proto, flows, |o| {
            if let Some(range) = port_range {
                o.range = range;
            }
            o.seed = seed;
        })
    }
}

/// Where the source address to predict with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceOrigin {
    /// Given by the user.
    Given,
    /// What the receiver's agent saw from us (NAT).
    SeenByAgent,
    /// The kernel's route towards the receiver.
    Route,
}

impl SourceOrigin {
    /// "given", "seen by the agent" or "route" (the JSON and table word).
    pub fn name(self) -> &'static str {
        match self {
            SourceOrigin::Given => "given",
            SourceOrigin::SeenByAgent => "seen by the agent",
            SourceOrigin::Route => "route",
        }
    }
}

/// The source address to predict with, and where it came from: `from`
/// when given, else what the receiver's agent saw (`seen_from`, NAT), else
/// the address the kernel routes towards `to` from (looked up in network
/// namespace `netns` when given).
pub fn source_address(
    from: Option<IpAddr>,
    seen_from: Option<IpAddr>,
    to: SocketAddr,
    netns: Option<&str>,
) -> Result<(IpAddr, SourceOrigin), ReceiverError> {
    if let Some(a) = from {
        return Ok((a, SourceOrigin::Given));
    }
    if let Some(a) = seen_from {
        return Ok((a, SourceOrigin::SeenByAgent));
    }
    let routed = host::netns::run_in(netns, move || srap::alloc::source_address_for(to))?;
    let addr = routed.map_err(|source| ReceiverError::NoRoute { to, source })?;
    Ok((addr, SourceOrigin::Route))
}

/// The allocator's config source for `steer ports serve --agent`: the
/// agent's config for the remote address.
impl srap::alloc::ConfigSource for AgentClient {
    fn fetch(&self, remote: IpAddr) -> Result<RssConfig, String> {
        self.rss(remote)
            .map(|r| r.config)
            .map_err(|e| crate::error::chain(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rss::RssKey;

    fn stated(queues: u32) -> StatedConfig {
        StatedConfig::new(RssKey::microsoft(), queues, 128)
    }

    #[test]
    fn stated_receiver_builds_the_config_and_knows_no_load() {
        let r = Receiver::resolve(
            &ReceiverSource::Stated(stated(4)),
            "10.0.0.2:5201".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(r.config.queues, 4);
        assert_eq!(r.config.indirection_table.len(), 128);
        assert!(r.loads.is_empty());
        assert_eq!(r.seen_from, None);
        assert_eq!(r.origin, "stated assumptions");
    }

    #[test]
    fn a_file_receiver_names_its_file() {
        let dir = testkit::TempDir::new("agent-receiver");
        let path = dir.join("rcv.json");
        let config = stated(2).build().unwrap();
        std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
        let r = Receiver::resolve(
            &ReceiverSource::File(path.clone()),
            "10.0.0.2:5201".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(r.config, config);
        assert_eq!(r.origin, format!("file {}", path.display()));
    }

    #[test]
    fn a_missing_file_is_bad_input() {
        let err = Receiver::resolve(
            &ReceiverSource::File("/nonexistent/rcv.json".into()),
            "10.0.0.2:5201".parse().unwrap(),
        )
        .unwrap_err();
        assert!(err.is_bad_input(), "{err}");
        assert!(!err.is_environment());
    }

    #[test]
    fn a_wrong_stated_config_is_bad_input() {
        let bad = StatedConfig {
            weights: vec![1, 2, 3],
            ..stated(4)
        };
        let err = Receiver::resolve(
            &ReceiverSource::Stated(bad),
            "10.0.0.2:5201".parse().unwrap(),
        )
        .unwrap_err();
        assert!(matches!(err, ReceiverError::Config(_)));
        assert!(err.is_bad_input(), "{err}");
    }

    #[test]
    fn an_unreachable_agent_fails_with_the_agent_named() {
        let refusing = testkit::RefusingPort::new();
        let err = Receiver::resolve(
            &ReceiverSource::Agent {
                url: format!("http://{}", refusing.addr()),
                token: None,
            },
            "127.0.0.1:5201".parse().unwrap(),
        )
        .unwrap_err();
        assert!(matches!(err, ReceiverError::Agent(_)));
        assert_eq!(
            err.to_string(),
            "cannot get the receiver's RSS config from its agent"
        );
        assert!(!err.is_bad_input() && !err.is_environment());
        let err = Receiver::resolve(
            &ReceiverSource::Agent {
                url: "ftp://x".into(),
                token: None,
            },
            "127.0.0.1:5201".parse().unwrap(),
        )
        .unwrap_err();
        assert!(err.is_bad_input(), "{err}");
    }

    #[test]
    fn the_source_address_is_given_else_seen_else_routed() {
        let to: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let given: IpAddr = "10.1.1.1".parse().unwrap();
        let seen: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(
            source_address(Some(given), Some(seen), to, None).unwrap(),
            (given, SourceOrigin::Given)
        );
        assert_eq!(
            source_address(None, Some(seen), to, None).unwrap(),
            (seen, SourceOrigin::SeenByAgent)
        );
        let (addr, origin) = source_address(None, None, to, None).unwrap();
        assert_eq!(origin, SourceOrigin::Route);
        assert!(addr.is_loopback(), "{addr}");
        assert_eq!(origin.name(), "route");
    }

    #[test]
    fn a_route_refused_is_classified_by_its_io_kind() {
        let no_route = |kind| ReceiverError::NoRoute {
            to: "10.0.0.2:5201".parse().unwrap(),
            source: io::Error::from(kind),
        };
        assert!(!no_route(io::ErrorKind::NetworkUnreachable).is_bad_input());
        assert!(!no_route(io::ErrorKind::NetworkUnreachable).is_environment());
        assert!(no_route(io::ErrorKind::PermissionDenied).is_environment());
        assert!(no_route(io::ErrorKind::InvalidInput).is_bad_input());
    }

    #[test]
    fn a_plan_uses_the_receivers_loads_and_the_range_given() {
        let mut r = Receiver::stated(&stated(4)).unwrap();
        // CPU 2 idle, the others busy: one flow goes to CPU 2.
        r.loads = [(0, 0.9), (1, 0.8), (2, 0.0), (3, 0.7)].into();
        let range: PortRange = "40000-40999".parse().unwrap();
        let (plan, used) = r
            .plan(
                "10.0.0.1".parse().unwrap(),
                "10.0.0.2:5201".parse().unwrap(),
                L4Proto::Tcp,
                1,
                Some(range),
                Some(7),
            )
            .unwrap();
        assert_eq!(used, range);
        assert_eq!(plan.entries.len(), 1);
        assert_eq!(plan.entries[0].cpu, 2);
        assert!((40000..=40999).contains(&plan.entries[0].port));
    }
}
