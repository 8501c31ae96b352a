//! What `steer lab status` shows: the hosts, whether their namespaces exist,
//! and the software RSS state.

use serde::Serialize;

use crate::{Host, Lab, LabError};

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

/// The human view: one line per host, then the software RSS state.
impl std::fmt::Display for LabStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "lab {}{}",
            self.name,
            if self.complete { "" } else { " (incomplete)" }
        )?;
        writeln!(
            f,
            "{:<12} {:<24} {:<8} {:<16} {:<24} role",
            "host", "netns", "dev", "ipv4", "ipv6"
        )?;
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
            writeln!(
                f,
                "{:<12} {:<24} {:<8} {:<16} {:<24} {role}{missing}",
                h.host.name, h.host.netns, h.host.dev, h.host.ipv4, ipv6
            )?;
        }
        if let Some(sw) = &self.switch_netns {
            writeln!(f, "switch netns: {sw}")?;
        }
        match self.queues {
            Some(q) if self.software_rss => write!(f, "software RSS: attached, {q} queues"),
            _ => write!(f, "software RSS: not attached"),
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
