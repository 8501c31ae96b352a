//! Replaying a capture through the sorter: what a SRPIC receiver with a
//! given block size, ring size and batching would have delivered upward.
//!
//! Batching rule (the capture has no record of interrupts): a batch ends
//! after `batch` packets (a NAPI budget), or, when `gap_ns` is set, before a
//! packet that arrives more than `gap_ns` after the previous one (the ring
//! ran empty). A delivered packet is stamped with the arrival time of the
//! packet whose arrival released it (for end-of-batch flushes, the batch's
//! last packet), so output timestamps never run backwards.

use serde::Serialize;

use crate::capture::Capture;
use crate::sorter::{ConfigError, Descriptor, Sorter, SorterConfig, SorterStats};
use crate::wire::{self, PacketInfo};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReplayConfig {
    pub sorter: SorterConfig,
    /// Packets per batch (at least 1).
    pub batch: usize,
    /// End a batch at an inter-arrival gap larger than this (ns).
    pub gap_ns: Option<u64>,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            sorter: SorterConfig::default(),
            batch: 64,
            gap_ns: None,
        }
    }
}

/// The delivery order of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// Packet indices in delivery order (a permutation of 0..n).
    pub order: Vec<usize>,
    /// For each delivered packet, the index of the packet whose arrival released it.
    pub released_by: Vec<usize>,
    pub stats: SorterStats,
}

/// Parses every packet of a capture; `None` for frames that do not parse
/// (they are delivered at once, like any non-TCP packet).
pub fn parse_capture(cap: &Capture) -> Vec<Option<PacketInfo>> {
    cap.packets
        .iter()
        .map(|p| wire::parse(p.link, &p.data).ok())
        .collect()
}

/// Runs `(arrival time ns, descriptor)` pairs through a sorter in batches.
/// At most `u32::MAX` packets.
pub fn replay(packets: &[(u64, Descriptor)], cfg: &ReplayConfig) -> Result<Replay, ConfigError> {
    let mut sorter = Sorter::new(cfg.sorter)?;
    let batch = cfg.batch.max(1);
    let mut order = Vec::with_capacity(packets.len());
    let mut released_by = Vec::with_capacity(packets.len());
    let mut out: Vec<u32> = Vec::with_capacity(batch);
    let mut in_batch = 0usize;
    let mut release = |out: &mut Vec<u32>, by: usize| {
        for &id in out.iter() {
            order.push(id as usize);
            released_by.push(by);
        }
        out.clear();
    };
    for (i, (time, desc)) in packets.iter().enumerate() {
        if in_batch > 0 {
            let gap = cfg
                .gap_ns
                .is_some_and(|g| time.saturating_sub(packets[i - 1].0) > g);
            if in_batch >= batch || gap {
                sorter.end_batch(&mut out);
                release(&mut out, i - 1);
                in_batch = 0;
            }
        }
        sorter.push(i as u32, desc, &mut out);
        release(&mut out, i);
        in_batch += 1;
    }
    sorter.end_batch(&mut out);
    release(&mut out, packets.len().saturating_sub(1));
    Ok(Replay {
        order,
        released_by,
        stats: *sorter.stats(),
    })
}

/// Descriptors of a parsed capture, with arrival times.
pub fn descriptors(cap: &Capture, infos: &[Option<PacketInfo>]) -> Vec<(u64, Descriptor)> {
    cap.packets
        .iter()
        .zip(infos)
        .map(|(p, info)| {
            let desc = match info {
                Some(info) => info.descriptor(),
                None => Descriptor::Pass { flow: None },
            };
            (p.time_ns, desc)
        })
        .collect()
}
