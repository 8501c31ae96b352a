//! The port allocator as `steer ports serve` runs it: srap's server with
//! receiver configs from files (`--config FILE --for ADDR`) and, for any
//! other receiver, from that receiver's agent (`--agent URL`, this crate's
//! client), cached for a while (docs/srap.md, "The allocator").

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rss::RssConfig;
use serde::Serialize;
use srap::alloc::{AllocError, Server, ServerOptions};
use srap::SocketArgs;
use thiserror::Error;

use crate::client::{AgentClient, ClientError};

/// What the allocator serves and where its configs come from.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AllocatorArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub socket: SocketArgs,
    /// RssConfig JSON of a receiver; pair each with a --for.
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Vec<PathBuf>,
    /// The receiver address the matching --config is for.
    #[cfg_attr(feature = "clap", arg(long = "for", value_name = "ADDR"))]
    pub for_addr: Vec<IpAddr>,
    /// Milliseconds a lease lives without a matching socket.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = AllocatorArgs::default().grace_ms))]
    pub grace_ms: u64,
    /// Fetch the config of any receiver without a --config from its agent
    /// (the same agent for every receiver: e.g. a lab, or one host), cached
    /// for --config-ttl-ms and fetched again when older.
    #[cfg_attr(feature = "clap", arg(long, value_name = "URL"))]
    pub agent: Option<String>,
    /// Token for --agent.
    #[cfg_attr(feature = "clap", arg(long, requires = "agent"))]
    pub token: Option<String>,
    /// How long a config fetched from the agent is used.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = AllocatorArgs::default().config_ttl_ms)
    )]
    pub config_ttl_ms: u64,
}

impl Default for AllocatorArgs {
    /// The default socket, no receivers, srap's 2 s lease grace, configs
    /// from an agent used for 10 s.
    fn default() -> Self {
        AllocatorArgs {
            socket: SocketArgs::default(),
            config: Vec::new(),
            for_addr: Vec::new(),
            grace_ms: 2000,
            agent: None,
            token: None,
            config_ttl_ms: 10_000,
        }
    }
}

/// Why the allocator did not start.
#[derive(Debug, Error)]
pub enum AllocatorError {
    #[error("invalid option: {0}")]
    InvalidOption(String),
    #[error("--config {}", path.display())]
    Config {
        path: PathBuf,
        #[source]
        source: rss::RssError,
    },
    #[error("--agent")]
    Agent(#[source] ClientError),
    #[error(transparent)]
    Server(#[from] AllocError),
}

impl AllocatorError {
    pub fn is_environment(&self) -> bool {
        match self {
            AllocatorError::Config { source, .. } => source.is_environment(),
            AllocatorError::Agent(e) => e.is_environment(),
            AllocatorError::Server(e) => e.is_environment(),
            AllocatorError::InvalidOption(_) => false,
        }
    }

    /// Unpaired or refused --config/--for, a config file that is missing or
    /// does not parse, an agent URL that is not one.
    pub fn is_bad_input(&self) -> bool {
        match self {
            AllocatorError::InvalidOption(_) => true,
            AllocatorError::Config { source, .. } => source.is_bad_input(),
            AllocatorError::Agent(e) => e.is_bad_input(),
            AllocatorError::Server(e) => e.is_bad_input(),
        }
    }
}

/// What a started allocator says: its socket, the receivers it has a
/// config file for, and the agent it asks for the others.
#[derive(Debug, Clone, Serialize)]
pub struct Serving {
    pub socket: PathBuf,
    pub receivers: Vec<IpAddr>,
    pub agent: Option<String>,
}

impl AllocatorArgs {
    /// Binds the allocator's socket and gives it each --config for its
    /// --for address; [`Server::run`] then serves.
    pub fn bind(&self) -> Result<(Server, Serving), AllocatorError> {
        let configs = self.configs()?;
        let server = Server::bind(self.options()?)?;
        for (addr, config) in &configs {
            server
                .allocator()
                .set_config(*addr, config.clone())
                .map_err(|r| {
                    AllocatorError::InvalidOption(format!("--config for {addr}: {}", r.message))
                })?;
        }
        let serving = Serving {
            socket: server.path().to_path_buf(),
            receivers: configs.iter().map(|(addr, _)| *addr).collect(),
            agent: self.agent.clone(),
        };
        Ok((server, serving))
    }

    /// Each --config read, paired with its --for.
    fn configs(&self) -> Result<Vec<(IpAddr, RssConfig)>, AllocatorError> {
        if self.config.len() != self.for_addr.len() {
            return Err(AllocatorError::InvalidOption(format!(
                "give one --for ADDR per --config FILE ({} configs, {} addresses)",
                self.config.len(),
                self.for_addr.len()
            )));
        }
        let read = |path: &PathBuf| {
            RssConfig::from_file(path).map_err(|source| AllocatorError::Config {
                path: path.clone(),
                source,
            })
        };
        let addrs = self.for_addr.iter().copied();
        addrs
            .zip(&self.config)
            .map(|(a, p)| Ok((a, read(p)?)))
            .collect()
    }

    fn options(&self) -> Result<ServerOptions, AllocatorError> {
        let mut options = ServerOptions::new(self.socket.path());
        options.grace = Duration::from_millis(self.grace_ms);
        if let Some(url) = &self.agent {
            let timeout = AgentClient::DEFAULT_TIMEOUT;
            let client = AgentClient::new(url, self.token.as_deref(), timeout)
                .map_err(AllocatorError::Agent)?;
            options.config_source = Some(Arc::new(client));
            options.config_ttl = Duration::from_millis(self.config_ttl_ms);
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::TempDir;

    #[test]
    fn an_unpaired_config_is_bad_input_before_anything_binds() {
        let dir = TempDir::new("allocator");
        let args = AllocatorArgs {
            socket: SocketArgs {
                socket: Some(dir.join("unpaired.sock")),
            },
            config: vec!["rcv.json".into()],
            ..AllocatorArgs::default()
        };
        let Err(err) = args.bind() else {
            panic!("bound")
        };
        assert!(err.is_bad_input(), "{err}");
        assert!(err.to_string().contains("1 configs, 0 addresses"), "{err}");
        assert!(!dir.join("unpaired.sock").exists());
    }

    #[test]
    fn a_missing_config_file_names_its_flag_and_is_bad_input() {
        let args = AllocatorArgs {
            config: vec!["/nonexistent/rcv.json".into()],
            for_addr: vec!["10.0.0.2".parse().unwrap()],
            ..AllocatorArgs::default()
        };
        let Err(err) = args.bind() else {
            panic!("bound")
        };
        assert!(err.is_bad_input(), "{err}");
        assert_eq!(err.to_string(), "--config /nonexistent/rcv.json");
    }

    #[test]
    fn a_bound_allocator_lists_its_receivers_and_has_their_configs() {
        let dir = TempDir::new("allocator");
        let path = dir.join("rcv.json");
        let config = rss::StatedArgs {
            key: Some("microsoft".into()),
            queues: 4,
            ..rss::StatedArgs::default()
        }
        .config("microsoft")
        .unwrap();
        std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
        let addr: IpAddr = "10.0.0.2".parse().unwrap();
        let args = AllocatorArgs {
            socket: SocketArgs {
                socket: Some(dir.join("bound.sock")),
            },
            config: vec![path],
            for_addr: vec![addr],
            ..AllocatorArgs::default()
        };
        let (server, serving) = args.bind().unwrap();
        assert_eq!(serving.receivers, vec![addr]);
        assert_eq!(serving.socket, dir.join("bound.sock"));
        assert_eq!(serving.agent, None);
        assert!(server.allocator().status().remotes.contains(&addr));
    }
}
