//! What `steer nic` reports: a change made to a device's software RSS, and
//! the datapath's counters as a person reads them.

use std::fmt;

use plot::text::{or_na, Present, Table, Text};
use rss::RssConfig;
use serde::Serialize;

use crate::{AttachOptions, FlowStats, NicStats};

/// What was done to a device's software RSS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Attached,
    Updated,
    Detached,
}

/// A change made to a device's software RSS and the config it leaves
/// applied (`steer nic attach|update|detach`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub dev: String,
    pub netns: Option<String>,
    pub action: Action,
    /// The config now applied (absent after a detach).
    pub queues: Option<u32>,
    pub cpus: Option<Vec<u32>>,
    /// Whether flows are counted (known for an attach only).
    pub track_flows: Option<bool>,
}

impl Change {
    /// `action` done on `dev`, leaving `config` applied (none after detach).
    fn new(dev: &str, netns: Option<&str>, action: Action, config: Option<&RssConfig>) -> Self {
        Change {
            dev: dev.to_string(),
            netns: netns.map(str::to_string),
            action,
            queues: config.map(|c| c.queues),
            cpus: config.map(RssConfig::cpus),
            track_flows: None,
        }
    }

    /// [`crate::attach`] of `config` with `options`.
    pub fn attached(
        dev: &str,
        netns: Option<&str>,
        config: &RssConfig,
        options: &AttachOptions,
    ) -> Self {
        Change {
            track_flows: Some(options.track_flows),
            ..Change::new(dev, netns, Action::Attached, Some(config))
        }
    }

    /// [`crate::update`] to `config`.
    pub fn updated(dev: &str, netns: Option<&str>, config: &RssConfig) -> Self {
        Change::new(dev, netns, Action::Updated, Some(config))
    }

    /// [`crate::detach`].
    pub fn detached(dev: &str, netns: Option<&str>) -> Self {
        Change::new(dev, netns, Action::Detached, None)
    }
}

/// The one line that tells a person what changed.
impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dev = &self.dev;
        match self.action {
            Action::Attached => write!(
                f,
                "software RSS attached to {dev}: {} queues over CPUs {}",
                or_na(self.queues, |q| q.to_string()),
                or_na(self.cpus.as_ref(), |c| format!("{c:?}"))
            ),
            Action::Updated => write!(f, "software RSS on {dev} updated"),
            Action::Detached => write!(f, "software RSS detached from {dev}"),
        }
    }
}

impl Present for NicStats {
    fn text(&self) -> Text {
        let queues = Table::of(&["queue", "cpu", "packets", "bytes"], &self.queues, |q| {
            vec![
                q.queue.to_string(),
                q.cpu.to_string(),
                q.packets.to_string(),
                q.bytes.to_string(),
            ]
        });
        let cpus = Table::of(
            &[
                "cpu",
                "packets",
                "bytes",
                "cpumap enqueued",
                "cpumap dropped (queue full)",
                "kthread dropped",
            ],
            self.cpus.iter().zip(&self.cpumap),
            |(c, m)| {
                vec![
                    c.cpu.to_string(),
                    c.packets.to_string(),
                    c.bytes.to_string(),
                    m.enqueued.to_string(),
                    m.enqueue_drops.to_string(),
                    m.kthread_drops.to_string(),
                ]
            },
        );
        Text::new()
            .table(queues)
            .blank()
            .table(cpus)
            .blank()
            .line(format!(
                "non-IP frames (not hashed): {}",
                self.non_ip_packets
            ))
    }
}

/// The flows a software RSS with flow tracking has seen
/// ([`crate::flows`]); JSON: the list itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct TrackedFlows(pub Vec<FlowStats>);

impl Present for TrackedFlows {
    fn text(&self) -> Text {
        Table::of(&["flow", "queue", "packets", "bytes"], &self.0, |f| {
            vec![
                f.tuple.to_string(),
                f.queue.to_string(),
                f.packets.to_string(),
                f.bytes.to_string(),
            ]
        })
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuStats, CpumapStats, QueueStats};
    use rss::{FlowTuple, L4Proto, RssKey, StatedConfig};

    fn config() -> RssConfig {
        StatedConfig::new(RssKey::microsoft(), 2, 128)
            .build()
            .unwrap()
    }

    #[test]
    fn changes_read_as_one_line_and_keep_their_json() {
        let attached = Change::attached("veth0", Some("rcv"), &config(), &Default::default());
        assert_eq!(
            attached.to_string(),
            "software RSS attached to veth0: 2 queues over CPUs [0, 1]"
        );
        assert_eq!(
            serde_json::to_string(&attached).unwrap(),
            r#"{"dev":"veth0","netns":"rcv","action":"attached","queues":2,"cpus":[0,1],"track_flows":false}"#
        );
        assert_eq!(
            Change::updated("veth0", None, &config()).to_string(),
            "software RSS on veth0 updated"
        );
        let detached = Change::detached("veth0", None);
        assert_eq!(detached.to_string(), "software RSS detached from veth0");
        assert_eq!(
            serde_json::to_string(&detached).unwrap(),
            r#"{"dev":"veth0","netns":null,"action":"detached","queues":null,"cpus":null,"track_flows":null}"#
        );
    }

    #[test]
    fn an_attach_without_its_config_reads_na() {
        let change = Change {
            queues: None,
            cpus: None,
            ..Change::attached("veth0", None, &config(), &Default::default())
        };
        assert_eq!(
            change.to_string(),
            "software RSS attached to veth0: n/a queues over CPUs n/a"
        );
    }

    #[test]
    fn stats_show_queues_then_cpus_then_non_ip_frames() {
        let stats = NicStats {
            dev: "veth0".into(),
            queues: vec![QueueStats {
                queue: 0,
                cpu: 1,
                packets: 10,
                bytes: 1500,
            }],
            cpus: vec![CpuStats {
                cpu: 1,
                packets: 10,
                bytes: 1500,
            }],
            cpumap: vec![CpumapStats {
                cpu: 1,
                enqueued: 10,
                enqueue_drops: 0,
                kthread_processed: 10,
                kthread_drops: 0,
            }],
            non_ip_packets: 3,
        };
        let text = stats.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "queue  cpu  packets  bytes");
        assert_eq!(lines[1], "    0    1       10   1500");
        assert_eq!(lines[2], "");
        assert_eq!(
            lines[3],
            "cpu  packets  bytes  cpumap enqueued  cpumap dropped (queue full)  kthread dropped"
        );
        assert_eq!(lines[5], "");
        assert_eq!(lines[6], "non-IP frames (not hashed): 3");
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn tracked_flows_name_each_flow() {
        let flows = TrackedFlows(vec![FlowStats {
            tuple: FlowTuple::new(
                "10.0.0.1".parse().unwrap(),
                40000,
                "10.0.0.2".parse().unwrap(),
                5201,
                L4Proto::Tcp,
            ),
            queue: 3,
            packets: 7,
            bytes: 700,
        }]);
        assert_eq!(
            flows.text().to_string(),
            "flow                                 queue  packets  bytes\n\
             tcp 10.0.0.1:40000 -> 10.0.0.2:5201      3        7    700\n"
        );
        assert_eq!(
            serde_json::to_value(&flows)
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}
