//! What `steer agent` says once it listens: its URL, whether it asks for a
//! token, and the devices it serves (as `GET /v1/devices` lists them).

use plot::text::{Present, Table, Text};
use serde::Serialize;

use crate::api::ServedEntry;
use crate::server::Agent;

#[derive(Debug, Clone, Serialize)]
pub struct Listening {
    pub url: String,
    /// Requests must carry the bearer token.
    pub token: bool,
    pub devices: Vec<ServedEntry>,
}

impl Listening {
    pub fn of(agent: &Agent, token: bool) -> Self {
        Self {
            url: agent.url(),
            token,
            devices: agent.devices(),
        }
    }
}

/// One row per served device; "-" where a device has no name, no config
/// origin or no queue count yet.
impl Present for Listening {
    fn text(&self) -> Text {
        Table::of(
            &["dev", "addrs", "origin", "queues", "note"],
            &self.devices,
            |e| {
                let addrs: Vec<String> = e.addrs.iter().map(|a| a.to_string()).collect();
                vec![
                    e.dev.clone().unwrap_or_else(|| "-".into()),
                    addrs.join(","),
                    e.origin.map_or("-", |o| o.name()).to_string(),
                    e.queues.map_or("-".into(), |q| q.to_string()),
                    e.error.clone().unwrap_or_default(),
                ]
            },
        )
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_without_a_config_reads_dashes_and_its_error() {
        let listening = Listening {
            url: "http://127.0.0.1:9477".into(),
            token: false,
            devices: vec![ServedEntry {
                dev: Some("eth0".into()),
                addrs: vec!["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()],
                origin: None,
                config_version: 0,
                queues: None,
                error: Some("no RSS".into()),
            }],
        };
        let text = listening.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("dev "), "{text}");
        assert!(lines[1].starts_with("eth0  10.0.0.2,fd00::2"), "{text}");
        assert!(lines[1].ends_with("-  no RSS"), "{text}");
    }
}
