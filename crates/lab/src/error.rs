//! Errors of the lab.

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LabError {
    #[error("invalid lab spec: {0}")]
    InvalidSpec(String),
    #[error("no lab named '{name}' (no state file {path})")]
    NoSuchLab { name: String, path: String },
    #[error("lab '{lab}' has no host '{host}'")]
    NoSuchHost { lab: String, host: String },
    #[error("network namespace '{netns}' exists but this lab did not create it; not touching it")]
    NamespaceExists { netns: String },
    #[error("'{command}' failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("lab setup needs root (network namespaces, veths, XDP)")]
    Privilege,
    #[error("software RSS: {0}")]
    Nic(#[from] nic::NicError),
    #[error("packet I/O: {0}")]
    PktIo(#[from] pktio::PktIoError),
    #[error("RSS config: {0}")]
    Rss(#[from] rss::RssError),
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: std::io::Error,
    },
    #[error("lab state file {path}: {reason}")]
    State { path: String, reason: String },
}

impl LabError {
    /// True for missing privilege, tools (a program that is not installed)
    /// or kernel features (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        match self {
            LabError::Privilege => true,
            LabError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::Unsupported
            ),
            LabError::Nic(e) => e.is_environment(),
            LabError::PktIo(e) => e.is_environment(),
            _ => false,
        }
    }

    /// True for bad input (exit 2): an invalid spec or config, a lab or
    /// host that does not exist, a name taken by a namespace the lab did
    /// not create. Neither this nor [`is_environment`](Self::is_environment):
    /// the operation failed (a command such as `ip` failed, a broken state
    /// file; exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            LabError::InvalidSpec(_)
            | LabError::NoSuchLab { .. }
            | LabError::NoSuchHost { .. }
            | LabError::NamespaceExists { .. }
            | LabError::Rss(_) => true,
            LabError::Nic(e) => e.is_bad_input(),
            LabError::PktIo(e) => e.is_bad_input(),
            _ => false,
        }
    }

    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            op: op.into(),
            source,
        }
    }
}

/// The host's errors as the lab's, classified as before: a failed or
/// missing tool is [`LabError::Command`] (its stderr in the message), not
/// being root [`LabError::Privilege`], a failed system call
/// [`LabError::Io`], a namespace that names nothing the software RSS's
/// (as [`LabError::Nic`]).
impl From<host::HostError> for LabError {
    fn from(e: host::HostError) -> Self {
        match e {
            host::HostError::Failed {
                command, stderr, ..
            } => LabError::Command { command, stderr },
            host::HostError::NoProgram { command, source } => LabError::Command {
                command,
                stderr: format!("program not found ({source})"),
            },
            host::HostError::Privilege { .. } => LabError::Privilege,
            host::HostError::Io { what, source } => LabError::Io { op: what, source },
            other => LabError::Nic(other.into()),
        }
    }
}
