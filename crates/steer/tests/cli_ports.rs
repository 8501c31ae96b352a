//! `steer ports` through the real binary: odds, plans (every planned port
//! checked against `steer rss where`'s model), bad input -> one line, exit 2,
//! and the allocator with two client processes racing.

use std::collections::HashSet;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{microsoft_config, steer, success_json, Serve};
use predicates::prelude::*;
use testkit::{RefusingPort, TempDir};

/// `steer ports plan --to 10.77.1.2:5201 --from 10.77.1.1`, more to come.
fn plan() -> assert_cmd::Command {
    let mut cmd = steer();
    cmd.args([
        "ports",
        "plan",
        "--to",
        "10.77.1.2:5201",
        "--from",
        "10.77.1.1",
    ]);
    cmd
}

#[test]
fn odds_sixteen_on_thirty_two() {
    steer()
        .args([
            "ports", "odds", "--flows", "16", "--cores", "32", "--trials", "20000",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("1.04% exact"))
        .stdout(predicate::str::contains("monte carlo"));
    let out = steer()
        .args(["ports", "odds", "--trials", "5000", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!((v["collision_free"].as_f64().unwrap() - 0.0104).abs() < 5e-5);
    let rows = v["distribution"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    let total: f64 = rows.iter().map(|r| r["exact"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-12);
}

#[test]
fn odds_bad_input_exits_2() {
    steer()
        .args(["ports", "odds", "--flows", "0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("flows must be"));
}

#[test]
fn plan_lands_where_rss_where_says() {
    // One receiver for both, JSON out.
    let receiver = ["--key", "microsoft", "--queues", "8", "--json"];
    let out = plan()
        .args(["--flows", "8"])
        .args(receiver)
        .output()
        .unwrap();
    let v = success_json(&out);
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 8);
    let cpus: HashSet<u64> = entries.iter().map(|e| e["cpu"].as_u64().unwrap()).collect();
    assert_eq!(cpus.len(), 8);
    for e in entries {
        let port = e["port"].as_u64().unwrap();
        let out = steer()
            .args([
                "rss",
                "where",
                &format!("10.77.1.1:{port}"),
                "10.77.1.2:5201",
            ])
            .args(receiver)
            .output()
            .unwrap();
        let w: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(w["queue"], e["queue"]);
        assert_eq!(w["cpu"], e["cpu"]);
    }
}

#[test]
fn plan_more_flows_than_queues_says_max_per_core() {
    plan()
        .args(["--flows", "10", "--key", "microsoft", "--queues", "4"])
        .assert()
        .success()
        .stdout(predicate::str::contains("at most 3 per CPU"));
}

#[test]
fn plan_bad_input() {
    let refused = |args: &[&str], needle: &str| {
        plan()
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(needle));
    };
    // No receiver config: the Linux default key is unknowable.
    refused(&[], "random per-boot key");
    refused(&["--key", "default", "--queues", "4"], "real key");
    refused(&["--config", "/nonexistent/rcv.json"], "cannot read");
    refused(
        &[
            "--key",
            "microsoft",
            "--queues",
            "4",
            "--flows",
            "9",
            "--port-range",
            "40000-40007",
        ],
        "40000-40007 has",
    );
    refused(
        &["--key", "microsoft", "--queues", "4", "--proto", "udp"],
        "cannot steer",
    );
    plan().args(["--key", "@/nonexistent/key"]).assert().code(2);
}

#[test]
fn allocator_serves_two_racing_client_processes() {
    let dir = TempDir::new("steer-ports");
    let sock = dir.join("alloc.sock");
    let cfg = dir.join("rcv.json");
    std::fs::write(&cfg, microsoft_config(4)).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("steer");
    let _server = Serve(
        std::process::Command::new(&bin)
            .args([
                "ports",
                "serve",
                "--for",
                "10.77.1.2",
                "--grace-ms",
                "60000",
            ])
            .arg("--config")
            .arg(&cfg)
            .env("STEER_ALLOC_SOCK", &sock)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "allocator did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let clients: Vec<Child> = (0..4)
        .map(|_| {
            std::process::Command::new(&bin)
                .args([
                    "ports",
                    "lease",
                    "--to",
                    "10.77.1.2:5201",
                    "--from",
                    "10.77.1.1",
                    "--json",
                ])
                .env("STEER_ALLOC_SOCK", &sock)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let leases: Vec<serde_json::Value> = clients
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    let cpus: HashSet<u64> = leases.iter().map(|l| l["cpu"].as_u64().unwrap()).collect();
    let ports: HashSet<u64> = leases.iter().map(|l| l["port"].as_u64().unwrap()).collect();
    assert_eq!((cpus.len(), ports.len()), (4, 4), "{leases:?}");
    // A remote without a config: a clear refusal, exit 2.
    steer()
        .args([
            "ports",
            "lease",
            "--to",
            "10.99.0.1:80",
            "--from",
            "10.77.1.1",
        ])
        .env("STEER_ALLOC_SOCK", &sock)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no RSS config"));
    steer()
        .args(["ports", "status", "--json"])
        .env("STEER_ALLOC_SOCK", &sock)
        .assert()
        .success()
        .stdout(predicate::str::contains("\"lease\": 4"));
    // A second allocator on the same socket cannot start: exit 1.
    steer()
        .args(["ports", "serve"])
        .env("STEER_ALLOC_SOCK", &sock)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("already"));
}

/// The allocator's socket is missing: one line naming the socket, with the
/// cause once. The connect error used to show its io error in its own
/// message and again as its source, so the one-line report of the error
/// chain printed the cause twice.
#[test]
fn a_missing_allocator_socket_is_reported_with_its_cause_once() {
    let dir = TempDir::new("steer-ports-missing");
    let sock = dir.join("missing.sock");
    let sock = sock.to_str().unwrap();
    for args in [
        &["ports", "status", "--socket", sock][..],
        &["ports", "lease", "--to", "10.0.0.2:5201", "--socket", sock][..],
    ] {
        let out = steer().args(args).output().unwrap();
        common::fails_with_one_line(&out, 1, "cannot reach the allocator at ");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    }
}

/// How the fake agent of [`fake_agent`] behaves.
#[derive(Clone, Copy)]
enum Agent {
    /// Answers like a real agent (2 queues, CPU 0 busy).
    Good,
    /// Accepts and never answers.
    Slow,
    /// Answers bytes that are not HTTP.
    Garbage,
    /// Answers API version 0.
    Old,
    /// Reports a different source port than the one we sent from (NAT).
    Rewrites,
}

/// A one-thread HTTP server on loopback; returns its URL.
fn fake_agent(mode: Agent) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = String::from_utf8(microsoft_config(2)).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let peer = conn.peer_addr().unwrap();
            let mut request = String::new();
            let _ = BufReader::new(&conn).read_line(&mut request);
            let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
            let body = match mode {
                Agent::Slow => {
                    held.push(conn);
                    continue;
                }
                Agent::Garbage => {
                    let _ = conn.write_all(b"\x01\x02 hello, not http\r\n\r\n");
                    continue;
                }
                Agent::Old => r#"{"api":0,"addr":"127.0.0.1","port":1}"#.to_string(),
                _ if path.starts_with("/v1/whoami") => {
                    let port = match mode {
                        Agent::Rewrites => peer.port().wrapping_add(1000),
                        _ => peer.port(),
                    };
                    format!(r#"{{"api":1,"addr":"{}","port":{port}}}"#, peer.ip())
                }
                _ if path.starts_with("/v1/rss") => format!(
                    r#"{{"api":1,"dev":null,"addr":"10.77.1.2","addrs":["10.77.1.2"],"origin":"file","config_version":3,"config":{}}}"#,
                    config.trim()
                ),
                _ if path.starts_with("/v1/load") => {
                    let cpu = |c: u32, busy: f64| {
                        format!(
                            r#"{{"cpu":{c},"net_rx_per_sec":0.0,"softirq_busy":{busy},"net_rx_total":0,"softirq_seconds_total":0.0}}"#
                        )
                    };
                    format!(
                        r#"{{"api":1,"interval_ms":1000,"sampled_at_ms":1,"cpus":[{},{}],"devices":[]}}"#,
                        cpu(0, 0.9),
                        cpu(1, 0.1)
                    )
                }
                _ => r#"{"api":1,"code":"not_found","error":"no"}"#.to_string(),
            };
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn plan_with_agent(url: &str) -> std::process::Output {
    plan()
        .args(["--flows", "1", "--json", "--agent", url])
        .output()
        .unwrap()
}

/// Exit 1 (the operation failed: the agent or the path to it did not do
/// its part) and exactly one line on stderr containing `needle`.
fn fails_with_one_line(out: &std::process::Output, needle: &str) {
    common::fails_with_one_line(out, 1, needle);
}

#[test]
fn plan_with_an_agent_uses_its_config_and_load() {
    let v = success_json(&plan_with_agent(&fake_agent(Agent::Good)));
    // One flow: the least-loaded CPU (1) first.
    assert_eq!(v["entries"][0]["cpu"], 1, "{v}");
    assert!(
        v["receiver"].as_str().unwrap().contains("config version 3"),
        "{v}"
    );
}

#[test]
fn plan_with_a_faulty_agent_fails_with_one_line() {
    // Unreachable: the port is bound but nothing listens, so connects are
    // refused and none can pick it as its own source port (a loopback
    // self-connect would answer instead of refusing).
    let held = RefusingPort::new();
    fails_with_one_line(
        &plan_with_agent(&format!("http://127.0.0.1:{}", held.port())),
        "unreachable",
    );
    fails_with_one_line(
        &plan_with_agent(&fake_agent(Agent::Slow)),
        "did not answer within",
    );
    fails_with_one_line(&plan_with_agent(&fake_agent(Agent::Garbage)), "HTTP");
    fails_with_one_line(&plan_with_agent(&fake_agent(Agent::Old)), "API version 0");
    fails_with_one_line(
        &plan_with_agent(&fake_agent(Agent::Rewrites)),
        "steering is impossible on the path",
    );
    // A URL that is not an agent's: bad input.
    common::fails_with_one_line(&plan_with_agent("ftp://x"), 2, "only http://");
}
