//! Ethernet frames for one flow, built by hand for injection: Ethernet II,
//! IPv4 (RFC 791, header checksum filled) or IPv6 (RFC 8200), then a TCP
//! (RFC 9293, flags ACK) or UDP (RFC 768) header and a payload. L4
//! checksums are left zero: the frames exist to be counted by the receiver's
//! datapath, not delivered to a socket.

use std::net::IpAddr;

use rss::{FlowTuple, L4Proto};

pub const ETH_P_IPV4: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;

fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One frame of `tuple`, from MAC `src_mac` to `dst_mac`, with `payload`
/// bytes after the L4 header. Returns `None` for mixed address families.
pub fn frame(
    tuple: &FlowTuple,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    payload: usize,
) -> Option<Vec<u8>> {
    let (ip_proto, l4): (u8, Vec<u8>) = match tuple.proto {
        L4Proto::Tcp => {
            let mut h = vec![0u8; 20];
            h[0..2].copy_from_slice(&tuple.src_port.to_be_bytes());
            h[2..4].copy_from_slice(&tuple.dst_port.to_be_bytes());
            h[12] = 5 << 4; // data offset: 5 words
            h[13] = 0x10; // ACK
            h[14..16].copy_from_slice(&65535u16.to_be_bytes());
            (6, h)
        }
        L4Proto::Udp => {
            let mut h = vec![0u8; 8];
            h[0..2].copy_from_slice(&tuple.src_port.to_be_bytes());
            h[2..4].copy_from_slice(&tuple.dst_port.to_be_bytes());
            h[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
            (17, h)
        }
        // An unassigned-looking experimental protocol (RFC 3692: 253).
        L4Proto::Other => (253, Vec::new()),
    };
    let l4_len = l4.len() + payload;
    let mut out = Vec::with_capacity(14 + 40 + l4_len);
    out.extend_from_slice(&dst_mac);
    out.extend_from_slice(&src_mac);
    match (tuple.src, tuple.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out.extend_from_slice(&ETH_P_IPV4.to_be_bytes());
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            ip[6] = 0x40; // don't fragment
            ip[8] = 64;
            ip[9] = ip_proto;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let sum = ipv4_checksum(&ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            out.extend_from_slice(&ip);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            out.extend_from_slice(&ETH_P_IPV6.to_be_bytes());
            let mut ip = [0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            ip[6] = ip_proto;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            out.extend_from_slice(&ip);
        }
        _ => return None,
    }
    out.extend_from_slice(&l4);
    out.resize(out.len() + payload, 0xa5);
    Some(out)
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let parts: Vec<u8> = text
        .trim()
        .split(':')
        .map(|p| u8::from_str_radix(p, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    parts.try_into().ok()
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
        assert_eq!(ipv4_checksum(&f[14..34]), 0);
        assert_eq!(&f[34..36], &1u16.to_be_bytes());
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
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some([2, 0, 0, 0, 0, 10]));
    }
}
