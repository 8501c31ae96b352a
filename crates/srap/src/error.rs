//! Errors of the port predictor and planner. Each variant names what is wrong
//! and, where there is one, what to do about it.

use std::io;
use std::path::PathBuf;

use rss::RssError;
use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SrapError {
    #[error(transparent)]
    Rss(#[from] RssError),
    /// The receiver does not hash the source port for this flow type, so no
    /// choice of port changes where the flow lands.
    #[error(
        "the receiver hashes only {hashed} of {flow_type} flows, not the source port, so source ports \
         cannot steer them (the receiver would need e.g. `ethtool -N DEV rx-flow-hash {flow_type} sdfn`)"
    )]
    PortNotHashed {
        flow_type: &'static str,
        hashed: String,
    },
    #[error("protocol {0} has no ports; only TCP and UDP flows can be steered by source port")]
    NoPorts(String),
    #[error("local and remote address must be the same family ({local} vs {remote})")]
    MixedFamilies { local: String, remote: String },
    #[error(
        "port range {low}-{high} has {found} usable source ports for the requested {wanted} flows \
         (ports in use, reserved or outside ip_local_port_range are skipped); widen the range or close connections"
    )]
    Exhausted {
        wanted: usize,
        found: usize,
        low: u16,
        high: u16,
    },
    #[error("bad port range '{0}' (expected LOW-HIGH with 1 <= LOW <= HIGH <= 65535)")]
    BadPortRange(String),
    #[error("bad port list '{0}' (expected PORT or LOW-HIGH, comma separated)")]
    BadPortList(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: unexpected line '{line}'")]
    Parse { path: PathBuf, line: String },
    #[error("invalid parameter: {0}")]
    Parameter(String),
}

impl SrapError {
    /// True for missing privilege (reading the host's port settings; CLI
    /// exit 3).
    pub fn is_environment(&self) -> bool {
        matches!(self, SrapError::Read { source, .. }
            if source.kind() == io::ErrorKind::PermissionDenied)
    }

    /// True for bad input (exit 2): a config, flow, range or parameter that
    /// cannot be steered or parsed, or a port range smaller than the flows
    /// asked for. Neither this nor [`is_environment`](Self::is_environment):
    /// the operation failed (the ports of a large enough range are in use,
    /// a host file that cannot be read or parsed; exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            SrapError::Exhausted {
                wanted, low, high, ..
            } => usize::from(high.saturating_sub(*low)) + 1 < *wanted,
            SrapError::Rss(_)
            | SrapError::PortNotHashed { .. }
            | SrapError::NoPorts(_)
            | SrapError::MixedFamilies { .. }
            | SrapError::BadPortRange(_)
            | SrapError::BadPortList(_)
            | SrapError::Parameter(_) => true,
            SrapError::Read { .. } | SrapError::Parse { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nine flows cannot fit a range of eight ports: the range given is
    /// wrong (exit 2). In a range large enough, ports in use: the host's
    /// state, so the operation failed (exit 1).
    #[test]
    fn exhausted_is_bad_input_only_when_the_range_is_too_small() {
        let exhausted = |high| SrapError::Exhausted {
            wanted: 9,
            found: 8,
            low: 40000,
            high,
        };
        assert!(exhausted(40007).is_bad_input());
        assert!(!exhausted(40100).is_bad_input());
        assert!(!exhausted(40100).is_environment());
        assert!(SrapError::BadPortRange("x".into()).is_bad_input());
    }
}
