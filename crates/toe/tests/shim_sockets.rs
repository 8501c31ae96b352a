//! As root: the sockets shim under a real program (Python's socket,
//! select and os modules, `programs/socket_semantics.py`) on the data path
//! against Linux TCP: options as the kernel answers them (and ENOPROTOOPT
//! for those the data path cannot honour), TCP_INFO from the data path,
//! non-blocking calls, select, poll and epoll over a socket and a pipe,
//! a 1 MiB echo byte for byte, a forked child using the connection,
//! FIONREAD, shutdown, a non-blocking listener, and UDP, UNIX and loopback
//! sockets left to the kernel.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use lab::{unique_name, Lab, LabSpec};
use pktio::{Backend, Port, PortConfig};
use toe::app::{shim, Service};
use toe::{Endpoint, EndpointConfig};

const SCRIPT: &str = include_str!("programs/socket_semantics.py");
const ECHO_PORT: u16 = 7007;
const LISTEN_PORT: u16 = 7008;

fn toe_addr(lab: &Lab) -> IpAddr {
    let o = lab.receiver().ipv4.octets();
    IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 100))
}

/// A Linux echo server for one connection: echoes to the FIN, then closes.
fn echo_server(
    lab: &Lab,
) -> std::thread::JoinHandle<Result<std::io::Result<u64>, host::HostError>> {
    let at = SocketAddr::new(IpAddr::V4(lab.sender().ipv4), ECHO_PORT);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<u64> {
        let l = TcpListener::bind(at)?;
        ready_tx.send(()).ok();
        let (mut s, _) = l.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut buf = vec![0u8; 65536];
        let mut echoed = 0;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(echoed);
            }
            s.write_all(&buf[..n])?;
            echoed += n as u64;
        }
    })
    .unwrap();
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the echo server listens");
    handle
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn a_python_program_sees_kernel_socket_semantics_on_the_data_path() {
    testkit::require_root("AF_XDP and network namespaces");
    let python = testkit::require_program("python3", "apt-get install python3");
    let mut spec = LabSpec::new(&unique_name("tshim"));
    spec.software_rss = false;
    spec.ipv6 = false;
    let lab = Lab::up(&spec).unwrap().teardown_on_drop();
    let snd = lab.sender().clone();
    host::netns::run_in(Some(&snd.netns), move || {
        nic::sys::set_tx_checksum(&snd.dev, false)
    })
    .unwrap()
    .unwrap();

    let rcv = lab.receiver();
    let xdp = PortConfig {
        backend: Backend::Xdp,
        ..PortConfig::default()
    };
    let port = Port::open(&rcv.dev, Some(&rcv.netns), &xdp).unwrap();
    let mac = lab::inject::mac_address(&rcv.netns, &rcv.dev).unwrap();
    let ep = Endpoint::new(port, mac, toe_addr(&lab), EndpointConfig::default()).unwrap();
    let socket = std::env::temp_dir().join(format!("{}.toe.sock", lab.name()));
    let svc = Service::new(ep, &socket).unwrap().spawn();

    let echo = echo_server(&lab);
    let mut cmd = Command::new(python);
    cmd.args(["-c", SCRIPT])
        .arg(lab.sender().ipv4.to_string())
        .arg(ECHO_PORT.to_string())
        .arg(LISTEN_PORT.to_string())
        .stdout(Stdio::piped());
    host::netns::enter_in_child(&mut cmd, &rcv.netns).unwrap();
    shim::configure(&mut cmd, &shim::install().unwrap(), &socket);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();

    // The script listens on the data path: Linux connects once it says so.
    let first = lines.next().map(|l| l.unwrap());
    assert_eq!(
        first.as_deref(),
        Some("listening"),
        "the script stopped early"
    );
    let to = SocketAddr::new(toe_addr(&lab), LISTEN_PORT);
    let pong = host::netns::run_in(
        Some(&lab.sender().netns),
        move || -> std::io::Result<Vec<u8>> {
            let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
            s.set_read_timeout(Some(Duration::from_secs(20)))?;
            s.write_all(b"ping")?;
            let mut back = Vec::new();
            s.read_to_end(&mut back)?;
            Ok(back)
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(pong, b"pong");
    let last = lines.next().map(|l| l.unwrap());
    let status = child.wait().unwrap();
    assert!(status.success(), "the script failed: {status}");
    assert_eq!(last.as_deref(), Some("OK"));
    // Everything the script sent came back: 5+5+5 small, 1 MiB, 5+6+5.
    let echoed = echo.join().unwrap().unwrap().unwrap();
    assert_eq!(echoed, 15 + (1 << 20) + 16);
    let c = svc.stop().unwrap();
    assert_eq!((c.malformed, c.bad_checksum), (0, 0), "{c:?}");
}
