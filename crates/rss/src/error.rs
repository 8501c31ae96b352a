//! Errors of the RSS model. Each variant names the value that is wrong so the
//! CLI can print one line that tells the user what to fix.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RssError {
    #[error(
        "RSS key is {len} bytes but hashing a {input}-byte input needs at least {needed} bytes"
    )]
    KeyTooShort {
        len: usize,
        input: usize,
        needed: usize,
    },
    #[error("RSS key is not hex: {0}")]
    KeyNotHex(String),
    #[error("RSS key is empty")]
    KeyEmpty,
    #[error("indirection table is empty")]
    EmptyTable,
    #[error("indirection table entry {index} names queue {queue}, but the device has only {queues} queues")]
    QueueOutOfRange {
        index: usize,
        queue: u32,
        queues: u32,
    },
    #[error("queue count must be at least 1")]
    NoQueues,
    #[error("indirection table of {size} entries is larger than the kernel allows ({max})")]
    TableTooLarge { size: usize, max: usize },
    #[error("{weights} weights given for {queues} queues (give one per queue)")]
    WeightCount { weights: usize, queues: u32 },
    #[error("weights must not all be zero")]
    ZeroWeights,
    #[error("queue_cpus lists {listed} queues but the device has {queues}")]
    QueueCpuCount { listed: usize, queues: u32 },
    #[error("hash function '{0}' is reported by the device, but its definition is driver-specific; Steer predicts only Toeplitz")]
    UnsupportedHash(String),
    #[error("source and destination must both be IPv4 or both IPv6 ({src} vs {dst})")]
    MixedFamilies { src: String, dst: String },
    #[error("'{0}' is not an address or address:port (write IPv6 as [addr]:port)")]
    BadEndpoint(String),
    #[error("only one of the two ports is given; give both ports or neither")]
    OnePort,
    #[error("invalid RSS config: {0}")]
    InvalidConfig(String),
    #[error(
        "`default`: Linux drivers hash with a random per-boot key (netdev_rss_key), so a \
         sender cannot predict the receiver's cores; steering needs the receiver's real key \
         (its config file, its key in hex, or @FILE holding the hex)"
    )]
    KeyUnknowable,
    /// A key or config file that cannot be read (`kind` decides whether the
    /// environment is at fault).
    #[error("cannot read {what} {path}: {reason}")]
    Unreadable {
        what: &'static str,
        path: String,
        kind: std::io::ErrorKind,
        reason: String,
    },
    /// A key or config file that was read but does not parse.
    #[error("{path}: {source}")]
    InFile {
        path: String,
        #[source]
        source: Box<RssError>,
    },
    /// The value of a command-line option (`--key`) is at fault.
    #[error("{option}")]
    Option {
        option: &'static str,
        #[source]
        source: Box<RssError>,
    },
}

impl RssError {
    /// The environment only when a named file may not be read; every other
    /// variant is about a value given to the model (the CLI's exit codes:
    /// `is_environment` 3, `is_bad_input` 2).
    pub fn is_environment(&self) -> bool {
        match self {
            RssError::Unreadable { kind, .. } => *kind == std::io::ErrorKind::PermissionDenied,
            RssError::Option { source, .. } => source.is_environment(),
            _ => false,
        }
    }

    /// Otherwise bad input: the key, table, endpoint or config given is
    /// wrong, or its file is missing (exit 2). Where a device's own config
    /// is at fault, the caller wraps
    /// this in its own error, which classifies it instead.
    pub fn is_bad_input(&self) -> bool {
        !self.is_environment()
    }
}
