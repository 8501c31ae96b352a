//! As root: a toe endpoint on an AF_XDP port in a lab's receiver namespace
//! and Linux TCP in the sender namespace move data both ways, byte for
//! byte: Linux connects and sends, the endpoint reads to the FIN, sends its
//! own stream back and closes, Linux reads to the FIN.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use lab::{unique_name, Lab, LabSpec};
use pktio::{Backend, Port, PortConfig};
use toe::{Endpoint, EndpointConfig, ToeError};

const PORT: u16 = 5555;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}

/// The endpoint's address: on the lab's subnet, not on any interface.
fn toe_addr(lab: &Lab) -> IpAddr {
    let o = lab.receiver().ipv4.octets();
    IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 100))
}

fn endpoint(lab: &Lab) -> Endpoint {
    let rcv = lab.receiver();
    let cfg = PortConfig {
        backend: Backend::Xdp,
        ..PortConfig::default()
    };
    let port = Port::open(&rcv.dev, Some(&rcv.netns), &cfg).unwrap();
    let mac = lab::inject::mac_address(&rcv.netns, &rcv.dev).unwrap();
    Endpoint::new(port, mac, toe_addr(lab), EndpointConfig::default()).unwrap()
}

/// Polls until `done` says so or the deadline passes.
fn run_until(ep: &mut Endpoint, what: &str, mut done: impl FnMut(&mut Endpoint) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(ep) {
        assert!(
            Instant::now() < deadline,
            "timed out: {what}; {:?}",
            ep.counters()
        );
        ep.poll().unwrap();
        ep.wait(Duration::from_micros(200)).unwrap();
    }
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn bulk_both_ways_with_linux_is_byte_exact() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    let mut spec = LabSpec::new(&unique_name("toe"));
    spec.software_rss = false;
    spec.ipv6 = false;
    let lab = Lab::up(&spec).unwrap().teardown_on_drop();
    // AF_XDP cannot see a checksum left to offload (pktio docs).
    let snd = lab.sender().clone();
    let dev = snd.dev.clone();
    host::netns::run_in(Some(&snd.netns), move || {
        nic::sys::set_tx_checksum(&dev, false)
    })
    .unwrap()
    .unwrap();
    let mut ep = endpoint(&lab);
    ep.listen(PORT);

    const UP: usize = 3 << 20;
    const DOWN: usize = 2 << 20;
    let to = SocketAddr::new(toe_addr(&lab), PORT);
    let linux = host::netns::spawn_in(&snd.netns, move || -> std::io::Result<Vec<u8>> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        s.write_all(&pattern(UP, 1))?;
        s.shutdown(Shutdown::Write)?;
        let mut back = Vec::new();
        s.read_to_end(&mut back)?;
        Ok(back)
    })
    .unwrap();

    let mut conn = None;
    run_until(&mut ep, "accept", |ep| {
        conn = ep.accept(PORT);
        conn.is_some()
    });
    let conn = conn.unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    run_until(&mut ep, "the whole upload", |ep| {
        match ep.recv(conn, &mut buf) {
            Ok(0) => true,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                false
            }
            Err(ToeError::WouldBlock) => false,
            Err(e) => panic!("{e}"),
        }
    });
    assert_eq!(got.len(), UP);
    assert!(got == pattern(UP, 1), "the upload differs");

    let down = pattern(DOWN, 2);
    let mut at = 0;
    run_until(&mut ep, "queue the download", |ep| {
        match ep.send(conn, &down[at..]) {
            Ok(n) => at += n,
            Err(ToeError::WouldBlock) => {}
            Err(e) => panic!("{e}"),
        }
        at == DOWN
    });
    ep.close(conn).unwrap();
    run_until(&mut ep, "Linux reads the download", |_| linux.is_finished());
    let back = linux.join().unwrap().unwrap().unwrap();
    assert_eq!(back.len(), DOWN);
    assert!(back == down, "the download differs");
    let c = ep.counters();
    eprintln!("{c:?}");
    assert_eq!((c.bad_checksum, c.malformed), (0, 0), "{c:?}");
    assert!(c.arp_replies >= 1, "{c:?}");
}
