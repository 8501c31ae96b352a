//! The LD_PRELOAD binder on loopback: it pins the allocator's port, and in
//! every case it cannot or should not steer, the program sees exactly what
//! a plain connect() gives (docs/binders.md, "Fallbacks"). No root needed.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use common::{listener, probe_command, probe_result, Allocator, Answer};
use testkit::free_port;
use testkit::RefusingPort;

/// The child side: runs when re-executed with BINDER_PROBE set.
#[test]
fn probe() {
    common::probe_child();
}

fn shim() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("binder-shim-{}", std::process::id()));
    binder::preload::install_shim_in(&dir).unwrap()
}

fn run(alloc: &Allocator, scenario: &str, args: &[String]) -> serde_json::Value {
    let mut cmd = probe_command(scenario, args);
    binder::preload::configure(&mut cmd, &shim(), Some(&alloc.path));
    cmd.env("STEER_PRELOAD_DEBUG", "1");
    let out = cmd.output().unwrap();
    eprintln!(
        "{scenario}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    probe_result(&out)
}

/// A free port, an allocator that hands out just that one, and a 127.0.0.1
/// listener to connect to.
fn one_port() -> (u16, Allocator, SocketAddr) {
    let port = free_port();
    let alloc = Allocator::start(Answer::Ports(vec![port]));
    (port, alloc, listener("127.0.0.1:0"))
}

#[test]
fn allocator_port_is_used() {
    let (port, alloc, target) = one_port();
    let r = run(&alloc, "connect", &[target.to_string()]);
    assert_eq!(r["r"], 0);
    assert_eq!(r["local_port"], port);
    assert_eq!(r["errno"], 4242, "a successful connect leaves errno alone");
    let req = alloc.requests.lock().unwrap()[0].clone();
    assert_eq!(req["v"], 1);
    assert_eq!(req["op"], "lease");
    assert_eq!(req["proto"], "tcp");
    assert_eq!(req["local"], "127.0.0.1");
    assert_eq!(req["remote"], "127.0.0.1");
    assert_eq!(req["remote_port"], target.port());
}

#[test]
fn ipv6_is_steered_and_mapped_ipv4_is_not() {
    testkit::require(
        "the IPv6 loopback ::1: enable it with `sysctl net.ipv6.conf.lo.disable_ipv6=0`",
        TcpListener::bind("[::1]:0").is_ok(),
    );
    let port = free_port();
    let alloc = Allocator::start(Answer::Ports(vec![port]));
    let target = listener("[::1]:0");
    let r = run(&alloc, "connect", &[target.to_string()]);
    assert_eq!(r["r"], 0);
    assert_eq!(r["local_port"], port);
    assert_eq!(alloc.request_count(), 1);
    // ::ffff:127.0.0.1 on an AF_INET6 socket: plain connect, no request.
    let target4 = listener("127.0.0.1:0");
    let r = run(&alloc, "mapped", &[target4.to_string()]);
    assert_eq!(r["r"], 0);
    assert_eq!(alloc.request_count(), 1);
}

#[test]
fn allocator_absent_connect_still_works_and_refusal_is_reported() {
    let alloc = Allocator::start(Answer::Error);
    let path = alloc.path.clone();
    drop(alloc); // nothing listens on the socket path any more
    let target = listener("127.0.0.1:0");
    let mut cmd = probe_command("connect", &[target.to_string()]);
    binder::preload::configure(&mut cmd, &shim(), Some(&path));
    let r = probe_result(&cmd.output().unwrap());
    assert_eq!(r["r"], 0);
    assert_eq!(r["errno"], 4242);
    let closed = RefusingPort::new();
    let mut cmd = probe_command("connect", &[closed.addr().to_string()]);
    binder::preload::configure(&mut cmd, &shim(), Some(&path));
    let r = probe_result(&cmd.output().unwrap());
    assert_eq!(r["r"], -1);
    assert_eq!(r["errno"], libc::ECONNREFUSED);
}

#[test]
fn refused_connect_on_a_steered_socket_reports_econnrefused() {
    let alloc = Allocator::start(Answer::Ports(vec![free_port()]));
    let closed = RefusingPort::new();
    let r = run(&alloc, "connect", &[closed.addr().to_string()]);
    assert_eq!(alloc.request_count(), 1);
    assert_eq!(r["r"], -1);
    assert_eq!(r["errno"], libc::ECONNREFUSED);
}

#[test]
fn bad_answers_fall_back() {
    let target = listener("127.0.0.1:0");
    for answer in [
        Answer::Error,
        Answer::Garbage,
        Answer::OldVersion,
        Answer::Hangup,
        Answer::Slow(Duration::from_millis(600)),
    ] {
        let alloc = Allocator::start(answer.clone());
        let t = std::time::Instant::now();
        let r = run(&alloc, "connect", &[target.to_string()]);
        assert_eq!(r["r"], 0, "{answer:?}");
        assert_eq!(r["errno"], 4242, "{answer:?}");
        assert_ne!(r["local_port"], 45000, "{answer:?}");
        assert_eq!(alloc.request_count(), 1, "{answer:?}");
        eprintln!("{answer:?}: child ran {:?}", t.elapsed());
    }
}

#[test]
fn bound_sockets_udp_and_unix_are_untouched() {
    let (port, alloc, target) = one_port();
    // Bound by the program to a kernel-chosen port: kept.
    let r = run(&alloc, "bound", &[target.to_string()]);
    assert_eq!(r["r"], 0);
    assert_ne!(r["before"], 0);
    assert_eq!(r["local_port"], r["before"]);
    // Bound by the program to a port of its choice: kept.
    let mine = free_port();
    let r = run(&alloc, "bound", &[target.to_string(), mine.to_string()]);
    assert_eq!(r["bind"], 0);
    assert_eq!(r["local_port"], mine);
    // UDP connect.
    let r = run(&alloc, "udp", &[target.to_string()]);
    assert_eq!(r["r"], 0);
    assert_ne!(r["local_port"], port);
    // AF_UNIX: errno of the plain connect.
    let r = run(&alloc, "unix", &[]);
    assert_eq!(r["r"], -1);
    assert_eq!(r["errno"], libc::ENOENT);
    assert_eq!(
        alloc.request_count(),
        0,
        "none of these asked the allocator"
    );
}

#[test]
fn nonblocking_connect_is_steered() {
    let (port, alloc, target) = one_port();
    let r = run(&alloc, "nonblock", &[target.to_string()]);
    // Loopback may complete at once; otherwise EINPROGRESS, as without the shim.
    assert!(r["r"] == 0 || r["errno"] == libc::EINPROGRESS, "{r}");
    assert_eq!(r["so_error"], 0);
    assert_eq!(r["local_port"], port);
}

#[test]
fn port_in_use_falls_back_and_connects() {
    let target = listener("127.0.0.1:0");
    // An existing connection from 127.0.0.1:P to the target: the 4-tuple
    // the allocator hands out is taken.
    let taken = std::net::TcpStream::connect(target).unwrap();
    let p = taken.local_addr().unwrap().port();
    let alloc = Allocator::start(Answer::Ports(vec![p]));
    let r = run(&alloc, "connect", &[target.to_string()]);
    assert_eq!(r["r"], 0, "{r}");
    assert_eq!(r["errno"], 4242);
    assert_ne!(r["local_port"], p);
    assert_eq!(alloc.request_count(), 1);
    // Same with a port held by a listening socket.
    let l = TcpListener::bind("0.0.0.0:0").unwrap();
    let lp = l.local_addr().unwrap().port();
    alloc.set(Answer::Ports(vec![lp]));
    let r = run(&alloc, "connect", &[target.to_string()]);
    assert_eq!(r["r"], 0, "{r}");
    assert_ne!(r["local_port"], lp);
}
