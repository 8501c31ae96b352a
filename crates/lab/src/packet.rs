//! Ethernet frames for one flow, for injection: Ethernet II, IPv4 (RFC 791)
//! or IPv6 (RFC 8200), then a TCP (RFC 9293, flags ACK) or UDP (RFC 768)
//! header and a payload, built with etherparse's `PacketBuilder` (lengths
//! and checksums filled).

use std::net::IpAddr;

use etherparse::{IpHeaders, IpNumber, Ipv4Header, Ipv6Header, PacketBuilder};
use rss::{FlowTuple, L4Proto};

pub const ETH_P_IPV4: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;

/// One frame of `tuple`, from MAC `src_mac` to `dst_mac`, with `payload`
/// bytes (0xa5) after the L4 header. Returns `None` for mixed address
/// families.
pub fn frame(
    tuple: &FlowTuple,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    payload: usize,
) -> Option<Vec<u8>> {
    // The builder overwrites lengths, protocol and checksum.
    let ip = match (tuple.src, tuple.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = Ipv4Header::new(0, 64, IpNumber::TCP, s.octets(), d.octets()).ok()?;
            h.dont_fragment = true;
            IpHeaders::Ipv4(h, Default::default())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => IpHeaders::Ipv6(
            Ipv6Header {
                hop_limit: 64,
                source: s.octets(),
                destination: d.octets(),
                ..Default::default()
            },
            Default::default(),
        ),
        _ => return None,
    };
    let builder = PacketBuilder::ethernet2(src_mac, dst_mac).ip(ip);
    let body = vec![0xa5; payload];
    let mut out = Vec::with_capacity(14 + 40 + 20 + payload);
    let written = match tuple.proto {
        L4Proto::Tcp => builder
            .tcp(tuple.src_port, tuple.dst_port, 0, 65535)
            .ack(0)
            .write(&mut out, &body)
            .is_ok(),
        L4Proto::Udp => builder
            .udp(tuple.src_port, tuple.dst_port)
            .write(&mut out, &body)
            .is_ok(),
        // An experimental protocol number (RFC 3692: 253).
        L4Proto::Other => builder.write(&mut out, IpNumber(253), &body).is_ok(),
    };
    written.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_header_checksum_verifies() {
        let t = FlowTuple::new(
            "10.0.0.1".parse().unwrap(),
            1,
            "10.0.0.2".parse().unwrap(),
            2,
            L4Proto::Udp,
        );
        let f = frame(&t, [2; 6], [4; 6], 10).unwrap();
        assert_eq!(f.len(), 14 + 20 + 8 + 10);
        let ip = etherparse::Ipv4HeaderSlice::from_slice(&f[14..34]).unwrap();
        assert_eq!(ip.header_checksum(), ip.to_header().calc_header_checksum());
        assert!(ip.dont_fragment());
        assert_eq!(&f[34..36], &1u16.to_be_bytes());
    }

    #[test]
    fn other_protocols_carry_the_payload_after_ip() {
        let t = FlowTuple::new(
            "10.0.0.1".parse().unwrap(),
            0,
            "10.0.0.2".parse().unwrap(),
            0,
            L4Proto::Other,
        );
        let f = frame(&t, [2; 6], [4; 6], 4).unwrap();
        assert_eq!(f.len(), 14 + 20 + 4);
        assert_eq!(f[14 + 9], 253);
        let mixed = FlowTuple::new(
            "10.0.0.1".parse().unwrap(),
            1,
            "fd00::2".parse().unwrap(),
            2,
            L4Proto::Tcp,
        );
        assert_eq!(frame(&mixed, [2; 6], [4; 6], 0), None);
    }

    #[test]
    fn ipv6_tcp_layout() {
        let t = FlowTuple::new(
            "fd00::1".parse().unwrap(),
            80,
            "fd00::2".parse().unwrap(),
            443,
            L4Proto::Tcp,
        );
        let f = frame(&t, [2; 6], [4; 6], 0).unwrap();
        assert_eq!(&f[12..14], &ETH_P_IPV6.to_be_bytes());
        assert_eq!(f[14 + 6], 6);
        assert_eq!(&f[54 + 2..54 + 4], &443u16.to_be_bytes());
    }
}
