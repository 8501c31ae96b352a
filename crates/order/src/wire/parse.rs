//! From a captured frame to the fields SRPIC, the metrics and the load
//! balancer's trace need: the one packet parser of the project, on
//! etherparse's header views (every byte is read through them).

use std::net::IpAddr;

use etherparse::err::{ip_auth, ipv4, tcp, LenError};
use etherparse::{
    EtherType, Ethernet2HeaderSlice, IpAuthHeaderSlice, IpNumber, Ipv4HeaderSlice,
    Ipv6FragmentHeaderSlice, Ipv6HeaderSlice, Ipv6RawExtHeaderSlice, SingleVlanHeaderSlice,
    TcpHeaderSlice, UdpHeaderSlice,
};
use serde::Serialize;

use super::tcp::{Flags, Options};
use super::ParseError;
use crate::flow::FlowKey;
use crate::sorter::{Descriptor, TcpSegment};

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

/// The network layer of a frame: what every reader of captures needs before
/// the transport header (the load balancer stops here, SRPIC goes on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPacket<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP protocol number of the upper layer (after IPv6 extension headers
    /// and an IPv4 authentication header).
    pub protocol: u8,
    /// More fragments set or a non-zero offset: part of a fragmented packet.
    pub fragmented: bool,
    /// An IPv6 fragment header is present, even an atomic one (RFC 6946),
    /// or the IPv4 packet is fragmented.
    pub fragment_header: bool,
    /// Offset zero: the upper-layer header, if any, is in this packet.
    pub first_fragment: bool,
    /// IPv4 options or an authentication header, or IPv6 extension headers.
    pub ip_options: bool,
    /// 802.1Q / 802.1ad tags walked through (Ethernet only).
    pub vlan_tags: u8,
    /// Upper-layer length from the IP length fields (a zero length, as in
    /// TSO/GSO captures and jumbograms, falls back to the captured length);
    /// `None` when the length field is shorter than the headers.
    pub upper_len: Option<usize>,
    /// The upper-layer bytes captured: up to the end the IP length fields
    /// give when the capture holds it, else to the end of the capture.
    pub upper: &'a [u8],
}

/// Walks a frame of the given link type down to its IP layer. Never panics,
/// whatever the bytes. A frame that is not IP (another ethertype, another IP
/// version, a loopback family other than IP) is [`ParseError::Unsupported`].
pub fn ip_packet(link: LinkType, frame: &[u8]) -> Result<IpPacket<'_>, ParseError> {
    let mut vlan_tags = 0;
    let ip = match link {
        LinkType::Ethernet => {
            let eth = Ethernet2HeaderSlice::from_slice(frame).map_err(len_error)?;
            let mut ether_type = eth.ether_type();
            let mut rest = &frame[eth.slice().len()..];
            // At most two tags (IEEE 802.1ad QinQ), as etherparse's slicers.
            while is_vlan(ether_type) && vlan_tags < 2 {
                let tag = SingleVlanHeaderSlice::from_slice(rest).map_err(len_error)?;
                ether_type = tag.ether_type();
                rest = &rest[tag.slice().len()..];
                vlan_tags += 1;
            }
            check_ether_type(ether_type)?;
            rest
        }
        LinkType::RawIp | LinkType::Ipv4 | LinkType::Ipv6 => frame,
        // Linux cooked captures: the protocol (an ethertype) at byte 14 of a
        // 16-byte header (SLL), at byte 0 of a 20-byte header (SLL2).
        LinkType::LinuxSll => cooked(frame, 16, 14)?,
        LinkType::LinuxSll2 => cooked(frame, 20, 0)?,
        LinkType::Null | LinkType::Loop => frame.get(4..).ok_or(ParseError::Truncated)?,
    };
    ip_layer(ip, vlan_tags)
}

fn is_vlan(t: EtherType) -> bool {
    t == EtherType::VLAN_TAGGED_FRAME
        || t == EtherType::PROVIDER_BRIDGING
        || t == EtherType::VLAN_DOUBLE_TAGGED_FRAME
}

fn check_ether_type(t: EtherType) -> Result<(), ParseError> {
    if t == EtherType::IPV4 || t == EtherType::IPV6 {
        Ok(())
    } else {
        Err(ParseError::Unsupported)
    }
}

fn cooked(frame: &[u8], header_len: usize, proto_at: usize) -> Result<&[u8], ParseError> {
    let (Some(proto), Some(rest)) = (frame.get(proto_at..proto_at + 2), frame.get(header_len..))
    else {
        return Err(ParseError::Truncated);
    };
    check_ether_type(EtherType(u16::from_be_bytes([proto[0], proto[1]])))?;
    Ok(rest)
}

fn len_error(_: LenError) -> ParseError {
    ParseError::Truncated
}

/// An IPv4 or IPv6 packet, told apart by its version nibble.
fn ip_layer(ip: &[u8], vlan_tags: u8) -> Result<IpPacket<'_>, ParseError> {
    match ip.first().map(|b| b >> 4) {
        None => Err(ParseError::Truncated),
        Some(4) => ipv4_layer(ip, vlan_tags),
        Some(6) => ipv6_layer(ip, vlan_tags),
        Some(_) => Err(ParseError::Unsupported),
    }
}

fn ipv4_layer(ip: &[u8], vlan_tags: u8) -> Result<IpPacket<'_>, ParseError> {
    let h = Ipv4HeaderSlice::from_slice(ip).map_err(|e| match e {
        ipv4::HeaderSliceError::Len(_) => ParseError::Truncated,
        ipv4::HeaderSliceError::Content(_) => ParseError::Malformed,
    })?;
    let mut header_len = h.slice().len();
    let fragmented = h.is_fragmenting_payload();
    let first_fragment = h.fragments_offset().value() == 0;
    let mut protocol = h.protocol();
    let mut options = header_len > 20;
    // RFC 4302: an authentication header sits between IPv4 and the upper
    // layer; like an option it makes the packet unsuitable for SRPIC.
    if protocol == IpNumber::AUTHENTICATION_HEADER && first_fragment {
        let auth = IpAuthHeaderSlice::from_slice(&ip[header_len..]).map_err(|e| match e {
            ip_auth::HeaderSliceError::Len(_) => ParseError::Truncated,
            ip_auth::HeaderSliceError::Content(_) => ParseError::Malformed,
        })?;
        header_len += auth.slice().len();
        protocol = auth.next_header();
        options = true;
    }
    // Total Length 0 happens in captures of TSO/GSO sends: the captured length.
    let declared = usize::from(h.total_len());
    let total = if declared == 0 { ip.len() } else { declared };
    Ok(IpPacket {
        src: IpAddr::V4(h.source_addr()),
        dst: IpAddr::V4(h.destination_addr()),
        protocol: protocol.0,
        fragmented,
        fragment_header: fragmented,
        first_fragment,
        ip_options: options,
        vlan_tags,
        upper_len: total.checked_sub(header_len),
        upper: upper_bytes(ip, header_len, total),
    })
}

/// RFC 8200 section 4 and the IANA list of IPv6 extension headers (those
/// etherparse's `Ipv6Extensions` does not walk, 135/139/140, have the
/// generic layout): walked to the upper layer, stopping after the fragment
/// header of a non-first fragment (what follows is data).
fn ipv6_layer(ip: &[u8], vlan_tags: u8) -> Result<IpPacket<'_>, ParseError> {
    let h = Ipv6HeaderSlice::from_slice(ip).map_err(|e| match e {
        etherparse::err::ipv6::HeaderSliceError::Len(_) => ParseError::Truncated,
        etherparse::err::ipv6::HeaderSliceError::Content(_) => ParseError::Malformed,
    })?;
    let mut next = h.next_header();
    let mut at = h.slice().len();
    let mut extensions = 0u8;
    let (mut fragment_header, mut fragmented, mut first_fragment) = (false, false, true);
    loop {
        let rest = &ip[at..];
        let (len, following) = match next {
            IpNumber::IPV6_HEADER_HOP_BY_HOP
            | IpNumber::IPV6_ROUTE_HEADER
            | IpNumber::IPV6_DESTINATION_OPTIONS
            | IpNumber::MOBILITY_HEADER
            | IpNumber::HIP
            | IpNumber::SHIM6 => {
                let e = Ipv6RawExtHeaderSlice::from_slice(rest).map_err(len_error)?;
                (e.slice().len(), e.next_header())
            }
            IpNumber::AUTHENTICATION_HEADER => {
                let e = IpAuthHeaderSlice::from_slice(rest).map_err(|e| match e {
                    ip_auth::HeaderSliceError::Len(_) => ParseError::Truncated,
                    ip_auth::HeaderSliceError::Content(_) => ParseError::Malformed,
                })?;
                (e.slice().len(), e.next_header())
            }
            IpNumber::IPV6_FRAGMENTATION_HEADER => {
                let f = Ipv6FragmentHeaderSlice::from_slice(rest).map_err(len_error)?;
                fragment_header = true;
                fragmented |= f.is_fragmenting_payload();
                first_fragment = f.fragment_offset().value() == 0;
                (f.slice().len(), f.next_header())
            }
            _ => break,
        };
        next = following;
        at += len;
        extensions = extensions.saturating_add(1);
        if !first_fragment {
            break;
        }
    }
    // Payload Length 0: a jumbogram or a GSO capture; the captured length.
    let declared = usize::from(h.payload_length());
    let payload = if declared == 0 {
        ip.len() - 40
    } else {
        declared
    };
    Ok(IpPacket {
        src: IpAddr::V6(h.source_addr()),
        dst: IpAddr::V6(h.destination_addr()),
        protocol: next.0,
        fragmented,
        fragment_header,
        first_fragment,
        ip_options: extensions > 0,
        vlan_tags,
        upper_len: payload.checked_sub(at - 40),
        upper: upper_bytes(ip, at, 40 + payload),
    })
}

/// `ip[header_len..total]`, or to the end of the capture when it ends
/// first or `total` does not cover the headers.
fn upper_bytes(ip: &[u8], header_len: usize, total: usize) -> &[u8] {
    let end = if total >= header_len {
        total.min(ip.len())
    } else {
        ip.len()
    };
    ip.get(header_len..end).unwrap_or_default()
}

/// Parses a frame of the given link type. Never panics, whatever the bytes.
pub fn parse(link: LinkType, frame: &[u8]) -> Result<PacketInfo, ParseError> {
    let ip = ip_packet(link, frame)?;
    let upper_len = ip.upper_len.ok_or(ParseError::Malformed)?;
    let transport = if ip.first_fragment {
        // When the capture holds all the IP length fields announce, a
        // transport header running past them is a length that lies.
        parse_transport(ip.protocol, ip.upper, upper_len).map_err(|e| {
            if e == ParseError::Truncated && ip.upper.len() >= upper_len {
                ParseError::Malformed
            } else {
                e
            }
        })?
    } else {
        Transport::Other
    };
    Ok(PacketInfo {
        src: ip.src,
        dst: ip.dst,
        protocol: ip.protocol,
        transport,
        fragment: ip.fragment_header,
        ip_options: ip.ip_options,
    })
}

fn parse_transport(protocol: u8, buf: &[u8], upper_len: usize) -> Result<Transport, ParseError> {
    Ok(match IpNumber(protocol) {
        IpNumber::TCP => {
            let t = tcp_fixed(buf)?;
            let payload_len = upper_len
                .checked_sub(t.header_len)
                .ok_or(ParseError::Malformed)?;
            Transport::Tcp(TcpInfo {
                sport: t.sport,
                dport: t.dport,
                seq: t.seq,
                ack: t.ack,
                flags: t.flags,
                payload_len: u32::try_from(payload_len).map_err(|_| ParseError::Malformed)?,
                options: Options::classify(buf.get(20..).unwrap_or_default(), t.header_len - 20),
            })
        }
        IpNumber::UDP => {
            let d = UdpHeaderSlice::from_slice(buf).map_err(len_error)?;
            Transport::Udp {
                sport: d.source_port(),
                dport: d.destination_port(),
            }
        }
        _ => Transport::Other,
    })
}

/// The fixed part of a TCP header (RFC 9293 section 3.1).
struct TcpFixed {
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: Flags,
    /// From the data offset, options included.
    header_len: usize,
}

/// Reads the fixed TCP header. Captures cut to the headers often end inside
/// the options: the fixed 20 bytes are then still read (etherparse reads a
/// copy whose data offset says 5) and the options come out unreadable.
fn tcp_fixed(buf: &[u8]) -> Result<TcpFixed, ParseError> {
    let read = |s: &TcpHeaderSlice, header_len: usize| TcpFixed {
        sport: s.source_port(),
        dport: s.destination_port(),
        seq: s.sequence_number(),
        ack: s.acknowledgment_number(),
        flags: Flags(
            [
                (s.fin(), Flags::FIN),
                (s.syn(), Flags::SYN),
                (s.rst(), Flags::RST),
                (s.psh(), Flags::PSH),
                (s.ack(), Flags::ACK),
                (s.urg(), Flags::URG),
                (s.ece(), Flags::ECE),
                (s.cwr(), Flags::CWR),
            ]
            .iter()
            .filter(|(set, _)| *set)
            .fold(0, |bits, (_, bit)| bits | bit),
        ),
        header_len,
    };
    match TcpHeaderSlice::from_slice(buf) {
        Ok(s) => Ok(read(&s, s.slice().len())),
        Err(tcp::HeaderSliceError::Content(_)) => Err(ParseError::Malformed),
        Err(tcp::HeaderSliceError::Len(e)) => {
            let Some(fixed) = buf.get(..20) else {
                return Err(ParseError::Truncated);
            };
            let mut copy = [0u8; 20];
            copy.copy_from_slice(fixed);
            copy[12] = (5 << 4) | (copy[12] & 0x0f);
            let s = TcpHeaderSlice::from_slice(&copy).map_err(|_| ParseError::Truncated)?;
            Ok(read(&s, e.required_len))
        }
    }
}
