//! How a [`SweepReport`] reads: one row per window length, every variance
//! in % of the mean core load.

use plot::text::{measured, Present, Table, Text};

use super::{SweepReport, WindowStats};
use crate::sim::text::percent;

/// A title naming the trace, then what limits the balance at each window
/// length (connections per window, every policy, the oracles, the floor);
/// nothing when no window length was swept.
impl Present for SweepReport {
    fn text(&self) -> Text {
        let Some(first) = self.points.first() else {
            return Text::new();
        };
        let mut header: Vec<&str> =
            vec!["window s", "windows", "pkts/core", "conns", "new", "N_eff"];
        header.extend(first.policies.iter().map(|v| v.name));
        header.extend(["clairvoyant", "oracle", "floor", "random", "best baseline"]);
        let table = Table::of(&header, &self.points, |p| {
            let s = p.stats;
            let stat = |f: fn(&WindowStats) -> f64| measured(s.as_ref().map(f), 1);
            let mut row = vec![
                p.window_s.to_string(),
                s.map_or(0, |s| s.windows).to_string(),
                stat(|s| s.packets_per_core),
                stat(|s| s.active_connections),
                stat(|s| s.new_connections),
                stat(|s| s.effective_connections),
            ];
            row.extend(p.policies.iter().map(|v| percent(v.core_variance, "")));
            row.extend([
                percent(p.clairvoyant_online, ""),
                percent(p.oracle, ""),
                percent(s.map(|s| s.floor), ""),
                percent(s.map(|s| s.random_expectation), ""),
                p.best_baseline
                    .map_or("n/a".into(), |(n, v)| format!("{n} {:.3}", v * 100.0)),
            ]);
            row
        });
        Text::new()
            .line(format!("{}: per-core variance in %", self.trace))
            .table(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{PolicyVariance, WindowPoint};
    use crate::sim::SimConfig;

    fn point(window_s: f64, stats: Option<WindowStats>) -> WindowPoint {
        let measured = stats.is_some();
        WindowPoint {
            window_s,
            stats,
            policies: vec![PolicyVariance {
                name: "rr",
                core_variance: measured.then_some(0.5),
            }],
            clairvoyant_online: measured.then_some(0.25),
            oracle: measured.then_some(0.2),
            best_baseline: measured.then_some(("rr", 0.5)),
        }
    }

    #[test]
    fn a_sweep_reads_a_row_per_window_and_na_where_nothing_was_measured() {
        let stats = WindowStats {
            windows: 10,
            packets_per_core: 12.5,
            active_connections: 4.0,
            new_connections: 1.0,
            carried_share: 0.75,
            effective_connections: 3.5,
            random_expectation: 0.75,
            floor: 0.125,
        };
        let report = SweepReport {
            trace: "t.pcap".into(),
            config: SimConfig::default(),
            points: vec![point(0.5, Some(stats)), point(100.0, None)],
        };
        let text = report.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "t.pcap: per-core variance in %");
        assert_eq!(
            lines[1],
            "window s  windows  pkts/core  conns  new  N_eff      rr  clairvoyant  oracle   floor  random  best baseline"
        );
        assert_eq!(
            lines[2],
            "     0.5       10       12.5    4.0  1.0    3.5  50.000       25.000  20.000  12.500  75.000      rr 50.000"
        );
        assert_eq!(
            lines[3],
            "     100        0        n/a    n/a  n/a    n/a     n/a          n/a     n/a     n/a     n/a            n/a"
        );
        let empty = SweepReport {
            points: Vec::new(),
            ..report
        };
        assert_eq!(empty.text().to_string(), "");
    }
}
