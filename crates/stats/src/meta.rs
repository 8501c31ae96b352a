//! The machine and code an experiment ran on, recorded with every result.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Meta {
    pub git_commit: String,
    /// Whether tracked files differed from `git_commit` when the result was
    /// taken: a dirty tree's result is not the commit's (issue 27,
    /// "Counters and provenance"). None when git could not tell.
    pub git_dirty: Option<bool>,
    /// What differed, as `git status --porcelain` names it (at most
    /// `CHANGES_LISTED` paths, then a count); None when the tree was clean
    /// or git could not tell.
    pub git_changes: Option<String>,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
    /// Seconds since the Unix epoch.
    pub timestamp: u64,
}

impl Meta {
    pub fn collect() -> Self {
        let (git_dirty, git_changes) = match git_status(None) {
            Some(status) => {
                let changes = changes_summary(&status);
                (Some(changes.is_some()), changes)
            }
            None => (None, None),
        };
        Meta {
            git_commit: git_commit(),
            git_dirty,
            git_changes,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpu_model: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// `git status --porcelain` of the repository at `dir` (the current
/// directory when None), or None when git could not say. Untracked files
/// are left out: results and scratch files are untracked, and a new source
/// file only builds into the code when a tracked file names it, which then
/// shows as modified.
fn git_status(dir: Option<&std::path::Path>) -> Option<String> {
    let mut cmd = std::process::Command::new("git");
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.args(["status", "--porcelain=v1", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Paths of a dirty tree named in `git_changes` before the rest are counted.
pub const CHANGES_LISTED: usize = 10;

/// A one-line summary of `git status --porcelain` output ("M a.rs, D b.rs"),
/// None when it lists nothing (a clean tree).
fn changes_summary(porcelain: &str) -> Option<String> {
    let lines: Vec<&str> = porcelain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let mut out = lines
        .iter()
        .take(CHANGES_LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if lines.len() > CHANGES_LISTED {
        out.push_str(&format!(" and {} more", lines.len() - CHANGES_LISTED));
    }
    Some(out)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_status_has_no_changes() {
        assert_eq!(changes_summary(""), None);
        assert_eq!(changes_summary("\n"), None);
    }

    #[test]
    fn changes_name_their_paths_then_count_the_rest() {
        assert_eq!(
            changes_summary(" M crates/a.rs\nD  b.rs\n").as_deref(),
            Some("M crates/a.rs, D  b.rs")
        );
        let many: String = (0..CHANGES_LISTED + 3)
            .map(|i| format!(" M f{i}\n"))
            .collect();
        let got = changes_summary(&many).unwrap();
        assert!(
            got.ends_with(&format!("M f{} and 3 more", CHANGES_LISTED - 1)),
            "{got}"
        );
    }

    /// A repository with a modified tracked file reads as dirty, and the
    /// same repository committed reads as clean (before, a result named
    /// the commit either way).
    #[test]
    fn a_modified_tracked_file_makes_the_tree_dirty() {
        let dir = std::env::temp_dir().join(format!("stats-meta-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .current_dir(&dir)
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.join("a.rs"), "1").unwrap();
        git(&["add", "a.rs"]);
        git(&["commit", "-q", "-m", "a"]);
        std::fs::write(dir.join("scratch"), "untracked").unwrap();
        let clean = git_status(Some(&dir)).unwrap();
        assert_eq!(changes_summary(&clean), None, "{clean}");
        std::fs::write(dir.join("a.rs"), "2").unwrap();
        let dirty = git_status(Some(&dir)).unwrap();
        assert_eq!(changes_summary(&dirty).as_deref(), Some("M a.rs"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
