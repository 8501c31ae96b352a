//! Capture reading and packet parsing on the shared traces, crafted frames
//! and damaged files: never a panic, clear errors.

mod common;

use order::capture::{write_pcap, write_pcapng, Capture, CaptureError, Format};
use order::wire::tcp::Options;
use order::wire::{ip_packet, parse, LinkType, ParseError, Suitability, Transport};
use proptest::prelude::*;

#[test]
fn shared_traces_read_and_parse() {
    for (name, packets) in [
        ("libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap", 31_249),
        ("pcapplusplus_tls2_browsing_v4v6.pcap", 7_451),
        ("tcptrace_sack_nasa_sim_bulk_1996.pcap", 15_712),
        ("tcptrace_urgent_chargen_bulk_2001.pcap", 9_476),
    ] {
        let cap = Capture::read_file(&testkit::shared_trace(name)).unwrap();
        assert_eq!(cap.packets.len(), packets, "{name}");
        let tcp = cap
            .packets
            .iter()
            .filter(|p| matches!(parse(p.link, &p.data), Ok(i) if i.tcp().is_some()))
            .count();
        assert!(tcp > packets / 2, "{name}: {tcp} TCP packets");
    }
    // The NASA bulk transfer: 11,594 data segments in one direction (SOURCES.md).
    let cap = Capture::read_file(&testkit::shared_trace(
        "tcptrace_sack_nasa_sim_bulk_1996.pcap",
    ))
    .unwrap();
    let data = cap
        .packets
        .iter()
        .filter_map(|p| parse(p.link, &p.data).ok())
        .filter(|i| {
            i.tcp()
                .is_some_and(|t| t.payload_len > 0 && t.sport == 1024)
        })
        .count();
    assert_eq!(data, 11_594);
}

#[test]
fn damaged_files_are_errors() {
    let frame = testkit::tcp_frame(common::A, 1, common::B, 2, 7, common::ACK, 10);
    let bytes = write_pcap(1, &[(0, frame.clone()), (1_000, frame)]);
    assert!(Capture::read(&bytes).is_ok());
    for cut in [bytes.len() - 1, bytes.len() - 30, 24 + 8] {
        match Capture::read(&bytes[..cut]) {
            Err(CaptureError::Truncated { packets, .. }) => assert!(packets <= 1),
            other => panic!("cut at {cut}: {other:?}"),
        }
        let lenient = Capture::read_lenient(&bytes[..cut]).unwrap();
        assert!(lenient.damage.is_some());
    }
    assert!(matches!(
        Capture::read(b"hello world, not a capture"),
        Err(CaptureError::NotACapture)
    ));
    assert!(matches!(Capture::read(&[]), Err(CaptureError::NotACapture)));
    assert!(Capture::read(&bytes[..10]).is_err());
}

#[test]
fn pcap_round_trip_keeps_bytes_and_order() {
    let frames: Vec<(u64, Vec<u8>)> = (0..5u32)
        .map(|i| {
            (
                u64::from(i) * 7_000,
                testkit::tcp_frame(common::A, 1, common::B, 2, i * 10, common::ACK, 10),
            )
        })
        .collect();
    let cap = Capture::read(&write_pcap(1, &frames)).unwrap();
    let mut out = Vec::new();
    cap.write(&mut out, &[4, 3, 2, 1, 0], None).unwrap();
    let back = Capture::read(&out).unwrap();
    let data: Vec<&Vec<u8>> = back.packets.iter().map(|p| &p.data).collect();
    assert_eq!(
        data,
        [
            &frames[4].1,
            &frames[3].1,
            &frames[2].1,
            &frames[1].1,
            &frames[0].1
        ]
    );
}

#[test]
fn pcapng_reads_like_pcap() {
    let frames: Vec<(u64, Vec<u8>)> = (0..3u32)
        .map(|i| {
            (
                1_000_000_000 + u64::from(i) * 1_500,
                testkit::tcp_frame(common::A, 1, common::B, 2, i * 10, common::ACK, 10),
            )
        })
        .collect();
    let ng = Capture::read(&write_pcapng(1, &frames)).unwrap();
    let classic = Capture::read(&write_pcap(1, &frames)).unwrap();
    assert_eq!((ng.format, classic.format), (Format::PcapNg, Format::Pcap));
    assert_eq!((ng.link_code(), classic.link_code()), (Some(1), Some(1)));
    let times = |c: &Capture| c.packets.iter().map(|p| p.time_ns).collect::<Vec<_>>();
    // pcapng keeps nanoseconds, the microsecond pcap cuts them.
    assert_eq!(times(&ng), [1_000_000_000, 1_000_001_500, 1_000_003_000]);
    assert_eq!(
        times(&classic),
        [1_000_000_000, 1_000_001_000, 1_000_003_000]
    );
    for (a, b) in ng.packets.iter().zip(&classic.packets) {
        assert_eq!((a.link, &a.data), (b.link, &b.data));
    }
}

#[test]
fn impossible_record_headers_are_corrupt() {
    let frame = testkit::tcp_frame(common::A, 1, common::B, 2, 7, common::ACK, 10);
    let ok = write_pcap(1, &[(0, frame.clone()), (1_000, frame)]);
    // A record claiming 1 GiB, read as corrupt rather than as a cut file.
    let mut huge = ok.clone();
    huge[32..36].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let err = Capture::read(&huge).unwrap_err();
    assert!(
        matches!(
            err,
            CaptureError::Corrupt {
                packets: 0,
                offset: 24,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("exceeds"), "{err}");
    // A microsecond field of 2 s.
    let mut frac = ok.clone();
    frac[28..32].copy_from_slice(&2_000_000u32.to_le_bytes());
    let err = Capture::read(&frac).unwrap_err();
    assert!(err.to_string().contains("sub-second"), "{err}");
    // The lenient reader keeps what came before the damage.
    let second = 24 + 16 + ok[24 + 8] as usize;
    let mut late = ok.clone();
    late[second + 4..second + 8].copy_from_slice(&2_000_000u32.to_le_bytes());
    let cap = Capture::read_lenient(&late).unwrap();
    assert_eq!(cap.packets.len(), 1);
    assert_eq!(cap.damage.unwrap().offset, second);
}

#[test]
fn linux_cooked_and_raw_ip() {
    let eth = testkit::tcp_frame(common::A, 1, common::B, 2, 7, common::ACK, 10);
    let ip = &eth[14..];
    let mut sll = vec![0u8; 14];
    sll.extend_from_slice(&[0x08, 0x00]);
    sll.extend_from_slice(ip);
    let mut sll2 = vec![0x08, 0x00];
    sll2.extend_from_slice(&[0u8; 18]);
    sll2.extend_from_slice(ip);
    for (link, frame) in [
        (LinkType::RawIp, ip.to_vec()),
        (LinkType::LinuxSll, sll),
        (LinkType::LinuxSll2, sll2),
    ] {
        let info = parse(link, &frame).unwrap();
        let t = info.tcp().unwrap();
        assert_eq!(
            (t.seq, t.payload_len, info.suitability()),
            (7, 10, Suitability::Suitable),
            "{link:?}"
        );
    }
    // Through a capture with the Linux cooked link type.
    let cap = Capture::read(&write_pcap(
        113,
        &[(0, {
            let mut s = vec![0u8; 14];
            s.extend_from_slice(&[8, 0]);
            s.extend_from_slice(ip);
            s
        })],
    ))
    .unwrap();
    assert_eq!(cap.packets[0].link, LinkType::LinuxSll);
}

#[test]
fn ipv6_extension_headers_are_skipped_and_make_it_unsuitable() {
    // IPv6 + hop-by-hop (8 bytes) + fragment header (first fragment) + TCP.
    let mut p = vec![0x60, 0, 0, 0];
    let payload_len: u16 = 8 + 8 + 20 + 5;
    p.extend_from_slice(&payload_len.to_be_bytes());
    p.extend_from_slice(&[0, 64]); // next header: hop-by-hop
    p.extend_from_slice(&[0xfe; 32]);
    p.extend_from_slice(&[44, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop -> fragment, padded
    p.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 1]); // fragment -> TCP, offset 0, M=0
    let mut tcp = vec![0u8; 20];
    tcp[4..8].copy_from_slice(&99u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x10;
    p.extend_from_slice(&tcp);
    p.extend_from_slice(&[1, 2, 3, 4, 5]);
    let info = parse(LinkType::Ipv6, &p).unwrap();
    let t = info.tcp().unwrap();
    assert_eq!((t.seq, t.payload_len), (99, 5));
    assert!(info.ip_options);
    assert_eq!(info.suitability(), Suitability::Fragment);
    // Cut inside the extension headers.
    assert_eq!(
        parse(LinkType::Ipv6, &p[..45]).unwrap_err(),
        ParseError::Truncated
    );
}

#[test]
fn unsuitable_packets() {
    let syn = testkit::tcp_frame(common::A, 1, common::B, 2, 7, 0x02, 0);
    assert_eq!(
        parse(LinkType::Ethernet, &syn).unwrap().suitability(),
        Suitability::ControlFlags
    );
    let mut frag = testkit::tcp_frame(common::A, 1, common::B, 2, 7, common::ACK, 10);
    frag[14 + 6] = 0x20; // MF
    assert_eq!(
        parse(LinkType::Ethernet, &frag).unwrap().suitability(),
        Suitability::Fragment
    );
    let mut later = frag.clone();
    later[14 + 7] = 0x10; // offset 16: no TCP header
    let info = parse(LinkType::Ethernet, &later).unwrap();
    assert_eq!(info.transport, Transport::Other);
    assert_eq!(info.suitability(), Suitability::NotTcp);
    let pure_ack = testkit::tcp_frame(common::A, 1, common::B, 2, 7, common::ACK, 0);
    assert_eq!(
        parse(LinkType::Ethernet, &pure_ack).unwrap().suitability(),
        Suitability::Suitable
    );
}

/// The IPv4 packet of a crafted frame (Ethernet header cut off).
fn ipv4_tcp(payload: usize) -> Vec<u8> {
    testkit::tcp_frame(common::A, 1000, common::B, 80, 7, common::ACK, payload)[14..].to_vec()
}

#[test]
fn vlan_tags_are_walked() {
    let plain = testkit::tcp_frame(common::A, 1000, common::B, 80, 7, common::ACK, 10);
    for tags in [&[][..], &[0x8100u16], &[0x88a8, 0x8100]] {
        let mut frame = plain[..12].to_vec();
        for tpid in tags {
            frame.extend_from_slice(&tpid.to_be_bytes());
            frame.extend_from_slice(&[0, 5]);
        }
        frame.extend_from_slice(&plain[12..]);
        let ip = ip_packet(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(usize::from(ip.vlan_tags), tags.len());
        let info = parse(LinkType::Ethernet, &frame).unwrap();
        assert_eq!(info.tcp().unwrap().seq, 7);
        if !tags.is_empty() {
            // A tag cut short.
            assert_eq!(
                ip_packet(LinkType::Ethernet, &frame[..16]).unwrap_err(),
                ParseError::Truncated
            );
        }
    }
}

#[test]
fn frames_that_are_not_ip_are_unsupported() {
    let mut arp = testkit::tcp_frame(common::A, 1, common::B, 2, 7, common::ACK, 0);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(
        parse(LinkType::Ethernet, &arp).unwrap_err(),
        ParseError::Unsupported
    );
    let mut sll = vec![0u8; 14];
    sll.extend_from_slice(&[0x08, 0x06]);
    assert_eq!(
        parse(LinkType::LinuxSll, &sll).unwrap_err(),
        ParseError::Unsupported
    );
    assert_eq!(
        parse(LinkType::RawIp, &[0x50; 40]).unwrap_err(),
        ParseError::Unsupported
    );
    assert_eq!(
        parse(LinkType::RawIp, &[]).unwrap_err(),
        ParseError::Truncated
    );
    assert_eq!(
        parse(LinkType::Null, &[2, 0]).unwrap_err(),
        ParseError::Truncated
    );
}

#[test]
fn lengths_come_from_the_ip_header() {
    // Header-only capture: payload length from the IP length field.
    let ip = ipv4_tcp(1000);
    let info = parse(LinkType::RawIp, &ip[..40]).unwrap();
    assert_eq!(info.tcp().unwrap().payload_len, 1000);
    // Total Length 0 (a TSO capture): the captured length.
    let mut tso = ipv4_tcp(10);
    tso[2..4].copy_from_slice(&[0, 0]);
    assert_eq!(
        parse(LinkType::RawIp, &tso)
            .unwrap()
            .tcp()
            .unwrap()
            .payload_len,
        10
    );
    // A Total Length that does not cover the TCP header.
    let mut short = ipv4_tcp(10);
    short[2..4].copy_from_slice(&30u16.to_be_bytes());
    assert_eq!(
        parse(LinkType::RawIp, &short).unwrap_err(),
        ParseError::Malformed
    );
    // Options cut by the capture: the fixed header is read, options unreadable.
    let mut cut = ipv4_tcp(0);
    cut[20 + 12] = 8 << 4;
    cut.extend_from_slice(&[1, 1, 8, 10]);
    cut[2..4].copy_from_slice(&(52u16 + 5).to_be_bytes());
    let t = *parse(LinkType::RawIp, &cut).unwrap().tcp().unwrap();
    assert_eq!(
        (t.seq, t.payload_len, t.options),
        (7, 5, Options::Unreadable)
    );
}

#[test]
fn an_ipv4_authentication_header_is_walked_like_an_option() {
    // RFC 4302: next header TCP, payload length 1 (12 bytes), SPI, sequence.
    let mut ip = ipv4_tcp(3);
    ip.splice(20..20, [6, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
    ip[9] = 51;
    let total = ip.len() as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let info = parse(LinkType::RawIp, &ip).unwrap();
    assert_eq!((info.protocol, info.ip_options), (6, true));
    assert_eq!(info.tcp().unwrap().payload_len, 3);
    assert_eq!(info.suitability(), Suitability::IpOptions);
}

#[test]
fn an_ipv6_mobility_header_is_an_extension() {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(8u16 + 20).to_be_bytes());
    p.extend_from_slice(&[135, 64]);
    p.extend_from_slice(&[0xfd; 32]);
    p.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
    p.extend_from_slice(&ipv4_tcp(0)[20..]);
    let ip = ip_packet(LinkType::Ipv6, &p).unwrap();
    assert_eq!(
        (ip.protocol, ip.ip_options, ip.upper_len),
        (6, true, Some(20))
    );
    assert!(!ip.fragmented && !ip.fragment_header);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200), link in 0usize..8) {
        let links = [LinkType::Ethernet, LinkType::RawIp, LinkType::Ipv4, LinkType::Ipv6, LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::Null, LinkType::Loop];
        let _ = parse(links[link], &bytes);
    }

    #[test]
    fn truncated_frames_never_panic(cut in 0usize..80) {
        let f = testkit::tcp_frame(common::A, 1, common::B, 2, 7, common::ACK, 10);
        let _ = parse(LinkType::Ethernet, &f[..cut.min(f.len())]);
    }

    #[test]
    fn capture_reader_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300), magic in 0usize..3) {
        let mut b = match magic { 0 => vec![0xd4, 0xc3, 0xb2, 0xa1], 1 => vec![0x0a, 0x0d, 0x0d, 0x0a], _ => vec![] };
        b.extend_from_slice(&bytes);
        let _ = Capture::read_lenient(&b);
    }
}
