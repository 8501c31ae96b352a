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
//! # Method: AF_PACKET with a TPACKET_V2 RX ring, sendmmsg TX
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
//! - **Why not AF_XDP** (yet): on veth there is no zero-copy mode, so AF_XDP
//!   would copy too, and it needs an XDP program with an XSKMAP attached to
//!   each device plus UMEM and four rings per socket. The interface here
//!   (open / recv_batch / send_batch / wait) is small enough to put an AF_XDP
//!   backend behind it later without touching its users.
//! - `PACKET_IGNORE_OUTGOING`: the socket does not see frames it (or the
//!   host) sends out of the device, only what arrives.
//!
//! A socket belongs to the network namespace it was created in, so
//! [`Port::open`] creates it on a short-lived thread that joined `netns`
//! (`/run/netns/NAME`, with [`host::netns::run_in`]); the port is then used
//! from any thread.
//!
//! All `unsafe` (mmap, socket options, the ring) lives in `sys`.

#![deny(unsafe_code)]

mod error;
mod sys;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub use error::PktIoError;

/// Ring geometry and socket options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    /// Slots in the RX ring (rounded up to a whole block of 32).
    pub rx_frames: u32,
    /// Bytes per slot, header included; longer frames are truncated
    /// (and counted in [`PortStats::truncated`]).
    pub frame_size: u32,
    /// `PACKET_QDISC_BYPASS` on transmit.
    pub qdisc_bypass: bool,
    /// Socket send buffer (`SO_SNDBUF`), bytes.
    pub send_buffer: u32,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_frames: 4096,
            frame_size: 2048,
            qdisc_bypass: true,
            send_buffer: 4 << 20,
        }
    }
}

/// One received frame, valid during the `recv_batch` callback.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The frame from its Ethernet header, at most `frame_size - 66` bytes.
    pub data: &'a [u8],
    /// The frame's length on the wire (more than `data.len()` if truncated).
    pub wire_len: u32,
    /// When the kernel received it: `CLOCK_MONOTONIC` nanoseconds
    /// (the ring's `CLOCK_REALTIME` stamp, shifted by the offset at open).
    pub rx_ns: u64,
    /// The checksum is not filled in (`TP_STATUS_CSUMNOTREADY`): the sender
    /// used checksum offload. Forwarding it as is gives the next host a bad
    /// checksum.
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
    /// peer ring, a frame over the MTU).
    pub tx_errors: u64,
}

/// A raw packet port on one device.
pub struct Port {
    dev: String,
    sock: OwnedFd,
    ring: sys::RxRing,
    realtime_to_mono_ns: i64,
    stats: PortStats,
    tx: sys::TxScratch,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("dev", &self.dev)
            .field("fd", &self.sock.as_raw_fd())
            .finish()
    }
}

impl Port {
    /// Opens `dev` in network namespace `netns` (`None`: the caller's).
    /// Needs CAP_NET_RAW.
    pub fn open(dev: &str, netns: Option<&str>, cfg: &PortConfig) -> Result<Port, PktIoError> {
        if cfg.frame_size < 256 || !cfg.frame_size.is_multiple_of(16) || cfg.rx_frames == 0 {
            return Err(PktIoError::Config(format!(
                "frame_size {} (a multiple of 16, at least 256), rx_frames {} (at least 1)",
                cfg.frame_size, cfg.rx_frames
            )));
        }
        let sock = host::netns::run_in(netns, {
            let dev = dev.to_string();
            let cfg = *cfg;
            move || sys::open_socket(&dev, &cfg)
        })??;
        let ring = sys::RxRing::map(&sock, dev, *cfg)?;
        Ok(Port {
            dev: dev.to_string(),
            sock,
            ring,
            realtime_to_mono_ns: sys::realtime_to_mono_ns(),
            stats: PortStats::default(),
            tx: sys::TxScratch::default(),
        })
    }

    pub fn dev(&self) -> &str {
        &self.dev
    }

    /// Calls `f` for each frame ready in the ring, at most `max`, in
    /// arrival order; returns how many. Never blocks.
    pub fn recv_batch(&mut self, max: usize, mut f: impl FnMut(RxFrame<'_>)) -> usize {
        let offset = self.realtime_to_mono_ns;
        let stats = &mut self.stats;
        self.ring.drain(max, |data, wire_len, rt_ns, partial| {
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

    /// Whether a frame is ready (no syscall).
    pub fn has_frames(&self) -> bool {
        self.ring.ready()
    }

    /// Sends `frames` out of the device with as few `sendmmsg` calls as it
    /// takes; returns how many were accepted. A frame the device refuses is
    /// counted in [`PortStats::tx_errors`] and skipped, so one bad frame
    /// does not stall the batch.
    pub fn send_batch<B: AsRef<[u8]>>(&mut self, frames: &[B]) -> Result<usize, PktIoError> {
        let (sent, errors) = self.tx.send(&self.sock, &self.dev, frames)?;
        self.stats.tx_frames += sent as u64;
        self.stats.tx_bytes += frames
            .iter()
            .take(sent + errors)
            .map(|f| f.as_ref().len() as u64)
            .sum::<u64>();
        self.stats.tx_errors += errors as u64;
        Ok(sent)
    }

    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// The kernel's count of frames it dropped because the ring was full
    /// (`PACKET_STATISTICS` `tp_drops`), cumulative since open.
    pub fn kernel_drops(&mut self) -> u64 {
        self.ring.kernel_drops(&self.sock)
    }
}

impl AsRawFd for Port {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
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
