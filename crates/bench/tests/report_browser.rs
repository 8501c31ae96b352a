//! The report in a real browser: headless Chromium (Debian's `chromium`)
//! loads `index.html` from a file:// URL with the network off, the rendered
//! DOM has the case rows, and a screenshot PNG is written under
//! `target/bench-browser/` (its path is printed).
//!
//! Chromium is a prerequisite, installed by `make deps` (it is in the
//! Makefile's APT_PACKAGES): the test is ignored by a plain `cargo test`,
//! and fails, saying so, when run without it. With
//! `STEER_BENCH_REPORT=DIR/index.html` (set by `make bench-matrix` after the
//! quick matrix run) it also renders that real report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bench::run::{run_matrix, RunRequest};
use bench::{load_matrix, History};

testkit::strict_mode_guard!();

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The browser; the test fails (one line) without one.
fn browser() -> PathBuf {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|p| host::command::find_program(p))
        .unwrap_or_else(|| {
            testkit::missing("headless Chromium (the program chromium): `make deps` installs it")
        })
}

/// Headless Chromium, no sandbox (root), no GPU, no network, fresh profile.
fn headless(browser: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        // Nothing leaves the machine: every host resolves nowhere.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// Renders `index`, checks the DOM has a row per case in `expect`, writes `png`.
fn render(browser: &Path, index: &Path, expect: &[String], png: &Path) {
    let url = format!("file://{}", index.canonicalize().unwrap().display());
    let profile = tempfile::tempdir().unwrap();
    let dom = headless(browser, profile.path())
        .args(["--virtual-time-budget=2000", "--dump-dom", &url])
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("id=\"matrix\""),
        "no table in the rendered DOM"
    );
    let rows = dom.matches("<tr class=\"case\"").count();
    assert_eq!(rows, expect.len(), "case rows");
    for id in expect {
        assert!(
            dom.contains(&format!("data-case=\"{}\"", plot::esc(id))),
            "row {id}"
        );
    }
    assert!(dom.contains("<svg"), "charts rendered");
    let _ = std::fs::remove_file(png);
    let shot = headless(browser, profile.path())
        .args(["--window-size=1400,2000", "--hide-scrollbars"])
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let bytes = std::fs::read(png).expect("screenshot written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(
        bytes.len() > 10_000,
        "a real picture, {} bytes",
        bytes.len()
    );
    println!("screenshot: {}", png.display());
}

#[test]
#[ignore = "needs headless Chromium (`make deps` installs it): `make test` runs it"]
fn report_renders_in_headless_chromium() {
    let browser = browser();
    let out = workspace().join("target/bench-browser");
    std::fs::create_dir_all(&out).unwrap();
    let out = out.canonicalize().unwrap();
    // A history of two runs of the test-only cases (every state).
    let work = tempfile::tempdir().unwrap();
    let cases = load_matrix(
        &[&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/bad_input.toml")],
        false,
    )
    .unwrap();
    let mut h = History::open(&work.path().join("h.sqlite")).unwrap();
    for quick in [false, true] {
        let req = RunRequest {
            quick,
            filter: None,
            repetitions: 2,
            timeout: None,
            steer: PathBuf::from("/bin/false"),
            root: work.path().to_path_buf(),
        };
        run_matrix(
            &mut h,
            &cases,
            &req,
            Arc::new(AtomicBool::new(false)),
            |_| {},
        )
        .unwrap();
    }
    let report = out.join("synthetic");
    let _ = std::fs::remove_dir_all(&report);
    bench::report::write_report(&h, &report, 30).unwrap();
    let ids: Vec<String> = cases.iter().map(|c| c.id.clone()).collect();
    render(
        &browser,
        &report.join("index.html"),
        &ids,
        &out.join("synthetic.png"),
    );

    if let Some(real) = std::env::var_os("STEER_BENCH_REPORT") {
        let real = PathBuf::from(real);
        let db = std::env::var_os("STEER_BENCH_DB").map(PathBuf::from);
        let expect: Vec<String> = match db {
            Some(db) => {
                let h = History::open_existing(&db).unwrap();
                let mut ids = Vec::new();
                for run in h.runs().unwrap().iter().rev().take(30) {
                    for r in h.results(run.id).unwrap() {
                        if !ids.contains(&r.result.case_id) {
                            ids.push(r.result.case_id);
                        }
                    }
                }
                ids
            }
            None => Vec::new(),
        };
        let png = real.with_file_name("screenshot.png");
        if expect.is_empty() {
            eprintln!("STEER_BENCH_DB not set: checking only that the page renders");
        }
        render_loose(&browser, &real, &expect, &png);
    }
}

/// Like `render`, for the real report: the rows of `expect` must be there.
fn render_loose(browser: &Path, index: &Path, expect: &[String], png: &Path) {
    if expect.is_empty() {
        let html = std::fs::read_to_string(index).unwrap();
        let n = html.matches("<tr class=\"case\"").count();
        let ids: Vec<String> = html
            .split("data-case=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next().map(str::to_string))
            .collect();
        assert_eq!(ids.len(), n);
        return render(browser, index, &ids, png);
    }
    render(browser, index, expect, png)
}
