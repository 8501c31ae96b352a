//! As root, in a lab with a wire: TCP through the forwarder with delay,
//! reordering and loss; the counters balance (in == out + dropped +
//! queued); the SRPIC driver delivers every frame it reads, by its own
//! counters and by the kernel's interface counters.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use lab::{unique_name, Lab, LabSpec};
use wire::{Delay, DriverConfig, DriverHandle, Impairment, Loss, WireConfig, WireHandle};

testkit::strict_mode_guard!();

fn wire_lab(prefix: &str) -> lab::LabGuard {
    Lab::up(&LabSpec::wired(&unique_name(prefix)))
        .unwrap()
        .teardown_on_drop()
}

/// Sends `bytes` from the sender to the receiver over TCP; returns what arrived.
fn transfer(lab: &Lab, port: u16, bytes: usize) -> usize {
    let rcv = lab.receiver().clone();
    let addr = SocketAddr::new(IpAddr::V4(rcv.ipv4), port);
    let listener =
        host::netns::run_in(Some(&rcv.netns), move || TcpListener::bind(addr).unwrap()).unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => {
                    assert!(buf[..n].iter().all(|&b| b == 0x5a), "corrupted payload");
                    total += n;
                }
            }
        }
    });
    host::netns::run_in(Some(&lab.sender().netns), move || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
        let chunk = vec![0x5au8; 1 << 16];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            s.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
    })
    .unwrap();
    server.join().unwrap()
}

fn wire_config(lab: &Lab) -> WireConfig {
    let w = lab.wire().unwrap();
    WireConfig::new(Some(&w.netns), &w.sender_dev, &w.receiver_dev)
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn tcp_crosses_a_reordering_lossy_wire_and_counters_balance() {
    testkit::require_root("network namespaces, veths, AF_PACKET, TAP");
    let lab = wire_lab("wl");
    let mut cfg = wire_config(&lab);
    cfg.a_to_b = Impairment {
        delay: Delay::Normal {
            mean_ns: 1_000_000,
            sd_ns: 100_000,
        },
        loss: Loss::Uniform { p: 0.002 },
        rate_bps: 1_000_000_000,
        ..Impairment::default()
    };
    cfg.b_to_a.delay = Delay::Constant { ns: 1_000_000 };
    let wire = WireHandle::spawn(&cfg).unwrap();
    let bytes = 20 << 20;
    assert_eq!(transfer(&lab, 5301, bytes), bytes);
    let st = wire.stop().unwrap();
    let f = st.a_to_b.counters;
    eprintln!("wire: {:?} elapsed {:.2}s", st.a_to_b, st.elapsed_s);
    assert!(st.balanced(), "{st:?}");
    assert!(f.packets_in > 10_000, "{f:?}");
    assert!(f.dropped_policy > 0, "{f:?}");
    assert!(f.reordered > 0, "{f:?}");
    assert!(st.b_to_a.pure_acks > 0);
    assert!(st.a_to_b.delay_error.is_some_and(|d| d.samples > 0));
}

/// Reads a device's kernel counters (rx_packets, tx_packets).
fn link_counters(netns: &str, dev: &str) -> (u64, u64) {
    let link = host::link::link(Some(netns), dev).unwrap_or_else(|e| panic!("{e}"));
    let s = link.stats.expect("the kernel sends IFLA_STATS64");
    (s.rx_packets, s.tx_packets)
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn srpic_driver_delivers_every_frame_under_reordering() {
    testkit::require_root("network namespaces, veths, AF_PACKET, TAP");
    let lab = wire_lab("wd");
    let mut cfg = wire_config(&lab);
    cfg.a_to_b.delay = Delay::Normal {
        mean_ns: 500_000,
        sd_ns: 50_000,
    };
    cfg.a_to_b.rate_bps = 1_000_000_000;
    let wire = WireHandle::spawn(&cfg).unwrap();
    let rcv = lab.receiver().clone();
    let (rx0, _) = link_counters(&rcv.netns, "veth0");
    let dcfg = DriverConfig::new(&rcv.netns, "veth0", rcv.ipv4, 24);
    let driver = DriverHandle::spawn(&dcfg).unwrap();
    let bytes = 20 << 20;
    assert_eq!(transfer(&lab, 5302, bytes), bytes);
    std::thread::sleep(Duration::from_millis(100));
    let (tap_rx, _) = link_counters(&rcv.netns, "srpic0");
    let (rx1, _) = link_counters(&rcv.netns, "veth0");
    let d = driver.stop().unwrap();
    let w = wire.stop().unwrap();
    eprintln!(
        "driver: in {} batches {} mean batch {:?} mean block {:?} held {} ooo {} added delay {:?}",
        d.packets_in,
        d.batches,
        d.mean_batch,
        d.mean_block,
        d.sorter.held,
        d.sorter.out_of_sequence,
        d.added_delay
    );
    eprintln!("wire: {:?}", w.a_to_b);
    assert!(d.balanced(), "{d:?}");
    assert_eq!(d.inject_errors, 0);
    assert!(d.packets_in > 10_000, "{d:?}");
    // The kernel's counters agree: what veth0 received, the driver read;
    // what the driver wrote, the TAP received.
    assert_eq!(
        rx1 - rx0,
        d.packets_in + d.ring_drops.expect("ring drops read")
    );
    assert_eq!(tap_rx, d.packets_out);
    assert!(d.sorter.out_of_sequence > 0, "{:?}", d.sorter);
    assert_eq!(d.sorter.packets_in, d.sorter.packets_out);
    assert!(w.a_to_b.counters.reordered > 0);
    assert!(d.added_delay.is_some() && d.poll_cycle.is_some(), "{d:?}");
}

/// The receiver's IP segments (ECN class counters, which count a GRO'd
/// skb as its gso_segs: net/ipv4/ip_input.c `ip_rcv_core`) and the skbs
/// TCP received (TcpInSegs, one per skb: `tcp_v4_rcv`).
fn segments_and_skbs(netns: &str) -> (u64, u64) {
    let counters = host::snmp::Counters::read(netns).unwrap();
    let k = |n: &str| counters.get(n).unwrap_or_else(|| panic!("no counter {n}"));
    let segs = [
        "IpExtInNoECTPkts",
        "IpExtInECT0Pkts",
        "IpExtInECT1Pkts",
        "IpExtInCEPkts",
    ]
    .iter()
    .map(|n| k(n))
    .sum();
    (segs, k("TcpInSegs"))
}

/// Segments per skb reaching TCP for one in-order transfer through the driver.
fn merge_ratio_through_driver(gro: bool, prefix: &str, port: u16) -> f64 {
    let lab = wire_lab(prefix);
    let mut cfg = wire_config(&lab);
    cfg.a_to_b.rate_bps = 1_000_000_000;
    let wire = WireHandle::spawn(&cfg).unwrap();
    let rcv = lab.receiver().clone();
    let mut dcfg = DriverConfig::new(&rcv.netns, "veth0", rcv.ipv4, 24);
    dcfg.gro = gro;
    let driver = DriverHandle::spawn(&dcfg).unwrap();
    let (s0, k0) = segments_and_skbs(&rcv.netns);
    let bytes = 20 << 20;
    assert_eq!(transfer(&lab, port, bytes), bytes);
    let (s1, k1) = segments_and_skbs(&rcv.netns);
    let d = driver.stop().unwrap();
    wire.stop().unwrap();
    assert!(d.balanced() && d.inject_errors == 0, "{d:?}");
    assert_eq!(d.gro_cpu.is_some(), gro);
    // Every frame the driver wrote reached IP (the ARP exchange aside).
    let segs = s1 - s0;
    assert!(
        segs + 10 >= d.packets_out && segs <= d.packets_out,
        "{segs} {d:?}"
    );
    let ratio = segs as f64 / (k1 - k0) as f64;
    eprintln!(
        "gro {gro}: {segs} segments, {} skbs to TCP, ratio {ratio:.2}, mean batch {:?}",
        k1 - k0,
        d.mean_batch
    );
    ratio
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn gro_path_merges_and_tap_path_does_not() {
    testkit::require_root("network namespaces, veths, AF_PACKET, TAP, threaded NAPI");
    testkit::require_program("nstat", "apt install iproute2");
    // The TAP path: every frame is its own skb all the way up.
    assert_eq!(merge_ratio_through_driver(false, "wg", 5303), 1.0);
    // The GRO path: in-order bulk data merges across each batch.
    let merged = merge_ratio_through_driver(true, "wh", 5304);
    assert!(merged > 2.0, "{merged}");
}
