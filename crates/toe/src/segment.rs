//! Frames in and out of the data path: a received frame parsed into a TCP
//! [`Segment`] (RFC 9293 section 3.1, options of RFC 7323 and RFC 6691), an
//! [`Arp`] packet (RFC 826) or a neighbour solicitation or advertisement
//! ([`Nd`], RFC 4861 section 4.3-4.4), with every checksum verified;
//! outgoing segments, ARP and neighbour discovery built with their
//! checksums (etherparse).
//!
//! This is the *Val* step of the thesis's pre-processor (section 4.3,
//! Fig. 4.6): a frame that is not a well-formed, correctly summed segment
//! never reaches a later stage.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{
    Icmpv6Type, NetSlice, PacketBuilder, SlicedPacket, TcpOptionElement, TransportSlice,
};
pub use order::wire::tcp::Flags;

pub use crate::sack::SackBlocks;
use thiserror::Error;

/// Why a frame was not taken.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SegmentError {
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("bad IPv4 header checksum")]
    BadIpChecksum,
    #[error("bad TCP checksum")]
    BadTcpChecksum,
    #[error("not TCP or ARP")]
    NotOurs,
}

/// The TCP options the data path and its control plane use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// (TSval, TSecr), RFC 7323 section 3.
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks [left, right) (RFC 2018 section 3), newest first; a
    /// D-SACK block (RFC 2883) comes first when there is one.
    pub sack: SackBlocks,
}

/// A received TCP segment, borrowing the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Its addresses, as it came: from the peer to us.
    pub route: Route,
    pub seq: u32,
    pub ack: u32,
    pub flags: Flags,
    pub window: u16,
    pub options: TcpOptions,
    /// The IP header's ECN field says Congestion Experienced (RFC 3168).
    pub ce: bool,
    pub payload: &'a [u8],
}

/// An ARP packet for IPv4 over Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arp {
    /// 1 request, 2 reply.
    pub op: u16,
    pub sender_mac: [u8; 6],
    pub sender_ip: Ipv4Addr,
    pub target_ip: Ipv4Addr,
}

/// A neighbour solicitation (135) or advertisement (136).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nd {
    pub solicit: bool,
    pub src_mac: [u8; 6],
    pub src: Ipv6Addr,
    pub target: Ipv6Addr,
    /// The source (solicitation) or target (advertisement) link-layer
    /// address option.
    pub lladdr: Option<[u8; 6]>,
}

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    Tcp(Segment<'a>),
    Arp(Arp),
    Nd(Nd),
}

const ICMPV6_NS: u8 = 135;
const ICMPV6_NA: u8 = 136;

const ETH_ARP: u16 = 0x0806;

/// Parses and verifies a frame from its Ethernet header.
pub fn parse(frame: &[u8]) -> Result<Frame<'_>, SegmentError> {
    if frame.len() >= 14 && u16::from_be_bytes([frame[12], frame[13]]) == ETH_ARP {
        return parse_arp(frame).map(Frame::Arp);
    }
    let packet =
        SlicedPacket::from_ethernet(frame).map_err(|e| SegmentError::Malformed(e.to_string()))?;
    let Some(etherparse::LinkSlice::Ethernet2(eth)) = packet.link else {
        return Err(SegmentError::Malformed("no Ethernet II header".into()));
    };
    let tcp = match packet.transport {
        Some(TransportSlice::Tcp(tcp)) => tcp,
        Some(TransportSlice::Icmpv6(icmp)) => return parse_nd(&eth.source(), &packet.net, &icmp),
        _ => return Err(SegmentError::NotOurs),
    };
    let (src, dst, ce, sum) = match &packet.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            if !same_checksum(h.header_checksum(), h.to_header().calc_header_checksum()) {
                return Err(SegmentError::BadIpChecksum);
            }
            if h.is_fragmenting_payload() {
                return Err(SegmentError::Malformed("IPv4 fragment".into()));
            }
            let sum = tcp.calc_checksum_ipv4(h.source(), h.destination());
            (
                IpAddr::from(h.source()),
                IpAddr::from(h.destination()),
                h.ecn().value() == 3,
                sum,
            )
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            let sum = tcp.calc_checksum_ipv6(h.source(), h.destination());
            (
                IpAddr::from(h.source()),
                IpAddr::from(h.destination()),
                h.traffic_class() & 3 == 3,
                sum,
            )
        }
        _ => return Err(SegmentError::NotOurs),
    };
    if !same_checksum(
        sum.map_err(|e| SegmentError::Malformed(e.to_string()))?,
        tcp.checksum(),
    ) {
        return Err(SegmentError::BadTcpChecksum);
    }
    Ok(Frame::Tcp(Segment {
        route: Route {
            src_mac: eth.source(),
            dst_mac: eth.destination(),
            src,
            dst,
            src_port: tcp.source_port(),
            dst_port: tcp.destination_port(),
        },
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        flags: Flags(tcp.header_slice()[13]),
        window: tcp.window_size(),
        options: options(&tcp)?,
        ce,
        payload: tcp.payload(),
    }))
}

/// Whether a checksum field holds the computed checksum. In ones'
/// complement 0x0000 and 0xffff are both zero (RFC 1071, RFC 1624 section
/// 3): a sender may write either (Linux sent 0xffff on a pure ACK whose
/// checksum computes to 0), and a receiver that sums the whole header
/// accepts both.
fn same_checksum(field: u16, computed: u16) -> bool {
    field == computed || (field | computed == 0xffff && (field == 0 || computed == 0))
}

fn options(tcp: &etherparse::TcpSlice<'_>) -> Result<TcpOptions, SegmentError> {
    let mut out = TcpOptions::default();
    for opt in tcp.options_iterator() {
        match opt.map_err(|e| SegmentError::Malformed(format!("TCP option: {e}")))? {
            TcpOptionElement::MaximumSegmentSize(m) => out.mss = Some(m),
            TcpOptionElement::WindowScale(s) => out.window_scale = Some(s.min(14)),
            TcpOptionElement::SelectiveAcknowledgementPermitted => out.sack_permitted = true,
            TcpOptionElement::Timestamp(v, e) => out.timestamp = Some((v, e)),
            TcpOptionElement::SelectiveAcknowledgement(first, rest) => {
                out.sack = SackBlocks::one(first);
                for b in rest.into_iter().flatten() {
                    out.sack.push(b);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// RFC 4861 section 7.1.1/7.1.2 validation: hop limit 255, code 0, a
/// valid checksum, a target that is not multicast.
fn parse_nd<'a>(
    src_mac: &[u8; 6],
    net: &Option<NetSlice<'_>>,
    icmp: &etherparse::Icmpv6Slice<'_>,
) -> Result<Frame<'a>, SegmentError> {
    let Some(NetSlice::Ipv6(ip)) = net else {
        return Err(SegmentError::NotOurs);
    };
    let h = ip.header();
    let kind = icmp.type_u8();
    if kind != ICMPV6_NS && kind != ICMPV6_NA {
        return Err(SegmentError::NotOurs);
    }
    if h.hop_limit() != 255 || icmp.code_u8() != 0 {
        return Err(SegmentError::Malformed(
            "neighbour discovery not from the link".into(),
        ));
    }
    if !icmp.is_checksum_valid(h.source(), h.destination()) {
        return Err(SegmentError::BadTcpChecksum);
    }
    let body = icmp.payload();
    let target: [u8; 16] = body
        .get(..16)
        .and_then(|t| t.try_into().ok())
        .ok_or_else(|| SegmentError::Malformed("neighbour discovery without a target".into()))?;
    let target = Ipv6Addr::from(target);
    if target.is_multicast() {
        return Err(SegmentError::Malformed("multicast neighbour target".into()));
    }
    // Options: type, length in 8-byte units, value; (1 source, 2 target)
    // link-layer address.
    let mut lladdr = None;
    let mut opts = &body[16..];
    while opts.len() >= 8 {
        let len = usize::from(opts[1]) * 8;
        if len == 0 || len > opts.len() {
            return Err(SegmentError::Malformed(
                "neighbour discovery option length".into(),
            ));
        }
        if (opts[0] == 1 || opts[0] == 2) && len == 8 {
            lladdr = opts[2..8].try_into().ok();
        }
        opts = &opts[len..];
    }
    Ok(Frame::Nd(Nd {
        solicit: kind == ICMPV6_NS,
        src_mac: *src_mac,
        src: Ipv6Addr::from(h.source()),
        target,
        lladdr,
    }))
}

/// The solicited-node multicast address of `a` (RFC 4291 section 2.7.1),
/// where solicitations for it are sent.
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// An advertisement answering solicitation `ns` for our address `ours`
/// (solicited and override set: RFC 4861 section 7.2.4).
pub fn na_reply(ns: &Nd, mac: [u8; 6], ours: Ipv6Addr) -> Vec<u8> {
    let mut body = Vec::with_capacity(24);
    body.extend(ours.octets());
    body.extend([2, 1]);
    body.extend(mac);
    icmpv6(
        mac,
        ns.src_mac,
        ours,
        ns.src,
        ICMPV6_NA,
        [0x60, 0, 0, 0],
        &body,
    )
}

/// A solicitation for `target`'s link-layer address.
pub fn ns_request(mac: [u8; 6], ours: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let group = solicited_node(target);
    let g = group.octets();
    let dst_mac = [0x33, 0x33, g[12], g[13], g[14], g[15]];
    let mut body = Vec::with_capacity(24);
    body.extend(target.octets());
    body.extend([1, 1]);
    body.extend(mac);
    icmpv6(mac, dst_mac, ours, group, ICMPV6_NS, [0; 4], &body)
}

fn icmpv6(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    kind: u8,
    bytes5to8: [u8; 4],
    body: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(86);
    PacketBuilder::ethernet2(src_mac, dst_mac)
        .ipv6(src.octets(), dst.octets(), 255)
        .icmpv6(Icmpv6Type::Unknown {
            type_u8: kind,
            code_u8: 0,
            bytes5to8,
        })
        .write(&mut f, body)
        .expect("writing to a Vec cannot fail");
    f
}

/// An ARP request for `target` from `ours`.
pub fn arp_request(mac: [u8; 6], ours: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend([0xff; 6]);
    f.extend(mac);
    f.extend(ETH_ARP.to_be_bytes());
    f.extend([0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend(mac);
    f.extend(ours.octets());
    f.extend([0; 6]);
    f.extend(target.octets());
    f.resize(60, 0);
    f
}

fn parse_arp(frame: &[u8]) -> Result<Arp, SegmentError> {
    let a = frame
        .get(14..42)
        .ok_or_else(|| SegmentError::Malformed("ARP shorter than 28 bytes".into()))?;
    // htype Ethernet (1), ptype IPv4 (0x0800), hlen 6, plen 4.
    if a[..6] != [0, 1, 8, 0, 6, 4] {
        return Err(SegmentError::NotOurs);
    }
    let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    Ok(Arp {
        op: u16::from_be_bytes([a[6], a[7]]),
        sender_mac: a[8..14].try_into().expect("6 bytes"),
        sender_ip: ip(&a[14..18]),
        target_ip: ip(&a[24..28]),
    })
}

/// The reply to ARP request `req` for our address, from `mac`.
pub fn arp_reply(req: &Arp, mac: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend(req.sender_mac);
    f.extend(mac);
    f.extend(ETH_ARP.to_be_bytes());
    f.extend([0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend(mac);
    f.extend(req.target_ip.octets());
    f.extend(req.sender_mac);
    f.extend(req.sender_ip.octets());
    f.resize(60, 0);
    f
}

/// The addresses of one direction of a connection, as they go on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
}

impl Route {
    /// The other direction of the connection.
    pub fn reversed(&self) -> Route {
        Route {
            src_mac: self.dst_mac,
            dst_mac: self.src_mac,
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
        }
    }
}

/// The header fields of a segment to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub seq: u32,
    pub ack: u32,
    pub flags: Flags,
    pub window: u16,
    pub options: TcpOptions,
}

/// Appends the frame of a segment to `out` (checksums filled in).
pub fn build(route: &Route, h: &Header, payload: &[u8], out: &mut Vec<u8>) {
    let eth = PacketBuilder::ethernet2(route.src_mac, route.dst_mac);
    let ip = match (route.src, route.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 64),
        (s, d) => eth.ipv6(v6(s), v6(d), 64),
    };
    let mut tcp = ip.tcp(route.src_port, route.dst_port, h.seq, h.window);
    let f = h.flags;
    if f.has(Flags::ACK) {
        tcp = tcp.ack(h.ack);
    }
    type Step = etherparse::PacketBuilderStep<etherparse::TcpHeader>;
    type SetFlag = fn(Step) -> Step;
    let setters: [(u8, SetFlag); 6] = [
        (Flags::SYN, Step::syn),
        (Flags::FIN, Step::fin),
        (Flags::RST, Step::rst),
        (Flags::PSH, Step::psh),
        (Flags::ECE, Step::ece),
        (Flags::CWR, Step::cwr),
    ];
    for (flag, set) in setters {
        if f.has(flag) {
            tcp = set(tcp);
        }
    }
    let opts = option_elements(&h.options);
    let tcp = tcp
        .options(&opts)
        .expect("at most 40 bytes of options: SACK blocks are cut to fit beside the timestamp");
    tcp.write(out, payload)
        .expect("writing to a Vec cannot fail and the payload is below 64 KiB");
}

fn v6(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V6(a) => a.octets(),
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
    }
}

/// Options in the order Linux sends them, padded with NOPs to 32 bits.
fn option_elements(o: &TcpOptions) -> Vec<TcpOptionElement> {
    use TcpOptionElement::*;
    let mut v = Vec::with_capacity(8);
    if let Some(m) = o.mss {
        v.push(MaximumSegmentSize(m));
    }
    if o.sack_permitted {
        v.extend([Noop, Noop, SelectiveAcknowledgementPermitted]);
    }
    if let Some((val, ecr)) = o.timestamp {
        v.extend([Noop, Noop, Timestamp(val, ecr)]);
    }
    if let Some(s) = o.window_scale {
        v.extend([Noop, WindowScale(s)]);
    }
    // 40 option bytes: 4 blocks, 3 beside the timestamp (RFC 2018
    // section 3).
    let room = if o.timestamp.is_some() { 3 } else { 4 };
    let blocks = o.sack.truncated(room);
    if let Some(first) = blocks.first() {
        let mut rest = [None; 3];
        for (slot, b) in rest.iter_mut().zip(&blocks.as_slice()[1..]) {
            *slot = Some(*b);
        }
        v.extend([Noop, Noop, SelectiveAcknowledgement(first, rest)]);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> Route {
        Route {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            src_port: 40000,
            dst_port: 5201,
        }
    }

    fn header() -> Header {
        Header {
            seq: 1000,
            ack: 2000,
            flags: Flags(Flags::ACK | Flags::PSH),
            window: 512,
            options: TcpOptions {
                timestamp: Some((7, 9)),
                ..TcpOptions::default()
            },
        }
    }

    #[test]
    fn a_built_segment_parses_back() {
        for (src, dst) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
            let r = Route {
                src: src.parse().unwrap(),
                dst: dst.parse().unwrap(),
                ..route()
            };
            let mut f = Vec::new();
            build(&r, &header(), b"hello", &mut f);
            let Frame::Tcp(s) = parse(&f).unwrap() else {
                panic!("not TCP")
            };
            assert_eq!(s.route, r);
            assert_eq!(
                (s.route.src_port, s.route.dst_port, s.seq, s.ack),
                (40000, 5201, 1000, 2000)
            );
            assert_eq!(s.flags, Flags(Flags::ACK | Flags::PSH));
            assert_eq!(s.options.timestamp, Some((7, 9)));
            assert_eq!(s.payload, b"hello");
        }
    }

    #[test]
    fn both_zeros_of_ones_complement_are_a_valid_checksum() {
        assert!(same_checksum(0xffff, 0));
        assert!(same_checksum(0, 0xffff));
        assert!(same_checksum(0x1234, 0x1234));
        assert!(!same_checksum(0xfffe, 0));
        assert!(!same_checksum(0x1234, 0x1235));
        // The segment Linux sent: a pure ACK whose checksum computes to 0,
        // with 0xffff in the field.
        let frame: [u8; 66] = [
            0x72, 0x69, 0x4b, 0x22, 0xfb, 0x17, 0x12, 0xf8, 0x4d, 0x97, 0x23, 0xe1, 0x08, 0x00,
            0x45, 0x00, 0x00, 0x34, 0x4d, 0x57, 0x40, 0x00, 0x40, 0x06, 0xa8, 0x6d, 0x0a, 0x4d,
            0x98, 0x01, 0x0a, 0x4d, 0x98, 0x64, 0x96, 0x68, 0x15, 0xb3, 0xcd, 0xf0, 0x99, 0x77,
            0xab, 0xb5, 0x37, 0x3e, 0x80, 0x10, 0x01, 0xfc, 0xff, 0xff, 0x00, 0x00, 0x01, 0x01,
            0x08, 0x0a, 0xc2, 0x61, 0x76, 0xe0, 0x00, 0x00, 0x00, 0x08,
        ];
        let Frame::Tcp(s) = parse(&frame).unwrap() else {
            panic!("not TCP")
        };
        assert_eq!(
            (s.route.src_port, s.route.dst_port, s.window),
            (0x9668, 5555, 0x01fc)
        );
        // Either zero in the field: accepted.
        let mut other = frame;
        other[50..52].copy_from_slice(&[0, 0]);
        assert!(parse(&other).is_ok());
    }

    #[test]
    fn syn_options_round_trip() {
        let opts = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamp: Some((1, 0)),
            sack: SackBlocks::default(),
        };
        let h = Header {
            flags: Flags(Flags::SYN),
            options: opts,
            ..header()
        };
        let mut f = Vec::new();
        build(&route(), &h, &[], &mut f);
        let Frame::Tcp(s) = parse(&f).unwrap() else {
            panic!("not TCP")
        };
        assert_eq!(s.options, opts);
    }

    #[test]
    fn a_sack_block_beside_a_timestamp_round_trips() {
        let options = TcpOptions {
            timestamp: Some((5, 6)),
            sack: SackBlocks::one((3000, 4460)),
            ..TcpOptions::default()
        };
        assert_eq!(options_round_trip(options), options);
    }

    /// The options of a pure ACK carrying `options`, built and parsed.
    fn options_round_trip(options: TcpOptions) -> TcpOptions {
        let h = Header {
            options,
            ..header()
        };
        let mut f = Vec::new();
        build(&route(), &h, &[], &mut f);
        let Frame::Tcp(s) = parse(&f).unwrap() else {
            panic!("not TCP")
        };
        s.options
    }

    #[test]
    fn four_sack_blocks_fit_alone_three_beside_a_timestamp() {
        let mut sack = SackBlocks::default();
        for i in 0..4u32 {
            sack.push((i * 3000 + 1000, i * 3000 + 2000));
        }
        for (timestamp, fit) in [(None, 4), (Some((5, 6)), 3)] {
            let got = options_round_trip(TcpOptions {
                timestamp,
                sack,
                ..TcpOptions::default()
            });
            assert_eq!(got.sack, sack.truncated(fit));
            assert_eq!(got.timestamp, timestamp);
        }
    }

    #[test]
    fn corrupted_frames_are_refused() {
        let mut f = Vec::new();
        build(&route(), &header(), b"payload", &mut f);
        let mut bad = f.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(parse(&bad), Err(SegmentError::BadTcpChecksum));
        let mut bad = f.clone();
        bad[22] ^= 1; // IPv4 TTL
        assert_eq!(parse(&bad), Err(SegmentError::BadIpChecksum));
        for cut in [0, 13, 20, 40, 53] {
            assert!(parse(&f[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn neighbour_solicitation_round_trips_and_gets_an_advertisement() {
        let ours: Ipv6Addr = "fd00::100".parse().unwrap();
        let theirs: Ipv6Addr = "fd00::1".parse().unwrap();
        let ns = ns_request([2, 0, 0, 0, 0, 1], theirs, ours);
        let Frame::Nd(n) = parse(&ns).unwrap() else {
            panic!("not ND")
        };
        assert!(n.solicit);
        assert_eq!(
            (n.src, n.target, n.lladdr),
            (theirs, ours, Some([2, 0, 0, 0, 0, 1]))
        );
        assert_eq!(&ns[..6], &[0x33, 0x33, 0xff, 0, 1, 0]);
        let na = na_reply(&n, [2, 0, 0, 0, 0, 2], ours);
        let Frame::Nd(a) = parse(&na).unwrap() else {
            panic!("not ND")
        };
        assert!(!a.solicit);
        assert_eq!((a.target, a.lladdr), (ours, Some([2, 0, 0, 0, 0, 2])));
        let mut bad = na.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(parse(&bad).is_err());
        assert_eq!(
            solicited_node(ours),
            "ff02::1:ff00:100".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn arp_request_gets_a_reply() {
        let req = Arp {
            op: 1,
            sender_mac: [2, 0, 0, 0, 0, 9],
            sender_ip: Ipv4Addr::new(10, 0, 0, 9),
            target_ip: Ipv4Addr::new(10, 0, 0, 2),
        };
        let Frame::Arp(asked) =
            parse(&arp_request(req.sender_mac, req.sender_ip, req.target_ip)).unwrap()
        else {
            panic!("not ARP")
        };
        assert_eq!(asked, req);
        let reply = arp_reply(&req, [2, 0, 0, 0, 0, 2]);
        let Frame::Arp(a) = parse(&reply).unwrap() else {
            panic!("not ARP")
        };
        assert_eq!(a.op, 2);
        assert_eq!(a.sender_ip, req.target_ip);
        assert_eq!(a.sender_mac, [2, 0, 0, 0, 0, 2]);
        assert_eq!(a.target_ip, req.sender_ip);
        assert_eq!(&reply[..6], &req.sender_mac);
    }
}
