//! The one error type of the crate.

use std::io;
use std::process::ExitStatus;

use thiserror::Error;

/// Messages of an error and its causes, outermost first, on one line:
/// `a: b: c`. A cause whose text the line already holds is not repeated:
/// many errors show their cause in their own message (`"{op}: {source}"`)
/// and also keep it as their source, so the chain would say it twice.
/// Line breaks inside a message become spaces.
pub fn error_line(messages: impl IntoIterator<Item = String>) -> String {
    let mut line = String::new();
    for text in messages {
        let text = text.replace('\n', " ");
        if line.is_empty() {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let line = |m: &[&str]| error_line(m.iter().map(|s| s.to_string()));
        assert_eq!(line(&["a", "b", "c"]), "a: b: c");
        assert_eq!(
            line(&["connect /x: no such file", "no such file"]),
            "connect /x: no such file"
        );
        assert_eq!(
            line(&["ip: program not found (gone)", "gone"]),
            "ip: program not found (gone)"
        );
        assert_eq!(line(&["two\nlines", "cause"]), "two lines: cause");
        assert_eq!(line(&[]), "");
    }
}
