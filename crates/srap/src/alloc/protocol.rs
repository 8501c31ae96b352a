//! The allocator's wire protocol, version 1: one JSON object per line over a
//! Unix stream socket; every request line gets exactly one response line.
//!
//! ```text
//! {"v":1,"op":"lease","proto":"tcp","local":"10.77.1.1","remote":"10.77.1.2","remote_port":5201}
//!   -> {"v":1,"port":40123,"queue":3,"cpu":3,"lease":17}
//! {"v":1,"op":"lease","remote":"10.77.1.2","remote_port":5201,"count":4}
//!   -> {"v":1,"leases":[{"port":40123,"queue":3,"cpu":1,"lease":18},...]}
//! {"v":1,"op":"release","lease":17}            -> {"v":1,"ok":true}
//! {"v":1,"op":"set_config","remote":"10.77.1.2","config":{...RssConfig...}} -> {"v":1,"ok":true}
//! {"v":1,"op":"status"}                        -> {"v":1,"leases":[...],"remotes":[...]}
//! any failure                                  -> {"v":1,"error":"...","code":"no_config"}
//! ```
//!
//! `proto` defaults to `tcp`; `local` may be omitted, and the allocator then
//! uses the source address its own routing table picks towards `remote`.
//! `count` (1..=16) asks for several ports planned together (distinct CPUs,
//! then distinct queues); each is its own lease. The LD_PRELOAD shim uses it
//! to keep spares for the next connects to the same destination.
//! A success response never contains the key `"error"`.

use std::net::IpAddr;

use rss::{L4Proto, RssConfig};
use serde::{Deserialize, Serialize};

mod text;

/// The protocol version this crate speaks.
pub const VERSION: u32 = 1;
/// Longest request line accepted (an RssConfig with a 65,536-entry table
/// fits); a longer line gets a `too_long` error and the connection is closed.
pub const MAX_LINE: usize = 1 << 20;

/// A request, after the `"v"` check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Lease {
        #[serde(default = "default_proto")]
        proto: L4Proto,
        #[serde(default)]
        local: Option<IpAddr>,
        remote: IpAddr,
        remote_port: u16,
        /// Ports wanted; absent: one, answered as a single [`LeaseResponse`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<usize>,
    },
    Release {
        lease: u64,
    },
    SetConfig {
        remote: IpAddr,
        config: Box<RssConfig>,
    },
    Status,
}

fn default_proto() -> L4Proto {
    L4Proto::Tcp
}

/// Machine-readable reason in an error response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not JSON, not an object, unknown op, missing or mistyped field.
    BadRequest,
    /// `"v"` is missing or not 1.
    UnsupportedVersion,
    /// No RssConfig registered for the remote address.
    NoConfig,
    /// The receiver's config cannot be steered by source port for this flow.
    NotSteerable,
    /// No free port in the range.
    Exhausted,
    /// `release` of a lease that does not exist (any more).
    UnknownLease,
    /// `set_config` from a user other than root or the allocator's owner.
    Forbidden,
    /// Request line longer than [`MAX_LINE`].
    TooLong,
    /// Too many clients connected at once.
    Busy,
    /// The host could not be read (e.g. /proc).
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseResponse {
    pub v: u32,
    pub port: u16,
    pub queue: u32,
    pub cpu: u32,
    pub lease: u64,
}

/// Most ports one `lease` with `count` grants.
pub const MAX_BATCH: usize = 16;

/// One lease of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchLease {
    pub port: u16,
    pub queue: u32,
    pub cpu: u32,
    pub lease: u64,
}

impl From<LeaseResponse> for BatchLease {
    fn from(r: LeaseResponse) -> Self {
        BatchLease {
            port: r.port,
            queue: r.queue,
            cpu: r.cpu,
            lease: r.lease,
        }
    }
}

/// The answer to `lease` with `count`: the leases in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResponse {
    pub v: u32,
    pub leases: Vec<BatchLease>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OkResponse {
    pub v: u32,
    pub ok: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    pub v: u32,
    pub error: String,
    pub code: ErrorCode,
}

/// The flow a lease is for and where the receiver's RSS puts it: what the
/// allocator keeps of a lease and `status` lists alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeasedFlow {
    pub proto: L4Proto,
    pub local: IpAddr,
    pub remote: IpAddr,
    pub remote_port: u16,
    /// The leased source port.
    pub port: u16,
    pub queue: u32,
    pub cpu: u32,
}

/// One live lease, as `status` lists it (the flow's fields inline, as
/// before they had a type of their own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseInfo {
    pub lease: u64,
    #[serde(flatten)]
    pub flow: LeasedFlow,
    /// Milliseconds since the lease was granted.
    pub age_ms: u64,
    /// A socket with the lease's 4-tuple has been seen.
    pub connected: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusResponse {
    pub v: u32,
    pub leases: Vec<LeaseInfo>,
    /// Remote addresses with a registered config.
    pub remotes: Vec<IpAddr>,
}

/// A failed request: the code and a one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
        }
    }

    pub fn to_line(&self) -> String {
        to_line(&ErrorResponse {
            v: VERSION,
            error: self.message.clone(),
            code: self.code,
        })
    }
}

/// Serializes one response as a line (with the trailing newline).
pub fn to_line<T: Serialize>(value: &T) -> String {
    let mut line = serde_json::to_string(value).unwrap_or_else(|e| {
        format!(r#"{{"v":1,"error":"cannot serialize response: {e}","code":"internal"}}"#)
    });
    line.push('\n');
    line
}

/// Parses a request line: JSON object, `"v": 1`, a known `op`.
pub fn parse_request(line: &str) -> Result<Request, Refusal> {
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| Refusal::new(ErrorCode::BadRequest, format!("not JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(Refusal::new(
            ErrorCode::BadRequest,
            "a request is a JSON object",
        ));
    };
    match object.get("v").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) => {
            return Err(Refusal::new(
                ErrorCode::UnsupportedVersion,
                format!("protocol version {v} is not supported (this allocator speaks {VERSION})"),
            ))
        }
        None => {
            return Err(Refusal::new(
                ErrorCode::UnsupportedVersion,
                "missing \"v\" (protocol version, 1)",
            ))
        }
    }
    serde_json::from_value(value)
        .map_err(|e| Refusal::new(ErrorCode::BadRequest, format!("bad request: {e}")))
}

/// One lease of 10.0.0.1:40000 to 10.0.0.2:5201, on queue and CPU 2: the
/// tests' example.
#[cfg(test)]
fn sample_lease() -> LeaseInfo {
    LeaseInfo {
        lease: 1,
        flow: LeasedFlow {
            proto: L4Proto::Tcp,
            local: "10.0.0.1".parse().unwrap(),
            remote: "10.0.0.2".parse().unwrap(),
            remote_port: 5201,
            port: 40000,
            queue: 2,
            cpu: 2,
        },
        age_ms: 15,
        connected: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_requests() {
        let r = parse_request(r#"{"v":1,"op":"lease","proto":"tcp","local":"10.77.1.1","remote":"10.77.1.2","remote_port":5201}"#).unwrap();
        assert_eq!(
            r,
            Request::Lease {
                proto: L4Proto::Tcp,
                local: Some("10.77.1.1".parse().unwrap()),
                remote: "10.77.1.2".parse().unwrap(),
                remote_port: 5201,
                count: None,
            }
        );
        let r = parse_request(r#"{"v":1,"op":"lease","remote":"::1","remote_port":1}"#).unwrap();
        assert!(matches!(
            r,
            Request::Lease {
                proto: L4Proto::Tcp,
                local: None,
                ..
            }
        ));
        assert_eq!(
            parse_request(r#"{"v":1,"op":"release","lease":17}"#).unwrap(),
            Request::Release { lease: 17 }
        );
        assert_eq!(
            parse_request(r#"{"v":1,"op":"status"}"#).unwrap(),
            Request::Status
        );
    }

    #[test]
    fn bad_requests_are_refused_with_a_code() {
        for (line, code) in [
            ("", ErrorCode::BadRequest),
            ("garbage", ErrorCode::BadRequest),
            ("[1,2]", ErrorCode::BadRequest),
            (r#"{"op":"status"}"#, ErrorCode::UnsupportedVersion),
            (r#"{"v":2,"op":"status"}"#, ErrorCode::UnsupportedVersion),
            (r#"{"v":1,"op":"fly"}"#, ErrorCode::BadRequest),
            (
                r#"{"v":1,"op":"lease","remote":"10.0.0.1"}"#,
                ErrorCode::BadRequest,
            ),
            (
                r#"{"v":1,"op":"lease","remote":"x","remote_port":1}"#,
                ErrorCode::BadRequest,
            ),
            (
                r#"{"v":1,"op":"lease","remote":"10.0.0.1","remote_port":70000}"#,
                ErrorCode::BadRequest,
            ),
        ] {
            assert_eq!(parse_request(line).unwrap_err().code, code, "{line}");
        }
    }

    #[test]
    fn responses_have_the_documented_shape() {
        let line = to_line(&LeaseResponse {
            v: 1,
            port: 40123,
            queue: 3,
            cpu: 3,
            lease: 17,
        });
        assert_eq!(
            line,
            "{\"v\":1,\"port\":40123,\"queue\":3,\"cpu\":3,\"lease\":17}\n"
        );
        let line = Refusal::new(ErrorCode::NoConfig, "no").to_line();
        assert_eq!(line, "{\"v\":1,\"error\":\"no\",\"code\":\"no_config\"}\n");
    }

    /// A status lease keeps its flow's fields inline, in the documented
    /// order, and reads back the same.
    #[test]
    fn a_status_lease_is_one_flat_object() {
        let info = sample_lease();
        let line = to_line(&info);
        assert_eq!(
            line,
            "{\"lease\":1,\"proto\":\"tcp\",\"local\":\"10.0.0.1\",\"remote\":\"10.0.0.2\",\
             \"remote_port\":5201,\"port\":40000,\"queue\":2,\"cpu\":2,\"age_ms\":15,\
             \"connected\":false}\n"
        );
        assert_eq!(serde_json::from_str::<LeaseInfo>(&line).unwrap(), info);
    }
}
