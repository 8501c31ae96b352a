//! How a device's report reads in a terminal (`steer rss show`): one
//! labelled row per fact, each list summarised on one line.

use plot::text::{Present, Rows, Text};

use super::{Channels, DeviceReport, DeviceReports, QueueIrq};
use crate::fields::{FlowType, HashFieldsByFlow};
use crate::indirection::IndirectionTable;

impl Present for DeviceReports {
    /// Each device's report, a blank line between two.
    fn text(&self) -> Text {
        let mut text = Text::new();
        for (i, report) in self.0.iter().enumerate() {
            if i > 0 {
                text = text.blank();
            }
            text = text.then(report.text());
        }
        text
    }
}

impl Present for DeviceReport {
    fn text(&self) -> Text {
        let driver = self.driver.as_deref().unwrap_or("unknown driver");
        let title = format!("{} (ifindex {}, {driver})", self.dev, self.ifindex);
        let mut rows = Rows::new();
        if let Some(c) = &self.channels {
            rows.push("channels", channels_summary(c));
        }
        match &self.rss {
            Some(cfg) => {
                let source = self.source.as_deref().unwrap_or("n/a");
                rows.push("hash", format!("{} ({source})", cfg.hash_function.name()));
                rows.push("input transform", format!("{:?}", cfg.input_transform));
                rows.push("key", format!("{} ({} bytes)", cfg.key, cfg.key.len()));
                rows.push("hashed fields", fields_summary(&cfg.fields));
                rows.push("indirection", table_summary(&cfg.indirection_table));
                rows.push("queue -> cpu", queue_cpus_summary(&cfg.queue_cpus));
            }
            None => rows.push("rss", "none"),
        }
        for irq in &self.queue_irqs {
            rows.push("queue irq", irq_summary(irq));
        }
        for (q, cpus) in self.rps_cpus.iter().enumerate() {
            if !cpus.is_empty() {
                rows.push("rps", format!("rx-{q} -> cpus {cpus:?}"));
            }
        }
        if let Some(key) = &self.netdev_rss_key {
            rows.push("netdev_rss_key", key.to_string());
        }
        for lack in &self.lacks {
            rows.push("lacks", lack.clone());
        }
        for note in &self.notes {
            rows.push("note", note.clone());
        }
        Text::new().line(title).rows(rows)
    }
}

/// `rx 1 (max 1), combined 4 (max 8)`: the kinds the device has.
fn channels_summary(c: &Channels) -> String {
    let kinds = [
        ("rx", c.rx),
        ("tx", c.tx),
        ("other", c.other),
        ("combined", c.combined),
    ];
    let parts: Vec<String> = kinds
        .iter()
        .filter_map(|(name, count)| count.map(|n| format!("{name} {} (max {})", n.current, n.max)))
        .collect();
    parts.join(", ")
}

/// `queue 0 irq 35 (eth0-rx-0) affinity [0, 1], runs on [1]`.
fn irq_summary(irq: &QueueIrq) -> String {
    let effective = if irq.effective_cpus.is_empty() {
        String::new()
    } else {
        format!(", runs on {:?}", irq.effective_cpus)
    };
    format!(
        "queue {} irq {} ({}) affinity {:?}{effective}",
        irq.queue, irq.irq, irq.name, irq.cpus
    )
}

/// `tcp4 sdfn, udp4 sd, ...`: the hashed fields per flow type in ethtool's
/// letters.
fn fields_summary(f: &HashFieldsByFlow) -> String {
    FlowType::ALL
        .iter()
        .map(|&flow| format!("{} {}", flow.name(), f.get(flow).ethtool_letters()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `128 entries (q0:64 q1:64)`: each queue's share of the table.
fn table_summary(t: &IndirectionTable) -> String {
    let shares: Vec<String> = t
        .entries_per_queue()
        .iter()
        .map(|(q, n)| format!("q{q}:{n}"))
        .collect();
    format!("{} entries ({})", t.len(), shares.join(" "))
}

/// `0->0 1->2`: each queue's CPU.
fn queue_cpus_summary(cpus: &[u32]) -> String {
    let parts: Vec<String> = cpus
        .iter()
        .enumerate()
        .map(|(q, c)| format!("{q}->{c}"))
        .collect();
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::ChannelCount;
    use crate::{RssKey, StatedConfig};

    fn report(dev: &str) -> DeviceReport {
        DeviceReport {
            dev: dev.into(),
            ifindex: 2,
            driver: None,
            channels: None,
            rss: None,
            source: None,
            lacks: vec!["no RSS".into()],
            queue_irqs: Vec::new(),
            rps_cpus: vec![Vec::new(), vec![0, 1]],
            netdev_rss_key: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_device_without_rss_or_driver_says_so() {
        assert_eq!(
            report("veth0").text().to_string(),
            "veth0 (ifindex 2, unknown driver)\n\
             rss    none\n\
             rps    rx-1 -> cpus [0, 1]\n\
             lacks  no RSS\n"
        );
    }

    #[test]
    fn a_device_with_rss_summarises_its_config() {
        let config = StatedConfig {
            weights: vec![1, 3],
            ..StatedConfig::new(RssKey::microsoft(), 2, 8)
        }
        .build()
        .unwrap();
        let r = DeviceReport {
            driver: Some("virtio_net".into()),
            channels: Some(Channels {
                combined: Some(ChannelCount { current: 2, max: 4 }),
                ..Channels::default()
            }),
            rss: Some(config),
            source: Some("ethtool-netlink".into()),
            queue_irqs: vec![QueueIrq {
                queue: 0,
                irq: 35,
                name: "virtio0-input.0".into(),
                cpus: vec![0, 1],
                effective_cpus: vec![1],
            }],
            lacks: Vec::new(),
            ..report("eth0")
        };
        let text = r.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "eth0 (ifindex 2, virtio_net)");
        assert_eq!(lines[1], "channels         combined 2 (max 4)");
        assert_eq!(lines[2], "hash             toeplitz (ethtool-netlink)");
        assert_eq!(lines[3], "input transform  None");
        assert!(lines[4].ends_with(" (40 bytes)"), "{text}");
        assert!(
            lines[5].starts_with("hashed fields    tcp4 sdfn, "),
            "{text}"
        );
        assert_eq!(lines[6], "indirection      8 entries (q0:2 q1:6)");
        assert_eq!(lines[7], "queue -> cpu     0->0 1->1");
        assert_eq!(
            lines[8],
            "queue irq        queue 0 irq 35 (virtio0-input.0) affinity [0, 1], runs on [1]"
        );
        assert_eq!(lines[9], "rps              rx-1 -> cpus [0, 1]");
        assert_eq!(lines.len(), 10, "{text}");
    }

    #[test]
    fn reports_are_separated_by_a_blank_line() {
        let text = DeviceReports(vec![report("a"), report("b")]).text();
        assert_eq!(
            text.to_string(),
            format!("{}\n{}", report("a").text(), report("b").text())
        );
    }
}
