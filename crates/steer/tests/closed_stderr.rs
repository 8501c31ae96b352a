//! A server whose stderr reader has gone keeps serving: `steer ports
//! serve` started with its stderr pipe already closed still answers a
//! lease (before, the note it writes there panicked on EPIPE and the
//! allocator died, which a test that closed the pipe after the JSON hit
//! under load).

mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};

use common::{microsoft_config, steer, Serve};
use testkit::TempDir;

#[test]
fn an_allocator_with_a_closed_stderr_keeps_serving() {
    let dir = TempDir::new("steer-closed-stderr");
    let cfg = dir.join("rcv.json");
    std::fs::write(&cfg, microsoft_config(4)).unwrap();
    let sock = dir.join("alloc.sock");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("steer"))
        .args([
            "ports",
            "serve",
            "--json",
            "--grace-ms",
            "60000",
            "--for",
            "10.77.1.2",
        ])
        .arg("--config")
        .arg(&cfg)
        .arg("--socket")
        .arg(&sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the server writes its note.
    drop(child.stderr.take());
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let server = Serve(child);
    let mut line = String::new();
    while !line.contains('}') {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "no JSON from the allocator"
        );
    }
    let out = steer()
        .args([
            "ports",
            "lease",
            "--json",
            "--to",
            "10.77.1.2:5201",
            "--from",
            "10.77.1.1",
        ])
        .arg("--socket")
        .arg(&sock)
        .output()
        .unwrap();
    let v = common::success_json(&out);
    assert!(v["port"].is_number(), "{v}");
    drop(server);
}
