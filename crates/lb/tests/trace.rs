//! The pcap reader on crafted frames and on the shared traces: every rule of
//! `lb::trace` (kept, hashed on addresses, skipped, errors), never a panic.

use std::net::IpAddr;
use std::path::PathBuf;

use lb::sim::{simulate, Policy, SimConfig};
use lb::trace::Trace;
use lb::TraceError;
use order::capture::{write_pcap, write_pcapng};
use rss::L4Proto;

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8], frag: u16) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut v = vec![0x45, 0];
    v.extend_from_slice(&total.to_be_bytes());
    v.extend_from_slice(&[0, 1]);
    v.extend_from_slice(&frag.to_be_bytes());
    v.extend_from_slice(&[64, proto, 0, 0]);
    v.extend_from_slice(&src);
    v.extend_from_slice(&dst);
    v.extend_from_slice(l4);
    v
}

fn l4(sport: u16, dport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&[0; 4]);
    v
}

fn ether(ethertype: u16, vlan: Option<u16>, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    if let Some(id) = vlan {
        v.extend_from_slice(&0x8100u16.to_be_bytes());
        v.extend_from_slice(&id.to_be_bytes());
    }
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// IPv6 with a hop-by-hop and a destination-options header before TCP.
fn ipv6_with_ext(sport: u16, dport: u16) -> Vec<u8> {
    let tcp = l4(sport, dport);
    let ext_len = 16;
    let mut v = vec![0x60, 0, 0, 0];
    v.extend_from_slice(&((ext_len + tcp.len()) as u16).to_be_bytes());
    v.extend_from_slice(&[0, 64]); // next header: hop-by-hop
    let mut src = [0u8; 16];
    src[0] = 0x20;
    src[15] = 1;
    let mut dst = [0u8; 16];
    dst[0] = 0x20;
    dst[15] = 2;
    v.extend_from_slice(&src);
    v.extend_from_slice(&dst);
    v.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop -> dest opts, PadN
    v.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // dest opts -> TCP
    v.extend_from_slice(&tcp);
    v
}

#[test]
fn classification_rules() {
    let a = [10, 0, 0, 1];
    let b = [10, 0, 0, 2];
    let frames: Vec<(u64, Vec<u8>)> = vec![
        // kept: TCP, VLAN-tagged UDP, IPv6 with extension headers
        (
            1_000_000,
            ether(0x0800, None, &ipv4(6, a, b, &l4(1000, 80), 0)),
        ),
        (
            2_000_000,
            ether(0x0800, Some(7), &ipv4(17, a, b, &l4(53, 53), 0)),
        ),
        (3_000_000, ether(0x86dd, None, &ipv6_with_ext(4000, 443))),
        // hashed on addresses: ICMP, a non-first fragment
        (
            4_000_000,
            ether(0x0800, None, &ipv4(1, a, b, &[8, 0, 0, 0], 0)),
        ),
        (
            5_000_000,
            ether(0x0800, None, &ipv4(6, a, b, &[1, 2, 3, 4], 100)),
        ),
        // skipped: ARP, TCP with ports cut off, an IP header cut short
        (6_000_000, ether(0x0806, None, &[0; 28])),
        (7_000_000, ether(0x0800, None, &ipv4(6, a, b, &[0x03], 0))),
        (8_000_000, ether(0x0800, None, &[0x45, 0, 0])),
        // a frame too short for an Ethernet header
        (9_000_000, vec![1, 2, 3]),
        // out of order: earlier than the one before
        (
            500_000,
            ether(0x0800, None, &ipv4(6, b, a, &l4(80, 1000), 0)),
        ),
    ];
    let trace = Trace::parse(&write_pcap(1, &frames)).unwrap();
    let s = &trace.stats;
    assert_eq!(s.frames, 10);
    assert_eq!((s.ipv4, s.ipv6), (5, 1), "{s:?}");
    assert_eq!((s.other_l4, s.fragments), (1, 1), "{s:?}");
    assert_eq!((s.non_ip, s.truncated, s.malformed), (1, 1, 2), "{s:?}");
    assert_eq!(s.vlan_tagged, 1);
    assert_eq!(s.out_of_order, 1);
    assert_eq!(trace.packets[0].ts_ns, 500_000, "sorted by time");
    let v6 = trace
        .packets
        .iter()
        .find(|p| p.tuple.src.is_ipv6())
        .unwrap();
    assert_eq!((v6.tuple.src_port, v6.tuple.dst_port), (4000, 443));
    assert_eq!(v6.tuple.proto, L4Proto::Tcp);
    let udp = trace
        .packets
        .iter()
        .find(|p| p.tuple.proto == L4Proto::Udp)
        .unwrap();
    assert_eq!(udp.tuple.dst_port, 53);
}

#[test]
fn pcapng_reads_and_replays_like_pcap() {
    let flows = 40u16;
    let frames: Vec<(u64, Vec<u8>)> = (0..400u16)
        .map(|i| {
            let src = [10, 0, (i % flows) as u8, 1];
            let l4 = l4(1000 + i % flows, 80);
            (
                1_000_000_000 + u64::from(i) * 10_000,
                ether(0x0800, None, &ipv4(6, src, [10, 9, 9, 9], &l4, 0)),
            )
        })
        .collect();
    let ng = Trace::parse(&write_pcapng(1, &frames)).unwrap();
    let classic = Trace::parse(&write_pcap(1, &frames)).unwrap();
    assert_eq!(ng.link_type, 1);
    assert_eq!(ng.packets, classic.packets);
    assert_eq!(ng.stats, classic.stats);
    assert_eq!(ng.flows(), usize::from(flows));
    let cfg = SimConfig {
        max_gap_s: 1.0,
        ..SimConfig::default()
    };
    let run = |t: &Trace| {
        let report = simulate("crafted", t, cfg.clone(), &Policy::ALL, |_, _| {}).unwrap();
        serde_json::to_string(&report).unwrap()
    };
    assert_eq!(run(&ng), run(&classic));
}

#[test]
fn raw_ip_and_truncated_tail() {
    let frames = vec![
        (1, ipv4(6, [1, 2, 3, 4], [5, 6, 7, 8], &l4(1, 2), 0)),
        (2, vec![0x00, 0x01]), // not IP
        (3, ipv4(17, [1, 2, 3, 4], [5, 6, 7, 8], &l4(3, 4), 0)),
    ];
    let mut bytes = write_pcap(101, &frames);
    bytes.truncate(bytes.len() - 5);
    let trace = Trace::parse(&bytes).unwrap();
    assert!(trace.stats.truncated_tail);
    assert_eq!(trace.stats.non_ip, 1);
    assert_eq!(trace.packets.len(), 1);
    assert_eq!(
        trace.packets[0].tuple.src,
        "1.2.3.4".parse::<IpAddr>().unwrap()
    );
}

#[test]
fn bad_files_are_errors_not_panics() {
    assert!(matches!(Trace::parse(b""), Err(TraceError::NotACapture(_))));
    assert!(matches!(
        Trace::parse(&[0u8; 40]),
        Err(TraceError::NotACapture(_))
    ));
    // A pcapng magic with a section header cut short.
    let err = Trace::parse(&[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0]).unwrap_err();
    assert!(matches!(err, TraceError::NotACapture(_)), "{err}");
    assert!(!err.to_string().contains('\n'), "one line: {err}");
    let ok = write_pcap(
        1,
        &[(
            1,
            ether(0x0800, None, &ipv4(6, [1; 4], [2; 4], &l4(1, 2), 0)),
        )],
    );
    let mut linktype = ok.clone();
    linktype[20] = 147;
    assert_eq!(
        Trace::parse(&linktype).unwrap_err(),
        TraceError::UnsupportedLinkType(147)
    );
    // A record claiming 1 GiB.
    let mut huge = ok.clone();
    huge[32..36].copy_from_slice(&(1u32 << 30).to_le_bytes());
    assert!(matches!(
        Trace::parse(&huge),
        Err(TraceError::CorruptRecord {
            index: 0,
            offset: 24,
            ..
        })
    ));
    // A microsecond field of 2 s.
    let mut frac = ok.clone();
    frac[28..32].copy_from_slice(&2_000_000u32.to_le_bytes());
    assert!(matches!(
        Trace::parse(&frac),
        Err(TraceError::CorruptRecord { .. })
    ));
    // Only ARP.
    let arp = write_pcap(1, &[(1, ether(0x0806, None, &[0; 28]))]);
    assert_eq!(
        Trace::parse(&arp).unwrap_err(),
        TraceError::NoIpPackets { frames: 1 }
    );
    // Every prefix and every single-byte corruption of a small file: no panic.
    for len in 0..ok.len() {
        let _ = Trace::parse(&ok[..len]);
    }
    for i in 0..ok.len() {
        let mut c = ok.clone();
        c[i] ^= 0xff;
        let _ = Trace::parse(&c);
    }
}

#[test]
fn shared_traces_match_sources_md() {
    // Counts from traces/SOURCES.md.
    {
        let t = Trace::open(&testkit::shared_trace(
            "libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap",
        ))
        .unwrap();
        assert_eq!(t.link_type, 101);
        assert_eq!(t.packets.len(), 31_249);
        assert_eq!(t.stats.other_l4, 133, "ICMP");
        let l4: std::collections::HashSet<_> = t
            .packets
            .iter()
            .filter(|p| p.tuple.proto != L4Proto::Other)
            .map(|p| p.tuple)
            .collect();
        assert_eq!(l4.len(), 2_090 + 456, "TCP + UDP 5-tuples");
    }
    {
        let t = Trace::open(&testkit::shared_trace(
            "pcapplusplus_tls2_browsing_v4v6.pcap",
        ))
        .unwrap();
        assert_eq!((t.stats.ipv4, t.stats.ipv6), (3_011, 4_440));
        assert_eq!(t.flows(), 665);
    }
}

#[test]
fn fuzz_seeds_parse() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/lb_trace");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!Trace::parse(&bytes).unwrap().packets.is_empty());
        n += 1;
    }
    assert!(n >= 3);
}
