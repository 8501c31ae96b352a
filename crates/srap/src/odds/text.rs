//! How [`Odds`] reads in a terminal (`steer ports odds`).

use plot::text::{Present, Rows, Table, Text};

use super::{MaxLoadRow, Odds};

/// Rows less likely than this, and never sampled, are left out of the
/// table (the JSON lists every row).
const SHOWN_ABOVE: f64 = 1e-12;

/// A probability as a person compares them: "1.04%" down to 0.01%, then
/// scientific ("3.125e-19"), and an exact zero as "0".
pub fn percent(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p >= 0.0001 {
        format!("{:.2}%", p * 100.0)
    } else {
        format!("{p:.3e}")
    }
}

impl Present for Odds {
    fn text(&self) -> Text {
        let rows = Rows::new()
            .row(
                "flows on cores",
                format!("{} on {} (uniform, independent)", self.flows, self.cores),
            )
            .row(
                "collision-free",
                format!(
                    "{} exact, {} in {} trials (seed {})",
                    percent(self.collision_free),
                    percent(self.sampled_collision_free),
                    self.trials,
                    self.seed
                ),
            )
            .row(
                "expected max",
                format!("{:.3} flows on one core", self.expected_max),
            );
        let shown: Vec<&MaxLoadRow> = self
            .distribution
            .iter()
            .filter(|r| r.exact >= SHOWN_ABOVE || r.sampled > 0.0)
            .collect();
        let omitted = shown.len() < self.distribution.len();
        let table = Table::of(
            &["max flows on a core", "exact", "monte carlo"],
            shown,
            |r| vec![r.max.to_string(), percent(r.exact), percent(r.sampled)],
        );
        let text = Text::new().rows(rows).blank().table(table);
        if omitted {
            text.line("(rows with probability below 1e-12 omitted; --json lists all)")
        } else {
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::odds::odds;

    #[test]
    fn percents_read_as_percent_then_scientific() {
        assert_eq!(percent(0.0), "0");
        assert_eq!(percent(0.0104), "1.04%");
        assert_eq!(percent(0.0001), "0.01%");
        assert_eq!(percent(3.125e-19), "3.125e-19");
    }

    #[test]
    fn odds_show_their_rows_and_the_likely_part_of_the_distribution() {
        let text = odds(16, 32, 2000, 1).unwrap().text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "flows on cores  16 on 32 (uniform, independent)");
        assert!(
            lines[1].starts_with("collision-free  1.04% exact, "),
            "{text}"
        );
        assert!(lines[1].ends_with(" in 2000 trials (seed 1)"), "{text}");
        assert!(lines[2].starts_with("expected max    "), "{text}");
        assert_eq!(lines[3], "");
        assert_eq!(lines[4], "max flows on a core      exact  monte carlo");
        // All 16 flows on one core (32 / 32^16, about 2.8e-23) is below
        // 1e-12 and never sampled: left out, and the table says so.
        assert_eq!(
            lines.last(),
            Some(&"(rows with probability below 1e-12 omitted; --json lists all)")
        );
    }

    #[test]
    fn a_complete_distribution_has_no_omission_line() {
        let text = odds(2, 2, 100, 1).unwrap().text().to_string();
        assert!(!text.contains("omitted"), "{text}");
        // Three rows, a blank line, the header and both k = 1 and k = 2.
        assert_eq!(text.lines().count(), 7, "{text}");
        assert!(text.contains("\n                  1  50.00%  "), "{text}");
    }
}
