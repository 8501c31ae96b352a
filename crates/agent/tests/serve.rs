//! The agent in-process on 127.0.0.1:0 with file-backed configs, and the
//! client against it and against fake servers that misbehave.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent::{
    Agent, AgentClient, AgentError, ClientError, ConfigOrigin, Devices, FileSource, ServerOptions,
    Sources, Token,
};
use rss::{RssConfig, RssKey};
use testkit::{RefusingPort, TempDir};

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Writes atomically (temp file + rename), as a config tool should.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn config(key: RssKey, queues: u32) -> RssConfig {
    RssConfig::ethtool_default(key, queues, 128).unwrap()
}

type Log = Arc<Mutex<Vec<String>>>;

/// Options for an agent on 127.0.0.1:0 serving `path` for 127.0.0.1, with
/// fast sampling and a captured log.
fn options(path: &Path) -> (ServerOptions, Log) {
    let mut opts = ServerOptions::new(Sources {
        devices: Devices::None,
        files: vec![FileSource {
            path: path.to_path_buf(),
            addrs: vec![LO],
        }],
        netns: None,
    });
    opts.listen = "127.0.0.1:0".parse().unwrap();
    opts.load_interval = Duration::from_millis(20);
    opts.config_interval = Duration::from_millis(50);
    let log: Log = Arc::default();
    let sink = log.clone();
    opts.log = Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_string()));
    (opts, log)
}

fn client(agent: &Agent, token: Option<&str>) -> AgentClient {
    AgentClient::new(&agent.url(), token, Duration::from_secs(2)).unwrap()
}

/// Polls `f` until it returns Some, for at most 5 s.
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serves_config_load_whoami_and_metrics() {
    let dir = TempDir::new("steer-agent-test");
    let path = dir.join("rss.json");
    let cfg = config(RssKey::microsoft(), 4);
    write_atomic(&path, &cfg.to_json());
    let (opts, _log) = options(&path);
    let agent = Agent::start(opts).unwrap();
    assert!(agent.local_addr().ip().is_loopback());
    let c = client(&agent, None);

    let reply = c.rss(LO).unwrap();
    assert_eq!(reply.api, 1);
    assert_eq!(reply.config, cfg);
    assert_eq!(reply.config_version, 1);
    assert_eq!(reply.origin, ConfigOrigin::File);
    assert_eq!(reply.addr, Some(LO));
    assert_eq!(reply.dev.as_deref(), Some("lo"), "127.0.0.1 is on lo");
    assert_eq!(c.rss_dev("lo").unwrap().config, cfg);
    // The same address in its IPv4-mapped IPv6 form.
    assert_eq!(
        c.rss("::ffff:127.0.0.1".parse().unwrap()).unwrap().config,
        cfg
    );

    match c.rss("192.0.2.1".parse().unwrap()) {
        Err(ClientError::Agent {
            status: 404,
            code,
            message,
            ..
        }) => {
            assert_eq!(code, "unknown_addr");
            assert!(message.contains("192.0.2.1"), "{message}");
        }
        other => panic!("expected unknown_addr, got {other:?}"),
    }
    assert!(matches!(
        c.rss_dev("nosuch0"),
        Err(ClientError::Agent { status: 404, ref code, .. }) if code == "unknown_dev"
    ));

    let devices = c.devices().unwrap();
    assert_eq!(devices.devices.len(), 1);
    assert_eq!(devices.devices[0].queues, Some(4));

    let load = eventually("two load samples", || {
        let l = c.load().unwrap();
        (l.interval_ms > 0).then_some(l)
    });
    assert!(!load.cpus.is_empty());
    assert!(load
        .cpus
        .iter()
        .all(|c| c.softirq_busy.is_some_and(|b| (0.0..=1.0).contains(&b))));
    assert!(load.devices.is_empty(), "no software RSS here");

    let who = c.whoami().unwrap();
    assert_eq!(who.addr, LO);
    let (local, seen) = c.whoami_from(0).unwrap();
    assert_eq!(seen.port, local.port());
    // A chosen port: free one first.
    let port = testkit::free_port();
    let (local, seen) = c.whoami_from(port).unwrap();
    assert_eq!((local.port(), seen.port), (port, port));
    // Another port for the path check: the connection from `port` may be
    // in TIME_WAIT on this side (the client closed first), and a second
    // connection of the same four-tuple gets EADDRNOTAVAIL.
    let check = c.check_path(testkit::free_port()).unwrap();
    assert!(!check.nat && !check.port_rewritten && check.steering_possible());
    assert_eq!(check.seen_addr, LO);
    c.require_steerable_path(0).unwrap();

    let text = c.metrics().unwrap();
    for needle in [
        "steer_agent_config_version{entry=\"file:",
        "steer_agent_net_rx_softirqs_total{cpu=\"0\"}",
        "steer_agent_softirq_busy_ratio{cpu=\"0\"}",
        "steer_agent_requests_total{path=\"/v1/rss\"} ",
        "steer_agent_rejected_requests_total{reason=\"wrong_token\"} 0",
    ] {
        assert!(text.contains(needle), "no {needle} in\n{text}");
    }
    let addr = agent.local_addr();
    agent.shutdown();
    // Asking the client alone is racy: with no listener, a loopback connect
    // can pick the agent's old port as its own source port and connect to
    // itself (TCP simultaneous open), which is not `Unreachable`.
    assert!(
        testkit::nothing_listens(addr),
        "shutdown closes the listener"
    );
    assert!(c.whoami().is_err(), "nobody answers after shutdown");
}

#[test]
fn raw_json_shapes() {
    let dir = TempDir::new("steer-agent-test");
    let path = dir.join("rss.json");
    write_atomic(&path, &config(RssKey::microsoft(), 2).to_json());
    let (opts, _log) = options(&path);
    let agent = Agent::start(opts).unwrap();
    let get = |path: &str| -> (u16, serde_json::Value) {
        let mut s = TcpStream::connect(agent.local_addr()).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, serde_json::from_str(body).unwrap())
    };
    let (status, v) = get("/v1/rss?addr=127.0.0.1");
    assert_eq!(status, 200);
    for field in [
        "api",
        "dev",
        "addr",
        "addrs",
        "origin",
        "config_version",
        "config",
    ] {
        assert!(v.get(field).is_some(), "no {field}: {v}");
    }
    assert_eq!(v["origin"], "file");
    assert_eq!(v["config"]["hash_function"], "toeplitz");
    let (_, v) = get("/v1/whoami");
    assert_eq!(v["addr"], "127.0.0.1");
    assert!(v["port"].is_u64());
    let (_, v) = get("/v1/load");
    // A rate needs two samples: null before, a number after.
    let rate = &v["cpus"][0]["net_rx_per_sec"];
    if v["interval_ms"] == 0 {
        assert!(rate.is_null(), "{v}");
    } else {
        assert!(rate.is_number(), "{v}");
    }
    let (status, v) = get("/v1/rss");
    assert_eq!((status, v["code"].as_str()), (400, Some("bad_request")));
    let (status, v) = get("/v2/rss?addr=127.0.0.1");
    assert_eq!((status, v["code"].as_str()), (404, Some("not_found")));
    assert_eq!(v["api"], 1);
}

#[test]
fn config_change_is_a_new_version() {
    let dir = TempDir::new("steer-agent-test");
    let path = dir.join("rss.json");
    write_atomic(&path, &config(RssKey::microsoft(), 4).to_json());
    let (opts, log) = options(&path);
    let agent = Agent::start(opts).unwrap();
    let c = client(&agent, None);
    assert_eq!(c.rss(LO).unwrap().config_version, 1);

    let changed = config(RssKey::symmetric(40), 4);
    write_atomic(&path, &changed.to_json());
    let reply = eventually("version 2", || {
        let r = c.rss(LO).unwrap();
        (r.config_version == 2).then_some(r)
    });
    assert_eq!(reply.config, changed);
    assert!(log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("now version 2")));

    // An unreadable file is served as an error, not as the stale config...
    write_atomic(&path, "{ not json");
    let err = eventually("no_config", || match c.rss(LO) {
        Err(e @ ClientError::Agent { status: 503, .. }) => Some(e),
        _ => None,
    });
    assert!(err.to_string().contains("rss.json"), "{err}");
    // ...and the same config coming back is not a new version.
    write_atomic(&path, &changed.to_json());
    let reply = eventually("config back", || c.rss(LO).ok());
    assert_eq!(reply.config_version, 2);
    // Moving a queue's CPU (IRQ affinity) is a change.
    let mut moved = changed.clone();
    moved.queue_cpus[0] = 1;
    write_atomic(&path, &moved.to_json());
    eventually("version 3", || {
        (c.rss(LO).unwrap().config_version == 3).then_some(())
    });
}

#[test]
fn bad_config_file_refuses_start() {
    let dir = TempDir::new("steer-agent-test");
    let path = dir.join("rss.json");
    std::fs::write(&path, "{}").unwrap();
    let (opts, _) = options(&path);
    let err = Agent::start(opts).err().unwrap();
    assert!(matches!(err, AgentError::ConfigFile { .. }), "{err}");
    let (opts, _) = options(&dir.join("missing.json"));
    assert!(matches!(
        Agent::start(opts),
        Err(AgentError::ConfigFile { .. })
    ));
}

#[test]
fn non_loopback_needs_a_token() {
    let dir = TempDir::new("steer-agent-test");
    let path = dir.join("rss.json");
    write_atomic(&path, &config(RssKey::microsoft(), 4).to_json());
    let (mut opts, _) = options(&path);
    opts.listen = "0.0.0.0:0".parse().unwrap();
    let err = Agent::start(opts.clone()).err().unwrap();
    assert!(matches!(err, AgentError::TokenRequired { .. }));
    assert!(!err.is_environment(), "bad input: exit 2");
    assert!(err.to_string().contains("token"), "{err}");
    opts.token = Some(Token::new("t0ken").unwrap());
    let agent = Agent::start(opts).unwrap();
    assert!(agent.local_addr().ip().is_unspecified());
}

#[test]
fn wrong_or_missing_token_is_401_and_not_logged() {
    const TOKEN: &str = "correct-horse-battery-staple";
    const WRONG: &str = "wrong-horse-battery-staple";
    let dir = TempDir::new("steer-agent-test");
    let path = dir.join("rss.json");
    write_atomic(&path, &config(RssKey::microsoft(), 4).to_json());
    let (mut opts, log) = options(&path);
    opts.token = Some(Token::new(TOKEN).unwrap());
    let agent = Agent::start(opts).unwrap();

    let anonymous = client(&agent, None);
    assert!(matches!(
        anonymous.rss(LO),
        Err(ClientError::Unauthorized { .. })
    ));
    assert!(matches!(
        anonymous.metrics(),
        Err(ClientError::Unauthorized { .. })
    ));
    let wrong = client(&agent, Some(WRONG));
    let err = wrong.load().unwrap_err();
    assert!(matches!(err, ClientError::Unauthorized { .. }));
    assert!(!err.to_string().contains(WRONG));
    let right = client(&agent, Some(TOKEN));
    assert_eq!(right.rss(LO).unwrap().config_version, 1);

    let lines = log.lock().unwrap().clone();
    let rejected: Vec<&String> = lines.iter().filter(|l| l.contains("rejected")).collect();
    assert_eq!(rejected.len(), 3, "{lines:?}");
    assert!(rejected[0].contains("127.0.0.1:") && rejected[0].contains("/v1/rss"));
    assert!(rejected[0].contains("missing_token"));
    assert!(rejected[2].contains("wrong_token") && rejected[2].contains("/v1/load"));
    for line in &lines {
        assert!(!line.contains(TOKEN) && !line.contains(WRONG), "{line}");
        assert!(!line.contains("battery"), "{line}");
    }
    let text = right.metrics().unwrap();
    assert!(text.contains("steer_agent_rejected_requests_total{reason=\"missing_token\"} 2"));
    assert!(text.contains("steer_agent_rejected_requests_total{reason=\"wrong_token\"} 1"));
}

/// A fake agent: answers every connection with `answer` (after reading the
/// request head), or with nothing for `None` after `delay`.
fn fake(answer: Option<Vec<u8>>, delay: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                std::thread::sleep(delay);
                if let Some(a) = answer {
                    let _ = s.write_all(&a);
                }
            });
        }
    });
    addr
}

/// `200 OK` with `body` and its length.
fn ok(body: &str) -> Option<Vec<u8>> {
    Some(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

fn fake_client(addr: SocketAddr, timeout: Duration) -> AgentClient {
    AgentClient::new(&format!("http://{addr}"), None, timeout).unwrap()
}

#[test]
fn garbage_answers_are_clear_errors() {
    let t = Duration::from_secs(2);
    let junk = fake(Some(b"SSH-2.0-OpenSSH_9.2\r\n".to_vec()), Duration::ZERO);
    let err = fake_client(junk, t).rss(LO).unwrap_err();
    assert!(matches!(err, ClientError::NotHttp { .. }), "{err}");
    assert!(err.to_string().contains("SSH-2.0"), "{err}");

    let html = fake(ok("<html></html>"), Duration::ZERO);
    let err = fake_client(html, t).load().unwrap_err();
    assert!(matches!(err, ClientError::BadJson { .. }), "{err}");

    let wrong_shape = fake(ok("{\"api\":1,\"cpus\":\"x\"}"), Duration::ZERO);
    let err = fake_client(wrong_shape, t).load().unwrap_err();
    assert!(matches!(err, ClientError::BadJson { .. }), "{err}");

    let closed = fake(Some(Vec::new()), Duration::ZERO);
    let err = fake_client(closed, t).load().unwrap_err();
    assert!(matches!(err, ClientError::NotHttp { .. }), "{err}");
}

#[test]
fn old_api_version_is_a_clear_error() {
    let old = fake(
        ok("{\"api\":0,\"addr\":\"127.0.0.1\",\"port\":1}"),
        Duration::ZERO,
    );
    let err = fake_client(old, Duration::from_secs(2))
        .whoami()
        .unwrap_err();
    assert!(
        matches!(err, ClientError::ApiVersion { ref found, expected: 1, .. } if found == "0"),
        "{err}"
    );
    assert!(err.to_string().contains("API version 0"), "{err}");
}

#[test]
fn slow_agent_times_out() {
    let silent = fake(None, Duration::from_secs(5));
    let c = fake_client(silent, Duration::from_millis(300));
    let started = Instant::now();
    let err = c.rss(LO).unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("300ms"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(4));

    // A server trickling bytes is held to the same deadline.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            for b in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{" {
                if s.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    });
    let err = fake_client(addr, Duration::from_millis(300))
        .load()
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
}

#[test]
fn unreachable_agent() {
    // A socket bound but never listening: connects to it are refused, and
    // because the port stays taken, a connect cannot pick it as its own
    // source port and reach itself (TCP simultaneous open on loopback).
    let held = RefusingPort::new();
    let port = held.port();
    let c = AgentClient::new(
        &format!("http://127.0.0.1:{port}"),
        None,
        Duration::from_secs(1),
    )
    .unwrap();
    let err = c.load().unwrap_err();
    assert!(matches!(err, ClientError::Unreachable { .. }), "{err}");
}

#[test]
fn rewritten_source_port_means_no_steering() {
    // Stands in for a NAT: the agent reports a port other than ours.
    let nat = fake(
        ok("{\"api\":1,\"addr\":\"192.0.2.7\",\"port\":1}"),
        Duration::ZERO,
    );
    let c = fake_client(nat, Duration::from_secs(2));
    let check = c.check_path(0).unwrap();
    assert!(check.nat && check.port_rewritten && !check.steering_possible());
    assert_eq!(
        check.source_for_prediction(),
        "192.0.2.7".parse::<IpAddr>().unwrap()
    );
    let err = c.require_steerable_path(0).unwrap_err();
    assert!(
        matches!(err, ClientError::PortsRewritten { seen_port: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("steering is impossible"), "{err}");
}
