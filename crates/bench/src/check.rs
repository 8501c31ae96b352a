//! `steer bench check`: state regressions against a committed baseline.
//!
//! The baseline (`bench/matrix/baseline.json`) maps case ids to the state
//! they had in a real run, and holds only PASS: a case that cannot pass
//! here is excused by name with the reason (`excused`), never recorded as
//! a FAIL that later runs would match. A case that is not PASS in the
//! checked run is a regression unless it is excused, whether the baseline
//! knows it or not (a new case that fails is a failure, not "not
//! judged"); so is a baseline case the run's `--filter` selects that the
//! run does not have (renamed, dropped, or never recorded): a case that
//! silently stops running must not pass as "not judged". Throughput never
//! is a regression: metrics are noisy on shared machines, and compare
//! shows them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plot::text::{Present, Table, Text};
use serde::{Deserialize, Serialize};

use crate::case::matches_filter;
use crate::db::{History, ResultRow, RunRow};
use crate::{BenchError, State};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// Where the states come from (the run and its commit).
    #[serde(default)]
    pub about: String,
    /// The machine the states were recorded on, by its properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    pub cases: BTreeMap<String, State>,
    /// Cases that may be other than PASS, each with why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub excused: BTreeMap<String, String>,
}

/// A machine as `stats::Meta` records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: i64,
    pub kernel: String,
}

impl Baseline {
    /// The baseline in the file at `path`; a file that is not there is bad
    /// input (the user named it), as one that does not parse.
    pub fn load(path: &Path) -> Result<Baseline, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BenchError::Baseline {
                path: path.display().to_string(),
                reason: "no such file (`steer bench check --update` makes one)".into(),
            },
            _ => BenchError::io(format!("read {}", path.display()), e),
        })?;
        let baseline: Baseline = serde_json::from_str(&text).map_err(|e| BenchError::Baseline {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let unexcused = baseline
            .unexcused()
            .next()
            .map(|(id, state)| format!("case {id} is {state}"));
        match unexcused {
            Some(case) => Err(BenchError::Baseline {
                path: path.display().to_string(),
                reason: format!(
                    "{case}: a baseline holds only PASS (excuse a case in `excused` with the reason)"
                ),
            }),
            None => Ok(baseline),
        }
    }

    /// Cases recorded other than PASS without an excuse.
    fn unexcused(&self) -> impl Iterator<Item = (&String, State)> {
        self.cases
            .iter()
            .filter(|(id, s)| **s != State::Pass && !self.excused.contains_key(*id))
            .map(|(id, s)| (id, *s))
    }

    /// This baseline with the states of run `run`'s `rows` merged in, and
    /// the run's machine; an error names a case that is not PASS and not
    /// excused (a baseline holds only PASS).
    pub fn updated(mut self, run: &RunRow, rows: &[ResultRow]) -> Result<Baseline, BenchError> {
        if let Some(r) = rows.iter().find(|r| {
            r.result.state != State::Pass && !self.excused.contains_key(&r.result.case_id)
        }) {
            return Err(BenchError::Baseline {
                path: "(update)".into(),
                reason: format!(
                    "run {}: case {} is {}: only PASS goes into a baseline (fix it, or excuse it in `excused` with the reason)",
                    run.id, r.result.case_id, r.result.state
                ),
            });
        }
        for r in rows {
            self.cases.insert(r.result.case_id.clone(), r.result.state);
        }
        self.about = format!(
            "states from `steer bench run{}{}` (run {}), commit {}",
            if run.quick { " --quick" } else { "" },
            run.filter
                .as_deref()
                .map_or(String::new(), |f| format!(" --filter '{f}'")),
            run.id,
            run.git_commit
        );
        self.machine = Some(Machine {
            cpu_model: run.cpu_model.clone(),
            cores: run.cores,
            kernel: run.kernel.clone(),
        });
        Ok(self)
    }

    /// Merges run `run`'s states into the baseline file at `path` (made
    /// when there is none yet): `steer bench check --update`.
    pub fn update_file(path: &Path, run: &RunRow, rows: &[ResultRow]) -> Result<(), BenchError> {
        let old = if path.exists() {
            Baseline::load(path)?
        } else {
            Baseline::default()
        };
        let new = old.updated(run, rows).map_err(|e| match e {
            BenchError::Baseline { reason, .. } => BenchError::Baseline {
                path: path.display().to_string(),
                reason,
            },
            e => e,
        })?;
        new.save(path)
    }

    pub fn save(&self, path: &Path) -> Result<(), BenchError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| BenchError::Baseline {
            path: path.display().to_string(),
            reason: e.to_string(),
        })? + "\n";
        std::fs::write(path, text)
            .map_err(|e| BenchError::io(format!("write {}", path.display()), e))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    pub case_id: String,
    pub baseline: Option<State>,
    pub now: State,
    pub reason: String,
    pub regression: bool,
}

/// A baseline case the run selected but does not have.
#[derive(Debug, Clone, Serialize)]
pub struct MissingCase {
    pub case_id: String,
    pub baseline: State,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The baseline file, named in the text (the JSON has none; the caller
    /// chose the file).
    #[serde(skip)]
    pub baseline_file: PathBuf,
    pub run: i64,
    /// The run's `--filter` (none: the whole matrix).
    pub filter: Option<String>,
    pub lines: Vec<CheckLine>,
    /// Baseline cases the run's filter selects that are not in the run:
    /// each one is a regression.
    pub missing: Vec<MissingCase>,
    /// Baseline cases the run's filter does not select: not judged.
    pub not_selected: usize,
}

impl CheckReport {
    pub fn regressions(&self) -> usize {
        self.lines.iter().filter(|l| l.regression).count() + self.missing.len()
    }
}

/// One row per case of the run (baseline and current state, verdict,
/// reason), then the baseline cases missing from it, then a summary line.
impl Present for CheckReport {
    fn text(&self) -> Text {
        let state = |s: Option<State>| s.map_or("-".to_string(), |s| s.to_string());
        let header = ["case", "baseline", "now", "verdict", "reason"];
        let mut table = Table::of(&header, &self.lines, |l| {
            vec![
                l.case_id.clone(),
                state(l.baseline),
                l.now.to_string(),
                if l.regression { "REGRESSION" } else { "ok" }.into(),
                l.reason.clone(),
            ]
        });
        for m in &self.missing {
            table.push(vec![
                m.case_id.clone(),
                m.baseline.to_string(),
                "-".into(),
                "MISSING".into(),
                "selected by the run's filter, not in the run".into(),
            ]);
        }
        Text::from(table).line(format!(
            "run {}: {} regressions against {} ({} state changes, {} cases missing; {} baseline cases not selected by the filter {})",
            self.run,
            self.regressions(),
            self.baseline_file.display(),
            self.regressions() - self.missing.len(),
            self.missing.len(),
            self.not_selected,
            self.filter.as_deref().unwrap_or("(none)")
        ))
    }
}

/// Checks run `which` (`last`, a run id; [`History::resolve`]) of `history`
/// against the baseline file `baseline_file`.
pub fn check_run(
    history: &History,
    baseline_file: &Path,
    which: &str,
) -> Result<CheckReport, BenchError> {
    let run = history.resolve(which)?;
    let rows = history.results(run)?;
    let info = history.run(run)?;
    let baseline = Baseline::load(baseline_file)?;
    Ok(CheckReport {
        baseline_file: baseline_file.into(),
        ..check(&baseline, run, info.filter.as_deref(), &rows)
    })
}

/// Merges the states of run `which` of `history` into the baseline file
/// at `baseline_file` (`steer bench check --update`); returns the run's id.
pub fn update_baseline(
    history: &History,
    baseline_file: &Path,
    which: &str,
) -> Result<i64, BenchError> {
    let run = history.resolve(which)?;
    let rows = history.results(run)?;
    Baseline::update_file(baseline_file, &history.run(run)?, &rows)?;
    Ok(run)
}

/// Checks run `run` (its `filter` and its `rows`) against `baseline`.
pub fn check(
    baseline: &Baseline,
    run: i64,
    filter: Option<&str>,
    rows: &[ResultRow],
) -> CheckReport {
    let lines: Vec<CheckLine> = rows
        .iter()
        .map(|r| {
            let base = baseline.cases.get(&r.result.case_id).copied();
            let excused = baseline.excused.contains_key(&r.result.case_id);
            CheckLine {
                case_id: r.result.case_id.clone(),
                baseline: base,
                now: r.result.state,
                reason: r.result.reason.clone(),
                regression: r.result.state != State::Pass && !excused,
            }
        })
        .collect();
    let selected = |id: &str| filter.is_none_or(|f| matches_filter(id, f));
    let missing = baseline
        .cases
        .iter()
        .filter(|(id, _)| selected(id) && !rows.iter().any(|r| &r.result.case_id == *id))
        .map(|(id, s)| MissingCase {
            case_id: id.clone(),
            baseline: *s,
        })
        .collect();
    CheckReport {
        baseline_file: PathBuf::new(),
        run,
        filter: filter.map(Into::into),
        lines,
        missing,
        not_selected: baseline.cases.keys().filter(|id| !selected(id)).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, state: State) -> ResultRow {
        ResultRow {
            run_id: 1,
            result: crate::runner::CaseResult {
                case_id: id.into(),
                name: id.split('/').next().unwrap_or(id).into(),
                params: BTreeMap::new(),
                command: Vec::new(),
                state,
                reason: String::new(),
                metrics: BTreeMap::new(),
                repetitions: Vec::new(),
                seconds: 0.0,
            },
            raw_path: None,
            timestamp: 0,
        }
    }

    fn run_row(id: i64) -> RunRow {
        RunRow {
            id,
            started: 0,
            finished: None,
            status: "complete".into(),
            quick: true,
            filter: None,
            repetitions: 1,
            git_commit: "abc".into(),
            kernel: "6.18".into(),
            cpu_model: "cpu".into(),
            cores: 2,
            raw_dir: String::new(),
        }
    }

    #[test]
    fn update_file_makes_the_baseline_then_merges_into_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baseline.json");
        Baseline::update_file(&path, &run_row(1), &[row("a", State::Pass)]).unwrap();
        let rows = [row("a", State::Pass), row("b", State::Pass)];
        Baseline::update_file(&path, &run_row(2), &rows).unwrap();
        let b = Baseline::load(&path).unwrap();
        assert_eq!(b.cases.len(), 2);
        assert_eq!(b.cases["b"], State::Pass);
        assert!(b.about.contains("(run 2)"), "{}", b.about);
    }

    #[test]
    fn a_baseline_holds_only_pass_or_an_excused_case() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baseline.json");
        Baseline::update_file(&path, &run_row(1), &[row("a", State::Pass)]).unwrap();
        // A FAIL is not written: the file keeps its PASS.
        let rows = [row("a", State::Fail), row("b", State::Pass)];
        let err = Baseline::update_file(&path, &run_row(2), &rows).unwrap_err();
        assert!(err.to_string().contains("case a is FAIL"), "{err}");
        assert_eq!(Baseline::load(&path).unwrap().cases["a"], State::Pass);
        // A file with a FAIL no one excused is refused; excused, it loads,
        // and that case's FAIL is no regression.
        let mut b = Baseline::default();
        b.cases.insert("a".into(), State::Fail);
        b.save(&path).unwrap();
        let err = Baseline::load(&path).unwrap_err();
        assert!(err.to_string().contains("holds only PASS"), "{err}");
        b.excused
            .insert("a".into(), "needs a NIC this machine lacks".into());
        b.save(&path).unwrap();
        let b = Baseline::load(&path).unwrap();
        assert_eq!(
            check(&b, 1, None, &[row("a", State::Fail)]).regressions(),
            0
        );
        Baseline::update_file(&path, &run_row(3), &rows).unwrap();
    }

    fn baseline() -> Baseline {
        let mut b = Baseline::default();
        for id in ["demo/flows=16/queues=32", "srpic/streams=1", "lb-live"] {
            b.cases.insert(id.into(), State::Pass);
        }
        b
    }

    #[test]
    fn a_selected_baseline_case_missing_from_the_run_is_a_regression() {
        let rows = [
            row("demo/flows=16/queues=32", State::Pass),
            row("lb-live", State::Pass),
        ];
        let r = check(
            &baseline(),
            1,
            Some("demo/flows=16/*,srpic/*,lb-live"),
            &rows,
        );
        assert_eq!(r.regressions(), 1);
        assert_eq!(r.missing.len(), 1);
        assert_eq!(r.missing[0].case_id, "srpic/streams=1");
        // The whole matrix: every baseline case is expected.
        let r = check(&baseline(), 1, None, &rows);
        assert_eq!(r.regressions(), 1);
        // Not selected by the filter: not judged, not missing.
        let r = check(&baseline(), 1, Some("demo/*,lb-live"), &rows);
        assert_eq!((r.regressions(), r.not_selected), (0, 1));
    }

    #[test]
    fn a_report_reads_each_case_the_missing_ones_and_a_summary() {
        let rows = [
            row("demo/flows=16/queues=32", State::NoValue),
            row("new/case", State::Fail),
        ];
        let report = CheckReport {
            baseline_file: "b.json".into(),
            ..check(&baseline(), 3, Some("demo/*,srpic/*,new"), &rows)
        };
        let text = report.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("case  "), "{text}");
        assert!(
            lines[0].contains("  baseline      now     verdict"),
            "{text}"
        );
        assert!(lines[1].contains("PASS  NOVALUE  REGRESSION"), "{text}");
        // Not in the baseline ("-") and failing: a regression too.
        assert!(lines[2].contains("   -     FAIL  REGRESSION"), "{text}");
        assert!(lines[3].starts_with("srpic/streams=1"), "{text}");
        assert!(lines[3].contains("PASS        -     MISSING"), "{text}");
        assert_eq!(
            lines[4],
            "run 3: 3 regressions against b.json (2 state changes, 1 cases missing; \
             1 baseline cases not selected by the filter demo/*,srpic/*,new)"
        );
        let r = check(&baseline(), 3, None, &rows);
        assert!(r.text().to_string().ends_with("by the filter (none))\n"));
        // The JSON stays without the file.
        assert!(serde_json::to_value(&report)
            .unwrap()
            .get("baseline_file")
            .is_none());
    }

    #[test]
    fn a_run_is_checked_against_the_file_and_updates_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&dir.path().join("h.sqlite")).unwrap();
        let meta = stats::Meta::collect();
        let run = h.begin_run(&meta, true, None, 1, "raw").unwrap();
        h.record(run, &meta, &row("lb-live", State::Pass).result)
            .unwrap();
        let file = dir.path().join("b.json");
        let missing = check_run(&h, &file, "last").unwrap_err();
        assert!(missing.is_bad_input(), "{missing}");
        assert_eq!(update_baseline(&h, &file, "last").unwrap(), run);
        let report = check_run(&h, &file, "last").unwrap();
        assert_eq!((report.run, report.regressions()), (run, 0));
        assert_eq!(report.baseline_file, file);
        assert!(check_run(&h, &file, "prev").is_err(), "one run only");
    }

    #[test]
    fn pass_to_other_states_is_a_regression() {
        let rows = [
            row("demo/flows=16/queues=32", State::NoValue),
            row("srpic/streams=1", State::Pass),
            row("lb-live", State::Pass),
            row("new/case", State::Fail),
        ];
        let r = check(&baseline(), 1, None, &rows);
        assert_eq!(r.regressions(), 2);
        assert!(r.lines[0].regression);
        // A case the baseline does not know fails as any other.
        assert!(r.lines[3].regression);
    }

    #[test]
    fn the_baseline_records_the_machine_not_a_path() {
        let run = RunRow {
            id: 7,
            started: 0,
            finished: None,
            status: "complete".into(),
            quick: true,
            filter: Some("lb-live".into()),
            repetitions: 1,
            git_commit: "abc".into(),
            kernel: "6.1".into(),
            cpu_model: "Some CPU".into(),
            cores: 2,
            raw_dir: "x".into(),
        };
        let b = Baseline::default()
            .updated(&run, &[row("lb-live", State::Pass)])
            .unwrap();
        assert_eq!(
            b.machine,
            Some(Machine {
                cpu_model: "Some CPU".into(),
                cores: 2,
                kernel: "6.1".into()
            })
        );
        assert!(
            b.about.contains("--quick --filter 'lb-live'"),
            "{}",
            b.about
        );
        let text = serde_json::to_string(&b).unwrap();
        let back: Baseline = serde_json::from_str(&text).unwrap();
        assert_eq!(back.machine, b.machine);
    }
}
