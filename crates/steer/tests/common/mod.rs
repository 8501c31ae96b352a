//! Helpers of the `steer` binary's tests (each test file is its own crate and
//! uses some of them).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Output};

use assert_cmd::Command;

/// The `steer` binary under test.
pub fn steer() -> Command {
    Command::cargo_bin("steer").unwrap()
}

/// Asserts success (else shows stderr) and parses stdout as JSON.
pub fn success_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Asserts exit `code` and exactly one line on stderr, containing `needle`.
pub fn fails_with_one_line(out: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
}

/// `steer rss config --key microsoft --queues N`: a receiver config (JSON).
pub fn microsoft_config(queues: u32) -> Vec<u8> {
    let out = steer()
        .args(["rss", "config", "--key", "microsoft", "--queues"])
        .arg(queues.to_string())
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

/// A long-running `steer` (an allocator, an agent), killed and reaped when
/// dropped, so a failing test leaves no process behind.
pub struct Serve(pub Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where the cgroup v2 hierarchy is mounted, from /proc/self/mounts.
pub fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })
}

/// A test's cgroup: detaches the binder (if a step failed) and removes the
/// directory on drop.
pub struct Cgroup(pub PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = steer()
            .args(["attach", "--detach", "--cgroup"])
            .arg(&self.0)
            .output();
        let _ = std::fs::remove_dir(&self.0);
    }
}
