//! What the root tests of the data path share: a lab with Linux TCP on the
//! sender and the receiver's device free for an AF_XDP port, an endpoint on
//! that port, the application service on it and programs run on it with
//! the sockets shim (as `steer toe run` runs them), polling with a
//! deadline, and a test stream.
//!
//! Each test file uses only part of it.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lab::{unique_name, Lab, LabSpec};
use pktio::{Backend, Port, PortConfig};
use toe::app::{shim, Service, ServiceHandle};
use toe::{Endpoint, EndpointConfig, Engine, ToeError};

/// A lab of two hosts, without software RSS (the data path takes the
/// receiver's device), through the wire or not, with or without IPv6.
/// The lab fills the sender's checksums (AF_XDP cannot see a checksum left
/// to offload: see the lab's "checksum pitfall").
pub fn lab(prefix: &str, with_wire: bool, ipv6: bool) -> lab::LabGuard {
    let mut spec = LabSpec::new(&unique_name(prefix));
    spec.software_rss = false;
    spec.ipv6 = ipv6;
    spec.wire = with_wire;
    Lab::up(&spec).unwrap().teardown_on_drop()
}

/// The endpoint's address: on the lab's subnet, not on any interface.
pub fn toe_addr(lab: &Lab) -> IpAddr {
    let o = lab.receiver().ipv4.octets();
    IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 100))
}

/// The endpoint's IPv6 address (its low 24 bits differ from the
/// receiver's, so their solicited-node groups differ too).
pub fn toe_addr6(lab: &Lab) -> IpAddr {
    let s = lab.receiver().ipv6.expect("a lab with IPv6").segments();
    IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0x100))
}

/// An endpoint for `addr` on an AF_XDP port on the receiver's device.
pub fn endpoint(lab: &Lab, addr: IpAddr, cfg: EndpointConfig) -> Endpoint {
    let rcv = lab.receiver();
    let xdp = PortConfig {
        backend: Backend::Xdp,
        ..PortConfig::default()
    };
    let port = Port::open(&rcv.dev, Some(&rcv.netns), &xdp).unwrap();
    let mac = lab::inject::mac_address(&rcv.netns, &rcv.dev).unwrap();
    Endpoint::new(port, mac, addr, cfg).unwrap()
}

/// A lab (root required, without a wire unless `wire`) and the data path's
/// service on the receiver's device for [`toe_addr`], its connections on
/// `engine`, on a thread of its own; the service's socket path.
pub fn lab_and_service(
    prefix: &str,
    wire: bool,
    engine: Engine,
) -> (lab::LabGuard, ServiceHandle, PathBuf) {
    testkit::require_root("AF_XDP and network namespaces");
    let lab = lab(prefix, wire, false);
    let cfg = EndpointConfig {
        engine,
        ..EndpointConfig::default()
    };
    let ep = endpoint(&lab, toe_addr(&lab), cfg);
    let socket = std::env::temp_dir().join(format!("{}.toe.sock", lab.name()));
    let svc = Service::new(ep, &socket).unwrap().spawn();
    (lab, svc, socket)
}

/// `program` in the receiver's namespace with its TCP sockets on the data
/// path served at `socket`: the shim preloaded, as `steer toe run` runs it.
pub fn on_data_path(lab: &Lab, socket: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    host::netns::enter_in_child(&mut cmd, &lab.receiver().netns).unwrap();
    shim::configure(&mut cmd, &shim::install().unwrap(), socket);
    cmd
}

/// Polls until `done` says so; past `limit` the test fails, naming `what`
/// and the endpoint's counters.
pub fn poll_until(
    ep: &mut Endpoint,
    what: &str,
    limit: Duration,
    mut done: impl FnMut(&mut Endpoint) -> bool,
) {
    let deadline = Instant::now() + limit;
    while !done(ep) {
        assert!(
            Instant::now() < deadline,
            "timed out: {what}; {:?}",
            ep.counters()
        );
        ep.poll().unwrap();
        ep.wait(Duration::from_micros(100)).unwrap();
    }
}

/// `len` bytes of a stream no two nearby offsets of which look alike,
/// varied by `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}

/// Linux TCP in the sender's namespace connects to `to`, sends
/// `pattern(up, 1)`, shuts its side down and reads what comes back to the
/// FIN; the thread's result is that reply.
pub fn linux_upload(
    lab: &Lab,
    to: std::net::SocketAddr,
    up: usize,
) -> std::thread::JoinHandle<Result<std::io::Result<Vec<u8>>, host::HostError>> {
    use std::io::{Read, Write};
    host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<Vec<u8>> {
        let mut s = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        s.write_all(&pattern(up, 1))?;
        s.shutdown(std::net::Shutdown::Write)?;
        let mut back = Vec::new();
        s.read_to_end(&mut back)?;
        Ok(back)
    })
    .unwrap()
}

/// The lab's wire running `delay` and `loss` both ways, seeded with `seed`.
pub fn impaired_wire(
    lab: &Lab,
    delay: wire::Delay,
    loss: wire::Loss,
    seed: u64,
) -> wire::WireHandle {
    let w = lab.wire().expect("a lab with a wire");
    let mut cfg = wire::WireConfig::new(Some(&w.netns), &w.sender_dev, &w.receiver_dev);
    let impairment = wire::Impairment {
        delay,
        loss,
        ..wire::Impairment::default()
    };
    cfg.a_to_b = impairment;
    cfg.b_to_a = impairment;
    cfg.seed = seed;
    wire::WireHandle::spawn(&cfg).unwrap()
}

/// Polls until a connection on `port` (listened on) is accepted.
pub fn accept(ep: &mut Endpoint, port: u16, limit: Duration) -> u32 {
    let mut conn = None;
    poll_until(ep, "accept", limit, |ep| {
        conn = ep.accept(port);
        conn.is_some()
    });
    conn.unwrap()
}

/// Polls while reading `conn` to the peer's FIN; what it read.
pub fn recv_to_fin(ep: &mut Endpoint, conn: u32, what: &str, limit: Duration) -> Vec<u8> {
    let (mut got, mut buf) = (Vec::new(), vec![0u8; 65536]);
    poll_until(ep, what, limit, |ep| match ep.recv(conn, &mut buf) {
        Ok(0) => true,
        Ok(n) => {
            got.extend_from_slice(&buf[..n]);
            false
        }
        Err(ToeError::WouldBlock) => false,
        Err(e) => panic!("{what}: {e} after {} bytes: {:?}", got.len(), ep.counters()),
    });
    got
}

/// Polls until all of `data` is queued on `conn`.
pub fn send_all(ep: &mut Endpoint, conn: u32, data: &[u8], what: &str, limit: Duration) {
    let mut at = 0;
    poll_until(ep, what, limit, |ep| {
        match ep.send(conn, &data[at..]) {
            Ok(n) => at += n,
            Err(ToeError::WouldBlock) => {}
            Err(e) => panic!("{what}: {e}"),
        }
        at == data.len()
    });
}

/// A Linux listener at `server` in the lab's sender namespace.
pub fn linux_listener(lab: &Lab, server: std::net::SocketAddr) -> std::net::TcpListener {
    host::netns::run_in(Some(&lab.sender().netns), move || {
        std::net::TcpListener::bind(server)
    })
    .unwrap()
    .unwrap()
}

/// Sets SO_LINGER with a zero timeout on `s`: its close sends a reset, as
/// the kernel does for a process killed with unread data.
pub fn linger_zero(s: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt with a valid linger struct of that size on a
    // socket the caller owns.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A Linux server in the sender's namespace on `at`: `serve` runs on its
/// listener once it is bound, which this returns after.
pub fn linux_server<T: Send + 'static>(
    lab: &Lab,
    at: std::net::SocketAddr,
    serve: impl FnOnce(std::net::TcpListener) -> std::io::Result<T> + Send + 'static,
) -> std::thread::JoinHandle<Result<std::io::Result<T>, host::HostError>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = host::netns::spawn_in(&lab.sender().netns, move || {
        let l = std::net::TcpListener::bind(at)?;
        ready_tx.send(()).ok();
        serve(l)
    })
    .unwrap();
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the Linux server listens");
    handle
}
