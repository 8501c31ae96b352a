//! How an SRPIC run reads: a progress line per run, then one row per cell
//! (Tables 4 and 5 of the paper, both sides) and what sorting changed.

use plot::text::{or_na, pm, Table, Text};
use stats::Stat;

use super::{cells, Change, Effect, Sample, SrpicParams, SrpicResult, Summary};

impl SrpicParams {
    /// The line a run starts with.
    pub fn progress_header(&self) -> String {
        format!(
            "srpic: {} configurations x {} repetitions x {} s",
            cells(self).len(),
            self.repetitions,
            self.seconds
        )
    }
}

impl Sample {
    /// One line as the run ends: its cell and what it measured.
    pub fn progress_line(&self) -> String {
        let c = &self.cell;
        format!(
            "  rep {} {} {:?} {} streams spread {} drop {} gro {} srpic {}: {:.0} Mbit/s, \
             {:.2} retrans/Mbit, {:.1} dup ACKs/Mbit, block {:.1}, merge {}",
            self.repetition,
            c.kind,
            c.sender,
            c.streams,
            c.spread,
            c.drop,
            c.gro,
            c.srpic,
            self.mbit_per_s,
            self.retrans_per_mbit,
            self.dup_acks_per_mbit,
            self.mean_block,
            or_na(self.merge_ratio, |m| format!("{m:.2}"))
        )
    }
}

/// "mean ± ci" with `digits` decimals.
fn mean_ci(s: Stat, digits: usize) -> String {
    pm(s.mean, s.ci95, 1.0, digits)
}

fn summary_row(s: &Summary) -> Vec<String> {
    let c = s.cell;
    vec![
        c.kind.to_string(),
        c.sender.name().to_string(),
        c.streams.to_string(),
        format!("{}%", c.spread * 100.0),
        format!("{}%", c.drop * 100.0),
        if c.gro { "on" } else { "off" }.into(),
        if c.srpic { "SRPIC" } else { "none" }.into(),
        mean_ci(s.mbit_per_s, 0),
        mean_ci(s.retrans_per_mbit, 2),
        mean_ci(s.dup_acks_per_mbit, 1),
        mean_ci(s.ofo_per_mbit, 1),
        format!("{:.1}", s.mean_block.mean),
        or_na(s.merge_ratio, |m| mean_ci(m, 2)),
    ]
}

/// "+0.12 [-0.03, +0.27]": a change and its 95% interval.
fn change(c: Change) -> String {
    match (c.low, c.high) {
        (Some(l), Some(h)) => format!("{:+.2} [{l:+.2}, {h:+.2}]", c.mean),
        _ => format!("{:+.2} [n/a]", c.mean),
    }
}

/// What SRPIC changed in one GRO-path cell, or "n/a" without the cell.
fn effect_line(name: &str, effect: &Option<Effect>) -> String {
    match effect {
        Some(e) => format!(
            "GRO path, {name} (spread {}%): SRPIC changes segs/skb by {}, dup ACKs/Mbit by {} \
             (95% CI)",
            e.spread * 100.0,
            change(e.merge_ratio_change),
            change(e.dup_acks_per_mbit_change)
        ),
        None => format!("GRO path, {name}: n/a"),
    }
}

impl SrpicResult {
    pub(super) fn render(&self) -> Text {
        let table = Table::of(
            &[
                "runs",
                "sender",
                "streams",
                "spread",
                "drop",
                "GRO",
                "receiver",
                "Mbit/s",
                "retrans/Mbit",
                "dupACK/Mbit",
                "OFO/Mbit",
                "block",
                "segs/skb",
            ],
            &self.summaries,
            summary_row,
        );
        let x = |r: Option<f64>| or_na(r, |r| format!("x{r:.2}"));
        Text::new()
            .table(table)
            .line(format!(
                "SRPIC / none, reordering runs: dup ACKs {}, throughput {}",
                x(self.dup_ack_ratio),
                x(self.throughput_ratio)
            ))
            .line(format!(
                "GRO path / TAP path throughput: {}",
                x(self.gro_path_throughput_ratio)
            ))
            .line(effect_line("most reordered", &self.gro_effect.reordered))
            .line(effect_line("in order", &self.gro_effect.in_order))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cell, result_of, summary_of};
    use super::*;
    use plot::text::Present;

    #[test]
    fn the_table_names_each_cell_and_the_ratios() {
        let mut r = result_of(vec![
            summary_of(cell("reorder", false), 800.0, 4.0),
            summary_of(cell("reorder", true), 900.0, 1.0),
        ]);
        r.dup_ack_ratio = Some(0.25);
        let text = r.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("runs     sender  streams  spread"));
        assert!(lines[0].ends_with("segs/skb"));
        assert!(lines[1].starts_with("reorder  static        1      1%    0%  off      none"));
        assert!(lines[2].contains("SRPIC"));
        assert_eq!(
            lines[3],
            "SRPIC / none, reordering runs: dup ACKs x0.25, throughput n/a"
        );
    }

    #[test]
    fn absent_values_read_na() {
        let text = result_of(vec![summary_of(cell("drop", false), 700.0, 4.0)])
            .text()
            .to_string();
        // One run: no interval; no GRO path: no merge ratio, no effect.
        let row = text.lines().nth(1).unwrap();
        assert!(row.contains("700 ± n/a"), "{row}");
        assert!(row.ends_with("n/a"), "{row}");
        assert!(text.contains("GRO path / TAP path throughput: n/a\n"));
        assert!(text.contains("GRO path, most reordered: n/a\nGRO path, in order: n/a\n"));
        let interval = Change {
            mean: 0.5,
            low: None,
            high: None,
        };
        assert_eq!(change(interval), "+0.50 [n/a]");
    }

    #[test]
    fn a_run_without_a_merge_ratio_says_so() {
        let run = super::super::effect::tests::sample(cell("reorder", true), None, 2.5);
        assert_eq!(
            run.progress_line(),
            "  rep 0 reorder Static 1 streams spread 0.01 drop 0 gro false srpic true: \
             900 Mbit/s, 0.00 retrans/Mbit, 2.5 dup ACKs/Mbit, block 8.0, merge n/a"
        );
    }
}
