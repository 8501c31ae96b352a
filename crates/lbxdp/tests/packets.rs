//! The real XDP program on crafted packets (BPF_PROG_TEST_RUN), Katran-style:
//! a table of input frame, expected verdict and expected output. Also the
//! "prediction equals datapath" check: the bucket the program records for a
//! connection is the bucket `rss::RssConfig::hash` gives in Rust, which is
//! the bucket the backends' software RSS uses.

use std::net::{IpAddr, Ipv4Addr};

use lbxdp::maps::{self, XDP_DROP, XDP_PASS, XDP_TX};
use lbxdp::{BackendEntry, Datapath, Mode};
use rss::{FlowTuple, L4Proto, RssKey};

testkit::strict_mode_guard!();

const VIP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 7);
const LB_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xaa];
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xcc];

fn backend_mac(slot: u8) -> [u8; 6] {
    [2, 0, 0, 0, 1, slot]
}

fn setup(backends: usize) -> (Datapath, rss::RssConfig) {
    let dp = Datapath::load().expect("load lbxdp");
    let config = lb::servers::server_config(&RssKey::microsoft(), 0, 4, 128, 0).unwrap();
    dp.configure(VIP, &config, LB_MAC).unwrap();
    let entries: Vec<BackendEntry> = (0..backends)
        .map(|s| BackendEntry {
            mac: backend_mac(s as u8),
            healthy: true,
        })
        .collect();
    dp.set_backends(&entries).unwrap();
    let table: Vec<u32> = (0..128).map(|b| (b % backends) as u32).collect();
    dp.write_buckets(&table).unwrap();
    dp.set_mode(Mode::Table, 1).unwrap();
    (dp, config)
}

fn tcp(sport: u16, dst: Ipv4Addr) -> FlowTuple {
    FlowTuple::new(IpAddr::V4(CLIENT), sport, IpAddr::V4(dst), 80, L4Proto::Tcp)
}

fn frame(t: &FlowTuple, payload: usize) -> Vec<u8> {
    lab::packet::frame(t, CLIENT_MAC, LB_MAC, payload).unwrap()
}

fn syn(mut f: Vec<u8>) -> Vec<u8> {
    f[14 + 20 + 13] = 0x02;
    f
}

/// Inserts an 802.1Q tag after the MACs.
fn vlan(f: &[u8], vid: u16) -> Vec<u8> {
    let mut out = f[..12].to_vec();
    out.extend_from_slice(&0x8100u16.to_be_bytes());
    out.extend_from_slice(&vid.to_be_bytes());
    out.extend_from_slice(&f[12..]);
    out
}

/// An IPv6 TCP frame to `dst` with a hop-by-hop and a destination options
/// header before TCP.
fn ipv6_ext() -> Vec<u8> {
    let t = FlowTuple::new(
        "fd00::7".parse().unwrap(),
        1234,
        "fd00::1".parse().unwrap(),
        80,
        L4Proto::Tcp,
    );
    let f = lab::packet::frame(&t, CLIENT_MAC, LB_MAC, 0).unwrap();
    let (head, tcp) = f.split_at(14 + 40);
    let mut out = head.to_vec();
    out[14 + 6] = 0; // next header: hop-by-hop
    let payload_len = u16::from_be_bytes([out[18], out[19]]) + 16;
    out[18..20].copy_from_slice(&payload_len.to_be_bytes());
    out.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop -> dest opts
    out.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // dest opts -> TCP
    out.extend_from_slice(tcp);
    out
}

fn arp() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&CLIENT.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&VIP.octets());
    f
}

struct Case {
    name: &'static str,
    frame: Vec<u8>,
    verdict: u32,
    /// Counter slot that must grow by one.
    stat: usize,
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn packet_table() {
    testkit::require_root("BPF_PROG_TEST_RUN");
    let (dp, _) = setup(4);
    let vip_syn = syn(frame(&tcp(1000, VIP), 0));
    let mut frag = frame(&tcp(1001, VIP), 8);
    frag[14 + 6] = 0x20; // more fragments
    let mut ihl_bad = frame(&tcp(1002, VIP), 0);
    ihl_bad[14] = 0x43; // IHL 3 words
    let mut icmp = frame(&tcp(1003, VIP), 0);
    icmp[14 + 9] = 1;
    let udp = lab::packet::frame(
        &FlowTuple::new(IpAddr::V4(CLIENT), 5000, IpAddr::V4(VIP), 53, L4Proto::Udp),
        CLIENT_MAC,
        LB_MAC,
        32,
    )
    .unwrap();
    let cases = vec![
        Case {
            name: "tcp syn to vip",
            frame: vip_syn.clone(),
            verdict: XDP_TX,
            stat: maps::STAT_FORWARDED,
        },
        Case {
            name: "udp to vip",
            frame: udp,
            verdict: XDP_TX,
            stat: maps::STAT_FORWARDED,
        },
        Case {
            name: "vlan-tagged syn to vip",
            frame: vlan(&syn(frame(&tcp(1004, VIP), 0)), 7),
            verdict: XDP_TX,
            stat: maps::STAT_FORWARDED,
        },
        Case {
            name: "qinq-tagged syn to vip",
            frame: vlan(&vlan(&syn(frame(&tcp(1005, VIP), 0)), 7), 8),
            verdict: XDP_TX,
            stat: maps::STAT_FORWARDED,
        },
        Case {
            name: "tcp not for vip",
            frame: frame(&tcp(1006, CLIENT), 0),
            verdict: XDP_PASS,
            stat: maps::STAT_PASS_OTHER,
        },
        Case {
            name: "arp",
            frame: arp(),
            verdict: XDP_PASS,
            stat: maps::STAT_PASS_OTHER,
        },
        Case {
            name: "ipv6 with extension headers",
            frame: ipv6_ext(),
            verdict: XDP_PASS,
            stat: maps::STAT_PASS_OTHER,
        },
        Case {
            name: "ipv4 fragment to vip",
            frame: frag,
            verdict: XDP_DROP,
            stat: maps::STAT_FRAGMENT,
        },
        Case {
            name: "ihl below 5",
            frame: ihl_bad,
            verdict: XDP_DROP,
            stat: maps::STAT_MALFORMED,
        },
        Case {
            name: "tcp header cut after ports",
            frame: vip_syn[..14 + 20 + 6].to_vec(),
            verdict: XDP_DROP,
            stat: maps::STAT_MALFORMED,
        },
        Case {
            name: "icmp to vip",
            frame: icmp,
            verdict: XDP_PASS,
            stat: maps::STAT_OTHER_PROTO,
        },
        Case {
            name: "ipv4 header cut",
            frame: vip_syn[..14 + 10].to_vec(),
            verdict: XDP_PASS,
            stat: maps::STAT_PASS_OTHER,
        },
        // (Shorter than an Ethernet header: the kernel never runs XDP on it and
        // BPF_PROG_TEST_RUN refuses it with EINVAL.)
        Case {
            name: "ethernet header only",
            frame: vip_syn[..14].to_vec(),
            verdict: XDP_PASS,
            stat: maps::STAT_PASS_OTHER,
        },
        Case {
            name: "vlan tag cut",
            frame: vlan(&vip_syn, 7)[..15].to_vec(),
            verdict: XDP_PASS,
            stat: maps::STAT_PASS_OTHER,
        },
    ];
    for case in cases {
        let before = dp.stats(4).unwrap().get(case.stat);
        let (verdict, out) = dp.test_run(&case.frame).unwrap();
        assert_eq!(verdict, case.verdict, "{}: verdict", case.name);
        assert_eq!(
            dp.stats(4).unwrap().get(case.stat),
            before + 1,
            "{}: counter",
            case.name
        );
        if verdict == XDP_TX {
            assert_eq!(&out[6..12], &LB_MAC, "{}: source MAC", case.name);
            assert!(
                (0..4).any(|s| out[..6] == backend_mac(s)),
                "{}: destination MAC {:x?}",
                case.name,
                &out[..6]
            );
            assert_eq!(
                &out[12..],
                &case.frame[12..],
                "{}: only MACs change",
                case.name
            );
        } else {
            assert_eq!(out, case.frame, "{}: frame untouched", case.name);
        }
    }
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn bucket_equals_backend_rss_and_connections_stick() {
    testkit::require_root("BPF_PROG_TEST_RUN");
    let (dp, config) = setup(4);
    for sport in 2000..2200u16 {
        let t = tcp(sport, VIP);
        let (verdict, out) = dp.test_run(&syn(frame(&t, 0))).unwrap();
        assert_eq!(verdict, XDP_TX);
        let bucket = config.hash(&t).unwrap() as usize % 128;
        // Table mode with table[b] = b % 4: the backend tells the bucket.
        assert_eq!(out[..6], backend_mac((bucket % 4) as u8), "sport {sport}");
    }
    // Every recorded bucket equals the Rust model's.
    for (k, v) in dp.connections() {
        let sport = u16::from_be(k.sport);
        let t = tcp(sport, VIP);
        assert_eq!(v.bucket as usize, config.hash(&t).unwrap() as usize % 128);
    }
    // Rewrite the table: established connections keep their backend.
    let table: Vec<u32> = (0..128).map(|b| ((b + 1) % 4) as u32).collect();
    dp.write_buckets(&table).unwrap();
    dp.set_mode(Mode::Table, 2).unwrap();
    for sport in 2000..2200u16 {
        let t = tcp(sport, VIP);
        let (_, out) = dp.test_run(&frame(&t, 100)).unwrap();
        let bucket = config.hash(&t).unwrap() as usize % 128;
        assert_eq!(
            out[..6],
            backend_mac((bucket % 4) as u8),
            "moved: sport {sport}"
        );
    }
    // New connections follow the new table.
    let t = tcp(3000, VIP);
    let (_, out) = dp.test_run(&syn(frame(&t, 0))).unwrap();
    let bucket = config.hash(&t).unwrap() as usize % 128;
    assert_eq!(out[..6], backend_mac(((bucket + 1) % 4) as u8));
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn unhealthy_backend_keeps_connections_and_gets_no_new_ones() {
    testkit::require_root("BPF_PROG_TEST_RUN");
    let (dp, config) = setup(4);
    // Connections on every backend.
    let flows: Vec<FlowTuple> = (4000..4100u16).map(|p| tcp(p, VIP)).collect();
    for t in &flows {
        dp.test_run(&syn(frame(t, 0))).unwrap();
    }
    // Backend 2 goes stale: new connections in its buckets go elsewhere.
    let entries: Vec<BackendEntry> = (0..4)
        .map(|s| BackendEntry {
            mac: backend_mac(s),
            healthy: s != 2,
        })
        .collect();
    dp.set_backends(&entries).unwrap();
    for t in &flows {
        let (_, out) = dp.test_run(&frame(t, 10)).unwrap();
        let bucket = config.hash(t).unwrap() as usize % 128;
        assert_eq!(
            out[..6],
            backend_mac((bucket % 4) as u8),
            "established moved"
        );
    }
    for p in 5000..5200u16 {
        let (verdict, out) = dp.test_run(&syn(frame(&tcp(p, VIP), 0))).unwrap();
        assert_eq!(verdict, XDP_TX);
        assert_ne!(
            out[..6],
            backend_mac(2),
            "new connection to a stale backend"
        );
    }
    // No healthy backend: new connections are dropped and counted,
    // established ones still flow.
    let none: Vec<BackendEntry> = (0..4)
        .map(|s| BackendEntry {
            mac: backend_mac(s),
            healthy: false,
        })
        .collect();
    dp.set_backends(&none).unwrap();
    let (verdict, _) = dp.test_run(&syn(frame(&tcp(6000, VIP), 0))).unwrap();
    assert_eq!(verdict, XDP_DROP);
    assert_eq!(dp.stats(4).unwrap().get(maps::STAT_NO_BACKEND), 1);
    let (verdict, _) = dp.test_run(&frame(&flows[0], 10)).unwrap();
    assert_eq!(verdict, XDP_TX);
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn round_robin_ring_and_plus_modes() {
    testkit::require_root("BPF_PROG_TEST_RUN");
    let (dp, _) = setup(4);
    dp.set_mode(Mode::RoundRobin, 1).unwrap();
    let mut seen = [0u32; 4];
    for p in 7000..7400u16 {
        let (_, out) = dp.test_run(&syn(frame(&tcp(p, VIP), 0))).unwrap();
        seen[out[5] as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n == 100), "round robin {seen:?}");

    let maglev = lb::Maglev::new(&[0, 1, 2, 3], maps::RING_SIZE).unwrap();
    dp.write_ring(maglev.entries()).unwrap();
    dp.set_mode(Mode::Ring, 2).unwrap();
    let (verdict, _) = dp.test_run(&syn(frame(&tcp(8000, VIP), 0))).unwrap();
    assert_eq!(verdict, XDP_TX);

    // Plus: one candidate per bucket on backend 3, budget 1: the second
    // connection of a core goes to the next candidate.
    let plus = lb::controller::PlusTable {
        table: lb::BucketTable::new(vec![3; 128]),
        candidates: (0..128).flat_map(|_| [3u32, 1]).collect(),
        k: 2,
        conn_budget: 1,
    };
    for s in 0..4 {
        dp.write_bucket_cores(s, &[0; 128]).unwrap();
    }
    dp.write_plus(&plus).unwrap();
    dp.reset_core_taken(4).unwrap();
    dp.set_mode(Mode::Plus, 3).unwrap();
    let (_, a) = dp.test_run(&syn(frame(&tcp(9000, VIP), 0))).unwrap();
    let (_, b) = dp.test_run(&syn(frame(&tcp(9001, VIP), 0))).unwrap();
    assert_eq!(a[5], 3);
    assert_eq!(b[5], 1);
}
