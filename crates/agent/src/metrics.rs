//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::api::{CpuLoad, LoadReply, QueueLoad};
use crate::served::{EntryKey, Snapshot};

/// Request counters, by path and by rejection reason.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub requests: BTreeMap<&'static str, u64>,
    pub rejected: BTreeMap<&'static str, u64>,
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A metric: name, type, help, and how to read its value.
/// (name, type, help, value): a value of `None` (a rate before two
/// samples) writes no sample line, as Prometheus expects of an absent value.
type Metric<T> = (
    &'static str,
    &'static str,
    &'static str,
    fn(&T) -> Option<f64>,
);

/// Renders every metric.
pub fn render(snapshot: &Snapshot, load: &LoadReply, counters: &Counters) -> String {
    let mut out = String::new();
    header(
        &mut out,
        "steer_agent_config_version",
        "gauge",
        "Version of the served RSS config; increments each time the agent sees it change.",
    );
    for e in &snapshot.entries {
        let entry = match &e.key {
            EntryKey::Dev(d) => d.clone(),
            EntryKey::File(p) => format!("file:{}", p.display()),
        };
        let origin = e.config.as_ref().map_or("none", |(o, _)| o.name());
        let _ = writeln!(
            out,
            "steer_agent_config_version{{entry=\"{}\",dev=\"{}\",origin=\"{origin}\"}} {}",
            escape(&entry),
            escape(e.dev.as_deref().unwrap_or("")),
            e.version
        );
    }
    let cpu_metrics: [Metric<CpuLoad>; 4] = [
        (
            "steer_agent_net_rx_softirqs_total",
            "counter",
            "NET_RX softirqs per CPU since boot (/proc/softirqs).",
            |c| Some(c.net_rx_total as f64),
        ),
        (
            "steer_agent_net_rx_softirqs_per_second",
            "gauge",
            "NET_RX softirqs per second per CPU over the last sampling interval.",
            |c| c.net_rx_per_sec,
        ),
        (
            "steer_agent_softirq_seconds_total",
            "counter",
            "Time spent in softirq context per CPU since boot (/proc/stat).",
            |c| c.softirq_seconds_total,
        ),
        (
            "steer_agent_softirq_busy_ratio",
            "gauge",
            "Fraction of the last sampling interval each CPU spent in softirq context.",
            |c| c.softirq_busy,
        ),
    ];
    for (name, kind, help, value) in cpu_metrics {
        header(&mut out, name, kind, help);
        for c in &load.cpus {
            if let Some(v) = value(c) {
                let _ = writeln!(out, "{name}{{cpu=\"{}\"}} {v}", c.cpu);
            }
        }
    }
    let queue_metrics: [Metric<QueueLoad>; 2] = [
        (
            "steer_agent_queue_packets_total",
            "counter",
            "Packets counted per software RSS queue since attach.",
            |q| Some(q.packets as f64),
        ),
        (
            "steer_agent_queue_packets_per_second",
            "gauge",
            "Packets per second per software RSS queue over the last sampling interval.",
            |q| q.packets_per_sec,
        ),
    ];
    for (name, kind, help, value) in queue_metrics {
        header(&mut out, name, kind, help);
        for d in &load.devices {
            for q in &d.queues {
                let Some(v) = value(q) else { continue };
                let _ = writeln!(
                    out,
                    "{name}{{dev=\"{}\",queue=\"{}\",cpu=\"{}\"}} {v}",
                    escape(&d.dev),
                    q.queue,
                    q.cpu,
                );
            }
        }
    }
    header(
        &mut out,
        "steer_agent_requests_total",
        "counter",
        "HTTP requests received, by path (unknown paths count as \"other\").",
    );
    for (path, n) in &counters.requests {
        let _ = writeln!(out, "steer_agent_requests_total{{path=\"{path}\"}} {n}");
    }
    header(
        &mut out,
        "steer_agent_rejected_requests_total",
        "counter",
        "Requests refused with 401, by reason.",
    );
    for (reason, n) in &counters.rejected {
        let _ = writeln!(
            out,
            "steer_agent_rejected_requests_total{{reason=\"{reason}\"}} {n}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::API_VERSION;

    #[test]
    fn text_format() {
        let load = LoadReply {
            api: API_VERSION,
            interval_ms: 100,
            sampled_at_ms: 1000,
            cpus: vec![CpuLoad {
                cpu: 1,
                net_rx_per_sec: Some(2.5),
                softirq_busy: Some(0.25),
                net_rx_total: 7,
                softirq_seconds_total: Some(1.5),
            }],
            devices: vec![],
        };
        let mut counters = Counters::default();
        counters.requests.insert("/v1/rss", 3);
        counters.rejected.insert("wrong_token", 1);
        let text = render(&Snapshot::default(), &load, &counters);
        for line in [
            "# TYPE steer_agent_config_version gauge",
            "steer_agent_net_rx_softirqs_total{cpu=\"1\"} 7",
            "steer_agent_net_rx_softirqs_per_second{cpu=\"1\"} 2.5",
            "steer_agent_softirq_busy_ratio{cpu=\"1\"} 0.25",
            "steer_agent_requests_total{path=\"/v1/rss\"} 3",
            "steer_agent_rejected_requests_total{reason=\"wrong_token\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
