//! A connection's readiness as the kernel reports it: a UNIX stream socket
//! pair whose one end is the program's descriptor for the connection and
//! whose other end the service keeps. The kernel's poll, select and epoll
//! then see a real socket whose POLLIN, POLLOUT, POLLRDHUP, POLLHUP and
//! POLLERR the service drives as the kernel drives a TCP socket's
//! (`tcp_poll`); the protocol is in `shim/toe_app.h`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The application end's send buffer (the kernel doubles it): small, so
/// that plugging it takes a few writes, and large enough that an unplugged
/// end is writable.
const APP_SNDBUF: libc::c_int = 16384;

/// The service's hold on one connection's descriptor.
pub struct Notice {
    /// A copy of the application's end: a reset queues a byte through it.
    app: OwnedFd,
    /// The service's end; gone once the connection was reset.
    svc: Option<OwnedFd>,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

impl Notice {
    pub fn new() -> io::Result<Notice> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: writes two descriptors into `fds`.
        check(unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        })?;
        // SAFETY: just created, owned by nobody else.
        let (app, svc) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: a valid socket and an int option.
        check(unsafe {
            libc::setsockopt(
                app.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&APP_SNDBUF as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        })?;
        Ok(Notice {
            app,
            svc: Some(svc),
        })
    }

    /// The descriptor handed to the application.
    pub fn app_fd(&self) -> RawFd {
        self.app.as_raw_fd()
    }

    /// POLLIN on the application's end.
    pub fn readable(&self) {
        if let Some(svc) = &self.svc {
            send_byte(svc);
        }
    }

    /// The peer's FIN: POLLIN|POLLRDHUP on the application's end.
    pub fn eof(&self) {
        if let Some(svc) = &self.svc {
            // SAFETY: a valid socket.
            unsafe { libc::shutdown(svc.as_raw_fd(), libc::SHUT_WR) };
        }
    }

    /// Reads away what the application queued on its end (its plug): its
    /// send buffer empties and the kernel wakes the writer with POLLOUT.
    /// Only the bytes queued now: a writer woken meanwhile that filled the
    /// ring again plugs anew, and that plug must stay.
    pub fn writable(&self) {
        let Some(svc) = &self.svc else {
            return;
        };
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes an int.
        if unsafe { libc::ioctl(svc.as_raw_fd(), libc::FIONREAD, &mut queued) } < 0 {
            return;
        }
        let mut left = queued.max(0) as usize;
        let mut buf = [0u8; 16384];
        while left > 0 {
            // SAFETY: reads into a local buffer of at least that size.
            let n = unsafe {
                libc::recv(
                    svc.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    left.min(buf.len()),
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                return;
            }
            left -= n as usize;
        }
    }

    /// A reset: the service's end closes with a byte unread, so the kernel
    /// marks the application's end ECONNRESET (POLLERR) and shut both ways
    /// (POLLHUP, POLLIN|POLLRDHUP), as a reset TCP socket polls.
    pub fn reset(&mut self) {
        if self.svc.is_some() {
            send_byte(&self.app);
            self.svc = None;
        }
    }
}

/// The application's side of the protocol (toe_app.h), as the shim does it.
pub mod app {
    use std::os::fd::RawFd;

    /// Reads away the service's readable bytes: exactly those queued, for
    /// a read of an empty socket would take a reset's pending error.
    pub fn drain(fd: RawFd) {
        let mut buf = [0u8; 256];
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes an int.
        while unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) } == 0 && queued > 0 {
            let n = (queued as usize).min(buf.len());
            // SAFETY: reads into a local buffer of at least `n` bytes.
            if unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), n, libc::MSG_DONTWAIT) } <= 0 {
                return;
            }
        }
    }

    /// Fills the send buffer: the descriptor polls not writable until the
    /// service reads the plug away.
    pub fn plug(fd: RawFd) {
        let zeros = [0u8; 16384];
        // SAFETY: sends from a local buffer of that size.
        while unsafe {
            libc::send(
                fd,
                zeros.as_ptr().cast(),
                zeros.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        } > 0
        {}
    }

    /// Waits until `fd` polls one of `events` (or an error or hang-up);
    /// true if the service's end hung up: a reset closes it, and so does
    /// a service that is gone, after which nothing will wake the caller.
    pub fn wait(fd: RawFd, events: i16) -> std::io::Result<bool> {
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut p, 1, -1) } >= 0 {
                return Ok(p.revents & (libc::POLLHUP | libc::POLLERR) != 0);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Queues one byte (never blocks; a full buffer is readable already).
fn send_byte(fd: &OwnedFd) {
    // SAFETY: sends one byte from a local.
    unsafe {
        libc::send(
            fd.as_raw_fd(),
            [1u8].as_ptr().cast(),
            1,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revents(fd: RawFd) -> i16 {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        assert!(unsafe { libc::poll(&mut p, 1, 0) } >= 0);
        p.revents
    }

    #[test]
    fn the_descriptor_polls_as_the_service_drives_it() {
        let mut n = Notice::new().unwrap();
        let app = n.app_fd();
        assert_eq!(revents(app), libc::POLLOUT);
        n.readable();
        assert_eq!(revents(app), libc::POLLIN | libc::POLLOUT);
        app::plug(app);
        assert_eq!(revents(app), libc::POLLIN, "a plugged end is not writable");
        n.writable();
        assert_eq!(revents(app), libc::POLLIN | libc::POLLOUT);
        n.eof();
        assert_eq!(revents(app), libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP);
        n.readable();
        n.reset();
        // Reading the readable byte away leaves the reset's error pending.
        app::drain(app);
        let r = revents(app);
        assert_eq!(
            r & (libc::POLLERR | libc::POLLHUP),
            libc::POLLERR | libc::POLLHUP,
            "{r:#x}"
        );
    }
}
