//! The load balancer in a lab, with real TCP connections (root only).

use std::time::Duration;

use lbxdp::live::{queue_counts, SERVICE_PORT};
use lbxdp::traffic::{ConnShape, Servers, Workload};
use lbxdp::{ControlLoop, LiveLab, LivePolicy, LiveSpec};

testkit::strict_mode_guard!();

fn spec(backends: u32) -> LiveSpec {
    let mut s = LiveSpec::new(&lab::unique_name("lbx"));
    s.backends = backends;
    s.clients = 1;
    s
}

/// A lab of 3 backends with their servers running and a controller
/// stepping at `rate_hz`, fed by the backends' agents over HTTP. Bind as
/// `let (live, _servers, ctl)`: dropped in reverse, the controller goes
/// first and the lab last.
fn running_lab(policy: LivePolicy, rate_hz: f64) -> (LiveLab, Servers, ControlLoop) {
    let live = LiveLab::up(&spec(3)).unwrap();
    let ns: Vec<String> = live.backends.iter().map(|b| b.netns.clone()).collect();
    let servers = Servers::start(&ns, live.vip, SERVICE_PORT).unwrap();
    let ctl = ControlLoop::start(
        live.dp.clone(),
        policy,
        live.macs.clone(),
        128,
        live.reporters().unwrap(),
        rate_hz,
    )
    .unwrap();
    (live, servers, ctl)
}

const SHORT: ConnShape = ConnShape {
    bytes: 20_000,
    chunk: 20_000,
    pause: Duration::ZERO,
};

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn connections_through_the_load_balancer() {
    testkit::require_root("namespaces, XDP");
    let (live, _servers, ctl) = running_lab(LivePolicy::CrossRss, 10.0);
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
    let sum = ctl.stop().unwrap();
    assert_eq!(r.failures, 0, "{:?}", r.errors);
    assert!(r.connections > 20, "{r:?}");
    assert!(r.per_backend.iter().all(|&n| n > 0), "{r:?}");
    assert!(sum.steps >= 10 && sum.errors.is_empty(), "{sum:?}");
    // The agents answered over HTTP often enough to stay healthy (on a
    // loaded host an answer may miss its 200 ms timeout now and then).
    assert!(sum.degraded_steps * 10 <= sum.steps, "{sum:?}");
    // Every backend's software RSS counted the packets the LB sent it.
    let stats = live.dp.stats(3).unwrap();
    for (i, b) in live.backends.iter().enumerate() {
        let q: u64 = queue_counts(b, live.spec.queues).unwrap().iter().sum();
        assert!(
            q >= stats.backend_packets[i],
            "backend {i}: {q} < {}",
            stats.backend_packets[i]
        );
    }
}

/// Long connections, opened and then kept sending while tables change
/// every 10 ms (random bucket tables, alternating with the controller's):
/// none breaks, and the load balancer never meets an established
/// connection it does not know.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn table_changes_never_move_established_connections() {
    testkit::require_root("namespaces, XDP");
    let (live, _servers, ctl) = running_lab(LivePolicy::Hash, 20.0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (dp, stop) = (live.dp.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut x = 0x1234_5678u64;
            let mut writes = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let table: Vec<u32> = (0..128)
                    .map(|_| {
                        x = lb::rng::mix64(x);
                        (x % 3) as u32
                    })
                    .collect();
                dp.write_buckets(&table).unwrap();
                writes += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            writes
        })
    };
    let w = Workload {
        workers: 6,
        duration: Duration::from_secs(3),
        short: SHORT,
        long: ConnShape {
            bytes: 2_000_000,
            chunk: 20_000,
            pause: Duration::from_millis(10),
        },
        long_every: 2,
    };
    let clients: Vec<String> = live.clients.iter().map(|c| c.netns.clone()).collect();
    let r = w.run(&clients, live.vip, SERVICE_PORT, 3).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = churn.join().unwrap();
    let sum = ctl.stop().unwrap();
    assert!(writes > 100, "only {writes} table writes");
    assert!(r.long >= 6, "{r:?}");
    assert_eq!(r.failures, 0, "{:?}", r.errors);
    let stats = live.dp.stats(3).unwrap();
    assert_eq!(stats.get(lbxdp::maps::STAT_MISS_NONSYN), 0, "{stats:?}");
    assert!(sum.errors.is_empty(), "{sum:?}");
}

/// Bad reports are refused and counted; an agent that stops reporting
/// gets no new connections (its established ones carry on) until it
/// reports again; a backend that vanishes loses only its own connections.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn stale_agents_bad_reports_and_a_vanishing_backend() {
    testkit::require_root("namespaces, XDP");
    let (live, _servers, ctl) = running_lab(LivePolicy::CrossRss, 20.0);
    let client = live.clients[0].netns.clone();
    let vip = live.vip;

    // Malformed and impossible reports: refused, nothing breaks.
    let report = |server: u32, load: f64, bucket_cores: Vec<u32>| lb::AgentReport {
        server,
        core_loads: vec![load; 4],
        bucket_cores,
    };
    for bad in [
        report(0, -1.0, vec![0; 128]),
        report(1, f64::NAN, vec![0; 128]),
        report(1, 1.0, vec![0; 7]),
        report(2, 1.0, vec![9; 128]),
        report(77, 1.0, vec![0; 128]),
        report(0, 1e300, vec![0; 128]),
    ] {
        ctl.inject(bad);
    }

    // Agent 1 stops (its HTTP server shuts down; the backend keeps
    // serving): after the stale time no new connection goes there.
    live.stop_agent(1).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let short_run = |n: usize| -> Vec<u32> {
        let c = client.clone();
        host::netns::spawn_in(&c, move || {
            (0..n)
                .map(|_| lbxdp::traffic::connect_once(vip, SERVICE_PORT, SHORT).unwrap())
                .collect::<Vec<u32>>()
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
    };
    let during = short_run(30);
    assert!(
        !during.contains(&1),
        "stale backend got new connections: {during:?}"
    );
    // Started again (same address, port and token): it reports, and is
    // healthy, at the next interval.
    live.start_agent(1).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let after = short_run(30);
    assert!(after.contains(&1), "backend 1 never came back: {after:?}");

    // Long connections on every backend, traced by local port.
    let long = ConnShape {
        bytes: 3_000_000,
        chunk: 15_000,
        pause: Duration::from_millis(20),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let mut longs = Vec::new();
    for _ in 0..12 {
        let tx = tx.clone();
        longs.push(
            host::netns::spawn_in(&client, move || {
                let addr = std::net::SocketAddr::from((vip, SERVICE_PORT));
                let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3))
                    .expect("connect");
                let port = s.local_addr().expect("local address").port();
                let _ = tx.send(port);
                let r = lbxdp::traffic::exchange(s, long);
                (port, r)
            })
            .unwrap(),
        );
    }
    drop(tx);
    let ports: Vec<u16> = rx.iter().take(12).collect();
    assert_eq!(ports.len(), 12);
    std::thread::sleep(Duration::from_millis(200));
    let backend_of = |port: u16| {
        live.dp
            .connections()
            .into_iter()
            .find(|(k, _)| u16::from_be(k.sport) == port)
            .map(|(_, v)| v.backend)
    };
    let placed: Vec<(u16, u32)> = ports
        .iter()
        .map(|&p| (p, backend_of(p).expect("in conn table")))
        .collect();

    std::thread::sleep(Duration::from_millis(300));
    // Backend 2 vanishes while the long connections run.
    live.kill_backend(2).unwrap();
    let mut results = Vec::new();
    for h in longs {
        results.push(h.join().unwrap().unwrap());
    }
    let sum = ctl.stop().unwrap();
    for (port, backend) in &placed {
        let result = &results
            .iter()
            .find(|(p, _)| p == port)
            .expect("a result per port")
            .1;
        if *backend == 2 {
            assert!(
                result.is_err(),
                "port {port} on the vanished backend finished: {result:?}"
            );
        } else {
            assert_eq!(
                result.as_ref().ok(),
                Some(backend),
                "port {port} on backend {backend}: {result:?}"
            );
        }
    }
    assert!(
        placed.iter().any(|(_, b)| *b != 2),
        "no connection on a surviving backend"
    );
    assert!(sum.rejected >= 6, "{sum:?}");
    assert!(sum.degraded_steps > 0, "{sum:?}");
    // The stopped agent's refused requests and the vanished backend's
    // timed-out ones were failures, not reports.
    assert!(sum.agent_failures > 0, "{sum:?}");
}

/// Asks `links` for a report each, from `netns` (the load balancer's). A
/// failed request (on a loaded host one may take longer than the 200 ms
/// timeout) is asked again, up to 10 times; a failure leaves a link's
/// baseline as it was, so the retried report covers the same packets.
fn poll(
    netns: &str,
    links: Vec<lbxdp::agents::AgentLink>,
) -> (
    Vec<lbxdp::agents::AgentLink>,
    Vec<Result<lb::AgentReport, String>>,
) {
    host::netns::spawn_in(netns, move || {
        let mut links = links;
        let reports = links
            .iter_mut()
            .map(|l| {
                let mut report = l.report(Duration::from_millis(100));
                for _ in 0..9 {
                    if report.is_ok() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                    report = l.report(Duration::from_millis(100));
                }
                report
            })
            .collect();
        (links, reports)
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap()
}

/// The backends' agents, asked over HTTP from the load balancer's
/// namespace, give the served software RSS table as the bucket -> core map
/// and per-queue packet deltas as loads; without the lab's token they
/// answer 401.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn agents_report_load_and_config_over_http() {
    testkit::require_root("namespaces, XDP");
    let (live, _servers, ctl) = running_lab(LivePolicy::Hash, 10.0);
    let reporters = live.reporters().unwrap();
    let ns = reporters.netns.clone();
    let urls: Vec<String> = reporters
        .links
        .iter()
        .map(|l| l.url().to_string())
        .collect();
    let (links, first) = poll(&ns, reporters.links);
    for (i, r) in first.into_iter().enumerate() {
        let r = r.unwrap();
        assert_eq!(r.server, i as u32);
        assert_eq!(
            r.bucket_cores,
            live.configs[i].indirection_table.entries(),
            "backend {i}"
        );
        // No interval measured yet.
        assert_eq!(r.core_loads, vec![0.0; live.spec.queues as usize]);
    }
    let w = Workload {
        workers: 2,
        duration: Duration::from_secs(1),
        short: SHORT,
        long: SHORT,
        long_every: 1,
    };
    let clients: Vec<String> = live.clients.iter().map(|c| c.netns.clone()).collect();
    let run = w.run(&clients, live.vip, SERVICE_PORT, 3).unwrap();
    assert_eq!(run.failures, 0, "{:?}", run.errors);
    // Let every agent take a sample after the last packet.
    std::thread::sleep(Duration::from_millis(100));
    let (_links, second) = poll(&ns, links);
    let mut total = 0.0;
    for (i, r) in second.into_iter().enumerate() {
        let r = r.unwrap();
        assert!(
            r.core_loads.iter().all(|l| l.is_finite() && *l >= 0.0),
            "backend {i}: {r:?}"
        );
        if run.per_backend[i] > 0 {
            assert!(r.core_loads.iter().sum::<f64>() > 0.0, "backend {i}: {r:?}");
        }
        total += r.core_loads.iter().sum::<f64>();
    }
    assert!(total > 0.0);
    // Without the token, or with another one: refused.
    let refused = host::netns::spawn_in(&ns, move || {
        urls.iter()
            .flat_map(|u| {
                [None, Some("not-the-token")].map(|t| {
                    agent::AgentClient::new(u, t, Duration::from_millis(200))
                        .unwrap()
                        .load()
                })
            })
            .map(|r| matches!(r, Err(agent::ClientError::Unauthorized { .. })))
            .collect::<Vec<bool>>()
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap();
    assert!(refused.iter().all(|&r| r), "{refused:?}");
    let sum = ctl.stop().unwrap();
    assert!(sum.errors.is_empty(), "{sum:?}");
    assert!(sum.degraded_steps * 10 <= sum.steps, "{sum:?}");
}
