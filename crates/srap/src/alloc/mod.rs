//! The local allocator: one process per host hands out source ports so that
//! many processes connecting at the same time get distinct receiver cores
//! (the paper's binder "requests collision-free ports", section 3).
//!
//! The wire protocol is JSON lines over a Unix stream socket
//! ([`protocol`], documented in `docs/srap.md`). [`Allocator`] is the
//! decision logic, usable without a socket; [`server`] puts it on a socket,
//! [`client`] is the Rust client. [`table`] is the shared-memory lease table
//! the server plans ports ahead into, which the LD_PRELOAD shim claims from
//! without a round trip (`lease_table.h`, docs/binders.md).

pub mod client;
mod leases;
pub mod protocol;
pub mod server;
pub mod table;

use std::io;
use std::path::PathBuf;

use thiserror::Error;

pub use client::{AllocClient, ClientError};
pub use protocol::ErrorCode;
pub use protocol::{BatchLease, MAX_BATCH};
pub use server::{Allocator, ConfigSource, Server, ServerHandle, ServerOptions};

/// Where the allocator listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/steer/alloc.sock";
/// Environment variable that overrides [`DEFAULT_SOCKET`], for servers and clients.
pub const SOCKET_ENV: &str = "STEER_ALLOC_SOCK";

/// `$STEER_ALLOC_SOCK`, else [`DEFAULT_SOCKET`].
pub fn socket_path() -> PathBuf {
    std::env::var_os(SOCKET_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_SOCKET), PathBuf::from)
}

/// Failures of the allocator server itself (not of one request).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AllocError {
    #[error("another allocator is already listening on {0}")]
    AlreadyRunning(PathBuf),
    // The io errors are the sources, left out of the messages: a printer
    // of the error chain shows them next.
    #[error("cannot listen on {}", path.display())]
    Listen {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("allocator socket {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl AllocError {
    /// True for missing privilege (e.g. creating /run/steer as a user).
    pub fn is_environment(&self) -> bool {
        match self {
            AllocError::Listen { source, .. } | AllocError::Io { source, .. } => {
                source.kind() == io::ErrorKind::PermissionDenied
            }
            AllocError::AlreadyRunning(_) => false,
        }
    }

    /// Never bad input: the socket is taken or cannot be made, so the
    /// server failed to start (CLI exit 1) unless it lacks privilege.
    pub fn is_bad_input(&self) -> bool {
        false
    }
}

/// The source address the kernel would pick towards `remote` (a UDP socket
/// connected there, then `getsockname`; nothing is sent).
pub fn source_address_for(remote: std::net::SocketAddr) -> io::Result<std::net::IpAddr> {
    let any: std::net::SocketAddr = if remote.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(any)?;
    socket.connect(remote)?;
    Ok(socket.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_allocator_is_a_failure_to_start() {
        let running = AllocError::AlreadyRunning("/run/steer/alloc.sock".into());
        assert!(!running.is_bad_input() && !running.is_environment());
    }
}
