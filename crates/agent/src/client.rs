//! [`AgentClient`]: the sender's side of the agent API.
//!
//! A small HTTP/1.1 client over `std::net::TcpStream` (one request per
//! connection, `Connection: close`), so that a request can leave from a
//! chosen source port ([`AgentClient::whoami_from`]) and every way an agent
//! can fail is its own [`ClientError`]: unreachable, too slow (one deadline
//! for the whole exchange, so a server trickling bytes cannot hold a sender),
//! not HTTP, not the expected JSON, another API version, refused token.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};
use thiserror::Error;

use crate::api::{DevicesReply, ErrorReply, LoadReply, RssReply, WhoamiReply, API_VERSION};
use crate::http::{parse_answer, parse_url, snippet, Answer, Target};
use crate::token::{Token, TokenError};

/// Largest answer accepted.
pub const MAX_RESPONSE: usize = 8 << 20;

/// Every way a request to an agent fails.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("invalid agent URL '{url}': {reason}")]
    InvalidUrl { url: String, reason: String },

    #[error(transparent)]
    InvalidToken(#[from] TokenError),

    #[error("cannot resolve the agent's host '{host}': {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },

    #[error("agent at {url} is unreachable: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: std::io::Error,
    },

    #[error("agent at {url} did not answer within {timeout:?} (timed out while {stage})")]
    Timeout {
        url: String,
        timeout: Duration,
        stage: &'static str,
    },

    #[error("cannot send from local port {port} to the agent at {url}: {source}")]
    Bind {
        url: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },

    #[error("connection to the agent at {url} failed: {source}")]
    Io {
        url: String,
        #[source]
        source: std::io::Error,
    },

    #[error("{url} did not answer with HTTP (is it a Steer agent?): {reason}")]
    NotHttp { url: String, reason: String },

    #[error("{url} answered with something that is not the expected JSON (is it a Steer agent?): {reason}")]
    BadJson { url: String, reason: String },

    #[error(
        "agent at {url} speaks API version {found}, this client speaks version {expected}: \
         run the same Steer version on both hosts"
    )]
    ApiVersion {
        url: String,
        /// The version found, or why none was.
        found: String,
        expected: u32,
    },

    #[error("agent at {url} refused the request (401): missing or wrong token")]
    Unauthorized { url: String },

    #[error("agent at {url} answered {status} {code}: {message}")]
    Agent {
        url: String,
        status: u16,
        /// [`ErrorReply::code`]: `unknown_addr`, `unknown_dev`, `no_config`, ...
        code: String,
        message: String,
    },

    #[error("{url} answered HTTP {status} without an agent error body")]
    Status { url: String, status: u16 },

    #[error("answer from {url} is larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },

    #[error(
        "steering is impossible on the path to {url}: the request left from port {sent_port} \
         but the agent saw port {seen_port} (from {seen_addr}); something on the path \
         (NAT, proxy) rewrites source ports, so a chosen port does not reach the receiver's NIC"
    )]
    PortsRewritten {
        url: String,
        sent_port: u16,
        seen_addr: IpAddr,
        seen_port: u16,
    },
}

impl ClientError {
    /// True when this host may not make the request (binding the chosen
    /// source port is refused; CLI exit 3).
    pub fn is_environment(&self) -> bool {
        matches!(self, ClientError::Bind { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied)
    }

    /// True for a bad URL or token (exit 2). Neither this nor
    /// [`is_environment`](Self::is_environment): the agent is unreachable,
    /// too slow, not an agent, another version, refused the request, or the
    /// path rewrites source ports (exit 1).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ClientError::InvalidUrl { .. }
                | ClientError::InvalidToken(_)
                | ClientError::Unauthorized { .. }
        )
    }
}

/// What the agent saw of a request sent from a known local socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PathCheck {
    /// Our end of the connection, as our kernel bound it.
    pub local_addr: IpAddr,
    pub local_port: u16,
    /// The source the agent's socket saw.
    pub seen_addr: IpAddr,
    pub seen_port: u16,
    /// The source address was rewritten (predict with `seen_addr`).
    pub nat: bool,
    /// The source port was rewritten: ports chosen here do not reach the
    /// receiver, so steering is impossible on this path.
    pub port_rewritten: bool,
}

impl PathCheck {
    /// The address a predictor must hash as the source (the one the
    /// receiver's NIC sees).
    pub fn source_for_prediction(&self) -> IpAddr {
        self.seen_addr
    }

    pub fn steering_possible(&self) -> bool {
        !self.port_rewritten
    }
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A client for one agent.
#[derive(Debug, Clone)]
pub struct AgentClient {
    url: String,
    target: Target,
    token: Option<Token>,
    timeout: Duration,
}

impl AgentClient {
    /// The timeout senders should use unless they have a reason not to.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

    /// `url`: `http://HOST[:PORT]` (port default
    /// [`DEFAULT_PORT`](crate::server::DEFAULT_PORT));
    /// `timeout` bounds each request as a whole (connect, send, answer).
    pub fn new(url: &str, token: Option<&str>, timeout: Duration) -> Result<Self, ClientError> {
        let target = parse_url(url).map_err(|reason| ClientError::InvalidUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        })?;
        if timeout.is_zero() {
            return Err(ClientError::InvalidUrl {
                url: url.to_string(),
                reason: "the timeout must be positive".into(),
            });
        }
        Ok(AgentClient {
            url: url.trim_end_matches('/').to_string(),
            target,
            token: token.map(Token::new).transpose()?,
            timeout,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The config serving the receiver's local address `addr`.
    pub fn rss(&self, addr: IpAddr) -> Result<RssReply, ClientError> {
        let reply: RssReply =
            self.get_json(&format!("/v1/rss?addr={}", encode(&addr.to_string())))?;
        self.check_config(reply)
    }

    /// The config of the receiver's device `dev`.
    pub fn rss_dev(&self, dev: &str) -> Result<RssReply, ClientError> {
        let reply: RssReply = self.get_json(&format!("/v1/rss?dev={}", encode(dev)))?;
        self.check_config(reply)
    }

    fn check_config(&self, reply: RssReply) -> Result<RssReply, ClientError> {
        reply.config.validate().map_err(|e| ClientError::BadJson {
            url: self.url.clone(),
            reason: format!("the served RssConfig is invalid: {e}"),
        })?;
        Ok(reply)
    }

    /// Everything the agent serves.
    pub fn devices(&self) -> Result<DevicesReply, ClientError> {
        self.get_json("/v1/devices")
    }

    /// Per-CPU softirq load and per-queue packet rates.
    pub fn load(&self) -> Result<LoadReply, ClientError> {
        self.get_json("/v1/load")
    }

    /// Our address and port as the agent sees them (any local port).
    pub fn whoami(&self) -> Result<WhoamiReply, ClientError> {
        self.get_json("/v1/whoami")
    }

    /// `/v1/whoami` asked from a socket bound to `local_port` (0: a port the
    /// kernel picks); returns our socket's local address with the answer.
    pub fn whoami_from(&self, local_port: u16) -> Result<(SocketAddr, WhoamiReply), ClientError> {
        let deadline = Instant::now() + self.timeout;
        let stream = self.connect(Some(local_port), deadline)?;
        let local = stream.local_addr().map_err(|source| self.io(source))?;
        let answer = self.exchange(stream, "/v1/whoami", deadline)?;
        Ok((local, self.decode(answer)?))
    }

    /// Whether a source port chosen here reaches the receiver unchanged:
    /// asks `/v1/whoami` from `local_port` (0: any) and compares.
    pub fn check_path(&self, local_port: u16) -> Result<PathCheck, ClientError> {
        let (local, seen) = self.whoami_from(local_port)?;
        let (local_addr, seen_addr) = (local.ip().to_canonical(), seen.addr.to_canonical());
        Ok(PathCheck {
            local_addr,
            local_port: local.port(),
            seen_addr,
            seen_port: seen.port,
            nat: local_addr != seen_addr,
            port_rewritten: local.port() != seen.port,
        })
    }

    /// [`check_path`](Self::check_path), as an error when ports are rewritten.
    pub fn require_steerable_path(&self, local_port: u16) -> Result<PathCheck, ClientError> {
        let check = self.check_path(local_port)?;
        if check.port_rewritten {
            return Err(ClientError::PortsRewritten {
                url: self.url.clone(),
                sent_port: check.local_port,
                seen_addr: check.seen_addr,
                seen_port: check.seen_port,
            });
        }
        Ok(check)
    }

    /// The Prometheus text of `/metrics`.
    pub fn metrics(&self) -> Result<String, ClientError> {
        let answer = self.request("/metrics")?;
        if answer.status == 401 {
            return Err(ClientError::Unauthorized {
                url: self.url.clone(),
            });
        }
        if answer.status != 200 {
            return Err(ClientError::Status {
                url: self.url.clone(),
                status: answer.status,
            });
        }
        String::from_utf8(answer.body).map_err(|_| ClientError::NotHttp {
            url: self.url.clone(),
            reason: "metrics are not UTF-8".into(),
        })
    }

    fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let answer = self.request(path)?;
        self.decode(answer)
    }

    fn request(&self, path: &str) -> Result<Answer, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let stream = self.connect(None, deadline)?;
        self.exchange(stream, path, deadline)
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            url: self.url.clone(),
            source,
        }
    }

    fn timeout(&self, stage: &'static str) -> ClientError {
        ClientError::Timeout {
            url: self.url.clone(),
            timeout: self.timeout,
            stage,
        }
    }

    fn remaining(&self, deadline: Instant, stage: &'static str) -> Result<Duration, ClientError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(self.timeout(stage))
        } else {
            Ok(left)
        }
    }

    fn is_timeout(e: &std::io::Error) -> bool {
        matches!(
            e.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        )
    }

    /// Connects to the first address of the host that answers.
    fn connect(
        &self,
        local_port: Option<u16>,
        deadline: Instant,
    ) -> Result<TcpStream, ClientError> {
        let addrs: Vec<SocketAddr> = (self.target.host.as_str(), self.target.port)
            .to_socket_addrs()
            .map_err(|source| ClientError::Resolve {
                host: self.target.host.clone(),
                source,
            })?
            .collect();
        let mut last = None;
        for addr in addrs {
            let left = self.remaining(deadline, "connecting")?;
            let result = match local_port {
                None => TcpStream::connect_timeout(&addr, left),
                Some(port) => {
                    let socket = self.bound_socket(addr, port)?;
                    socket
                        .connect_timeout(&addr.into(), left)
                        .map(|()| TcpStream::from(socket))
                }
            };
            match result {
                Ok(s) => return Ok(s),
                Err(e) if Self::is_timeout(&e) => return Err(self.timeout("connecting")),
                Err(e) => last = Some(e),
            }
        }
        Err(ClientError::Unreachable {
            url: self.url.clone(),
            source: last.unwrap_or_else(|| std::io::Error::other("the host has no address")),
        })
    }

    /// A TCP socket bound to `port` on the wildcard address of `to`'s family.
    fn bound_socket(&self, to: SocketAddr, port: u16) -> Result<Socket, ClientError> {
        let bind_err = |source| ClientError::Bind {
            url: self.url.clone(),
            port,
            source,
        };
        let socket = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))
            .map_err(bind_err)?;
        // A port left in TIME_WAIT by an earlier check may be bound again.
        socket.set_reuse_address(true).map_err(bind_err)?;
        let any: IpAddr = if to.is_ipv4() {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        };
        socket
            .bind(&SocketAddr::new(any, port).into())
            .map_err(bind_err)?;
        Ok(socket)
    }

    /// Sends `GET prefix+path` and reads the whole answer before the deadline.
    fn exchange(
        &self,
        mut stream: TcpStream,
        path: &str,
        deadline: Instant,
    ) -> Result<Answer, ClientError> {
        let host = if self.target.host.contains(':') {
            format!("[{}]:{}", self.target.host, self.target.port)
        } else {
            format!("{}:{}", self.target.host, self.target.port)
        };
        let mut head = format!(
            "GET {}{path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\nConnection: close\r\nUser-Agent: steer-agent-client/{}\r\n",
            self.target.prefix,
            env!("CARGO_PKG_VERSION")
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {}\r\n", token.expose()));
        }
        head.push_str("\r\n");
        let left = self.remaining(deadline, "sending the request")?;
        stream
            .set_write_timeout(Some(left))
            .map_err(|e| self.io(e))?;
        stream.write_all(head.as_bytes()).map_err(|e| {
            if Self::is_timeout(&e) {
                self.timeout("sending the request")
            } else {
                self.io(e)
            }
        })?;
        let mut raw = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let left = self.remaining(deadline, "waiting for the answer")?;
            stream
                .set_read_timeout(Some(left))
                .map_err(|e| self.io(e))?;
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    raw.extend_from_slice(&buf[..n]);
                    if raw.len() > MAX_RESPONSE {
                        return Err(ClientError::TooLarge {
                            url: self.url.clone(),
                            limit: MAX_RESPONSE,
                        });
                    }
                    // Complete by its Content-Length: wait briefly for the
                    // agent to close first, so that the TIME_WAIT state stays
                    // on its side and the same source port can ask again.
                    if let Ok(Some(a)) = parse_answer(&raw, false) {
                        Self::wait_for_close(&mut stream, deadline);
                        return Ok(a);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if Self::is_timeout(&e) => {
                    return Err(self.timeout("waiting for the answer"))
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !raw.is_empty() => {
                    break
                }
                Err(e) => return Err(self.io(e)),
            }
        }
        match parse_answer(&raw, true) {
            Ok(Some(a)) => Ok(a),
            Ok(None) => Err(ClientError::NotHttp {
                url: self.url.clone(),
                reason: if raw.is_empty() {
                    "the connection closed without an answer".into()
                } else {
                    "the answer ended early".into()
                },
            }),
            Err(reason) => Err(ClientError::NotHttp {
                url: self.url.clone(),
                reason,
            }),
        }
    }

    /// Reads until EOF for at most 100 ms (and not past the deadline).
    fn wait_for_close(stream: &mut TcpStream, deadline: Instant) {
        let until = deadline.min(Instant::now() + Duration::from_millis(100));
        let mut buf = [0u8; 512];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    /// Turns an answer into `T`, checking status, JSON and API version.
    fn decode<T: DeserializeOwned>(&self, answer: Answer) -> Result<T, ClientError> {
        let url = || self.url.clone();
        if answer.status == 401 {
            return Err(ClientError::Unauthorized { url: url() });
        }
        let ok = (200..300).contains(&answer.status);
        let value: serde_json::Value = match serde_json::from_slice(&answer.body) {
            Ok(v) => v,
            Err(e) if ok => {
                return Err(ClientError::BadJson {
                    url: url(),
                    reason: format!("{e}; body starts with {:?}", snippet(&answer.body)),
                })
            }
            Err(_) => {
                return Err(ClientError::Status {
                    url: url(),
                    status: answer.status,
                })
            }
        };
        match value.get("api") {
            Some(v) if v.as_u64() == Some(u64::from(API_VERSION)) => {}
            Some(v) => {
                return Err(ClientError::ApiVersion {
                    url: url(),
                    found: v.to_string(),
                    expected: API_VERSION,
                })
            }
            None if ok => {
                return Err(ClientError::ApiVersion {
                    url: url(),
                    found: "none (the answer has no \"api\" field)".into(),
                    expected: API_VERSION,
                })
            }
            None => {
                return Err(ClientError::Status {
                    url: url(),
                    status: answer.status,
                })
            }
        }
        if !ok {
            return Err(match serde_json::from_value::<ErrorReply>(value) {
                Ok(e) => ClientError::Agent {
                    url: url(),
                    status: answer.status,
                    code: e.code,
                    message: e.error,
                },
                Err(_) => ClientError::Status {
                    url: url(),
                    status: answer.status,
                },
            });
        }
        serde_json::from_value(value).map_err(|e| ClientError::BadJson {
            url: url(),
            reason: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_encoding() {
        assert_eq!(encode("fd77:1::2"), "fd77%3A1%3A%3A2");
        assert_eq!(encode("veth0"), "veth0");
    }

    fn answer(status: u16, body: &str) -> Answer {
        Answer {
            status,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn decoding_errors_are_distinct() {
        let c = AgentClient::new("http://127.0.0.1:1", None, Duration::from_secs(1)).unwrap();
        let whoami = |a| c.decode::<WhoamiReply>(a);
        assert!(whoami(answer(200, r#"{"api":1,"addr":"10.0.0.1","port":5}"#)).is_ok());
        assert!(matches!(
            whoami(answer(200, "<html>")),
            Err(ClientError::BadJson { .. })
        ));
        assert!(matches!(
            whoami(answer(200, r#"{"api":1,"addr":"x"}"#)),
            Err(ClientError::BadJson { .. })
        ));
        let e = whoami(answer(200, r#"{"api":0,"addr":"10.0.0.1","port":5}"#)).unwrap_err();
        assert!(
            matches!(e, ClientError::ApiVersion { ref found, .. } if found == "0"),
            "{e}"
        );
        assert!(matches!(
            whoami(answer(200, r#"{"addr":"10.0.0.1"}"#)),
            Err(ClientError::ApiVersion { .. })
        ));
        assert!(matches!(
            whoami(answer(401, "")),
            Err(ClientError::Unauthorized { .. })
        ));
        assert!(matches!(
            whoami(answer(502, "bad gateway")),
            Err(ClientError::Status { status: 502, .. })
        ));
        let e = whoami(answer(
            404,
            r#"{"api":1,"code":"unknown_addr","error":"no"}"#,
        ))
        .unwrap_err();
        assert!(
            matches!(e, ClientError::Agent { status: 404, ref code, .. } if code == "unknown_addr")
        );
    }
}
