//! A minimal pcap reader: each frame's timestamp and the 5-tuple the
//! receiving NIC hashes, and nothing else.
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
//!   (etherparse's lax slicer); `vlan_tagged` counts the tagged frames.
//! - A final record that runs past the end of the file (a capture cut short)
//!   ends the trace: `truncated_tail` is set, the packets before it are kept.
//! - A record whose header is impossible (a length above [`MAX_RECORD_LEN`]
//!   and the snap length, a sub-second field of a second or more) is a
//!   [`TraceError::CorruptRecord`]: the rest of the file cannot be trusted.
//!
//! Packets are returned in timestamp order (a stable sort; `out_of_order`
//! counts records whose timestamp was earlier than the one before).
//!
//! Link types: Ethernet (1), raw IP (101, and 12/14 as some systems number
//! it), IPv4 (228), IPv6 (229), Linux cooked SLL (113) and SLL2 (276), BSD
//! loopback (0). pcapng is refused with a clear error.

use std::net::IpAddr;
use std::path::Path;

use etherparse::{EtherType, IpNumber, LaxNetSlice, LaxSlicedPacket};
use pcap_file::pcap::PcapParser;
use pcap_file::{PcapError, TsResolution};
use rss::{FlowTuple, L4Proto};
use serde::Serialize;

use crate::error::TraceError;

/// Largest record accepted whatever the file's snap length says (the largest
/// snap length tcpdump writes).
pub const MAX_RECORD_LEN: u32 = 262_144;

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
    /// Reads a pcap file.
    pub fn open(path: &Path) -> Result<Trace, TraceError> {
        let bytes = std::fs::read(path).map_err(|e| TraceError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Trace::parse(&bytes)
    }

    /// Parses a whole pcap file held in memory. Never panics (fuzzed by
    /// `fuzz/fuzz_targets/lb_trace.rs`).
    pub fn parse(bytes: &[u8]) -> Result<Trace, TraceError> {
        if bytes.len() >= 4 && bytes[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
            return Err(TraceError::PcapNg);
        }
        let (mut rest, parser) = PcapParser::new(bytes).map_err(|e| match e {
            PcapError::IncompleteBuffer => {
                TraceError::NotPcap(format!("{} bytes, a pcap header needs 24", bytes.len()))
            }
            other => TraceError::NotPcap(other.to_string()),
        })?;
        let header = parser.header();
        let link_type = u32::from(header.datalink);
        let link = Link::from_number(link_type)?;
        let frac_limit = match header.ts_resolution {
            TsResolution::MicroSecond => 1_000_000,
            TsResolution::NanoSecond => 1_000_000_000,
        };
        let frac_scale = 1_000_000_000 / frac_limit;
        let max_len = MAX_RECORD_LEN.max(header.snaplen);
        let mut stats = TraceStats::default();
        let mut packets = Vec::new();
        let mut last_ts = 0u64;
        while !rest.is_empty() {
            let offset = bytes.len() - rest.len();
            let index = stats.frames;
            let corrupt = |reason: String| TraceError::CorruptRecord {
                index,
                offset,
                reason,
            };
            if rest.len() >= 16 {
                // Check the declared length before the parser slices with it.
                let field = [rest[8], rest[9], rest[10], rest[11]];
                let incl_len = match header.endianness {
                    pcap_file::Endianness::Big => u32::from_be_bytes(field),
                    pcap_file::Endianness::Little => u32::from_le_bytes(field),
                };
                if incl_len > max_len {
                    return Err(corrupt(format!(
                        "captured length {incl_len} exceeds {max_len}"
                    )));
                }
            }
            let (next, raw) = match parser.next_raw_packet(rest) {
                Ok(r) => r,
                Err(PcapError::IncompleteBuffer) => {
                    stats.truncated_tail = true;
                    break;
                }
                Err(e) => return Err(corrupt(e.to_string())),
            };
            rest = next;
            if raw.ts_frac >= frac_limit {
                return Err(corrupt(format!(
                    "sub-second timestamp {} is not below {frac_limit}",
                    raw.ts_frac
                )));
            }
            stats.frames += 1;
            let ts_ns = u64::from(raw.ts_sec) * 1_000_000_000
                + u64::from(raw.ts_frac) * u64::from(frac_scale);
            if ts_ns < last_ts {
                stats.out_of_order += 1;
            }
            last_ts = ts_ns;
            if let Some(tuple) = classify(link, &raw.data, &mut stats) {
                packets.push(TracePacket { ts_ns, tuple });
            }
        }
        if packets.is_empty() {
            return Err(TraceError::NoIpPackets {
                frames: stats.frames,
            });
        }
        packets.sort_by_key(|p| p.ts_ns);
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

/// How a frame's first bytes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Ethernet,
    RawIp,
    /// Linux cooked capture: header of `len` bytes, protocol at `proto_at`.
    Cooked {
        len: usize,
        proto_at: usize,
    },
    /// BSD loopback: a 4-byte address family in the writer's byte order.
    Null,
}

impl Link {
    fn from_number(n: u32) -> Result<Link, TraceError> {
        Ok(match n {
            1 => Link::Ethernet,
            101 | 12 | 14 | 228 | 229 => Link::RawIp,
            113 => Link::Cooked {
                len: 16,
                proto_at: 14,
            },
            276 => Link::Cooked {
                len: 20,
                proto_at: 0,
            },
            0 => Link::Null,
            other => return Err(TraceError::UnsupportedLinkType(other)),
        })
    }
}

/// The tuple of one frame, or `None` (counted) if it cannot be placed.
fn classify(link: Link, data: &[u8], stats: &mut TraceStats) -> Option<FlowTuple> {
    let sliced = match link {
        Link::Ethernet => LaxSlicedPacket::from_ethernet(data).ok(),
        Link::RawIp => LaxSlicedPacket::from_ip(data).ok(),
        Link::Cooked { len, proto_at } => match (data.get(proto_at..proto_at + 2), data.get(len..))
        {
            (Some(p), Some(rest)) => Some(LaxSlicedPacket::from_ether_type(
                EtherType(u16::from_be_bytes([p[0], p[1]])),
                rest,
            )),
            _ => None,
        },
        Link::Null => match data.get(4..) {
            Some(rest) if matches!(rest.first().map(|b| b >> 4), Some(4 | 6)) => {
                LaxSlicedPacket::from_ip(rest).ok()
            }
            Some(_) => {
                stats.non_ip += 1;
                return None;
            }
            None => None,
        },
    };
    let Some(sliced) = sliced else {
        // The link layer itself is cut short, or the raw IP version is unknown.
        if link == Link::RawIp && !matches!(data.first().map(|b| b >> 4), Some(4 | 6)) {
            stats.non_ip += 1;
        } else {
            stats.malformed += 1;
        }
        return None;
    };
    if sliced.vlan.is_some() {
        stats.vlan_tagged += 1;
    }
    let Some(net) = &sliced.net else {
        if sliced.stop_err.is_some() {
            stats.malformed += 1;
        } else {
            stats.non_ip += 1;
        }
        return None;
    };
    let (src, dst, v4): (IpAddr, IpAddr, bool) = match net {
        LaxNetSlice::Ipv4(ip) => {
            let h = ip.header();
            (h.source_addr().into(), h.destination_addr().into(), true)
        }
        LaxNetSlice::Ipv6(ip) => {
            let h = ip.header();
            (h.source_addr().into(), h.destination_addr().into(), false)
        }
    };
    let payload = match net {
        LaxNetSlice::Ipv4(ip) => ip.payload(),
        LaxNetSlice::Ipv6(ip) => ip.payload(),
    };
    let (proto, ports) = if payload.fragmented {
        stats.fragments += 1;
        (L4Proto::Other, (0, 0))
    } else if payload.ip_number == IpNumber::TCP || payload.ip_number == IpNumber::UDP {
        let Some(p) = payload.payload.get(..4) else {
            stats.truncated += 1;
            return None;
        };
        let proto = if payload.ip_number == IpNumber::TCP {
            L4Proto::Tcp
        } else {
            L4Proto::Udp
        };
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
    if v4 {
        stats.ipv4 += 1;
    } else {
        stats.ipv6 += 1;
    }
    Some(FlowTuple::new(src, ports.0, dst, ports.1, proto))
}

/// Writes a little-endian microsecond pcap (for tests, fuzz seeds and
/// examples): `(ts_ns, frame)` records with the given link type.
pub fn write_pcap(link_type: u32, records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&link_type.to_le_bytes());
    for (ts, frame) in records {
        out.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((ts % 1_000_000_000 / 1000) as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(frame);
    }
    out
}
