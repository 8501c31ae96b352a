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
    /// True for missing privilege, tools or kernel features (CLI exit 3);
    /// false for bad input (exit 2).
    pub fn is_environment(&self) -> bool {
        match self {
            LabError::Privilege
            | LabError::Command { .. }
            | LabError::Io { .. }
            | LabError::State { .. }
            | LabError::NamespaceExists { .. } => true,
            LabError::Nic(e) => e.is_environment(),
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
