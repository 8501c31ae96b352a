//! The servers behind the load balancer, as CrossRSS sees them.
//!
//! CrossRSS (papers/crossrss-core-aware-lb.txt, Section 2): "We use a
//! pseudo-random number generator (with server IDs as a seed) to randomize
//! each server's indirection table, thus a pseudo-random core of each server
//! is considered for each bucket of the LB". Every server uses the same key and
//! the same hashed fields, so one hash per packet tells the load balancer the
//! bucket on every server, and each server's table tells the core.

use rss::{IndirectionTable, RssConfig, RssError, RssKey};

use crate::rng::SplitMix64;

/// Default number of buckets (indirection table entries): many NICs' default
/// table size.
pub const DEFAULT_BUCKETS: usize = 128;

/// The PRNG seed of a server's table: its id, XORed with a run seed (0 gives
/// exactly the paper's "server id as seed").
pub fn table_seed(server_id: u32, run_seed: u64) -> u64 {
    u64::from(server_id) ^ run_seed.rotate_left(32)
}

/// A balanced table (each core gets `buckets / cores` entries, +-1) in an
/// order shuffled (Fisher-Yates) by the server's PRNG.
pub fn randomized_table(
    server_id: u32,
    cores: u32,
    buckets: usize,
    run_seed: u64,
) -> Result<IndirectionTable, RssError> {
    let mut entries = IndirectionTable::equal(buckets, cores, 0)?
        .entries()
        .to_vec();
    let mut rng = SplitMix64::new(table_seed(server_id, run_seed));
    for i in (1..entries.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        entries.swap(i, j);
    }
    IndirectionTable::from_entries(entries)
}

/// A server's RSS configuration: `ethtool -X DEV default` for `cores` queues
/// (queue q served by CPU q) with the table replaced by
/// [`randomized_table`].
pub fn server_config(
    key: &RssKey,
    server_id: u32,
    cores: u32,
    buckets: usize,
    run_seed: u64,
) -> Result<RssConfig, RssError> {
    let mut config = RssConfig::ethtool_default(key.clone(), cores, buckets)?;
    config.indirection_table = randomized_table(server_id, cores, buckets, run_seed)?;
    config.validate()?;
    Ok(config)
}

/// The bucket -> core map an agent reports: for each indirection entry, the
/// index (in [`RssConfig::cpus`] order) of the CPU that serves it.
pub fn bucket_cores(config: &RssConfig) -> Vec<u32> {
    let cpus = config.cpus();
    (0..config.indirection_table.len())
        .map(|i| {
            let cpu = config.place_hash(i as u32).cpu;
            cpus.iter().position(|&c| c == cpu).unwrap_or(0) as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_balanced_and_differ_per_server() {
        let a = randomized_table(0, 4, 128, 0).unwrap();
        let b = randomized_table(1, 4, 128, 0).unwrap();
        assert_ne!(a, b);
        for q in 0..4 {
            assert_eq!(a.entries().iter().filter(|&&e| e == q).count(), 32);
        }
        assert_eq!(a, randomized_table(0, 4, 128, 0).unwrap());
    }

    #[test]
    fn bucket_cores_follow_the_table() {
        let config = server_config(&RssKey::microsoft(), 3, 4, 16, 0).unwrap();
        let map = bucket_cores(&config);
        assert_eq!(map, config.indirection_table.entries());
    }
}
