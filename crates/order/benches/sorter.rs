//! SRPIC sorter throughput on synthetic descriptor batches of 64.
//!
//! Goals (docs/performance.md, "Reorder repair (SRPIC)"): >= 20 Mpps
//! in-order, >= 5 Mpps with 10% reordered, one core. Run:
//! `cargo bench -p order --bench sorter`. Criterion reports elements/s; one
//! element is one packet.
//!
//! Two groups: `srpic_batch64`, flows in runs (descriptors prebuilt, keyed by
//! `FlowKey`); `srpic_interleaved`, the workload of bench/dpdk-reorder
//! (1, 16 or 256 flows interleaved packet by packet), keyed by `FlowKey` and
//! by `FlowKeyV4`, with the descriptors built inside the timed loop from the
//! header words, as a receive loop does.

use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use order::sorter::{Descriptor, SortKey, Sorter, SorterConfig, TcpSegment};
use order::{FlowKey, FlowKeyV4};
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

/// One arrival of the interleaved workload: the header words a receive loop
/// has parsed.
#[derive(Clone, Copy)]
struct Header {
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    seq: u32,
}

/// bench/dpdk-reorder's workload: arrival k of a period of max(64, 4F)
/// packets is flow k % F's packet k / F; `reorder` of the period's packets
/// swapped with one 1..=3 later of the same flow.
fn interleaved(flows: usize, reorder: f64, seed: u64) -> Vec<Header> {
    let period = (4 * flows).max(BATCH);
    let mut pkt: Vec<u32> = (0..period).map(|k| (k / flows) as u32).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..(period as f64 * reorder).round() as usize {
        let a = rng.gen_range(0..period - flows);
        let mut b = a + rng.gen_range(1..=3) * flows;
        while b >= period {
            b -= flows;
        }
        pkt.swap(a, b);
    }
    (0..period)
        .map(|k| {
            let f = (k % flows) as u32;
            Header {
                src: 0x0a00_0001 + f,
                dst: 0x0a01_0001,
                sport: 40_000 + f as u16,
                dport: 5201,
                seq: (u32::MAX - 20 * MSS).wrapping_add(pkt[k] * MSS),
            }
        })
        .collect()
}

/// Sorts every batch of 64 of `headers`, building each descriptor with
/// `key` as it is pushed.
fn sort_period<K: SortKey>(
    sorter: &mut Sorter<K>,
    headers: &[Header],
    key: impl Fn(&Header) -> K,
    out: &mut Vec<u32>,
) {
    for batch in headers.chunks(BATCH) {
        out.clear();
        for (id, h) in (0u32..).zip(batch) {
            let desc = Descriptor::Hold(TcpSegment {
                flow: key(h),
                seq: h.seq,
                len: MSS,
            });
            sorter.push(id, &desc, out);
        }
        sorter.end_batch(out);
        black_box(&out);
    }
}

fn bench_keyed<K: SortKey + Hash>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    headers: &[Header],
    key: impl Fn(&Header) -> K + Copy,
) {
    let mut sorter = Sorter::<K>::new_keyed(SorterConfig::default()).unwrap();
    let mut out = Vec::with_capacity(BATCH);
    g.bench_function(name, |bench| {
        bench.iter(|| sort_period(&mut sorter, black_box(headers), key, &mut out))
    });
}

fn bench_interleaved(c: &mut Criterion) {
    let mut g = c.benchmark_group("srpic_interleaved");
    for flows in [1, 16, 256] {
        for (order, reorder) in [("in_order", 0.0), ("reordered10", 0.10)] {
            let headers = interleaved(flows, reorder, 7);
            g.throughput(Throughput::Elements(headers.len() as u64));
            let case = format!("{order}_{flows}flows");
            bench_keyed(&mut g, &format!("{case}/FlowKey"), &headers, |h| {
                FlowKey::from(FlowKeyV4::new(h.src, h.sport, h.dst, h.dport))
            });
            bench_keyed(&mut g, &format!("{case}/FlowKeyV4"), &headers, |h| {
                FlowKeyV4::new(h.src, h.sport, h.dst, h.dport)
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench, bench_interleaved);
criterion_main!(benches);
