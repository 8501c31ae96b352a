//! Errors of the software RSS operations. Each variant names the device, map
//! or value involved, and [`NicError::is_environment`] tells bad input (exit 2)
//! from a missing privilege or kernel feature (exit 3).

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NicError {
    #[error("no network device named '{dev}'{}", in_netns(.netns))]
    NoSuchDevice { dev: String, netns: Option<String> },
    #[error("no network namespace named '{netns}' (looked for /run/netns/{netns})")]
    NoSuchNetns { netns: String },
    #[error("Steer's software RSS is not attached to '{dev}'{}", in_netns(.netns))]
    NotAttached { dev: String, netns: Option<String> },
    #[error("'{dev}' runs an XDP program that is not Steer's (id {prog_id}); detach it first (ip link set dev {dev} xdp off)")]
    ForeignProgram { dev: String, prog_id: u32 },
    #[error("software RSS cannot apply this config: {reason}")]
    UnsupportedConfig { reason: String },
    #[error("invalid RSS config: {0}")]
    InvalidConfig(#[from] rss::RssError),
    #[error("software RSS on '{dev}' was attached without flow tracking; attach with track_flows to count flows")]
    FlowsNotTracked { dev: String },
    #[error("the veth peer of '{dev}' ({peer}{}) has tx checksum offload on: frames redirected through the cpumap would keep unfilled checksums and TCP would drop them; fix: {fix}", in_netns(.peer_netns))]
    PeerChecksumOffload {
        dev: String,
        peer: String,
        peer_netns: Option<String>,
        fix: String,
    },
    #[error("{what}: needs root (CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN)")]
    Privilege { what: String },
    #[error("kernel feature missing: {what}")]
    KernelFeature { what: String },
    #[error("BPF {op}: {source}")]
    Bpf {
        op: String,
        #[source]
        source: libbpf_rs::Error,
    },
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: std::io::Error,
    },
    /// A per-CPU map value that could not be read as what the program
    /// writes: the counters are unknown, not zero.
    #[error(transparent)]
    MapValue(#[from] host::bpf::MapValueError),
    #[error("state file {path} is unreadable: {reason}")]
    State { path: String, reason: String },
    /// Reading the NIC's own RSS (ethtool netlink) failed.
    /// The NIC's own RSS could not be read. The message leaves out the
    /// source, which a printer of the error chain shows next.
    #[error("NIC RSS")]
    NicRss(#[from] rss::live::LiveError),
    /// A config file or stated config (--config, --key) that rss refused,
    /// as rss says it.
    #[error(transparent)]
    Rss(rss::RssError),
    /// None of the places a config can come from was named.
    #[error(
        "say where the RSS config comes from: --config FILE, --dev DEV, or --key KEY --queues N"
    )]
    NoConfigSource,
}

fn in_netns(netns: &Option<String>) -> String {
    match netns {
        Some(ns) => format!(" in namespace '{ns}'"),
        None => String::new(),
    }
}

impl NicError {
    /// True when the failure comes from the environment (privilege, kernel
    /// features, a device setting to change first), not from the input:
    /// the CLI exits with 3.
    pub fn is_environment(&self) -> bool {
        match self {
            NicError::Privilege { .. }
            | NicError::KernelFeature { .. }
            | NicError::PeerChecksumOffload { .. } => true,
            NicError::Bpf { source, .. } => matches!(
                source.kind(),
                libbpf_rs::ErrorKind::PermissionDenied | libbpf_rs::ErrorKind::Unsupported
            ),
            NicError::Io { source, .. } => source.kind() == std::io::ErrorKind::Unsupported,
            NicError::NicRss(e) => e.is_environment(),
            NicError::Rss(e) => e.is_environment(),
            _ => false,
        }
    }

    /// True when the input is wrong: a device, namespace or config that
    /// names nothing or cannot be applied, or a device without what the
    /// command needs attached (exit 2). Neither this nor
    /// [`is_environment`](Self::is_environment): the operation failed
    /// (a foreign XDP program, a BPF or I/O failure, a broken state file;
    /// exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            NicError::NicRss(e) => e.is_bad_input(),
            NicError::Rss(e) => e.is_bad_input(),
            _ => matches!(
                self,
                NicError::NoSuchDevice { .. }
                    | NicError::NoSuchNetns { .. }
                    | NicError::NotAttached { .. }
                    | NicError::UnsupportedConfig { .. }
                    | NicError::InvalidConfig(_)
                    | NicError::FlowsNotTracked { .. }
                    | NicError::NoConfigSource
            ),
        }
    }

    /// A failed BPF operation `op` (open, load, a map access) of a Steer
    /// XDP program: a refusal is missing privilege, anything else the
    /// operation's failure. The load balancer's program (crate lbxdp)
    /// fails the same way.
    pub fn bpf(op: impl Into<String>, source: libbpf_rs::Error) -> Self {
        let op = op.into();
        match source.kind() {
            libbpf_rs::ErrorKind::PermissionDenied => NicError::Privilege { what: op },
            _ => NicError::Bpf { op, source },
        }
    }

    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Self {
        let op = op.into();
        match source.kind() {
            std::io::ErrorKind::PermissionDenied => NicError::Privilege { what: op },
            _ => NicError::Io { op, source },
        }
    }
}

/// The host's errors as this crate's, in the variants that classify them
/// the same way (a namespace that names nothing is bad input, a refusal is
/// privilege).
impl From<host::HostError> for NicError {
    fn from(e: host::HostError) -> Self {
        match e {
            host::HostError::NoSuchNetns { name } => NicError::NoSuchNetns { netns: name },
            host::HostError::Privilege { what } => NicError::Privilege { what },
            host::HostError::Io { what, source } => NicError::io(what, source),
            other => NicError::io("run a tool", other.into_io()),
        }
    }
}
