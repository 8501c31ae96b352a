//! As root: the sockets shim under real programs on the data path against
//! Linux TCP.
//!
//! - Python's socket, select and os modules
//!   (`programs/socket_semantics.py`): options as the kernel answers them
//!   (and ENOPROTOOPT for those the data path cannot honour), TCP_INFO from
//!   the data path, non-blocking calls, select, poll and epoll over a
//!   socket and a pipe, a 1 MiB echo byte for byte, a forked child using
//!   the connection, a duplicated descriptor, FIONREAD, shutdown, a
//!   listener made non-blocking before listen() and listening twice (as
//!   nginx does) whose connection a forked child serves after the parent
//!   closed its copy, and UDP, UNIX and loopback sockets left to the
//!   kernel.
//! - Readiness (`programs/readiness.py`): a non-blocking writer facing a
//!   full TX ring waits in poll() instead of spinning on EAGAIN, and sees
//!   POLLRDHUP, POLLHUP and a reset's POLLERR as the kernel reports them.
//! - bind() before connect(): the connection uses the bound port, and a
//!   second socket bound to it gets EADDRINUSE.
//! - TCP_INFO's retransmission counts through a lossy wire, against the
//!   wire's own count of dropped frames, and its loss state (segments
//!   SACKed, lost, sent again) seen during recovery, on every engine.
//! - Malformed control messages: an error reply or a closed context, and
//!   the service serving on.
//! - A program killed mid-transfer: the data path serves the others.
//! - Python's http.server serving curl through the wire with loss and
//!   reordering, byte for byte.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use lab::Lab;
use toe::app::{Context, ServiceHandle};
use toe::{Engine, PipelineLayout};
use wire::{Delay, Loss};

testkit::strict_mode_guard!();

const SCRIPT: &str = include_str!("programs/socket_semantics.py");
const READINESS: &str = include_str!("programs/readiness.py");
const ECHO_PORT: u16 = 7007;
const LISTEN_PORT: u16 = 7008;

mod common;

use common::toe_addr;

/// A Linux echo server for one connection: echoes to the FIN, then closes.
fn echo_server(
    lab: &Lab,
) -> std::thread::JoinHandle<Result<std::io::Result<u64>, host::HostError>> {
    linux_server(lab, move |l| {
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
}

/// A Linux server on the sender's [`ECHO_PORT`] (see
/// [`common::linux_server`]).
fn linux_server<T: Send + 'static>(
    lab: &Lab,
    serve: impl FnOnce(TcpListener) -> std::io::Result<T> + Send + 'static,
) -> std::thread::JoinHandle<Result<std::io::Result<T>, host::HostError>> {
    let at = SocketAddr::new(IpAddr::V4(lab.sender().ipv4), ECHO_PORT);
    common::linux_server(lab, at, serve)
}

/// A Linux sink for one connection: reads to the end; how many bytes.
fn linux_sink(
    lab: &Lab,
) -> std::thread::JoinHandle<Result<std::io::Result<usize>, host::HostError>> {
    linux_server(lab, |l| {
        let (mut s, _) = l.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)
    })
}

/// A lab and a service on toe's own stages ([`common::lab_and_service`]).
fn lab_and_service(prefix: &str, wire: bool) -> (lab::LabGuard, ServiceHandle, PathBuf) {
    common::lab_and_service(prefix, wire, Engine::Toe)
}

/// `python3 -c SCRIPT ARGS` in the receiver's namespace on the data path.
fn python_on_toe(lab: &Lab, socket: &Path, script: &str, args: &[String]) -> Command {
    let mut cmd = python_args_on_toe(lab, socket, &["-c", script]);
    cmd.args(args);
    cmd
}

/// `python3 ARGS` in the receiver's namespace on the data path.
fn python_args_on_toe(lab: &Lab, socket: &Path, args: &[&str]) -> Command {
    let python = testkit::require_program("python3", "apt-get install python3");
    let mut cmd = common::on_data_path(lab, socket, python);
    cmd.args(args).stdout(Stdio::piped());
    cmd
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn a_python_program_sees_kernel_socket_semantics_on_the_data_path() {
    let (lab, svc, socket) = lab_and_service("tshim", false);
    let echo = echo_server(&lab);
    let args = [
        lab.sender().ipv4.to_string(),
        ECHO_PORT.to_string(),
        LISTEN_PORT.to_string(),
    ];
    let mut cmd = python_on_toe(&lab, &socket, SCRIPT, &args);
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
    // Everything the script sent came back: 5+5+5 small, 1 MiB, 5+6+3+5.
    let echoed = echo.join().unwrap().unwrap().unwrap();
    assert_eq!(echoed, 15 + (1 << 20) + 19);
    let c = svc.stop().unwrap();
    assert_eq!((c.malformed, c.bad_checksum), (0, 0), "{c:?}");
}

/// The bytes `programs/readiness.py` sends, repeated.
fn readiness_pattern() -> Vec<u8> {
    (0..1u32 << 16).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// A Linux reader for `programs/readiness.py`: reads `total` bytes slowly
/// (so the writer's ring fills), checks them, closes; then resets the next
/// connection. Returns the bytes read.
fn slow_reader_then_reset(
    lab: &Lab,
    total: usize,
) -> std::thread::JoinHandle<Result<std::io::Result<usize>, host::HostError>> {
    linux_server(lab, move |l| {
        let (mut s, _) = l.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let pattern = readiness_pattern();
        let mut buf = vec![0u8; 65536];
        let mut got = 0;
        while got < total {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            for (k, b) in buf[..n].iter().enumerate() {
                if *b != pattern[(got + k) % pattern.len()] {
                    return Err(std::io::Error::other(format!("byte {} differs", got + k)));
                }
            }
            got += n;
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(s);
        let (r, _) = l.accept()?;
        // SO_LINGER with a zero timeout: close() sends a reset.
        common::linger_zero(&r)?;
        drop(r);
        Ok(got)
    })
}

/// Runs `python3 -c script args` on the data path to its end: it must
/// succeed; its standard output.
fn python_output(lab: &Lab, socket: &Path, script: &str, args: &[String]) -> String {
    let out = python_on_toe(lab, socket, script, args)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn a_writer_facing_a_full_ring_waits_in_poll_and_sees_hangup_and_reset() {
    let (lab, svc, socket) = lab_and_service("tpoll", false);
    let total = 16 << 20;
    let reader = slow_reader_then_reset(&lab, total);
    let args = [
        lab.sender().ipv4.to_string(),
        ECHO_PORT.to_string(),
        total.to_string(),
    ];
    let stdout = python_output(&lab, &socket, READINESS, &args);
    println!("{stdout}");
    assert!(stdout.ends_with("OK\n"), "{stdout}");
    let got = reader.join().unwrap().unwrap().unwrap();
    assert_eq!(got, total);
    let c = svc.stop().unwrap();
    assert_eq!((c.malformed, c.bad_checksum), (0, 0), "{c:?}");
}

/// Binds a port, connects from it, and finds it held for a second socket.
const BOUND: &str = r#"
import errno, socket, sys
host, port, local = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = socket.socket()
a.bind(("", local))
a.connect((host, port))
assert a.getsockname()[1] == local, a.getsockname()
b = socket.socket()
b.bind(("", local))
try:
    b.connect((host, port))
    raise AssertionError("a connect from a port the data path holds succeeded")
except OSError as e:
    assert e.errno == errno.EADDRINUSE, e
a.sendall(b"bound")
a.close()
print("OK", flush=True)
"#;

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn a_port_bound_before_connect_is_the_connections_and_held_against_others() {
    let (lab, svc, socket) = lab_and_service("tbind", false);
    let linux = linux_server(&lab, |l| {
        let (mut s, peer) = l.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        Ok((peer, got))
    });
    let local = 40123u16;
    let args = [
        lab.sender().ipv4.to_string(),
        ECHO_PORT.to_string(),
        local.to_string(),
    ];
    python_output(&lab, &socket, BOUND, &args);
    let (peer, got) = linux.join().unwrap().unwrap().unwrap();
    // Linux saw the connection come from the bound port, on the wire.
    assert_eq!(peer, SocketAddr::new(toe_addr(&lab), local));
    assert_eq!(got, b"bound");
    svc.stop().unwrap();
}

/// Sends 4 MiB, waits for the sink to close, and prints TCP_INFO's
/// retransmission fields at the end (tcpi_retransmits, tcpi_backoff,
/// tcpi_total_retrans), then the most segments tcpi_sacked, tcpi_lost and
/// tcpi_retrans said at once while the bytes were out (sampled after each
/// send and each wait, the socket non-blocking), then every
/// tcpi_reordering seen.
const RETRANS: &str = r#"
import select, socket, struct, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
data = memoryview(bytes(range(256)) * (4 << 12))
# struct tcp_info: 8 one-byte fields, then 32-bit ones from tcpi_rto on.
SACKED, LOST, RETRANS, REORDERING = 5, 6, 7, 20
peak, reordering = [0, 0, 0], set()
def info():
    b = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return b, struct.unpack_from("24I", b, 8)
def sample():
    u = info()[1]
    for k, f in enumerate((SACKED, LOST, RETRANS)):
        peak[k] = max(peak[k], u[f])
    reordering.add(u[REORDERING])
s.setblocking(False)
at = 0
while at < len(data):
    try:
        at += s.send(data[at:at + 16384])
    except BlockingIOError:
        select.select([], [s], [], 0.001)
    sample()
s.shutdown(socket.SHUT_WR)
while True:
    sample()
    try:
        assert s.recv(1) == b"", "the sink sent bytes"
        break
    except BlockingIOError:
        select.select([s], [], [], 0.001)
b, u = info()
print(b[2], b[4], u[23], *peak, *sorted(reordering), flush=True)
"#;

/// On every engine: the run-to-completion stages, Laminar's program and
/// the pipelined engine (whose post-processors count a data segment the
/// protocol stage sends again, and whose protocol stage publishes its
/// loss state with its sequence state).
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP, AF_PACKET): `make test` runs it as root"]
fn tcp_info_counts_the_retransmissions_a_lossy_wire_forced() {
    for engine in [
        Engine::Toe,
        Engine::Laminar,
        Engine::Pipeline(PipelineLayout::default()),
    ] {
        eprintln!("{engine:?}");
        tcp_info_counts_retransmissions_on(engine);
    }
}

fn tcp_info_counts_retransmissions_on(engine: Engine) {
    let (lab, svc, socket) = common::lab_and_service("tretx", true, engine);
    let wire = common::impaired_wire(&lab, wire::Delay::default(), Loss::Uniform { p: 0.02 }, 11);
    let sink = linux_sink(&lab);
    let args = [lab.sender().ipv4.to_string(), ECHO_PORT.to_string()];
    let stdout = python_output(&lab, &socket, RETRANS, &args);
    assert_eq!(sink.join().unwrap().unwrap().unwrap(), 4 << 20);
    let st = wire.stop().unwrap();
    let fields: Vec<u64> = stdout
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    let [retransmits, backoff, total_retrans, sacked, lost, retrans, ref reordering @ ..] =
        fields[..]
    else {
        panic!("{stdout}")
    };
    // The data path's frames to Linux cross the wire from b to a; nearly
    // all are data segments (the handshake's ACK and the FIN aside), and
    // each one the wire dropped was sent again.
    let dropped = st.b_to_a.counters.dropped_policy;
    println!(
        "{engine:?}: wire dropped {dropped} of the data path's frames; TCP_INFO: \
         retransmits {retransmits}, backoff {backoff}, total_retrans {total_retrans}; \
         at most sacked {sacked}, lost {lost}, retrans {retrans}; reordering {reordering:?}"
    );
    assert!(dropped > 0, "the wire dropped nothing");
    assert!(
        total_retrans + 2 >= dropped,
        "tcpi_total_retrans {total_retrans} for {dropped} dropped frames"
    );
    // Everything is acknowledged: no timeout is outstanding.
    assert_eq!((retransmits, backoff), (0, 0));
    // Recovery was seen under way: segments SACKed above a hole, marked
    // lost, and some of them sent again while the program looked.
    assert!(
        sacked > 0 && lost > 0,
        "{engine:?}: tcpi_sacked and tcpi_lost never above 0: {stdout}"
    );
    assert!(
        retrans > 0,
        "{engine:?}: tcpi_retrans never above 0: {stdout}"
    );
    assert_eq!(reordering, [3], "tcpi_reordering: DupThresh, not adapted");
    svc.stop().unwrap();
}

/// Sends raw bytes on a control connection; the reply's errno, or None
/// when the service closed the connection instead.
fn raw_request(sock: &std::os::fd::OwnedFd, bytes: &[u8]) -> Option<i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: sends from a local buffer of that length.
    let n = unsafe { libc::send(sock.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), 0) };
    assert_eq!(n, bytes.len() as isize);
    toe::app::ctl::recv_response(sock).ok().map(|(r, _)| r.err)
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn malformed_control_messages_get_an_error_or_a_closed_context_never_a_panic() {
    use toe::app::request::{request_bytes, Command};
    let (_lab, svc, socket) = lab_and_service("tctl", false);
    let req = |c: Command| request_bytes(&c.request());
    // A first message of the wrong size: the connection is closed.
    let s = toe::app::ctl::connect(&socket).unwrap();
    assert_eq!(raw_request(&s, &req(Command::Hello)[..20]), None);
    // A first message that is no HELLO or JOIN: an error reply.
    let s = toe::app::ctl::connect(&socket).unwrap();
    assert_eq!(
        raw_request(&s, &req(Command::Listen { port: 9 })),
        Some(libc::EPROTO)
    );
    // In a context: each malformed request gets its errno.
    let s = toe::app::ctl::connect(&socket).unwrap();
    assert_eq!(raw_request(&s, &req(Command::Hello)), Some(0));
    let mut bad = Command::Hello.request();
    bad.op = 99;
    assert_eq!(raw_request(&s, &request_bytes(&bad)), Some(libc::EPROTO));
    let mut zero_port = Command::Listen { port: 1 }.request();
    zero_port.port = 0;
    assert_eq!(
        raw_request(&s, &request_bytes(&zero_port)),
        Some(libc::EINVAL)
    );
    let mut family = Command::Connect {
        remote: "10.0.0.1:80".parse().unwrap(),
        local_port: None,
    }
    .request();
    family.family = 9;
    assert_eq!(
        raw_request(&s, &request_bytes(&family)),
        Some(libc::EAFNOSUPPORT)
    );
    let mut slot = Command::Close { slot: 0 }.request();
    slot.id = u32::MAX;
    assert_eq!(raw_request(&s, &request_bytes(&slot)), Some(libc::EBADF));
    assert_eq!(
        raw_request(&s, &req(Command::Close { slot: 5 })),
        Some(libc::EBADF),
        "a slot that holds nothing"
    );
    assert_eq!(
        raw_request(&s, &req(Command::Accept { listener: 1 << 30 })),
        Some(libc::EBADF)
    );
    assert_eq!(raw_request(&s, &req(Command::Hello)), Some(libc::EPROTO));
    // A message of the wrong size in a context: the context is closed.
    assert_eq!(raw_request(&s, &[0u8; 40]), None);
    // The service goes on serving.
    assert!(!svc.is_finished());
    let cx = Context::connect(&socket).unwrap();
    drop(cx.listen(LISTEN_PORT).unwrap());
    drop(cx);
    svc.stop().unwrap();
}

/// Sends to a Linux sink as fast as it can, forever.
const SENDER: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print("connected", flush=True)
chunk = b"x" * 65536
while True:
    s.sendall(chunk)
"#;

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn a_program_killed_mid_transfer_leaves_the_data_path_serving_the_others() {
    let (lab, svc, socket) = lab_and_service("tkill", false);
    // A Linux sink that counts until the stream ends (FIN or reset).
    let (got_tx, got_rx) = std::sync::mpsc::channel();
    let sink = linux_server(&lab, move |l| {
        let (mut s, _) = l.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut buf = vec![0u8; 65536];
        let mut total = 0u64;
        let mut told = false;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return Ok(total),
                Ok(n) => total += n as u64,
            }
            if total > 4 << 20 && !told {
                got_tx.send(()).ok();
                told = true;
            }
        }
    });
    let args = [lab.sender().ipv4.to_string(), ECHO_PORT.to_string()];
    let mut child = python_on_toe(&lab, &socket, SENDER, &args).spawn().unwrap();
    got_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the sender moves 4 MiB");
    child.kill().unwrap();
    child.wait().unwrap();
    // The service closes the dead program's connection: the sink's read ends.
    let total = sink.join().unwrap().unwrap().unwrap();
    assert!(total > 4 << 20, "{total}");

    // And serves a new context, byte for byte.
    let cx = Context::connect(&socket).unwrap();
    let listener = cx.listen(LISTEN_PORT).unwrap();
    let to = SocketAddr::new(toe_addr(&lab), LISTEN_PORT);
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + i / 3) as u8).collect();
    let sent = data.clone();
    let linux = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<()> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.write_all(&sent)?;
        s.shutdown(std::net::Shutdown::Write)
    })
    .unwrap();
    let conn = listener.accept().unwrap();
    let got = conn.recv_to_end().unwrap();
    linux.join().unwrap().unwrap().unwrap();
    assert!(
        got == data,
        "the new context's stream differs ({} bytes)",
        got.len()
    );
    drop(conn);
    drop(listener);
    drop(cx);
    svc.stop().unwrap();
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP, AF_PACKET): `make test` runs it as root"]
fn http_server_on_the_data_path_serves_curl_byte_exactly_under_loss_and_reordering() {
    let curl = testkit::require_program("curl", "apt-get install curl");
    let (lab, svc, socket) = lab_and_service("twww", true);
    let dir = std::env::temp_dir().join(format!("{}-www", lab.name()));
    std::fs::create_dir_all(&dir).unwrap();
    let blob: Vec<u8> = (0..1u32 << 20).map(|i| (i ^ (i >> 9)) as u8).collect();
    std::fs::write(dir.join("blob.bin"), &blob).unwrap();
    let dir_arg = dir.display().to_string();
    let mut server = python_args_on_toe(
        &lab,
        &socket,
        &[
            "-m",
            "http.server",
            "8080",
            "--bind",
            "0.0.0.0",
            "--directory",
            &dir_arg,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let cases = [
        ("1% loss", Delay::default(), Loss::Uniform { p: 0.01 }),
        (
            "reordering",
            Delay::Uniform {
                lo_ns: 0,
                hi_ns: 100_000,
            },
            Loss::None,
        ),
    ];
    for (i, (what, delay, loss)) in cases.into_iter().enumerate() {
        let wire = common::impaired_wire(&lab, delay, loss, i as u64 + 7);
        let out = dir.join(format!("fetched-{i}.bin"));
        let url = format!("http://{}:8080/blob.bin", toe_addr(&lab));
        let mut cmd = Command::new(&curl);
        // Retries cover the server not listening yet (refused at once).
        cmd.args([
            "-sS",
            "--fail",
            "--retry",
            "20",
            "--retry-connrefused",
            "--retry-delay",
            "1",
        ])
        .args(["--max-time", "60", "-o"])
        .arg(&out)
        .arg(&url);
        host::netns::enter_in_child(&mut cmd, &lab.sender().netns).unwrap();
        let status = cmd.status().unwrap();
        let st = wire.stop().unwrap();
        assert!(status.success(), "{what}: curl {status}");
        let got = std::fs::read(&out).unwrap();
        assert!(
            got == blob,
            "{what}: the file differs ({} bytes)",
            got.len()
        );
        if loss != Loss::None {
            let lost = st.a_to_b.counters.dropped_policy + st.b_to_a.counters.dropped_policy;
            assert!(lost > 0, "{what}: the wire lost nothing");
        }
    }
    server.kill().unwrap();
    server.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let c = svc.stop().unwrap();
    assert_eq!((c.bad_checksum, c.malformed), (0, 0), "{c:?}");
}
