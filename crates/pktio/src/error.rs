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
    /// A counter of the AF_XDP program that could not be read: unknown,
    /// not zero.
    #[error(transparent)]
    MapValue(#[from] host::bpf::MapValueError),
}

impl PktIoError {
    /// True for missing privilege or kernel feature (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        match self {
            PktIoError::Privilege => true,
            PktIoError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::Unsupported
            ),
            _ => false,
        }
    }

    /// True for a namespace or device that does not exist, or a bad port
    /// config (exit 2). Neither this nor
    /// [`is_environment`](Self::is_environment): an I/O operation failed
    /// (exit 1).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            PktIoError::NoSuchNetns(_) | PktIoError::NoSuchDevice { .. } | PktIoError::Config(_)
        )
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

/// The host's namespace errors as this crate's: a namespace that names
/// nothing is [`PktIoError::NoSuchNetns`] (bad input), a refused `setns`
/// [`PktIoError::Privilege`].
impl From<host::HostError> for PktIoError {
    fn from(e: host::HostError) -> Self {
        match e {
            host::HostError::NoSuchNetns { name } => PktIoError::NoSuchNetns(name),
            host::HostError::Io { what, source } => PktIoError::io(what, source),
            other => PktIoError::io("run a tool", other.into_io()),
        }
    }
}
