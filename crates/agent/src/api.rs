//! The JSON bodies of API version [`API_VERSION`], shared by the server and
//! the client so both sides use one definition (docs/agent.md shows each one).
//!
//! Every body carries `"api": 1`. A client checks that field before anything
//! else, so an agent speaking another version is reported as such instead of
//! as a field that does not parse.

use std::net::IpAddr;

use rss::RssConfig;
use serde::{Deserialize, Serialize};

/// The API version this crate serves and understands (the `/v1` prefix).
pub const API_VERSION: u32 = 1;

/// Where a served config comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigOrigin {
    /// Steer's XDP software RSS attached to the device (`nic::attached_config`).
    SoftwareRss,
    /// The NIC's own RSS, read over ethtool netlink (`rss::live::read_config`).
    Nic,
    /// An RssConfig JSON file given with `--config FILE --for ADDR`.
    File,
}

impl ConfigOrigin {
    pub fn name(self) -> &'static str {
        match self {
            ConfigOrigin::SoftwareRss => "software-rss",
            ConfigOrigin::Nic => "nic",
            ConfigOrigin::File => "file",
        }
    }
}

/// `GET /v1/rss?addr=IP` or `?dev=DEV`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RssReply {
    pub api: u32,
    /// The interface whose config this is; `null` for a file-backed config
    /// whose address is on no local interface.
    pub dev: Option<String>,
    /// The address asked for (`null` when asked by device).
    pub addr: Option<IpAddr>,
    /// Every local address the config applies to.
    pub addrs: Vec<IpAddr>,
    pub origin: ConfigOrigin,
    /// Starts at 1; incremented each time the agent sees this config change.
    pub config_version: u64,
    pub config: RssConfig,
}

/// One entry of `GET /v1/devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedEntry {
    pub dev: Option<String>,
    pub addrs: Vec<IpAddr>,
    /// `null` while the config cannot be read (see `error`).
    pub origin: Option<ConfigOrigin>,
    /// 0 until a config was read once.
    pub config_version: u64,
    pub queues: Option<u32>,
    /// Why no config is served, when none is.
    pub error: Option<String>,
}

/// `GET /v1/devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevicesReply {
    pub api: u32,
    pub devices: Vec<ServedEntry>,
}

/// One CPU in `GET /v1/load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuLoad {
    pub cpu: u32,
    /// NET_RX softirqs per second over the last interval (/proc/softirqs);
    /// null until the agent has two samples of this CPU (and after its
    /// counter went backwards): a rate needs an interval.
    pub net_rx_per_sec: Option<f64>,
    /// Fraction of the interval spent in softirq context, 0.0..=1.0
    /// (/proc/stat `softirq` column; resolution one USER_HZ tick); null as
    /// `net_rx_per_sec`.
    pub softirq_busy: Option<f64>,
    /// Cumulative NET_RX softirqs since boot.
    pub net_rx_total: u64,
    /// Cumulative softirq time since boot, seconds.
    /// Null for a CPU with no /proc/stat line (offline): not counted.
    pub softirq_seconds_total: Option<f64>,
}

/// One software RSS queue in `GET /v1/load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueLoad {
    pub queue: u32,
    pub cpu: u32,
    /// Packets counted by the XDP software RSS since attach (or reset).
    pub packets: u64,
    /// Packets per second over the last interval; null until the agent has
    /// two samples of this queue.
    pub packets_per_sec: Option<f64>,
}

/// Per-queue counters of one device running Steer's software RSS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceLoad {
    pub dev: String,
    pub queues: Vec<QueueLoad>,
}

/// `GET /v1/load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReply {
    pub api: u32,
    /// Length of the interval the rates cover, milliseconds (0 before the
    /// second sample).
    pub interval_ms: u64,
    /// Milliseconds since the agent started, at the last sample.
    pub sampled_at_ms: u64,
    pub cpus: Vec<CpuLoad>,
    /// Devices with software RSS attached (empty otherwise).
    pub devices: Vec<DeviceLoad>,
}

/// `GET /v1/whoami`: the requester as the agent's socket sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoamiReply {
    pub api: u32,
    pub addr: IpAddr,
    pub port: u16,
}

/// Every error answer: status 4xx/5xx with this body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub api: u32,
    /// Machine-readable: `unknown_addr`, `unknown_dev`, `no_config`,
    /// `bad_request`, `unauthorized`, `not_found`, `method_not_allowed`.
    pub code: String,
    pub error: String,
}
