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

/// One input kind: its tuple, the names its group and fixed-size ids carry
/// (cases.toml and docs/performance.md read them), and the table's paths
/// that take only this length. A trait rather than function pointers, so
/// every path is called directly as a caller would.
trait Kind: Sized {
    const GROUP: &'static str;
    const SEED: u64;
    const FIXED: &'static str;
    const BATCH: &'static str;
    fn fixed(table: &ToeplitzTable, tuple: &Self) -> u32;
    fn batch(table: &ToeplitzTable, tuples: &[Self], out: &mut [u32]);
}

impl Kind for [u8; 12] {
    const GROUP: &'static str = "toeplitz_v4";
    const SEED: u64 = 4;
    const FIXED: &'static str = "fixed_hash_v4_4tuple";
    const BATCH: &'static str = "batch_hash_batch_v4";
    fn fixed(table: &ToeplitzTable, tuple: &Self) -> u32 {
        table.hash_v4_4tuple(tuple)
    }
    fn batch(table: &ToeplitzTable, tuples: &[Self], out: &mut [u32]) {
        table.hash_batch_v4(tuples, out)
    }
}

impl Kind for [u8; 36] {
    const GROUP: &'static str = "toeplitz_v6";
    const SEED: u64 = 6;
    const FIXED: &'static str = "fixed_hash_v6_4tuple";
    const BATCH: &'static str = "batch_hash_batch_v6";
    fn fixed(table: &ToeplitzTable, tuple: &Self) -> u32 {
        table.hash_v6_4tuple(tuple)
    }
    fn batch(table: &ToeplitzTable, tuples: &[Self], out: &mut [u32]) {
        table.hash_batch_v6(tuples, out)
    }
}

fn bench_kind<const N: usize>(c: &mut Criterion)
where
    [u8; N]: Kind,
{
    let key = RssKey::microsoft();
    let table = ToeplitzTable::new(&key);
    let scalar = table.clone().without_simd();
    let tuples: Vec<[u8; N]> = random_tuples(<[u8; N]>::SEED);
    let mut out = vec![0u32; TUPLES];

    let mut group = c.benchmark_group(<[u8; N]>::GROUP);
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
    group.bench_function(<[u8; N]>::FIXED, |b| {
        b.iter(|| xor_all(black_box(&tuples).iter().map(|t| Kind::fixed(&table, t))))
    });
    group.bench_function("batch_scalar_interleaved", |b| {
        b.iter(|| {
            Kind::batch(&scalar, black_box(&tuples), &mut out);
            black_box(&out);
        })
    });
    group.bench_function(<[u8; N]>::BATCH, |b| {
        b.iter(|| {
            Kind::batch(&table, black_box(&tuples), &mut out);
            black_box(&out);
        })
    });
    group.finish();
}

fn bench_v4(c: &mut Criterion) {
    eprintln!(
        "batch SIMD (GFNI/AVX-512) path in use: {}",
        ToeplitzTable::new(&RssKey::microsoft()).uses_simd()
    );
    bench_kind::<12>(c);
}

criterion_group!(benches, bench_v4, bench_kind::<36>);
criterion_main!(benches);
