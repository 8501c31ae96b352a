//! Reordering metrics against a straightforward, independent O(n^2)
//! computation, on synthetic captures with known answers (one of which
//! wraps 2^32), and Table 1.

mod common;

use order::capture::Capture;
use order::metrics::{reorder_metrics, Arrival, MetricsConfig};
use proptest::prelude::*;

/// The naive answer, straight from the definitions, on untruncated 64-bit
/// sequence numbers of non-overlapping segments (first copies only).
#[derive(Debug, PartialEq)]
struct Naive {
    packets: u64,
    duplicates: u64,
    reordered: u64,
    max_extent: u64,
    sum_extent: u64,
    n_reordering: Vec<u64>,
    max_late: u64,
    max_bytes: u64,
    rd: Vec<(i64, u64)>,
    rbd: Vec<(i64, u64)>,
}

fn naive(arrivals: &[(u64, u64, u64)], max_n: usize) -> Naive {
    // (seq, len, time); drop repeats of a starting seq.
    let mut uniq: Vec<(u64, u64, u64)> = Vec::new();
    let mut duplicates = 0;
    for a in arrivals {
        if uniq.iter().any(|u| u.0 == a.0) {
            duplicates += 1;
        } else {
            uniq.push(*a);
        }
    }
    let n = uniq.len();
    let (mut reordered, mut max_extent, mut sum_extent, mut max_late, mut max_bytes) =
        (0, 0, 0, 0, 0);
    let mut n_reordering = vec![0u64; max_n];
    for i in 0..n {
        // Reordered: some earlier packet has a greater sequence number.
        let Some(j) = (0..i).find(|&j| uniq[j].0 > uniq[i].0) else {
            continue;
        };
        reordered += 1;
        let e = (i - j) as u64;
        max_extent = max_extent.max(e);
        sum_extent += e;
        max_late = max_late.max(uniq[i].2 - uniq[j].2);
        max_bytes = max_bytes.max((j..i).map(|k| uniq[k].1).sum());
        for k in 1..=max_n {
            if k <= i && (1..=k).all(|m| uniq[i - m].0 > uniq[i].0) {
                n_reordering[k - 1] += 1;
            }
        }
    }
    // RD: displacement = arrival index - number of packets with smaller seq.
    let mut rd = std::collections::BTreeMap::new();
    for i in 0..n {
        let expected = uniq.iter().filter(|u| u.0 < uniq[i].0).count() as i64;
        *rd.entry(i as i64 - expected).or_insert(0u64) += 1;
    }
    // RBD: a buffer holds packets until everything before them has arrived.
    let mut sorted: Vec<u64> = uniq.iter().map(|u| u.0).collect();
    sorted.sort();
    let mut buffer: Vec<u64> = Vec::new();
    let mut next = 0usize;
    let mut rbd = std::collections::BTreeMap::new();
    for u in &uniq {
        buffer.push(u.0);
        while next < n && buffer.contains(&sorted[next]) {
            buffer.retain(|&b| b != sorted[next]);
            next += 1;
        }
        *rbd.entry(buffer.len() as i64).or_insert(0u64) += 1;
    }
    Naive {
        packets: n as u64,
        duplicates,
        reordered,
        max_extent,
        sum_extent,
        n_reordering,
        max_late,
        max_bytes,
        rd: rd.into_iter().collect(),
        rbd: rbd.into_iter().collect(),
    }
}

fn fast(m: &order::ReorderMetrics) -> Naive {
    Naive {
        packets: m.packets,
        duplicates: m.duplicates,
        reordered: m.reordered,
        max_extent: m.max_extent,
        sum_extent: (m.mean_extent * m.reordered as f64).round() as u64,
        n_reordering: m.n_reordering.clone(),
        max_late: m.max_late_time_ns,
        max_bytes: m.max_byte_offset,
        rd: m.rd.iter().map(|b| (b.value, b.count)).collect(),
        rbd: m.rbd.iter().map(|b| (b.value, b.count)).collect(),
    }
}

const CFG: MetricsConfig = MetricsConfig {
    threshold: 1 << 20,
    max_n: 6,
};

/// A flow as (seq, len, time) with seq relative to `start`, sent through a
/// real pcap and the parser; returns the metrics of that flow.
fn through_capture(start: u32, arrivals: &[(u64, u64, u64)]) -> order::ReorderMetrics {
    let records: Vec<(u64, Vec<u8>)> = arrivals
        .iter()
        .map(|&(s, l, t)| {
            let seq = start.wrapping_add(s as u32);
            (
                t,
                testkit::tcp_frame(common::A, 5000, common::B, 80, seq, common::ACK, l as usize),
            )
        })
        .collect();
    let bytes = order::capture::write_pcap(1, &records);
    let cap = Capture::read(&bytes).unwrap();
    let reports = order::capture_reports(&cap, &CFG);
    assert_eq!(reports.len(), 1);
    reports[0].metrics.clone()
}

#[test]
fn known_answer_small() {
    // 1 2 4 3 5: one reordered (3), extent 1, late by 1 packet time, 100 bytes.
    let a: Vec<(u64, u64, u64)> = [0u64, 1, 3, 2, 4]
        .iter()
        .enumerate()
        .map(|(i, &k)| (k * 100, 100, i as u64 * 1000))
        .collect();
    let m = through_capture(1000, &a);
    assert_eq!(
        (
            m.packets,
            m.reordered,
            m.max_extent,
            m.max_byte_offset,
            m.max_late_time_ns
        ),
        (5, 1, 1, 100, 1000)
    );
    assert_eq!(m.n_reordering[..2], [1, 0]);
    assert_eq!(fast(&m), naive(&a, CFG.max_n));
}

#[test]
fn known_answer_across_wrap_with_retransmission() {
    // Segments of 1000 bytes from 2^32 - 3500: the 4th starts after the wrap.
    // Arrival: 0 1 3 4 2 5 6 (2 is late by 2) plus a retransmission of 1.
    let order = [0u64, 1, 3, 4, 2, 5, 1, 6];
    let a: Vec<(u64, u64, u64)> = order
        .iter()
        .enumerate()
        .map(|(i, &k)| (k * 1000, 1000, i as u64 * 10_000))
        .collect();
    let m = through_capture(u32::MAX - 3499, &a);
    assert_eq!(
        (
            m.packets,
            m.duplicates,
            m.reordered,
            m.max_extent,
            m.max_byte_offset
        ),
        (7, 1, 1, 2, 2000)
    );
    assert_eq!(m.max_late_time_ns, 20_000);
    assert_eq!(fast(&m), naive(&a, CFG.max_n));
}

#[test]
fn table1_metrics() {
    let a: Vec<(u64, u64, u64)> = common::TABLE1
        .iter()
        .enumerate()
        .map(|(i, &k)| (u64::from(k), 1, i as u64))
        .collect();
    let m = reorder_metrics(
        a.iter().map(|&(s, l, t)| Arrival {
            seq: s as u32,
            len: l as u32,
            time_ns: t,
        }),
        &CFG,
    );
    assert_eq!((m.reordered, m.reordered_ratio, m.max_extent), (6, 0.30, 3));
    assert_eq!(fast(&m), naive(&a, CFG.max_n));
}

#[test]
fn empty_and_single() {
    let m = reorder_metrics(std::iter::empty(), &CFG);
    assert_eq!((m.packets, m.reordered, m.reordered_ratio), (0, 0, 0.0));
    let m = reorder_metrics(
        [Arrival {
            seq: 5,
            len: 1,
            time_ns: 0,
        }],
        &CFG,
    );
    assert_eq!((m.packets, m.reordered), (1, 0));
}

#[test]
fn rd_threshold_excludes_far_displacements() {
    // Packet 0 arrives last of 10: displacement 9 (late), others -1 (early).
    let a: Vec<Arrival> = (1..10u32)
        .chain([0])
        .enumerate()
        .map(|(i, k)| Arrival {
            seq: k * 10,
            len: 10,
            time_ns: i as u64,
        })
        .collect();
    let m = reorder_metrics(
        a.clone(),
        &MetricsConfig {
            threshold: 5,
            max_n: 4,
        },
    );
    assert_eq!(m.rd_beyond_threshold, 1);
    assert_eq!(
        m.rd.iter().map(|b| (b.value, b.count)).collect::<Vec<_>>(),
        [(-1, 9)]
    );
    // RBD with DT 5: the buffer gives up on packet 0 once 6 are held.
    assert_eq!(m.max_buffer_occupancy, 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random local reordering, duplicates, wrap: the fast metrics equal the naive ones.
    #[test]
    fn metrics_match_naive(
        start in prop_oneof![any::<u32>(), (u32::MAX - 100_000)..=u32::MAX],
        lens in prop::collection::vec(1u64..1500, 1..80),
        swaps in prop::collection::vec((0usize..80, 1usize..8), 0..40),
        dups in prop::collection::vec(0usize..80, 0..5),
    ) {
        let mut segs: Vec<(u64, u64)> = Vec::new();
        let mut s = 0u64;
        for &l in &lens { segs.push((s, l)); s += l; }
        for &(i, d) in &swaps {
            let i = i % segs.len();
            let j = (i + d).min(segs.len() - 1);
            segs.swap(i, j);
        }
        for &d in &dups {
            let x = segs[d % segs.len()];
            segs.push(x);
        }
        let a: Vec<(u64, u64, u64)> = segs.iter().enumerate().map(|(i, &(s, l))| (s, l, i as u64 * 1000)).collect();
        let m = reorder_metrics(a.iter().map(|&(s, l, t)| Arrival { seq: start.wrapping_add(s as u32), len: l as u32, time_ns: t }), &CFG);
        prop_assert_eq!(fast(&m), naive(&a, CFG.max_n));
    }
}
