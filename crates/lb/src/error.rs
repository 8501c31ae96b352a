//! Errors of the load-balancing crate, one enum per operation: reading a
//! capture, validating agents' reports, configuring a simulation.

use thiserror::Error;

/// A capture that cannot be read. Frames that are merely not usable (non-IP,
/// truncated, fragments) are not errors: they are counted in
/// [`crate::trace::TraceStats`] and skipped.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceError {
    #[error("cannot read {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("not a readable pcap or pcapng capture: {0}")]
    NotACapture(String),
    #[error("link type {0} is not supported (Ethernet, raw IP, IPv4, IPv6, Linux SLL/SLL2 and BSD loopback are)")]
    UnsupportedLinkType(u32),
    #[error("record {index} at byte {offset} is corrupt: {reason}")]
    CorruptRecord {
        index: usize,
        offset: usize,
        reason: String,
    },
    #[error("the capture holds no IPv4 or IPv6 packet that can be placed ({frames} frames read)")]
    NoIpPackets { frames: usize },
}

impl TraceError {
    /// Never the environment.
    pub fn is_environment(&self) -> bool {
        false
    }

    /// Always bad input: the capture named cannot be read or used (CLI exit 2).
    pub fn is_bad_input(&self) -> bool {
        true
    }
}

/// An agent report or a set of reports the controller refuses.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ReportError {
    #[error("no agent reports")]
    NoReports,
    #[error("server {0} reported twice")]
    DuplicateServer(u32),
    #[error("server {server} maps {got} buckets, the load balancer has {expected}")]
    WrongBucketCount {
        server: u32,
        got: usize,
        expected: usize,
    },
    #[error("server {server} reports {got} core loads, expected {expected}")]
    WrongCoreCount {
        server: u32,
        got: usize,
        expected: usize,
    },
    #[error("server {server} reports no cores")]
    NoCores { server: u32 },
    #[error("server {server} maps bucket {bucket} to core {core}, but reports only {cores} cores")]
    CoreOutOfRange {
        server: u32,
        bucket: usize,
        core: u32,
        cores: usize,
    },
    #[error("server {server} core {core} load {load} is negative")]
    NegativeLoad { server: u32, core: usize, load: f64 },
    #[error("server {server} core {core} load is not a number ({load})")]
    NonFiniteLoad { server: u32, core: usize, load: f64 },
    #[error("server {server} core {core} load {load} exceeds the sanity bound {max}")]
    AbsurdLoad {
        server: u32,
        core: usize,
        load: f64,
        max: f64,
    },
    #[error("the controller has 0 buckets")]
    NoBuckets,
    #[error("group {group} is empty")]
    EmptyGroup { group: usize },
    #[error("group summaries cover {got} buckets, expected {expected}")]
    GroupBucketMismatch { got: usize, expected: usize },
}

impl ReportError {
    /// Never the environment.
    pub fn is_environment(&self) -> bool {
        false
    }

    /// Never bad input: a report comes from an agent (or the simulated
    /// ones), so refusing it means the operation failed (CLI exit 1).
    pub fn is_bad_input(&self) -> bool {
        false
    }
}

/// A simulation that cannot be set up.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum SimError {
    #[error("{what} must be at least 1 (got {got})")]
    Zero { what: &'static str, got: u64 },
    #[error("{what} is {got}, more than the limit {max}")]
    TooLarge {
        what: &'static str,
        got: u64,
        max: u64,
    },
    #[error("speedup must be a positive finite number (got {0})")]
    BadSpeedup(f64),
    #[error("report rate must be a positive finite number of Hz, at most 1e6 (got {0})")]
    BadRate(f64),
    #[error("the measurement window must be between 1 ms and 1 hour (got {0} s)")]
    BadWindow(f64),
    #[error("the replay holds no packets")]
    Empty,
    #[error(transparent)]
    Rss(#[from] rss::RssError),
    #[error(transparent)]
    Report(#[from] ReportError),
}

impl SimError {
    /// Never the environment.
    pub fn is_environment(&self) -> bool {
        false
    }

    /// Bad input (CLI exit 2) but for a refused report (exit 1).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, SimError::Report(_))
    }
}
