//! As root: the endpoint's out-of-order bound (`EndpointConfig::ooo_bound`)
//! governs what its data path keeps. Linux TCP uploads through the lab's
//! wire, which reorders frames (independent uniform delays); an endpoint
//! keeping no interval drops every frame that overtook another, one
//! keeping every interval drops none, and both deliver the upload byte for
//! byte. On the Laminar engine the program keeps one interval and its
//! control plane the rest: with a bound above one, the frames the program
//! drops are kept, and Linux sends fewer again.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use lab::{unique_name, Lab, LabSpec};
use toe::ooo::OooBound;
use toe::{EndpointConfig, Engine, ToeError};
use wire::{Delay, Impairment, WireConfig, WireHandle};

mod common;

testkit::strict_mode_guard!();

/// Linux uploads `bytes` to an endpoint of `engine` with `bound` on
/// `port`; returns the endpoint's counters once it read the upload to the
/// FIN.
fn upload(lab: &Lab, engine: Engine, bound: OooBound, port: u16, bytes: usize) -> toe::Counters {
    let addr = common::toe_addr(lab);
    let cfg = EndpointConfig {
        ooo_bound: bound,
        engine,
        ..EndpointConfig::default()
    };
    let mut ep = common::endpoint(lab, addr, cfg);
    ep.listen(port);
    let to = SocketAddr::new(addr, port);
    let linux = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.write_all(&common::pattern(bytes, 0))?;
        s.shutdown(Shutdown::Write)
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut conn, mut got) = (None, Vec::new());
    let mut buf = vec![0u8; 1 << 16];
    loop {
        assert!(
            Instant::now() < deadline,
            "{bound}: timed out: {:?}",
            ep.counters()
        );
        ep.poll().unwrap();
        if conn.is_none() {
            conn = ep.accept(port);
        }
        if let Some(c) = conn {
            match ep.recv(c, &mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(ToeError::WouldBlock) => {}
                Err(e) => panic!("{bound}: {e}"),
            }
        }
    }
    linux.join().unwrap().unwrap().unwrap();
    assert!(
        got == common::pattern(bytes, 0),
        "{bound}: the upload differs"
    );
    ep.counters()
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn the_bound_decides_what_reordered_frames_are_kept() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP, AF_PACKET");
    let mut spec = LabSpec::new(&unique_name("toeo"));
    spec.software_rss = false;
    spec.ipv6 = false;
    spec.wire = true;
    let lab = Lab::up(&spec).unwrap().teardown_on_drop();
    let w = lab.wire().unwrap();
    let mut cfg = WireConfig::new(Some(&w.netns), &w.sender_dev, &w.receiver_dev);
    cfg.a_to_b = Impairment {
        delay: Delay::Uniform {
            lo_ns: 0,
            hi_ns: 300_000,
        },
        // A rate keeps frames apart so the delays reorder some, not all.
        rate_bps: 200_000_000,
        ..Impairment::default()
    };
    let wire = WireHandle::spawn(&cfg).unwrap();
    const BYTES: usize = 512 << 10;
    let none = upload(&lab, Engine::Toe, OooBound::Intervals(0), 5401, BYTES);
    let all = upload(&lab, Engine::Toe, OooBound::Unbounded, 5402, BYTES);
    let thesis = upload(&lab, Engine::Laminar, OooBound::THESIS, 5403, BYTES);
    let stored = upload(&lab, Engine::Laminar, OooBound::Unbounded, 5404, BYTES);
    let st = wire.stop().unwrap();
    eprintln!(
        "wire {:?}\n0: {none:?}\nunbounded: {all:?}\nLaminar, 1: {thesis:?}\nLaminar, unbounded: {stored:?}",
        st.a_to_b.counters
    );
    assert!(
        st.a_to_b.counters.reordered > 0,
        "the wire reordered nothing"
    );
    assert!(none.refused_outside_interval > 0, "{none:?}");
    assert_eq!(all.refused_outside_interval, 0, "{all:?}");
    // The same bytes in fewer frames: what the program dropped was kept,
    // not sent again.
    assert_eq!(stored.refused_outside_interval, 0, "{stored:?}");
    assert!(
        stored.rx_frames < thesis.rx_frames,
        "Laminar took {} frames keeping every interval, {} keeping one",
        stored.rx_frames,
        thesis.rx_frames
    );
}
