//! Table 5.1 of the thesis (§5.3.1.5), run on the emulator: seven segments
//! of one connection, the pseudo segments their mirrors carry, and the loss
//! of the third mirror to internal congestion.
//!
//! Nothing here is the table's answer: the segments are injected at times
//! chosen so the mirrors (350 ns on the mirror path) interleave with them
//! as in the table, the mirror path loses its third packet, and each row is
//! read back from the registers after the pipeline processed the packet.

use std::collections::HashMap;

use plot::text::{or_na, Present, Table, Text};
use serde::Serialize;

use crate::channel::{ChannelConfig, Loss};
use crate::pipeline::{ControlError, PacketId, Pipeline, PipelineConfig, Source, TraceEvent};
use crate::program::Port;
use crate::ProgramError;

use super::fields::{PLEN, SEG_SEQ, WORKFLOW};
use super::program::{program, register, workflow, LaminarConfig};
use super::segment::{flags, TcpSegment};
use super::{install, ConnectionSpec};

/// One row: a segment or pseudo segment and the reassembly state after it
/// (`None` when the packet was lost before reaching the stages).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub segment: String,
    pub seq: Option<u32>,
    pub plen: Option<u32>,
    pub rx_next_seq: Option<u32>,
    pub rx_avail: Option<u32>,
    pub rx_ooo_tail: Option<u32>,
    pub rx_ooo_head: Option<u32>,
}

/// The whole example: what `steer rmt example table-5.1` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Table51 {
    pub rows: Vec<Row>,
}

impl Table51 {
    /// Runs the example ([`table_5_1`]).
    pub fn run() -> Result<Self, ExampleError> {
        Ok(Table51 { rows: table_5_1()? })
    }
}

/// The table as the thesis prints it; a packet lost on the mirror path
/// has no state ("n/a") and says so.
impl Present for Table51 {
    fn text(&self) -> Text {
        let n = |v: Option<u32>| or_na(v, |v| v.to_string());
        let header = [
            "segment",
            "seq",
            "plen",
            "rx-next-seq",
            "rx-avail",
            "rx-ooo-tail",
            "rx-ooo-head",
            "",
        ];
        Table::of(&header, &self.rows, |r| {
            let lost = r.seq.is_some() && r.rx_next_seq.is_none();
            vec![
                r.segment.clone(),
                n(r.seq),
                n(r.plen),
                n(r.rx_next_seq),
                n(r.rx_avail),
                n(r.rx_ooo_tail),
                n(r.rx_ooo_head),
                if lost { "lost on the mirror path" } else { "" }.into(),
            ]
        })
        .into()
    }
}

/// Why the example could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    #[error("loading the program: {0}")]
    Load(#[from] ProgramError),
    #[error("control plane: {0}")]
    Control(#[from] ControlError),
    #[error("injecting a segment: {0}")]
    Inject(#[from] crate::pipeline::InjectError),
}

/// The connection of the example: it expects sequence number 1000 and has a
/// window of 10000 bytes (Table 5.1, "Initial state").
pub fn table_5_1_connection() -> ConnectionSpec {
    ConnectionSpec {
        local_ip: 0x0a00_0002,
        local_port: 5201,
        remote_ip: 0x0a00_0001,
        remote_port: 40000,
        ctx: 0,
        rx_next_seq: 1000,
        rx_buffer_addr: 0x10_0000,
        rx_buffer_size: 16384,
        rx_avail: 10000,
        tx_base_seq: 0,
        tx_next_ack: 0,
        tx_credits: 0,
        credit_grant: 0,
        tx_remote_avail: 0,
        wscale: 0,
    }
}

/// The segments #1 to #7 as (arrival ns, seq, payload length).
pub const TABLE_5_1_SEGMENTS: [(u64, u32, u16); 7] = [
    (0, 1500, 500),
    (100, 1000, 500),
    (120, 2000, 500),
    (300, 1500, 100),
    (500, 2500, 100),
    (550, 2000, 100),
    (600, 3000, 100),
];

/// The mirror path of the example: 350 ns, room for 16, loses its third
/// packet (the pseudo segment P#3).
pub fn table_5_1_mirror() -> ChannelConfig {
    ChannelConfig {
        latency_ns: 350,
        capacity: 16,
        loss: Loss::Nth(vec![3]),
    }
}

/// Runs the example and returns the initial state and one row per segment
/// and pseudo segment, in the order the pipeline processed them.
pub fn table_5_1() -> Result<Vec<Row>, ExampleError> {
    let config = PipelineConfig {
        mirror: table_5_1_mirror(),
        ..PipelineConfig::default()
    };
    let mut p = Pipeline::load(program(LaminarConfig::default()), config)?;
    let spec = table_5_1_connection();
    install(&mut p, 0, &spec)?;
    p.enable_trace();
    let mut rows = vec![state_row(&p, "initial".into(), None, None)?];
    let mut labels: HashMap<PacketId, usize> = HashMap::new();
    for (i, (at, seq, plen)) in TABLE_5_1_SEGMENTS.into_iter().enumerate() {
        run_until(&mut p, at, &labels, &mut rows)?;
        let segment = TcpSegment {
            src_ip: spec.remote_ip,
            dst_ip: spec.local_ip,
            src_port: spec.remote_port,
            dst_port: spec.local_port,
            seq,
            ack: 0,
            flags: flags::ACK,
            window: 0,
            sack: None,
            payload: vec![0; usize::from(plen)],
        };
        let id = p.inject(at, Port::Mac(0), &segment.emit())?;
        labels.insert(id, i + 1);
    }
    run_until(&mut p, u64::MAX, &labels, &mut rows)?;
    Ok(rows)
}

/// Steps the pipeline to `at_ns`, adding a row for every data segment and
/// every pseudo segment with a range to merge that reached the egress
/// stages or was lost on the mirror path.
fn run_until(
    p: &mut Pipeline,
    at_ns: u64,
    labels: &HashMap<PacketId, usize>,
    rows: &mut Vec<Row>,
) -> Result<(), ExampleError> {
    let label = |id: Option<PacketId>| id.and_then(|id| labels.get(&id)).copied().unwrap_or(0);
    while p.step(at_ns) {
        for event in p.take_trace() {
            match event {
                TraceEvent::Egress {
                    id,
                    parent,
                    source,
                    phv,
                    ..
                } if phv.get(PLEN) > 0 => {
                    let name = match source {
                        Source::Mirror => format!("P#{}", label(parent)),
                        Source::Port(_) => format!("#{}", label(Some(id))),
                    };
                    let (seq, plen) = (phv.get(SEG_SEQ) as u32, phv.get(PLEN) as u32);
                    rows.push(state_row(p, name, Some(seq), Some(plen))?);
                }
                TraceEvent::Lost {
                    parent,
                    phv: Some(phv),
                    ..
                } if phv.get(WORKFLOW) == workflow::PSEUDO && phv.get(PLEN) > 0 => {
                    rows.push(Row {
                        segment: format!("P#{}", label(parent)),
                        seq: Some(phv.get(SEG_SEQ) as u32),
                        plen: Some(phv.get(PLEN) as u32),
                        rx_next_seq: None,
                        rx_avail: None,
                        rx_ooo_tail: None,
                        rx_ooo_head: None,
                    });
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// A row with the registers of connection 0 as they are now.
fn state_row(
    p: &Pipeline,
    segment: String,
    seq: Option<u32>,
    plen: Option<u32>,
) -> Result<Row, ExampleError> {
    let read = |name| p.register_read(name, 0).map(|v| Some(v as u32));
    Ok(Row {
        segment,
        seq,
        plen,
        rx_next_seq: read(register::RX_NEXT_SEQ)?,
        rx_avail: read(register::RX_AVAIL)?,
        rx_ooo_tail: read(register::RX_OOO_TAIL)?,
        rx_ooo_head: read(register::RX_OOO_HEAD)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_has_a_row_per_packet_and_null_state_for_the_lost_p3() {
        let json = serde_json::to_value(Table51::run().unwrap()).unwrap();
        let rows = json["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 13);
        let p3 = rows.iter().find(|r| r["segment"] == "P#3").unwrap();
        assert_eq!(
            (p3["seq"].as_u64(), p3["plen"].as_u64()),
            (Some(1500), Some(1000))
        );
        for key in ["rx_next_seq", "rx_avail", "rx_ooo_tail", "rx_ooo_head"] {
            assert!(p3[key].is_null(), "{key} of the lost P#3");
        }
        let last = &rows[12];
        assert_eq!(last["segment"], "P#6");
        assert_eq!(last["rx_next_seq"], 2600);
    }

    #[test]
    fn the_lost_p3_reads_na_and_says_it_was_lost() {
        let text = Table51::run().unwrap().text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 13);
        assert!(
            lines[0].starts_with("segment   seq  plen  rx-next-seq"),
            "{text}"
        );
        let p3 = lines.iter().find(|l| l.starts_with("P#3 ")).unwrap();
        assert!(p3.ends_with("lost on the mirror path"), "{p3}");
        assert_eq!(p3.matches("n/a").count(), 4, "{p3}");
        let initial = lines[1];
        assert!(
            initial.starts_with("initial") && initial.contains("n/a"),
            "{initial}"
        );
        assert!(!initial.contains("lost"), "{initial}");
    }
}
