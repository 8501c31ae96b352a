//! `steer bench compare A B`: per case, the state change and, per metric,
//! the change of the mean judged against the noise band of both runs.

use std::collections::BTreeMap;

use plot::text::{Present, Table, Text};
use serde::Serialize;

use crate::case::Better;
use crate::db::{History, ResultRow};
use crate::stats::Summary;
use crate::{BenchError, State};

/// How a case or a metric moved from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Same state; every metric within the noise.
    Same,
    /// PASS -> anything else.
    Regression,
    /// anything else -> PASS.
    Fixed,
    /// Another state change (e.g. NOEXIT -> TIMEOUT).
    StateChanged,
    /// A metric moved beyond the noise band in its worse direction.
    Worse,
    /// A metric moved beyond the noise band in its better direction.
    Better,
    /// Beyond the noise band, for a metric without a direction.
    Changed,
    /// Only in one of the runs.
    Missing,
}

impl Verdict {
    /// The verdict in a table: a regression in capitals, so it stands out.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Regression => "REGRESSION",
            Verdict::Fixed => "fixed",
            Verdict::StateChanged => "state changed",
            Verdict::Worse => "worse",
            Verdict::Better => "better",
            Verdict::Changed => "changed",
            Verdict::Missing => "missing",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricChange {
    pub metric: String,
    pub unit: String,
    pub a: Option<Summary>,
    pub b: Option<Summary>,
    /// (b - a) / |a|, in percent.
    pub change_percent: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseChange {
    pub case_id: String,
    pub state_a: Option<State>,
    pub state_b: Option<State>,
    pub verdict: Verdict,
    pub metrics: Vec<MetricChange>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub run_a: i64,
    pub run_b: i64,
    pub commit_a: String,
    pub commit_b: String,
    pub cases: Vec<CaseChange>,
}

impl Comparison {
    pub fn regressions(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.verdict == Verdict::Regression)
            .count()
    }
}

/// A table of each case's state change and verdict, its metrics beneath
/// it (`mean [band] n=` in A and B, the change), then the count of state
/// regressions. Absent states and values read "-".
impl Present for Comparison {
    fn text(&self) -> Text {
        let header = [
            "case / metric",
            "state",
            "verdict",
            "A mean [band]",
            "B mean [band]",
            "change",
            "unit",
        ];
        let state = |s: Option<State>| s.map_or("-".to_string(), |s| s.to_string());
        let band = |s: &Option<Summary>| {
            s.map_or("-".into(), |s| {
                format!("{:.3} [{:.3}..{:.3}] n={}", s.mean, s.low, s.high, s.n)
            })
        };
        let mut table = Table::new(&header);
        for c in &self.cases {
            table.push(vec![
                c.case_id.clone(),
                format!("{} -> {}", state(c.state_a), state(c.state_b)),
                c.verdict.label().into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            for m in &c.metrics {
                table.push(vec![
                    format!("  {}", m.metric),
                    String::new(),
                    m.verdict.label().into(),
                    band(&m.a),
                    band(&m.b),
                    m.change_percent.map_or("-".into(), |p| format!("{p:+.1}%")),
                    m.unit.clone(),
                ]);
            }
        }
        Text::new()
            .line(format!(
                "run {} ({}) -> run {} ({})",
                self.run_a, self.commit_a, self.run_b, self.commit_b
            ))
            .table(table)
            .line(format!(
                "{} state regressions (PASS -> not PASS); metric changes are flagged only beyond the noise band",
                self.regressions()
            ))
    }
}

pub fn compare(history: &History, a: &str, b: &str) -> Result<Comparison, BenchError> {
    let (ra, rb) = (history.resolve(a)?, history.resolve(b)?);
    let (runa, runb) = (history.run(ra)?, history.run(rb)?);
    let rows_a = history.results(ra)?;
    let rows_b = history.results(rb)?;
    Ok(Comparison {
        run_a: ra,
        run_b: rb,
        commit_a: runa.git_commit,
        commit_b: runb.git_commit,
        cases: compare_rows(&rows_a, &rows_b),
    })
}

/// The change of every case in `a` or `b` (order: `b`'s, then `a`-only).
pub fn compare_rows(a: &[ResultRow], b: &[ResultRow]) -> Vec<CaseChange> {
    let mut ids: Vec<&str> = b.iter().map(|r| r.result.case_id.as_str()).collect();
    for r in a {
        if !ids.contains(&r.result.case_id.as_str()) {
            ids.push(&r.result.case_id);
        }
    }
    ids.into_iter()
        .map(|id| {
            let ra = a.iter().find(|r| r.result.case_id == id);
            let rb = b.iter().find(|r| r.result.case_id == id);
            case_change(id, ra, rb)
        })
        .collect()
}

pub fn case_change(id: &str, a: Option<&ResultRow>, b: Option<&ResultRow>) -> CaseChange {
    let empty = BTreeMap::new();
    let sa = a.map_or(&empty, |r| &r.result.metrics);
    let sb = b.map_or(&empty, |r| &r.result.metrics);
    let mut names: Vec<&String> = sb.keys().collect();
    names.extend(sa.keys().filter(|k| !sb.contains_key(*k)));
    let metrics: Vec<MetricChange> = names
        .into_iter()
        .map(|name| {
            let ma = sa.get(name);
            let mb = sb.get(name);
            let better = mb.or(ma).map_or(Better::None, |m| m.better);
            let unit = mb.or(ma).map(|m| m.unit.clone()).unwrap_or_default();
            let xa = ma.and_then(|m| Summary::of(&m.values));
            let xb = mb.and_then(|m| Summary::of(&m.values));
            let (change_percent, verdict) = match (xa, xb) {
                (Some(x), Some(y)) => {
                    let pct = (x.mean != 0.0).then(|| (y.mean - x.mean) / x.mean.abs() * 100.0);
                    let verdict = if !x.differs_from(&y) {
                        Verdict::Same
                    } else {
                        match (better, y.mean > x.mean) {
                            (Better::None, _) => Verdict::Changed,
                            (Better::Higher, true) | (Better::Lower, false) => Verdict::Better,
                            _ => Verdict::Worse,
                        }
                    };
                    (pct, verdict)
                }
                _ => (None, Verdict::Missing),
            };
            MetricChange {
                metric: name.clone(),
                unit,
                a: xa,
                b: xb,
                change_percent,
                verdict,
            }
        })
        .collect();
    let (state_a, state_b) = (a.map(|r| r.result.state), b.map(|r| r.result.state));
    let verdict = match (state_a, state_b) {
        (Some(x), Some(y)) if x == y => {
            let of = |v: Verdict| metrics.iter().any(|m| m.verdict == v);
            if of(Verdict::Worse) {
                Verdict::Worse
            } else if of(Verdict::Better) {
                Verdict::Better
            } else if of(Verdict::Changed) {
                Verdict::Changed
            } else {
                Verdict::Same
            }
        }
        (Some(State::Pass), Some(_)) => Verdict::Regression,
        (Some(_), Some(State::Pass)) => Verdict::Fixed,
        (Some(_), Some(_)) => Verdict::StateChanged,
        _ => Verdict::Missing,
    };
    CaseChange {
        case_id: id.into(),
        state_a,
        state_b,
        verdict,
        metrics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{CaseResult, MetricSamples};

    fn row(state: State, rate: &[f64]) -> ResultRow {
        let samples = MetricSamples {
            unit: "Gbit/s".into(),
            better: Better::Higher,
            values: rate.to_vec(),
        };
        ResultRow {
            run_id: 1,
            result: CaseResult {
                case_id: "a".into(),
                name: "a".into(),
                params: BTreeMap::new(),
                command: Vec::new(),
                state,
                reason: String::new(),
                metrics: [("rate".to_string(), samples)].into(),
                repetitions: Vec::new(),
                seconds: 0.0,
            },
            raw_path: None,
            timestamp: 0,
        }
    }

    #[test]
    fn a_comparison_reads_cases_with_their_metrics_and_absent_values_as_dashes() {
        let (a, b) = (row(State::Pass, &[1.0, 3.0]), row(State::Fail, &[]));
        let cmp = Comparison {
            run_a: 1,
            run_b: 2,
            commit_a: "abc".into(),
            commit_b: "def".into(),
            cases: compare_rows(&[a], &[b]),
        };
        let text = cmp.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "run 1 (abc) -> run 2 (def)");
        assert!(
            lines[1].starts_with("case / metric         state     verdict"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("a              PASS -> FAIL  REGRESSION"),
            "{text}"
        );
        assert!(
            lines[3].ends_with("missing  2.000 [0.000..4.000] n=2              -       -  Gbit/s"),
            "{text}"
        );
        assert_eq!(
            lines[4],
            "1 state regressions (PASS -> not PASS); metric changes are flagged only beyond the noise band"
        );
    }
}
