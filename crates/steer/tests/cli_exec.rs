//! `steer exec` and `steer attach` through the real binary: bad input exits
//! 2 with one line, missing privilege exits 3, and as root the cgroup binder
//! is attached, planned, reported and detached, and `exec --bpf` and `lab
//! exec` pass the command's exit status through.

mod common;

use std::path::PathBuf;

use assert_cmd::Command;
use common::{cgroup2_root, fails_with_one_line, microsoft_config, steer, success_json, Cgroup};
use testkit::TempDir;

testkit::strict_mode_guard!();

/// To 127.0.0.1:5201 from 127.0.0.1, the config file next.
const TO_FROM_CONFIG: [&str; 5] = ["--to", "127.0.0.1:5201", "--from", "127.0.0.1", "--config"];

/// A receiver config file (2 queues, Microsoft key) in a temp dir (removed
/// with the returned guard).
fn config_file() -> (TempDir, PathBuf) {
    let dir = TempDir::new("steer-cli-exec");
    let path = dir.join("rcv.json");
    std::fs::write(&path, microsoft_config(2)).unwrap();
    (dir, path)
}

/// Runs `cmd`: exit `code` and exactly one line on stderr.
fn one_line(cmd: &mut Command, code: i32, needle: &str) {
    fails_with_one_line(&cmd.output().unwrap(), code, needle);
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

/// The LD_PRELOAD way takes its ports from the allocator: plan flags
/// without `--bpf` would be ignored, so they are refused before the
/// command runs.
#[test]
fn plan_flags_without_bpf_are_refused() {
    for flags in [
        &["--to", "127.0.0.1:5201"][..],
        &["--key", "microsoft", "--queues", "2"],
        &["--from", "127.0.0.1"],
        &["--ports", "8"],
    ] {
        let mut cmd = steer();
        cmd.arg("exec").args(flags).args(["--", "true"]);
        one_line(&mut cmd, 2, "need --bpf");
    }
}

#[test]
fn bad_config_file_is_bad_input() {
    let dir = TempDir::new("steer-cli-exec-bad");
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
}

#[test]
fn nonexistent_cgroup_is_bad_input() {
    let (_dir, cfg) = config_file();
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
/// (setpriv). When that is impossible here the test fails and says why: it
/// cannot run, which is no pass.
fn unprivileged(args: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("steer");
    if !testkit::is_root() {
        return std::process::Command::new(bin).args(args).output().unwrap();
    }
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("as root this test drops privilege with setpriv (util-linux): {e}; install it")
        });
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("steer:") || !err.contains("Permission denied"),
        "nobody (uid 65534) cannot run {}: {err}; make the directories down to it \
         readable by others (chmod o+rx), or run this test as a non-root user",
        bin.display()
    );
    out
}

#[test]
fn missing_privilege_exits_3() {
    let (_dir, cfg) = config_file();
    let cfg = cfg.to_str().unwrap();
    for args in [
        [
            &["exec", "--bpf"][..],
            &TO_FROM_CONFIG,
            &[cfg, "--", "true"],
        ]
        .concat(),
        [
            &["attach", "--cgroup", "/sys/fs/cgroup"][..],
            &TO_FROM_CONFIG,
            &[cfg],
        ]
        .concat(),
    ] {
        let out = unprivileged(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("root"), "{err}");
    }
}

/// The cgroup v2 root; fails the test (one line, what is missing) when not
/// root or when there is no cgroup v2 hierarchy.
fn root(what: &str) -> PathBuf {
    testkit::require_root(what);
    cgroup2_root().unwrap_or_else(|| {
        testkit::missing(&format!(
            "a cgroup v2 hierarchy ({what}): mount one, e.g. `mount -t cgroup2 none /sys/fs/cgroup`"
        ))
    })
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn attach_plans_reports_and_detaches() {
    let root = root("cgroup BPF programs");
    let cg = Cgroup(root.join(lab::unique_name("steer-cli-attach-")));
    std::fs::create_dir(&cg.0).unwrap();
    let (_dir, cfg) = config_file();
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
    let plans = success_json(&out);
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
    root("cgroup BPF programs");
    let (_dir, cfg) = config_file();
    let run = |script: &str| {
        steer()
            .args(["exec", "--bpf"])
            .args(TO_FROM_CONFIG)
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

#[test]
fn exec_in_a_namespace_that_does_not_exist_is_bad_input() {
    one_line(
        steer().args(["exec", "--netns", "steer-no-such-netns", "--", "true"]),
        2,
        "no network namespace named steer-no-such-netns",
    );
}

#[test]
fn rss_show_in_a_namespace_that_does_not_exist_is_bad_input() {
    one_line(
        steer().args([
            "rss",
            "show",
            "--dev",
            "lo",
            "--netns",
            "steer-no-such-netns",
        ]),
        2,
        "no network namespace named 'steer-no-such-netns'",
    );
}

/// `steer lab exec` runs the program in the host's namespace as system(3)
/// would: its exit status is steer's, and SIGTERM to steer reaches the
/// program, so stopping steer leaves no program behind.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn lab_exec_passes_the_status_and_sigterm_on() {
    testkit::require_root("network namespaces");
    let mut spec = lab::LabSpec::new(&lab::unique_name("lx"));
    spec.software_rss = false;
    let lab = lab::Lab::up(&spec).unwrap().teardown_on_drop();
    let exec = |program: &[&str]| {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("steer"));
        cmd.args(["lab", "exec", "rcv", "--lab", lab.name(), "--"])
            .args(program);
        cmd
    };
    let status = exec(&["sh", "-c", "exit 7"]).status().unwrap();
    assert_eq!(status.code(), Some(7));
    let mut steer = exec(&["sleep", "300"]).spawn().unwrap();
    let sleep = testkit::child_of(steer.id(), Some("sleep"));
    // SAFETY: a signal to a child process of ours.
    unsafe { libc::kill(steer.id() as i32, libc::SIGTERM) };
    let status = steer.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert!(
        !std::path::Path::new(&format!("/proc/{sleep}")).exists(),
        "the program outlived steer"
    );
}
