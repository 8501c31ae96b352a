//! `steer bench` as a user runs it: an interrupted run (SIGINT to the
//! child `steer bench run`), a corrupted history, the regression check's
//! exit codes. Test-only cases come from a `--cases` file.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use testkit::TempDir;

const CASES: &str = r#"
[[case]]
name = "first"
command = ["sh", "-c", "echo '{\"v\": 1}'"]
metrics = [{ name = "v", pointer = "/v", unit = "u", better = "higher" }]

[[case]]
name = "stuck"
command = ["sh", "-c", "touch '{root}/stuck.started'; sleep 1000 & echo $! > '{root}/stuck.pid'; wait"]
timeout = 600

[[case]]
name = "never-reached"
command = ["sh", "-c", "echo '{\"v\": 1}'"]
metrics = [{ name = "v", pointer = "/v", unit = "u", better = "higher" }]
"#;

fn steer(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(cargo_bin("steer"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `bench run` of the test cases matching `filter`, into h.sqlite.
fn run_args(filter: &str) -> [&str; 9] {
    [
        "bench",
        "run",
        "--cases",
        "cases.toml",
        "--no-builtin",
        "--filter",
        filter,
        "--db",
        "h.sqlite",
    ]
}

fn write_cases(dir: &Path) {
    std::fs::write(dir.join("cases.toml"), CASES).unwrap();
}

#[test]
fn sigint_stops_the_case_records_norun_and_keeps_the_history() {
    let dir = TempDir::new("steer-bench-test");
    write_cases(dir.path());
    let child = Command::new(cargo_bin("steer"))
        .args(["bench", "run", "--cases", "cases.toml", "--no-builtin"])
        .args(["--db", "h.sqlite"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !dir.path().join("stuck.pid").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "stuck never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("interrupted"), "{stdout}");

    // The case's own child died with its process group.
    let pid = std::fs::read_to_string(dir.path().join("stuck.pid")).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')),
        "sleep survived: {stat}"
    );

    // The history is intact and says what happened.
    let runs = steer(
        dir.path(),
        &["bench", "history", "--db", "h.sqlite", "--json"],
    );
    assert!(runs.status.success());
    let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(runs[0]["status"], "interrupted");
    let check = steer(
        dir.path(),
        &[
            "bench",
            "check",
            "--baseline",
            "none.json",
            "--run",
            "last",
            "--db",
            "h.sqlite",
            "--update",
        ],
    );
    // The interrupted case is NORUN: a baseline takes only PASS, so the
    // update is refused with one line naming it, and writes nothing.
    assert_eq!(check.status.code(), Some(2));
    let err = String::from_utf8_lossy(&check.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("case stuck is NORUN"), "{err}");
    assert!(!dir.path().join("none.json").exists());

    let report = steer(
        dir.path(),
        &["bench", "report", "-o", "report", "--db", "h.sqlite"],
    );
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let html = std::fs::read_to_string(dir.path().join("report/index.html")).unwrap();
    assert!(html.contains("interrupted"));
    assert!(html.contains("data-case=\"stuck\""));
    assert!(html.contains("run interrupted before this case"));
}

#[test]
fn a_corrupted_history_is_a_one_line_error_exit_2_and_untouched() {
    let dir = TempDir::new("steer-bench-test");
    write_cases(dir.path());
    let garbage = b"SQLite format 3\0 but then garbage ".repeat(200);
    std::fs::write(dir.path().join("h.sqlite"), &garbage).unwrap();
    for args in [
        &run_args("first")[..],
        &["bench", "report", "-o", "r", "--db", "h.sqlite"][..],
        &["bench", "compare", "--db", "h.sqlite"][..],
    ] {
        let out = steer(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains("h.sqlite") && err.contains("untouched"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(dir.path().join("h.sqlite")).unwrap(), garbage);
}

#[test]
fn check_exits_1_on_a_state_regression_only() {
    let dir = TempDir::new("steer-bench-test");
    write_cases(dir.path());
    let run = steer(dir.path(), &run_args("first,never"));
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let check = |baseline: &str| {
        std::fs::write(dir.path().join("b.json"), baseline).unwrap();
        steer(
            dir.path(),
            &["bench", "check", "--baseline", "b.json", "--db", "h.sqlite"],
        )
        .status
        .code()
    };
    assert_eq!(
        check(r#"{"cases": {"first": "PASS", "never-reached": "PASS"}}"#),
        Some(0)
    );
    // A case the run's filter does not select is not judged.
    assert_eq!(
        check(r#"{"cases": {"first": "PASS", "stuck": "PASS"}}"#),
        Some(0)
    );
    // A baseline holds only PASS, or a case excused with its reason.
    assert_eq!(check(r#"{"cases": {"first": "NORUN"}}"#), Some(2));
    assert_eq!(
        check(r#"{"cases": {"first": "NORUN"}, "excused": {"first": "why"}}"#),
        Some(0)
    );
    // Make `first` fail: same id, a check that is false now.
    std::fs::write(
        dir.path().join("cases.toml"),
        CASES.replacen("unit = \"u\", better = \"higher\" }]", "unit = \"u\", better = \"higher\" }]\nchecks = [{ pointer = \"/v\", op = \">\", value = 5 }]", 1),
    )
    .unwrap();
    let run = steer(dir.path(), &run_args("first"));
    assert!(run.status.success());
    assert_eq!(check(r#"{"cases": {"first": "PASS"}}"#), Some(1));
    let cmp = steer(
        dir.path(),
        &[
            "bench", "compare", "prev", "last", "--db", "h.sqlite", "--json",
        ],
    );
    let cmp: serde_json::Value = serde_json::from_slice(&cmp.stdout).unwrap();
    assert_eq!(cmp["cases"][0]["verdict"], "regression");
    // A bad baseline file is bad input, and so is a missing one.
    assert_eq!(check("{not json"), Some(2));
    let missing = steer(
        dir.path(),
        &[
            "bench",
            "check",
            "--baseline",
            "none.json",
            "--db",
            "h.sqlite",
        ],
    );
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("none.json: no such file"), "{err}");
}

#[test]
fn bad_repetitions_and_timeouts_are_usage_errors_exit_2() {
    let dir = TempDir::new("steer-bench-test");
    write_cases(dir.path());
    for bad in [
        &["--repetitions", "0"][..],
        &["--repetitions", "-1"],
        &["--timeout", "-1"],
        &["--timeout", "0"],
        &["--timeout", "nan"],
        &["--timeout", "inf"],
    ] {
        let args = [&run_args("first")[..], bad].concat();
        let out = steer(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        // Refused by the argument parser, naming the flag, before any run.
        assert!(err.starts_with("error: invalid value"), "{bad:?}: {err}");
        assert!(err.contains(bad[0]), "{bad:?}: {err}");
    }
    assert!(!dir.path().join("h.sqlite").exists());
}
