//! Errors of the live load balancer, one enum: each variant names what
//! failed (the map, the device, the namespace) and keeps the cause.

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LbXdpError {
    /// A system call or a command failed.
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused the program (verifier) or lacks a feature.
    #[error("kernel feature missing: {what}")]
    KernelFeature { what: String },
    /// A value the data plane cannot hold (too many backends or buckets, a
    /// short key).
    #[error("invalid load balancer configuration: {reason}")]
    Config { reason: String },
    /// An agent's report the controller refused (lb's validation).
    #[error(transparent)]
    Report(#[from] lb::ReportError),
    /// The software RSS failed, or a BPF operation (open, map access) of
    /// this crate's program did: nic, whose XDP parser and hash the load
    /// balancer's program shares, owns the BPF failure and tells a refusal
    /// (privilege) from a failed operation.
    #[error(transparent)]
    Nic(#[from] nic::NicError),
    #[error(transparent)]
    Lab(#[from] lab::LabError),
    /// A namespace, a tool (`ip`) or a thread of the host.
    #[error(transparent)]
    Host(#[from] host::HostError),
    #[error(transparent)]
    Rss(#[from] rss::RssError),
    /// A backend's agent could not start (namespace, listener, device).
    #[error("backend agent: {0}")]
    Agent(#[from] agent::AgentError),
    /// A backend's datapath counters could not be read or lack a queue: the
    /// measurement stops here rather than count the queue as idle.
    #[error("cannot read the per-queue counters of backend {backend}: {reason}")]
    Counters { backend: String, reason: String },
    /// A traffic check failed (a connection broke or returned wrong data).
    #[error("connection failed: {reason}")]
    Connection { reason: String },
}

impl LbXdpError {
    pub(crate) fn bpf(op: impl Into<String>, source: libbpf_rs::Error) -> Self {
        LbXdpError::Nic(nic::NicError::bpf(op, source))
    }

    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Self {
        LbXdpError::Io {
            op: op.into(),
            source,
        }
    }

    pub(crate) fn config(reason: impl Into<String>) -> Self {
        LbXdpError::Config {
            reason: reason.into(),
        }
    }

    /// Missing privilege or kernel feature (exit code 3), as opposed to bad
    /// input or a failed check.
    pub fn is_environment(&self) -> bool {
        match self {
            LbXdpError::KernelFeature { .. } => true,
            LbXdpError::Nic(e) => e.is_environment(),
            LbXdpError::Lab(e) => e.is_environment(),
            LbXdpError::Host(e) => e.is_environment(),
            LbXdpError::Agent(e) => e.is_environment(),
            _ => false,
        }
    }

    /// True for a configuration the data plane cannot hold, or a lab,
    /// device or agent option given wrong (exit 2). Neither this nor
    /// [`is_environment`](Self::is_environment): the run failed (BPF, I/O,
    /// a refused report, a broken connection; exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            LbXdpError::Config { .. } | LbXdpError::Rss(_) => true,
            LbXdpError::Nic(e) => e.is_bad_input(),
            LbXdpError::Lab(e) => e.is_bad_input(),
            LbXdpError::Host(e) => e.is_bad_input(),
            LbXdpError::Agent(e) => e.is_bad_input(),
            _ => false,
        }
    }
}
