//! The load balancer in a lab, with real TCP connections (root only).

use std::time::Duration;

use lbxdp::live::SERVICE_PORT;
use lbxdp::traffic::{ConnShape, Servers, Workload};
use lbxdp::{ControlLoop, LiveLab, LivePolicy, LiveSpec};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

macro_rules! need_root {
    () => {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, XDP)");
            return;
        }
    };
}

fn spec(backends: u32) -> LiveSpec {
    let mut s = LiveSpec::new(&lab::unique_name("lbx"));
    s.backends = backends;
    s.clients = 1;
    s
}

const SHORT: ConnShape = ConnShape {
    bytes: 20_000,
    chunk: 20_000,
    pause: Duration::ZERO,
};

#[test]
fn connections_through_the_load_balancer() {
    need_root!();
    let live = LiveLab::up(&spec(3)).unwrap();
    let ns: Vec<String> = live.backends.iter().map(|b| b.netns.clone()).collect();
    let _servers = Servers::start(&ns, live.vip, SERVICE_PORT).unwrap();
    let ctl = ControlLoop::start(
        live.dp.clone(),
        LivePolicy::CrossRss,
        live.macs.clone(),
        128,
        live.agents(),
        10.0,
    )
    .unwrap();
    let w = Workload {
        workers: 4,
        duration: Duration::from_secs(2),
        short: SHORT,
        long: ConnShape {
            bytes: 1_000_000,
            chunk: 50_000,
            pause: Duration::from_millis(10),
        },
        long_every: 5,
    };
    let clients: Vec<String> = live.clients.iter().map(|c| c.netns.clone()).collect();
    let r = w.run(&clients, live.vip, SERVICE_PORT, 3).unwrap();
    let sum = ctl.stop();
    assert_eq!(r.failures, 0, "{:?}", r.errors);
    assert!(r.connections > 20, "{r:?}");
    assert!(r.per_backend.iter().all(|&n| n > 0), "{r:?}");
    assert!(sum.steps >= 10 && sum.errors.is_empty(), "{sum:?}");
    // Every backend's software RSS counted the packets the LB sent it.
    let stats = live.dp.stats(3).unwrap();
    for (i, a) in live.agents().iter().enumerate() {
        let q: u64 = a.queue_counts().unwrap().iter().sum();
        assert!(
            q >= stats.backend_packets[i],
            "backend {i}: {q} < {}",
            stats.backend_packets[i]
        );
    }
}
