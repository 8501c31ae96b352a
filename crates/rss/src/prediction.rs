//! One flow's predicted placement with what was hashed, as `steer rss
//! where` shows it: the hash input's bytes, the hash, the indirection
//! entry, the queue and the CPU.

use plot::text::{Present, Rows, Text};
use serde::Serialize;

use crate::config::{Placement, RssConfig};
use crate::error::RssError;
use crate::tuple::FlowTuple;

/// Where `flow` lands under a config, and the bytes hashed to find it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Prediction {
    pub flow: FlowTuple,
    /// "0x" and 8 hex digits.
    pub hash: String,
    /// Indirection table entry used.
    pub index: usize,
    pub table_size: usize,
    pub queue: u32,
    pub cpu: u32,
    /// The hash input (after the input transform), in lowercase hex.
    pub hashed_bytes: String,
}

impl Prediction {
    /// Where `flow` lands under `config`.
    pub fn of(config: &RssConfig, flow: FlowTuple) -> Result<Prediction, RssError> {
        let placement = config.place(&flow)?;
        Prediction::placed(config, flow, placement)
    }

    /// `placement`, already computed for `flow` under `config`, with the
    /// bytes hashed.
    pub fn placed(
        config: &RssConfig,
        flow: FlowTuple,
        placement: Placement,
    ) -> Result<Prediction, RssError> {
        Ok(Prediction {
            flow,
            hash: format!("{:#010x}", placement.hash),
            index: placement.index,
            table_size: config.indirection_table.len(),
            queue: placement.queue,
            cpu: placement.cpu,
            hashed_bytes: hex::encode(config.hash_input(&flow)?.as_bytes()),
        })
    }
}

impl Present for Prediction {
    fn text(&self) -> Text {
        Rows::new()
            .row("flow", self.flow.to_string())
            .row(
                "hashed",
                format!(
                    "{} ({} bytes)",
                    self.hashed_bytes,
                    self.hashed_bytes.len() / 2
                ),
            )
            .row("hash", self.hash.clone())
            .row("index", format!("{} of {}", self.index, self.table_size))
            .row("queue", self.queue.to_string())
            .row("cpu", self.cpu.to_string())
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{L4Proto, RssKey, StatedConfig};

    /// The first IPv4 TCP example of Microsoft's RSS verification suite:
    /// 66.9.149.187:2794 -> 161.142.100.80:1766 hashes to 0x51ccc178.
    #[test]
    fn the_verification_flow_reads_with_its_bytes_hash_and_place() {
        let config = StatedConfig::new(RssKey::microsoft(), 4, 128)
            .build()
            .unwrap();
        let flow = FlowTuple::new(
            "66.9.149.187".parse().unwrap(),
            2794,
            "161.142.100.80".parse().unwrap(),
            1766,
            L4Proto::Tcp,
        );
        let p = Prediction::of(&config, flow).unwrap();
        assert_eq!(p.hash, "0x51ccc178");
        assert_eq!(p.hashed_bytes, "420995bba18e64500aea06e6");
        assert_eq!((p.index, p.table_size), (0x78, 128));
        assert_eq!(
            p.text().to_string(),
            format!(
                "flow    tcp 66.9.149.187:2794 -> 161.142.100.80:1766\n\
                 hashed  420995bba18e64500aea06e6 (12 bytes)\n\
                 hash    0x51ccc178\n\
                 index   120 of 128\n\
                 queue   {q}\n\
                 cpu     {q}\n",
                q = p.queue
            )
        );
    }
}
