//! Test helpers: a minimal allocator (the protocol of docs/binders.md, the
//! server side only as far as the tests need it) and a "probe": this test
//! binary re-executed as a child process (with LD_PRELOAD, in a cgroup or a
//! namespace) to run one connect scenario and print its result.
#![allow(dead_code)]

mod probe;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::TempDir;

/// What the fake allocator answers.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Ports handed out in turn (one lease per request, cycling).
    Ports(Vec<u16>),
    /// Per remote port, the plan's ports in slot order; one slot counter
    /// shared by all remote ports (like the allocator's per-host spread).
    Plans(Vec<(u16, Vec<u16>)>),
    Error,
    Garbage,
    OldVersion,
    /// Answers after this long (longer than the shim waits).
    Slow(Duration),
    /// Closes without answering.
    Hangup,
}

pub struct Allocator {
    pub path: PathBuf,
    pub requests: Arc<Mutex<Vec<serde_json::Value>>>,
    answer: Arc<Mutex<Answer>>,
    /// Holds the socket; removed (socket and all) when the allocator is dropped.
    _dir: TempDir,
}

impl Allocator {
    pub fn start(answer: Answer) -> Allocator {
        let dir = TempDir::new("binder-test");
        let path = dir.join("alloc.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(Mutex::new(answer));
        let (r, a) = (requests.clone(), answer.clone());
        std::thread::spawn(move || {
            let mut next = 0usize;
            let mut lease = 0u64;
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut line = String::new();
                if BufReader::new(&conn).read_line(&mut line).is_err() {
                    continue;
                }
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    r.lock().unwrap().push(v);
                }
                let answer = a.lock().unwrap().clone();
                // A batch request ("count", the shim's spares) gets the
                // batch form: the next `count` ports of the list.
                let count = r.lock().unwrap().last().and_then(|v| v["count"].as_u64());
                let mut grant = |ports: &[u16]| match count {
                    None => {
                        let port = ports[next % ports.len()];
                        next += 1;
                        lease += 1;
                        format!(
                            "{{\"v\":1,\"port\":{port},\"queue\":0,\"cpu\":0,\"lease\":{lease}}}\n"
                        )
                    }
                    Some(n) => {
                        let leases: Vec<String> = (0..n)
                            .map(|_| {
                                let port = ports[next % ports.len()];
                                next += 1;
                                lease += 1;
                                format!(
                                    "{{\"port\":{port},\"queue\":0,\"cpu\":0,\"lease\":{lease}}}"
                                )
                            })
                            .collect();
                        format!("{{\"v\":1,\"leases\":[{}]}}\n", leases.join(","))
                    }
                };
                let reply = match answer {
                    Answer::Ports(ports) => grant(&ports),
                    Answer::Plans(plans) => {
                        let want = r
                            .lock()
                            .unwrap()
                            .last()
                            .and_then(|v| v["remote_port"].as_u64())
                            .unwrap_or(0);
                        match plans.iter().find(|(p, _)| u64::from(*p) == want) {
                            Some((_, ports)) => grant(ports),
                            None => "{\"v\":1,\"error\":\"no plan\"}\n".to_string(),
                        }
                    }
                    Answer::Error => "{\"v\":1,\"error\":\"no port\"}\n".to_string(),
                    Answer::Garbage => "\u{1}\u{2}not json at all\n".to_string(),
                    Answer::OldVersion => "{\"v\":0,\"port\":45000}\n".to_string(),
                    Answer::Slow(d) => {
                        std::thread::sleep(d);
                        "{\"v\":1,\"port\":45000,\"queue\":0,\"cpu\":0,\"lease\":1}\n".to_string()
                    }
                    Answer::Hangup => continue,
                };
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        Allocator {
            path,
            requests,
            answer,
            _dir: dir,
        }
    }

    pub fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    pub fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// The body of each test binary's `probe` test. Re-executed by
/// [`probe_command`] (BINDER_PROBE set), it is the child: runs the scenario
/// and prints its result. Run as a plain test, it checks the probe itself:
/// a child with no shim and no cgroup connects to a loopback listener and
/// reports the kernel's own result (connected, from a port of its own).
pub fn probe_child() {
    let Ok(scenario) = std::env::var("BINDER_PROBE") else {
        let target = listener("127.0.0.1:0");
        let r = probe_result(
            &probe_command("connect", &[target.to_string()])
                .output()
                .unwrap(),
        );
        assert_eq!(r["r"], 0, "{r}");
        assert_eq!(
            r["errno"], 4242,
            "a successful connect leaves errno alone: {r}"
        );
        let port = r["local_port"].as_u64().expect("a local port");
        assert!(port != 0 && port != u64::from(target.port()), "{r}");
        return;
    };
    let args: Vec<String> = std::env::var("BINDER_PROBE_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    println!("PROBE {}", probe::run(&scenario, &args));
}

/// A command that re-runs this test binary's `probe` test with `scenario`
/// and its arguments in the environment.
pub fn probe_command(scenario: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "probe", "--nocapture", "--test-threads=1", "-q"])
        .env("BINDER_PROBE", scenario)
        .env("BINDER_PROBE_ARGS", args.join(" "))
        .env_remove("LD_PRELOAD");
    cmd
}

/// The probe's result line (`PROBE {json}`) from a finished child.
pub fn probe_result(out: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("PROBE "))
        .unwrap_or_else(|| {
            panic!(
                "probe printed no result; stdout: {stdout}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

/// A listener on `addr` that accepts and keeps every connection.
pub fn listener(addr: &str) -> SocketAddr {
    let l = TcpListener::bind(addr).unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        for c in l.incoming().flatten() {
            keep.push(c);
        }
    });
    a
}
