//! The one error type of the crate.

use std::io;
use std::process::ExitStatus;

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HostError {
    /// The name is not a namespace under `/run/netns` (bad input).
    #[error("no network namespace named '{name}' (looked for /run/netns/{name})")]
    NoSuchNetns { name: String },
    /// The process is not root (environment).
    #[error("{what}: needs root")]
    Privilege { what: String },
    /// The program is not installed (environment).
    #[error("{command}: program not found ({source})")]
    NoProgram {
        command: String,
        #[source]
        source: io::Error,
    },
    /// The program ran and failed; `stderr` is what it said.
    #[error("'{command}' failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: ExitStatus,
        stderr: String,
    },
    /// A system call failed: opening or entering a namespace, spawning a
    /// thread or a program. Permission denied and unsupported are about the
    /// environment.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

impl HostError {
    /// Missing privilege, kernel feature or program (the CLI exits 3).
    pub fn is_environment(&self) -> bool {
        match self {
            HostError::Privilege { .. } | HostError::NoProgram { .. } => true,
            HostError::Io { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::Unsupported
            ),
            _ => false,
        }
    }

    /// A namespace name that names nothing (exit 2). Neither this nor
    /// [`is_environment`](Self::is_environment): the operation failed.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, HostError::NoSuchNetns { .. })
    }

    /// This error as an `io::Error` of the kind of the failure beneath it
    /// (permission denied for privilege, not found for a namespace or
    /// program that is not there, the system call's own kind), for callers
    /// that keep it in an I/O variant of their own errors.
    pub fn into_io(self) -> io::Error {
        let kind = match &self {
            HostError::NoSuchNetns { .. } => io::ErrorKind::NotFound,
            HostError::Privilege { .. } => io::ErrorKind::PermissionDenied,
            HostError::NoProgram { source, .. } | HostError::Io { source, .. } => source.kind(),
            HostError::Failed { .. } => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }

    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        HostError::Io {
            what: what.into(),
            source,
        }
    }
}
