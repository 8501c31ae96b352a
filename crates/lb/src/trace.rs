//! A capture (pcap or pcapng, read by [`order::capture`]) reduced to each
//! frame's timestamp and the 5-tuple the receiving NIC hashes, and nothing
//! else.
//!
//! # What is kept, what is skipped (the rule)
//!
//! Each frame is classified once and counted in [`TraceStats`]:
//!
//! - **IPv4 or IPv6, TCP or UDP, first fragment or unfragmented, at least 4
//!   bytes of L4 header captured**: kept with both ports (`ipv4`/`ipv6`).
//! - **IP fragments** (MF set or offset non-zero) and **other IP protocols**
//!   (ICMP, GRE, ...): kept with ports 0 and [`L4Proto::Other`], because a NIC
//!   hashes only the two addresses for them (`fragments`, `other_l4`).
//! - **TCP/UDP whose ports were cut off by the snap length**: skipped
//!   (`truncated`): the NIC would have hashed ports we cannot see.
//! - **Frames that are not IP** (ARP, LLDP, ...): skipped (`non_ip`).
//! - **Frames whose IP header is cut or malformed**: skipped (`malformed`).
//! - VLAN tags (802.1Q, QinQ) and IPv6 extension headers are walked through
//!   (the project's one packet parser, [`order::wire::ip_packet`], on
//!   etherparse); `vlan_tagged` counts the tagged frames.
//! - A final record that runs past the end of the file (a capture cut short)
//!   ends the trace: `truncated_tail` is set, the packets before it are kept.
//! - A record whose header is impossible (a length above
//!   [`order::capture::MAX_RECORD_LEN`] and the snap length, a sub-second
//!   field of a second or more) is a [`TraceError::CorruptRecord`]: the rest
//!   of the file cannot be trusted.
//!
//! Packets are returned in timestamp order (a stable sort; `out_of_order`
//! counts records whose timestamp was earlier than the one before).
//!
//! Link types: those of [`order::wire::LinkType`]: Ethernet (1), raw IP
//! (101, and 12/14 as some systems number it), IPv4 (228), IPv6 (229), Linux
//! cooked SLL (113) and SLL2 (276), BSD loopback (0, 108).

use std::path::Path;

use order::capture::{Capture, CaptureError};
use order::wire::{self, LinkType, ParseError};
use rss::{FlowTuple, L4Proto};
use serde::Serialize;

use crate::error::TraceError;

/// IANA protocol numbers (RFC 9293, RFC 768).
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// One packet as the load balancer and the receiving NIC see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracePacket {
    /// Capture time, nanoseconds since the epoch.
    pub ts_ns: u64,
    pub tuple: FlowTuple,
}

/// How the frames of a capture were classified (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TraceStats {
    pub frames: usize,
    pub ipv4: usize,
    pub ipv6: usize,
    pub fragments: usize,
    pub other_l4: usize,
    pub truncated: usize,
    pub non_ip: usize,
    pub malformed: usize,
    pub vlan_tagged: usize,
    pub out_of_order: usize,
    pub truncated_tail: bool,
}

impl TraceStats {
    /// Frames kept as packets.
    pub fn kept(&self) -> usize {
        self.ipv4 + self.ipv6
    }

    /// Frames skipped.
    pub fn skipped(&self) -> usize {
        self.truncated + self.non_ip + self.malformed
    }
}

/// A capture reduced to what load balancing needs.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The pcap link type number.
    pub link_type: u32,
    /// Kept packets, in timestamp order.
    pub packets: Vec<TracePacket>,
    pub stats: TraceStats,
}

impl Trace {
    /// Reads a pcap or pcapng file.
    pub fn open(path: &Path) -> Result<Trace, TraceError> {
        let bytes = std::fs::read(path).map_err(|e| TraceError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Trace::parse(&bytes)
    }

    /// Parses a whole pcap or pcapng file held in memory, through the
    /// project's capture reader ([`order::capture`]). Never panics (fuzzed
    /// by `fuzz/fuzz_targets/lb_trace.rs`).
    pub fn parse(bytes: &[u8]) -> Result<Trace, TraceError> {
        let (capture, damage) = Capture::read_partial(bytes).map_err(|e| match e {
            CaptureError::UnsupportedLinkType(code) => TraceError::UnsupportedLinkType(code),
            other => TraceError::NotACapture(other.to_string()),
        })?;
        let mut stats = TraceStats::default();
        match damage {
            None => {}
            Some(CaptureError::Truncated { .. }) => stats.truncated_tail = true,
            Some(CaptureError::Corrupt {
                packets,
                offset,
                reason,
            }) => {
                return Err(TraceError::CorruptRecord {
                    index: packets,
                    offset,
                    reason,
                })
            }
            Some(other) => return Err(TraceError::NotACapture(other.to_string())),
        }
        let mut packets = Vec::new();
        let mut last_ts = 0u64;
        for frame in &capture.packets {
            stats.frames += 1;
            if frame.time_ns < last_ts {
                stats.out_of_order += 1;
            }
            last_ts = frame.time_ns;
            if let Some(tuple) = classify(frame.link, &frame.data, &mut stats) {
                packets.push(TracePacket {
                    ts_ns: frame.time_ns,
                    tuple,
                });
            }
        }
        if packets.is_empty() {
            return Err(TraceError::NoIpPackets {
                frames: stats.frames,
            });
        }
        packets.sort_by_key(|p| p.ts_ns);
        let link_type = capture.link_code().ok_or_else(|| {
            TraceError::NotACapture("packets, but no interface describes their link type".into())
        })?;
        Ok(Trace {
            link_type,
            packets,
            stats,
        })
    }

    /// Distinct 5-tuples.
    pub fn flows(&self) -> usize {
        let set: std::collections::HashSet<FlowTuple> =
            self.packets.iter().map(|p| p.tuple).collect();
        set.len()
    }

    /// Time from the first to the last packet, in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        match (self.packets.first(), self.packets.last()) {
            (Some(a), Some(b)) => b.ts_ns - a.ts_ns,
            _ => 0,
        }
    }

    /// The first `n` packets (for tests and quick runs).
    pub fn truncate(&mut self, n: usize) {
        self.packets.truncate(n);
    }
}

/// The tuple of one frame, or `None` (counted) if it cannot be placed.
fn classify(link: LinkType, data: &[u8], stats: &mut TraceStats) -> Option<FlowTuple> {
    let ip = match wire::ip_packet(link, data) {
        Ok(ip) => ip,
        Err(ParseError::Unsupported) => {
            stats.non_ip += 1;
            return None;
        }
        Err(ParseError::Truncated | ParseError::Malformed) => {
            stats.malformed += 1;
            return None;
        }
    };
    if ip.vlan_tags > 0 {
        stats.vlan_tagged += 1;
    }
    let tcp = ip.protocol == PROTO_TCP;
    let (proto, ports) = if ip.fragmented {
        stats.fragments += 1;
        (L4Proto::Other, (0, 0))
    } else if tcp || ip.protocol == PROTO_UDP {
        let Some(p) = ip.upper.get(..4) else {
            stats.truncated += 1;
            return None;
        };
        let proto = if tcp { L4Proto::Tcp } else { L4Proto::Udp };
        (
            proto,
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            ),
        )
    } else {
        stats.other_l4 += 1;
        (L4Proto::Other, (0, 0))
    };
    if ip.src.is_ipv4() {
        stats.ipv4 += 1;
    } else {
        stats.ipv6 += 1;
    }
    Some(FlowTuple::new(ip.src, ports.0, ip.dst, ports.1, proto))
}
