//! The runner and the history on test-only cases (tests/cases/bad_input.toml):
//! one case per state, a case that never exits (its process group is
//! killed), garbage output, and a corrupted database left untouched.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bench::run::{run_matrix, RunRequest, Selection};
use bench::{load_matrix, BenchError, History, State};

fn cases_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/bad_input.toml")
}

fn request(root: &Path, quick: bool, repetitions: u32) -> RunRequest {
    RunRequest {
        quick,
        filter: None,
        repetitions,
        timeout: None,
        steer: PathBuf::from("/bin/false"),
        root: root.to_path_buf(),
    }
}

/// The test cases, or only the one named `id`.
fn cases(id: Option<&str>) -> Vec<bench::Case> {
    load_matrix(&[&cases_file()], false)
        .unwrap()
        .into_iter()
        .filter(|c| id.is_none_or(|id| c.id == id))
        .collect()
}

/// Runs `cases` into a fresh history under `dir`.
fn run_cases(
    dir: &Path,
    cases: &[bench::Case],
    req: &RunRequest,
) -> (History, bench::run::RunSummary) {
    let mut h = History::open(&dir.join("h.sqlite")).unwrap();
    let s = run_matrix(&mut h, cases, req, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
    (h, s)
}

fn run(dir: &Path, quick: bool, repetitions: u32) -> (History, bench::run::RunSummary) {
    run_cases(dir, &cases(None), &request(dir, quick, repetitions))
}

fn state_of(s: &bench::run::RunSummary, id: &str) -> (State, String) {
    let r = s.results.iter().find(|r| r.case_id == id).unwrap();
    (r.state, r.reason.clone())
}

#[test]
fn every_state_from_test_cases() {
    let dir = tempfile::tempdir().unwrap();
    let (h, s) = run(dir.path(), false, 1);
    let expect = [
        ("ok", State::Pass),
        ("fail", State::Fail),
        ("garbage", State::NoValue),
        ("no-metric", State::NoValue),
        ("exit-nonzero", State::NoExit),
        ("silent", State::NoLog),
        ("hang", State::Timeout),
        ("missing-program", State::NoRun),
    ];
    for (id, want) in expect {
        let (got, reason) = state_of(&s, id);
        assert_eq!(got, want, "{id}: {reason}");
        if want != State::Pass {
            assert!(!reason.is_empty(), "{id} says why");
        }
    }
    assert!(state_of(&s, "garbage").1.contains("not JSON"));
    assert!(state_of(&s, "exit-nonzero").1.contains("something broke"));
    assert!(state_of(&s, "missing-program")
        .1
        .contains("no-such-program"));
    // Everything is in the history, with the raw output file.
    let rows = h.results(s.run).unwrap();
    assert_eq!(rows.len(), expect.len());
    let ok = rows.iter().find(|r| r.result.case_id == "ok").unwrap();
    assert_eq!(ok.result.metrics["v"].values, vec![3.0]);
    assert_eq!(ok.result.metrics["p"].values, vec![0.5]);
    let raw = ok.raw_path.as_deref().unwrap();
    assert!(std::fs::read_to_string(raw).unwrap().contains("\"v\": 3"));
    assert_eq!(h.run(s.run).unwrap().status, "complete");
}

#[test]
fn a_case_that_never_exits_is_killed_with_its_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(dir.path(), false, 1);
    req.timeout = Some(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let (_, s) = run_cases(dir.path(), &cases(Some("hang")), &req);
    assert_eq!(s.results[0].state, State::Timeout);
    assert!(started.elapsed() < Duration::from_secs(30));
    // The background `sleep 1000` the case started is gone too.
    let pid: i32 = std::fs::read_to_string(dir.path().join("hang.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for its new parent to reap it.
        stat.is_empty() || stat.split(") ").nth(1).is_some_and(|r| r.starts_with('Z'))
    });
    assert!(gone, "the case's child {pid} survived");
}

#[test]
fn quick_variant_and_repetitions_give_samples() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(dir.path(), true, 3);
    let (_, s) = run_cases(dir.path(), &cases(Some("ok")), &req);
    assert_eq!(s.results[0].state, State::Pass);
    assert_eq!(s.results[0].metrics["v"].values, vec![2.0, 2.0, 2.0]);
    assert_eq!(s.results[0].repetitions.len(), 3);
}

#[test]
fn compare_flags_state_changes_and_noise() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _) = run(dir.path(), false, 2);
    drop(h);
    let (h, _) = run(dir.path(), true, 2);
    let cmp = bench::compare::compare(&h, "prev", "last").unwrap();
    let ok = cmp.cases.iter().find(|c| c.case_id == "ok").unwrap();
    // v went from 3,3 to 2,2: beyond a zero-width noise band, and worse.
    assert_eq!(ok.verdict, bench::compare::Verdict::Worse);
    assert_eq!(cmp.regressions(), 0);
    assert!(matches!(h.resolve("nope"), Err(BenchError::NoSuchRun(_))));
}

#[test]
fn a_corrupted_database_is_an_error_and_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.sqlite");
    let garbage =
        b"this is not an SQLite database, it is a text file that lost its way\n".repeat(100);
    std::fs::write(&path, &garbage).unwrap();
    for result in [
        History::open(&path).map(|_| ()),
        History::open_existing(&path).map(|_| ()),
    ] {
        match result {
            Err(e @ BenchError::Corrupt { .. }) => {
                let msg = e.to_string();
                assert!(!msg.contains('\n'), "one line: {msg}");
                assert!(msg.contains("left untouched"), "{msg}");
            }
            other => panic!("expected Corrupt, got {:?}", other.err()),
        }
    }
    assert_eq!(std::fs::read(&path).unwrap(), garbage, "never overwritten");

    // A valid SQLite file of another program is not ours either.
    let foreign = dir.path().join("other.sqlite");
    assert!(foreign_sqlite(&foreign));
    assert!(matches!(
        History::open(&foreign),
        Err(BenchError::Foreign { .. })
    ));

    // A truncated history (half a file) is refused, not repaired.
    let good = dir.path().join("h.sqlite");
    let (h, _) = run_cases(
        dir.path(),
        &cases(None)[..1],
        &request(dir.path(), false, 1),
    );
    drop(h);
    let bytes = std::fs::read(&good).unwrap();
    let mut cut = bytes[..bytes.len() / 2].to_vec();
    for b in cut.iter_mut().skip(100).take(400) {
        *b = 0xff;
    }
    std::fs::write(&good, &cut).unwrap();
    assert!(History::open_existing(&good).is_err());
    assert_eq!(std::fs::read(&good).unwrap(), cut);
}

/// Makes a valid SQLite file that is not a Steer history: a history with
/// another application id (header bytes 68..72).
fn foreign_sqlite(path: &Path) -> bool {
    let tmp = path.with_extension("tmp");
    let h = History::open(&tmp).unwrap();
    drop(h);
    let mut bytes = std::fs::read(&tmp).unwrap();
    bytes[68..72].copy_from_slice(&[0, 0, 0, 7]);
    std::fs::write(path, bytes).is_ok()
}

#[test]
fn report_has_a_row_per_case_and_links_the_raw_output() {
    let dir = tempfile::tempdir().unwrap();
    let (h, _) = run(dir.path(), false, 2);
    drop(h);
    let (h, _) = run(dir.path(), true, 2);
    let out = dir.path().join("report");
    let summary = bench::report::write_report(&h, &out, 30).unwrap();
    assert_eq!(summary.runs, 2);
    assert_eq!(summary.cases, 8);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    for id in ["ok", "fail", "garbage", "hang", "silent", "missing-program"] {
        assert!(html.contains(&format!("data-case=\"{id}\"")), "{id}");
    }
    for st in [
        "PASS", "FAIL", "NOVALUE", "NOEXIT", "TIMEOUT", "NORUN", "NOLOG",
    ] {
        assert!(html.contains(&format!("data-state=\"{st}\"")), "{st}");
    }
    assert!(html.contains("<svg"));
    assert!(
        html.contains("chg-worse"),
        "ok's v dropped beyond the noise"
    );
    assert!(
        !html.contains("<script src") && !html.contains("<link"),
        "no external resources"
    );
    let link = "raw/1/ok.r1.json";
    assert!(html.contains(link));
    assert!(out.join(link).exists());
}

#[test]
fn a_selection_reads_case_files_and_narrows_by_filter() {
    let only_files = Selection {
        cases: vec![cases_file()],
        no_builtin: true,
        filter: None,
    };
    assert_eq!(only_files.cases().unwrap().len(), cases(None).len());
    let one = Selection {
        filter: Some("garb*".into()),
        ..only_files.clone()
    };
    let ids: Vec<String> = one.cases().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["garbage"]);
    let none = Selection {
        filter: Some("no-such-case".into()),
        ..only_files.clone()
    };
    assert!(matches!(none.cases(), Err(BenchError::NoCaseMatches(_))));
    let with_builtin = Selection {
        no_builtin: false,
        ..only_files
    };
    assert!(with_builtin.cases().unwrap().len() > cases(None).len());
}
