//! How a toe run reads: a progress line per sample, then the two stacks
//! side by side, the data path's cost per stage, thesis Table 4.4's
//! designs and the ways to lock connection state under parallel input.

use plot::text::{measured, or_na, Table, Text};
use serde::Serialize;

use super::{Progress, ToeParams, ToeResult};

impl ToeParams {
    /// The line a run starts with (and its warning, if it has one).
    pub fn progress_header(&self) -> String {
        let threads = self.ablation_threads();
        let mut header = format!(
            "toe: {} repetitions of a {} MiB stream and {} {}-byte RPCs, toe data path vs Linux \
             TCP; the Table 4.4 ablation on 1 to {threads} threads",
            self.repetitions,
            self.bytes >> 20,
            self.rpcs,
            self.rpc_size
        );
        if let Some(w) = super::threads_warning(threads, crate::cpus::present()) {
            header.push_str(&format!("\nwarning: {w}"));
        }
        header
    }
}

/// A unit variant's name as the JSON has it (its serde name), so the text
/// names a value as the result does.
fn json_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        other => format!("{other:?}"),
    }
}

impl Progress<'_> {
    /// One line as the sample is taken.
    pub fn progress_line(&self) -> String {
        match self {
            Progress::Stream(s) => format!(
                "  rep {} {:>5} stream: {} Gbit/s{}",
                s.repetition,
                json_name(&s.stack),
                measured(s.gbit_per_s, 2),
                if s.verified { "" } else { " (BYTES DIFFER)" }
            ),
            Progress::Locking(l) => format!(
                "  rep {} input {:>14}, {:>2} streams: {:.2} M segments/s{}",
                l.repetition,
                json_name(&l.run.locking),
                l.run.workload.streams,
                l.run.segments_per_s / 1e6,
                if l.complete { "" } else { " (INCOMPLETE)" }
            ),
            Progress::Ablation(a) => format!(
                "  ablation {:<34} {} Mbit/s, p50 {} us{}",
                a.design,
                measured(Some(a.result.mbit_per_s), 1),
                measured(a.result.p50_us, 0),
                if a.result.byte_exact {
                    String::new()
                } else {
                    format!(
                        " (NOT BYTE-EXACT: {} answer segments differ from their requests)",
                        a.result.mismatched_segments
                    )
                }
            ),
            Progress::Rpc(r) => format!(
                "  rep {} {:>5} rpc:    p50 {} us, p99 {} us{}",
                r.repetition,
                json_name(&r.stack),
                measured(r.p50_us, 1),
                measured(r.p99_us, 1),
                if r.verified { "" } else { " (ECHO DIFFERS)" }
            ),
        }
    }
}

impl ToeResult {
    /// Stream goodput and RPC latency of each stack, and their ratio.
    fn stacks(&self) -> Table {
        let mut t = Table::new(&["stack", "stream Gbit/s", "RPC p50 us"]);
        for (name, stream, rpc, digits) in [
            ("toe", self.toe_stream_gbit, self.toe_rpc_p50_us, 1),
            ("linux", self.linux_stream_gbit, self.linux_rpc_p50_us, 1),
            ("toe / linux", self.stream_ratio, self.rpc_p50_ratio, 2),
        ] {
            t.push(vec![
                name.into(),
                measured(stream, 2),
                measured(rpc, digits),
            ]);
        }
        t
    }

    /// What each stage cost per segment (thesis Table 2.2's breakdown).
    fn stages(&self) -> Option<Table> {
        let c = self.stage_cycles.as_ref()?;
        let unit = format!("{} per segment", c.unit);
        Some(Table::of(
            &["stage", &unit],
            [
                ("netif", c.netif),
                ("pre-processing", c.pre),
                ("protocol", c.protocol),
                ("post-processing", c.post),
                ("payload copy", c.copy),
                ("total", c.total),
            ],
            |(stage, v)| vec![stage.to_string(), format!("{v:.0}")],
        ))
    }

    fn ablation(&self) -> Table {
        Table::of(
            &[
                "Table 4.4 design",
                "Mbit/s",
                "p50 us",
                "p99 us",
                "p99.99 us",
                "byte-exact",
            ],
            &self.ablation,
            |a| {
                vec![
                    a.design.clone(),
                    measured(Some(a.result.mbit_per_s), 1),
                    measured(a.result.p50_us, 0),
                    measured(a.result.p99_us, 0),
                    measured(a.result.p9999_us, 0),
                    if a.result.byte_exact { "yes" } else { "NO" }.into(),
                ]
            },
        )
    }

    fn locking(&self) -> Table {
        Table::of(
            &[
                "streams",
                "input locking",
                "complete runs",
                "M segments/s",
                "vs exclusive",
            ],
            &self.locking_summary,
            |s| {
                vec![
                    s.streams.to_string(),
                    json_name(&s.locking),
                    format!("{}/{}", s.complete_runs, s.runs),
                    or_na(s.mean_segments_per_s, |m| format!("{:.2}", m / 1e6)),
                    measured(s.vs_exclusive, 2),
                ]
            },
        )
    }
}

impl ToeResult {
    pub(super) fn render(&self) -> Text {
        let mut text = Text::new().table(self.stacks());
        if let Some(stages) = self.stages() {
            text = text.blank().table(stages);
        }
        text = text
            .blank()
            .table(self.ablation())
            .blank()
            .table(self.locking())
            .line(crate::datapath::byte_exact_line(self.byte_exact));
        for w in &self.warnings {
            text = text.line(format!("warning: {w}"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{result, rpc, stream};
    use super::super::{Stack, StreamSample};
    use super::*;
    use plot::text::Present;
    use toe::input::Locking;

    #[test]
    fn the_stacks_stand_side_by_side() {
        let r = result(
            vec![
                stream(Stack::Toe, 2.0, true),
                stream(Stack::Linux, 1.0, true),
            ],
            vec![rpc(Stack::Toe, 10.0), rpc(Stack::Linux, 20.0)],
        );
        let text = r.text().to_string();
        assert!(text.starts_with(
            "stack        stream Gbit/s  RPC p50 us\n\
             toe                   2.00        10.0\n\
             linux                 1.00        20.0\n\
             toe / linux           2.00        0.50\n"
        ));
        assert!(text.contains("Table 4.4 design  Mbit/s"));
        assert!(
            text.contains("\n     10  per-flow-batch            0/0           n/a           n/a\n"),
            "{text}"
        );
        assert!(text.contains("streams   input locking  complete runs  M segments/s  vs exclusive"));
        assert!(text.ends_with("byte-exact: yes (every transfer checked byte for byte)\n"));
    }

    #[test]
    fn what_was_not_measured_reads_na() {
        let nothing = StreamSample {
            gbit_per_s: None,
            ..stream(Stack::Toe, 0.0, false)
        };
        let r = result(vec![nothing.clone()], Vec::new());
        let text = r.text().to_string();
        assert!(
            text.contains("\ntoe                    n/a         n/a\n"),
            "{text}"
        );
        assert!(text.ends_with("byte-exact: NO (every transfer checked byte for byte)\n"));
        assert_eq!(
            Progress::Stream(&nothing).progress_line(),
            "  rep 0   toe stream: n/a Gbit/s (BYTES DIFFER)"
        );
    }

    #[test]
    fn values_are_named_as_in_the_json() {
        assert_eq!(json_name(&Locking::PerFlowBatch), "per-flow-batch");
        assert_eq!(json_name(&Stack::Linux), "linux");
    }
}
