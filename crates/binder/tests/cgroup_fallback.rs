//! The cgroup binder's fallbacks, on loopback in a throwaway cgroup: planned
//! ports are bound; a planned port in use is skipped for the next slot;
//! bound sockets, UDP, SO_REUSEADDR sockets and unplanned destinations are
//! left to the kernel; connect errors are the kernel's.

mod common;

use std::net::TcpListener;

use binder::{CgroupBinder, TempCgroup};
use common::{listener, probe_command, probe_result};
use testkit::free_port;
use testkit::RefusingPort;

testkit::strict_mode_guard!();

#[test]
fn probe() {
    common::probe_child();
}

fn run(cgroup: &TempCgroup, scenario: &str, args: &[String]) -> serde_json::Value {
    let mut cmd = probe_command(scenario, args);
    cgroup.enter_in_child(&mut cmd).unwrap();
    probe_result(&cmd.output().unwrap())
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn planned_ports_and_fallbacks() {
    testkit::require_root("cgroup BPF");
    let target = listener("127.0.0.1:0");
    let (p1, p2) = (free_port(), free_port());
    // p1 is held by a listener: bpf_bind fails, the next slot (p2) is used.
    let busy = TcpListener::bind(("127.0.0.1", p1)).unwrap();
    let cgroup = TempCgroup::create().unwrap();
    let binder = CgroupBinder::attach(cgroup.path()).unwrap();
    binder
        .set_ports("127.0.0.1".parse().unwrap(), target, &[p1, p2])
        .unwrap();

    let r = run(&cgroup, "connect", &[target.to_string()]);
    assert_eq!(r["r"], 0, "{r}");
    assert_eq!(r["local_port"], p2, "{r}");
    let s = binder.stats().unwrap();
    assert_eq!((s.bound, s.bind_failed), (1, 1), "{s:?}");

    // Bound by the program: kept.
    let mine = free_port();
    let r = run(&cgroup, "bound", &[target.to_string(), mine.to_string()]);
    assert_eq!(r["local_port"], mine, "{r}");
    // UDP: not touched.
    let r = run(&cgroup, "udp", &[target.to_string()]);
    assert_eq!(r["r"], 0);
    // Unplanned destination that refuses: the kernel's ECONNREFUSED.
    let closed = RefusingPort::new();
    let r = run(&cgroup, "connect", &[closed.addr().to_string()]);
    assert_eq!(r["r"], -1);
    assert_eq!(r["errno"], libc::ECONNREFUSED);
    let s = binder.stats().unwrap();
    assert_eq!(s.skipped, 2, "bound + UDP: {s:?}");
    assert_eq!(s.no_plan, 1, "{s:?}");

    // Every planned port taken: connect proceeds with a kernel port.
    drop(busy);
    let a = TcpListener::bind(("127.0.0.1", p1)).unwrap();
    // p2 is in TIME_WAIT from the first connection (the client closed
    // first), which is enough to make bpf_bind fail; hold it if it is not.
    let b = TcpListener::bind(("127.0.0.1", p2)).ok();
    let r = run(&cgroup, "nonblock", &[target.to_string()]);
    assert_eq!(r["so_error"], 0, "{r}");
    let port = r["local_port"].as_u64().unwrap() as u16;
    assert!(port != p1 && port != p2, "{r}");
    assert_eq!(binder.stats().unwrap().fallback, 1);
    drop((a, b));
}
