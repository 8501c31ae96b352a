//! How a [`SimReport`] reads: the trace, set-up and replay as labelled
//! rows, then one row per policy.

use plot::text::{measured, Present, Rows, Table, Text};

use super::{Policy, SimReport};

/// A fraction as a percentage with `unit` after it ([`plot::text::percent`],
/// 3 decimals), or "n/a".
pub(crate) fn percent(v: Option<f64>, unit: &str) -> String {
    plot::text::percent(v, 3, unit)
}

/// What a terminal shows while policy `index` (from 0) of `total` replays.
pub fn replaying(index: usize, total: usize, policy: Policy) -> String {
    format!("replaying policy {}/{total} ({})", index + 1, policy.name())
}

impl Present for SimReport {
    fn text(&self) -> Text {
        Text::from(self.about()).blank().table(self.policy_table())
    }
}

impl SimReport {
    /// The trace (frames kept and skipped), the set-up, the replay and how
    /// the variances are computed.
    fn about(&self) -> Rows {
        let s = &self.trace_stats;
        let c = &self.config;
        let r = &self.replay;
        let frames = format!(
            "{} read, {} kept (IPv4 {}, IPv6 {}; {} fragments and {} non-TCP/UDP hashed on addresses), {} skipped ({} truncated, {} non-IP, {} malformed){}",
            s.frames,
            s.kept(),
            s.ipv4,
            s.ipv6,
            s.fragments,
            s.other_l4,
            s.skipped(),
            s.truncated,
            s.non_ip,
            s.malformed,
            if s.truncated_tail { "; last record cut short" } else { "" }
        );
        let set_up = format!(
            "{} servers x {} cores, {} buckets, reports at {} Hz, seed {}",
            c.servers, c.cores, c.buckets, c.rate_hz, c.seed
        );
        let replay = format!(
            "speedup {}, amplify {} -> {} packets, {} flows over {:.1} s ({} packets/s, {} per core per 1 s window; {} idle gaps > {} s shortened)",
            r.speedup,
            r.amplify,
            r.packets,
            r.flows,
            r.duration_s,
            measured(r.mean_pps, 0),
            measured(r.packets_per_core_window, 1),
            r.gaps_shortened,
            c.max_gap_s
        );
        Rows::new()
            .row("trace", self.trace.clone())
            .row("frames", frames)
            .row("set-up", set_up)
            .row("replay", replay)
            .row("metric", self.metric)
    }

    /// Each policy's variances (in %), peak/mean, share processed at 100%
    /// load, windows, connections and table changes.
    fn policy_table(&self) -> Table {
        let header = [
            "policy",
            "server var",
            "core var",
            "worst window",
            "peak/mean",
            "processed at 100% load",
            "windows",
            "connections",
            "table changes",
        ];
        Table::of(&header, &self.policies, |p| {
            let at_capacity = p
                .processed_at_capacity()
                .map_or("-".to_string(), |share| format!("{:.1}%", 100.0 * share));
            vec![
                p.name.to_string(),
                percent(p.server_variance, "%"),
                percent(p.core_variance, "%"),
                percent(p.core_variance_max, "%"),
                measured(p.peak_to_mean, 3),
                at_capacity,
                p.windows.to_string(),
                p.connections.to_string(),
                p.table_changes.to_string(),
            ]
        })
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::sim::{simulate, SimConfig};

    /// A report of `packets` packets of one flow, all at time `ts_ns(i)`.
    fn report(packets: u64, ts_ns: impl Fn(u64) -> u64) -> SimReport {
        let trace = crate::sim::tests::one_flow_trace(packets, ts_ns);
        let policies = [Policy::Rr, Policy::CrossrssPlus];
        simulate("t.pcap", &trace, SimConfig::default(), &policies, |_, _| {}).unwrap()
    }

    #[test]
    fn a_report_reads_as_labelled_rows_then_a_row_per_policy() {
        let text = report(40, |i| i * 100_000_000).text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "trace   t.pcap");
        assert!(
            lines[1].starts_with("frames  40 read, 40 kept (IPv4 40"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("set-up  4 servers x 4 cores"),
            "{text}"
        );
        assert!(lines[3].contains("(10 packets/s, 0.6 per core"), "{text}");
        assert!(lines[4].starts_with("metric  per window"), "{text}");
        assert_eq!(lines[5], "");
        assert!(
            lines[6].starts_with("policy         server var   core var  worst window"),
            "{text}"
        );
        assert!(lines[6].ends_with("connections  table changes"), "{text}");
        assert!(lines[7].starts_with("rr  "), "{text}");
        assert!(lines[8].starts_with("crossrss-plus  "), "{text}");
        assert_eq!(lines.len(), 9);
    }

    #[test]
    fn a_replay_without_a_rate_reads_na() {
        let text = report(3, |_| 5).text().to_string();
        assert!(
            text.contains("(n/a packets/s, n/a per core per 1 s window;"),
            "{text}"
        );
        assert_eq!(percent(None, "%"), "n/a");
        assert_eq!(percent(Some(0.0123), "%"), "1.230%");
    }

    #[test]
    fn progress_names_the_policy_from_1() {
        assert_eq!(replaying(0, 6, Policy::Rr), "replaying policy 1/6 (rr)");
    }
}
