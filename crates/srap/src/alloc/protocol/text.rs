//! How the allocator's answers read in a terminal (`steer ports lease`,
//! `steer ports status`).

use std::net::IpAddr;

use plot::text::{Present, Rows, Table, Text};

use super::{LeaseResponse, StatusResponse};

impl Present for LeaseResponse {
    fn text(&self) -> Text {
        Rows::new()
            .row("port", self.port.to_string())
            .row("queue", self.queue.to_string())
            .row("cpu", self.cpu.to_string())
            .row("lease", self.lease.to_string())
            .into()
    }
}

impl Present for StatusResponse {
    fn text(&self) -> Text {
        let remotes: Vec<String> = self.remotes.iter().map(IpAddr::to_string).collect();
        let leases = Table::of(
            &[
                "lease",
                "local",
                "remote",
                "queue",
                "cpu",
                "age ms",
                "connected",
            ],
            &self.leases,
            |l| {
                let f = &l.flow;
                vec![
                    l.lease.to_string(),
                    format!("{}:{}", f.local, f.port),
                    format!("{}:{}", f.remote, f.remote_port),
                    f.queue.to_string(),
                    f.cpu.to_string(),
                    l.age_ms.to_string(),
                    if l.connected { "yes" } else { "no" }.into(),
                ]
            },
        );
        Text::new()
            .rows(Rows::new().row("receivers", remotes.join(" ")))
            .table(leases)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{sample_lease, VERSION};
    use super::*;

    #[test]
    fn a_lease_reads_as_labelled_rows() {
        let lease = LeaseResponse {
            v: VERSION,
            port: 40001,
            queue: 3,
            cpu: 5,
            lease: 7,
        };
        assert_eq!(
            lease.text().to_string(),
            "port   40001\nqueue  3\ncpu    5\nlease  7\n"
        );
    }

    #[test]
    fn status_lists_receivers_then_one_row_per_lease() {
        let status = StatusResponse {
            v: VERSION,
            leases: vec![sample_lease()],
            remotes: vec!["10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap()],
        };
        let text = status.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "receivers  10.0.0.2 10.0.0.3");
        assert_eq!(
            lines[1],
            "lease           local         remote  queue  cpu  age ms  connected"
        );
        assert_eq!(
            lines[2],
            "    1  10.0.0.1:40000  10.0.0.2:5201      2    2      15         no"
        );
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn an_empty_allocator_shows_the_header_alone() {
        let status = StatusResponse {
            v: VERSION,
            leases: Vec::new(),
            remotes: Vec::new(),
        };
        assert_eq!(
            status.text().to_string(),
            "receivers  \nlease  local  remote  queue  cpu  age ms  connected\n"
        );
    }
}
