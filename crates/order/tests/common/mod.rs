//! Shared values of the tests (addresses, flags, the paper's example);
//! frames come from `testkit::tcp_frame`, captures from
//! `order::capture::write_pcap`.
#![allow(dead_code)]

use std::net::Ipv4Addr;

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
