//! How an ooo run reads: a progress line per cell, then each sender's and
//! bound's tail FCTs against the unbounded receiver's, beside thesis
//! Table 5.3's rows for the same congestion controls.

use plot::text::{measured, Table, Text};
use toe::ooo::OooBound;

use super::{thesis_ratios, Cell, KindSummary, OooParams, OooResult, SenderCc, Tail, ThesisRow};

impl OooParams {
    /// The line a run starts with.
    pub fn progress_header(&self) -> String {
        let senders: Vec<String> = self.senders.iter().map(ToString::to_string).collect();
        format!(
            "ooo: {} repetitions x {} senders ({}) x {} bounds x {} s; {} Mbit/s bottleneck, CE \
             marks past {} frames, {}% loss, delays {}-{} us",
            self.repetitions,
            self.senders.len(),
            senders.join(", "),
            self.bounds.len(),
            self.seconds,
            self.rate_mbit,
            self.ecn_mark_frames,
            self.loss_percent,
            self.delay_min_us,
            self.delay_max_us
        )
    }
}

impl Cell {
    /// One line as the cell ends: its flows' p90 FCTs and what the wire did.
    pub fn progress_line(&self) -> String {
        let p = |v: &[f64], q| measured(stats::percentile(v, q), 1);
        format!(
            "  rep {} {:>7} {:>9} intervals: {} short (p90 {} ms), {} background (p90 {} ms), \
             {} failed; wire lost {} + {} queue, reordered {}, ECN-capable {}, CE marked {}{}",
            self.repetition,
            self.sender.to_string(),
            self.bound.to_string(),
            self.short_fct_ms.len(),
            p(&self.short_fct_ms, 90.0),
            self.background_fct_ms.len(),
            p(&self.background_fct_ms, 90.0),
            self.failed,
            self.wire.dropped_policy,
            self.wire.dropped_overload,
            self.wire.reordered,
            self.wire.ecn_capable,
            self.wire.ce_marked,
            if self.verified { "" } else { " (NOT VERIFIED)" }
        )
    }
}

/// "12.3 +-0.4 (x1.05)": pooled percentile, CI of the per-repetition
/// ones, ratio to the unbounded receiver.
fn tail(t: &Tail, ratio: Option<f64>) -> String {
    let ci = t
        .per_repetition
        .as_ref()
        .and_then(|s| s.ci95)
        .map_or(String::new(), |c| format!(" +-{c:.1}"));
    format!("{}{ci} (x{})", measured(t.pooled_ms, 1), measured(ratio, 2))
}

fn measured_row(
    sender: SenderCc,
    bound: OooBound,
    s: &KindSummary,
    b: &KindSummary,
) -> Vec<String> {
    vec![
        sender.to_string(),
        bound.to_string(),
        tail(&s.p90, s.p90_vs_unbounded),
        tail(&s.p99, s.p99_vs_unbounded),
        tail(&s.p99_9, s.p99_9_vs_unbounded),
        tail(&b.p90, b.p90_vs_unbounded),
        tail(&b.p99_9, b.p99_9_vs_unbounded),
        format!("{}/{}", s.flows, b.flows),
    ]
}

/// Table 5.3's rows of one congestion control, with their ratios to its
/// unbounded row.
fn thesis_rows(sender: SenderCc, rows: &[ThesisRow]) -> Vec<Vec<String>> {
    rows.iter()
        .zip(thesis_ratios(rows))
        .map(|(t, ratios)| {
            let times = t.times_ms().into_iter().zip(ratios).map(|(v, x)| match x {
                Some(x) => format!("{v} (x{x:.2})"),
                None => v.to_string(),
            });
            [sender.to_string(), t.bound.to_string()]
                .into_iter()
                .chain(times)
                .collect()
        })
        .collect()
}

impl OooResult {
    fn measured_table(&self) -> Table {
        let mut table = Table::new(&[
            "sender",
            "intervals",
            "short p90 ms",
            "short p99 ms",
            "short p99.9 ms",
            "bg p90 ms",
            "bg p99.9 ms",
            "flows",
        ]);
        for s in &self.senders {
            for b in &s.bounds {
                table.push(measured_row(s.sender, b.bound, &b.short, &b.background));
            }
        }
        table
    }

    /// Table 5.3's rows of the congestion controls that ran.
    fn thesis_table(&self) -> Table {
        let mut table = Table::new(&[
            "Table 5.3",
            "intervals",
            "fg p90 ms",
            "fg p99.9 ms",
            "bg p90 ms",
            "bg p99.9 ms",
        ]);
        for (sender, rows) in [
            (SenderCc::NewReno, &self.thesis_newreno),
            (SenderCc::Dctcp, &self.thesis_dctcp),
        ] {
            if self.params.senders.contains(&sender) {
                table.rows.extend(thesis_rows(sender, rows));
            }
        }
        table
    }
}

impl OooResult {
    pub(super) fn render(&self) -> Text {
        let mut text = Text::new()
            .table(self.measured_table())
            .blank()
            .table(self.thesis_table())
            .line(
                "(thesis: ns-3, 96-node leaf-spine incast, SACK; here: one lab bottleneck, \
                 no SACK: compare trends)",
            );
        for s in &self.senders {
            text = text.line(format!(
                "{}: {} frames ECN-capable at the bottleneck, {} marked CE",
                s.sender, s.wire_ecn_capable, s.wire_ce_marked
            ));
        }
        text.line(format!(
            "byte-exact: {} (every flow's reply carried its request's length and digest)",
            if self.byte_exact { "yes" } else { "NO" }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cell, reno_cells_twice_as_slow, report, unbounded_and_none};
    use super::*;
    use plot::text::Present;

    #[test]
    fn measured_rows_stand_beside_the_thesis_rows_of_the_same_sender() {
        let params = OooParams {
            senders: vec![SenderCc::NewReno],
            ..unbounded_and_none()
        };
        let text = report(&params, reno_cells_twice_as_slow())
            .text()
            .to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("sender   intervals  short p90 ms"));
        assert!(lines[1].starts_with("newreno  unbounded"));
        assert!(lines[2].contains("2.0 (x2.00)"), "{}", lines[2]);
        assert!(text.contains("\nTable 5.3  intervals"));
        assert!(text.contains("5.8 (x1.17)"), "{text}");
        assert!(!text.contains("dctcp"), "DCTCP did not run:\n{text}");
        assert!(text.contains("newreno: 0 frames ECN-capable at the bottleneck, 0 marked CE\n"));
        assert!(text.ends_with(
            "byte-exact: yes (every flow's reply carried its request's length and digest)\n"
        ));
    }

    #[test]
    fn a_bound_without_flows_reads_na() {
        let r = report(
            &unbounded_and_none(),
            vec![
                cell(OooBound::Unbounded, vec![1.0], true),
                cell(OooBound::Intervals(0), vec![], false),
            ],
        );
        let text = r.text().to_string();
        assert!(text.contains("n/a (xn/a)"), "{text}");
        assert!(text.ends_with(
            "byte-exact: NO (every flow's reply carried its request's length and digest)\n"
        ));
        let empty = cell(OooBound::Intervals(0), vec![], false);
        assert!(empty
            .progress_line()
            .contains("0 short (p90 n/a ms), 1 background (p90 100.0 ms), 1 failed"));
        assert!(empty.progress_line().ends_with(" (NOT VERIFIED)"));
    }
}
