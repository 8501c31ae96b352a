//! From a captured frame to the fields SRPIC and the metrics need.

use std::net::IpAddr;

use serde::Serialize;

use super::tcp::{Flags, Options};
use super::{be16, ethernet, ipv4, ipv6, tcp, udp, ParseError};
use crate::flow::FlowKey;
use crate::sorter::{Descriptor, TcpSegment};

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// The link layer a frame starts with (pcap LINKTYPE_* values in [`LinkType::from_pcap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkType {
    /// LINKTYPE_ETHERNET (1), with optional 802.1Q/802.1ad tags.
    Ethernet,
    /// LINKTYPE_RAW (101; also DLT 12 and 14): an IPv4 or IPv6 packet, told apart by its version.
    RawIp,
    /// LINKTYPE_IPV4 (228).
    Ipv4,
    /// LINKTYPE_IPV6 (229).
    Ipv6,
    /// LINKTYPE_LINUX_SLL (113): Linux "cooked" capture, 16-byte header.
    LinuxSll,
    /// LINKTYPE_LINUX_SLL2 (276): 20-byte header.
    LinuxSll2,
    /// LINKTYPE_NULL (0): 4-byte address family in the capturing host's byte order.
    Null,
    /// LINKTYPE_LOOP (108): 4-byte address family, network byte order.
    Loop,
}

impl LinkType {
    pub fn from_pcap(linktype: u32) -> Option<Self> {
        Some(match linktype {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            12 | 14 | 101 => LinkType::RawIp,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            _ => return None,
        })
    }
}

/// The transport header, as far as it was decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    Tcp(TcpInfo),
    Udp {
        sport: u16,
        dport: u16,
    },
    /// Another protocol, or a non-first fragment (no transport header).
    Other,
}

/// What the sorter and the metrics use from a TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TcpInfo {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: Flags,
    /// Payload bytes, from the IP length fields (not from the captured
    /// length: captures are often cut to the headers).
    pub payload_len: u32,
    pub options: Options,
}

/// Whether SRPIC may hold a packet, and if not, why (paper section 3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Suitability {
    Suitable,
    /// Not TCP (or a frame that did not parse).
    NotTcp,
    /// An IPv4 or IPv6 fragment.
    Fragment,
    /// IPv4 options, or any IPv6 extension header (their IPv6 counterpart).
    IpOptions,
    /// TCP options other than the timestamp option (or unreadable ones).
    TcpOptions,
    /// SYN, FIN, RST, URG, ECE or CWR set.
    ControlFlags,
}

/// The parsed headers of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PacketInfo {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP protocol number of the upper layer (after IPv6 extension headers).
    pub protocol: u8,
    pub transport: Transport,
    pub fragment: bool,
    /// IPv4 options present, or IPv6 extension headers present.
    pub ip_options: bool,
}

impl PacketInfo {
    /// The 4-tuple, for TCP and UDP.
    pub fn flow(&self) -> Option<FlowKey> {
        match self.transport {
            Transport::Tcp(t) => Some(FlowKey::new(self.src, t.sport, self.dst, t.dport)),
            Transport::Udp { sport, dport } => Some(FlowKey::new(self.src, sport, self.dst, dport)),
            Transport::Other => None,
        }
    }

    pub fn tcp(&self) -> Option<&TcpInfo> {
        match &self.transport {
            Transport::Tcp(t) => Some(t),
            _ => None,
        }
    }

    /// SRPIC's rule (section 3.3): fragments, non-TCP, IP options, TCP options
    /// other than timestamps and the control bits SYN/FIN/RST/URG/ECE/CWR are
    /// delivered at once. Zero-length segments (pure ACKs) are suitable: the
    /// paper does not exclude them, and they sort by sequence number like any
    /// other segment (stably, so a pure ACK never overtakes data at its seq).
    pub fn suitability(&self) -> Suitability {
        let Some(t) = self.tcp() else {
            return Suitability::NotTcp;
        };
        if self.fragment {
            Suitability::Fragment
        } else if self.ip_options {
            Suitability::IpOptions
        } else if t.flags.needs_immediate_delivery() {
            Suitability::ControlFlags
        } else if !matches!(t.options, Options::None | Options::TimestampOnly) {
            Suitability::TcpOptions
        } else {
            Suitability::Suitable
        }
    }

    /// The sorter's descriptor for this packet.
    pub fn descriptor(&self) -> Descriptor {
        match (self.suitability(), self.tcp()) {
            (Suitability::Suitable, Some(t)) => Descriptor::Hold(TcpSegment {
                flow: FlowKey::new(self.src, t.sport, self.dst, t.dport),
                seq: t.seq,
                len: t.payload_len,
            }),
            _ => Descriptor::Pass { flow: self.flow() },
        }
    }
}

/// Parses a frame of the given link type. Never panics, whatever the bytes.
pub fn parse(link: LinkType, frame: &[u8]) -> Result<PacketInfo, ParseError> {
    let ip = match link {
        LinkType::Ethernet => {
            let f = ethernet::Frame::new_checked(frame)?;
            match f.ethertype() {
                ethernet::ETHERTYPE_IPV4 | ethernet::ETHERTYPE_IPV6 => f.payload(),
                _ => return Err(ParseError::Unsupported),
            }
        }
        LinkType::RawIp | LinkType::Ipv4 | LinkType::Ipv6 => frame,
        LinkType::LinuxSll => {
            if frame.len() < 16 {
                return Err(ParseError::Truncated);
            }
            check_ethertype(be16(frame, 14))?;
            &frame[16..]
        }
        LinkType::LinuxSll2 => {
            if frame.len() < 20 {
                return Err(ParseError::Truncated);
            }
            check_ethertype(be16(frame, 0))?;
            &frame[20..]
        }
        LinkType::Null | LinkType::Loop => {
            if frame.len() < 4 {
                return Err(ParseError::Truncated);
            }
            &frame[4..]
        }
    };
    parse_ip(ip)
}

fn check_ethertype(ethertype: u16) -> Result<(), ParseError> {
    match ethertype {
        ethernet::ETHERTYPE_IPV4 | ethernet::ETHERTYPE_IPV6 => Ok(()),
        _ => Err(ParseError::Unsupported),
    }
}

/// Parses an IPv4 or IPv6 packet (told apart by the version nibble).
pub fn parse_ip(ip: &[u8]) -> Result<PacketInfo, ParseError> {
    let Some(&first) = ip.first() else {
        return Err(ParseError::Truncated);
    };
    match first >> 4 {
        4 => {
            let p = ipv4::Packet::new_checked(ip)?;
            let declared = usize::from(p.total_len());
            // Total Length 0 happens in captures of TSO/GSO sends: fall back to the captured length.
            let total = if declared == 0 { ip.len() } else { declared };
            let upper_len = total
                .checked_sub(p.header_len())
                .ok_or(ParseError::Malformed)?;
            let transport = if p.is_first_fragment() {
                parse_transport(p.protocol(), p.payload(), upper_len)?
            } else {
                Transport::Other
            };
            Ok(PacketInfo {
                src: IpAddr::V4(p.src()),
                dst: IpAddr::V4(p.dst()),
                protocol: p.protocol(),
                transport,
                fragment: p.is_fragment(),
                ip_options: p.has_options(),
            })
        }
        6 => {
            let p = ipv6::Packet::new_checked(ip)?;
            let declared = usize::from(p.payload_len());
            // Payload Length 0: a jumbogram or a GSO capture; use the captured length.
            let payload = if declared == 0 {
                ip.len() - 40
            } else {
                declared
            };
            let upper_len = payload
                .checked_sub(p.header_len() - 40)
                .ok_or(ParseError::Malformed)?;
            let transport = if p.is_first_fragment() {
                parse_transport(p.upper_protocol(), p.upper_payload(), upper_len)?
            } else {
                Transport::Other
            };
            Ok(PacketInfo {
                src: IpAddr::V6(p.src()),
                dst: IpAddr::V6(p.dst()),
                protocol: p.upper_protocol(),
                transport,
                fragment: p.is_fragment(),
                ip_options: p.extension_headers() > 0,
            })
        }
        _ => Err(ParseError::Malformed),
    }
}

fn parse_transport(protocol: u8, buf: &[u8], upper_len: usize) -> Result<Transport, ParseError> {
    Ok(match protocol {
        PROTO_TCP => {
            let s = tcp::Segment::new_checked(buf)?;
            let payload_len = upper_len
                .checked_sub(s.header_len())
                .ok_or(ParseError::Malformed)?;
            Transport::Tcp(TcpInfo {
                sport: s.src_port(),
                dport: s.dst_port(),
                seq: s.seq(),
                ack: s.ack(),
                flags: s.flags(),
                payload_len: u32::try_from(payload_len).map_err(|_| ParseError::Malformed)?,
                options: s.options(),
            })
        }
        PROTO_UDP => {
            let d = udp::Datagram::new_checked(buf)?;
            Transport::Udp {
                sport: d.src_port(),
                dport: d.dst_port(),
            }
        }
        _ => Transport::Other,
    })
}
