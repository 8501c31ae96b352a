//! Criterion's estimates as one JSON object, so criterion benchmarks are
//! matrix cases like the experiments (`steer bench criterion-json --
//! cargo bench ...`).
//!
//! Only the numbers of the run the case made count. Criterion keeps every
//! benchmark's last estimates under `target/criterion/<group>/<function>/`
//! until they are overwritten, so reading that directory after a run also
//! reported benchmarks the run never measured (renamed ones, ones a filter
//! left out) as if they were current. [`run`] gives the benchmark command
//! a directory of its own (`CRITERION_HOME`), made empty for the run and
//! removed after it, and reads only that.
//!
//! A fresh directory rather than `target/criterion` filtered by time (keep
//! the estimates written after the run started): the target directory is
//! shared by every benchmark of the workspace and by everyone who builds
//! in it, so a time filter would still take numbers another run wrote
//! meanwhile, and it would rest on the file system's timestamps agreeing
//! with the clock the start was taken from. A directory only this run
//! writes holds only its numbers, whatever else runs.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::BenchError;

#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub median_ns: f64,
    pub mean_ns: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CriterionResults {
    pub experiment: &'static str,
    /// `group/function` -> estimates, of this run only.
    pub benchmarks: BTreeMap<String, Estimate>,
    pub meta: stats::Meta,
}

/// Runs the criterion benchmark `command` (program and arguments) with
/// `CRITERION_HOME` set to a new empty directory, its standard output sent
/// to standard error (the JSON owns standard output), and returns the
/// estimates it wrote there. Fails when the command fails or measured
/// nothing.
pub fn run(command: &[String]) -> Result<CriterionResults, BenchError> {
    let Some((program, args)) = command.split_first() else {
        return Err(BenchError::Criterion {
            command: String::new(),
            reason: "no benchmark command given".into(),
        });
    };
    let line = command.join(" ");
    let home = RunDir::new()?;
    let stdout = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| BenchError::io("duplicate stderr for the benchmark's output", e))?;
    let status = Command::new(program)
        .args(args)
        .env("CRITERION_HOME", &home.0)
        .stdout(Stdio::from(stdout))
        .status()
        .map_err(|e| BenchError::io(format!("run {program}"), e))?;
    if !status.success() {
        return Err(BenchError::Criterion {
            command: line,
            reason: format!("it failed ({status})"),
        });
    }
    let benchmarks = estimates(&home.0)?;
    if benchmarks.is_empty() {
        return Err(BenchError::Criterion {
            command: line,
            reason: "it measured no benchmark (does its filter match one?)".into(),
        });
    }
    Ok(CriterionResults {
        experiment: "criterion",
        benchmarks,
        meta: stats::Meta::collect(),
    })
}

/// The directory criterion writes one run's results into: new and empty,
/// removed with everything in it on drop.
struct RunDir(PathBuf);

impl RunDir {
    fn new() -> Result<RunDir, BenchError> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("steer-criterion-{}-{n}", std::process::id()));
        // Left over by a killed run of a process with the same id: not ours.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
        Ok(RunDir(dir))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every `DIR/<group>/<function>/new/estimates.json`.
fn estimates(dir: &Path) -> Result<BTreeMap<String, Estimate>, BenchError> {
    let mut benchmarks = BTreeMap::new();
    let read_dir = |d: &Path| {
        std::fs::read_dir(d).map_err(|e| BenchError::io(format!("read {}", d.display()), e))
    };
    for group in read_dir(dir)?.flatten() {
        if !group.path().is_dir() || group.file_name() == "report" {
            continue;
        }
        for func in read_dir(&group.path())?.flatten() {
            let est = func.path().join("new").join("estimates.json");
            let Ok(text) = std::fs::read_to_string(&est) else {
                continue;
            };
            let v: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| BenchError::CaseFile {
                    path: est.display().to_string(),
                    reason: e.to_string(),
                })?;
            let point = |k: &str| v[k]["point_estimate"].as_f64();
            if let (Some(median_ns), Some(mean_ns)) = (point("median"), point("mean")) {
                let name = format!(
                    "{}/{}",
                    group.file_name().to_string_lossy(),
                    func.file_name().to_string_lossy()
                );
                benchmarks.insert(name, Estimate { median_ns, mean_ns });
            }
        }
    }
    Ok(benchmarks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c SCRIPT` as a benchmark command.
    fn sh(script: &str) -> Vec<String> {
        ["sh", "-c", script].map(String::from).to_vec()
    }

    /// A script that writes estimates for `group/function` where criterion
    /// would, in `$CRITERION_HOME`.
    fn writes(group: &str, median: f64) -> String {
        format!(
            "mkdir -p \"$CRITERION_HOME/{group}/function/new\" && echo \
             '{{\"median\": {{\"point_estimate\": {median}}}, \"mean\": {{\"point_estimate\": 1.0}}}}' \
             > \"$CRITERION_HOME/{group}/function/new/estimates.json\""
        )
    }

    #[test]
    fn the_run_reads_what_it_measured() {
        let r = run(&sh(&writes("group", 10.0))).unwrap();
        assert_eq!(r.benchmarks.keys().collect::<Vec<_>>(), ["group/function"]);
        assert_eq!(r.benchmarks["group/function"].median_ns, 10.0);
    }

    /// The old reading took every estimate under target/criterion, so a
    /// benchmark renamed or filtered out since reported its old number as
    /// this run's. Each run now starts from an empty directory: an earlier
    /// run's estimates are not there, and a run that measured nothing fails.
    #[test]
    fn an_earlier_runs_estimates_do_not_count() {
        let first = run(&sh(&writes("renamed", 5.0))).unwrap();
        assert!(first.benchmarks.contains_key("renamed/function"));
        let second = run(&sh(&writes("group", 10.0))).unwrap();
        assert_eq!(
            second.benchmarks.keys().collect::<Vec<_>>(),
            ["group/function"]
        );
        let err = run(&sh("true")).unwrap_err().to_string();
        assert!(err.contains("measured no benchmark"), "{err}");
    }

    #[test]
    fn a_failed_benchmark_is_an_error() {
        let err = run(&sh(&format!("{} && exit 3", writes("g", 1.0))))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("criterion benchmark 'sh -c"), "{err}");
        assert!(err.ends_with("it failed (exit status: 3)"), "{err}");
        assert!(run(&[]).is_err());
        assert!(run(&["steer-no-such-benchmark".into()]).is_err());
    }
}
