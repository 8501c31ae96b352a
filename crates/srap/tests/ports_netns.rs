//! `LocalPorts::read` sees the reading thread's network namespace, not the
//! process's (it reads /proc/thread-self/net): an allocator thread serving
//! a lab host must see that host's ports in use.

use std::net::TcpListener;

use rss::L4Proto;
use srap::ports::LocalPorts;

testkit::strict_mode_guard!();

#[test]
#[ignore = "needs root (a network namespace): `make test` runs it as root"]
fn a_thread_in_another_namespace_reads_its_own_sockets() {
    testkit::require_root("unshare(CLONE_NEWNET)");
    let (port, seen_inside) = std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| testkit::missing(&format!("network namespaces ({e})")));
        let listener = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let ports = LocalPorts::read(L4Proto::Tcp).unwrap();
        (port, ports.in_use.contains(port))
    })
    .join()
    .unwrap();
    assert!(seen_inside, "port {port} not seen from its own namespace");
    let outside = LocalPorts::read(L4Proto::Tcp).unwrap();
    let here = outside
        .sockets
        .iter()
        .any(|s| s.local.port() == port && s.local.ip().is_unspecified());
    assert!(
        !here,
        "the main thread's namespace shows the other one's socket"
    );
}
