//! `steer bench check`: state regressions against a committed baseline.
//!
//! The baseline (`bench/matrix/baseline.json`) maps case ids to the state
//! they had in a real run. A case that was PASS there and is anything else
//! in the checked run is a regression. Throughput never is: metrics are noisy
//! on shared machines, and compare shows them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::db::ResultRow;
use crate::{BenchError, State};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// Where the states come from (command, commit, machine).
    #[serde(default)]
    pub about: String,
    pub cases: BTreeMap<String, State>,
}

impl Baseline {
    pub fn load(path: &Path) -> Result<Baseline, BenchError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::io(format!("read {}", path.display()), e))?;
        serde_json::from_str(&text).map_err(|e| BenchError::Baseline {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// This baseline with the states of `rows` merged in.
    pub fn updated(mut self, rows: &[ResultRow], about: String) -> Baseline {
        for r in rows {
            self.cases.insert(r.case_id.clone(), r.state);
        }
        self.about = about;
        self
    }

    pub fn save(&self, path: &Path) -> Result<(), BenchError> {
        let text = serde_json::to_string_pretty(self).unwrap_or_default() + "\n";
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

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub run: i64,
    pub lines: Vec<CheckLine>,
    /// Baseline PASS cases the run did not include (filtered out): not judged.
    pub not_in_run: usize,
}

impl CheckReport {
    pub fn regressions(&self) -> usize {
        self.lines.iter().filter(|l| l.regression).count()
    }
}

pub fn check(baseline: &Baseline, run: i64, rows: &[ResultRow]) -> CheckReport {
    let lines: Vec<CheckLine> = rows
        .iter()
        .map(|r| {
            let base = baseline.cases.get(&r.case_id).copied();
            CheckLine {
                case_id: r.case_id.clone(),
                baseline: base,
                now: r.state,
                reason: r.reason.clone(),
                regression: base == Some(State::Pass) && r.state != State::Pass,
            }
        })
        .collect();
    let not_in_run = baseline
        .cases
        .iter()
        .filter(|(id, s)| **s == State::Pass && !rows.iter().any(|r| &r.case_id == *id))
        .count();
    CheckReport {
        run,
        lines,
        not_in_run,
    }
}
