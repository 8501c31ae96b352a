//! Toeplitz throughput, every implementation side by side in one run, so the
//! ratios come from the same machine state.
//!
//! `cargo bench -p rss --bench toeplitz`
//!
//! Every benchmark hashes the same [`TUPLES`] random tuples with the
//! Microsoft key and reports per-tuple throughput (criterion's "elements"),
//! so "Melem/s" compares directly across implementations.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rss::{toeplitz_reference, RssKey, ToeplitzTable};

/// Tuples per iteration: 1024 x 12 or 36 bytes stays in L1 with the tables.
const TUPLES: usize = 1024;

fn random_tuples<const N: usize>(seed: u64) -> Vec<[u8; N]> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..TUPLES)
        .map(|_| std::array::from_fn(|_| rng.gen()))
        .collect()
}

fn xor_all(hashes: impl Iterator<Item = u32>) -> u32 {
    hashes.fold(0, |a, h| a ^ h)
}

fn bench_v4(c: &mut Criterion) {
    let key = RssKey::microsoft();
    let table = ToeplitzTable::new(&key);
    let scalar = table.clone().without_simd();
    let tuples: Vec<[u8; 12]> = random_tuples(4);
    let mut out = vec![0u32; TUPLES];
    eprintln!(
        "batch SIMD (GFNI/AVX-512) path in use: {}",
        table.uses_simd()
    );

    let mut group = c.benchmark_group("toeplitz_v4");
    group.throughput(Throughput::Elements(TUPLES as u64));
    group.bench_function("reference_bit_serial", |b| {
        b.iter(|| {
            xor_all(
                black_box(&tuples)
                    .iter()
                    .map(|t| toeplitz_reference(&key, t).unwrap_or(0)),
            )
        })
    });
    group.bench_function("table_hash_slice", |b| {
        b.iter(|| {
            xor_all(
                black_box(&tuples)
                    .iter()
                    .map(|t| table.hash(t).unwrap_or(0)),
            )
        })
    });
    group.bench_function("fixed_hash_v4_4tuple", |b| {
        b.iter(|| xor_all(black_box(&tuples).iter().map(|t| table.hash_v4_4tuple(t))))
    });
    group.bench_function("batch_scalar_interleaved", |b| {
        b.iter(|| {
            scalar.hash_batch_v4(black_box(&tuples), &mut out);
            black_box(&out);
        })
    });
    group.bench_function("batch_hash_batch_v4", |b| {
        b.iter(|| {
            table.hash_batch_v4(black_box(&tuples), &mut out);
            black_box(&out);
        })
    });
    group.finish();
}

fn bench_v6(c: &mut Criterion) {
    let key = RssKey::microsoft();
    let table = ToeplitzTable::new(&key);
    let scalar = table.clone().without_simd();
    let tuples: Vec<[u8; 36]> = random_tuples(6);
    let mut out = vec![0u32; TUPLES];

    let mut group = c.benchmark_group("toeplitz_v6");
    group.throughput(Throughput::Elements(TUPLES as u64));
    group.bench_function("reference_bit_serial", |b| {
        b.iter(|| {
            xor_all(
                black_box(&tuples)
                    .iter()
                    .map(|t| toeplitz_reference(&key, t).unwrap_or(0)),
            )
        })
    });
    group.bench_function("table_hash_slice", |b| {
        b.iter(|| {
            xor_all(
                black_box(&tuples)
                    .iter()
                    .map(|t| table.hash(t).unwrap_or(0)),
            )
        })
    });
    group.bench_function("fixed_hash_v6_4tuple", |b| {
        b.iter(|| xor_all(black_box(&tuples).iter().map(|t| table.hash_v6_4tuple(t))))
    });
    group.bench_function("batch_scalar_interleaved", |b| {
        b.iter(|| {
            scalar.hash_batch_v6(black_box(&tuples), &mut out);
            black_box(&out);
        })
    });
    group.bench_function("batch_hash_batch_v6", |b| {
        b.iter(|| {
            table.hash_batch_v6(black_box(&tuples), &mut out);
            black_box(&out);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_v4, bench_v6);
criterion_main!(benches);
