//! Running one case: its own process group, a timeout, the states, and
//! cleaning up what it left behind (processes and labs).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::case::{metric_values, Better, Case, CheckFailure};
use crate::State;

/// How to run the cases of one matrix run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Run each case's quick variant.
    pub quick: bool,
    /// Repetitions of every case (each one a sample of every metric).
    pub repetitions: u32,
    /// Overrides every case's own timeout.
    pub timeout: Option<Duration>,
    /// The `steer` binary (`{steer}`).
    pub steer: PathBuf,
    /// Working directory of every case (`{root}`).
    pub root: PathBuf,
    /// Where this run's raw outputs go.
    pub raw_dir: PathBuf,
    /// Set by SIGINT/SIGTERM: stop the current case and the run.
    pub interrupted: Arc<AtomicBool>,
}

/// The samples of one metric over a case's repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricSamples {
    pub unit: String,
    pub better: Better,
    pub values: Vec<f64>,
}

/// One repetition of one case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepResult {
    pub repetition: u32,
    pub state: State,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub seconds: f64,
    /// stdout (the JSON) and stderr files, absolute.
    pub output: Option<String>,
    pub stderr: Option<String>,
    /// Labs the case left behind and the runner took down.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cleaned_labs: Vec<String>,
}

/// One case in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub case_id: String,
    pub name: String,
    pub params: BTreeMap<String, String>,
    pub command: Vec<String>,
    /// The worst state over the repetitions.
    pub state: State,
    pub reason: String,
    pub metrics: BTreeMap<String, MetricSamples>,
    pub repetitions: Vec<RepResult>,
    pub seconds: f64,
}

impl CaseResult {
    /// The first metric (by name) with samples, as `name mean unit`: the
    /// summary's "first metric" column. "n/a" when the case has metrics and
    /// none was measured; empty when it has none.
    pub fn first_metric(&self) -> String {
        let measured = self.metrics.iter().find_map(|(name, m)| {
            crate::stats::Summary::of(&m.values).map(|s| format!("{name} {:.3} {}", s.mean, m.unit))
        });
        match measured {
            Some(text) => text,
            None if self.metrics.is_empty() => String::new(),
            None => "n/a".into(),
        }
    }

    /// A case that never started (precondition, interrupted run).
    pub fn not_run(case: &Case, command: Vec<String>, reason: String) -> CaseResult {
        CaseResult {
            case_id: case.id.clone(),
            name: case.spec.name.clone(),
            params: case.params.clone(),
            command,
            state: State::NoRun,
            reason,
            metrics: BTreeMap::new(),
            repetitions: Vec::new(),
            seconds: 0.0,
        }
    }
}

/// Runs `case` `cfg.repetitions` times; `on_rep` sees each repetition.
pub fn run_case(case: &Case, cfg: &RunConfig, mut on_rep: impl FnMut(&RepResult)) -> CaseResult {
    let steer = cfg.steer.display().to_string();
    let root = cfg.root.display().to_string();
    let argv = case.argv(cfg.quick, &steer, &root);
    if let Err(reason) = preconditions(case, cfg) {
        return CaseResult::not_run(case, argv, reason);
    }
    let started = Instant::now();
    let mut result = CaseResult {
        state: State::Pass,
        reason: String::new(),
        metrics: case
            .spec
            .metrics
            .iter()
            .map(|m| {
                let samples = MetricSamples {
                    unit: m.unit.clone(),
                    better: m.better,
                    values: Vec::new(),
                };
                (m.name.clone(), samples)
            })
            .collect(),
        ..CaseResult::not_run(case, argv.clone(), String::new())
    };
    let timeout = cfg
        .timeout
        .unwrap_or(Duration::from_secs(case.timeout(cfg.quick)));
    for repetition in 1..=cfg.repetitions.max(1) {
        if cfg.interrupted.load(Ordering::SeqCst) {
            break;
        }
        let (rep, values) = run_once(case, cfg, &argv, repetition, timeout);
        on_rep(&rep);
        for (name, mut v) in values {
            if let Some(m) = result.metrics.get_mut(&name) {
                m.values.append(&mut v);
            }
        }
        if rep.state.severity() > result.state.severity() {
            result.state = rep.state;
            result.reason = if cfg.repetitions > 1 {
                format!("repetition {repetition}: {}", rep.reason)
            } else {
                rep.reason.clone()
            };
        }
        result.repetitions.push(rep);
    }
    result.seconds = started.elapsed().as_secs_f64();
    result
}

/// Checks `requires`; `Err(reason)` makes the case NORUN.
fn preconditions(case: &Case, cfg: &RunConfig) -> Result<(), String> {
    let req = &case.spec.requires;
    if req.root && !host::is_root() {
        return Err("needs root".into());
    }
    for program in &req.programs {
        if host::command::find_program(program).is_none() {
            return Err(format!("needs program '{program}' (not on PATH)"));
        }
    }
    for file in &req.files {
        let path = case.fill(file, "", &cfg.root.display().to_string());
        if !cfg.root.join(&path).exists() {
            return Err(format!("needs file {path}"));
        }
    }
    if !req.steer_command.is_empty() {
        let ok = Command::new(&cfg.steer)
            .args(&req.steer_command)
            .arg("--help")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!(
                "`steer {}` does not exist in this build",
                req.steer_command.join(" ")
            ));
        }
    }
    Ok(())
}

/// A file name for a case id: `demo/flows=16` -> `demo_flows=16`.
pub fn file_stem(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '=' | '-' | '+') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

enum Ended {
    Exited(ExitStatus),
    TimedOut,
    Interrupted,
    WaitFailed(String),
}

type Values = Vec<(String, Vec<f64>)>;

fn run_once(
    case: &Case,
    cfg: &RunConfig,
    argv: &[String],
    repetition: u32,
    timeout: Duration,
) -> (RepResult, Values) {
    let stem = format!("{}.r{repetition}", file_stem(&case.id));
    let out_path = cfg.raw_dir.join(format!("{stem}.json"));
    let err_path = cfg.raw_dir.join(format!("{stem}.stderr.txt"));
    let mut rep = RepResult {
        repetition,
        state: State::NoLog,
        reason: String::new(),
        exit_code: None,
        seconds: 0.0,
        output: None,
        stderr: None,
        cleaned_labs: Vec::new(),
    };
    let files = std::fs::create_dir_all(&cfg.raw_dir)
        .and_then(|()| Ok((File::create(&out_path)?, File::create(&err_path)?)));
    let (out, err) = match files {
        Ok(f) => f,
        Err(e) => {
            rep.reason = format!("cannot create the output file {}: {e}", out_path.display());
            return (rep, Vec::new());
        }
    };
    rep.output = Some(out_path.display().to_string());
    rep.stderr = Some(err_path.display().to_string());
    // The case's labs carry this tag, so only they are taken down after it.
    let owner = format!("steer-bench-{}-{}", std::process::id(), case.id);
    let started = Instant::now();
    let spawned = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&cfg.root)
        .env("STEER_BENCH_CASE", &case.id)
        .env(lab::OWNER_ENV, &owner)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            rep.state = State::NoRun;
            rep.reason = format!("cannot execute {}: {e}", argv[0]);
            return (rep, Vec::new());
        }
    };
    let ended = wait(&mut child, timeout, &cfg.interrupted);
    // Whatever the case started and left running dies with its group.
    kill_group(&mut child);
    rep.seconds = started.elapsed().as_secs_f64();
    rep.cleaned_labs = clean_labs(&owner);
    let status = match ended {
        Ended::Exited(status) => status,
        Ended::TimedOut => {
            rep.state = State::Timeout;
            rep.reason = format!(
                "did not terminate within {} s; process group killed",
                timeout.as_secs_f64()
            );
            return (rep, Vec::new());
        }
        Ended::Interrupted => {
            rep.state = State::NoRun;
            rep.reason = "interrupted (SIGINT/SIGTERM); process group killed".into();
            return (rep, Vec::new());
        }
        Ended::WaitFailed(e) => {
            rep.state = State::NoExit;
            rep.reason = format!("waiting for the case failed: {e}");
            return (rep, Vec::new());
        }
    };
    rep.exit_code = status.code();
    let stderr_tail = last_line(&std::fs::read(&err_path).unwrap_or_default());
    if !status.success() {
        let how = match status.code() {
            Some(c) => format!("exit status {c}"),
            None => format!("killed by {status}"),
        };
        let steer_env = argv[0] == cfg.steer.display().to_string() && status.code() == Some(3);
        rep.state = if steer_env {
            State::NoRun
        } else {
            State::NoExit
        };
        rep.reason = if stderr_tail.is_empty() {
            how
        } else {
            format!("{how}: {stderr_tail}")
        };
        return (rep, Vec::new());
    }
    let stdout = std::fs::read(&out_path).unwrap_or_default();
    if stdout.iter().all(u8::is_ascii_whitespace) {
        rep.state = State::NoLog;
        rep.reason = "exit 0 but no output".into();
        return (rep, Vec::new());
    }
    let (state, reason, values) = evaluate(case, &stdout);
    rep.state = state;
    rep.reason = reason;
    (rep, values)
}

/// Reads the metrics and checks from a case's stdout.
pub fn evaluate(case: &Case, stdout: &[u8]) -> (State, String, Values) {
    let json: Value = match serde_json::from_slice(stdout) {
        Ok(v) => v,
        Err(e) => {
            let head = last_line(&stdout[..stdout.len().min(200)]);
            return (
                State::NoValue,
                format!("output is not JSON ({e}): {head}"),
                Vec::new(),
            );
        }
    };
    let mut values = Vec::new();
    for m in &case.spec.metrics {
        match metric_values(&json, &m.pointer) {
            Some(v) => values.push((m.name.clone(), v)),
            None => {
                return (
                    State::NoValue,
                    format!("metric {}: no number at {}", m.name, m.pointer),
                    values,
                )
            }
        }
    }
    for check in case.checks() {
        if let Err(why) = check.evaluate(&json) {
            let about = if check.about.is_empty() {
                String::new()
            } else {
                format!(" ({})", check.about)
            };
            // Not measured is NOVALUE, never a pass and not a false check.
            let state = match why {
                CheckFailure::Absent(_) => State::NoValue,
                CheckFailure::False(_) => State::Fail,
            };
            return (state, format!("check {why}{about}"), values);
        }
    }
    (State::Pass, String::new(), values)
}

fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    line.chars().take(200).collect()
}

fn wait(child: &mut Child, timeout: Duration, interrupted: &AtomicBool) -> Ended {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ended::Exited(status),
            Ok(None) => {}
            Err(e) => return Ended::WaitFailed(e.to_string()),
        }
        if interrupted.load(Ordering::SeqCst) {
            return Ended::Interrupted;
        }
        if Instant::now() >= deadline {
            return Ended::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// SIGTERM to the case's process group, up to 2 s for the leader to exit,
/// then SIGKILL to the group; reaps the leader.
fn kill_group(child: &mut Child) {
    let Ok(pgid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    let alive = |child: &mut Child| matches!(child.try_wait(), Ok(None));
    if alive(child) {
        // SAFETY: kill(2) with a negative pid signals the group we created.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(2);
        while alive(child) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // SAFETY: as above; ESRCH (group already empty) is fine.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let _ = child.wait();
}

/// Takes down the labs the case left behind: those tagged with `owner`
/// (`lab::OWNER_ENV`, set for the case's processes). Another user's lab,
/// idle or busy, carries no such tag and is left alone.
fn clean_labs(owner: &str) -> Vec<String> {
    if !host::is_root() {
        return Vec::new();
    }
    let Ok(names) = lab::Lab::list() else {
        return Vec::new();
    };
    names
        .into_iter()
        .filter(|name| lab::Lab::open(name).is_ok_and(|l| l.owner() == Some(owner)))
        .filter(|name| lab::Lab::down(name).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CaseFile;

    fn case(checks: &str) -> Case {
        let text = format!(
            "[[case]]\nname = \"x\"\ncommand = [\"true\"]\n\
             metrics = [{{ name = \"m\", pointer = \"/m\", better = \"higher\" }}]\n\
             checks = [{checks}]\n"
        );
        CaseFile::parse(&text, "t").unwrap().cases[0]
            .expand()
            .remove(0)
    }

    #[test]
    fn a_check_on_an_unmeasured_value_is_novalue() {
        let c = case(r#"{ pointer = "/ratio", op = "<", value = 1 }"#);
        let (state, reason, _) = evaluate(&c, br#"{"m": 1, "ratio": null}"#);
        assert_eq!(state, State::NoValue, "{reason}");
        assert!(reason.contains("/ratio"), "{reason}");
        let (state, _, _) = evaluate(&c, br#"{"m": 1}"#);
        assert_eq!(state, State::NoValue);
        let (state, _, _) = evaluate(&c, br#"{"m": 1, "ratio": 2}"#);
        assert_eq!(state, State::Fail);
        let (state, _, _) = evaluate(&c, br#"{"m": 1, "ratio": 0.5}"#);
        assert_eq!(state, State::Pass);
    }

    #[test]
    fn a_null_metric_is_novalue() {
        let c = case("");
        let (state, reason, _) = evaluate(&c, br#"{"m": null}"#);
        assert_eq!(state, State::NoValue, "{reason}");
        let (state, _, _) = evaluate(&c, br#"{"m": [1, null]}"#);
        assert_eq!(state, State::NoValue);
    }

    #[test]
    #[ignore = "needs root (namespaces, veth): `make test` runs it as root"]
    fn only_the_cases_own_labs_are_taken_down() {
        testkit::require_root("network namespaces, veths");
        let owner = format!("bench-test-{}", std::process::id());
        let spec = |prefix: &str, owner: Option<String>| {
            let mut spec = lab::LabSpec::new(&lab::unique_name(prefix));
            spec.software_rss = false;
            spec.ipv6 = false;
            spec.owner = owner;
            spec
        };
        let mine = lab::Lab::up(&spec("bcm", Some(owner.clone()))).unwrap();
        let idle = lab::Lab::up(&spec("bci", None)).unwrap().teardown_on_drop();
        let other = spec("bco", Some("someone-else".into()));
        let other = lab::Lab::up(&other).unwrap().teardown_on_drop();
        assert_eq!(mine.owner(), Some(owner.as_str()));
        let cleaned = clean_labs(&owner);
        assert_eq!(cleaned, vec![mine.name().to_string()]);
        let left = lab::Lab::list().unwrap();
        assert!(!left.contains(&mine.name().to_string()));
        assert!(
            left.contains(&idle.name().to_string()),
            "an idle lab is not ours"
        );
        assert!(left.contains(&other.name().to_string()));
    }
}
