//! A TAP device (Documentation/networking/tuntap.rst): frames written to
//! its descriptor enter the kernel as if received on the device; frames the
//! kernel sends out of it are read from the descriptor.
//!
//! TAP rather than TUN (both come from /dev/net/tun): the device has a MAC
//! address, so the kernel answers ARP for the receiver's address itself and
//! the frames cross the driver unchanged in both directions.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::WireError;

const IFF_NAPI: i16 = 0x0010;

#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: i16,
    _pad: [u8; 22],
}

pub(crate) struct Tap {
    fd: OwnedFd,
}

impl Tap {
    /// Creates TAP device `name` in the calling thread's network namespace.
    /// `napi`: IFF_NAPI, frames written go through NAPI and GRO.
    pub(crate) fn create(name: &str, napi: bool) -> Result<Tap, WireError> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(WireError::Config(format!("TAP name '{name}'")));
        }
        // SAFETY: open(2) of a fixed path; owned below.
        let raw = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(WireError::Io {
                op: "open /dev/net/tun".into(),
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: (libc::IFF_TAP | libc::IFF_NO_PI) as i16 | if napi { IFF_NAPI } else { 0 },
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads and writes an ifreq, which req lays out.
        let rc =
            unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReqFlags) };
        if rc < 0 {
            return Err(WireError::Io {
                op: format!("TUNSETIFF {name}"),
                source: io::Error::last_os_error(),
            });
        }
        Ok(Tap { fd })
    }

    /// Injects one frame. `Ok(false)`: the kernel refused it.
    pub(crate) fn write(&self, frame: &[u8]) -> bool {
        // SAFETY: the buffer is valid for the call.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        n == frame.len() as isize
    }

    /// Reads one frame the kernel sent, if any.
    pub(crate) fn read(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: the buffer is valid for the call.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        (n > 0).then_some(n as usize)
    }
}

impl AsRawFd for Tap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
