//! The Toeplitz hash of the Microsoft RSS specification.
//!
//! For each input bit `i` that is set (most significant bit of byte 0 first),
//! the result is XORed with the 32-bit window of the key that starts at key bit
//! `i`. The hash is linear over GF(2): `h(a ^ b) = h(a) ^ h(b)`, which is what
//! makes a byte-wise table exact (`h(input) = XOR over bytes p of T[p][input[p]]`)
//! and what port steering later exploits.

use crate::error::RssError;
use crate::key::RssKey;

/// Bit-serial Toeplitz: the definition, one input bit at a time. Slow; the
/// reference every faster implementation is tested against.
pub fn toeplitz_reference(key: &RssKey, input: &[u8]) -> Result<u32, RssError> {
    key.check_input_len(input.len())?;
    let key = key.as_bytes();
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut result = 0u32;
    for (byte_index, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            let next = 32 + byte_index * 8 + bit;
            let next_bit = (key[next / 8] >> (7 - next % 8)) & 1;
            window = (window << 1) | u32::from(next_bit);
        }
    }
    Ok(result)
}

/// The 32-bit key window that starts at key bit `bit`.
fn key_window(key: &[u8], bit: usize) -> u32 {
    (0..32).fold(0u32, |acc, i| {
        let b = bit + i;
        (acc << 1) | u32::from((key[b / 8] >> (7 - b % 8)) & 1)
    })
}

/// Table-driven Toeplitz for one key: `tables[p][v]` is the hash of an input
/// whose only non-zero byte is `v` at position `p`.
#[derive(Clone)]
pub struct ToeplitzTable {
    tables: Vec<[u32; 256]>,
}

impl ToeplitzTable {
    /// Precomputes tables for inputs of up to `key.len() - 4` bytes.
    pub fn new(key: &RssKey) -> Self {
        let bytes = key.as_bytes();
        let positions = bytes.len().saturating_sub(4);
        let tables = (0..positions)
            .map(|p| {
                let windows: [u32; 8] = std::array::from_fn(|j| key_window(bytes, p * 8 + j));
                std::array::from_fn(|v| {
                    (0..8)
                        .filter(|j| v & (0x80 >> j) != 0)
                        .fold(0, |acc, j| acc ^ windows[j])
                })
            })
            .collect();
        ToeplitzTable { tables }
    }

    /// The longest input this key can hash.
    pub fn max_input_len(&self) -> usize {
        self.tables.len()
    }

    /// Hashes `input`, which must not be longer than [`Self::max_input_len`].
    pub fn hash(&self, input: &[u8]) -> Result<u32, RssError> {
        if input.len() > self.tables.len() {
            return Err(RssError::KeyTooShort {
                len: self.tables.len() + 4,
                input: input.len(),
                needed: input.len() + 4,
            });
        }
        Ok(self
            .tables
            .iter()
            .zip(input)
            .fold(0, |acc, (table, &b)| acc ^ table[usize::from(b)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn single_bit_inputs_select_key_windows() {
        let key = RssKey::microsoft();
        let mut input = [0u8; 12];
        input[0] = 0x80;
        assert_eq!(toeplitz_reference(&key, &input).unwrap(), 0x6d5a56da);
    }

    #[test]
    fn short_key_is_an_error_not_a_panic() {
        let key = RssKey::new(vec![1; 8]).unwrap();
        assert!(toeplitz_reference(&key, &[0; 12]).is_err());
        assert!(ToeplitzTable::new(&key).hash(&[0; 12]).is_err());
    }

    proptest! {
        #[test]
        fn table_agrees_with_reference(
            key in proptest::collection::vec(any::<u8>(), 40..64),
            input in proptest::collection::vec(any::<u8>(), 0..36),
        ) {
            let key = RssKey::new(key).unwrap();
            let table = ToeplitzTable::new(&key);
            prop_assert_eq!(table.hash(&input).unwrap(), toeplitz_reference(&key, &input).unwrap());
        }

        #[test]
        fn hash_is_linear(a in any::<[u8; 12]>(), b in any::<[u8; 12]>()) {
            let key = RssKey::microsoft();
            let x: Vec<u8> = a.iter().zip(&b).map(|(p, q)| p ^ q).collect();
            let h = |i: &[u8]| toeplitz_reference(&key, i).unwrap();
            prop_assert_eq!(h(&x), h(&a) ^ h(&b));
        }
    }
}
