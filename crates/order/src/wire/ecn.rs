//! The IP header's ECN field (RFC 3168 section 5) in an Ethernet frame,
//! read and rewritten in place: a sender marks its data ECN-capable, a
//! congested queue marks it Congestion Experienced. The headers are
//! checked with etherparse's views before a byte is changed; the IPv4
//! header checksum is updated incrementally (RFC 1624); no transport
//! checksum covers the field.

use etherparse::{EtherType, Ethernet2Slice, Ipv4HeaderSlice, Ipv6HeaderSlice};

/// The four ECN codepoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    NotEct = 0b00,
    Ect1 = 0b01,
    Ect0 = 0b10,
    Ce = 0b11,
}

impl Ecn {
    fn from_bits(b: u8) -> Ecn {
        match b & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// ECT(0), ECT(1) or CE: the sender is ECN-capable.
    pub fn is_capable(self) -> bool {
        self != Ecn::NotEct
    }
}

/// Where the ECN bits of an Ethernet frame are.
enum Field {
    /// The IPv4 TOS byte's low two bits (frame byte 15).
    V4,
    /// The IPv6 traffic class's low two bits: bits 5-4 of frame byte 15.
    V6,
}

fn field(frame: &[u8]) -> Option<Field> {
    let eth = Ethernet2Slice::from_slice_without_fcs(frame).ok()?;
    match eth.ether_type() {
        EtherType::IPV4 => Ipv4HeaderSlice::from_slice(eth.payload_slice())
            .ok()
            .map(|_| Field::V4),
        EtherType::IPV6 => Ipv6HeaderSlice::from_slice(eth.payload_slice())
            .ok()
            .map(|_| Field::V6),
        _ => None,
    }
}

/// The frame's ECN codepoint; None if it is not IPv4 or IPv6 over
/// Ethernet (or its IP header is truncated).
pub fn ecn(frame: &[u8]) -> Option<Ecn> {
    Some(match field(frame)? {
        Field::V4 => Ecn::from_bits(frame[15]),
        Field::V6 => Ecn::from_bits(frame[15] >> 4),
    })
}

/// Sets the frame's ECN codepoint to `to`; returns the old one, or None
/// (frame unchanged) if it is not IPv4 or IPv6 over Ethernet.
pub fn set_ecn(frame: &mut [u8], to: Ecn) -> Option<Ecn> {
    let f = field(frame)?;
    let old = ecn(frame)?;
    match f {
        Field::V4 => {
            let before = u16::from_be_bytes([frame[14], frame[15]]);
            frame[15] = (frame[15] & !0b11) | to as u8;
            let after = u16::from_be_bytes([frame[14], frame[15]]);
            let sum = u16::from_be_bytes([frame[24], frame[25]]);
            frame[24..26].copy_from_slice(&update_checksum(sum, before, after).to_be_bytes());
        }
        Field::V6 => frame[15] = (frame[15] & !0x30) | ((to as u8) << 4),
    }
    Some(old)
}

/// RFC 1624 equation 3: HC' = ~(~HC + ~m + m'), in ones' complement.
fn update_checksum(hc: u16, m: u16, m_new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!m) + u32::from(m_new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn frame(v6: bool) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let b = if v6 {
            b.ipv6([0xfd; 16], [0xfe; 16], 64)
        } else {
            b.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        };
        let b = b.tcp(1, 2, 1000, 100);
        let mut out = Vec::new();
        b.write(&mut out, b"payload").unwrap();
        out
    }

    #[test]
    fn codepoints_round_trip_and_the_ipv4_checksum_stays_valid() {
        for v6 in [false, true] {
            let mut f = frame(v6);
            assert_eq!(ecn(&f), Some(Ecn::NotEct));
            for to in [Ecn::Ect0, Ecn::Ce, Ecn::Ect1, Ecn::NotEct, Ecn::Ce] {
                let before = ecn(&f).unwrap();
                assert_eq!(set_ecn(&mut f, to), Some(before));
                assert_eq!(ecn(&f), Some(to));
                let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
                match p.net {
                    Some(etherparse::NetSlice::Ipv4(h)) => {
                        let hdr = h.header().to_header();
                        assert_eq!(hdr.header_checksum, hdr.calc_header_checksum(), "{to:?}");
                        assert_eq!(hdr.ecn.value(), to as u8);
                    }
                    Some(etherparse::NetSlice::Ipv6(h)) => {
                        assert_eq!(h.header().traffic_class() & 0b11, to as u8);
                    }
                    _ => panic!("not IP"),
                }
            }
        }
    }

    #[test]
    fn other_and_truncated_frames_are_left_alone() {
        let mut arp = frame(false);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let copy = arp.clone();
        assert_eq!(set_ecn(&mut arp, Ecn::Ce), None);
        assert_eq!(arp, copy);
        let mut short = frame(false)[..20].to_vec();
        assert_eq!(set_ecn(&mut short, Ecn::Ce), None);
        assert_eq!(ecn(&[]), None);
    }
}
