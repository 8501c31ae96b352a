//! As root: a toe endpoint on an AF_XDP port in a lab's receiver namespace
//! and Linux TCP in the sender namespace move data both ways, byte for
//! byte: Linux connects and sends, the endpoint reads to the FIN, sends its
//! own stream back and closes, Linux reads to the FIN. Directly over a
//! veth, and through the lab's wire with loss and reordering; on every
//! engine (the run-to-completion stages, Laminar's program, the pipeline
//! in two layouts), each test running its cases over the engines.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{pattern, poll_until, recv_to_fin, send_all, toe_addr, toe_addr6};
use lab::Lab;
use pktio::{Port, PortConfig};
use toe::{Endpoint, EndpointConfig, Engine, PipelineLayout, ToeError};
use wire::{Delay, Loss};

mod common;

testkit::strict_mode_guard!();

const PORT: u16 = 5555;

const LIMIT: Duration = Duration::from_secs(60);

/// An endpoint on `addr` whose established connections run on `engine`.
fn endpoint_on(lab: &Lab, addr: IpAddr, engine: Engine) -> Endpoint {
    let cfg = EndpointConfig {
        engine,
        ..EndpointConfig::default()
    };
    common::endpoint(lab, addr, cfg)
}

fn run_until(ep: &mut Endpoint, what: &str, done: impl FnMut(&mut Endpoint) -> bool) {
    poll_until(ep, what, LIMIT, done)
}

/// The endpoint's address and the Linux sender's, over IPv4 and IPv6.
fn both_families(lab: &Lab) -> [(IpAddr, IpAddr); 2] {
    let snd = lab.sender();
    [
        (toe_addr(lab), IpAddr::V4(snd.ipv4)),
        (
            toe_addr6(lab),
            IpAddr::V6(snd.ipv6.expect("a lab with IPv6")),
        ),
    ]
}

/// Linux sends `up` bytes to the endpoint on `port` and reads what comes
/// back; the endpoint reads to the FIN, sends `down` bytes and closes.
/// Both streams must arrive intact.
fn exchange(lab: &Lab, ep: &mut Endpoint, port: u16, up: usize, down: usize) {
    exchange_at(lab, ep, toe_addr(lab), port, up, down)
}

fn exchange_at(lab: &Lab, ep: &mut Endpoint, addr: IpAddr, port: u16, up: usize, down: usize) {
    ep.listen(port);
    let to = SocketAddr::new(addr, port);
    let linux = common::linux_upload(lab, to, up);

    let conn = common::accept(ep, port, LIMIT);
    let got = recv_to_fin(ep, conn, "the whole upload", LIMIT);
    assert_eq!(got.len(), up);
    assert!(got == pattern(up, 1), "the upload differs");

    let sent = pattern(down, 2);
    send_all(ep, conn, &sent, "queue the download", LIMIT);
    ep.close(conn).unwrap();
    run_until(ep, "Linux reads the download", |_| linux.is_finished());
    let back = linux.join().unwrap().unwrap().unwrap();
    assert_eq!(back.len(), down);
    assert!(back == sent, "the download differs");
}

/// [`exchange`], and no frame the endpoint took was broken.
fn clean_exchange(lab: &Lab, ep: &mut Endpoint, port: u16, up: usize, down: usize) {
    exchange(lab, ep, port, up, down);
    let c = ep.counters();
    eprintln!("{c:?}");
    assert_eq!((c.bad_checksum, c.malformed), (0, 0), "{c:?}");
}

/// The engines the tests run: the run-to-completion stages, Laminar's
/// program in the match-action emulator, and the pipelined engine laid
/// out with every stage on one worker thread, and with two flow groups
/// and two replicas of each parallel stage (whose reorder buffers then
/// have work) on two threads.
fn engines() -> [Engine; 4] {
    let spread = PipelineLayout {
        groups: 2,
        pre: 2,
        post: 2,
        copy: 2,
        threads: 2,
    };
    [
        Engine::Toe,
        Engine::Laminar,
        Engine::Pipeline(PipelineLayout::default()),
        Engine::Pipeline(spread),
    ]
}

/// `engine` carried at least `up` bytes in and `down` bytes out, as its
/// own counters show (the run-to-completion stages keep none apart from
/// the endpoint's).
fn assert_through(ep: &Endpoint, engine: Engine, up: usize, down: usize) {
    match engine {
        Engine::Toe => {}
        Engine::Laminar => assert_through_laminar(ep, up, down),
        Engine::Pipeline(_) => assert_through_pipeline(ep, up, down),
    }
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn bulk_both_ways_with_linux_is_byte_exact_on_every_engine() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    for engine in engines() {
        eprintln!("{engine:?}");
        let lab = common::lab("toe", false, false);
        let mut ep = endpoint_on(&lab, toe_addr(&lab), engine);
        clean_exchange(&lab, &mut ep, PORT, 4 << 20, 4 << 20);
        let c = ep.counters();
        assert!(c.arp_replies >= 1, "{c:?}");
        assert_through(&ep, engine, 4 << 20, 4 << 20);
    }
}

/// Loss and reordering the lab's wire applies both ways, and how many
/// bytes each way an exchange through it moves.
#[derive(Clone, Copy)]
struct WireCase {
    what: &'static str,
    delay: Delay,
    loss: Loss,
    bytes: usize,
}

/// Independent uniform delays of up to 100 us reorder about a third of
/// the frames at the rates the tests run.
const REORDER: Delay = Delay::Uniform {
    lo_ns: 0,
    hi_ns: 100_000,
};

impl WireCase {
    const fn loss(what: &'static str, p: f64, bytes: usize) -> WireCase {
        WireCase {
            what,
            delay: Delay::Constant { ns: 0 },
            loss: Loss::Uniform { p },
            bytes,
        }
    }

    const fn reordering(bytes: usize) -> WireCase {
        WireCase {
            what: "reordering",
            delay: REORDER,
            loss: Loss::None,
            bytes,
        }
    }

    const fn reordering_and_one_percent_loss(bytes: usize) -> WireCase {
        WireCase {
            what: "reordering and 1% loss",
            delay: REORDER,
            loss: Loss::Uniform { p: 0.01 },
            bytes,
        }
    }
}

/// An [`exchange`] of `case.bytes` each way through the wire impaired as
/// `case` says (seeded with `seed`): the wire lost frames where it was
/// to, and what it took from the endpoint's stream the endpoint sent
/// again (by fast retransmit or timeout). The wire's statistics.
fn exchange_through(
    lab: &Lab,
    ep: &mut Endpoint,
    case: WireCase,
    port: u16,
    seed: u64,
) -> wire::WireStats {
    let WireCase {
        what,
        delay,
        loss,
        bytes,
    } = case;
    let wire = common::impaired_wire(lab, delay, loss, seed);
    let before = ep.counters();
    exchange(lab, ep, port, bytes, bytes);
    let st = wire.stop().unwrap();
    let c = ep.counters();
    eprintln!(
        "{what}: wire to toe {:?}\n  wire to linux {:?}\n  endpoint {c:?}",
        st.a_to_b.counters, st.b_to_a.counters
    );
    if loss != Loss::None {
        let lost = st.a_to_b.counters.dropped_policy + st.b_to_a.counters.dropped_policy;
        assert!(lost > 0, "{what}: the wire lost nothing");
    }
    if st.b_to_a.counters.dropped_policy > 0 {
        assert!(
            c.timeouts + c.fast_retransmits > before.timeouts + before.fast_retransmits,
            "{what}: the endpoint never retransmitted"
        );
    }
    st
}

/// What each engine's stream meets on the wire. With one out-of-order
/// interval (thesis section 4.3.1) and no SACK, a segment beyond it is
/// dropped and sent again, and Linux recovers the segments beyond it
/// slowly: the reordered cases move less data to stay inside the tests'
/// limits on a loaded host.
fn wire_cases(engine: Engine) -> Vec<WireCase> {
    match engine {
        Engine::Toe => vec![
            WireCase::loss("0.1% loss", 0.001, 1 << 20),
            WireCase::loss("1% loss", 0.01, 1 << 20),
            WireCase::loss("2% loss", 0.02, 1 << 20),
            WireCase::reordering(512 << 10),
            WireCase::reordering_and_one_percent_loss(256 << 10),
        ],
        Engine::Laminar => vec![
            WireCase::loss("1% loss", 0.01, 2 << 20),
            WireCase::reordering(1 << 20),
            WireCase::reordering_and_one_percent_loss(512 << 10),
        ],
        Engine::Pipeline(_) => vec![
            WireCase::loss("1% loss", 0.01, 2 << 20),
            WireCase::reordering(512 << 10),
            WireCase::reordering_and_one_percent_loss(256 << 10),
        ],
    }
}

/// Through loss and reordering both streams arrive exact, on every
/// engine: what the wire took from the endpoint's stream it sent again (on
/// the engine's fast retransmit or the control plane's timeout).
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn loss_and_reordering_on_the_wire_keep_both_streams_exact_on_every_engine() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP, AF_PACKET");
    let lab = common::lab("toew", true, false);
    for (e, engine) in engines().into_iter().enumerate() {
        let mut ep = endpoint_on(&lab, toe_addr(&lab), engine);
        let mut total = 0;
        for (i, case) in wire_cases(engine).into_iter().enumerate() {
            let before = ep.laminar_counters();
            let at = e * 10 + i;
            exchange_through(&lab, &mut ep, case, PORT + 1 + at as u16, at as u64 + 1);
            eprintln!("{engine:?}: {:?}", ep.pipeline_counters());
            // Loss and reordering leave gaps Laminar's one interval and its
            // pseudo segments close, and segments it drops (duplicates,
            // outside the interval).
            if let (Some(before), Some(after)) = (before, ep.laminar_counters()) {
                assert!(
                    after.egress_drops > before.egress_drops,
                    "{}: the program dropped nothing: {after:?}",
                    case.what
                );
            }
            total += case.bytes;
        }
        let c = ep.counters();
        assert_eq!((c.bad_checksum, c.malformed), (0, 0), "{c:?}");
        assert_through(&ep, engine, total, total);
    }
}

/// The endpoint opens: it connects to a Linux server, sends, closes its
/// side and reads the server's answer to the FIN.
fn open_to_linux(lab: &Lab, ep: &mut Endpoint, server: SocketAddr, up: usize, down: usize) {
    let listener = common::linux_listener(lab, server);
    let linux = std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let (mut s, _) = listener.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        s.write_all(&pattern(down, 4))?;
        Ok(got)
    });
    let conn = ep.connect(server).unwrap();
    run_until(ep, "the handshake", |ep| ep.is_established(conn));
    let sent = pattern(up, 3);
    send_all(ep, conn, &sent, "queue the upload", LIMIT);
    ep.close(conn).unwrap();
    let back = recv_to_fin(ep, conn, "the answer", LIMIT);
    let got = linux.join().unwrap().unwrap();
    assert!(
        got.len() == up && got == sent,
        "Linux got {} bytes, not the upload",
        got.len()
    );
    assert!(
        back.len() == down && back == pattern(down, 4),
        "the answer differs"
    );
}

/// Over IPv4 and IPv6, on the run-to-completion stages and through
/// Laminar's program (which carries IPv6 connections with 32-bit address
/// handles): Linux opens and the endpoint opens, bulk both ways,
/// byte-exact (the endpoint closes first: its FIN goes out while the
/// answer still comes in), and a connection to a closed port is refused.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn both_opens_over_ipv4_and_ipv6_and_a_refusal() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    for engine in [Engine::Toe, Engine::Laminar] {
        let lab = common::lab("toe6", false, true);
        for (addr, server) in both_families(&lab) {
            let mut ep = endpoint_on(&lab, addr, engine);
            exchange_at(&lab, &mut ep, addr, PORT, 2 << 20, 2 << 20);
            let to_linux = SocketAddr::new(server, 6001);
            open_to_linux(&lab, &mut ep, to_linux, 1 << 20, 512 << 10);
            // Nobody listens on 6002: Linux answers the SYN with a reset.
            let conn = ep.connect(SocketAddr::new(server, 6002)).unwrap();
            let mut buf = [0u8; 16];
            run_until(&mut ep, "the refusal", |ep| {
                !matches!(ep.recv(conn, &mut buf), Err(ToeError::WouldBlock))
            });
            assert!(matches!(ep.recv(conn, &mut buf), Err(ToeError::Refused)));
            ep.close(conn).unwrap();
            let c = ep.counters();
            eprintln!("{engine:?} {addr}: {c:?}");
            assert!(
                c.arp_replies >= 1,
                "{addr}: nobody asked for our address: {c:?}"
            );
            assert_eq!(c.bad_checksum, 0, "{c:?}");
            assert_through(&ep, engine, (2 << 20) + (512 << 10), (2 << 20) + (1 << 20));
        }
    }
}

/// Frames a hostile or broken peer sends: SYNs from made-up sources,
/// resets for connections that do not exist, truncated and corrupted
/// segments, ARP from made-up senders.
fn garbage(lab: &Lab, to: IpAddr) -> Vec<Vec<u8>> {
    use toe::segment::{build, Flags, Header, Route, TcpOptions};
    let mac = lab::inject::mac_address(&lab.receiver().netns, &lab.receiver().dev).unwrap();
    let route = |src_port: u16| Route {
        src_mac: [2, 0xee, 0, 0, 0, 1],
        dst_mac: mac,
        src: IpAddr::V4(Ipv4Addr::new(
            10,
            200,
            (src_port >> 8) as u8,
            src_port as u8,
        )),
        dst: to,
        src_port,
        dst_port: PORT,
    };
    let header = |flags: u8, seq: u32| Header {
        seq,
        ack: 0,
        flags: Flags(flags),
        window: 1024,
        options: TcpOptions::default(),
    };
    let mut frames = Vec::new();
    for i in 0..3000u16 {
        let mut f = Vec::new();
        build(
            &route(1024 + i),
            &header(Flags::SYN, u32::from(i)),
            &[],
            &mut f,
        );
        frames.push(f.clone());
        if i % 4 == 0 {
            let mut r = Vec::new();
            build(&route(1024 + i), &header(Flags::RST, 77), &[], &mut r);
            frames.push(r);
            let mut bad = f.clone();
            *bad.last_mut().unwrap() ^= 0x55;
            frames.push(bad);
            frames.push(f[..40].to_vec());
        }
    }
    frames
}

/// A Linux peer connects to `PORT`, sends 256 KiB and dies mid-transfer
/// (SO_LINGER 0: its kernel resets the connection); the endpoint's reader
/// sees the reset, and the connection is closed.
fn take_an_aborted_peers_reset(lab: &Lab, ep: &mut Endpoint) {
    ep.listen(PORT);
    let to = SocketAddr::new(toe_addr(lab), PORT);
    let aborted = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.write_all(&pattern(256 << 10, 9))?;
        std::thread::sleep(Duration::from_millis(100));
        common::linger_zero(&s)
    })
    .unwrap();
    let conn = common::accept(ep, PORT, LIMIT);
    let mut buf = vec![0u8; 65536];
    run_until(ep, "the reset", |ep| {
        matches!(ep.recv(conn, &mut buf), Err(ToeError::Reset))
    });
    aborted.join().unwrap().unwrap().unwrap();
    ep.close(conn).unwrap();
}

/// The endpoint takes an aborted peer's reset (its only one) and then
/// serves the next connection byte for byte.
fn reset_then_serve(lab: &Lab, ep: &mut Endpoint) {
    take_an_aborted_peers_reset(lab, ep);
    assert_eq!(ep.counters().resets_received, 1);
    exchange(lab, ep, PORT + 50, 1 << 20, 1 << 20);
}

/// A peer aborts after sending: what arrived before its reset stays
/// readable, then the reset (a kernel socket's order), also when the
/// endpoint had not read any of it when the reset came.
fn bytes_before_a_reset_stay_readable(lab: &Lab, ep: &mut Endpoint, port: u16) {
    const SENT: usize = 8 << 10;
    ep.listen(port);
    let to = SocketAddr::new(toe_addr(lab), port);
    let aborted = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.write_all(&pattern(SENT, 6))?;
        std::thread::sleep(Duration::from_millis(100));
        common::linger_zero(&s)
    })
    .unwrap();
    let conn = common::accept(ep, port, LIMIT);
    let before = ep.counters().resets_received;
    run_until(ep, "the reset", |ep| ep.counters().resets_received > before);
    aborted.join().unwrap().unwrap().unwrap();
    let (mut got, mut buf) = (Vec::new(), vec![0u8; 4096]);
    loop {
        match ep.recv(conn, &mut buf) {
            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
            Err(ToeError::Reset) => break,
            other => panic!(
                "after {} bytes, {other:?} where the reset was due",
                got.len()
            ),
        }
    }
    assert!(
        got == pattern(SENT, 6),
        "{} bytes, not what was sent",
        got.len()
    );
    ep.close(conn).unwrap();
}

/// A reset for a connection whose FINs were both acknowledged (a peer
/// that already closed answers a late segment with one) is ignored (RFC
/// 1337, F1): the answer the endpoint had not read yet stays readable to
/// its end of file.
fn a_reset_after_both_fins_is_ignored(lab: &Lab, ep: &mut Endpoint, server: SocketAddr) {
    const ANSWER: usize = 4096;
    let listener = common::linux_listener(lab, server);
    let linux = std::thread::spawn(move || -> std::io::Result<usize> {
        let (mut s, _) = listener.accept()?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        s.write_all(&pattern(ANSWER, 5))?;
        Ok(got.len())
    });
    let conn = ep.connect(server).unwrap();
    run_until(ep, "the handshake", |ep| ep.is_established(conn));
    let answer_end = ep
        .tcp_info(conn)
        .unwrap()
        .rcv_nxt
        .wrapping_add(ANSWER as u32 + 1);
    send_all(ep, conn, &pattern(4096, 3), "queue the upload", LIMIT);
    ep.close(conn).unwrap();
    let mut last = None;
    let deadline = Instant::now() + LIMIT;
    while !last.is_some_and(|i: toe::TcpInfo| i.rcv_nxt == answer_end && i.snd_una == i.snd_nxt) {
        assert!(
            Instant::now() < deadline,
            "both FINs not acknowledged (answer ends at {answer_end}): {last:?} {:?} {:?}",
            ep.flow_info(conn),
            ep.counters()
        );
        ep.poll().unwrap();
        ep.wait(Duration::from_micros(100)).unwrap();
        last = ep.tcp_info(conn);
    }
    assert_eq!(linux.join().unwrap().unwrap(), 4096);
    let (local, remote) = ep.addresses(conn).unwrap();
    let snd = lab.sender();
    let route = toe::segment::Route {
        src_mac: lab::inject::mac_address(&snd.netns, &snd.dev).unwrap(),
        dst_mac: lab::inject::mac_address(&lab.receiver().netns, &lab.receiver().dev).unwrap(),
        src: remote.ip(),
        dst: local.ip(),
        src_port: remote.port(),
        dst_port: local.port(),
    };
    let header = toe::segment::Header {
        seq: answer_end,
        ack: 0,
        flags: toe::segment::Flags(toe::segment::Flags::RST),
        window: 0,
        options: toe::segment::TcpOptions::default(),
    };
    let mut rst = Vec::new();
    toe::segment::build(&route, &header, &[], &mut rst);
    let before = ep.counters().resets_after_close;
    lab::inject::send_frames(&snd.netns, &snd.dev, vec![rst]).unwrap();
    run_until(ep, "the reset after both FINs", |ep| {
        ep.counters().resets_after_close > before
    });
    let back = recv_to_fin(ep, conn, "the answer after the reset", LIMIT);
    assert!(
        back == pattern(ANSWER, 5),
        "{} bytes, not the answer",
        back.len()
    );
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn floods_bad_segments_and_an_aborted_peer_leave_the_endpoint_serving() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP, AF_PACKET");
    let lab = common::lab("toef", false, false);
    let cfg = EndpointConfig {
        max_conns: 64,
        ..EndpointConfig::default()
    };
    let mut ep = common::endpoint(&lab, toe_addr(&lab), cfg);
    // A peer that dies mid-transfer: its kernel resets the connection.
    take_an_aborted_peers_reset(&lab, &mut ep);

    // The flood, sent from the sender's side of the link.
    let snd = lab.sender();
    let mut injector = Port::open(&snd.dev, Some(&snd.netns), &PortConfig::default()).unwrap();
    let frames = garbage(&lab, toe_addr(&lab));
    for chunk in frames.chunks(64) {
        injector.send_batch(chunk).unwrap();
        ep.poll().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        ep.poll().unwrap();
    }
    let c = ep.counters();
    eprintln!("{c:?}");
    assert!(
        c.syn_dropped > 0,
        "the half-open table was never full: {c:?}"
    );
    assert!(c.bad_checksum > 0 && c.malformed > 0, "{c:?}");
    assert_eq!(
        c.resets_received, 1,
        "only the aborted peer's reset counts: {c:?}"
    );

    // The endpoint still serves a well-behaved peer, byte for byte, once
    // the flood's half-open entries have timed out.
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        ep.poll().unwrap();
        ep.wait(Duration::from_millis(5)).unwrap();
    }
    exchange(&lab, &mut ep, PORT + 50, 1 << 20, 1 << 20);
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn a_full_connection_table_refuses_and_counts_the_next_connection() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    let lab = common::lab("toet", false, false);
    let cfg = EndpointConfig {
        max_conns: 1,
        ..EndpointConfig::default()
    };
    let mut ep = common::endpoint(&lab, toe_addr(&lab), cfg);
    ep.listen(PORT);
    let to = SocketAddr::new(toe_addr(&lab), PORT);
    let connect = move || -> std::io::Result<TcpStream> {
        let s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(s)
    };
    let first = host::netns::spawn_in(&lab.sender().netns, connect).unwrap();
    let conn = common::accept(&mut ep, PORT, LIMIT);
    let mut first = first.join().unwrap().unwrap().unwrap();
    // The table holds one connection: the second handshake is answered
    // with a reset, which Linux reports when it reads.
    let second = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<usize> {
        let mut s = connect()?;
        let mut b = [0u8; 1];
        s.read(&mut b)
    })
    .unwrap();
    run_until(&mut ep, "the second connection's reset", |ep| {
        ep.counters().table_full > 0 && second.is_finished()
    });
    let err = second.join().unwrap().unwrap().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
    // The first connection still carries data.
    first.write_all(b"still here").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    run_until(&mut ep, "the first connection's data", |ep| {
        if let Ok(n) = ep.recv(conn, &mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        got == b"still here"
    });
    assert_eq!(ep.counters().table_full, 1);
}

/// The Laminar engine carried at least `up` bytes in and `down` bytes out:
/// every data segment went through the pipeline and came back as a pseudo
/// segment (the ACK), every byte sent went as a TX command, as the
/// emulator counted.
fn assert_through_laminar(ep: &Endpoint, up: usize, down: usize) {
    let l = ep.laminar_counters().expect("the Laminar engine");
    eprintln!("laminar {l:?}");
    let (min_in, min_out) = ((up / 1460) as u64, (down / 1460) as u64);
    assert!(l.segments >= min_in, "{l:?}");
    assert!(l.pseudo_delivered >= min_in, "{l:?}");
    assert!(l.host_tx >= min_out, "{l:?}");
    assert!(l.host_syncs >= 1 && l.credit_syncs >= 1, "{l:?}");
    assert_eq!(l.rejected, 0, "{l:?}");
}

/// The size of the `i`th request of [`rpc_echo`].
fn request_len(i: usize) -> usize {
    1 + (i * 997) % 6000
}

/// Linux sends `requests` requests of varied sizes, each answered before
/// the next; the endpoint echoes every byte it reads and closes after the
/// FIN. Every answer must equal its request.
fn rpc_echo(lab: &Lab, ep: &mut Endpoint, port: u16, requests: usize) {
    ep.listen(port);
    let to = SocketAddr::new(toe_addr(lab), port);
    let linux = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<usize> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        s.set_nodelay(true)?;
        let mut exact = 0;
        for i in 0..requests {
            let request = pattern(request_len(i), i as u8);
            s.write_all(&request)?;
            let mut answer = vec![0; request.len()];
            s.read_exact(&mut answer)?;
            exact += usize::from(answer == request);
        }
        s.shutdown(Shutdown::Write)?;
        let mut rest = Vec::new();
        s.read_to_end(&mut rest)?;
        Ok(exact)
    })
    .unwrap();
    let conn = common::accept(ep, port, LIMIT);
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut eof = false;
    run_until(ep, "echo every request", |ep| {
        if !eof {
            match ep.recv(conn, &mut buf) {
                Ok(0) => eof = true,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(ToeError::WouldBlock) => {}
                Err(e) => panic!("{e}"),
            }
        }
        if !pending.is_empty() {
            match ep.send(conn, &pending) {
                Ok(n) => {
                    pending.drain(..n);
                }
                Err(ToeError::WouldBlock) => {}
                Err(e) => panic!("{e}"),
            }
        }
        eof && pending.is_empty()
    });
    ep.close(conn).unwrap();
    run_until(ep, "Linux reads the last answer", |_| linux.is_finished());
    let exact = linux.join().unwrap().unwrap().unwrap();
    assert_eq!(exact, requests, "answers that differ from their request");
}

/// [`rpc_echo`] of `requests` through a clean wire, then through one
/// with reordering and 1% loss, on ports from `port` with seeds from
/// `seed`; the bytes that moved each way.
fn rpc_echo_clean_and_impaired(
    lab: &Lab,
    ep: &mut Endpoint,
    port: u16,
    seed: u64,
    requests: usize,
) -> usize {
    let cases = [
        ("clean", Delay::default(), Loss::None),
        ("reordering and 1% loss", REORDER, Loss::Uniform { p: 0.01 }),
    ];
    for (i, (what, delay, loss)) in cases.into_iter().enumerate() {
        let wire = common::impaired_wire(lab, delay, loss, seed + i as u64);
        rpc_echo(lab, ep, port + i as u16, requests);
        let st = wire.stop().unwrap();
        eprintln!(
            "{what}: lost {} + {}, reordered {} + {}; {:?}",
            st.a_to_b.counters.dropped_policy,
            st.b_to_a.counters.dropped_policy,
            st.a_to_b.counters.reordered,
            st.b_to_a.counters.reordered,
            ep.counters()
        );
    }
    (0..requests).map(request_len).sum::<usize>() * cases.len()
}

/// Linux (SACK on or off by its `tcp_sack` sysctl) sends `bytes` to the
/// Laminar endpoint on `port`; the endpoint reads them to the FIN, checks
/// them and closes. Returns, from Linux's TCP_INFO at the end, whether
/// SACK was negotiated and how many segments Linux retransmitted.
fn linux_sends_to_laminar(
    lab: &Lab,
    ep: &mut Endpoint,
    port: u16,
    bytes: usize,
    sack: bool,
) -> (bool, u32) {
    let sysctl = if sack { "1" } else { "0" };
    host::netns::set_sysctl(&lab.sender().netns, "net.ipv4.tcp_sack", sysctl).unwrap();
    ep.listen(port);
    let to = SocketAddr::new(toe_addr(lab), port);
    let linux = host::netns::spawn_in(
        &lab.sender().netns,
        move || -> std::io::Result<libc::tcp_info> {
            use std::os::fd::AsRawFd;
            let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            s.write_all(&pattern(bytes, 9))?;
            s.shutdown(Shutdown::Write)?;
            let mut rest = Vec::new();
            s.read_to_end(&mut rest)?;
            // SAFETY: a zeroed tcp_info is valid; getsockopt writes at most
            // `len` bytes into it.
            let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
            let rc = unsafe {
                libc::getsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_INFO,
                    (&mut info as *mut libc::tcp_info).cast(),
                    &mut len,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(info)
        },
    )
    .unwrap();
    let conn = common::accept(ep, port, LIMIT);
    let got = recv_to_fin(ep, conn, "the stream", LIMIT);
    assert!(
        got == pattern(bytes, 9),
        "the stream differs ({} bytes)",
        got.len()
    );
    ep.close(conn).unwrap();
    run_until(ep, "Linux reads our FIN", |_| linux.is_finished());
    let info = linux.join().unwrap().unwrap().unwrap();
    // TCPI_OPT_SACK (include/uapi/linux/tcp.h).
    (info.tcpi_options & 2 != 0, info.tcpi_total_retrans)
}

/// SACK through the wire at 1% loss: where Linux negotiated it, the
/// program's ACKs carry its out-of-order interval as a SACK block, and
/// Linux sends again fewer segments than where it could not (the stream
/// byte-exact both times; the same loss pattern, by seed). The receiver
/// is the thesis's, its program's one interval alone: with the control
/// plane's store (docs/toe.md "Loss recovery") nothing past the interval
/// is dropped, so without SACK too Linux sends again about what was lost.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn laminar_engine_sack_block_saves_linux_retransmissions_at_one_percent_loss() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP, AF_PACKET");
    let lab = common::lab("lams", true, false);
    let cfg = EndpointConfig {
        engine: Engine::Laminar,
        ooo_bound: toe::ooo::OooBound::THESIS,
        ..EndpointConfig::default()
    };
    let mut ep = common::endpoint(&lab, toe_addr(&lab), cfg);
    const BYTES: usize = 4 << 20;
    let mut runs = Vec::new();
    for (i, sack) in [false, true].into_iter().enumerate() {
        let wire = common::impaired_wire(&lab, Delay::default(), Loss::Uniform { p: 0.01 }, 11);
        let (negotiated, retrans) =
            linux_sends_to_laminar(&lab, &mut ep, PORT + 60 + i as u16, BYTES, sack);
        let st = wire.stop().unwrap();
        eprintln!(
            "tcp_sack={sack}: negotiated {negotiated}, Linux retransmitted {retrans} segments; lost {} to the endpoint, {} to Linux",
            st.a_to_b.counters.dropped_policy, st.b_to_a.counters.dropped_policy
        );
        assert_eq!(negotiated, sack, "SACK negotiated with tcp_sack={sack}");
        assert!(
            st.a_to_b.counters.dropped_policy > 0,
            "the wire lost nothing"
        );
        runs.push(retrans);
    }
    let (without, with) = (runs[0], runs[1]);
    assert!(
        with < without,
        "with SACK {with} retransmissions, without {without}"
    );
}

/// The pipeline carried at least `up` bytes in and `down` bytes out, as
/// its stages counted: every received segment through the front end, a
/// pre-processor, the protocol stage, a post-processor and a copy stage;
/// every data segment sent out of the transmit stage.
fn assert_through_pipeline(ep: &Endpoint, up: usize, down: usize) {
    let p = ep.pipeline_counters().expect("the pipelined engine");
    eprintln!("pipeline {p:?}");
    let (min_in, min_out) = ((up / 1448) as u64, (down / 1448) as u64);
    for stage in [p.front, p.pre, p.protocol] {
        assert!(stage >= min_in, "{p:?}");
    }
    for stage in [p.post, p.copy, p.tx_frames] {
        assert!(stage >= min_out, "{p:?}");
    }
    assert!(p.notices > 0 && p.notices >= min_in / 64, "{p:?}");
}

/// Linux's RPCs, echoed byte for byte by the engines with a data path of
/// their own (Laminar's program, the pipeline in both layouts), through a
/// clean wire and one with reordering and 1% loss.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn the_engines_echo_linux_rpcs_byte_exact_with_loss_and_reordering() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP, AF_PACKET");
    let lab = common::lab("toer", true, false);
    for (e, engine) in engines().into_iter().enumerate().skip(1) {
        eprintln!("{engine:?}");
        let mut ep = endpoint_on(&lab, toe_addr(&lab), engine);
        let at = e * 10;
        let bytes =
            rpc_echo_clean_and_impaired(&lab, &mut ep, PORT + 10 + at as u16, at as u64 + 7, 300);
        assert_through(&ep, engine, bytes, bytes);
    }
}

/// On the engines with a data path of their own: the endpoint opens to
/// Linux and closes first (its FIN goes out of the engine while the answer
/// still comes in through it); then an aborted peer's reset, which comes
/// at the sequence number only the engine knows (Laminar's registers, the
/// protocol stage's publication), and the next connection is served; a
/// reset leaves the bytes before it readable, and one after both FINs is
/// ignored.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn the_engines_open_to_linux_close_and_take_an_aborted_peers_reset() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    let lab = common::lab("toeo", false, false);
    for (e, engine) in engines().into_iter().enumerate().skip(1) {
        eprintln!("{engine:?}");
        let server = SocketAddr::new(IpAddr::V4(lab.sender().ipv4), 6000 + e as u16);
        let mut ep = endpoint_on(&lab, toe_addr(&lab), engine);
        open_to_linux(&lab, &mut ep, server, 1 << 20, 512 << 10);
        assert_through(&ep, engine, 512 << 10, 1 << 20);
        reset_then_serve(&lab, &mut ep);
        bytes_before_a_reset_stay_readable(&lab, &mut ep, PORT + 60);
        a_reset_after_both_fins_is_ignored(
            &lab,
            &mut ep,
            SocketAddr::new(server.ip(), 6100 + e as u16),
        );
    }
}

/// The most segments TCP_INFO's loss fields said at once during a
/// transfer, and the duplicate thresholds it reported.
#[derive(Debug, Default)]
struct LossPeaks {
    sacked: u32,
    lost: u32,
    retrans: u32,
    reordering: Vec<u32>,
}

impl LossPeaks {
    fn take(&mut self, i: &toe::TcpInfo) {
        self.sacked = self.sacked.max(i.sacked);
        self.lost = self.lost.max(i.lost);
        self.retrans = self.retrans.max(i.retrans);
        if !self.reordering.contains(&i.reordering) {
            self.reordering.push(i.reordering);
        }
        // Linux's lost_out holds the lost segments sent again too.
        assert!(i.retrans <= i.lost, "{i:?}");
    }
}

/// TCP_INFO from the data path while it sends 2 MiB to Linux through the
/// wire at 1% loss, read after every poll: during recovery segments read
/// SACKed, lost and sent again (tcpi_sacked, tcpi_lost, tcpi_retrans); at
/// the end, with everything acknowledged, tcpi_total_retrans counts what
/// went again and nothing is lost, SACKed or timed out. On every engine:
/// the protocol stage's loss state, the pipeline's as its protocol stage
/// published it, Laminar's transmit side's.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP, AF_PACKET): `make test` runs it as root"]
fn tcp_info_reports_the_loss_state_during_recovery_on_every_engine() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP, AF_PACKET");
    let lab = common::lab("toei", true, false);
    let engines = [
        Engine::Toe,
        Engine::Laminar,
        Engine::Pipeline(PipelineLayout::default()),
    ];
    for (e, engine) in engines.into_iter().enumerate() {
        let mut ep = endpoint_on(&lab, toe_addr(&lab), engine);
        let port = PORT + 70 + e as u16;
        ep.listen(port);
        let wire = common::impaired_wire(&lab, Delay::default(), Loss::Uniform { p: 0.01 }, 31);
        let to = SocketAddr::new(toe_addr(&lab), port);
        let linux =
            host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<Vec<u8>> {
                let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
                s.set_read_timeout(Some(Duration::from_secs(60)))?;
                let mut got = Vec::new();
                s.read_to_end(&mut got)?;
                Ok(got)
            })
            .unwrap();
        let conn = common::accept(&mut ep, port, LIMIT);
        let data = pattern(2 << 20, 5);
        let (mut at, mut seen) = (0, LossPeaks::default());
        run_until(&mut ep, "the transfer, acknowledged", |ep| {
            match ep.send(conn, &data[at..]) {
                Ok(n) => at += n,
                Err(ToeError::WouldBlock) => {}
                Err(e) => panic!("{engine:?}: {e}"),
            }
            let i = ep.tcp_info(conn).expect("established");
            seen.take(&i);
            at == data.len() && i.snd_una == i.snd_nxt
        });
        let end = ep.tcp_info(conn).unwrap();
        ep.close(conn).unwrap();
        run_until(&mut ep, "Linux reads to the FIN", |_| linux.is_finished());
        let got = linux.join().unwrap().unwrap().unwrap();
        let st = wire.stop().unwrap();
        eprintln!(
            "{engine:?}: wire dropped {} of the endpoint's frames; peaks {seen:?}; at the end {end:?}",
            st.b_to_a.counters.dropped_policy
        );
        assert!(
            got == data,
            "{engine:?}: Linux got {} other bytes",
            got.len()
        );
        assert!(
            st.b_to_a.counters.dropped_policy > 0,
            "the wire lost nothing"
        );
        assert!(
            seen.sacked > 0 && seen.lost > 0 && seen.retrans > 0,
            "{engine:?}: recovery never showed: {seen:?}"
        );
        assert_eq!(seen.reordering, [3], "DupThresh, never adapted");
        assert!(end.total_retrans > 0, "{end:?}");
        assert_eq!(
            (
                end.sacked,
                end.lost,
                end.retrans,
                end.retransmits,
                end.backoff
            ),
            (0, 0, 0, 0, 0),
            "everything acknowledged: {end:?}"
        );
    }
}
