//! Every lockfile in the repository is current: cargo resolves each
//! tracked Cargo.lock's manifest with `--locked`, which fails where a
//! build would rewrite the lockfile. The manifests outside the workspace
//! (bench/dpdk/steer-capi, fuzz) are built by other targets than `make
//! test`, so a dependency added to a crate they use left their lockfiles
//! stale, and a benchmark run left the tree dirty (issue 27, "Docs that
//! drift").

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lockfiles git tracks, relative to the repository.
fn tracked_lockfiles() -> Vec<PathBuf> {
    let out = Command::new("git")
        .current_dir(repository())
        .args(["ls-files", "--", "Cargo.lock", "*/Cargo.lock"])
        .output()
        .expect("run git ls-files (this test reads which lockfiles the repository holds)");
    assert!(
        out.status.success(),
        "git ls-files: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect()
}

#[test]
fn every_lockfile_is_current() {
    let locks = tracked_lockfiles();
    assert!(
        locks.iter().any(|l| l == Path::new("Cargo.lock")),
        "the workspace's Cargo.lock is not among the tracked lockfiles {locks:?}"
    );
    for lock in locks {
        let manifest = repository().join(&lock).with_file_name("Cargo.toml");
        let out = Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--locked",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(&manifest)
            .output()
            .expect("run cargo metadata");
        assert!(
            out.status.success(),
            "{} is not current (cargo metadata --locked failed; run `cargo metadata \
             --manifest-path {}` and commit the lockfile):\n{}",
            lock.display(),
            lock.with_file_name("Cargo.toml").display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
