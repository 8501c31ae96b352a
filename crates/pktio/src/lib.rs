//! `pktio`: batched raw packet I/O on one Linux network device, opened in
//! any network namespace.
//!
//! ```text
//! let mut port = Port::open("veth0", Some("lab-wire"), &PortConfig::default())?;
//! port.recv_batch(64, |frame: RxFrame| { ... })?;   // up to 64 frames, zero-copy view
//! port.send_batch(&[&frame_a, &frame_b])?;           // one sendmmsg(2)
//! wait_readable(&[&port_a, &port_b], Some(timeout))?; // ppoll(2), ns precision
//! ```
//!
//! # Backends
//!
//! **AF_PACKET** ([`Backend::Packet`], the default; any device, no XDP):
//!
//! - **RX**: a memory-mapped `PACKET_RX_RING` in `TPACKET_V2` format
//!   (packet(7), Documentation/networking/packet_mmap.rst). The kernel writes
//!   each frame into the next slot and flips its status to `TP_STATUS_USER`;
//!   [`Port::recv_batch`] walks the ready slots (no syscall per packet), hands
//!   out a view of each and gives the slot back. `TPACKET_V3` groups frames
//!   into blocks and wakes the reader only when a block is retired, full or
//!   after `tp_retire_blk_tov` (whole milliseconds): at the packet rates of
//!   an impairment wire that adds up to a millisecond of latency, which is
//!   larger than the delays being emulated. V2 wakes per frame and still
//!   lets the reader take everything that is ready in one pass.
//! - **TX**: `sendmmsg(2)` of a whole batch on the bound socket, with
//!   `PACKET_QDISC_BYPASS` (the frame goes straight to the driver's xmit).
//! - `PACKET_IGNORE_OUTGOING`: the socket does not see frames it (or the
//!   host) sends out of the device, only what arrives.
//!
//! **AF_XDP** ([`Backend::Xdp`]):
//!
//! - One AF_XDP socket per RX queue of the
//!   device, each with its own UMEM and fill/completion/RX/TX rings, and an
//!   XDP program with an XSKMAP that hands each queue's frames to its socket
//!   (Documentation/networking/af_xdp.rst). By default every frame goes to
//!   the port; [`Port::steer_only`] narrows that to the frames of a data
//!   path's own addresses and ports and leaves the rest (ARP, the
//!   namespace's other traffic) to the kernel. Zero-copy where the driver
//!   offers it, copy mode elsewhere (veth), without a change here. The
//!   device must have no other XDP program; the program is detached when
//!   the port is dropped (a BPF link), or when the process dies. AF_XDP
//!   gives no receive timestamp or checksum status: `rx_ns` is the time of
//!   the `recv_batch` call and `checksum_partial` is false, so a peer must
//!   not offload its transmit checksum to a device an AF_XDP port reads.
//!
//! A socket belongs to the network namespace it was created in, so
//! [`Port::open`] creates it on a short-lived thread that joined `netns`
//! (`/run/netns/NAME`, with [`host::netns::run_in`]); the port is then used
//! from any thread.
//!
//! All `unsafe` (mmap, socket options, the rings) lives in `sys` and `xsk`,
//! but for the declaration that the XDP program's map types are plain data
//! (`xdp::pod`).

#![deny(unsafe_code)]

mod error;
mod sys;
mod xdp;
mod xsk;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub use error::PktIoError;
pub use xdp::Match;
pub use xsk::XskStats;

/// How a port moves frames (see the crate documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// AF_PACKET: a TPACKET_V2 RX ring and `sendmmsg`; any device.
    #[default]
    Packet,
    /// AF_XDP: sockets on every RX queue and an XDP program that redirects
    /// to them; the device must have no other XDP program.
    Xdp,
}

/// Ring geometry and socket options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    pub backend: Backend,
    /// Slots in the RX ring (AF_PACKET: rounded up to a whole block of 32;
    /// AF_XDP: to a power of two, per queue, and as many TX slots).
    pub rx_frames: u32,
    /// Bytes per slot, header included; longer frames are truncated
    /// (and counted in [`PortStats::truncated`]). AF_XDP: the UMEM chunk
    /// size, a power of two from 2048 to 4096, of which the kernel keeps
    /// 256 bytes of headroom on receive.
    pub frame_size: u32,
    /// `PACKET_QDISC_BYPASS` on transmit (AF_PACKET).
    pub qdisc_bypass: bool,
    /// Socket send buffer (`SO_SNDBUF`), bytes (AF_PACKET).
    pub send_buffer: u32,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            backend: Backend::Packet,
            rx_frames: 4096,
            frame_size: 2048,
            qdisc_bypass: true,
            send_buffer: 4 << 20,
        }
    }
}

impl PortConfig {
    fn check(&self) -> Result<(), PktIoError> {
        let ok = match self.backend {
            Backend::Packet => self.frame_size >= 256 && self.frame_size.is_multiple_of(16),
            Backend::Xdp => {
                self.frame_size.is_power_of_two() && (2048..=4096).contains(&self.frame_size)
            }
        };
        if !ok || self.rx_frames == 0 || self.rx_frames > 1 << 20 {
            let frame = match self.backend {
                Backend::Packet => "a multiple of 16, at least 256",
                Backend::Xdp => "2048 or 4096 for AF_XDP",
            };
            return Err(PktIoError::Config(format!(
                "frame_size {} ({frame}), rx_frames {} (1 to 1048576)",
                self.frame_size, self.rx_frames
            )));
        }
        Ok(())
    }
}

/// One received frame, valid during the `recv_batch` callback.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The frame from its Ethernet header, at most `frame_size - 66` bytes
    /// (AF_PACKET) or `frame_size - 256` (AF_XDP).
    pub data: &'a [u8],
    /// The frame's length on the wire (more than `data.len()` if truncated).
    pub wire_len: u32,
    /// When the kernel received it: `CLOCK_MONOTONIC` nanoseconds
    /// (AF_PACKET: the ring's `CLOCK_REALTIME` stamp, shifted by the offset
    /// at open; AF_XDP: when `recv_batch` was called).
    pub rx_ns: u64,
    /// The checksum is not filled in (`TP_STATUS_CSUMNOTREADY`): the sender
    /// used checksum offload. Forwarding it as is gives the next host a bad
    /// checksum. AF_XDP cannot tell: always false there.
    pub checksum_partial: bool,
}

impl RxFrame<'_> {
    pub fn truncated(&self) -> bool {
        (self.data.len() as u32) < self.wire_len
    }
}

/// Counters of one port since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames longer than a slot (delivered cut).
    pub truncated: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames `send_batch` could not hand to the device (ENOBUFS, a full
    /// peer ring, a frame over the MTU or the AF_XDP chunk).
    pub tx_errors: u64,
}

/// What the AF_XDP backend's program did with the device's frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpCounts {
    /// Handed to a socket.
    pub redirected: u64,
    /// Left to the kernel (no rule matched).
    pub passed: u64,
    /// Matched, but no socket on their RX queue.
    pub no_socket: u64,
}

/// The AF_PACKET side of a port.
struct PacketIo {
    sock: OwnedFd,
    ring: sys::RxRing,
    realtime_to_mono_ns: i64,
    tx: sys::TxScratch,
}

enum Io {
    Packet(PacketIo),
    Xdp(Box<xdp::XdpIo>),
}

/// A raw packet port on one device.
pub struct Port {
    dev: String,
    io: Io,
    stats: PortStats,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("dev", &self.dev)
            .field("backend", &self.backend())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl Port {
    /// Opens `dev` in network namespace `netns` (`None`: the caller's).
    /// Needs CAP_NET_RAW (AF_PACKET) or CAP_NET_ADMIN and CAP_BPF (AF_XDP).
    pub fn open(dev: &str, netns: Option<&str>, cfg: &PortConfig) -> Result<Port, PktIoError> {
        cfg.check()?;
        let io = match cfg.backend {
            Backend::Packet => {
                let sock = host::netns::run_in(netns, {
                    let dev = dev.to_string();
                    let cfg = *cfg;
                    move || sys::open_socket(&dev, &cfg)
                })??;
                let ring = sys::RxRing::map(&sock, dev, *cfg)?;
                Io::Packet(PacketIo {
                    sock,
                    ring,
                    realtime_to_mono_ns: sys::realtime_to_mono_ns(),
                    tx: sys::TxScratch::default(),
                })
            }
            Backend::Xdp => Io::Xdp(Box::new(host::netns::run_in(netns, {
                let dev = dev.to_string();
                let cfg = *cfg;
                move || xdp::XdpIo::open(&dev, &cfg)
            })??)),
        };
        Ok(Port {
            dev: dev.to_string(),
            io,
            stats: PortStats::default(),
        })
    }

    pub fn dev(&self) -> &str {
        &self.dev
    }

    pub fn backend(&self) -> Backend {
        match self.io {
            Io::Packet(_) => Backend::Packet,
            Io::Xdp(_) => Backend::Xdp,
        }
    }

    /// How the port runs, for reports: `af_packet`, `af_xdp copy` or
    /// `af_xdp zero-copy`, with the number of AF_XDP queues.
    pub fn describe(&self) -> String {
        match &self.io {
            Io::Packet(_) => "af_packet (TPACKET_V2 RX ring, sendmmsg TX)".into(),
            Io::Xdp(x) => format!(
                "af_xdp {} on {} RX queue{}",
                if x.zero_copy() {
                    "zero-copy"
                } else {
                    "copy mode"
                },
                x.queues(),
                if x.queues() == 1 { "" } else { "s" }
            ),
        }
    }

    /// Calls `f` for each frame ready in the ring, at most `max`, in
    /// arrival order; returns how many. Never blocks.
    pub fn recv_batch(&mut self, max: usize, mut f: impl FnMut(RxFrame<'_>)) -> usize {
        let stats = &mut self.stats;
        match &mut self.io {
            Io::Packet(p) => {
                let offset = p.realtime_to_mono_ns;
                p.ring.drain(max, |data, wire_len, rt_ns, partial| {
                    stats.rx_frames += 1;
                    stats.rx_bytes += u64::from(wire_len);
                    if (data.len() as u32) < wire_len {
                        stats.truncated += 1;
                    }
                    f(RxFrame {
                        data,
                        wire_len,
                        rx_ns: (rt_ns as i64 - offset).max(0) as u64,
                        checksum_partial: partial,
                    })
                })
            }
            Io::Xdp(x) => {
                let now = now_ns();
                x.recv(max, |data| {
                    stats.rx_frames += 1;
                    stats.rx_bytes += data.len() as u64;
                    f(RxFrame {
                        data,
                        wire_len: data.len() as u32,
                        rx_ns: now,
                        checksum_partial: false,
                    })
                })
            }
        }
    }

    /// Whether a frame is ready (no syscall).
    pub fn has_frames(&self) -> bool {
        match &self.io {
            Io::Packet(p) => p.ring.ready(),
            Io::Xdp(x) => x.has_frames(),
        }
    }

    /// Sends `frames` out of the device with as few system calls as it
    /// takes; returns how many were accepted. A frame the device refuses is
    /// counted in [`PortStats::tx_errors`] and skipped, so one bad frame
    /// does not stall the batch.
    pub fn send_batch<B: AsRef<[u8]>>(&mut self, frames: &[B]) -> Result<usize, PktIoError> {
        let (sent, errors, bytes) = match &mut self.io {
            Io::Packet(p) => {
                let (sent, errors) = p.tx.send(&p.sock, &self.dev, frames)?;
                let bytes = frames
                    .iter()
                    .take(sent + errors)
                    .map(|f| f.as_ref().len() as u64)
                    .sum::<u64>();
                (sent, errors, bytes)
            }
            Io::Xdp(x) => x.send(frames)?,
        };
        self.stats.tx_frames += sent as u64;
        self.stats.tx_bytes += bytes;
        self.stats.tx_errors += errors as u64;
        Ok(sent)
    }

    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// The kernel's count of frames it dropped because the port could not
    /// take them, cumulative since open: AF_PACKET `tp_drops` (ring full);
    /// AF_XDP `rx_dropped` plus `rx_ring_full` over all queues.
    pub fn kernel_drops(&mut self) -> Result<u64, PktIoError> {
        match &mut self.io {
            Io::Packet(p) => p
                .ring
                .kernel_drops(&p.sock)
                .map_err(|source| PktIoError::Io {
                    op: "PACKET_STATISTICS".into(),
                    source,
                }),
            Io::Xdp(x) => x.stats().map(|s| s.rx_dropped + s.rx_ring_full),
        }
    }

    /// AF_XDP: the kernel's socket counters, summed over queues.
    pub fn xsk_stats(&self) -> Result<XskStats, PktIoError> {
        self.xdp("xsk_stats")?.stats()
    }

    /// AF_XDP: what the redirect program did with the device's frames.
    pub fn xdp_counts(&self) -> Result<XdpCounts, PktIoError> {
        let [redirected, passed, no_socket] = self.xdp("xdp_counts")?.program_counts()?;
        Ok(XdpCounts {
            redirected,
            passed,
            no_socket,
        })
    }

    /// AF_XDP: from now on only frames matching one of `rules` come to the
    /// port; every other frame goes to the kernel as if the port were not
    /// there. Replaces earlier rules.
    pub fn steer_only(&mut self, rules: &[Match]) -> Result<(), PktIoError> {
        match &mut self.io {
            Io::Xdp(x) => x.steer_only(rules),
            Io::Packet(_) => Err(PktIoError::Config(
                "steering only some frames to a port needs the AF_XDP backend".into(),
            )),
        }
    }

    fn xdp(&self, what: &str) -> Result<&xdp::XdpIo, PktIoError> {
        match &self.io {
            Io::Xdp(x) => Ok(x),
            Io::Packet(_) => Err(PktIoError::Config(format!(
                "{what} is a counter of the AF_XDP backend; this port uses AF_PACKET"
            ))),
        }
    }
}

/// The descriptor to poll for input: the AF_PACKET socket, or an epoll
/// instance over every AF_XDP socket of the port.
impl AsRawFd for Port {
    fn as_raw_fd(&self) -> RawFd {
        match &self.io {
            Io::Packet(p) => p.sock.as_raw_fd(),
            Io::Xdp(x) => x.poll_fd(),
        }
    }
}

/// Waits until one of `ports` has a frame, or `timeout` passes (`None`:
/// forever). Returns which ports are readable. Uses `ppoll(2)`, whose
/// timeout has nanosecond resolution (the thread's timer slack still applies:
/// see [`set_timer_slack_ns`]). An `EINTR` returns no port readable.
pub fn wait_readable(ports: &[&Port], timeout: Option<Duration>) -> Result<Vec<bool>, PktIoError> {
    let fds: Vec<RawFd> = ports.iter().map(|p| p.as_raw_fd()).collect();
    wait_fds(&fds, timeout)
}

/// [`wait_readable`] over raw descriptors (e.g. a port and a TUN device).
pub fn wait_fds(fds: &[RawFd], timeout: Option<Duration>) -> Result<Vec<bool>, PktIoError> {
    sys::ppoll_in(fds, timeout).map_err(|e| PktIoError::Io {
        op: "ppoll".into(),
        source: e,
    })
}

/// Sets this thread's timer slack (prctl PR_SET_TIMERSLACK): how late the
/// kernel may fire its timers to group wakeups. The default is 50 µs.
pub fn set_timer_slack_ns(ns: u64) -> Result<(), PktIoError> {
    sys::set_timer_slack(ns).map_err(|e| PktIoError::Io {
        op: "prctl(PR_SET_TIMERSLACK)".into(),
        source: e,
    })
}

/// Gives this thread the real-time `SCHED_FIFO` policy at `priority`
/// (1..=99), so a packet loop that sleeps in [`wait_readable`] wakes on
/// time even when the cores are busy. The loop must sleep, or it starves
/// everything of lower priority on its core.
pub fn set_realtime_priority(priority: i32) -> Result<(), PktIoError> {
    sys::set_fifo(priority).map_err(|e| PktIoError::io("sched_setscheduler(SCHED_FIFO)", e))
}

/// `CLOCK_MONOTONIC` now, nanoseconds (the clock of [`RxFrame::rx_ns`]).
pub fn now_ns() -> u64 {
    sys::monotonic_ns()
}
