//! As root: frames sent in batches out of one end of a veth pair all arrive,
//! in order and intact, at the other end.

use std::time::Duration;

use pktio::{wait_readable, Port, PortConfig};

/// A namespace with a veth pair a <-> b in it, deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Netns {
        let name = format!("pktio{}", std::process::id());
        let ip = |args: &[&str]| {
            host::command::ip(args).unwrap_or_else(|e| panic!("{e}"));
        };
        ip(&["netns", "add", &name]);
        let ns = Netns(name.clone());
        ip(&[
            "-n", &name, "link", "add", "name", "a", "type", "veth", "peer", "name", "b",
        ]);
        for dev in ["a", "b"] {
            ip(&["-n", &name, "link", "set", "dev", dev, "up"]);
        }
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = host::command::ip(&["netns", "del", &self.0]);
    }
}

fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental ethertype
    f[14..18].copy_from_slice(&i.to_be_bytes());
    f
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn batches_cross_a_veth_pair_in_order() {
    testkit::require_root("network namespaces, veths, AF_PACKET");
    let ns = Netns::new();
    let cfg = PortConfig::default();
    let mut a = Port::open("a", Some(&ns.0), &cfg).unwrap();
    let mut b = Port::open("b", Some(&ns.0), &cfg).unwrap();
    assert!(matches!(
        Port::open("nope", Some(&ns.0), &cfg),
        Err(pktio::PktIoError::NoSuchDevice { .. })
    ));
    const N: u32 = 2000;
    let mut got = Vec::new();
    let mut next = 0u32;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while got.len() < N as usize && std::time::Instant::now() < deadline {
        if next < N {
            let batch: Vec<Vec<u8>> = (next..(next + 64).min(N)).map(|i| frame(i, 1514)).collect();
            next += a.send_batch(&batch).unwrap() as u32;
        }
        wait_readable(&[&b], Some(Duration::from_millis(5))).unwrap();
        b.recv_batch(256, |f| {
            if f.data.len() >= 18 && f.data[12..14] == [0x88, 0xb5] {
                assert_eq!(f.data.len(), 1514);
                got.push(u32::from_be_bytes([
                    f.data[14], f.data[15], f.data[16], f.data[17],
                ]));
            }
        });
    }
    assert_eq!(got.len(), N as usize, "kernel drops {}", b.kernel_drops());
    assert!(got.windows(2).all(|w| w[0] < w[1]), "out of order");
    assert_eq!(a.stats().tx_errors, 0);
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
