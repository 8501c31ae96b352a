//! The system calls behind `pktio`: socket setup, the memory-mapped RX
//! ring, sendmmsg, ppoll. All `unsafe` of the crate is here.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::{PktIoError, PortConfig};

/// Slots per ring block (the block is the unit of the mmap'ed area).
const FRAMES_PER_BLOCK: u32 = 32;
/// Frames per `sendmmsg` call.
const TX_CHUNK: usize = 64;

pub(crate) fn setsockopt<T>(
    fd: RawFd,
    level: i32,
    name: i32,
    value: &T,
    what: &str,
) -> Result<(), PktIoError> {
    // SAFETY: value points to a T of the given size for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(PktIoError::io(
            format!("setsockopt {what}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn ring_request(cfg: &PortConfig) -> libc::tpacket_req {
    let blocks = cfg.rx_frames.div_ceil(FRAMES_PER_BLOCK);
    libc::tpacket_req {
        tp_block_size: cfg.frame_size * FRAMES_PER_BLOCK,
        tp_block_nr: blocks,
        tp_frame_size: cfg.frame_size,
        tp_frame_nr: blocks * FRAMES_PER_BLOCK,
    }
}

/// A bound AF_PACKET socket on `dev` with a TPACKET_V2 RX ring configured
/// (not yet mapped). Runs in the target namespace.
pub(crate) fn open_socket(dev: &str, cfg: &PortConfig) -> Result<OwnedFd, PktIoError> {
    let cname = std::ffi::CString::new(dev)
        .map_err(|_| PktIoError::Config(format!("device name '{dev}'")))?;
    // SAFETY: if_nametoindex reads a NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(PktIoError::NoSuchDevice {
            dev: dev.to_string(),
            netns: None,
        });
    }
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2); owned below.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            i32::from(proto),
        )
    };
    if raw < 0 {
        return Err(PktIoError::io(
            "socket(AF_PACKET)",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: raw is a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let fd = sock.as_raw_fd();
    let version: libc::c_int = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
    setsockopt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        &version,
        "PACKET_VERSION",
    )?;
    let one: libc::c_int = 1;
    setsockopt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_IGNORE_OUTGOING,
        &one,
        "PACKET_IGNORE_OUTGOING",
    )?;
    if cfg.qdisc_bypass {
        setsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &one,
            "PACKET_QDISC_BYPASS",
        )?;
    }
    let sndbuf = cfg.send_buffer as libc::c_int;
    if setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_SNDBUFFORCE,
        &sndbuf,
        "SO_SNDBUFFORCE",
    )
    .is_err()
    {
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf, "SO_SNDBUF")?;
    }
    let req = ring_request(cfg);
    setsockopt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_RX_RING,
        &req,
        "PACKET_RX_RING",
    )?;
    // SAFETY: sockaddr_ll is plain data; zero is valid.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = proto;
    addr.sll_ifindex = ifindex as i32;
    // SAFETY: addr is a valid sockaddr_ll for the call.
    let rc = unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(PktIoError::io(
            format!("bind to {dev}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(sock)
}

/// The mapped RX ring and the reader's position in it.
pub(crate) struct RxRing {
    base: *mut u8,
    len: usize,
    frame_size: usize,
    frames: usize,
    head: usize,
    drops: u64,
}

// SAFETY: the mapping is owned by this value; the kernel side synchronizes
// through each slot's status word (acquire/release below).
unsafe impl Send for RxRing {}

impl RxRing {
    pub(crate) fn map(sock: &OwnedFd, dev: &str, cfg: PortConfig) -> Result<RxRing, PktIoError> {
        let req = ring_request(&cfg);
        let len = req.tp_block_size as usize * req.tp_block_nr as usize;
        // SAFETY: mapping the ring the socket just set up; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                sock.as_raw_fd(),
                0,
            )
        };
        let base = if base == libc::MAP_FAILED {
            // MAP_LOCKED fails under a low RLIMIT_MEMLOCK; the ring works unlocked.
            // SAFETY: as above.
            let b = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    sock.as_raw_fd(),
                    0,
                )
            };
            if b == libc::MAP_FAILED {
                return Err(PktIoError::io(
                    format!("mmap the RX ring of {dev}"),
                    io::Error::last_os_error(),
                ));
            }
            b
        } else {
            base
        };
        Ok(RxRing {
            base: base.cast(),
            len,
            frame_size: req.tp_frame_size as usize,
            frames: req.tp_frame_nr as usize,
            head: 0,
            drops: 0,
        })
    }

    fn status(&self, slot: usize) -> &AtomicU32 {
        // SAFETY: slot < frames, so the header is inside the mapping; the
        // status word is 4-byte aligned (slots are 16-byte aligned).
        unsafe { &*(self.base.add(slot * self.frame_size) as *const AtomicU32) }
    }

    pub(crate) fn ready(&self) -> bool {
        self.status(self.head).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Hands each ready frame to `f` (data, wire length, realtime ns,
    /// checksum partial) and returns its slot to the kernel.
    pub(crate) fn drain(&mut self, max: usize, mut f: impl FnMut(&[u8], u32, u64, bool)) -> usize {
        let mut n = 0;
        while n < max {
            let status = self.status(self.head).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot is ours until we write TP_STATUS_KERNEL; the
            // header is a tpacket2_hdr at the slot start.
            let hdr = unsafe {
                std::ptr::read(
                    self.base.add(self.head * self.frame_size) as *const libc::tpacket2_hdr
                )
            };
            let mac = usize::from(hdr.tp_mac);
            let snap = hdr.tp_snaplen as usize;
            if mac + snap <= self.frame_size {
                // SAFETY: bounds checked against the slot just above.
                let data = unsafe {
                    std::slice::from_raw_parts(
                        self.base.add(self.head * self.frame_size + mac),
                        snap,
                    )
                };
                let rt = u64::from(hdr.tp_sec) * 1_000_000_000 + u64::from(hdr.tp_nsec);
                f(
                    data,
                    hdr.tp_len,
                    rt,
                    status & libc::TP_STATUS_CSUMNOTREADY != 0,
                );
            }
            self.status(self.head)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.head = (self.head + 1) % self.frames;
            n += 1;
        }
        n
    }

    pub(crate) fn kernel_drops(&mut self, sock: &OwnedFd) -> io::Result<u64> {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: st and len are valid out-parameters.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel resets its counters on every read.
        self.drops += u64::from(st.tp_drops);
        Ok(self.drops)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Reused `sendmmsg` arrays.
#[derive(Default)]
pub(crate) struct TxScratch {
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in the scratch arrays are rebuilt before every
// use and never dereferenced outside `send`.
unsafe impl Send for TxScratch {}

impl TxScratch {
    /// Returns (sent, refused).
    pub(crate) fn send<B: AsRef<[u8]>>(
        &mut self,
        sock: &OwnedFd,
        dev: &str,
        frames: &[B],
    ) -> Result<(usize, usize), PktIoError> {
        let (mut sent, mut refused) = (0, 0);
        let mut at = 0;
        while at < frames.len() {
            let chunk = &frames[at..frames.len().min(at + TX_CHUNK)];
            self.iov.clear();
            self.msgs.clear();
            for f in chunk {
                let f = f.as_ref();
                self.iov.push(libc::iovec {
                    iov_base: f.as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                });
            }
            for i in 0..chunk.len() {
                // SAFETY: mmsghdr is plain data; zero is valid.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = &mut self.iov[i];
                m.msg_hdr.msg_iovlen = 1;
                self.msgs.push(m);
            }
            // SAFETY: msgs and iov stay alive and unmoved for the call; the
            // socket is bound, so no address is needed.
            let n = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    self.msgs.len() as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENODEV) | Some(libc::ENXIO) => {
                        return Err(PktIoError::NoSuchDevice {
                            dev: dev.to_string(),
                            netns: None,
                        })
                    }
                    // This frame was refused (full ring, ENOBUFS, EMSGSIZE):
                    // skip it and go on with the rest.
                    _ => {
                        refused += 1;
                        at += 1;
                    }
                }
            } else {
                sent += n as usize;
                at += n as usize;
            }
        }
        Ok((sent, refused))
    }
}

pub(crate) fn ppoll_in(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: pfds and ts are valid for the call.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(pfds.iter().map(|p| p.revents & libc::POLLIN != 0).collect())
}

pub(crate) fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-parameter.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC, nanoseconds.
pub(crate) fn realtime_to_mono_ns() -> i64 {
    let a = clock_ns(libc::CLOCK_MONOTONIC);
    let r = clock_ns(libc::CLOCK_REALTIME);
    let b = clock_ns(libc::CLOCK_MONOTONIC);
    r as i64 - ((a + b) / 2) as i64
}

pub(crate) fn set_fifo(prio: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: param is valid for the call; 0 is this thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
