//! The application's side in Rust: a context connected to the service, and
//! listeners and connections over its shared memory. Bytes move with one
//! copy each way between the caller's buffer and the double-mapped ring;
//! the calls block (polling the connection's descriptor, as the shim does:
//! [`super::notice`]) until they can make progress.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::ctl;
use super::layout::{app_flag, event, Op, Request, Response, SlotState, RING_SIZE};
use super::notice::app as notice;
use super::shm::{addr_bytes, Shm};
use crate::endpoint::TcpInfo;

/// A connection to the data path's service.
pub struct Context {
    ctl: Mutex<OwnedFd>,
    doorbell: OwnedFd,
    shm: Shm,
    local: IpAddr,
}

impl Context {
    /// Connects to the service at `path` and maps the context's memory.
    pub fn connect(path: &Path) -> io::Result<Context> {
        let sock = ctl::connect(path)?;
        ctl::send_request(
            &sock,
            &Request {
                op: Op::Hello.code(),
                ..Request::default()
            },
        )?;
        let (resp, fds) = ctl::recv_response(&sock)?;
        check(&resp)?;
        let mut fds = fds.into_iter();
        let (Some(memfd), Some(doorbell)) = (fds.next(), fds.next()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the toe service's HELLO reply lacks its descriptors",
            ));
        };
        Ok(Context {
            ctl: Mutex::new(sock),
            doorbell,
            shm: Shm::open(memfd)?,
            local: resp.addrs.sockets().0.ip(),
        })
    }

    /// The data path's address.
    pub fn local_addr(&self) -> IpAddr {
        self.local
    }

    fn call(&self, req: Request) -> io::Result<(Response, Option<OwnedFd>)> {
        let sock = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
        ctl::send_request(&sock, &req)?;
        let (resp, fds) = ctl::recv_response(&sock)?;
        check(&resp)?;
        Ok((resp, fds.into_iter().next()))
    }

    fn ring_doorbell(&self) {
        ctl::signal(&self.doorbell);
    }

    /// Accepts connections to `port` on the data path's address.
    pub fn listen(&self, port: u16) -> io::Result<Listener<'_>> {
        let (resp, efd) = self.call(Request {
            op: Op::Listen.code(),
            port,
            ..Request::default()
        })?;
        Ok(Listener {
            cx: self,
            id: resp.id,
            efd: efd.ok_or_else(missing_fd)?,
        })
    }

    /// Opens a connection to `remote`; returns once it is established.
    pub fn connect_to(&self, remote: SocketAddr) -> io::Result<Connection<'_>> {
        let (resp, efd) = self.call(Request {
            op: Op::Connect.code(),
            port: remote.port(),
            family: if remote.is_ipv4() { 4 } else { 6 },
            addr: addr_bytes(remote.ip()),
            ..Request::default()
        })?;
        let conn = Connection {
            cx: self,
            slot: resp.id as usize,
            fd: efd.ok_or_else(missing_fd)?,
        };
        let mut hung_up = false;
        loop {
            let s = conn.cx.shm.slot(conn.slot);
            match SlotState::of(s.state.load(Ordering::Acquire)) {
                SlotState::Established => return Ok(conn),
                SlotState::Connecting if hung_up => return Err(service_gone()),
                SlotState::Connecting => {
                    hung_up = notice::wait(conn.fd.as_raw_fd(), libc::POLLIN)?;
                    notice::drain(conn.fd.as_raw_fd());
                }
                _ => {
                    let ev = s.events.load(Ordering::Acquire);
                    return Err(if ev & event::REFUSED != 0 {
                        io::ErrorKind::ConnectionRefused.into()
                    } else {
                        io::ErrorKind::TimedOut.into()
                    });
                }
            }
        }
    }
}

fn check(resp: &Response) -> io::Result<()> {
    if resp.err != 0 {
        return Err(io::Error::from_raw_os_error(resp.err));
    }
    Ok(())
}

/// The service's end of a connection's descriptor hung up while the
/// connection's state says it is still open: the service is gone (it
/// writes the state before it closes the descriptor on a reset), and
/// waiting would never end.
fn service_gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the toe service is gone (its end of the connection hung up)",
    )
}

fn missing_fd() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the toe service's reply lacks its descriptor",
    )
}

/// Waits until `efd` is signalled, then resets it.
fn wait_on(efd: &OwnedFd) -> io::Result<()> {
    pktio::wait_fds(&[efd.as_raw_fd()], None).map_err(io::Error::other)?;
    ctl::drain(efd);
    Ok(())
}

/// A port the data path accepts connections to for this context.
pub struct Listener<'a> {
    cx: &'a Context,
    id: u32,
    efd: OwnedFd,
}

impl<'a> Listener<'a> {
    /// The next established connection, waiting for one.
    pub fn accept(&self) -> io::Result<Connection<'a>> {
        loop {
            match self.try_accept() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_on(&self.efd)?,
                r => return r,
            }
        }
    }

    /// The next established connection, or WouldBlock.
    pub fn try_accept(&self) -> io::Result<Connection<'a>> {
        let (resp, efd) = self.cx.call(Request {
            op: Op::Accept.code(),
            id: self.id,
            ..Request::default()
        })?;
        Ok(Connection {
            cx: self.cx,
            slot: resp.id as usize,
            fd: efd.ok_or_else(missing_fd)?,
        })
    }
}

impl Drop for Listener<'_> {
    fn drop(&mut self) {
        let _ = self.cx.call(Request {
            op: Op::Unlisten.code(),
            id: self.id,
            ..Request::default()
        });
    }
}

/// An established connection.
pub struct Connection<'a> {
    cx: &'a Context,
    slot: usize,
    /// Its descriptor (the shim's socket descriptor).
    fd: OwnedFd,
}

impl Connection<'_> {
    /// Reads what arrived, waiting for something; Ok(0) after the peer's
    /// FIN once everything before it was read.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let s = self.cx.shm.slot(self.slot);
        let mut hung_up = false;
        loop {
            // The events first: EOF is set after the last bytes' head.
            let ev = s.events.load(Ordering::Acquire);
            let ready = s.rx_ready() as usize;
            if ready > 0 {
                let n = ready.min(buf.len());
                let tail = s.rx_tail.load(Ordering::Relaxed);
                // SAFETY: `ready` bytes from the tail are published by the
                // service and not written again until the tail passes them.
                buf[..n].copy_from_slice(unsafe { self.cx.shm.rings(self.slot).0.slice(tail, n) });
                s.rx_tail
                    .store(tail.wrapping_add(n as u32), Ordering::Release);
                self.cx.ring_doorbell();
                return Ok(n);
            }
            if ev & event::RESET != 0 {
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            if ev & event::EOF != 0 || buf.is_empty() {
                return Ok(0);
            }
            if hung_up {
                return Err(service_gone());
            }
            // Empty: read the service's byte away, then wait for the next
            // one (cleared first, so the service writes it again: no
            // wake-up is lost).
            s.rx_armed.store(0, Ordering::SeqCst);
            notice::drain(self.fd.as_raw_fd());
            if s.rx_ready() == 0 && s.events.load(Ordering::Acquire) == ev {
                hung_up = notice::wait(self.fd.as_raw_fd(), libc::POLLIN)?;
            }
        }
    }

    /// Queues bytes to send, waiting for room; returns how many fit.
    pub fn send(&self, data: &[u8]) -> io::Result<usize> {
        let s = self.cx.shm.slot(self.slot);
        let mut hung_up = false;
        loop {
            if s.events.load(Ordering::Acquire) & event::RESET != 0 {
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            if s.app_flags.load(Ordering::Relaxed) & app_flag::SHUT_WR != 0 {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let head = s.tx_head.load(Ordering::Relaxed);
            let room = (RING_SIZE - head.wrapping_sub(s.tx_tail.load(Ordering::Acquire))) as usize;
            if room == 0 && hung_up {
                return Err(service_gone());
            }
            if room > 0 || data.is_empty() {
                let n = room.min(data.len());
                // SAFETY: `room` bytes from the head are the producer's.
                unsafe { self.cx.shm.rings(self.slot).1.slice_mut(head, n) }
                    .copy_from_slice(&data[..n]);
                s.tx_head
                    .store(head.wrapping_add(n as u32), Ordering::Release);
                self.cx.ring_doorbell();
                return Ok(n);
            }
            // Full: plug the descriptor, then ask to be woken (toe_app.h).
            notice::plug(self.fd.as_raw_fd());
            s.app_flags.fetch_or(app_flag::WANT_TX, Ordering::SeqCst);
            self.cx.ring_doorbell();
            // Room may have freed up before the flag was seen.
            if s.tx_tail.load(Ordering::Acquire) == head.wrapping_sub(RING_SIZE) {
                hung_up = notice::wait(self.fd.as_raw_fd(), libc::POLLOUT)?;
            }
        }
    }

    /// Sends all of `data`.
    pub fn send_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.send(data)?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Reads everything to the peer's FIN.
    pub fn recv_to_end(&self) -> io::Result<Vec<u8>> {
        let (mut got, mut buf) = (Vec::new(), vec![0u8; 1 << 16]);
        loop {
            match self.recv(&mut buf)? {
                0 => return Ok(got),
                n => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Our FIN follows the bytes queued so far.
    pub fn shutdown_write(&self) {
        let s = self.cx.shm.slot(self.slot);
        s.app_flags.fetch_or(app_flag::SHUT_WR, Ordering::Release);
        self.cx.ring_doorbell();
    }

    /// (local, peer) addresses.
    pub fn addresses(&self) -> (SocketAddr, SocketAddr) {
        self.cx.shm.addresses(self.slot)
    }

    /// The data path's sequence, window and loss state of this
    /// connection and its retransmission counts, as the service last
    /// copied them.
    pub fn tcp_info(&self) -> TcpInfo {
        let s = self.cx.shm.slot(self.slot);
        let backoffs = s.backoffs.load(Ordering::Relaxed);
        TcpInfo {
            snd_una: s.snd_una.load(Ordering::Relaxed),
            snd_nxt: s.snd_nxt.load(Ordering::Relaxed),
            rcv_nxt: s.rcv_nxt.load(Ordering::Relaxed),
            rcv_wnd: s.rcv_wnd.load(Ordering::Relaxed),
            snd_mss: s.snd_mss.load(Ordering::Relaxed),
            retrans: s.retrans.load(Ordering::Relaxed),
            lost: s.lost.load(Ordering::Relaxed),
            sacked: s.sacked.load(Ordering::Relaxed),
            reordering: s.reordering.load(Ordering::Relaxed),
            total_retrans: s.total_retrans.load(Ordering::Relaxed),
            retransmits: backoffs,
            backoff: backoffs,
        }
    }
}

impl Drop for Connection<'_> {
    /// Closes the connection: a FIN after the queued bytes; what arrives
    /// afterwards is discarded.
    fn drop(&mut self) {
        let _ = self.cx.call(Request {
            op: Op::Close.code(),
            id: self.slot as u32,
            ..Request::default()
        });
        self.cx.ring_doorbell();
    }
}
