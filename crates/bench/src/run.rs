//! A run of the matrix: every selected case, recorded as it finishes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use plot::text::{Present, Table, Text};
use serde::Serialize;

use crate::case::{load_matrix, matches_filter, Case};
use crate::db::History;
use crate::runner::{run_case, CaseResult, RepResult, RunConfig};
use crate::{BenchError, State};

/// What `steer bench run` was asked for.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub quick: bool,
    pub filter: Option<String>,
    pub repetitions: u32,
    pub timeout: Option<Duration>,
    pub steer: PathBuf,
    pub root: PathBuf,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub run: i64,
    pub status: String,
    pub db: String,
    pub raw_dir: String,
    pub results: Vec<CaseResult>,
}

impl RunSummary {
    pub fn interrupted(&self) -> bool {
        self.status == "interrupted"
    }

    pub fn count(&self, state: State) -> usize {
        self.results.iter().filter(|r| r.state == state).count()
    }
}

/// One row per case (its state, seconds, first metric, reason), then the
/// count of each state and where the history and raw outputs are.
impl Present for RunSummary {
    fn text(&self) -> Text {
        let header = ["case", "state", "seconds", "first metric", "reason"];
        let table = Table::of(&header, &self.results, |r| {
            vec![
                r.case_id.clone(),
                r.state.to_string(),
                format!("{:.1}", r.seconds),
                r.first_metric(),
                r.reason.clone(),
            ]
        });
        let counts: Vec<String> = State::ALL
            .iter()
            .filter(|st| self.count(**st) > 0)
            .map(|st| format!("{} {st}", self.count(*st)))
            .collect();
        Text::from(table).line(format!(
            "run {} {}: {}; history {}; raw outputs {}",
            self.run,
            self.status,
            counts.join(", "),
            self.db,
            self.raw_dir
        ))
    }
}

/// Progress events for a terminal display.
pub enum Event<'a> {
    Start {
        index: usize,
        total: usize,
        case: &'a Case,
    },
    Repetition {
        case: &'a Case,
        rep: &'a RepResult,
    },
    Done {
        index: usize,
        total: usize,
        result: &'a CaseResult,
    },
}

/// Which cases of the matrix a command works on: the built-in ones and
/// extra case files, narrowed by a filter. With the `clap` feature, the
/// flags of `steer bench run` and `steer bench list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Selection {
    /// Extra case declarations (TOML, same format as crates/bench/cases.toml).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub cases: Vec<PathBuf>,
    /// Only the cases from --cases files, not the built-in ones.
    #[cfg_attr(feature = "clap", arg(long, requires = "cases"))]
    pub no_builtin: bool,
    /// Comma-separated patterns on case ids (`*` wildcard; otherwise a
    /// substring): `demo/flows=16,xdp-overhead/*`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub filter: Option<String>,
}

impl Selection {
    /// The selected cases, expanded; an error when the filter selects none.
    pub fn cases(&self) -> Result<Vec<Case>, BenchError> {
        let extra: Vec<&Path> = self.cases.iter().map(PathBuf::as_path).collect();
        select(
            load_matrix(&extra, !self.no_builtin)?,
            self.filter.as_deref(),
        )
    }
}

/// The cases `filter` selects, or an error when it selects none.
pub fn select(cases: Vec<Case>, filter: Option<&str>) -> Result<Vec<Case>, BenchError> {
    let Some(f) = filter else {
        return Ok(cases);
    };
    let selected: Vec<Case> = cases
        .into_iter()
        .filter(|c| matches_filter(&c.id, f))
        .collect();
    if selected.is_empty() {
        return Err(BenchError::NoCaseMatches(f.into()));
    }
    Ok(selected)
}

/// A flag set by SIGINT, SIGTERM and SIGHUP (instead of dying): the runner
/// stops the current case, cleans up, and records the run as interrupted.
pub fn interrupt_flag() -> Result<Arc<AtomicBool>, BenchError> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .map_err(|e| BenchError::io("install signal handler", e))?;
    }
    Ok(flag)
}

/// Runs `cases`, recording each result in `history` as soon as it is known.
pub fn run_matrix(
    history: &mut History,
    cases: &[Case],
    req: &RunRequest,
    interrupted: Arc<AtomicBool>,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<RunSummary, BenchError> {
    let meta = stats::Meta::collect();
    let raw_root = raw_root(history.path());
    let run = history.begin_run(
        &meta,
        req.quick,
        req.filter.as_deref(),
        req.repetitions,
        &raw_root.display().to_string(),
    )?;
    let raw_dir = raw_root.join(run.to_string());
    history.set_raw_dir(run, &raw_dir.display().to_string())?;
    let cfg = RunConfig {
        quick: req.quick,
        repetitions: req.repetitions.max(1),
        timeout: req.timeout,
        steer: req.steer.clone(),
        root: req.root.clone(),
        raw_dir: raw_dir.clone(),
        interrupted: Arc::clone(&interrupted),
    };
    let total = cases.len();
    let mut results = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let result = if interrupted.load(Ordering::SeqCst) {
            let argv = case.argv(
                req.quick,
                &req.steer.display().to_string(),
                &req.root.display().to_string(),
            );
            CaseResult::not_run(case, argv, "run interrupted before this case".into())
        } else {
            on_event(Event::Start { index, total, case });
            let mut result = run_case(case, &cfg, |rep| {
                on_event(Event::Repetition { case, rep });
            });
            if interrupted.load(Ordering::SeqCst) && result.state != State::NoRun {
                result.state = State::NoRun;
                result.reason = "interrupted (SIGINT/SIGTERM)".into();
            }
            result
        };
        history.record(run, &meta, &result)?;
        on_event(Event::Done {
            index,
            total,
            result: &result,
        });
        results.push(result);
    }
    let status = if interrupted.load(Ordering::SeqCst) {
        "interrupted"
    } else {
        "complete"
    };
    history.finish_run(run, status)?;
    Ok(RunSummary {
        run,
        status: status.into(),
        db: history.path().display().to_string(),
        raw_dir: raw_dir.display().to_string(),
        results,
    })
}

/// Raw outputs live beside the database: `<db>.raw/<run>/`.
pub fn raw_root(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".raw");
    db.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::case::Better;
    use crate::runner::MetricSamples;

    fn result(case_id: &str, state: State, metrics: &[(&str, &[f64])]) -> CaseResult {
        CaseResult {
            case_id: case_id.into(),
            name: case_id.into(),
            params: BTreeMap::new(),
            command: Vec::new(),
            state,
            reason: if state == State::Pass {
                String::new()
            } else {
                "exit status 3".into()
            },
            metrics: metrics
                .iter()
                .map(|(name, values)| {
                    let samples = MetricSamples {
                        unit: "Gbit/s".into(),
                        better: Better::Higher,
                        values: values.to_vec(),
                    };
                    (name.to_string(), samples)
                })
                .collect(),
            repetitions: Vec::new(),
            seconds: 1.5,
        }
    }

    #[test]
    fn a_run_reads_as_its_cases_then_the_count_of_each_state() {
        let summary = RunSummary {
            run: 4,
            status: "complete".into(),
            db: "h.sqlite".into(),
            raw_dir: "h.sqlite.raw/4".into(),
            results: vec![
                result("a", State::Pass, &[("empty", &[]), ("rate", &[1.0, 2.0])]),
                result("b", State::NoExit, &[]),
                result("c", State::Fail, &[("rate", &[])]),
            ],
        };
        let text = summary.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "case   state  seconds       first metric         reason"
        );
        // The first metric with samples, nothing for a case without
        // metrics, and n/a for one whose metrics were not measured.
        assert_eq!(
            lines[1],
            "a       PASS      1.5  rate 1.500 Gbit/s               "
        );
        assert_eq!(
            lines[2],
            "b     NOEXIT      1.5                     exit status 3"
        );
        assert!(
            lines[3].starts_with("c       FAIL      1.5                n/a"),
            "{text}"
        );
        assert_eq!(
            lines[4],
            "run 4 complete: 1 PASS, 1 FAIL, 1 NOEXIT; history h.sqlite; raw outputs h.sqlite.raw/4"
        );
    }
}
