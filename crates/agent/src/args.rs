//! Options as a command line gives them: the agent's (`steer agent`) and a
//! sender's view of its receiver (`steer ports plan`, `steer exec --bpf`,
//! `steer attach`). Flags, defaults and help are written once here (doc
//! comments are the help; feature `clap` derives `clap::Args`), and become
//! [`ServerOptions`] or a [`ReceiverSource`] in one step.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use rss::{RssKey, TableArgs};

use crate::error::AgentError;
use crate::receiver::{Receiver, ReceiverError, ReceiverSource};
use crate::served::{FileSource, Sources};
use crate::server::{ServerOptions, DEFAULT_PORT};
use crate::token::Token;

/// What `steer agent` serves, where, and how often it samples.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ServeArgs {
    /// Address and port to listen on. Anything but loopback needs a token.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ServeArgs::default().listen))]
    pub listen: SocketAddr,
    /// Shared token; every request must send `Authorization: Bearer TOKEN`.
    /// Prefer --token-file: a command line is visible to every local user.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "token_file"))]
    pub token: Option<String>,
    /// File holding the shared token (surrounding whitespace ignored).
    #[cfg_attr(feature = "clap", arg(long))]
    pub token_file: Option<PathBuf>,
    /// Serve these devices (each must have a readable config at start).
    /// Default: every device of the namespace, unless --config is given.
    #[cfg_attr(feature = "clap", arg(long, num_args = 1..))]
    pub dev: Vec<String>,
    /// Network namespace (a name under /run/netns) to serve: the listener,
    /// the devices and their software RSS state are taken from it.
    /// Default: the namespace the agent runs in. Prefer this to `ip netns
    /// exec`, whose fresh /sys hides the pinned software RSS.
    #[cfg_attr(feature = "clap", arg(long))]
    pub netns: Option<String>,
    /// An RssConfig JSON file for a host whose NIC cannot be read; pair each
    /// with --for. Re-read every poll: rewrite it atomically (write + rename).
    #[cfg_attr(feature = "clap", arg(long, requires = "for_addr"))]
    pub config: Vec<PathBuf>,
    /// The local address the matching --config applies to.
    #[cfg_attr(
        feature = "clap",
        arg(long = "for", value_name = "ADDR", requires = "config")
    )]
    pub for_addr: Vec<IpAddr>,
    /// How often /proc/softirqs, /proc/stat and queue counters are sampled.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = ServeArgs::default().load_interval_ms, value_name = "MS")
    )]
    pub load_interval_ms: u64,
    /// How often every config is re-read and compared.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = ServeArgs::default().config_interval_ms, value_name = "MS")
    )]
    pub config_interval_ms: u64,
}

impl Default for ServeArgs {
    /// Loopback on [`DEFAULT_PORT`], every device, the sampling intervals
    /// [`ServerOptions::new`] uses.
    fn default() -> Self {
        ServeArgs {
            listen: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)),
            token: None,
            token_file: None,
            dev: Vec::new(),
            netns: None,
            config: Vec::new(),
            for_addr: Vec::new(),
            load_interval_ms: 100,
            config_interval_ms: 500,
        }
    }
}

impl ServeArgs {
    /// The server's options: each --config paired with its --for, the
    /// token read from --token or --token-file.
    pub fn options(&self) -> Result<ServerOptions, AgentError> {
        if self.config.len() != self.for_addr.len() {
            return Err(AgentError::InvalidOption(format!(
                "give one --for ADDR per --config FILE ({} --config, {} --for)",
                self.config.len(),
                self.for_addr.len()
            )));
        }
        let files = self
            .config
            .iter()
            .zip(&self.for_addr)
            .map(|(path, addr)| FileSource {
                path: path.clone(),
                addrs: vec![*addr],
            })
            .collect();
        let sources = Sources::new(self.dev.clone(), files, self.netns.clone());
        let mut opts = ServerOptions::new(sources);
        opts.listen = self.listen;
        opts.token = self.token()?;
        opts.load_interval = Duration::from_millis(self.load_interval_ms);
        opts.config_interval = Duration::from_millis(self.config_interval_ms);
        Ok(opts)
    }

    /// True when requests must carry a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some() || self.token_file.is_some()
    }

    fn token(&self) -> Result<Option<Token>, AgentError> {
        let text = match (&self.token, &self.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(path)) => {
                std::fs::read_to_string(path).map_err(|source| AgentError::Io {
                    what: format!("cannot read the token file {}", path.display()),
                    source,
                })?
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(Token::new(&text)?))
    }
}

/// The receiver's config: a file, its agent, or stated assumptions.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ReceiverArgs {
    /// The receiver's RssConfig JSON.
    #[cfg_attr(
        feature = "clap",
        arg(long, conflicts_with_all = ["key", "queues", "weight", "agent"])
    )]
    pub config: Option<PathBuf>,
    /// The receiver's agent (`steer agent` on the receiver), e.g.
    /// http://10.77.1.2:9477: its live config for the destination address,
    /// its per-CPU load (least-loaded CPUs first), and a check that source
    /// ports reach it unchanged (exit 1 when the path rewrites them).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "URL", conflicts_with_all = ["key", "queues", "weight"])
    )]
    pub agent: Option<String>,
    /// Token for an agent that serves a non-loopback address.
    #[cfg_attr(feature = "clap", arg(long, requires = "agent"))]
    pub token: Option<String>,
    /// The receiver's key: `microsoft`, `symmetric`, hex bytes (colons
    /// allowed), or `@FILE` with hex (e.g. a copy of the receiver's
    /// /proc/sys/net/core/netdev_rss_key). `default` (the Linux default,
    /// a random per-boot key) cannot be steered and is refused.
    #[cfg_attr(feature = "clap", arg(long))]
    pub key: Option<String>,
    /// Receive queues (queue q served by CPU q).
    #[cfg_attr(feature = "clap", arg(long))]
    pub queues: Option<u32>,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub table: TableArgs,
}

impl ReceiverArgs {
    /// True when a receiver is named at all (a file, an agent, or a key).
    pub fn is_given(&self) -> bool {
        self.config.is_some() || self.agent.is_some() || self.key.is_some() || self.queues.is_some()
    }

    /// Where the receiver's config comes from: `--agent`, `--config` or
    /// `--key/--queues/...` (a missing key is Linux's `default`, refused).
    pub fn source(&self) -> Result<ReceiverSource, ReceiverError> {
        if let Some(url) = &self.agent {
            return Ok(ReceiverSource::Agent {
                url: url.clone(),
                token: self.token.clone(),
            });
        }
        if let Some(path) = &self.config {
            return Ok(ReceiverSource::File(path.clone()));
        }
        let key = RssKey::from_arg(self.key.as_deref().unwrap_or("default"))
            .map_err(ReceiverError::Key)?;
        let queues = self.queues.ok_or(ReceiverError::QueuesNeeded)?;
        Ok(ReceiverSource::Stated(self.table.stated(key, queues)))
    }

    /// The receiver of flows to `to`, as these flags name it.
    pub fn resolve(&self, to: SocketAddr) -> Result<Receiver, ReceiverError> {
        Receiver::resolve(&self.source()?, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_from_stated_key_and_queues() {
        let args = ReceiverArgs {
            key: Some("microsoft".into()),
            queues: Some(4),
            table: TableArgs {
                weight: vec![1, 1, 2, 2],
                ..TableArgs::default()
            },
            ..ReceiverArgs::default()
        };
        assert!(args.is_given());
        let ReceiverSource::Stated(stated) = args.source().unwrap() else {
            panic!("expected a stated config");
        };
        assert_eq!((stated.queues, stated.table_size), (4, 128));
        assert_eq!(stated.weights, vec![1, 1, 2, 2]);
        assert_eq!(stated.key, RssKey::from_arg("microsoft").unwrap());
    }

    #[test]
    fn receiver_key_without_queues_is_refused() {
        let args = ReceiverArgs {
            key: Some("microsoft".into()),
            ..ReceiverArgs::default()
        };
        let err = args.source().unwrap_err();
        assert!(matches!(err, ReceiverError::QueuesNeeded) && err.is_bad_input());
    }

    #[test]
    fn receiver_default_key_is_refused_as_bad_input() {
        let args = ReceiverArgs {
            queues: Some(4),
            ..ReceiverArgs::default()
        };
        let err = args.source().unwrap_err();
        assert!(
            matches!(err, ReceiverError::Key(_)) && err.is_bad_input(),
            "{err}"
        );
    }

    #[test]
    fn receiver_agent_before_file() {
        let args = ReceiverArgs {
            agent: Some("http://127.0.0.1:9477".into()),
            token: Some("t".into()),
            ..ReceiverArgs::default()
        };
        assert!(matches!(
            args.source().unwrap(),
            ReceiverSource::Agent { token: Some(_), .. }
        ));
        assert!(!ReceiverArgs::default().is_given());
    }

    #[test]
    fn defaults_are_the_servers() {
        let opts = ServeArgs::default().options().unwrap();
        let plain = ServerOptions::new(Sources::new(Vec::new(), Vec::new(), None));
        assert_eq!(opts.listen, plain.listen);
        assert_eq!(opts.load_interval, plain.load_interval);
        assert_eq!(opts.config_interval, plain.config_interval);
        assert!(opts.token.is_none());
    }

    #[test]
    fn unpaired_config_is_refused() {
        let args = ServeArgs {
            config: vec!["a.json".into(), "b.json".into()],
            for_addr: vec!["10.0.0.1".parse().unwrap()],
            ..ServeArgs::default()
        };
        let Err(err) = args.options() else {
            panic!("options accepted");
        };
        assert!(err.is_bad_input());
        assert!(err.to_string().contains("2 --config, 1 --for"), "{err}");
    }

    #[test]
    fn token_file_is_read_and_trimmed() {
        let dir = std::env::temp_dir().join(format!("agent-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "  s3cret-token-value \n").unwrap();
        let args = ServeArgs {
            token_file: Some(path.clone()),
            ..ServeArgs::default()
        };
        let with_file = args.options().unwrap().token.unwrap();
        let given = ServeArgs {
            token: Some("s3cret-token-value".into()),
            ..ServeArgs::default()
        };
        assert_eq!(with_file, given.options().unwrap().token.unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_token_file_is_an_io_error() {
        let args = ServeArgs {
            token_file: Some("/nonexistent/steer-token".into()),
            ..ServeArgs::default()
        };
        let Err(err) = args.options() else {
            panic!("options accepted");
        };
        assert!(matches!(err, AgentError::Io { .. }), "{err}");
    }

    #[test]
    fn bad_token_is_bad_input() {
        let args = ServeArgs {
            token: Some("two\nlines".into()),
            ..ServeArgs::default()
        };
        let Err(err) = args.options() else {
            panic!("options accepted");
        };
        assert!(
            matches!(err, AgentError::Token(_)) && err.is_bad_input(),
            "{err}"
        );
    }
}
