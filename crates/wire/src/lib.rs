//! `wire`: what sits between the lab's hosts and in front of the receiver's
//! TCP, all in userspace on [`pktio`] batches.
//!
//! - [`impair`] and [`sched`]: per-direction delay (constant, normal,
//!   uniform), loss (uniform, Gilbert-Elliott) and rate limit, with frames
//!   leaving in departure-time order (a min-heap), so reordering is exactly
//!   what independent per-frame delays imply. netem's job, which this
//!   kernel cannot do (no netem qdisc).
//! - [`forward`]: the forwarder loop between two devices ([`Wire`],
//!   [`WireHandle`]), with counters (in, out, dropped by policy, dropped by
//!   overload, queued), duplicate ACKs seen and the applied-delay error.
//! - [`driver`]: the SRPIC receive path: a NAPI-like poll of the
//!   wire-facing device (budget, coalescing interval), `order::Sorter` per
//!   batch, injection into the kernel through a TAP device that carries the
//!   receiver's address; the kernel's ACKs go back out the device.
//! - [`report`]: what a run of either loop reports, and how it reads.
//! - `runner`: what both loops share: thread setup, the stats snapshot,
//!   the handle that runs a loop on its own thread.
//!
//! Lab topology (`lab::LabSpec::wire`): `snd:veth0 — to-snd [wire netns]
//! to-rcv — rcv:veth0`. docs/srpic-experiment.md and docs/performance.md
//! describe the measurements.

#![deny(unsafe_code)]

pub mod driver;
pub mod forward;
pub mod impair;
mod napi;
pub mod report;
mod runner;
pub mod sched;
pub mod stats;
mod tap;
mod timed;

pub use driver::{Driver, DriverArgs, DriverConfig, DriverHandle, DriverStats};
pub use forward::{DirectionStats, Wire, WireConfig, WireHandle, WireStats};
pub use impair::{Delay, Impairment, Loss, WireSpecs};
pub use report::{DriverRun, WireRun};

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WireError {
    #[error(transparent)]
    PktIo(#[from] pktio::PktIoError),
    #[error("invalid wire config: {0}")]
    Config(String),
    #[error("sorter: {0}")]
    Sorter(#[from] order::sorter::ConfigError),
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: std::io::Error,
    },
    #[error("'{command}' failed: {stderr}")]
    Command { command: String, stderr: String },
}

/// The host's errors as the wire's, classified as before: a tool that
/// failed is [`WireError::Command`] (with its stderr); the rest (a
/// namespace, a program that could not be started) are pktio's.
impl From<host::HostError> for WireError {
    fn from(e: host::HostError) -> Self {
        if let host::HostError::Failed {
            command, stderr, ..
        } = e
        {
            return WireError::Command { command, stderr };
        }
        WireError::PktIo(e.into())
    }
}

impl WireError {
    /// True for missing privilege or kernel features (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        match self {
            WireError::PktIo(e) => e.is_environment(),
            WireError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::Unsupported
            ),
            _ => false,
        }
    }

    /// True for a bad config, device or namespace (exit 2). Neither this
    /// nor [`is_environment`](Self::is_environment): an I/O operation or a
    /// command failed (exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            WireError::PktIo(e) => e.is_bad_input(),
            WireError::Config(_) | WireError::Sorter(_) => true,
            _ => false,
        }
    }
}
