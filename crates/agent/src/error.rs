//! [`AgentError`]: why the agent could not start.

use std::net::SocketAddr;
use std::path::PathBuf;

use thiserror::Error;

/// An error and its causes on one line, `a: b: c`, each said once
/// ([`host::error_line`]).
pub fn chain(err: &dyn std::error::Error) -> String {
    let causes = std::iter::successors(Some(err), |e| e.source());
    host::error_line(causes.map(|e| e.to_string()))
}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AgentError {
    /// Serving a non-loopback address without a token.
    #[error(
        "refusing to listen on {addr} without a token: any address other than loopback \
         needs --token-file FILE (or --token TOKEN); every request must then carry \
         'Authorization: Bearer TOKEN'"
    )]
    TokenRequired { addr: SocketAddr },

    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },

    #[error("config file {}: {reason}", path.display())]
    ConfigFile { path: PathBuf, reason: String },

    /// Display is only the device; the cause is the source (see [`chain`]).
    #[error("device {dev}")]
    Device {
        dev: String,
        #[source]
        source: nic::NicError,
    },

    #[error("no network namespace named '{netns}' (see `ip netns list`)")]
    NoSuchNetns { netns: String },

    #[error("invalid option: {0}")]
    InvalidOption(String),

    /// The --token (or the token file) given cannot be sent in a header.
    #[error("--token")]
    Token(#[from] crate::token::TokenError),

    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl AgentError {
    /// Missing privilege or kernel feature (the CLI exits 3); everything
    /// else is bad input (exit 2).
    pub fn is_environment(&self) -> bool {
        match self {
            AgentError::Device { source, .. } => source.is_environment(),
            AgentError::Listen { source, .. } | AgentError::Io { source, .. } => {
                source.kind() == std::io::ErrorKind::PermissionDenied
            }
            _ => false,
        }
    }

    /// Bad input (exit 2): a missing token, a bad config file, option or
    /// device, a namespace that does not exist. Neither this nor
    /// [`is_environment`](Self::is_environment): the agent could not start
    /// (the address is taken, an I/O failure; exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            AgentError::TokenRequired { .. }
            | AgentError::ConfigFile { .. }
            | AgentError::NoSuchNetns { .. }
            | AgentError::InvalidOption(_)
            | AgentError::Token(_) => true,
            AgentError::Device { source, .. } => source.is_bad_input(),
            _ => false,
        }
    }
}

/// The host's namespace errors as the agent's: a namespace that names
/// nothing is [`AgentError::NoSuchNetns`] (bad input), a failed system call
/// [`AgentError::Io`] (a refusal classifies as privilege).
impl From<host::HostError> for AgentError {
    fn from(e: host::HostError) -> Self {
        match e {
            host::HostError::NoSuchNetns { name } => AgentError::NoSuchNetns { netns: name },
            host::HostError::Io { what, source } => AgentError::Io { what, source },
            other => AgentError::Io {
                what: "run a tool".into(),
                source: other.into_io(),
            },
        }
    }
}
