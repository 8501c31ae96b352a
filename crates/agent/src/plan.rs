//! A source-port plan towards a receiver, with where its inputs came from
//! (`steer ports plan`): the receiver's config ([`Receiver`]), the source
//! address the receiver sees ([`source_address`]) and SRAP's plan over them
//! (papers/srap-source-port-selection.txt, section 3; docs/srap.md).

use std::net::{IpAddr, SocketAddr};

use plot::text::{Present, Rows, Table, Text};
use rss::L4Proto;
use serde::Serialize;
use srap::{Plan, PortRange};

use crate::receiver::{source_address, Receiver, ReceiverError};

/// What a sender asks for: `flows` flows to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRequest {
    pub to: SocketAddr,
    /// The source address as the receiver sees it; None: what the
    /// receiver's agent saw, else the kernel's route towards `to`.
    pub from: Option<IpAddr>,
    pub proto: L4Proto,
    pub flows: usize,
    /// Source ports to choose from; None: this host's ip_local_port_range.
    pub port_range: Option<PortRange>,
    /// Seed of the scan's starting port; None: a random start.
    pub seed: Option<u64>,
}

/// A plan and where its inputs came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanResult {
    pub to: SocketAddr,
    pub from: IpAddr,
    /// Where `from` came from: "given", "seen by the agent" or "route".
    pub from_source: &'static str,
    /// Where the receiver's config came from.
    pub receiver: String,
    pub port_range: PortRange,
    #[serde(flatten)]
    pub plan: Plan,
}

impl PlanResult {
    /// Plans `request` for `receiver` (least-loaded CPUs first), from the
    /// source address the receiver sees, honouring this host's port range,
    /// reserved ports and ports in use unless a range is given.
    pub fn new(receiver: &Receiver, request: &PlanRequest) -> Result<PlanResult, ReceiverError> {
        if request.flows == 0 {
            return Err(ReceiverError::NoFlows);
        }
        let to = request.to;
        let (from, origin) = source_address(request.from, receiver.seen_from, to, None)?;
        let (plan, port_range) = receiver.plan(
            from,
            to,
            request.proto,
            request.flows,
            request.port_range,
            request.seed,
        )?;
        Ok(PlanResult {
            to,
            from,
            from_source: origin.name(),
            receiver: receiver.origin.clone(),
            port_range,
            plan,
        })
    }
}

impl Present for PlanResult {
    fn text(&self) -> Text {
        let plan = &self.plan;
        let ports = Table::of(&["port", "queue", "cpu", "hash"], &plan.entries, |e| {
            vec![
                e.port.to_string(),
                e.queue.to_string(),
                e.cpu.to_string(),
                format!("{:#010x}", e.hash),
            ]
        });
        let mut rows = Rows::new()
            .row(
                "flow",
                format!(
                    "{} -> {} ({} source address)",
                    self.from, self.to, self.from_source
                ),
            )
            .row("receiver", self.receiver.clone())
            .row(
                "cpus",
                format!(
                    "{} flows on {} of {} receiver CPUs, at most {} per CPU",
                    plan.flows,
                    plan.cpus_used,
                    plan.cpus.len(),
                    plan.max_per_cpu
                ),
            )
            .row(
                "queues",
                format!(
                    "{} of {} queues, at most {} per queue",
                    plan.queues_used,
                    plan.queues.len(),
                    plan.max_per_queue
                ),
            )
            .row("port range", self.port_range.to_string());
        if plan.flows > plan.cpus.len() {
            rows.push(
                "note",
                format!(
                    "more flows than CPUs: least-loaded CPUs first, at most {} per CPU (ideal {})",
                    plan.max_per_cpu, plan.ideal_max_per_cpu
                ),
            );
        }
        if !plan.unreachable_cpus.is_empty() {
            rows.push(
                "note",
                format!(
                    "no free port in the range reaches CPUs {:?}",
                    plan.unreachable_cpus
                ),
            );
        }
        Text::new().table(ports).blank().rows(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rss::{RssKey, StatedConfig};

    fn request(flows: usize) -> PlanRequest {
        PlanRequest {
            to: "10.0.0.2:5201".parse().unwrap(),
            from: Some("10.0.0.1".parse().unwrap()),
            proto: L4Proto::Tcp,
            flows,
            port_range: Some("40000-40999".parse().unwrap()),
            seed: Some(1),
        }
    }

    fn receiver(queues: u32) -> Receiver {
        Receiver::stated(&StatedConfig::new(RssKey::microsoft(), queues, 128)).unwrap()
    }

    #[test]
    fn a_plan_says_where_its_inputs_came_from() {
        let result = PlanResult::new(&receiver(4), &request(4)).unwrap();
        assert_eq!(result.from_source, "given");
        assert_eq!(result.receiver, "stated assumptions");
        assert_eq!(result.port_range.to_string(), "40000-40999");
        assert_eq!(result.plan.cpus_used, 4);
        // The JSON keeps its field order: the inputs, then the plan's.
        let json = serde_json::to_string(&result).unwrap();
        let at = |key: &str| json.find(&format!("\"{key}\":")).unwrap();
        assert!(at("to") < at("from") && at("from") < at("from_source"));
        assert!(at("receiver") < at("port_range") && at("port_range") < at("local"));
    }

    #[test]
    fn no_flows_is_bad_input() {
        let err = PlanResult::new(&receiver(4), &request(0)).unwrap_err();
        assert!(matches!(err, ReceiverError::NoFlows));
        assert!(err.is_bad_input());
        assert_eq!(err.to_string(), "--flows must be at least 1");
    }

    #[test]
    fn a_plan_reads_as_its_ports_then_labelled_rows() {
        let result = PlanResult::new(&receiver(4), &request(4)).unwrap();
        let text = result.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], " port  queue  cpu        hash");
        assert_eq!(lines[5], "");
        assert_eq!(
            lines[6],
            "flow        10.0.0.1 -> 10.0.0.2:5201 (given source address)"
        );
        assert_eq!(lines[7], "receiver    stated assumptions");
        assert_eq!(
            lines[8],
            "cpus        4 flows on 4 of 4 receiver CPUs, at most 1 per CPU"
        );
        assert_eq!(lines[10], "port range  40000-40999");
        assert_eq!(lines.len(), 11, "{text}");
    }

    #[test]
    fn more_flows_than_cpus_is_noted() {
        let result = PlanResult::new(&receiver(2), &request(3)).unwrap();
        let text = result.text().to_string();
        assert!(
            text.ends_with(
                "note        more flows than CPUs: least-loaded CPUs first, at most 2 per CPU (ideal 2)\n"
            ),
            "{text}"
        );
    }
}
