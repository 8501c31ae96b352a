//! Batch Toeplitz with `GF2P8AFFINEQB` (GFNI) on AVX-512 registers.
//!
//! This module holds all of the crate's `unsafe` code.
//!
//! # The idea
//!
//! Byte `k` (0 = most significant) of the hash contribution of input byte `x`
//! at position `p` is a linear map of `x` over GF(2): an 8x8 bit matrix
//! `M(p, k)`, which depends only on the key bits from `8 * (p + k)` on.
//! `GF2P8AFFINEQB` multiplies every byte of a 64-bit lane by that lane's 8x8
//! matrix, so a lane holding matrix `M(p, k)` and eight bytes computes byte `k`
//! of position `p`'s contribution for eight bytes at once.
//!
//! - IPv4 (12 bytes): eight tuples per step. Lane `(p, k)` holds byte `p` of
//!   eight tuples (a byte transpose done by `VPERMI2B`), so six 512-bit
//!   vectors cover the 12 x 4 `(p, k)` pairs; XOR them and each lane `k`
//!   holds byte `k` of eight hashes. One more permute gives the eight `u32`s.
//! - One IPv4 tuple ([`ToeplitzTable::hash_v4_4tuple`]): the IPv6 layout
//!   below with one tuple, 15 lanes in two vectors.
//! - IPv6 (36 bytes): two tuples per step, as in DPDK's `rte_thash_gfni`.
//!   Lane `m` carries `M(m, 0)`; its slot `k` (`k + 4` for the second tuple)
//!   holds input byte `m - k`, which contributes to output byte `k`. XOR all
//!   40 lanes and the low four bytes are the first hash, the high four the
//!   second.
//!
//! # Safety
//!
//! A [`Gfni`] value exists only if [`Gfni::detect`] found every CPU feature
//! the `#[target_feature]` kernels below are compiled for; the safe methods
//! call them only through a `Gfni`. The kernels read memory only with loads
//! whose extent is checked against the slice lengths right above them
//! (masked loads do not touch masked-off bytes).

use std::arch::x86_64::{
    __m512i, _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_storeu_si256,
    _mm256_xor_si256, _mm512_castsi512_si256, _mm512_extracti64x4_epi64,
    _mm512_gf2p8affine_epi64_epi8, _mm512_loadu_si512, _mm512_maskz_loadu_epi8,
    _mm512_permutex2var_epi8, _mm512_permutexvar_epi8, _mm512_setzero_si512, _mm512_xor_si512,
    _mm_cvtsi128_si64, _mm_unpackhi_epi64, _mm_xor_si128,
};

use super::{ByteTable, V4_TUPLE_LEN, V6_TUPLE_LEN};

/// IPv4 tuples per SIMD step.
const V4_STEP: usize = 8;
/// IPv4 vectors per step: 12 positions x 4 output bytes / 8 lanes.
const V4_VECTORS: usize = V4_TUPLE_LEN * 4 / 8;
/// IPv6 tuples per SIMD step.
const V6_STEP: usize = 2;
/// IPv6 vectors per step: lanes `m = p + k` for `m < 39`, rounded up to 8.
const V6_VECTORS: usize = (V6_TUPLE_LEN + 3).div_ceil(8);

/// The 8x8 bit matrix (in `GF2P8AFFINEQB` layout: byte `7 - b` is the row
/// for output bit `b`) that maps input byte `x` at a position with table
/// `table` to byte `k` of its contribution.
fn matrix(table: &ByteTable, k: usize) -> u64 {
    (0..8).fold(0u64, |m, b| {
        let row = (0..8).fold(0u8, |row, j| {
            let bit = (table[1 << j] >> (24 - 8 * k + b)) & 1;
            row | ((bit as u8) << j)
        });
        m | (u64::from(row) << (8 * (7 - b)))
    })
}

fn vector_u64(lanes: [u64; 8]) -> __m512i {
    // SAFETY: __m512i is 64 plain bytes; any bit pattern is valid.
    unsafe { std::mem::transmute::<[u64; 8], __m512i>(lanes) }
}

fn vector_u8(bytes: [u8; 64]) -> __m512i {
    // SAFETY: as above.
    unsafe { std::mem::transmute::<[u8; 64], __m512i>(bytes) }
}

/// Index of a zero byte in the 128-byte `VPERMI2B` source (the second
/// operand is loaded with a mask that zeroes its top bytes).
const ZERO_BYTE: u8 = 127;
/// Index of a zero byte in the single-tuple `VPERMB` source (a 12-byte
/// masked load).
const SINGLE_ZERO_BYTE: u8 = 63;

#[derive(Clone)]
struct Vectors {
    v4_single_matrices: [__m512i; 2],
    v4_single_gather: [__m512i; 2],
    v4_matrices: [__m512i; V4_VECTORS],
    v4_gather: [__m512i; V4_VECTORS],
    v4_output: __m512i,
    v6_matrices: [__m512i; V6_VECTORS],
    v6_gather: [__m512i; V6_VECTORS],
}

/// Key-specific matrices and permutations; proof that the CPU has GFNI,
/// AVX-512F/BW and VBMI.
#[derive(Clone)]
pub(super) struct Gfni(Box<Vectors>);

impl Gfni {
    /// Builds the vectors for the key behind `tables`, or `None` if this CPU
    /// lacks one of the features the kernels need.
    pub(super) fn detect(tables: &[ByteTable; V6_TUPLE_LEN]) -> Option<Self> {
        let supported = is_x86_feature_detected!("gfni")
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi");
        supported.then(|| Gfni(Box::new(Vectors::new(tables))))
    }

    #[inline]
    pub(super) fn hash_v4(&self, input: &[u8; V4_TUPLE_LEN]) -> u32 {
        // SAFETY: `self` exists only if the features were detected.
        unsafe { single_v4(&self.0, input) }
    }

    pub(super) fn hash_batch_v4(&self, inputs: &[[u8; V4_TUPLE_LEN]], out: &mut [u32]) {
        debug_assert_eq!(inputs.len(), out.len());
        let mut in_chunks = inputs.chunks_exact(V4_STEP);
        let mut out_chunks = out.chunks_exact_mut(V4_STEP);
        // SAFETY: `self` exists only if the features were detected (module
        // docs); each chunk holds exactly V4_STEP tuples and outputs.
        unsafe { batch_v4(&self.0, &mut in_chunks, &mut out_chunks) };
        let rest = in_chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [[0u8; V4_TUPLE_LEN]; V4_STEP];
            buf[..rest.len()].copy_from_slice(rest);
            let mut hashes = [0u32; V4_STEP];
            // SAFETY: as above, on full local arrays.
            unsafe {
                batch_v4(
                    &self.0,
                    &mut buf.chunks_exact(V4_STEP),
                    &mut hashes.chunks_exact_mut(V4_STEP),
                )
            };
            let outs = out_chunks.into_remainder();
            outs.copy_from_slice(&hashes[..outs.len()]);
        }
    }

    pub(super) fn hash_batch_v6(&self, inputs: &[[u8; V6_TUPLE_LEN]], out: &mut [u32]) {
        debug_assert_eq!(inputs.len(), out.len());
        let mut in_chunks = inputs.chunks_exact(V6_STEP);
        let mut out_chunks = out.chunks_exact_mut(V6_STEP);
        // SAFETY: as in hash_batch_v4.
        unsafe { batch_v6(&self.0, &mut in_chunks, &mut out_chunks) };
        if let ([input], [o]) = (in_chunks.remainder(), out_chunks.into_remainder()) {
            let buf = [*input, [0; V6_TUPLE_LEN]];
            let mut hashes = [0u32; V6_STEP];
            // SAFETY: as above, on full local arrays.
            unsafe {
                batch_v6(
                    &self.0,
                    &mut buf.chunks_exact(V6_STEP),
                    &mut hashes.chunks_exact_mut(V6_STEP),
                )
            };
            *o = hashes[0];
        }
    }
}

impl Vectors {
    fn new(tables: &[ByteTable; V6_TUPLE_LEN]) -> Self {
        // IPv4: vector v, lane l = (p, k) with p = 2v + l / 4, k = l % 4;
        // slot t is tuple t of the step, whose byte p sits at 12t + p.
        let v4_matrices = std::array::from_fn(|v| {
            vector_u64(std::array::from_fn(|l| {
                matrix(&tables[2 * v + l / 4], l % 4)
            }))
        });
        let v4_gather = std::array::from_fn(|v| {
            vector_u8(std::array::from_fn(|i| {
                let (l, t) = (i / 8, i % 8);
                (V4_TUPLE_LEN * t + 2 * v + l / 4) as u8
            }))
        });
        // After XOR, byte 8k + t (and 32 + 8k + t) is byte k of tuple t's
        // hash; the u32 of tuple t is little-endian, so its byte j is k = 3 - j.
        let v4_output = vector_u8(std::array::from_fn(|q| {
            let (half, q) = (q / 32, q % 32);
            let (t, j) = (q / 4, q % 4);
            (32 * half + 8 * (3 - j) + t) as u8
        }));
        // IPv6: lane m carries M(m, 0) = M(p, m - p) for any valid p.
        let v6_matrices = std::array::from_fn(|v| {
            vector_u64(std::array::from_fn(|l| {
                let m = 8 * v + l;
                let p = m.min(V6_TUPLE_LEN - 1);
                if m - p < 4 {
                    matrix(&tables[p], m - p)
                } else {
                    0
                }
            }))
        });
        let v6_gather = std::array::from_fn(|v| {
            vector_u8(std::array::from_fn(|i| {
                let (m, s) = (8 * v + i / 8, i % 8);
                let (tuple, k) = (s / 4, s % 4);
                match m.checked_sub(k) {
                    Some(p) if p < V6_TUPLE_LEN => (V6_TUPLE_LEN * tuple + p) as u8,
                    _ => ZERO_BYTE,
                }
            }))
        });
        // IPv4, one tuple: as IPv6, with lanes m < 15 and four slots only
        // (each lane's matrix fixes p + k, so only four slots can be used).
        let v4_single_matrices = std::array::from_fn(|v| {
            vector_u64(std::array::from_fn(|l| {
                let m = 8 * v + l;
                let p = m.min(V4_TUPLE_LEN - 1);
                if m - p < 4 {
                    matrix(&tables[p], m - p)
                } else {
                    0
                }
            }))
        });
        // Slot j < 4 of lane m holds output byte k = 3 - j, so the folded
        // lanes' low four bytes are the hash as a little-endian u32 (no
        // byte swap at the end).
        let v4_single_gather = std::array::from_fn(|v| {
            vector_u8(std::array::from_fn(|i| {
                let (m, j) = (8 * v + i / 8, i % 8);
                match (j < 4).then(|| m.checked_sub(3 - j)).flatten() {
                    Some(p) if p < V4_TUPLE_LEN => p as u8,
                    _ => SINGLE_ZERO_BYTE,
                }
            }))
        });
        Vectors {
            v4_single_matrices,
            v4_single_gather,
            v4_matrices,
            v4_gather,
            v4_output,
            v6_matrices,
            v6_gather,
        }
    }
}

/// Hashes one IPv4 tuple: the IPv6 layout with one tuple and 15 lanes.
///
/// # Safety
/// The CPU must support GFNI, AVX-512F, AVX-512BW and AVX-512VBMI.
#[inline]
#[target_feature(enable = "gfni,avx512f,avx512bw,avx512vbmi,avx2")]
unsafe fn single_v4(vectors: &Vectors, input: &[u8; V4_TUPLE_LEN]) -> u32 {
    // SAFETY: the mask reads exactly the 12 bytes of `input`; bytes 12..64
    // of `x` are zero, and SINGLE_ZERO_BYTE selects one of them.
    let x = unsafe { _mm512_maskz_loadu_epi8(0xfff, input.as_ptr().cast()) };
    let [g0, g1] = vectors.v4_single_gather;
    let [m0, m1] = vectors.v4_single_matrices;
    let a = _mm512_gf2p8affine_epi64_epi8::<0>(_mm512_permutexvar_epi8(g0, x), m0);
    let b = _mm512_gf2p8affine_epi64_epi8::<0>(_mm512_permutexvar_epi8(g1, x), m1);
    fold_lanes(_mm512_xor_si512(a, b)) as u32
}

/// XOR of the eight 64-bit lanes.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
fn fold_lanes(acc: __m512i) -> u64 {
    let x = _mm256_xor_si256(
        _mm512_castsi512_si256(acc),
        _mm512_extracti64x4_epi64::<1>(acc),
    );
    let x = _mm_xor_si128(_mm256_castsi256_si128(x), _mm256_extracti128_si256::<1>(x));
    _mm_cvtsi128_si64(_mm_xor_si128(x, _mm_unpackhi_epi64(x, x))) as u64
}

/// Hashes each chunk of eight IPv4 tuples into the matching output chunk.
///
/// # Safety
/// The CPU must support GFNI, AVX-512F, AVX-512BW and AVX-512VBMI; every
/// chunk must hold exactly [`V4_STEP`] elements.
#[target_feature(enable = "gfni,avx512f,avx512bw,avx512vbmi,avx2")]
unsafe fn batch_v4<'a, 'b>(
    vectors: &Vectors,
    inputs: &mut impl Iterator<Item = &'a [[u8; V4_TUPLE_LEN]]>,
    outs: &mut impl Iterator<Item = &'b mut [u32]>,
) {
    let matrices = vectors.v4_matrices;
    let gather = vectors.v4_gather;
    let output = vectors.v4_output;
    for (chunk, out) in inputs.zip(outs) {
        assert!(chunk.len() == V4_STEP && out.len() == V4_STEP);
        let src = chunk.as_ptr().cast::<u8>();
        // SAFETY: the chunk is 96 bytes; we read bytes 0..64 and 64..96.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_si512(src.cast()),
                _mm512_maskz_loadu_epi8(u64::from(u32::MAX), src.add(64).cast()),
            )
        };
        let mut acc = _mm512_setzero_si512();
        for v in 0..V4_VECTORS {
            let bytes = _mm512_permutex2var_epi8(lo, gather[v], hi);
            acc = _mm512_xor_si512(acc, _mm512_gf2p8affine_epi64_epi8::<0>(bytes, matrices[v]));
        }
        let acc = _mm512_permutexvar_epi8(output, acc);
        let hashes = _mm256_xor_si256(
            _mm512_castsi512_si256(acc),
            _mm512_extracti64x4_epi64::<1>(acc),
        );
        // SAFETY: `out` holds 8 u32 = 32 bytes.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), hashes) };
    }
}

/// Hashes each chunk of two IPv6 tuples into the matching output chunk.
///
/// # Safety
/// As [`batch_v4`], with chunks of exactly [`V6_STEP`] elements.
#[target_feature(enable = "gfni,avx512f,avx512bw,avx512vbmi,avx2")]
unsafe fn batch_v6<'a, 'b>(
    vectors: &Vectors,
    inputs: &mut impl Iterator<Item = &'a [[u8; V6_TUPLE_LEN]]>,
    outs: &mut impl Iterator<Item = &'b mut [u32]>,
) {
    let matrices = vectors.v6_matrices;
    let gather = vectors.v6_gather;
    for (chunk, out) in inputs.zip(outs) {
        assert!(chunk.len() == V6_STEP && out.len() == V6_STEP);
        let src = chunk.as_ptr().cast::<u8>();
        // SAFETY: the chunk is 72 bytes; we read bytes 0..64 and 64..72.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_si512(src.cast()),
                _mm512_maskz_loadu_epi8(0xff, src.add(64).cast()),
            )
        };
        let mut acc = _mm512_setzero_si512();
        for v in 0..V6_VECTORS {
            let bytes = _mm512_permutex2var_epi8(lo, gather[v], hi);
            acc = _mm512_xor_si512(acc, _mm512_gf2p8affine_epi64_epi8::<0>(bytes, matrices[v]));
        }
        let q = fold_lanes(acc);
        out[0] = (q as u32).swap_bytes();
        out[1] = ((q >> 32) as u32).swap_bytes();
    }
}
