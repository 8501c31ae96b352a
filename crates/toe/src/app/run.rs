//! Running an unmodified program on the data path (what `steer toe run`
//! does): the service on a thread of its own, the program in a network
//! namespace with the shim preloaded, and the service stopped, its socket
//! removed, when the program ends.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use thiserror::Error;

use super::{shim, Service, DEBUG_ENV};
use crate::endpoint::{Endpoint, ToeError};
use crate::Counters;

/// A program to run on the data path.
#[derive(Debug, Clone)]
pub struct Program<'a> {
    /// The namespace it runs in (the one whose device the endpoint serves).
    pub netns: &'a str,
    /// Where the service listens for the shim.
    pub socket: &'a Path,
    /// The program and its arguments.
    pub command: &'a [String],
    /// The shim logs its decisions to stderr.
    pub debug: bool,
}

/// Where the service of one run listens: in the temporary directory, named
/// after `scope` (e.g. the lab and host) and this process, so runs side by
/// side never share a socket.
pub fn socket_path(scope: &str) -> PathBuf {
    std::env::temp_dir().join(format!("steer-toe-{scope}-{}.sock", std::process::id()))
}

/// Why a program could not be run on the data path.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("no program given")]
    NoProgram,
    #[error("cannot listen at {path}: {source}")]
    Listen {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot install the toe shim: {0}")]
    Shim(#[source] std::io::Error),
    #[error("cannot enter namespace {netns}: {source}")]
    Netns {
        netns: String,
        #[source]
        source: host::HostError,
    },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the data path failed: {0}")]
    Service(#[from] ToeError),
}

impl RunError {
    /// Refused for want of privilege, or the data path's environment
    /// ([`ToeError::is_environment`]).
    pub fn is_environment(&self) -> bool {
        match self {
            RunError::Listen { source, .. }
            | RunError::Shim(source)
            | RunError::Spawn { source, .. } => {
                source.kind() == std::io::ErrorKind::PermissionDenied
            }
            RunError::Netns { source, .. } => source.is_environment(),
            RunError::Service(e) => e.is_environment(),
            RunError::NoProgram => false,
        }
    }

    /// No program, a program that does not exist, a namespace that does
    /// not, or a data path asked for what cannot be.
    pub fn is_bad_input(&self) -> bool {
        match self {
            RunError::NoProgram => true,
            RunError::Spawn { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            RunError::Netns { source, .. } => source.is_bad_input(),
            RunError::Service(e) => e.is_bad_input(),
            RunError::Listen { .. } | RunError::Shim(_) => false,
        }
    }
}

/// Serves `ep` while `program` runs as system(3) would run it (^C goes to
/// the program); returns its exit status and the data path's counters.
pub fn run(ep: Endpoint, program: &Program<'_>) -> Result<(ExitStatus, Counters), RunError> {
    let (name, args) = program.command.split_first().ok_or(RunError::NoProgram)?;
    let service = Service::new(ep, program.socket)
        .map_err(|source| RunError::Listen {
            path: program.socket.display().to_string(),
            source,
        })?
        .spawn();
    let mut cmd = Command::new(name);
    cmd.args(args);
    let prepared = prepare(&mut cmd, program);
    let status = prepared.and_then(|()| {
        host::command::wait_like_system(&mut cmd).map_err(|source| RunError::Spawn {
            program: name.clone(),
            source,
        })
    });
    // The service stops either way: its socket file goes with it.
    let counters = service.stop();
    Ok((status?, counters?))
}

/// The program's namespace, the shim and the service's socket.
fn prepare(cmd: &mut Command, program: &Program<'_>) -> Result<(), RunError> {
    host::netns::enter_in_child(cmd, program.netns).map_err(|source| RunError::Netns {
        netns: program.netns.to_string(),
        source,
    })?;
    let installed = shim::install().map_err(RunError::Shim)?;
    shim::configure(cmd, &installed, program.socket);
    if program.debug {
        cmd.env(DEBUG_ENV, "1");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scope_and_process_has_its_own_socket() {
        let a = socket_path("lab-rcv");
        assert_eq!(a.parent(), Some(std::env::temp_dir().as_path()));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            name,
            format!("steer-toe-lab-rcv-{}.sock", std::process::id())
        );
        assert_ne!(a, socket_path("lab-snd"));
    }
}
