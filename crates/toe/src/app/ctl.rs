//! The control channel: fixed-size requests and replies
//! (`struct toe_req`, `struct toe_resp`) over a SOCK_SEQPACKET UNIX socket,
//! with descriptors (the memfd, eventfds) passed as SCM_RIGHTS.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use super::layout::{Request, Response};

/// Most descriptors in one message.
const MAX_FDS: usize = 2;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation.
    let fd = check(unsafe {
        libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: just created, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_encoded_bytes();
    if bytes.len() >= a.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: a UNIX socket path is at most 107 bytes",
                path.display()
            ),
        ));
    }
    for (d, s) in a.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok((a, size_of::<libc::sockaddr_un>() as libc::socklen_t))
}

/// A listening SOCK_SEQPACKET socket at `path` (non-blocking).
pub fn listen(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket()?;
    let (a, len) = sockaddr(path)?;
    // SAFETY: a valid address of `len` bytes.
    check(unsafe { libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) })?;
    // SAFETY: a bound socket.
    check(unsafe { libc::listen(fd.as_raw_fd(), 64) })?;
    set_nonblocking(&fd)?;
    Ok(fd)
}

/// A connection to the service at `path`.
pub fn connect(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket()?;
    let (a, len) = sockaddr(path)?;
    // SAFETY: a valid address of `len` bytes.
    check(unsafe { libc::connect(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) })
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(fd)
}

/// A pending connection of `listener`, if any.
pub fn accept(listener: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: a listening socket; no address wanted.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: just accepted.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

pub fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: valid descriptor.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: valid descriptor.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Sends `msg` (a plain repr(C) value) with `fds`.
fn send<T: Copy>(sock: &OwnedFd, msg: &T, fds: &[RawFd]) -> io::Result<()> {
    assert!(fds.len() <= MAX_FDS);
    let mut iov = libc::iovec {
        iov_base: (msg as *const T).cast_mut().cast(),
        iov_len: size_of::<T>(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid; fields set below.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if !fds.is_empty() {
        let bytes = std::mem::size_of_val(fds);
        // SAFETY: the control buffer holds CMSG_SPACE(bytes) (64 bytes are
        // enough for MAX_FDS descriptors); the header is written in place.
        unsafe {
            mh.msg_control = cbuf.as_mut_ptr().cast();
            mh.msg_controllen = libc::CMSG_SPACE(bytes as u32) as usize;
            let cm = libc::CMSG_FIRSTHDR(&mh);
            (*cm).cmsg_level = libc::SOL_SOCKET;
            (*cm).cmsg_type = libc::SCM_RIGHTS;
            (*cm).cmsg_len = libc::CMSG_LEN(bytes as u32) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cm).cast(), fds.len());
        }
    }
    // SAFETY: a valid message.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one message into a `T`; Ok(None) at end of stream or on a
/// message of the wrong size.
fn recv<T: Copy + Default>(sock: &OwnedFd) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut msg = T::default();
    let mut iov = libc::iovec {
        iov_base: (&mut msg as *mut T).cast(),
        iov_len: size_of::<T>(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid; fields set below.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: a valid message with buffers of the sizes given.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut mh, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote.
    unsafe {
        let mut cm = libc::CMSG_FIRSTHDR(&mh);
        while !cm.is_null() {
            if (*cm).cmsg_level == libc::SOL_SOCKET && (*cm).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*cm).cmsg_len - libc::CMSG_LEN(0) as usize) / size_of::<RawFd>();
                let data = libc::CMSG_DATA(cm).cast::<RawFd>();
                for k in 0..count {
                    fds.push(OwnedFd::from_raw_fd(data.add(k).read_unaligned()));
                }
            }
            cm = libc::CMSG_NXTHDR(&mh, cm);
        }
    }
    // A message longer than a `T` arrives cut to its size: malformed too.
    if n as usize != size_of::<T>() || mh.msg_flags & libc::MSG_TRUNC != 0 {
        return Ok(None);
    }
    Ok(Some((msg, fds)))
}

pub fn send_request(sock: &OwnedFd, req: &Request) -> io::Result<()> {
    send(sock, req, &[])
}

pub fn recv_request(sock: &OwnedFd) -> io::Result<Option<Request>> {
    Ok(recv::<Request>(sock)?.map(|(r, _)| r))
}

pub fn send_response(sock: &OwnedFd, resp: &Response, fds: &[RawFd]) -> io::Result<()> {
    send(sock, resp, fds)
}

pub fn recv_response(sock: &OwnedFd) -> io::Result<(Response, Vec<OwnedFd>)> {
    recv::<Response>(sock)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the toe service closed the control connection",
        )
    })
}

/// A new eventfd (non-blocking: the service only ever adds to it; the
/// application waits with poll and drains without blocking).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd creation.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: just created.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd (wakes whoever polls it).
pub fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a u64. It fails only when the counter
    // would overflow, and then the descriptor is readable anyway.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Empties a readiness descriptor (an eventfd, or a pipe's read end:
/// [`listener_pipe`]) so it no longer polls readable; never blocks.
pub fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 64];
    // SAFETY: reads at most 64 bytes into `buf` (an eventfd gives its
    // 8-byte counter); the descriptor is non-blocking, so the loop ends at
    // EAGAIN once nothing is left.
    while unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}

/// A listener's readiness: the read end (what the application polls; a
/// pipe's read end polls readable while a byte waits and, as the kernel's
/// listening socket, never writable, where an eventfd always would) and
/// the write end the service raises it with. Both non-blocking.
pub fn listener_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: both were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Makes a [`listener_pipe`]'s read end readable (writes one byte to its
/// write end). A full pipe refuses the byte, and is readable anyway.
pub fn raise(write_end: &OwnedFd) {
    // SAFETY: writes one byte from a local.
    unsafe { libc::write(write_end.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What poll(2) reports for `fd` right now.
    fn events(fd: &OwnedFd) -> libc::c_short {
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        assert!(unsafe { libc::poll(&mut p, 1, 0) } >= 0);
        p.revents
    }

    #[test]
    fn a_listener_pipe_is_readable_while_raised_and_never_writable() {
        let (read, write) = listener_pipe().unwrap();
        assert_eq!(events(&read), 0);
        raise(&write);
        raise(&write);
        assert_eq!(events(&read), libc::POLLIN);
        drain(&read);
        assert_eq!(events(&read), 0);
    }

    #[test]
    fn an_eventfd_drains_to_zero() {
        let fd = eventfd().unwrap();
        signal(&fd);
        assert_eq!(events(&fd), libc::POLLIN | libc::POLLOUT);
        drain(&fd);
        assert_eq!(events(&fd), libc::POLLOUT);
    }
}
