//! As root: frames sent in batches out of one end of a veth pair all arrive,
//! in order and intact, at the other end, on either backend; an AF_XDP port
//! told to take only some frames leaves the others to the kernel.

use std::net::Ipv4Addr;
use std::time::Duration;

use pktio::{wait_readable, Backend, Match, Port, PortConfig};

testkit::strict_mode_guard!();

/// A namespace with a veth pair a <-> b in it, deleted on drop.
fn veth_pair() -> testkit::Netns {
    let ns = testkit::Netns::new("pktio");
    host::link::add_veth("a", ns.name(), "b", ns.name()).unwrap();
    for dev in ["a", "b"] {
        host::link::set_up(ns.name(), dev).unwrap();
    }
    ns
}

fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental ethertype
    f[14..18].copy_from_slice(&i.to_be_bytes());
    f
}

fn config(backend: Backend) -> PortConfig {
    PortConfig {
        backend,
        ..PortConfig::default()
    }
}

/// Sends N numbered frames of `len` bytes from `a` to `b`; returns the
/// numbers `b` received, in order.
fn cross(a: &mut Port, b: &mut Port, n: u32, len: usize) -> Vec<u32> {
    let mut got = Vec::new();
    let mut next = 0u32;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while got.len() < n as usize && std::time::Instant::now() < deadline {
        if next < n {
            let batch: Vec<Vec<u8>> = (next..(next + 64).min(n)).map(|i| frame(i, len)).collect();
            next += a.send_batch(&batch).unwrap() as u32;
        }
        wait_readable(&[&*b], Some(Duration::from_millis(5))).unwrap();
        b.recv_batch(256, |f| {
            if f.data.len() >= 18 && f.data[12..14] == [0x88, 0xb5] {
                assert_eq!(f.data.len(), len);
                assert_eq!(
                    f.data,
                    &frame(u32::from_be_bytes(f.data[14..18].try_into().unwrap()), len)[..]
                );
                got.push(u32::from_be_bytes([
                    f.data[14], f.data[15], f.data[16], f.data[17],
                ]));
            }
        });
    }
    got
}

fn check_crossing(from: Backend, to: Backend) {
    let ns = veth_pair();
    let mut a = Port::open("a", Some(ns.name()), &config(from)).unwrap();
    let mut b = Port::open("b", Some(ns.name()), &config(to)).unwrap();
    const N: u32 = 2000;
    for len in [60, 1514] {
        let got = cross(&mut a, &mut b, N, len);
        let what = format!("{} -> {}, {len} B", a.describe(), b.describe());
        assert_eq!(
            got.len(),
            N as usize,
            "{what}: kernel drops {:?}",
            b.kernel_drops()
        );
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{what}: out of order");
    }
    assert_eq!(a.stats().tx_errors, 0);
    assert_eq!(a.stats().tx_frames, 2 * u64::from(N));
    // The sending port does not see its own frames (it may see the
    // kernel's IPv6 chatter from b, which is not ours).
    let mut echoed = 0;
    a.recv_batch(usize::MAX, |f| {
        if f.data.len() >= 14 && f.data[12..14] == [0x88, 0xb5] {
            echoed += 1;
        }
    });
    assert_eq!(echoed, 0);
}

#[test]
#[ignore = "needs root (namespaces, veth, AF_PACKET): `make test` runs it as root"]
fn batches_cross_a_veth_pair_in_order() {
    testkit::require_root("network namespaces, veths, AF_PACKET");
    let ns = veth_pair();
    assert!(matches!(
        Port::open("nope", Some(ns.name()), &PortConfig::default()),
        Err(pktio::PktIoError::NoSuchDevice { .. })
    ));
    check_crossing(Backend::Packet, Backend::Packet);
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn af_xdp_batches_cross_a_veth_pair_in_order() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    check_crossing(Backend::Xdp, Backend::Xdp);
    check_crossing(Backend::Packet, Backend::Xdp);
    check_crossing(Backend::Xdp, Backend::Packet);
}

const DATA_PATH: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);

/// An Ethernet/IPv4/UDP frame to `dst`:`port` (checksums not filled: the
/// program reads headers only).
fn udp_frame(dst: Ipv4Addr, port: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 9, 0, 1]);
    f[30..34].copy_from_slice(&dst.octets());
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&port.to_be_bytes());
    f[38..40].copy_from_slice(&30u16.to_be_bytes());
    f
}

/// An ARP request for `target`.
fn arp_request(target: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0xffu8; 6];
    f.extend([0x02, 0, 0, 0, 0, 1, 0x08, 0x06]);
    f.extend([0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend([0x02, 0, 0, 0, 0, 1, 10, 9, 0, 1]);
    f.extend([0, 0, 0, 0, 0, 0]);
    f.extend(target.octets());
    f.resize(60, 0);
    f
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn af_xdp_takes_only_the_frames_its_rules_name() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    let ns = veth_pair();
    let mut a = Port::open("a", Some(ns.name()), &config(Backend::Packet)).unwrap();
    let mut b = Port::open("b", Some(ns.name()), &config(Backend::Xdp)).unwrap();
    b.steer_only(&[Match {
        addr: DATA_PATH.into(),
        proto: Some(17),
        port: Some(7000),
    }])
    .unwrap();
    // Until the rules were set the port took every frame: the kernel's own
    // (IPv6 duplicate address detection, MLD on the fresh veth) may already
    // wait in its ring. Those are not the rules' doing; read them away.
    while b.recv_batch(256, |_| {}) > 0 {}
    let before = b.xdp_counts().unwrap();
    let mut frames = vec![udp_frame(DATA_PATH, 7000); 100];
    frames.extend(vec![udp_frame(DATA_PATH, 7001); 50]);
    frames.extend(vec![udp_frame(Ipv4Addr::new(10, 9, 0, 3), 7000); 25]);
    frames.push(arp_request(DATA_PATH));
    assert_eq!(a.send_batch(&frames).unwrap(), frames.len());
    let mut ours = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        wait_readable(&[&b], Some(Duration::from_millis(20))).unwrap();
        b.recv_batch(256, |f| {
            assert_eq!(
                f.data,
                &udp_frame(DATA_PATH, 7000)[..],
                "a frame no rule names"
            );
            ours += 1;
        });
        let c = b.xdp_counts().unwrap();
        if c.redirected - before.redirected >= 100 && c.passed - before.passed >= 76 {
            break;
        }
    }
    let c = b.xdp_counts().unwrap();
    assert_eq!(ours, 100);
    assert_eq!(c.redirected - before.redirected, 100, "{c:?}");
    // The other port, the other address and the ARP request went to the
    // kernel (and perhaps some of its own IPv6 chatter).
    assert!(c.passed - before.passed >= 76, "{c:?}");

    // A second AF_XDP port cannot take the device: its queue has a socket.
    let err = Port::open("b", Some(ns.name()), &config(Backend::Xdp)).unwrap_err();
    assert!(matches!(err, pktio::PktIoError::Config(_)), "{err}");
    assert!(
        err.to_string().contains("b already has an AF_XDP socket"),
        "{err}"
    );
    // Rules are an AF_XDP feature.
    assert!(a.steer_only(&[]).is_err());
}

#[test]
fn bad_af_xdp_geometry_is_refused_before_anything_opens() {
    for frame_size in [1024, 3000, 8192] {
        let cfg = PortConfig {
            frame_size,
            ..config(Backend::Xdp)
        };
        let err = Port::open("a", None, &cfg).unwrap_err();
        assert!(matches!(err, pktio::PktIoError::Config(_)), "{err}");
    }
}
