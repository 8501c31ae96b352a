//! How an xdp-overhead run reads: a progress line per sample, then each
//! mode's throughput, where each mode lost frames, and the ratios against
//! the goals (docs/performance.md).

use plot::text::{measured, or_na, Table, Text};

use super::{ModeSummary, Sample, XdpOverheadParams, XdpOverheadResult};

impl XdpOverheadParams {
    /// The line a run starts with.
    pub fn progress_header(&self) -> String {
        format!(
            "xdp-overhead: {} iperf3 flows, {} queues, {} repetitions x {} s per mode \
             (software RSS, no program, RPS)",
            self.streams, self.queues, self.repetitions, self.seconds
        )
    }
}

/// A count, or "n/a" for a stage this mode does not have.
fn count(value: Option<u64>) -> String {
    or_na(value, |v| v.to_string())
}

impl Sample {
    /// One line as the sample is taken: throughput, retransmits and where
    /// frames were lost.
    pub fn progress_line(&self) -> String {
        let d = &self.drops;
        format!(
            "  rep {} {:>12}: {:6.2} Gbit/s, {} retransmits; dropped: cpumap {}, veth ring {}, \
             qdisc {}, backlog {}",
            self.repetition,
            self.mode.name(),
            self.gbit_per_s,
            self.retransmits,
            count(d.cpumap_enqueue_drops),
            d.sender_tx_dropped,
            count(d.sender_qdisc_dropped),
            d.backlog_dropped,
        )
    }
}

impl XdpOverheadResult {
    /// Each mode that ran, by its name in the tables, software RSS last.
    fn modes(&self) -> Vec<(&'static str, &ModeSummary)> {
        let mut modes = vec![
            ("no program", &self.without_program),
            ("RPS", &self.with_rps),
        ];
        if let Some(rfs) = &self.with_rfs {
            modes.push(("RFS", rfs));
        }
        modes.push(("software RSS", &self.with_software_rss));
        modes
    }
}

impl XdpOverheadResult {
    pub(super) fn render(&self) -> Text {
        let modes = self.modes();
        let throughput = Table::of(
            &[
                "mode",
                "samples",
                "mean Gbit/s",
                "95% CI ±",
                "median retransmits",
            ],
            &modes,
            |(name, s)| {
                vec![
                    name.to_string(),
                    s.n.to_string(),
                    format!("{:.2}", s.mean_gbit),
                    measured(s.ci95_gbit, 2),
                    format!("{:.0}", s.median_retransmits),
                ]
            },
        );
        let drops = Table::of(
            &[
                "mode",
                "cpumap enqueue",
                "cpumap kthread",
                "veth ring (sender tx)",
                "sender qdisc",
                "qdisc requeues",
                "receiver rx",
                "backlog",
            ],
            &modes,
            |(name, s)| {
                let d = &s.drops;
                vec![
                    name.to_string(),
                    count(d.cpumap_enqueue_drops),
                    count(d.cpumap_kthread_drops),
                    d.sender_tx_dropped.to_string(),
                    count(d.sender_qdisc_dropped),
                    count(d.sender_qdisc_requeues),
                    d.receiver_rx_dropped.to_string(),
                    d.backlog_dropped.to_string(),
                ]
            },
        );
        Text::new()
            .table(throughput)
            .blank()
            .line("frames dropped, summed over each mode's samples:")
            .table(drops)
            .line(format!(
                "ratio {} (software RSS / no program; goal >= 0.70), {} (software RSS / RPS; \
                 goal >= 1.0), RPS / no program {}",
                measured(self.ratio, 2),
                measured(self.ratio_to_rps, 2),
                measured(self.rps_ratio, 2),
            ))
            .line(format!(
                "retransmit noise (most in one no-program or RPS sample): {}",
                self.retransmit_noise
            ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::super::{summarize_run, Mode};
    use super::*;
    use plot::text::Present;

    fn result() -> XdpOverheadResult {
        let samples = vec![
            sample(0, Mode::SoftwareRss, 3.0, 50),
            sample(0, Mode::NoProgram, 4.0, 300),
            sample(0, Mode::Rps, 6.0, 20),
        ];
        let params = XdpOverheadParams::default();
        let output = summarize_run(&params, vec![0, 1], samples).unwrap();
        crate::experiment::Report::new(params, output)
    }

    #[test]
    fn the_tables_name_every_mode_and_the_goals() {
        let text = result().text().to_string();
        for label in [
            "samples  mean Gbit/s  95% CI ±  median retransmits\n",
            "no program ",
            "RPS ",
            "software RSS ",
            "frames dropped, summed over each mode's samples:",
            "veth ring (sender tx)",
            "ratio 0.75 (software RSS / no program; goal >= 0.70), 0.50 (software RSS / RPS; \
             goal >= 1.0), RPS / no program 1.50",
            "retransmit noise (most in one no-program or RPS sample): 300",
        ] {
            assert!(text.contains(label), "{label:?} not in\n{text}");
        }
        assert!(!text.contains("RFS"), "RFS did not run:\n{text}");
    }

    #[test]
    fn absent_counters_and_intervals_read_na() {
        let mut r = result();
        r.ratio = None;
        let text = r.text().to_string();
        // One sample per mode: no interval; no program: no cpumap counters.
        let no_program = text.lines().find(|l| l.starts_with("no program")).unwrap();
        assert!(no_program.contains("n/a"), "{no_program}");
        assert!(text.contains("ratio n/a (software RSS / no program"));
        let line = sample(1, Mode::NoProgram, 4.0, 3).progress_line();
        assert_eq!(
            line,
            "  rep 1   no-program:   4.00 Gbit/s, 3 retransmits; dropped: cpumap n/a, \
             veth ring 3, qdisc n/a, backlog 0"
        );
    }
}
