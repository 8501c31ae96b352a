//! Builders for synthetic packets and captures (shared by the tests).
#![allow(dead_code)]

use std::net::Ipv4Addr;

/// An Ethernet + IPv4 + TCP frame with `payload` bytes of zeros.
pub fn tcp_frame(
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    seq: u32,
    flags: u8,
    payload: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    let total = 20 + 20 + payload;
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0x40,
        0,
        64,
        6,
        0,
        0,
    ];
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    f.extend_from_slice(&ip);
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&dport.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = flags;
    f.extend_from_slice(&tcp);
    f.extend(std::iter::repeat_n(0u8, payload));
    f
}

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const ACK: u8 = 0x10;

/// Table 1's arrival order. The paper's Figure 3.A is only a picture; this
/// sequence was found by search to match the paper's numbers: 6 of 20
/// reordered (30%), max extent 3; sorted in blocks of 5, packets 5 and 10
/// stay reordered (inter-block, as the text of section 3.2 names them:
/// 10%, extent 1); in blocks of 10 only packet 10 (5%, extent 1).
/// Table 1 prints "3" incidents for blocks of 5 next to "10%": 3 of 20 would
/// be 15%, so the table contradicts itself; the text and the ratio say 2.
pub const TABLE1: [u32; 20] = [
    1, 3, 6, 2, 4, 5, 7, 8, 9, 11, 10, 13, 15, 12, 14, 16, 17, 18, 19, 20,
];
