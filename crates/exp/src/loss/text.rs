//! How a loss run reads: a line per transfer as it ends, then one row per
//! engine and cell beside Linux, and whether the kernel has DCTCP.

use plot::text::{measured, or_na, Table, Text};

use super::{Cell, LossParams, LossResult, Sample};

impl LossParams {
    /// The line a run starts with.
    pub fn progress_header(&self) -> String {
        let settings = self.settings().len();
        let transfers = self.transfers().len();
        format!(
            "loss: {settings} wire settings x {transfers} transfers x {} repetitions, {} s each \
             (about {:.0} min)",
            self.repetitions,
            self.seconds,
            (settings * transfers) as f64 * f64::from(self.repetitions) * (self.seconds + 0.5)
                / 60.0
        )
    }
}

impl Sample {
    /// One line as the transfer ends.
    pub fn progress_line(&self) -> String {
        format!(
            "  rep {} {}: {} Mbit/s, {} retransmissions / {} drops, {} RTOs{}",
            self.repetition,
            self.id,
            measured(self.goodput_mbit, 1),
            or_na(self.retransmissions, |r| r.to_string()),
            self.wire_drops,
            or_na(self.rtos, |r| r.to_string()),
            if self.byte_exact {
                ""
            } else {
                " (NOT BYTE-EXACT)"
            }
        )
    }
}

/// A count, or n/a.
fn count(v: Option<u64>) -> String {
    or_na(v, |v| v.to_string())
}

impl LossResult {
    fn cells_table(&self) -> Table {
        Table::of(
            &[
                "direction",
                "cc",
                "loss",
                "rtt ms",
                "rate",
                "engine",
                "Mbit/s",
                "linux Mbit/s",
                "ratio",
                "retx/drop",
                "linux retx/drop",
                "RTOs",
                "linux RTOs",
                "exact",
            ],
            &self.cells,
            |c: &Cell| {
                vec![
                    c.direction.name().into(),
                    c.cc.name().into(),
                    c.setting.loss.to_string(),
                    c.setting.rtt_ms.to_string(),
                    c.setting.rate.to_string(),
                    c.engine.name().into(),
                    measured(c.goodput_mbit.map(|g| g.mean), 1),
                    measured(c.linux_goodput_mbit.map(|g| g.mean), 1),
                    measured(c.ratio, 2),
                    measured(c.retransmissions_per_drop, 2),
                    measured(c.linux_retransmissions_per_drop, 2),
                    count(c.rtos),
                    count(c.linux_rtos),
                    if c.byte_exact { "yes" } else { "NO" }.into(),
                ]
            },
        )
    }
}

impl LossResult {
    pub(super) fn render(&self) -> Text {
        Text::new()
            .table(self.cells_table())
            .line("ratio: the data path's mean goodput / Linux's (issue 23's goal: at least 0.95)")
            .line(format!(
                "dctcp: {}",
                if self.dctcp.available == Some(true) {
                    format!("available ({})", self.dctcp.detail)
                } else {
                    self.dctcp.detail.clone()
                }
            ))
            .line(crate::datapath::byte_exact_line(self.byte_exact))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{quick_result, sample};
    use super::super::Stack;
    use plot::text::Present;

    #[test]
    fn one_row_per_engine_and_cell_beside_linux() {
        let r = quick_result();
        let text = r.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("direction    cc  loss  rtt ms   rate  engine  Mbit/s"));
        assert_eq!(
            lines[1],
            "receive    reno  0.1%       2  1gbit     toe   100.0         200.0   0.50       \
             1.20             1.20     1           1    yes"
        );
        // Two losses, two directions: four cells.
        assert_eq!(lines.len(), 1 + 4 + 3, "{text}");
        assert!(text.contains("dctcp: absent"));
        assert!(text.ends_with("byte-exact: yes (every transfer checked byte for byte)\n"));
        let line = sample(Stack::Toe, Some(1.0), None).progress_line();
        assert!(line.contains("n/a retransmissions"), "{line}");
    }
}
