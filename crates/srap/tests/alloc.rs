//! The allocator over its real Unix socket: racing clients get distinct
//! ports and CPUs, bad input gets an error response and the server keeps
//! serving, leases end on release or when their connection is gone.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rss::{L4Proto, RssConfig, RssKey};
use srap::alloc::{AllocClient, ClientError, ErrorCode, Server, ServerHandle, ServerOptions};

fn socket_path() -> PathBuf {
    testkit::unique_path("srap-test").join("alloc.sock")
}

fn start(grace: Duration) -> ServerHandle {
    let mut options = ServerOptions::new(socket_path());
    options.grace = grace;
    options.sweep_interval = Duration::from_millis(50);
    Server::bind(options).unwrap().spawn()
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn config(queues: u32) -> RssConfig {
    RssConfig::ethtool_default(RssKey::microsoft(), queues, 128).unwrap()
}

/// Sends raw lines, returns the raw response lines.
fn raw(server: &ServerHandle, lines: &[&str]) -> Vec<String> {
    let stream = UnixStream::connect(server.path()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    lines
        .iter()
        .map(|line| {
            writer.write_all(line.as_bytes()).unwrap();
            writer.write_all(b"\n").unwrap();
            let mut out = String::new();
            reader.read_line(&mut out).unwrap();
            out
        })
        .collect()
}

#[test]
fn racing_clients_get_distinct_ports_and_cpus() {
    let server = start(Duration::from_secs(60));
    let remote = addr("10.77.1.2");
    AllocClient::connect(server.path())
        .unwrap()
        .set_config(remote, &config(8))
        .unwrap();
    let path = server.path().to_path_buf();
    let lease_all = |n: usize| -> Vec<(u16, u32)> {
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut client =
                        AllocClient::connect_with_timeout(&path, Duration::from_secs(5)).unwrap();
                    let r = client
                        .lease(L4Proto::Tcp, Some(addr("10.77.1.1")), remote, 5201)
                        .unwrap();
                    (r.port, r.cpu)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    };
    let first = lease_all(8);
    let cpus: HashSet<u32> = first.iter().map(|l| l.1).collect();
    assert_eq!(cpus.len(), 8, "{first:?}");
    // Cores are used up: the next 8 double up evenly, ports stay unique.
    let second = lease_all(8);
    let cpus: HashSet<u32> = second.iter().map(|l| l.1).collect();
    assert_eq!(cpus.len(), 8, "{second:?}");
    let ports: HashSet<u16> = first.iter().chain(&second).map(|l| l.0).collect();
    assert_eq!(ports.len(), 16);
    let status = AllocClient::connect(server.path())
        .unwrap()
        .status()
        .unwrap();
    assert_eq!(status.leases.len(), 16);
    assert_eq!(status.remotes, [remote]);
}

/// 32 queues on 2 CPUs: 16 racing clients get 16 distinct queues, 8 per
/// CPU; a batch of 16 likewise.
#[test]
fn racing_leases_get_distinct_queues() {
    let server = start(Duration::from_secs(60));
    let remote = addr("10.77.1.2");
    let mut cfg = config(32);
    cfg.queue_cpus = (0..32).map(|q| q % 2).collect();
    AllocClient::connect(server.path())
        .unwrap()
        .set_config(remote, &cfg)
        .unwrap();
    let path = server.path().to_path_buf();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut client =
                    AllocClient::connect_with_timeout(&path, Duration::from_secs(5)).unwrap();
                client
                    .lease(L4Proto::Tcp, Some(addr("10.77.1.1")), remote, 5201)
                    .unwrap()
            })
        })
        .collect();
    let leases: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let queues: HashSet<u32> = leases.iter().map(|l| l.queue).collect();
    assert_eq!(queues.len(), 16, "{leases:?}");
    assert_eq!(leases.iter().filter(|l| l.cpu == 0).count(), 8);
    // A batch to another port of the same receiver: 16 more distinct queues.
    let mut client = AllocClient::connect(server.path()).unwrap();
    let batch = client
        .lease_batch(L4Proto::Tcp, Some(addr("10.77.1.1")), remote, 5202, 16)
        .unwrap();
    assert_eq!(batch.len(), 16);
    let queues: HashSet<u32> = batch.iter().map(|l| l.queue).collect();
    assert_eq!(queues.len(), 16, "{batch:?}");
    for l in &batch {
        let flow = rss::FlowTuple::new(addr("10.77.1.1"), l.port, remote, 5202, L4Proto::Tcp);
        assert_eq!(cfg.place(&flow).unwrap().queue, l.queue);
    }
    // Batched leases are leases: they count for the next request.
    let next = client
        .lease(L4Proto::Tcp, Some(addr("10.77.1.1")), remote, 5202)
        .unwrap();
    assert!(!queues.contains(&next.queue), "{next:?}");
    assert_eq!(client.status().unwrap().leases.len(), 33);
    let err = client
        .lease_batch(L4Proto::Tcp, None, remote, 5202, 17)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Refused {
                code: ErrorCode::BadRequest,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn leases_are_predicted_correctly_and_released() {
    let server = start(Duration::from_secs(60));
    let remote = addr("10.77.1.2");
    let cfg = config(4);
    let mut client = AllocClient::connect(server.path()).unwrap();
    client.set_config(remote, &cfg).unwrap();
    let lease = client
        .lease(L4Proto::Tcp, Some(addr("10.77.1.1")), remote, 5201)
        .unwrap();
    let flow = rss::FlowTuple::new(addr("10.77.1.1"), lease.port, remote, 5201, L4Proto::Tcp);
    let placed = cfg.place(&flow).unwrap();
    assert_eq!((placed.queue, placed.cpu), (lease.queue, lease.cpu));
    client.release(lease.lease).unwrap();
    assert!(client.status().unwrap().leases.is_empty());
    let err = client.release(lease.lease).unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Refused {
                code: ErrorCode::UnknownLease,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn documented_lines_and_bad_input() {
    let server = start(Duration::from_secs(60));
    let cfg = serde_json::to_string(&config(4)).unwrap();
    let set = format!(r#"{{"v":1,"op":"set_config","remote":"10.77.1.2","config":{cfg}}}"#);
    let replies = raw(
        &server,
        &[
            "this is not json",
            r#"{"v":1,"op":"lease","proto":"tcp","local":"10.77.1.1","remote":"10.77.1.2","remote_port":5201}"#,
            &set,
            r#"{"v":1,"op":"lease","proto":"tcp","local":"10.77.1.1","remote":"10.77.1.2","remote_port":5201}"#,
            r#"{"v":1,"op":"release","lease":1}"#,
            r#"{"v":2,"op":"status"}"#,
            r#"{"v":1,"op":"lease","proto":"udp","local":"10.77.1.1","remote":"10.77.1.2","remote_port":53}"#,
            r#"{"v":1,"op":"set_config","remote":"10.77.1.3","config":{"version":1}}"#,
            r#"{"v":1,"op":"status"}"#,
        ],
    );
    let json: Vec<serde_json::Value> = replies
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    assert_eq!(json[0]["code"], "bad_request", "{}", replies[0]);
    assert_eq!(json[1]["code"], "no_config", "{}", replies[1]);
    assert!(replies[1].contains("10.77.1.2"));
    assert_eq!(replies[2], "{\"v\":1,\"ok\":true}\n");
    assert!(json[3]["port"].as_u64().is_some() && json[3].get("error").is_none());
    assert_eq!(json[3]["lease"], 1);
    assert_eq!(replies[4], "{\"v\":1,\"ok\":true}\n");
    assert_eq!(json[5]["code"], "unsupported_version");
    // UDP hashes addresses only in the default config: not steerable.
    assert_eq!(json[6]["code"], "not_steerable", "{}", replies[6]);
    assert_eq!(json[7]["code"], "bad_request");
    assert_eq!(json[8]["leases"], serde_json::json!([]));
}

#[test]
fn oversized_line_is_refused_and_server_keeps_running() {
    let server = start(Duration::from_secs(60));
    let mut stream = UnixStream::connect(server.path()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let big = vec![b'x'; srap::alloc::protocol::MAX_LINE + 100];
    // The server may close before reading all of it; ignore write errors.
    let _ = stream.write_all(&big);
    let mut reply = String::new();
    BufReader::new(&stream).read_line(&mut reply).unwrap();
    assert!(reply.contains("too_long"), "{reply}");
    // Garbage bytes (not UTF-8) too.
    let mut s2 = UnixStream::connect(server.path()).unwrap();
    s2.write_all(b"\xff\xfe\n").unwrap();
    let mut reply = String::new();
    BufReader::new(&s2).read_line(&mut reply).unwrap();
    assert!(reply.contains("bad_request"), "{reply}");
    // Still serving.
    let status = AllocClient::connect(server.path())
        .unwrap()
        .status()
        .unwrap();
    assert!(status.leases.is_empty());
}

#[test]
fn dead_or_missing_allocator_fails_fast() {
    let path = socket_path();
    let start = Instant::now();
    let err = AllocClient::connect(&path).err().unwrap();
    assert!(matches!(err, ClientError::Connect { .. }), "{err}");
    // A socket that accepts but never answers: the client times out.
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let _silent = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut client = AllocClient::connect(&path).unwrap();
    let err = client
        .lease(L4Proto::Tcp, None, addr("10.0.0.1"), 80)
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout(_)), "{err}");
    assert!(start.elapsed() < Duration::from_secs(2));
    std::fs::remove_file(&path).unwrap();
}

/// Dropping the handle stops the server even when its socket file is
/// already gone (a caller that cleaned up its directory first): the accept
/// loop is woken through the listening socket, not through the path.
#[test]
fn dropping_the_handle_stops_the_server_without_its_socket_file() {
    let server = start(Duration::from_secs(2));
    std::fs::remove_file(server.path()).unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(server);
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "dropping the server handle hung"
    );
}

#[test]
fn second_allocator_on_the_same_path_is_refused() {
    let server = start(Duration::from_secs(60));
    let err = Server::bind(ServerOptions::new(server.path()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("already"), "{err}");
}

/// A TCP socket bound to `local` and connected to `remote`.
fn connect_from(local: SocketAddr, remote: SocketAddr) -> TcpStream {
    use nix::sys::socket::{bind, connect, socket, AddressFamily, SockFlag, SockType, SockaddrIn};
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    let to_sin = |a: SocketAddr| match a {
        SocketAddr::V4(v4) => SockaddrIn::from(v4),
        SocketAddr::V6(_) => unreachable!(),
    };
    bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &to_sin(local)).unwrap();
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &to_sin(remote)).unwrap();
    // SAFETY: `fd` is an open, connected TCP socket we own.
    unsafe { TcpStream::from_raw_fd(fd.into_raw_fd()) }
}

#[test]
fn lease_lives_while_its_connection_does() {
    let server = start(Duration::from_millis(300));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let dst = listener.local_addr().unwrap();
    let lo = addr("127.0.0.1");
    let mut client = AllocClient::connect(server.path()).unwrap();
    client.set_config(lo, &config(2)).unwrap();
    let unused = client
        .lease(L4Proto::Tcp, Some(lo), lo, dst.port())
        .unwrap();
    let used = client
        .lease(L4Proto::Tcp, Some(lo), lo, dst.port())
        .unwrap();
    let stream = connect_from(SocketAddr::new(lo, used.port), dst);
    let (accepted, _) = listener.accept().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let leases = client.status().unwrap().leases;
    let ids: Vec<u64> = leases.iter().map(|l| l.lease).collect();
    assert_eq!(
        ids,
        [used.lease],
        "the unused lease is released after the grace period"
    );
    assert!(leases[0].connected);
    drop(stream);
    drop(accepted);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !client.status().unwrap().leases.is_empty() {
        assert!(Instant::now() < deadline, "lease outlived its connection");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = unused;
}

/// `serve --agent`: a config not given is fetched on the first lease,
/// cached, and fetched again once stale; a failed re-fetch keeps the old
/// one, a failed first fetch is a `no_config` refusal.
#[test]
fn configs_are_fetched_on_demand_and_refreshed() {
    use srap::alloc::{Allocator, ConfigSource};
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;
    struct Source(Arc<AtomicU32>);
    impl ConfigSource for Source {
        fn fetch(&self, remote: IpAddr) -> Result<RssConfig, String> {
            let n = self.0.fetch_add(1, Ordering::Relaxed);
            match (remote.to_string().as_str(), n) {
                ("10.77.1.2", 0) => Ok(config(4)),
                ("10.77.1.2", _) => Err("agent down".into()),
                _ => Err("agent at http://x is unreachable".into()),
            }
        }
    }
    let fetches = Arc::new(AtomicU32::new(0));
    // Stale after 1 s: two leases back to back stay well inside it even
    // on a loaded host (50 ms did not: a CI run's first two leases were
    // 50 ms apart and the second fetched again).
    let stale_after = Duration::from_secs(1);
    let a = Allocator::new("/proc", Duration::from_secs(60))
        .with_config_source(Box::new(Source(fetches.clone())), stale_after);
    let lease = || {
        a.lease(
            L4Proto::Tcp,
            Some(addr("10.77.1.1")),
            addr("10.77.1.2"),
            5201,
        )
    };
    lease().unwrap();
    lease().unwrap();
    assert_eq!(fetches.load(Ordering::Relaxed), 1, "cached");
    std::thread::sleep(stale_after + Duration::from_millis(100));
    lease().unwrap();
    assert_eq!(
        fetches.load(Ordering::Relaxed),
        2,
        "stale: fetched again, old one kept"
    );
    let err = a
        .lease(L4Proto::Tcp, None, addr("127.0.0.9"), 5201)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NoConfig);
    assert!(err.message.contains("unreachable"), "{}", err.message);
}

/// A connection that has just closed stops counting at the next lease, not
/// at the next sweep (turned off here): back-to-back transfers are planned
/// around the flows alive now. Exact sock_diag lookups make this cheap.
#[test]
fn a_flow_that_just_closed_frees_its_cpu_for_the_next_lease() {
    let mut options = ServerOptions::new(socket_path());
    options.sweep_interval = Duration::from_secs(3600);
    let server = Server::bind(options).unwrap().spawn();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let dst = listener.local_addr().unwrap();
    let lo = addr("127.0.0.1");
    // Flows from 127.0.0.2, so the accepted end (127.0.0.1 -> 127.0.0.2) is
    // not one of this sender's connections to the receiver.
    let from = addr("127.0.0.2");
    let mut client = AllocClient::connect(server.path()).unwrap();
    client.set_config(lo, &config(2)).unwrap();
    let first = client
        .lease(L4Proto::Tcp, Some(from), lo, dst.port())
        .unwrap();
    let stream = connect_from(SocketAddr::new(from, first.port), dst);
    let (accepted, _) = listener.accept().unwrap();
    // Once the allocator's snapshot of the host's sockets shows it, the
    // next lease checks it and marks it connected.
    let deadline = Instant::now() + Duration::from_secs(5);
    let other = loop {
        std::thread::sleep(Duration::from_millis(100));
        let other = client
            .lease(L4Proto::Tcp, Some(from), lo, dst.port())
            .unwrap();
        let leases = client.status().unwrap().leases;
        if leases.iter().any(|l| l.lease == first.lease && l.connected) {
            break other;
        }
        client.release(other.lease).unwrap();
        assert!(
            Instant::now() < deadline,
            "the lease was never seen connected"
        );
    };
    assert_ne!(other.cpu, first.cpu, "2 CPUs, 2 flows");
    // Closed with RST: no FIN-WAIT state that still counts as a connection.
    nix::sys::socket::setsockopt(
        &stream,
        nix::sys::socket::sockopt::Linger,
        &nix::libc::linger {
            l_onoff: 1,
            l_linger: 0,
        },
    )
    .unwrap();
    drop(stream);
    drop(accepted);
    let next = client
        .lease(L4Proto::Tcp, Some(from), lo, dst.port())
        .unwrap();
    let leases: Vec<u64> = client
        .status()
        .unwrap()
        .leases
        .iter()
        .map(|l| l.lease)
        .collect();
    assert!(
        !leases.contains(&first.lease),
        "closed flow still leased: {leases:?}"
    );
    assert_eq!(
        next.cpu, first.cpu,
        "the CPU of the closed flow is the free one"
    );
}
