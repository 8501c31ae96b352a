//! The binders' errors: one enum, each variant carrying what failed.

use std::io;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BinderError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN): {what}")]
    Privilege { what: String },
    #[error("no cgroup v2 hierarchy is mounted (none in /proc/self/mounts)")]
    NoCgroup2,
    #[error("{path} is not a directory of a cgroup v2 hierarchy")]
    NotACgroup { path: String },
    #[error("the cgroup binder is not attached to {path} (no pins in {pins})")]
    NotAttached { path: String, pins: String },
    #[error("no network namespace named {name} (/run/netns/{name})")]
    NoSuchNetns { name: String },
    #[error("cannot plan ports: {0}")]
    Plan(String),
    #[error(transparent)]
    Srap(#[from] srap::SrapError),
    /// A BPF operation failed: nic owns how a BPF failure reads (a
    /// refusal is privilege; a failed load the kernel's).
    #[error(transparent)]
    Nic(#[from] nic::NicError),
}

impl BinderError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        BinderError::Io {
            what: what.into(),
            source,
        }
    }

    /// A failed BPF operation (open, attach, a map access): nic's, as the
    /// load balancer's are, so a refusal reads as privilege everywhere.
    pub(crate) fn bpf(what: impl Into<String>, source: libbpf_rs::Error) -> Self {
        BinderError::Nic(nic::NicError::bpf(what, source))
    }

    /// True when the error is about privilege or the kernel (exit code 3),
    /// false for bad input (exit code 2).
    pub fn is_environment(&self) -> bool {
        match self {
            BinderError::Privilege { .. } | BinderError::NoCgroup2 => true,
            BinderError::Io { source, .. } => source.kind() == io::ErrorKind::PermissionDenied,
            BinderError::Srap(e) => e.is_environment(),
            BinderError::Nic(e) => e.is_environment(),
            _ => false,
        }
    }

    /// True for bad input (exit 2): a path that is not a cgroup, a cgroup
    /// without the binder, a namespace that does not exist, a plan that
    /// cannot be made from what was given. Neither this nor
    /// [`is_environment`](Self::is_environment): the operation failed (an
    /// I/O or BPF failure; exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            BinderError::NotACgroup { .. }
            | BinderError::NotAttached { .. }
            | BinderError::NoSuchNetns { .. }
            | BinderError::Plan(_) => true,
            BinderError::Srap(e) => e.is_bad_input(),
            BinderError::Nic(e) => e.is_bad_input(),
            _ => false,
        }
    }
}

/// The host's errors as the binders': a namespace that names nothing is
/// [`BinderError::NoSuchNetns`] (bad input), not being root
/// [`BinderError::Privilege`], a failed system call [`BinderError::Io`].
impl From<host::HostError> for BinderError {
    fn from(e: host::HostError) -> Self {
        match e {
            host::HostError::NoSuchNetns { name } => BinderError::NoSuchNetns { name },
            host::HostError::Privilege { what } => BinderError::Privilege { what },
            host::HostError::Io { what, source } => BinderError::Io { what, source },
            other => BinderError::io("run a tool", other.into_io()),
        }
    }
}
