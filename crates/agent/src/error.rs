//! [`AgentError`]: why the agent could not start.

use std::net::SocketAddr;
use std::path::PathBuf;

use thiserror::Error;

/// Why a device's config could not be read.
#[derive(Debug, Error)]
pub enum DeviceError {
    #[error(transparent)]
    Nic(#[from] nic::NicError),
    #[error(transparent)]
    Live(#[from] rss::live::LiveError),
}

impl DeviceError {
    /// Missing privilege or kernel feature (the CLI exits 3).
    pub fn is_environment(&self) -> bool {
        match self {
            DeviceError::Nic(e) => e.is_environment(),
            DeviceError::Live(e) => e.is_environment(),
        }
    }
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

    #[error("device {dev}: {source}")]
    Device {
        dev: String,
        #[source]
        source: DeviceError,
    },

    #[error("no network namespace named '{netns}' (see `ip netns list`)")]
    NoSuchNetns { netns: String },

    #[error("invalid option: {0}")]
    InvalidOption(String),

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
}
