//! SRPIC sorter throughput on synthetic descriptor batches of 64.
//!
//! Goals (docs/performance.md, "Reorder repair (SRPIC)"): >= 20 Mpps
//! in-order, >= 5 Mpps with 10% reordered, one core. Run:
//! `cargo bench -p order --bench sorter`. Criterion reports elements/s; one
//! element is one packet.

use std::net::{IpAddr, Ipv4Addr};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use order::sorter::{Descriptor, Sorter, SorterConfig, TcpSegment};
use order::FlowKey;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BATCH: usize = 64;
const MSS: u32 = 1448;

fn flow(i: u32) -> FlowKey {
    FlowKey::new(
        IpAddr::V4(Ipv4Addr::from(0x0a00_0001 + i)),
        40_000 + i as u16,
        IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
        5201,
    )
}

/// `flows` flows, each in runs of `BATCH / flows` in-sequence MSS segments;
/// then `reorder * n` times a packet is swapped with one 1..=3 later
/// of the same flow. Sequence numbers start near the wrap.
fn batch(flows: u32, reorder: f64, seed: u64) -> Vec<Descriptor> {
    let mut rng = StdRng::seed_from_u64(seed);
    let per = BATCH / flows as usize;
    let mut out = Vec::with_capacity(BATCH);
    for f in 0..flows {
        let mut segs: Vec<u32> = (0..per as u32)
            .map(|k| (u32::MAX - 20 * MSS).wrapping_add(k * MSS))
            .collect();
        let swaps = (per as f64 * reorder).round() as usize;
        for _ in 0..swaps {
            let a = rng.gen_range(0..per - 1);
            let b = (a + rng.gen_range(1..=3)).min(per - 1);
            segs.swap(a, b);
        }
        out.extend(segs.into_iter().map(|seq| {
            Descriptor::Hold(TcpSegment {
                flow: flow(f),
                seq,
                len: MSS,
            })
        }));
    }
    out
}

fn count_out_of_order(b: &[Descriptor]) -> usize {
    let mut max: Option<u32> = None;
    let mut n = 0;
    for d in b {
        if let Descriptor::Hold(s) = d {
            match max {
                Some(m) if (s.seq.wrapping_sub(m) as i32) < 0 => n += 1,
                _ => max = Some(s.seq),
            }
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("srpic_batch64");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, flows, reorder) in [
        ("in_order_1flow", 1, 0.0),
        ("in_order_8flows", 8, 0.0),
        ("reordered10_1flow", 1, 0.10),
        ("reordered10_8flows", 8, 0.10),
    ] {
        let b = batch(flows, reorder, 7);
        if reorder > 0.0 && flows == 1 {
            eprintln!(
                "{name}: {} of {BATCH} arrive below an earlier sequence number",
                count_out_of_order(&b)
            );
        }
        let mut sorter = Sorter::new(SorterConfig::default()).unwrap();
        let mut out = Vec::with_capacity(BATCH);
        g.bench_function(name, |bench| {
            bench.iter(|| {
                out.clear();
                sorter.sort_batch(black_box(&b), &mut out);
                black_box(&out);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
