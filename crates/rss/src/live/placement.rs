//! Where this host's TCP connections land under an RSS config, and which
//! busy ones share a CPU (`steer rss where --sockets`): the receive side of
//! each connection hashed as the NIC hashes it.

use std::collections::BTreeMap;

use plot::text::{or_na, Present, Table, Text};
use serde::Serialize;

use crate::{FlowTuple, L4Proto, Placement, Prediction, Predictor, RssError};

use super::TcpSocket;

/// A connection is busy when it has received at least this many bytes
/// (or when the kernel does not say how many).
pub const BUSY_BYTES: u64 = 1 << 20;

/// One connection and where its incoming packets land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketPlacement {
    pub socket: TcpSocket,
    /// The flow as the NIC sees it: from the remote end to us.
    pub flow: FlowTuple,
    pub placement: Placement,
    /// Received at least [`BUSY_BYTES`], or an unknown amount.
    pub busy: bool,
    /// Busy, and another busy connection lands on the same CPU.
    pub shares_cpu: bool,
}

/// Places each of `sockets` with `predictor`, in order; a socket the config
/// cannot hash (e.g. of another address family than the config hashes) is
/// left out.
pub fn place_sockets(predictor: &Predictor, sockets: Vec<TcpSocket>) -> Vec<SocketPlacement> {
    let mut rows: Vec<SocketPlacement> = sockets
        .into_iter()
        .filter_map(|socket| {
            // Packets arriving here come from the remote end.
            let flow = FlowTuple::new(
                socket.remote.ip(),
                socket.remote.port(),
                socket.local.ip(),
                socket.local.port(),
                L4Proto::Tcp,
            );
            let placement = predictor.place(&flow).ok()?;
            let busy = socket.bytes_received.is_none_or(|b| b >= BUSY_BYTES);
            Some(SocketPlacement {
                socket,
                flow,
                placement,
                busy,
                shares_cpu: false,
            })
        })
        .collect();
    let mut busy_per_cpu: BTreeMap<u32, usize> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.busy) {
        *busy_per_cpu.entry(row.placement.cpu).or_default() += 1;
    }
    for row in rows.iter_mut() {
        row.shares_cpu = row.busy && busy_per_cpu[&row.placement.cpu] > 1;
    }
    rows
}

/// One connection as `steer rss where --sockets` lists it: where it lands,
/// with the bytes hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SocketRow {
    pub socket: TcpSocket,
    #[serde(flatten)]
    pub placement: Prediction,
    pub busy: bool,
    /// Another busy flow lands on the same CPU.
    pub shares_cpu: bool,
}

/// Every placed connection; JSON: the list itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SocketRows(pub Vec<SocketRow>);

/// [`place_sockets`], each with its [`Prediction`].
pub fn socket_rows(predictor: &Predictor, sockets: Vec<TcpSocket>) -> Result<SocketRows, RssError> {
    let rows = place_sockets(predictor, sockets)
        .into_iter()
        .map(|p| {
            Ok(SocketRow {
                placement: Prediction::placed(predictor.config(), p.flow, p.placement)?,
                socket: p.socket,
                busy: p.busy,
                shares_cpu: p.shares_cpu,
            })
        })
        .collect::<Result<_, RssError>>()?;
    Ok(SocketRows(rows))
}

impl Present for SocketRows {
    fn text(&self) -> Text {
        Table::of(
            &["remote", "local", "hash", "queue", "cpu", "rx bytes", ""],
            &self.0,
            |r| {
                vec![
                    r.socket.remote.to_string(),
                    r.socket.local.to_string(),
                    r.placement.hash.clone(),
                    r.placement.queue.to_string(),
                    r.placement.cpu.to_string(),
                    // The byte count is the kernel's; "n/a" where it sent none.
                    or_na(r.socket.bytes_received, |b| b.to_string()),
                    if r.shares_cpu { "SHARED CPU" } else { "" }.into(),
                ]
            },
        )
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RssKey, StatedConfig};

    fn socket(remote_port: u16, bytes: Option<u64>) -> TcpSocket {
        TcpSocket {
            local: "10.0.0.2:5201".parse().unwrap(),
            remote: format!("10.0.0.1:{remote_port}").parse().unwrap(),
            state: "ESTAB".into(),
            bytes_received: bytes,
            bytes_acked: None,
            bytes_sent: None,
        }
    }

    /// One queue: every connection lands on CPU 0.
    fn one_queue() -> Predictor {
        let config = StatedConfig::new(RssKey::microsoft(), 1, 128)
            .build()
            .unwrap();
        Predictor::new(config).unwrap()
    }

    #[test]
    fn busy_connections_on_one_cpu_share_it_idle_ones_never_do() {
        let predictor = one_queue();
        let rows = place_sockets(
            &predictor,
            vec![
                socket(40000, Some(BUSY_BYTES)),
                socket(40001, None),
                socket(40002, Some(BUSY_BYTES - 1)),
            ],
        );
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.placement.cpu == 0));
        assert_eq!(
            rows.iter()
                .map(|r| (r.busy, r.shares_cpu))
                .collect::<Vec<_>>(),
            [(true, true), (true, true), (false, false)]
        );
        // The flow is hashed from the remote end.
        assert_eq!(rows[0].flow.src_port, 40000);
        assert_eq!(rows[0].flow.dst_port, 5201);
        assert_eq!(rows[0].placement, predictor.place(&rows[0].flow).unwrap());
    }

    #[test]
    fn socket_rows_carry_the_prediction_and_flag_shared_cpus() {
        let predictor = one_queue();
        let rows = socket_rows(
            &predictor,
            vec![socket(40000, Some(BUSY_BYTES)), socket(40001, None)],
        )
        .unwrap();
        let first = &rows.0[0];
        assert_eq!(
            first.placement,
            Prediction::of(
                predictor.config(),
                place_sockets(&predictor, vec![socket(40000, None)])[0].flow
            )
            .unwrap()
        );
        let text = rows.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].trim_end(),
            "remote                  local        hash  queue  cpu  rx bytes"
        );
        assert!(lines[1].ends_with(" 1048576  SHARED CPU"), "{text}");
        // The kernel said nothing about the second's bytes.
        assert!(lines[2].ends_with("     n/a  SHARED CPU"), "{text}");
        // The JSON is the list, each row the socket, the prediction's
        // fields and the flags.
        let json = serde_json::to_value(&rows).unwrap();
        assert_eq!(json[0]["socket"]["remote"], "10.0.0.1:40000");
        assert_eq!(json[0]["queue"], 0);
        assert_eq!(json[1]["shares_cpu"], true);
    }

    #[test]
    fn a_lone_busy_connection_does_not_share() {
        let predictor = one_queue();
        let rows = place_sockets(&predictor, vec![socket(40000, Some(1 << 30))]);
        assert!(rows[0].busy && !rows[0].shares_cpu);
    }
}
