//! Errors of `pktio`.

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PktIoError {
    #[error("no network namespace '{0}' (no /run/netns/{0})")]
    NoSuchNetns(String),
    #[error("no device '{dev}'{}", netns.as_deref().map(|n| format!(" in network namespace '{n}'")).unwrap_or_default())]
    NoSuchDevice { dev: String, netns: Option<String> },
    #[error("raw packet sockets need CAP_NET_RAW (run as root)")]
    Privilege,
    #[error("bad port config: {0}")]
    Config(String),
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: std::io::Error,
    },
}

impl PktIoError {
    /// True for missing privilege or a missing namespace, device or kernel
    /// feature (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        !matches!(self, PktIoError::Config(_))
    }

    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Self {
        if source.raw_os_error() == Some(libc::EPERM) {
            return PktIoError::Privilege;
        }
        PktIoError::Io {
            op: op.into(),
            source,
        }
    }
}
