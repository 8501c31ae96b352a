//! Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable
//! Software Network Load Balancer", NSDI 2016, Section 3.4, Pseudocode 1), as
//! Katran builds its `ch_rings` (katran/lib/MaglevBase.cpp).
//!
//! Each backend has a permutation of the `M` table slots given by an `offset`
//! and a `skip` derived from its name (here: its id, through two seeded
//! mixers, where Katran uses MurmurHash3 with two seeds); backends take turns
//! claiming their next preferred free slot until the table is full. `M` must
//! be prime so that every `skip` generates a full permutation.

use crate::error::SimError;
use crate::rng::mix64;

/// The Maglev paper's small table size, and Katran's default ring size.
pub const DEFAULT_TABLE_SIZE: usize = 65_537;

/// A populated Maglev lookup table: slot -> backend index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maglev {
    table: Vec<u32>,
}

pub fn is_prime(n: usize) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

impl Maglev {
    /// Populates the table for backends with the given ids (index i in the
    /// table means `ids[i]`).
    pub fn new(ids: &[u32], size: usize) -> Result<Maglev, SimError> {
        if ids.is_empty() {
            return Err(SimError::Zero {
                what: "backends",
                got: 0,
            });
        }
        if !is_prime(size) || size < ids.len() {
            return Err(SimError::TooLarge {
                what: "backends for a prime Maglev table size",
                got: ids.len() as u64,
                max: size as u64,
            });
        }
        let m = size as u64;
        let perms: Vec<(u64, u64)> = ids
            .iter()
            .map(|&id| {
                let offset = mix64(u64::from(id) ^ 0x6f66_6673_6574) % m;
                let skip = mix64(u64::from(id) ^ 0x0073_6b69_7000) % (m - 1) + 1;
                (offset, skip)
            })
            .collect();
        let mut next = vec![0u64; ids.len()];
        let mut table = vec![u32::MAX; size];
        let mut filled = 0;
        'fill: loop {
            for (i, &(offset, skip)) in perms.iter().enumerate() {
                let mut c = (offset + next[i] * skip) % m;
                while table[c as usize] != u32::MAX {
                    next[i] += 1;
                    c = (offset + next[i] * skip) % m;
                }
                table[c as usize] = i as u32;
                next[i] += 1;
                filled += 1;
                if filled == size {
                    break 'fill;
                }
            }
        }
        Ok(Maglev { table })
    }

    /// The backend index for a flow hash.
    #[inline]
    pub fn lookup(&self, hash: u64) -> u32 {
        self.table[(hash % self.table.len() as u64) as usize]
    }

    pub fn entries(&self) -> &[u32] {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_nearly_equal() {
        let m = Maglev::new(&[0, 1, 2, 3], 65_537).unwrap();
        for b in 0..4 {
            let n = m.entries().iter().filter(|&&e| e == b).count();
            assert!(n.abs_diff(65_537 / 4) <= 1, "backend {b}: {n}");
        }
    }

    #[test]
    fn removing_a_backend_moves_few_other_slots() {
        let a = Maglev::new(&[0, 1, 2, 3, 4], 65_537).unwrap();
        let b = Maglev::new(&[0, 1, 2, 3], 65_537).unwrap();
        let moved = a
            .entries()
            .iter()
            .zip(b.entries())
            .filter(|(x, y)| **x != 4 && x != y)
            .count();
        // Maglev's disruption: a small fraction of the slots of the survivors.
        assert!(moved < 65_537 / 10, "{moved}");
    }

    #[test]
    fn table_size_must_be_prime() {
        assert!(Maglev::new(&[0, 1], 65_536).is_err());
        assert!(Maglev::new(&[], 7).is_err());
        assert!(is_prime(65_537) && !is_prime(1));
    }
}
