//! What `steer attach` reports: a pinned binder's counters
//! ([`BinderStatus`]) and the plans it installed ([`InstalledPlans`]), and
//! how they read.

use std::path::PathBuf;

use plot::text::{Present, Rows, Table, Text};
use serde::Serialize;
use srap::Plan;

use crate::cgroup::{BinderStats, CgroupBinder};
use crate::BinderError;

/// A binder attached to a cgroup: how many destinations it has plans for
/// and what its programs did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BinderStatus {
    pub cgroup: PathBuf,
    pub destinations: usize,
    pub stats: BinderStats,
}

impl BinderStatus {
    /// What `binder` holds and counted so far.
    pub fn of(binder: &CgroupBinder) -> Result<BinderStatus, BinderError> {
        Ok(BinderStatus {
            cgroup: binder.cgroup().to_path_buf(),
            destinations: binder.plan_count(),
            stats: binder.stats()?,
        })
    }
}

impl Present for BinderStatus {
    fn text(&self) -> Text {
        let s = &self.stats;
        Rows::new()
            .row("cgroup", self.cgroup.display().to_string())
            .row("destinations", self.destinations.to_string())
            .row("bound", s.bound.to_string())
            .row("bind failures", s.bind_failed.to_string())
            .row("fallbacks", s.fallback.to_string())
            .row("no plan", s.no_plan.to_string())
            .row("skipped", s.skipped.to_string())
            .into()
    }
}

/// The plans a binder was given, one per destination (JSON: the array of
/// plans).
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct InstalledPlans(pub Vec<Plan>);

/// Per destination: `local -> remote:port (N ports)`, then its ports in
/// slot order with the queue and CPU each lands on.
impl Present for InstalledPlans {
    fn text(&self) -> Text {
        self.0.iter().fold(Text::new(), |text, plan| {
            let title = format!(
                "{} -> {}:{} ({} ports)",
                plan.local,
                plan.remote,
                plan.remote_port,
                plan.entries.len()
            );
            let slots = Table::of(
                &["slot", "port", "queue", "cpu"],
                plan.entries.iter().enumerate(),
                |(i, e)| {
                    vec![
                        i.to_string(),
                        e.port.to_string(),
                        e.queue.to_string(),
                        e.cpu.to_string(),
                    ]
                },
            );
            text.line(title).table(slots)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    use rss::RssConfig;

    use super::*;
    use crate::plans::{plan, Receiver};

    #[test]
    fn a_status_reads_its_counters_by_name() {
        let status = BinderStatus {
            cgroup: PathBuf::from("/sys/fs/cgroup/app"),
            destinations: 2,
            stats: BinderStats {
                bound: 3,
                no_plan: 1,
                ..BinderStats::default()
            },
        };
        let text = status.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "cgroup         /sys/fs/cgroup/app");
        assert_eq!(lines[2], "bound          3");
        assert_eq!(lines[5], "no plan        1");
        assert_eq!(lines.len(), 7);
        assert_eq!(
            status.stats.to_string(),
            "3 bound, 0 bind failures, 0 fallbacks, 1 without plan, 0 skipped"
        );
    }

    #[test]
    fn installed_plans_read_a_title_and_a_slot_table_each_and_json_as_an_array() {
        let config = RssConfig::ethtool_default(rss::RssKey::microsoft(), 4, 128).unwrap();
        let loads = BTreeMap::new();
        let receiver = Receiver {
            config: &config,
            loads: &loads,
        };
        let local = "10.0.0.1".parse().unwrap();
        let plans: Vec<Plan> = ["10.0.0.2:5201", "10.0.0.3:80"]
            .iter()
            .map(|to| {
                let to: SocketAddr = to.parse().unwrap();
                plan(receiver, local, local, to, 4).unwrap().plan
            })
            .collect();
        let installed = InstalledPlans(plans);
        let text = installed.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 * (1 + 1 + 4), "{text}");
        assert_eq!(lines[0], "10.0.0.1 -> 10.0.0.2:5201 (4 ports)");
        assert!(lines[1].starts_with("slot   port  queue  cpu"), "{text}");
        assert!(lines[2].starts_with("   0  "), "{text}");
        assert_eq!(lines[6], "10.0.0.1 -> 10.0.0.3:80 (4 ports)");
        let json = serde_json::to_value(&installed).unwrap();
        assert_eq!(json.as_array().map(Vec::len), Some(2));
    }
}
