//! `steer exec` and `steer attach` through the real binary: bad input exits
//! 2 with one line, missing privilege exits 3, and as root the cgroup binder
//! is attached, planned, reported and detached, and `exec --bpf` passes the
//! command's exit status through.

use std::path::PathBuf;

use assert_cmd::Command;

fn steer() -> Command {
    Command::cargo_bin("steer").unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// A receiver config file (2 queues, Microsoft key) in a temp dir.
fn config_file() -> PathBuf {
    let dir = std::env::temp_dir().join(lab::unique_name("steer-cli-exec-"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rcv.json");
    let out = steer()
        .args(["rss", "config", "--key", "microsoft", "--queues", "2"])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&path, out.stdout).unwrap();
    path
}

/// Asserts exit `code` and exactly one line on stderr.
fn one_line(cmd: &mut Command, code: i32, needle: &str) {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
}

#[test]
fn bpf_without_to_is_bad_input() {
    one_line(
        steer().args([
            "exec",
            "--bpf",
            "--key",
            "microsoft",
            "--queues",
            "2",
            "--",
            "true",
        ]),
        2,
        "--bpf needs --to",
    );
}

#[test]
fn bpf_without_receiver_is_bad_input() {
    one_line(
        steer().args(["exec", "--bpf", "--to", "127.0.0.1:5201", "--", "true"]),
        2,
        "receiver's RSS config",
    );
}

#[test]
fn bad_config_file_is_bad_input() {
    let dir = std::env::temp_dir().join(lab::unique_name("steer-cli-exec-bad-"));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    for (args, tail) in [
        (
            vec!["exec", "--bpf", "--to", "127.0.0.1:5201", "--config"],
            vec!["--", "true"],
        ),
        (
            vec![
                "attach",
                "--cgroup",
                "/sys/fs/cgroup",
                "--to",
                "127.0.0.1:5201",
                "--config",
            ],
            vec![],
        ),
    ] {
        one_line(steer().args(&args).arg(&bad).args(&tail), 2, "bad.json");
        one_line(
            steer().args(&args).arg(dir.join("absent.json")).args(&tail),
            2,
            "cannot read",
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nonexistent_cgroup_is_bad_input() {
    let cfg = config_file();
    one_line(
        steer()
            .args(["attach", "--cgroup", "/sys/fs/cgroup/steer-no-such-cgroup"])
            .args(["--to", "127.0.0.1:5201", "--config"])
            .arg(&cfg),
        2,
        "no such directory",
    );
    one_line(
        steer().args(["attach", "--cgroup", "/nonexistent/cg", "--detach"]),
        2,
        "no such directory",
    );
}

/// Runs steer without privilege: directly when not root, else as nobody
/// (setpriv), or None when that is impossible here.
fn unprivileged(args: &[&str]) -> Option<std::process::Output> {
    let bin = assert_cmd::cargo::cargo_bin("steer");
    if !is_root() {
        return Some(std::process::Command::new(bin).args(args).output().unwrap());
    }
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .args(args)
        .output()
        .ok()?;
    // nobody cannot run the binary (private target dir): no verdict.
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("Permission denied") && !err.contains("steer:") {
        return None;
    }
    Some(out)
}

#[test]
fn missing_privilege_exits_3() {
    let cfg = config_file();
    let cfg = cfg.to_str().unwrap();
    for args in [
        vec![
            "exec",
            "--bpf",
            "--to",
            "127.0.0.1:5201",
            "--from",
            "127.0.0.1",
            "--config",
            cfg,
            "--",
            "true",
        ],
        vec![
            "attach",
            "--cgroup",
            "/sys/fs/cgroup",
            "--to",
            "127.0.0.1:5201",
            "--from",
            "127.0.0.1",
            "--config",
            cfg,
        ],
    ] {
        let Some(out) = unprivileged(&args) else {
            eprintln!("skipped: needs root to drop privilege (setpriv) or a non-root user");
            return;
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("root"), "{err}");
    }
}

fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })
}

/// Removes the test's cgroup (and detaches, if a step failed) on drop.
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = steer()
            .args(["attach", "--detach", "--cgroup"])
            .arg(&self.0)
            .output();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn root(what: &str) -> Option<PathBuf> {
    if !is_root() {
        eprintln!("skipped: needs root ({what})");
        return None;
    }
    let Some(root) = cgroup2_root() else {
        eprintln!("skipped: needs a cgroup v2 hierarchy ({what})");
        return None;
    };
    Some(root)
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn attach_plans_reports_and_detaches() {
    let Some(root) = root("cgroup BPF programs") else {
        return;
    };
    let cg = Cgroup(root.join(lab::unique_name("steer-cli-attach-")));
    std::fs::create_dir(&cg.0).unwrap();
    let cfg = config_file();
    let out = steer()
        .args(["attach", "--json", "--cgroup"])
        .arg(&cg.0)
        .args([
            "--to",
            "127.0.0.1:5201",
            "--to",
            "127.0.0.1:5202",
            "--from",
            "127.0.0.1",
        ])
        .args(["--ports", "8", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plans: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let plans = plans.as_array().unwrap();
    assert_eq!(plans.len(), 2);
    for p in plans {
        let queues: Vec<u64> = p["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["queue"].as_u64().unwrap())
            .collect();
        // Two queues on two CPUs, slots alternate; the same sequence for
        // both ports of the host (one slot counter per host).
        assert_eq!(queues, [0, 1, 0, 1, 0, 1, 0, 1]);
    }
    let out = steer()
        .args(["attach", "--json", "--cgroup"])
        .arg(&cg.0)
        .output()
        .unwrap();
    assert!(out.status.success());
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["destinations"], 2);
    steer()
        .args(["attach", "--detach", "--cgroup"])
        .arg(&cg.0)
        .assert()
        .success();
    one_line(
        steer().args(["attach", "--detach", "--cgroup"]).arg(&cg.0),
        2,
        "not attached",
    );
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn exec_bpf_runs_the_command_and_passes_its_status() {
    if root("cgroup BPF programs").is_none() {
        return;
    }
    let cfg = config_file();
    let run = |script: &str| {
        steer()
            .args([
                "exec",
                "--bpf",
                "--to",
                "127.0.0.1:5201",
                "--from",
                "127.0.0.1",
                "--config",
            ])
            .arg(&cfg)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap()
    };
    assert_eq!(run("exit 0").status.code(), Some(0));
    assert_eq!(run("exit 7").status.code(), Some(7));
    // The command runs inside a fresh cgroup.
    let out = run("cat /proc/self/cgroup");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("steer-"),
        "{out:?}"
    );
}
