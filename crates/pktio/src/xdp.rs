//! The AF_XDP backend of a [`Port`](crate::Port): one socket per RX queue of
//! the device, and the XDP program (`bpf/xsk_redirect.bpf.c`) that hands
//! each queue's frames to its socket, all of them or only those a
//! [`Match`] names.

use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::xsk::{self, Xsk, XskStats};
use crate::{PktIoError, PortConfig};

host::bpf_skeleton!("xsk_redirect.skel.rs", pod: [xsk_rule, xsk_config]);
use skel::types;

/// The constants of `bpf/xsk.h`, shared with the program.
#[allow(dead_code)]
mod abi {
    include!(concat!(env!("OUT_DIR"), "/xsk_h.rs"));
}

// The layouts the program reads, pinned on the Rust side (xsk.h spells out
// the padding on the C side).
const _: () = assert!(std::mem::size_of::<types::xsk_rule>() == 20);
const _: () = assert!(std::mem::size_of::<types::xsk_config>() == 8);

/// Which frames a rule sends to the port instead of the kernel: those to
/// `addr`, with IP protocol `proto` (None: any, and ARP for an IPv4
/// address) and destination port `port` (None: any, and frames without a
/// port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub addr: IpAddr,
    pub proto: Option<u8>,
    pub port: Option<u16>,
}

impl Match {
    fn key(&self) -> types::xsk_rule {
        let mut key = types::xsk_rule::default();
        match self.addr {
            IpAddr::V4(a) => {
                key.addr[..4].copy_from_slice(&a.octets());
                key.family = abi::XSK_FAMILY_V4 as u8;
            }
            IpAddr::V6(a) => {
                key.addr.copy_from_slice(&a.octets());
                key.family = abi::XSK_FAMILY_V6 as u8;
            }
        }
        key.proto = self.proto.unwrap_or(0);
        key.port = self.port.unwrap_or(0).to_be();
        key
    }
}

/// The loaded program's maps and its XDP link (detached when dropped).
struct Program {
    _link: OwnedFd,
    config: MapHandle,
    rules: MapHandle,
    stats: MapHandle,
}

/// The AF_XDP side of a port.
pub(crate) struct XdpIo {
    socks: Vec<Xsk>,
    /// Readable when any socket is (what `wait_readable` polls).
    epoll: OwnedFd,
    program: Program,
    /// The socket `recv` starts with, so no queue starves the others.
    next: usize,
}

fn bpf_error(what: &str, e: libbpf_rs::Error) -> PktIoError {
    match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => PktIoError::Privilege,
        _ => PktIoError::io(what.to_string(), std::io::Error::other(format!("{e:#}"))),
    }
}

impl XdpIo {
    /// Opens sockets on every RX queue of `dev` and attaches the program,
    /// every frame to the sockets. Runs in the device's namespace.
    pub(crate) fn open(dev: &str, cfg: &PortConfig) -> Result<XdpIo, PktIoError> {
        let ifindex = xsk::ifindex(dev).ok_or_else(|| PktIoError::NoSuchDevice {
            dev: dev.to_string(),
            netns: None,
        })?;
        let mut storage = std::mem::MaybeUninit::uninit();
        let open = skel::XskRedirectSkelBuilder::default()
            .open(&mut storage)
            .map_err(|e| bpf_error("open the AF_XDP redirect program", e))?;
        let skel = open
            .load()
            .map_err(|e| bpf_error("load the AF_XDP redirect program", e))?;
        let handle = |map: &libbpf_rs::MapMut<'_>, name: &str| {
            MapHandle::try_from(map).map_err(|e| bpf_error(&format!("dup map {name}"), e))
        };
        let xsks = handle(&skel.maps.xsks, "xsks")?;
        let socks = open_queues(ifindex, dev, cfg)?;
        for (queue, sock) in socks.iter().enumerate() {
            xsks.update(
                &(queue as u32).to_ne_bytes(),
                &(sock.fd() as u32).to_ne_bytes(),
                MapFlags::ANY,
            )
            .map_err(|e| bpf_error(&format!("put the socket of queue {queue} in xsks"), e))?;
        }
        let program = Program {
            config: handle(&skel.maps.config, "config")?,
            rules: handle(&skel.maps.rules, "rules")?,
            stats: handle(&skel.maps.stats, "stats")?,
            _link: xsk::xdp_link(skel.progs.pktio_xsk_redirect.as_fd().as_raw_fd(), ifindex)
                .map_err(|e| match e.raw_os_error() {
                    Some(libc::EBUSY) | Some(libc::EEXIST) => PktIoError::Config(format!(
                        "{dev} already has an XDP program; the AF_XDP backend needs its own"
                    )),
                    _ => PktIoError::io(format!("attach XDP to {dev}"), e),
                })?,
        };
        let fds: Vec<RawFd> = socks.iter().map(Xsk::fd).collect();
        let epoll = xsk::epoll_over(&fds).map_err(|e| PktIoError::io("epoll", e))?;
        let io = XdpIo {
            socks,
            epoll,
            program,
            next: 0,
        };
        io.set_mode(abi::XSK_MODE_ALL)?;
        Ok(io)
    }

    fn set_mode(&self, mode: u32) -> Result<(), PktIoError> {
        let config = types::xsk_config {
            mode,
            ..Default::default()
        };
        self.program
            .config
            .update(
                &0u32.to_ne_bytes(),
                bytemuck::bytes_of(&config),
                MapFlags::ANY,
            )
            .map_err(|e| bpf_error("write config", e))
    }

    /// From now on only frames matching `rules` reach the sockets.
    pub(crate) fn steer_only(&mut self, rules: &[Match]) -> Result<(), PktIoError> {
        if rules.len() > abi::XSK_MAX_RULES as usize {
            return Err(PktIoError::Config(format!(
                "{} rules; a port holds at most {}",
                rules.len(),
                abi::XSK_MAX_RULES
            )));
        }
        let old: Vec<Vec<u8>> = self.program.rules.keys().collect();
        for key in &old {
            let _ = self.program.rules.delete(key);
        }
        for rule in rules {
            self.program
                .rules
                .update(
                    bytemuck::bytes_of(&rule.key()),
                    &1u32.to_ne_bytes(),
                    MapFlags::ANY,
                )
                .map_err(|e| bpf_error("write a rule", e))?;
        }
        self.set_mode(abi::XSK_MODE_RULES)
    }

    /// Frames the program (redirected, passed to the kernel, matched but no
    /// socket on their queue), summed over CPUs.
    pub(crate) fn program_counts(&self) -> Result<[u64; 3], PktIoError> {
        counts_by_slot(|slot| {
            self.program
                .stats
                .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| bpf_error("read stats", e))
        })
    }

    pub(crate) fn recv(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        let count = self.socks.len();
        for i in 0..count {
            if n >= max {
                break;
            }
            let at = (self.next + i) % count;
            n += self.socks[at].recv(max - n, &mut f);
        }
        self.next = (self.next + 1) % count;
        n
    }

    pub(crate) fn has_frames(&self) -> bool {
        self.socks.iter().any(Xsk::has_frames)
    }

    /// Sends through the first queue's socket; returns (queued, refused,
    /// bytes queued).
    pub(crate) fn send<B: AsRef<[u8]>>(
        &mut self,
        frames: &[B],
    ) -> Result<(usize, usize, u64), PktIoError> {
        self.socks[0].send(frames)
    }

    pub(crate) fn stats(&self) -> Result<XskStats, PktIoError> {
        let mut sum = XskStats::default();
        for s in &self.socks {
            sum += s.stats()?;
        }
        Ok(sum)
    }

    pub(crate) fn queues(&self) -> usize {
        self.socks.len()
    }

    pub(crate) fn zero_copy(&self) -> bool {
        self.socks.iter().all(Xsk::zero_copy)
    }

    pub(crate) fn poll_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
}

/// A socket on `queue`. The kernel releases a closed AF_XDP socket's
/// queue a moment after close(2) returns (the socket is torn down after an
/// RCU grace period), so a port opened right after another one on the same
/// device was dropped waits for it instead of failing: up to 2 s, as on a
/// loaded 2-CPU machine the release took longer than 500 ms.
fn open_queue(ifindex: u32, queue: u32, ring: u32, frame_size: u32) -> Result<Xsk, PktIoError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match Xsk::open(ifindex, queue, ring, frame_size) {
            Err(PktIoError::Io { source, .. })
                if source.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// One socket per RX queue, from queue 0 up to the first the device does
/// not have (binding there fails with EINVAL).
fn open_queues(ifindex: u32, dev: &str, cfg: &PortConfig) -> Result<Vec<Xsk>, PktIoError> {
    let ring = cfg.rx_frames.next_power_of_two();
    let mut socks = Vec::new();
    for queue in 0..abi::XSK_MAX_QUEUES {
        match open_queue(ifindex, queue, ring, cfg.frame_size) {
            Ok(s) => socks.push(s),
            Err(PktIoError::Io { source, .. })
                if queue > 0 && source.raw_os_error() == Some(libc::EINVAL) =>
            {
                break
            }
            Err(PktIoError::Io { source, .. }) if source.raw_os_error() == Some(libc::EBUSY) => {
                return Err(PktIoError::Config(format!(
                    "{dev} already has an AF_XDP socket on queue {queue} (another AF_XDP port)"
                )))
            }
            Err(PktIoError::Io { op, source })
                if source.raw_os_error() == Some(libc::EAFNOSUPPORT) =>
            {
                return Err(PktIoError::io(
                    format!("{op} on {dev} (a kernel with CONFIG_XDP_SOCKETS)"),
                    source,
                ))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(socks)
}

/// The counts of the program's first three `stats` slots, each summed over
/// CPUs from what `lookup` returns for it. A missing entry or a value of
/// another size is an unknown count and an error, not 0 (the old reading
/// skipped it).
fn counts_by_slot(
    mut lookup: impl FnMut(u32) -> Result<Option<Vec<Vec<u8>>>, PktIoError>,
) -> Result<[u64; 3], PktIoError> {
    let mut out = [0u64; 3];
    for (slot, count) in (0u32..).zip(out.iter_mut()) {
        *count = host::bpf::event_count("stats", slot, lookup(slot)?)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_count_is_an_error_not_zero() {
        let copy = |n: u64| n.to_ne_bytes().to_vec();
        let counts = counts_by_slot(|slot| Ok(Some(vec![copy(slot.into()), copy(10)])));
        assert_eq!(counts.unwrap(), [10, 11, 12]);
        let short = counts_by_slot(|slot| {
            Ok(Some(vec![
                copy(1),
                if slot == 1 { vec![0; 4] } else { copy(1) },
            ]))
        });
        assert_eq!(
            short.unwrap_err().to_string(),
            "BPF map stats entry 1 is unreadable: the value of CPU 1 is 4 bytes, expected 8"
        );
        assert!(counts_by_slot(|_| Ok(None)).is_err());
    }
}
