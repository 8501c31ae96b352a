//! The fuzz targets build and accept every seed of their corpus, on stable
//! Rust. `fuzz/` is a workspace of its own that cargo-fuzz builds with a
//! nightly toolchain for `make fuzz`; nothing else built it, so an API
//! change broke a target unseen (issue 27: `toe_sack` still used
//! `toe::recovery::pipe` and `ProtoState::scoreboard` after the loss state
//! moved into `ProtoState::loss`).
//!
//! Here each target is built as the ordinary program libfuzzer-sys makes
//! of it on stable (libFuzzer's driver, without the coverage
//! instrumentation only nightly gives), in the dev profile, so with the
//! debug assertions and overflow checks cargo-fuzz builds with too, and run
//! once on its seed files: given files rather than a corpus directory,
//! libFuzzer runs each of them once and exits non-zero if one crashes.
//! `make test` runs this with every other test; the first build of the
//! fuzz workspace takes minutes, later ones only rebuild what changed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The `[[bin]]` targets of fuzz/Cargo.toml.
fn targets() -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().expect("fuzz/Cargo.toml parses");
    manifest["bin"]
        .as_array()
        .expect("fuzz/Cargo.toml has [[bin]] targets")
        .iter()
        .map(|b| b["name"].as_str().expect("a target's name").to_string())
        .collect()
}

/// The files of `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// The last `n` lines of `text`, for a failure message.
fn tail(text: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Every target has a seed corpus and every corpus a target, so "every
/// seed" cannot leave a target out.
#[test]
fn every_fuzz_target_has_seeds() {
    let targets = targets();
    assert!(targets.len() >= 12, "only {targets:?}");
    let corpora: BTreeSet<String> = std::fs::read_dir(fuzz_dir().join("seeds"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        targets, corpora,
        "fuzz targets (fuzz/Cargo.toml) and seed corpora (fuzz/seeds/) differ"
    );
    for t in &targets {
        assert!(
            !files(&fuzz_dir().join("seeds").join(t)).is_empty(),
            "fuzz/seeds/{t} holds no seed"
        );
    }
}

#[test]
fn every_fuzz_target_builds_on_stable_and_accepts_its_seeds() {
    let fuzz = fuzz_dir();
    // The fuzz workspace's own target directory, named even when
    // CARGO_TARGET_DIR is set: a shared one is locked by the `cargo test`
    // running this.
    let target_dir = fuzz.join("target");
    let build = Command::new(env!("CARGO"))
        .args(["build", "--locked", "--bins", "--manifest-path"])
        .arg(fuzz.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("run cargo build on the fuzz workspace");
    assert!(
        build.status.success(),
        "the fuzz targets do not build on stable (cargo build --manifest-path fuzz/Cargo.toml \
         --bins):\n{}",
        tail(&build.stderr, 40)
    );
    for t in targets() {
        let seeds = files(&fuzz.join("seeds").join(&t));
        let run = Command::new(target_dir.join("debug").join(&t))
            .args(&seeds)
            .output()
            .unwrap_or_else(|e| panic!("run the fuzz target {t}: {e}"));
        let out = String::from_utf8_lossy(&run.stderr);
        let executed = out.lines().filter(|l| l.starts_with("Executed ")).count();
        assert!(
            run.status.success() && executed == seeds.len(),
            "fuzz target {t}: {} of its {} seeds ran ({}):\n{}",
            executed,
            seeds.len(),
            run.status,
            tail(&run.stderr, 30)
        );
    }
}
