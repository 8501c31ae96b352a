//! What `steer lab status` shows: the hosts, whether their namespaces exist,
//! and the software RSS state.

use plot::text::{Present, Text};
use serde::Serialize;

use crate::{Host, Lab, LabError, Wire};

/// What `steer lab status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    pub name: String,
    pub complete: bool,
    pub hosts: Vec<HostStatus>,
    pub switch_netns: Option<String>,
    pub receiver: String,
    pub sender: String,
    /// Whether Steer's software RSS runs on the receiver's device.
    pub software_rss: bool,
    pub queues: Option<u32>,
}

impl LabStatus {
    /// The human view: one line per host, then the software RSS state.
    /// The host columns have fixed widths so every lab's status lines up.
    fn lines(&self) -> Vec<String> {
        let title = format!(
            "lab {}{}",
            self.name,
            if self.complete { "" } else { " (incomplete)" }
        );
        let header = format!(
            "{:<12} {:<24} {:<8} {:<16} {:<24} role",
            "host", "netns", "dev", "ipv4", "ipv6"
        );
        let mut lines = vec![title, header];
        for h in &self.hosts {
            let role = if h.host.name == self.receiver {
                "receiver"
            } else if h.host.name == self.sender {
                "sender"
            } else {
                ""
            };
            let ipv6 = h.host.ipv6.map_or("-".to_string(), |a| a.to_string());
            let missing = if h.netns_exists {
                ""
            } else {
                " (netns missing)"
            };
            lines.push(format!(
                "{:<12} {:<24} {:<8} {:<16} {:<24} {role}{missing}",
                h.host.name, h.host.netns, h.host.dev, h.host.ipv4, ipv6
            ));
        }
        if let Some(sw) = &self.switch_netns {
            lines.push(format!("switch netns: {sw}"));
        }
        lines.push(match self.queues {
            Some(q) if self.software_rss => format!("software RSS: attached, {q} queues"),
            _ => "software RSS: not attached".to_string(),
        });
        lines
    }
}

/// The status's lines, without a newline after the last.
impl std::fmt::Display for LabStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.lines().join("\n"))
    }
}

impl Present for LabStatus {
    fn text(&self) -> Text {
        self.lines().into_iter().fold(Text::new(), Text::line)
    }
}

/// A lab built through a wire (`steer wire up`): its status and the wire's
/// namespace and devices.
#[derive(Debug, Clone, Serialize)]
pub struct WiredStatus {
    pub lab: LabStatus,
    pub wire: Option<Wire>,
}

impl WiredStatus {
    /// What exists of `lab`, and its wire.
    pub fn of(lab: &Lab) -> Result<WiredStatus, LabError> {
        Ok(WiredStatus {
            lab: Lab::status(lab.name())?,
            wire: lab.wire().cloned(),
        })
    }
}

impl Present for WiredStatus {
    fn text(&self) -> Text {
        let text = self.lab.text();
        match &self.wire {
            Some(w) => text.line(format!(
                "wire netns: {} ({} <-> {})",
                w.netns, w.sender_dev, w.receiver_dev
            )),
            None => text,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    #[serde(flatten)]
    pub host: Host,
    pub netns_exists: bool,
}

impl Lab {
    /// What exists of lab `name`.
    pub fn status(name: &str) -> Result<LabStatus, LabError> {
        let lab = Lab::open(name)?;
        let receiver = lab.receiver().clone();
        let config = if host::netns::exists(&receiver.netns) {
            nic::attached_config(&receiver.dev, Some(&receiver.netns)).unwrap_or(None)
        } else {
            None
        };
        Ok(LabStatus {
            name: lab.state.name.clone(),
            complete: lab.state.complete,
            hosts: lab
                .state
                .hosts
                .iter()
                .map(|h| HostStatus {
                    host: h.clone(),
                    netns_exists: host::netns::exists(&h.netns),
                })
                .collect(),
            switch_netns: lab.state.switch_netns.clone(),
            receiver: lab.state.receiver.clone(),
            sender: lab.state.sender.clone(),
            software_rss: config.is_some(),
            queues: config.map(|c| c.queues),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn status(software_rss: bool) -> LabStatus {
        let host = |name: &str, i: u8, exists| HostStatus {
            host: Host {
                name: name.into(),
                netns: format!("t-{name}"),
                dev: "veth0".into(),
                ipv4: Ipv4Addr::new(10, 77, 1, i),
                ipv6: None,
            },
            netns_exists: exists,
        };
        LabStatus {
            name: "t".into(),
            complete: true,
            hosts: vec![host("snd", 1, true), host("rcv", 2, false)],
            switch_netns: None,
            receiver: "rcv".into(),
            sender: "snd".into(),
            software_rss,
            queues: Some(4),
        }
    }

    #[test]
    fn a_status_reads_a_line_per_host_then_the_software_rss() {
        let text = status(true).text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "lab t");
        assert!(lines[1].starts_with("host         netns"), "{text}");
        assert!(
            lines[1].ends_with("ipv6                     role"),
            "{text}"
        );
        assert!(lines[2].starts_with("snd          t-snd"), "{text}");
        assert!(
            lines[2].ends_with("-                        sender"),
            "{text}"
        );
        assert!(lines[3].ends_with("receiver (netns missing)"), "{text}");
        assert_eq!(lines[4], "software RSS: attached, 4 queues");
        assert_eq!(text, format!("{}\n", status(true)));
        let off = status(false).text().to_string();
        assert!(off.ends_with("software RSS: not attached\n"), "{off}");
    }

    #[test]
    fn a_wired_status_names_its_wire() {
        let wired = WiredStatus {
            lab: status(false),
            wire: Some(Wire {
                netns: "t-wire".into(),
                sender_dev: "to-snd".into(),
                receiver_dev: "to-rcv".into(),
            }),
        };
        let text = wired.text().to_string();
        assert!(
            text.ends_with("not attached\nwire netns: t-wire (to-snd <-> to-rcv)\n"),
            "{text}"
        );
        let bare = WiredStatus {
            wire: None,
            ..wired
        };
        assert_eq!(bare.text(), bare.lab.text());
    }
}
