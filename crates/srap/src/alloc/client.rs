//! The Rust client of the allocator. Every exchange is bounded by a short
//! timeout (200 ms by default), so a slow or dead allocator never hangs an
//! application: it gets an error and connects the ordinary way.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rss::{L4Proto, RssConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

use super::protocol::{
    BatchLease, BatchResponse, ErrorCode, ErrorResponse, LeaseResponse, OkResponse, Request,
    StatusResponse, MAX_LINE, VERSION,
};

/// Default bound on one request/response exchange.
pub const CLIENT_TIMEOUT: Duration = Duration::from_millis(200);

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The socket refused or is missing. The io error is the source, so
    /// the message leaves it out: a printer of the error chain (the steer
    /// binary's one-line report) would show it twice.
    #[error("cannot reach the allocator at {}", path.display())]
    Connect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the allocator did not answer within {0:?}")]
    Timeout(Duration),
    #[error("allocator connection: {0}")]
    Io(#[source] io::Error),
    #[error("the allocator answered something Steer cannot read: {0}")]
    BadResponse(String),
    #[error("the allocator refused: {message}")]
    Refused { code: ErrorCode, message: String },
}

impl ClientError {
    /// True for missing privilege: the socket refused us, or the allocator
    /// refused a `set_config` from another user (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        match self {
            ClientError::Connect { source, .. } => source.kind() == io::ErrorKind::PermissionDenied,
            ClientError::Refused { code, .. } => *code == ErrorCode::Forbidden,
            _ => false,
        }
    }

    /// True when the allocator refused the request for what it asked (no
    /// config for that receiver, not steerable, an unknown lease, a bad
    /// request; exit 2). Neither this nor
    /// [`is_environment`](Self::is_environment): the allocator is
    /// unreachable, too slow, busy, out of ports or answered nonsense
    /// (exit 1).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ClientError::Refused {
                code: ErrorCode::BadRequest
                    | ErrorCode::NoConfig
                    | ErrorCode::NotSteerable
                    | ErrorCode::UnknownLease
                    | ErrorCode::TooLong,
                ..
            }
        )
    }
}

/// A connection to the allocator.
pub struct AllocClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    timeout: Duration,
}

/// The request with its version, as sent.
#[derive(Serialize)]
struct Envelope<'a> {
    v: u32,
    #[serde(flatten)]
    request: &'a Request,
}

impl AllocClient {
    /// Connects with the default timeout ([`CLIENT_TIMEOUT`]).
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        Self::connect_with_timeout(path, CLIENT_TIMEOUT)
    }

    /// Connects to `$STEER_ALLOC_SOCK` or `/run/steer/alloc.sock`.
    pub fn connect_default() -> Result<Self, ClientError> {
        Self::connect(super::socket_path())
    }

    pub fn connect_with_timeout(
        path: impl AsRef<Path>,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let path = path.as_ref();
        let connect_err = |source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        };
        let stream = UnixStream::connect(path).map_err(connect_err)?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(connect_err)?;
        let writer = stream.try_clone().map_err(connect_err)?;
        Ok(AllocClient {
            reader: BufReader::new(stream),
            writer,
            timeout,
        })
    }

    fn io(&self, e: io::Error) -> ClientError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                ClientError::Timeout(self.timeout)
            }
            _ => ClientError::Io(e),
        }
    }

    fn call<T: DeserializeOwned>(&mut self, request: &Request) -> Result<T, ClientError> {
        let mut line = serde_json::to_string(&Envelope {
            v: VERSION,
            request,
        })
        .map_err(|e| ClientError::BadResponse(e.to_string()))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| self.io(e))?;
        let mut buf = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut buf)
            .map_err(|e| self.io(e))?;
        if n == 0 || buf.last() != Some(&b'\n') {
            return Err(ClientError::BadResponse(
                "connection closed before a complete line".into(),
            ));
        }
        let value: serde_json::Value =
            serde_json::from_slice(&buf).map_err(|e| ClientError::BadResponse(e.to_string()))?;
        if value.get("v").and_then(serde_json::Value::as_u64) != Some(u64::from(VERSION)) {
            return Err(ClientError::BadResponse(format!(
                "protocol version is not {VERSION}: {value}"
            )));
        }
        if value.get("error").is_some() {
            let e: ErrorResponse = serde_json::from_value(value)
                .map_err(|e| ClientError::BadResponse(e.to_string()))?;
            return Err(ClientError::Refused {
                code: e.code,
                message: e.error,
            });
        }
        serde_json::from_value(value).map_err(|e| ClientError::BadResponse(e.to_string()))
    }

    /// Asks for a source port for a flow to `remote:remote_port`. `local`
    /// `None` lets the allocator use its routed source address.
    pub fn lease(
        &mut self,
        proto: L4Proto,
        local: Option<IpAddr>,
        remote: IpAddr,
        remote_port: u16,
    ) -> Result<LeaseResponse, ClientError> {
        self.call(&Request::Lease {
            proto,
            local,
            remote,
            remote_port,
            count: None,
        })
    }

    /// Asks for `count` ports planned together (1..=`MAX_BATCH`).
    pub fn lease_batch(
        &mut self,
        proto: L4Proto,
        local: Option<IpAddr>,
        remote: IpAddr,
        remote_port: u16,
        count: usize,
    ) -> Result<Vec<BatchLease>, ClientError> {
        self.call::<BatchResponse>(&Request::Lease {
            proto,
            local,
            remote,
            remote_port,
            count: Some(count),
        })
        .map(|r| r.leases)
    }

    pub fn release(&mut self, lease: u64) -> Result<(), ClientError> {
        self.call::<OkResponse>(&Request::Release { lease })
            .map(|_| ())
    }

    /// Registers the receiver config for `remote` (root or the allocator's
    /// own user only).
    pub fn set_config(&mut self, remote: IpAddr, config: &RssConfig) -> Result<(), ClientError> {
        self.call::<OkResponse>(&Request::SetConfig {
            remote,
            config: Box::new(config.clone()),
        })
        .map(|_| ())
    }

    pub fn status(&mut self) -> Result<StatusResponse, ClientError> {
        self.call(&Request::Status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the allocator refused with decides the class: a request it
    /// cannot serve is bad input (exit 2), a busy table a failure (exit 1),
    /// a forbidden one privilege (exit 3).
    #[test]
    fn refusals_classify_by_their_code() {
        let refused = |code| ClientError::Refused {
            code,
            message: String::new(),
        };
        let no_config = refused(ErrorCode::NoConfig);
        assert!(no_config.is_bad_input() && !no_config.is_environment());
        let busy = refused(ErrorCode::Busy);
        assert!(!busy.is_bad_input() && !busy.is_environment());
        let forbidden = refused(ErrorCode::Forbidden);
        assert!(forbidden.is_environment() && !forbidden.is_bad_input());
    }
}
