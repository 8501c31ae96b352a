//! The RSS indirection table: hash low bits -> queue.
//!
//! The fills are ethtool's (`ethtool -X DEV default|equal N|weight W...`,
//! `start N`), so a table made here is the table the kernel would program.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::RssError;

/// Largest table Steer accepts. Drivers report their own fixed size (128 for
/// ixgbe, 512 for i40e, up to 2048 for ice and mlx5); the netlink API carries
/// u32 entries with no fixed maximum, so this is a sanity bound, not a kernel one.
pub const MAX_TABLE_SIZE: usize = 65536;

/// Typical default table size (many drivers use 128).
pub const DEFAULT_TABLE_SIZE: usize = 128;

/// Queue per entry. A packet uses entry `hash % len` (for the power-of-two sizes
/// NICs use, that is the low bits of the hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IndirectionTable(Vec<u32>);

impl IndirectionTable {
    pub fn from_entries(entries: Vec<u32>) -> Result<Self, RssError> {
        if entries.is_empty() {
            return Err(RssError::EmptyTable);
        }
        if entries.len() > MAX_TABLE_SIZE {
            return Err(RssError::TableTooLarge {
                size: entries.len(),
                max: MAX_TABLE_SIZE,
            });
        }
        Ok(IndirectionTable(entries))
    }

    /// ethtool's default and `equal N`: entry i -> queue `start + i % queues`
    /// (ethtool_rxfh_indir_default() in include/linux/ethtool.h).
    pub fn equal(size: usize, queues: u32, start: u32) -> Result<Self, RssError> {
        if queues == 0 {
            return Err(RssError::NoQueues);
        }
        Self::from_entries((0..size as u32).map(|i| start + i % queues).collect())
    }

    /// ethtool's `weight W0 W1 ...`: queue j gets a share of entries
    /// proportional to its weight, in contiguous runs (ethtool.c
    /// fill_indir_table: entry i goes to the first queue whose cumulative
    /// weight exceeds `i * sum / size`).
    pub fn weighted(size: usize, weights: &[u32], start: u32) -> Result<Self, RssError> {
        let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        if sum == 0 {
            return Err(RssError::ZeroWeights);
        }
        let mut entries = Vec::with_capacity(size);
        let (mut partial, mut j) = (0u64, 0usize);
        for i in 0..size as u64 {
            while i >= size as u64 * partial / sum {
                partial += u64::from(weights[j]);
                j += 1;
            }
            entries.push(start + j as u32 - 1);
        }
        Self::from_entries(entries)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn entries(&self) -> &[u32] {
        &self.0
    }

    /// The entry a hash selects.
    pub fn index_of(&self, hash: u32) -> usize {
        (hash as usize) % self.0.len()
    }

    pub fn queue_at(&self, index: usize) -> u32 {
        self.0[index]
    }

    /// Fails if an entry names a queue the device does not have.
    pub fn check_queues(&self, queues: u32) -> Result<(), RssError> {
        match self.0.iter().position(|&q| q >= queues) {
            Some(index) => Err(RssError::QueueOutOfRange {
                index,
                queue: self.0[index],
                queues,
            }),
            None => Ok(()),
        }
    }

    /// Highest queue named, plus one.
    pub fn queues_used(&self) -> u32 {
        self.0.iter().max().map_or(0, |q| q + 1)
    }

    /// How many entries name each queue, by queue (queues with no entry
    /// are absent): each queue's share of the hash space.
    pub fn entries_per_queue(&self) -> BTreeMap<u32, usize> {
        let mut per_queue = BTreeMap::new();
        for &q in &self.0 {
            *per_queue.entry(q).or_default() += 1;
        }
        per_queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_fill_is_round_robin() {
        let t = IndirectionTable::equal(8, 3, 0).unwrap();
        assert_eq!(t.entries(), &[0, 1, 2, 0, 1, 2, 0, 1]);
    }

    #[test]
    fn weight_fill_matches_ethtool() {
        // ethtool -X eth0 weight 1 1 2 on a 8-entry table: 2, 2, 4 entries.
        let t = IndirectionTable::weighted(8, &[1, 1, 2], 0).unwrap();
        assert_eq!(t.entries(), &[0, 0, 1, 1, 2, 2, 2, 2]);
        // A zero weight gets no entries.
        let t = IndirectionTable::weighted(4, &[1, 0, 1], 0).unwrap();
        assert_eq!(t.entries(), &[0, 0, 2, 2]);
        assert_eq!(
            t.entries_per_queue().into_iter().collect::<Vec<_>>(),
            [(0, 2), (2, 2)]
        );
    }

    #[test]
    fn queue_out_of_range_names_the_entry() {
        let t = IndirectionTable::from_entries(vec![0, 1, 5]).unwrap();
        assert_eq!(
            t.check_queues(4),
            Err(RssError::QueueOutOfRange {
                index: 2,
                queue: 5,
                queues: 4
            })
        );
    }

    #[test]
    fn zero_weights_and_empty_tables_are_errors() {
        assert_eq!(
            IndirectionTable::weighted(4, &[0, 0], 0),
            Err(RssError::ZeroWeights)
        );
        assert_eq!(
            IndirectionTable::from_entries(vec![]),
            Err(RssError::EmptyTable)
        );
    }
}
