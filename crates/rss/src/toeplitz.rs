//! The Toeplitz hash of the Microsoft RSS specification.
//!
//! For each input bit `i` that is set (most significant bit of byte 0 first),
//! the result is XORed with the 32-bit window of the key that starts at key bit
//! `i`. The hash is linear over GF(2): `h(a ^ b) = h(a) ^ h(b)`, which is what
//! makes a byte-wise table exact (`h(input) = XOR over bytes p of T[p][input[p]]`)
//! and what port steering later exploits.
//!
//! Three ways to compute it, all exact and all tested against
//! [`toeplitz_reference`]:
//!
//! - [`toeplitz_reference`]: the definition, bit by bit.
//! - [`ToeplitzTable::hash`]: one table lookup per input byte, any length.
//! - [`ToeplitzTable::hash_v4_4tuple`], [`ToeplitzTable::hash_v6_4tuple`] and
//!   the batch forms [`ToeplitzTable::hash_batch_v4`],
//!   [`ToeplitzTable::hash_batch_v6`]: fixed-size inputs with no length checks.
//!   On x86-64 CPUs with GFNI and AVX-512 (VBMI) the batch forms run eight
//!   IPv4 tuples (or two IPv6 tuples) per step through `GF2P8AFFINEQB`, the
//!   same instruction DPDK's `rte_thash_gfni` uses; elsewhere they interleave
//!   independent table lookups. The choice is made once, in
//!   [`ToeplitzTable::new`], by runtime CPU detection ([`ToeplitzPath`]);
//!   [`ToeplitzTable::with_path`] forces one.

use crate::error::RssError;
use crate::key::RssKey;

mod dispatch;
#[cfg(target_arch = "x86_64")]
mod gfni;

pub use dispatch::{PathUnsupported, ToeplitzPath};

/// Bytes hashed for an IPv4 4-tuple: source address, destination address,
/// source port, destination port, in network byte order.
pub const V4_TUPLE_LEN: usize = 12;
/// Bytes hashed for an IPv6 4-tuple, in the same order.
pub const V6_TUPLE_LEN: usize = 36;

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

/// The 32-bit key window that starts at key bit `bit`; bits past the end of
/// the key read as zero.
fn key_window(key: &[u8], bit: usize) -> u32 {
    (0..32).fold(0u32, |acc, i| {
        let b = bit + i;
        let v = key.get(b / 8).map_or(0, |byte| (byte >> (7 - b % 8)) & 1);
        (acc << 1) | u32::from(v)
    })
}

/// One input byte position's contribution: `T[v]` is the hash of an input
/// whose only non-zero byte is `v` at this position.
type ByteTable = [u32; 256];

/// Table-driven Toeplitz for one key: `tables[p][v]` is the hash of an input
/// whose only non-zero byte is `v` at position `p`.
///
/// The tables always cover at least [`V6_TUPLE_LEN`] positions. For a key
/// shorter than 40 bytes the positions past [`Self::max_input_len`] are built
/// from the key extended with zero bits: [`Self::hash`] still refuses such
/// inputs, while the fixed-size entry points hash them with the zero-extended
/// key (see [`Self::hash_v4_4tuple`]).
#[derive(Clone)]
pub struct ToeplitzTable {
    tables: Box<[ByteTable]>,
    max_input_len: usize,
    #[cfg(target_arch = "x86_64")]
    gfni: Option<gfni::Gfni>,
}

/// `first_chunk` of the table array; the tables always hold at least
/// [`V6_TUPLE_LEN`] positions, so this never fails.
fn head<const N: usize>(tables: &[ByteTable]) -> &[ByteTable; N] {
    const { assert!(N <= V6_TUPLE_LEN) };
    match tables.first_chunk::<N>() {
        Some(head) => head,
        None => unreachable!("ToeplitzTable::new builds at least {V6_TUPLE_LEN} positions"),
    }
}

/// XOR of one lookup per byte; `N` is known, so the loop is fully unrolled
/// and free of bounds checks.
#[inline(always)]
fn hash_fixed<const N: usize>(tables: &[ByteTable; N], input: &[u8; N]) -> u32 {
    let mut acc = 0;
    for p in 0..N {
        acc ^= tables[p][usize::from(input[p])];
    }
    acc
}

/// `LANES` independent tuples per step, so their lookups overlap instead of
/// waiting on one XOR chain; the tail goes one at a time.
#[inline(always)]
fn hash_batch_scalar<const N: usize>(tables: &[ByteTable; N], inputs: &[[u8; N]], out: &mut [u32]) {
    const LANES: usize = 4;
    let mut inputs_chunks = inputs.chunks_exact(LANES);
    let mut out_chunks = out.chunks_exact_mut(LANES);
    for (ins, outs) in (&mut inputs_chunks).zip(&mut out_chunks) {
        let mut acc = [0u32; LANES];
        for p in 0..N {
            for l in 0..LANES {
                acc[l] ^= tables[p][usize::from(ins[l][p])];
            }
        }
        outs.copy_from_slice(&acc);
    }
    for (input, o) in inputs_chunks
        .remainder()
        .iter()
        .zip(out_chunks.into_remainder())
    {
        *o = hash_fixed(tables, input);
    }
}

impl ToeplitzTable {
    /// Precomputes tables for inputs of up to `key.len() - 4` bytes (and at
    /// least [`V6_TUPLE_LEN`] positions, see the type's documentation), and
    /// picks the fastest batch implementation this CPU supports.
    pub fn new(key: &RssKey) -> Self {
        let bytes = key.as_bytes();
        let max_input_len = bytes.len().saturating_sub(4);
        let positions = max_input_len.max(V6_TUPLE_LEN);
        let tables: Box<[ByteTable]> = (0..positions)
            .map(|p| {
                let windows: [u32; 8] = std::array::from_fn(|j| key_window(bytes, p * 8 + j));
                std::array::from_fn(|v| {
                    (0..8)
                        .filter(|j| v & (0x80 >> j) != 0)
                        .fold(0, |acc, j| acc ^ windows[j])
                })
            })
            .collect();
        ToeplitzTable {
            #[cfg(target_arch = "x86_64")]
            gfni: gfni::Gfni::detect(head(&tables)),
            tables,
            max_input_len,
        }
    }

    /// Tables for `key` that compute with `path`, or the features this CPU
    /// lacks for it. [`ToeplitzTable::new`] picks [`ToeplitzPath::detect`].
    pub fn with_path(key: &RssKey, path: ToeplitzPath) -> Result<Self, PathUnsupported> {
        let table = ToeplitzTable::new(key);
        match path {
            ToeplitzPath::Table => Ok(table.without_simd()),
            ToeplitzPath::GfniAvx512 if table.uses_simd() => Ok(table),
            ToeplitzPath::GfniAvx512 => Err(PathUnsupported {
                path,
                missing: path.missing(),
            }),
        }
    }

    /// The path this table computes with.
    pub fn path(&self) -> ToeplitzPath {
        if self.uses_simd() {
            ToeplitzPath::GfniAvx512
        } else {
            ToeplitzPath::Table
        }
    }

    /// The same tables without the SIMD batch path: what the batch API does on
    /// a CPU without GFNI/AVX-512 ([`ToeplitzPath::Table`]). For tests and
    /// benchmarks.
    pub fn without_simd(mut self) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            self.gfni = None;
        }
        self
    }

    /// Whether the batch API uses the GFNI/AVX-512 path on this CPU.
    pub fn uses_simd(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.gfni.is_some()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The longest input this key can hash.
    pub fn max_input_len(&self) -> usize {
        self.max_input_len
    }

    /// Hashes `input`, which must not be longer than [`Self::max_input_len`].
    pub fn hash(&self, input: &[u8]) -> Result<u32, RssError> {
        if input.len() > self.max_input_len {
            return Err(RssError::KeyTooShort {
                len: self.max_input_len + 4,
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

    /// Hashes an IPv4 4-tuple (`src ip, dst ip, src port, dst port`, network
    /// byte order): 12 lookups, no length checks.
    ///
    /// Equal to [`toeplitz_reference`] whenever the key has at least 16 bytes
    /// (every NIC key does: 40 or 52). With a shorter key, which the reference
    /// rejects, the key is taken as extended with zero bits.
    #[inline]
    pub fn hash_v4_4tuple(&self, input: &[u8; V4_TUPLE_LEN]) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if let Some(gfni) = &self.gfni {
            return gfni.hash_v4(input);
        }
        hash_fixed(head(&self.tables), input)
    }

    /// Hashes an IPv6 4-tuple (36 bytes, same field order): 36 lookups, no
    /// length checks. Equal to [`toeplitz_reference`] whenever the key has at
    /// least 40 bytes; a shorter key is taken as extended with zero bits.
    #[inline]
    pub fn hash_v6_4tuple(&self, input: &[u8; V6_TUPLE_LEN]) -> u32 {
        hash_fixed(head(&self.tables), input)
    }

    /// Hashes many IPv4 4-tuples: `out[i] = self.hash_v4_4tuple(&inputs[i])`.
    /// Faster per tuple than one call at a time (eight tuples per SIMD step
    /// with GFNI/AVX-512, four interleaved otherwise).
    ///
    /// Hashes `min(inputs.len(), out.len())` tuples and leaves the rest of
    /// `out` untouched.
    pub fn hash_batch_v4(&self, inputs: &[[u8; V4_TUPLE_LEN]], out: &mut [u32]) {
        let n = inputs.len().min(out.len());
        let (inputs, out) = (&inputs[..n], &mut out[..n]);
        #[cfg(target_arch = "x86_64")]
        if let Some(gfni) = &self.gfni {
            gfni.hash_batch_v4(inputs, out);
            return;
        }
        hash_batch_scalar(head(&self.tables), inputs, out);
    }

    /// Hashes many IPv6 4-tuples: `out[i] = self.hash_v6_4tuple(&inputs[i])`,
    /// for `min(inputs.len(), out.len())` tuples.
    pub fn hash_batch_v6(&self, inputs: &[[u8; V6_TUPLE_LEN]], out: &mut [u32]) {
        let n = inputs.len().min(out.len());
        let (inputs, out) = (&inputs[..n], &mut out[..n]);
        #[cfg(target_arch = "x86_64")]
        if let Some(gfni) = &self.gfni {
            gfni.hash_batch_v6(inputs, out);
            return;
        }
        hash_batch_scalar(head(&self.tables), inputs, out);
    }
}

impl std::fmt::Debug for ToeplitzTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToeplitzTable")
            .field("max_input_len", &self.max_input_len)
            .field("simd", &self.uses_simd())
            .finish_non_exhaustive()
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
        let table = ToeplitzTable::new(&key);
        assert_eq!(table.max_input_len(), 4);
        assert!(table.hash(&[0; 12]).is_err());
    }

    #[test]
    fn fixed_size_paths_zero_extend_a_short_key() {
        let short = RssKey::new(vec![0xa5; 8]).unwrap();
        let mut padded = vec![0xa5; 8];
        padded.resize(40, 0);
        let padded = RssKey::new(padded).unwrap();
        for table in [
            ToeplitzTable::new(&short),
            ToeplitzTable::new(&short).without_simd(),
        ] {
            check_zero_extended(&table, &padded);
        }
    }

    fn check_zero_extended(table: &ToeplitzTable, padded: &RssKey) {
        let v4: [u8; 12] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 1);
        let v6: [u8; 36] = std::array::from_fn(|i| (i as u8).wrapping_mul(91) ^ 5);
        let want4 = toeplitz_reference(padded, &v4).unwrap();
        let want6 = toeplitz_reference(padded, &v6).unwrap();
        assert_eq!(table.hash_v4_4tuple(&v4), want4);
        assert_eq!(table.hash_v6_4tuple(&v6), want6);
        let mut out = [0; 9];
        table.hash_batch_v4(&[v4; 9], &mut out);
        assert_eq!(out, [want4; 9]);
        table.hash_batch_v6(&[v6; 9], &mut out);
        assert_eq!(out, [want6; 9]);
    }

    #[test]
    fn batch_hashes_only_as_many_as_both_slices_hold() {
        let table = ToeplitzTable::new(&RssKey::microsoft());
        let mut out = [7u32; 20];
        table.hash_batch_v4(&[[0; 12]; 10], &mut out);
        assert_eq!(out[..10], [0; 10]);
        assert_eq!(out[10..], [7; 10]);
        let mut short = [7u32; 3];
        table.hash_batch_v6(&[[0; 36]; 10], &mut short);
        assert_eq!(short, [0; 3]);
    }

    /// The Microsoft "Verifying the RSS Hash Calculation" IPv4 TCP vectors,
    /// through every fast path.
    #[test]
    fn microsoft_vectors_through_fast_paths() {
        type Vector = ([u8; 4], [u8; 4], u16, u16, u32);
        let vectors: [Vector; 3] = [
            (
                [66, 9, 149, 187],
                [161, 142, 100, 80],
                2794,
                1766,
                0x51ccc178,
            ),
            (
                [199, 92, 111, 2],
                [65, 69, 140, 83],
                14230,
                4739,
                0xc626b0ea,
            ),
            (
                [24, 19, 198, 95],
                [12, 22, 207, 184],
                12898,
                38024,
                0x5c2b394a,
            ),
        ];
        let table = ToeplitzTable::new(&RssKey::microsoft());
        let inputs: Vec<[u8; 12]> = vectors
            .iter()
            .map(|(s, d, sp, dp, _)| {
                let mut t = [0; 12];
                t[..4].copy_from_slice(s);
                t[4..8].copy_from_slice(d);
                t[8..10].copy_from_slice(&sp.to_be_bytes());
                t[10..].copy_from_slice(&dp.to_be_bytes());
                t
            })
            .collect();
        let mut out = vec![0; inputs.len()];
        table.hash_batch_v4(&inputs, &mut out);
        for ((input, v), batch) in inputs.iter().zip(&vectors).zip(&out) {
            assert_eq!(table.hash_v4_4tuple(input), v.4);
            assert_eq!(*batch, v.4);
        }
    }

    fn key_strategy() -> impl Strategy<Value = RssKey> {
        proptest::collection::vec(any::<u8>(), 40..=64).prop_map(|k| RssKey::new(k).unwrap())
    }

    fn reference_all<const N: usize>(key: &RssKey, inputs: &[[u8; N]]) -> Vec<u32> {
        inputs
            .iter()
            .map(|i| toeplitz_reference(key, i).unwrap())
            .collect()
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
        fn fixed_size_agrees_with_reference(
            key in key_strategy(),
            v4 in any::<[u8; 12]>(),
            v6 in proptest::collection::vec(any::<u8>(), 36),
        ) {
            let v6: [u8; 36] = v6.try_into().unwrap();
            for table in [ToeplitzTable::new(&key), ToeplitzTable::new(&key).without_simd()] {
                prop_assert_eq!(table.hash_v4_4tuple(&v4), toeplitz_reference(&key, &v4).unwrap());
                prop_assert_eq!(table.hash_v6_4tuple(&v6), toeplitz_reference(&key, &v6).unwrap());
            }
        }

        #[test]
        fn batch_v4_agrees_with_reference(
            key in key_strategy(),
            inputs in proptest::collection::vec(any::<[u8; 12]>(), 0..50),
        ) {
            let want = reference_all(&key, &inputs);
            for table in [ToeplitzTable::new(&key), ToeplitzTable::new(&key).without_simd()] {
                let mut out = vec![0; inputs.len()];
                table.hash_batch_v4(&inputs, &mut out);
                prop_assert_eq!(&out, &want);
            }
        }

        #[test]
        fn batch_v6_agrees_with_reference(
            key in key_strategy(),
            inputs in proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 36).prop_map(|v| <[u8; 36]>::try_from(v).unwrap()),
                0..21,
            ),
        ) {
            let want = reference_all(&key, &inputs);
            for table in [ToeplitzTable::new(&key), ToeplitzTable::new(&key).without_simd()] {
                let mut out = vec![0; inputs.len()];
                table.hash_batch_v6(&inputs, &mut out);
                prop_assert_eq!(&out, &want);
            }
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
