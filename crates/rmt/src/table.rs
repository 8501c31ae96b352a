//! The entries of an exact-match table, as the control plane installs and
//! deletes them and as a packet looks them up.
//!
//! A key of one field whose installed values are below the table's size
//! (connection ids, say) is looked up by position in a direct array; any
//! other key through a hash map. Both match exactly the keys installed, so
//! which one holds an entry does not change what a packet matches.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::check::MAX_KEY;
use crate::phv::Phv;

/// A match key: the key fields' values, unused positions 0.
pub(crate) type Key = [u64; MAX_KEY];

/// What an installed entry runs: an action of the table and its data.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) action: usize,
    pub(crate) data: Box<[u64]>,
}

/// How a packet's key is found, chosen at load time from the key's shape.
#[derive(Debug, Clone, Copy)]
enum Lookup {
    /// No key: every packet runs the default action.
    Keyless,
    /// One field: direct array below `direct_limit`, hash map above.
    OneField(usize),
    /// Several fields: hash map.
    Hashed,
}

/// Most slots of a direct array (an upper bound on its memory whatever
/// size a table declares).
const DIRECT_MAX: usize = 1 << 16;

#[derive(Debug)]
pub(crate) struct Entries {
    key: Box<[usize]>,
    lookup: Lookup,
    size: usize,
    direct_limit: u64,
    direct: Vec<Option<Entry>>,
    hashed: HashMap<Key, Entry, BuildHasherDefault<FxHasher>>,
    len: usize,
}

/// Why an entry could not be installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableFull;

impl Entries {
    /// An empty table keyed by the PHV fields `key` with room for `size`.
    pub(crate) fn new(key: Box<[usize]>, size: usize) -> Self {
        let lookup = match *key {
            [] => Lookup::Keyless,
            [field] => Lookup::OneField(field),
            _ => Lookup::Hashed,
        };
        Entries {
            key,
            lookup,
            size,
            direct_limit: size.min(DIRECT_MAX) as u64,
            direct: Vec::new(),
            hashed: HashMap::default(),
            len: 0,
        }
    }

    /// The key fields, in order.
    pub(crate) fn key(&self) -> &[usize] {
        &self.key
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Most entries the table holds.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    fn direct_slot(&self, key: &Key) -> Option<usize> {
        match self.lookup {
            Lookup::OneField(_) if key[0] < self.direct_limit => Some(key[0] as usize),
            _ => None,
        }
    }

    /// Installs or replaces the entry for `key`; a new key in a full table
    /// is refused.
    pub(crate) fn insert(&mut self, key: Key, entry: Entry) -> Result<(), TableFull> {
        let present = self.get(&key).is_some();
        if !present && self.len >= self.size {
            return Err(TableFull);
        }
        match self.direct_slot(&key) {
            Some(slot) => {
                if self.direct.len() <= slot {
                    self.direct.resize_with(slot + 1, || None);
                }
                self.direct[slot] = Some(entry);
            }
            None => {
                self.hashed.insert(key, entry);
            }
        }
        if !present {
            self.len += 1;
        }
        Ok(())
    }

    /// Deletes the entry for `key`; returns it, or `None` if there was none.
    pub(crate) fn remove(&mut self, key: &Key) -> Option<Entry> {
        let removed = match self.direct_slot(key) {
            Some(slot) => self.direct.get_mut(slot).and_then(Option::take),
            None => self.hashed.remove(key),
        };
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }

    /// The entry installed for `key`.
    pub(crate) fn get(&self, key: &Key) -> Option<&Entry> {
        match self.direct_slot(key) {
            Some(slot) => self.direct.get(slot).and_then(Option::as_ref),
            None => self.hashed.get(key),
        }
    }

    /// The entry the packet's key fields match. Inlined into the stage
    /// loop for the keyless and direct cases; hashing stays out of line.
    #[inline(always)]
    pub(crate) fn matching(&self, phv: &Phv) -> Option<&Entry> {
        match self.lookup {
            Lookup::Keyless => None,
            Lookup::OneField(field) => {
                let k = phv.raw(field);
                if k < self.direct_limit {
                    self.direct.get(k as usize).and_then(Option::as_ref)
                } else {
                    self.hashed_match(phv)
                }
            }
            Lookup::Hashed => self.hashed_match(phv),
        }
    }

    #[inline(never)]
    fn hashed_match(&self, phv: &Phv) -> Option<&Entry> {
        let mut key = [0; MAX_KEY];
        for (slot, f) in key.iter_mut().zip(&*self.key) {
            *slot = phv.raw(*f);
        }
        self.hashed.get(&key)
    }
}

/// FxHash (rustc's hasher): match keys are a few integers, hashed on every
/// packet, and need no protection against chosen collisions here.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            self.write_u64(u64::from_ne_bytes(word));
        }
        for b in words.remainder() {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: usize) -> Entry {
        Entry {
            action,
            data: Box::new([]),
        }
    }

    fn key(k: u64) -> Key {
        let mut key = [0; MAX_KEY];
        key[0] = k;
        key
    }

    #[test]
    fn direct_and_hashed_keys_both_match_exactly_and_delete() {
        let mut t = Entries::new(Box::new([0]), 4);
        t.insert(key(2), entry(1)).unwrap();
        t.insert(key(1 << 40), entry(2)).unwrap();
        assert_eq!(t.get(&key(2)).map(|e| e.action), Some(1));
        assert_eq!(t.get(&key(1 << 40)).map(|e| e.action), Some(2));
        assert!(t.get(&key(3)).is_none());
        assert_eq!(t.len(), 2);
        assert!(t.remove(&key(2)).is_some());
        assert!(t.remove(&key(1 << 40)).is_some());
        assert!(t.remove(&key(2)).is_none());
        assert!(t.get(&key(2)).is_none());
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_full_table_refuses_a_new_key_until_one_is_deleted() {
        let mut t = Entries::new(Box::new([0, 1]), 1);
        t.insert(key(5), entry(0)).unwrap();
        t.insert(key(5), entry(1)).unwrap();
        assert_eq!(t.insert(key(6), entry(0)), Err(TableFull));
        t.remove(&key(5)).unwrap();
        t.insert(key(6), entry(0)).unwrap();
    }
}
