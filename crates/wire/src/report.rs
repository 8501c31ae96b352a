//! What `steer wire run` and `steer wire srpic` report: the configuration
//! and what the loop measured ([`WireRun`], [`DriverRun`]), the line that
//! announces a run, and how each reads.

use std::time::Duration;

use plot::text::{measured, or_na, Present, Rows, Table, Text};
use serde::Serialize;

use crate::{DirectionStats, DriverConfig, DriverStats, WireConfig, WireStats};

/// A forwarder run: what it applied and what it counted.
#[derive(Debug, Clone, Serialize)]
pub struct WireRun {
    pub config: WireConfig,
    pub stats: WireStats,
}

impl WireConfig {
    /// The line that announces a run of `duration` on lab `lab`.
    pub fn start_line(&self, lab: &str, duration: Duration) -> String {
        format!(
            "wire {lab}: forward {} loss {:?}, reverse {} loss {:?}, rate {} bit/s, {} s",
            self.a_to_b.delay,
            self.a_to_b.loss,
            self.b_to_a.delay,
            self.b_to_a.loss,
            self.a_to_b.rate_bps,
            duration.as_secs()
        )
    }
}

/// One row per direction; the queue and the delay error read "n/a" when
/// nothing was sampled.
impl Present for WireRun {
    fn text(&self) -> Text {
        let header = [
            "direction",
            "in",
            "out",
            "drop policy",
            "drop overload",
            "queued",
            "reordered",
            "CE marked",
            "mean queue frames",
            "dup ACKs",
            "err p50 us",
            "err p99 us",
        ];
        let directions = [
            ("snd->rcv", &self.stats.a_to_b),
            ("rcv->snd", &self.stats.b_to_a),
        ];
        Table::of(&header, directions, |(name, d): (&str, &DirectionStats)| {
            let c = d.counters;
            vec![
                name.to_string(),
                c.packets_in.to_string(),
                c.packets_out.to_string(),
                c.dropped_policy.to_string(),
                c.dropped_overload.to_string(),
                c.queued.to_string(),
                c.reordered.to_string(),
                c.ce_marked.to_string(),
                measured(c.mean_queue_frames(), 1),
                d.dup_acks.to_string(),
                measured(d.delay_error.map(|e| e.p50_us), 0),
                measured(d.delay_error.map(|e| e.p99_us), 0),
            ]
        })
        .into()
    }
}

/// A SRPIC driver run: its parameters and what it measured.
#[derive(Debug, Clone, Serialize)]
pub struct DriverRun {
    pub config: DriverConfig,
    pub stats: DriverStats,
}

impl DriverConfig {
    /// The line that announces a run of `duration`.
    pub fn start_line(&self, duration: Duration) -> String {
        format!(
            "srpic driver in {} ({} -> {}, {}): budget {}, coalesce {} us, block {}, {} s",
            self.netns,
            self.dev,
            self.tap,
            if self.sort { "sorting" } else { "no sort" },
            self.budget,
            self.coalesce_us,
            self.sorter.block_size,
            duration.as_secs()
        )
    }
}

/// Labelled counters; what was not measured (no batch, no sample, a ring
/// counter the kernel would not give) reads "n/a".
impl Present for DriverRun {
    fn text(&self) -> Text {
        let st = &self.stats;
        let delay = |p: fn(&crate::stats::LatencySummary) -> f64| {
            measured(st.added_delay.as_ref().map(p), 0)
        };
        Rows::new()
            .row("packets in", st.packets_in.to_string())
            .row("packets out", st.packets_out.to_string())
            .row("inject errors", st.inject_errors.to_string())
            .row("ring drops", or_na(st.ring_drops, |n| n.to_string()))
            .row("ACKs out", st.acks_out.to_string())
            .row("batches", st.batches.to_string())
            .row("mean batch", measured(st.mean_batch, 1))
            .row("mean per-flow block", measured(st.mean_block, 1))
            .row("held", st.sorter.held.to_string())
            .row("out of sequence", st.sorter.out_of_sequence.to_string())
            .row(
                "added delay p50 / p99 us",
                format!("{} / {}", delay(|d| d.p50_us), delay(|d| d.p99_us)),
            )
            .into()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::stats::LatencySummary;

    fn latency(p50_us: f64, p99_us: f64) -> LatencySummary {
        LatencySummary {
            samples: 10,
            mean_us: p50_us,
            p50_us,
            p90_us: p99_us,
            p99_us,
            p999_us: p99_us,
            max_us: p99_us,
        }
    }

    #[test]
    fn a_wire_run_reads_a_row_per_direction_and_na_without_samples() {
        let mut stats = WireStats::default();
        stats.a_to_b.counters.packets_in = 10;
        stats.a_to_b.counters.packets_out = 9;
        stats.a_to_b.counters.dropped_policy = 1;
        stats.a_to_b.delay_error = Some(latency(3.0, 12.0));
        let run = WireRun {
            config: WireConfig::new(Some("w-wire"), "to-snd", "to-rcv"),
            stats,
        };
        let text = run.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("direction  in  out  drop policy"),
            "{text}"
        );
        assert!(lines[0].ends_with("err p50 us  err p99 us"), "{text}");
        assert!(
            lines[1].starts_with("snd->rcv   10    9            1"),
            "{text}"
        );
        assert!(lines[1].ends_with("3          12"), "{text}");
        assert!(lines[2].starts_with("rcv->snd"), "{text}");
        assert_eq!(lines[2].matches("n/a").count(), 3, "{text}");
    }

    #[test]
    fn a_driver_run_reads_na_for_what_it_could_not_measure() {
        let config = DriverConfig::new("w-rcv", "veth0", Ipv4Addr::new(10, 77, 1, 2), 24);
        let stats = DriverStats {
            packets_in: 5,
            packets_out: 5,
            ..DriverStats::default()
        };
        let text = DriverRun { config, stats }.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "packets in                5");
        assert_eq!(lines[3], "ring drops                n/a");
        assert_eq!(lines[6], "mean batch                n/a");
        assert_eq!(lines[10], "added delay p50 / p99 us  n/a / n/a");
        let stats = DriverStats {
            ring_drops: Some(0),
            mean_batch: Some(2.34),
            added_delay: Some(latency(40.0, 75.0)),
            ..DriverStats::default()
        };
        let config = DriverConfig::new("w-rcv", "veth0", Ipv4Addr::new(10, 77, 1, 2), 24);
        let text = DriverRun { config, stats }.text().to_string();
        assert!(text.contains("ring drops                0\n"), "{text}");
        assert!(text.contains("mean batch                2.3\n"), "{text}");
        assert!(
            text.ends_with("added delay p50 / p99 us  40 / 75\n"),
            "{text}"
        );
    }

    #[test]
    fn start_lines_say_what_runs() {
        let mut cfg = DriverConfig::new("w-rcv", "veth0", Ipv4Addr::new(10, 77, 1, 2), 24);
        cfg.sort = false;
        cfg.sorter.block_size = 16;
        assert_eq!(
            cfg.start_line(Duration::from_secs(3)),
            "srpic driver in w-rcv (veth0 -> srpic0, no sort): budget 64, coalesce 50 us, block 16, 3 s"
        );
        let wire = WireConfig::new(Some("w-wire"), "to-snd", "to-rcv");
        let line = wire.start_line("w", Duration::from_secs(2));
        assert!(line.starts_with("wire w: forward "), "{line}");
        assert!(line.ends_with(", rate 0 bit/s, 2 s"), "{line}");
    }
}
