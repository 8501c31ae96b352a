//! As root: the application interface against Linux TCP. A data-path
//! service runs the endpoint on an AF_XDP port in a lab's receiver
//! namespace; the Rust client API, in this process but over the service's
//! UNIX socket and shared memory as any other program would, accepts from
//! and connects to Linux TCP in the sender namespace, and both streams of
//! each connection are compared byte for byte; garbage on the control
//! socket ends only the connection it came on.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lab::Lab;
use std::os::fd::AsRawFd;

use toe::app::layout::Request;
use toe::app::{ctl, Context, Service, ServiceHandle};
use toe::EndpointConfig;

mod common;

use common::{pattern, toe_addr};

testkit::strict_mode_guard!();

fn lab(prefix: &str) -> lab::LabGuard {
    testkit::require_root("AF_XDP and network namespaces");
    common::lab(prefix, false, false)
}

fn socket_path(lab: &Lab) -> PathBuf {
    toe::app::socket_path(lab.name())
}

/// A service on the receiver's device for `addr`, on its own thread.
fn service(lab: &Lab, path: &Path) -> ServiceHandle {
    let ep = common::endpoint(lab, toe_addr(lab), EndpointConfig::default());
    Service::new(ep, path).unwrap().spawn()
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn the_rust_api_accepts_from_and_connects_to_linux_byte_exactly() {
    let lab = lab("tapp");
    let path = socket_path(&lab);
    let svc = service(&lab, &path);
    let cx = Context::connect(&path).unwrap();
    assert_eq!(cx.local_addr(), toe_addr(&lab));

    // Linux opens: 3 MiB up, 2 MiB down (more than a ring each way, so
    // both rings wrap many times).
    let (up, down) = (3 << 20, 2 << 20);
    let listener = cx.listen(5556).unwrap();
    let to = SocketAddr::new(toe_addr(&lab), 5556);
    let linux = common::linux_upload(&lab, to, up);
    let conn = listener.accept().unwrap();
    assert_eq!(conn.addresses().0, to);
    assert_eq!(conn.addresses().1.ip(), IpAddr::V4(lab.sender().ipv4));
    let got = conn.recv_to_end().unwrap();
    assert!(
        got == pattern(up, 1),
        "the upload differs ({} bytes)",
        got.len()
    );
    // TCP_INFO's fields are the protocol stage's: everything up to the FIN
    // was received, so the next expected sequence number moved by it.
    let info = conn.tcp_info();
    assert!(info.snd_mss > 0 && info.snd_mss <= 1460, "{info:?}");
    assert!(info.rcv_wnd > 0, "{info:?}");
    conn.send_all(&pattern(down, 2)).unwrap();
    drop(conn);
    let back = linux.join().unwrap().unwrap().unwrap();
    assert!(
        back == pattern(down, 2),
        "the download differs ({} bytes)",
        back.len()
    );

    // The data path opens: 2 MiB up, Linux answers with 1 MiB after our FIN.
    let server = SocketAddr::new(IpAddr::V4(lab.sender().ipv4), 5557);
    let (up, down) = (2 << 20, 1 << 20);
    let linux = host::netns::spawn_in(&lab.sender().netns, move || -> std::io::Result<Vec<u8>> {
        let l = TcpListener::bind(server)?;
        let (mut s, _) = l.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        s.write_all(&pattern(down, 4))?;
        Ok(got)
    })
    .unwrap();
    let conn = loop {
        match cx.connect_to(server) {
            Ok(c) => break c,
            // Linux's listener may not be up yet.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("connect: {e}"),
        }
    };
    assert_eq!(conn.addresses().1, server);
    conn.send_all(&pattern(up, 3)).unwrap();
    conn.shutdown_write();
    let back = conn.recv_to_end().unwrap();
    assert!(
        back == pattern(down, 4),
        "Linux's answer differs ({} bytes)",
        back.len()
    );
    let got = linux.join().unwrap().unwrap().unwrap();
    assert!(
        got == pattern(up, 3),
        "the upload to Linux differs ({} bytes)",
        got.len()
    );
    drop(conn);

    // Garbage on the control socket: an unknown first request is answered
    // EPROTO and that connection dropped; a message of the wrong size ends
    // its connection too; the service serves the others on.
    let raw = ctl::connect(&path).unwrap();
    let bogus = Request {
        op: 99,
        ..Request::default()
    };
    ctl::send_request(&raw, &bogus).unwrap();
    let (resp, _) = ctl::recv_response(&raw).unwrap();
    assert_eq!(resp.err, libc::EPROTO);
    let raw = ctl::connect(&path).unwrap();
    // SAFETY: a 3-byte send on a connected socket.
    let sent = unsafe { libc::send(raw.as_raw_fd(), b"abc".as_ptr().cast(), 3, 0) };
    assert_eq!(sent, 3);
    let e = ctl::recv_response(&raw).expect_err("the service hangs up");
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);

    // A closed port: refused, as the kernel says it.
    let closed = SocketAddr::new(IpAddr::V4(lab.sender().ipv4), 5558);
    let e = cx.connect_to(closed).err().expect("a refusal");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    // A second listener on a port in use: the kernel's EADDRINUSE.
    let e = cx.listen(5556).err().expect("the port is in use");
    assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
    drop(listener);
    drop(cx);
    let counters = svc.stop().unwrap();
    eprintln!("{counters:?}");
    assert_eq!(counters.malformed, 0, "{counters:?}");
    assert!(counters.rx_frames > 1000, "{counters:?}");
    assert!(!path.exists(), "the service removes its socket");
}

#[test]
fn a_missing_service_is_a_clear_error() {
    let path = std::env::temp_dir().join(format!("no-toe-service-{}.sock", std::process::id()));
    let e = Context::connect(&path).err().expect("no service there");
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

/// A service that goes away while an application waits on one of its
/// connections: the wait ends with an error (the service's end of the
/// connection's descriptor hung up), not never.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn a_wait_ends_with_an_error_when_the_service_goes_away() {
    let lab = lab("tgone");
    let path = socket_path(&lab);
    let svc = service(&lab, &path);
    let cx = Context::connect(&path).unwrap();
    let listener = cx.listen(5559).unwrap();
    let to = SocketAddr::new(toe_addr(&lab), 5559);
    // Linux connects and sends nothing until the test is over.
    let (hold, release) = std::sync::mpsc::channel::<()>();
    let linux = host::netns::spawn_in(&lab.sender().netns, move || {
        let s = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        let _ = release.recv();
        drop(s);
        std::io::Result::Ok(())
    })
    .unwrap();
    let conn = listener.accept().unwrap();
    let waited = std::thread::scope(|scope| {
        let reader = scope.spawn(|| conn.recv(&mut [0u8; 64]));
        std::thread::sleep(Duration::from_millis(200));
        assert!(!reader.is_finished(), "nothing was sent: the read waits");
        svc.stop().unwrap();
        reader.join().unwrap()
    });
    let e = waited.expect_err("the service is gone");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionAborted, "{e}");
    let _ = hold.send(());
    linux.join().unwrap().unwrap().unwrap();
}
