//! `steer ports` through the real binary: odds, plans (every planned port
//! checked against `steer rss where`'s model), bad input -> one line, exit 2,
//! and the allocator with two client processes racing.

use std::collections::HashSet;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::*;

fn steer() -> Command {
    Command::cargo_bin("steer").unwrap()
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
    let out = steer()
        .args([
            "ports",
            "plan",
            "--to",
            "10.77.1.2:5201",
            "--from",
            "10.77.1.1",
            "--flows",
            "8",
            "--key",
            "microsoft",
            "--queues",
            "8",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
                "--key",
                "microsoft",
                "--queues",
                "8",
                "--json",
            ])
            .output()
            .unwrap();
        let w: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(w["queue"], e["queue"]);
        assert_eq!(w["cpu"], e["cpu"]);
    }
}

#[test]
fn plan_more_flows_than_queues_says_max_per_core() {
    steer()
        .args([
            "ports",
            "plan",
            "--to",
            "10.77.1.2:5201",
            "--from",
            "10.77.1.1",
            "--flows",
            "10",
            "--key",
            "microsoft",
            "--queues",
            "4",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("at most 3 per CPU"));
}

#[test]
fn plan_bad_input() {
    let base = [
        "ports",
        "plan",
        "--to",
        "10.77.1.2:5201",
        "--from",
        "10.77.1.1",
    ];
    // No receiver config: the Linux default key is unknowable.
    steer()
        .args(base)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("random per-boot key"));
    steer()
        .args(base)
        .args(["--key", "default", "--queues", "4"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("real key"));
    steer()
        .args(base)
        .args(["--config", "/nonexistent/rcv.json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read"));
    steer()
        .args(base)
        .args(["--key", "microsoft", "--queues", "4", "--flows", "9"])
        .args(["--port-range", "40000-40007"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("40000-40007 has"));
    steer()
        .args(base)
        .args(["--key", "microsoft", "--queues", "4", "--proto", "udp"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot steer"));
    steer()
        .args(base)
        .args(["--key", "@/nonexistent/key"])
        .assert()
        .code(2);
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn allocator_serves_two_racing_client_processes() {
    let dir = std::env::temp_dir().join(format!("steer-ports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("alloc.sock");
    let cfg = dir.join("rcv.json");
    let out = steer()
        .args(["rss", "config", "--key", "microsoft", "--queues", "4"])
        .output()
        .unwrap();
    std::fs::write(&cfg, &out.stdout).unwrap();
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
    // A second allocator on the same socket is refused.
    steer()
        .args(["ports", "serve"])
        .env("STEER_ALLOC_SOCK", &sock)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already"));
    let _ = std::fs::remove_dir_all(&dir);
}
