//! How the demo reads: a progress line per repetition, then each way's
//! repetitions, a summary of the ways against the ideal, and the theory
//! for random ports (SRAP section 2).

use plot::text::{or_na, Table, Text};

use super::{queue_histogram, DemoParams, DemoResult, Repetition, Way, WayResult};

impl DemoParams {
    /// The line a run starts with.
    pub fn progress_header(&self) -> String {
        let clients = if self.processes {
            format!("{} iperf3 processes", self.flows)
        } else {
            format!("iperf3 -P {}", self.flows)
        };
        format!(
            "demo: {} TCP flows ({clients}) to a receiver with {} software-RSS queues; {} \
             repetitions per way",
            self.flows, self.queues, self.repetitions
        )
    }
}

impl Repetition {
    /// One line as the repetition of `way` ends: the busiest queue, and
    /// every queue that carries more than one flow.
    pub fn progress_line(&self, way: Way) -> String {
        let shared: Vec<String> = self
            .flows_per_queue
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 1)
            .map(|(q, n)| format!("q{q}:{n}"))
            .collect();
        format!(
            "  {:<7} rep {:>2}: max {} flows on a queue, {} ({:.1} Gbit/s){}",
            way.name(),
            self.repetition,
            self.max_flows_on_a_queue,
            if self.perfect {
                "perfect"
            } else {
                "collisions"
            },
            self.aggregate_gbps,
            if shared.is_empty() {
                String::new()
            } else {
                format!("; shared: {}", shared.join(" "))
            }
        )
    }
}

/// "a/b/c/d": how many queues hold 0, 1, 2, and 3 or more flows.
fn histogram(flows_per_queue: &[u32]) -> String {
    let [a, b, c, d] = queue_histogram(flows_per_queue);
    format!("{a}/{b}/{c}/{d}")
}

/// One row per repetition of a way.
fn repetitions(way: &WayResult) -> Table {
    Table::of(
        &[
            "rep",
            "queues with 0/1/2/3+ flows",
            "max on a queue",
            "perfect",
            "Gbit/s",
            "slowest flow",
            "cpu busy",
        ],
        &way.runs,
        |r| {
            vec![
                r.repetition.to_string(),
                histogram(&r.flows_per_queue),
                r.max_flows_on_a_queue.to_string(),
                if r.perfect { "yes" } else { "no" }.into(),
                format!("{:.2}", r.aggregate_gbps),
                format!("{:.2}", r.min_flow_gbps),
                r.cpu_busy
                    .iter()
                    .map(|b| or_na(*b, |b| format!("{:.0}%", b * 100.0)))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        },
    )
}

impl DemoResult {
    pub(super) fn render(&self) -> Text {
        let mut text = Text::new();
        for way in &self.ways {
            text = text
                .blank()
                .line(format!("way: {} ({})", way.name, way.description))
                .table(repetitions(way));
        }
        let summary = Table::of(
            &["way", "perfect", "worst max on a queue", "mean Gbit/s"],
            &self.ways,
            |w| {
                vec![
                    w.name.to_string(),
                    format!("{:.0}%", w.perfect_fraction * 100.0),
                    w.max_flows_on_a_queue.to_string(),
                    format!("{:.2}", w.aggregate_gbps),
                ]
            },
        );
        text.blank()
            .line(format!(
                "summary (perfect: no queue carries more than {} flow(s); measured on the \
                 datapath)",
                self.params.ideal_max()
            ))
            .table(summary)
            .line(format!(
                "theory for random ports: perfect with probability {:.2}%",
                self.theory.perfect_probability * 100.0
            ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{summarize, DemoOutput, Theory};
    use super::*;
    use crate::experiment::Report;
    use plot::text::Present;

    fn repetition(
        repetition: u32,
        flows_per_queue: Vec<u32>,
        cpu_busy: Vec<Option<f64>>,
    ) -> Repetition {
        let max = flows_per_queue.iter().copied().max().unwrap_or(0);
        Repetition {
            repetition,
            source_ports: Vec::new(),
            dest_ports: Vec::new(),
            flow_queues: Vec::new(),
            predicted_queues: Vec::new(),
            max_flows_on_a_queue: max,
            perfect: max <= 1,
            flows_per_queue,
            aggregate_gbps: 4.0,
            flow_gbps: vec![1.0; 4],
            min_flow_gbps: 1.0,
            cpu_busy,
            binder: None,
        }
    }

    fn result(runs: Vec<Repetition>) -> DemoResult {
        let params = DemoParams {
            flows: 4,
            queues: 4,
            ..DemoParams::default()
        };
        let output = DemoOutput {
            ways: vec![summarize(Way::Random, runs).unwrap()],
            theory: Theory {
                perfect_probability: 4.0 * 3.0 * 2.0 / 4f64.powi(4),
            },
            queue_cpus: vec![0, 1, 0, 1],
        };
        Report::new(params, output)
    }

    #[test]
    fn each_way_has_its_repetitions_and_the_summary_its_theory() {
        let text = result(vec![
            repetition(0, vec![1, 1, 1, 1], vec![Some(0.5), Some(1.0)]),
            repetition(1, vec![2, 0, 1, 1], vec![Some(0.25), Some(0.75)]),
        ])
        .text()
        .to_string();
        assert!(
            text.starts_with(
                "\nway: random (kernel-chosen source ports)\nrep  queues with 0/1/2/3+ flows"
            ),
            "{text}"
        );
        assert!(text.contains("  0/4/0/0  "), "{text}");
        assert!(text.contains("  1/2/1/0  "), "{text}");
        assert!(text.contains("50% 100%\n"), "{text}");
        assert!(text.contains(
            "\nsummary (perfect: no queue carries more than 1 flow(s); measured on the datapath)\n\
             way     perfect  worst max on a queue  mean Gbit/s\n\
             random      50%                     2         4.00\n"
        ), "{text}");
        assert!(text.ends_with("theory for random ports: perfect with probability 9.38%\n"));
    }

    #[test]
    fn an_idle_cpu_reads_na() {
        let rep = repetition(0, vec![2, 0, 1, 1], vec![None, Some(0.5)]);
        assert!(result(vec![rep.clone()])
            .text()
            .to_string()
            .contains("n/a 50%\n"));
        assert_eq!(
            rep.progress_line(Way::Bpf),
            "  bpf     rep  0: max 2 flows on a queue, collisions (4.0 Gbit/s); shared: q0:2"
        );
    }
}
