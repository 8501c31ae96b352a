//! The verification vectors of Microsoft's "Verifying the RSS Hash Calculation"
//! (RSS specification), every IPv4 and IPv6 row, with and without ports, checked
//! through the same path `steer rss where` uses.

use rss::{FlowTuple, L4Proto, Predictor, RssConfig, RssKey};

/// (source, source port, destination, destination port, 2-tuple hash, 4-tuple hash)
const IPV4: &[(&str, u16, &str, u16, u32, u32)] = &[
    (
        "66.9.149.187",
        2794,
        "161.142.100.80",
        1766,
        0x323e8fc2,
        0x51ccc178,
    ),
    (
        "199.92.111.2",
        14230,
        "65.69.140.83",
        4739,
        0xd718262a,
        0xc626b0ea,
    ),
    (
        "24.19.198.95",
        12898,
        "12.22.207.184",
        38024,
        0xd2d0a5de,
        0x5c2b394a,
    ),
    (
        "38.27.205.30",
        48228,
        "209.142.163.6",
        2217,
        0x82989176,
        0xafc7327f,
    ),
    (
        "153.39.163.191",
        44251,
        "202.188.127.2",
        1303,
        0x5d1809c5,
        0x10e828a2,
    ),
];

const IPV6: &[(&str, u16, &str, u16, u32, u32)] = &[
    (
        "3ffe:2501:200:1fff::7",
        2794,
        "3ffe:2501:200:3::1",
        1766,
        0x2cc18cd5,
        0x40207d3d,
    ),
    (
        "3ffe:501:8::260:97ff:fe40:efab",
        14230,
        "ff02::1",
        4739,
        0x0f0c461c,
        0xdde51bbf,
    ),
    (
        "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
        44251,
        "fe80::200:f8ff:fe21:67cf",
        38024,
        0x4b61e985,
        0x02d1feef,
    ),
];

fn check(rows: &[(&str, u16, &str, u16, u32, u32)]) {
    let config = RssConfig::ethtool_default(RssKey::microsoft(), 1, 128).unwrap();
    let predictor = Predictor::new(config.clone()).unwrap();
    for &(src, sport, dst, dport, two, four) in rows {
        let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
        let tcp = FlowTuple::new(s, sport, d, dport, L4Proto::Tcp);
        let ip = FlowTuple::new(s, sport, d, dport, L4Proto::Other);
        assert_eq!(
            config.hash(&tcp).unwrap(),
            four,
            "{src}:{sport} -> {dst}:{dport}"
        );
        assert_eq!(config.hash(&ip).unwrap(), two, "{src} -> {dst}");
        assert_eq!(predictor.place(&tcp).unwrap().hash, four);
        assert_eq!(predictor.place(&ip).unwrap().hash, two);
    }
}

#[test]
fn ipv4_rows() {
    check(IPV4);
}

#[test]
fn ipv6_rows() {
    check(IPV6);
}
