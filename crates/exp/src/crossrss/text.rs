//! How a live run reads: a progress line per policy and repetition, the
//! experiment's table (`steer exp crossrss`: mean and 95% CI over the
//! repetitions) and the one-run table (`steer lb run`: where the
//! connections went and how often the controller stepped).

use plot::text::{measured, or_na, pm, Present, Table, Text};
use serde::Serialize;

use super::{CrossRssResult, LivePolicyResult, Stat};

/// A fraction as a percentage, "mean ± ci", or "n/a" when not measured.
fn percent_ci(s: Option<Stat>) -> String {
    or_na(s, |s| pm(s.mean, s.ci95, 100.0, 3))
}

/// A fraction as a percentage (3 decimals), or "n/a" when not measured.
fn percent(v: Option<f64>) -> String {
    plot::text::percent(v, 3, "")
}

impl LivePolicyResult {
    /// One line as repetition `rep` of this policy ends.
    pub fn progress_line(&self, rep: usize) -> String {
        let v = |x: Option<f64>| measured(x, 4);
        format!(
            "  rep {rep} {:<14} core variance {} server variance {} {} connections, {} failed",
            self.name,
            v(self.core_variance),
            v(self.server_variance),
            self.connections,
            self.failures
        )
    }
}

impl CrossRssResult {
    pub(super) fn render(&self) -> Text {
        Table::of(
            &[
                "policy",
                "reps",
                "core var % (95% CI)",
                "server var %",
                "Mbit/s",
                "LB pkt/s",
                "connections",
                "failures",
            ],
            &self.policies,
            |p| {
                let s = &p.stats;
                vec![
                    p.name.to_string(),
                    s.n.to_string(),
                    percent_ci(s.core_variance),
                    percent_ci(s.server_variance),
                    pm(s.throughput_mbit.mean, s.throughput_mbit.ci95, 1.0, 1),
                    format!("{:.0}", p.lb_packets_per_s),
                    p.connections.to_string(),
                    pm(s.failures.mean, s.failures.ci95, 1.0, 1),
                ]
            },
        )
        .into()
    }
}

/// A result read as one run (`steer lb run`): each policy's variances,
/// and from its first repetition the connections each backend answered
/// and the controller's steps. Its JSON is the result's own.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(transparent)]
pub struct FirstRepetition<'a>(pub &'a CrossRssResult);

impl Present for FirstRepetition<'_> {
    fn text(&self) -> Text {
        Table::of(
            &[
                "policy",
                "core var %",
                "server var %",
                "per backend",
                "controller steps",
                "connections",
                "failures",
            ],
            &self.0.policies,
            |p| {
                let first = p.repetitions.first();
                vec![
                    p.name.to_string(),
                    percent(p.core_variance),
                    percent(p.server_variance),
                    // A policy without a repetition measured neither.
                    or_na(first, |r| format!("{:?}", r.per_backend)),
                    or_na(first, |r| r.controller.steps.to_string()),
                    p.connections.to_string(),
                    p.failures.to_string(),
                ]
            },
        )
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{rep, result};
    use super::super::PolicySummary;
    use super::*;

    fn two_policies() -> CrossRssResult {
        result(vec![
            PolicySummary::new("hash", vec![rep(Some(0.5)), rep(Some(0.25))]).unwrap(),
            PolicySummary::new("crossrss", vec![rep(None)]).unwrap(),
        ])
    }

    #[test]
    fn the_experiment_table_has_intervals_and_na_when_unmeasured() {
        let text = two_policies().text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("policy    reps  core var % (95% CI)"),
            "{text}"
        );
        assert!(
            lines[1]
                .starts_with("hash         2     37.500 ± 158.828  37.500 ± 158.828  1.0 ± 0.0"),
            "{text}"
        );
        assert!(
            lines[2]
                .starts_with("crossrss     1                  n/a               n/a  1.0 ± n/a"),
            "{text}"
        );
        assert_eq!(
            rep(None).progress_line(1),
            "  rep 1 hash           core variance n/a server variance n/a 1 connections, 0 failed"
        );
    }

    #[test]
    fn the_one_run_table_shows_the_first_repetition_and_the_same_json() {
        let r = two_policies();
        let view = FirstRepetition(&r);
        let text = view.text().to_string();
        assert_eq!(
            text,
            "policy    core var %  server var %  per backend  controller steps  connections  failures\n\
             hash          37.500        37.500           []                 0            2         0\n\
             crossrss         n/a           n/a           []                 0            1         0\n"
        );
        assert_eq!(
            serde_json::to_value(view).unwrap(),
            serde_json::to_value(&r).unwrap()
        );
        // A policy without a repetition has no backends or steps to show.
        let mut none = two_policies();
        none.policies[1].repetitions.clear();
        let text = FirstRepetition(&none).text().to_string();
        let row: Vec<&str> = text.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(row[..5], ["crossrss", "n/a", "n/a", "n/a", "n/a"], "{text}");
    }
}
