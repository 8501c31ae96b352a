//! [`LiveError`]: why reading a live device failed.
//!
//! The variants separate three kinds of failure, because the CLI maps them to
//! different exit codes: bad input (a device that does not exist: exit 2), the
//! environment (missing privilege, a kernel or driver without the feature:
//! exit 3, see [`LiveError::is_environment`]), and everything else (a reply the
//! kernel should never send, an I/O error).

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use crate::error::RssError;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LiveError {
    /// No network device of that name in this network namespace.
    #[error("no network device named '{dev}' in this network namespace")]
    NoSuchDevice { dev: String },

    /// The name can never name a device (empty, too long, contains '/').
    #[error("'{dev}' is not a valid network device name: {reason}")]
    InvalidDeviceName { dev: String, reason: &'static str },

    /// The device has no RSS that Steer can read (returned by
    /// [`read_config`](super::read_config) instead of a guessed config).
    #[error("{dev} has no readable RSS configuration: {reason}")]
    NoRss { dev: String, reason: String },

    /// The kernel refused for lack of privilege (EPERM / EACCES).
    #[error("{what}: permission denied (needs CAP_NET_ADMIN or root): {source}")]
    PermissionDenied {
        what: String,
        #[source]
        source: io::Error,
    },

    /// The running kernel (or the device's driver) lacks a feature Steer needs.
    #[error("{what}: not supported by this kernel or driver: {source}")]
    Unsupported {
        what: String,
        #[source]
        source: io::Error,
    },

    /// Any other error the kernel returned.
    #[error("{what}: {source}")]
    Kernel {
        what: String,
        #[source]
        source: io::Error,
    },

    /// A netlink reply that does not parse.
    #[error("malformed netlink reply to {what}: {reason}")]
    Decode { what: String, reason: String },

    /// A /proc or /sys file that could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A /proc or /sys file whose content does not parse.
    #[error("cannot parse {}: {reason}", path.display())]
    Parse { path: PathBuf, reason: String },

    /// The parts read from the device do not form a valid [`crate::RssConfig`].
    #[error("the device's RSS configuration is inconsistent: {0}")]
    Model(#[from] RssError),

    /// The network namespace to read in could not be entered.
    #[error(transparent)]
    Namespace(#[from] host::HostError),
}

impl LiveError {
    /// True when the failure comes from the environment rather than the input:
    /// missing privilege (EPERM/EACCES), a kernel or driver without the needed
    /// feature, or a device without RSS. The CLI exits 3 for these.
    pub fn is_environment(&self) -> bool {
        match self {
            LiveError::Namespace(e) => e.is_environment(),
            _ => matches!(
                self,
                LiveError::PermissionDenied { .. }
                    | LiveError::Unsupported { .. }
                    | LiveError::NoRss { .. }
            ),
        }
    }

    /// True for input the user can fix (a misspelt device). The CLI exits 2.
    pub fn is_bad_input(&self) -> bool {
        match self {
            LiveError::Namespace(e) => e.is_bad_input(),
            _ => matches!(
                self,
                LiveError::NoSuchDevice { .. } | LiveError::InvalidDeviceName { .. }
            ),
        }
    }

    /// Classifies an errno returned by the kernel for the operation `what` on
    /// device `dev`.
    pub(crate) fn from_errno(what: impl Into<String>, dev: &str, source: io::Error) -> Self {
        let what = what.into();
        match source.raw_os_error() {
            Some(libc::ENODEV) => LiveError::NoSuchDevice {
                dev: dev.to_string(),
            },
            Some(libc::EPERM) | Some(libc::EACCES) => LiveError::PermissionDenied { what, source },
            Some(libc::EOPNOTSUPP)
            | Some(libc::ENOTTY)
            | Some(libc::EPROTONOSUPPORT)
            | Some(libc::ENOSYS)
            | Some(libc::EAFNOSUPPORT) => LiveError::Unsupported { what, source },
            _ => LiveError::Kernel { what, source },
        }
    }

    /// True when the kernel said "not supported" (EOPNOTSUPP and friends).
    pub(crate) fn is_unsupported(&self) -> bool {
        matches!(self, LiveError::Unsupported { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno(e: i32) -> io::Error {
        io::Error::from_raw_os_error(e)
    }

    #[test]
    fn errno_classes() {
        let e = LiveError::from_errno("RSS_GET", "eth9", errno(libc::ENODEV));
        assert!(matches!(e, LiveError::NoSuchDevice { ref dev } if dev == "eth9"));
        assert!(e.is_bad_input() && !e.is_environment());
        for code in [libc::EPERM, libc::EACCES, libc::EOPNOTSUPP] {
            let e = LiveError::from_errno("RSS_GET", "eth0", errno(code));
            assert!(e.is_environment(), "{e}");
        }
        let e = LiveError::from_errno("RSS_GET", "eth0", errno(libc::EINVAL));
        assert!(!e.is_environment() && !e.is_bad_input());
        let garbled = LiveError::Decode {
            what: "RSS_GET".into(),
            reason: "short".into(),
        };
        assert!(!garbled.is_environment() && !garbled.is_bad_input());
    }
}
