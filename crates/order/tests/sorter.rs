//! The SRPIC sorter: the paper's Table 2 walk-through and Table 1, the flush
//! rules, bounded state, and properties (no loss, no duplication, sorted
//! blocks, untouched non-TCP order) against `sort()`.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use order::metrics::{reorder_metrics, Arrival, MetricsConfig};
use order::sorter::{
    Descriptor, DuplicatePolicy, Sorter, SorterConfig, TcpSegment, UnsuitablePolicy, Variant,
};
use order::{FlowKey, FlowKeyV4};
use proptest::prelude::*;

fn flow(n: u8) -> FlowKey {
    FlowKey::new(
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)),
        1000 + u16::from(n),
        IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)),
        80,
    )
}

fn seg(f: u8, seq: u32, len: u32) -> Descriptor {
    Descriptor::Hold(TcpSegment {
        flow: flow(f),
        seq,
        len,
    })
}

fn sorter(block: u32, ring: u32) -> Sorter {
    Sorter::new(SorterConfig {
        block_size: block,
        ring_size: ring,
        ..SorterConfig::default()
    })
    .unwrap()
}

/// (arrival, Prev, Curr, After, NextExp)
type Step = (u32, &'static [u32], &'static [u32], &'static [u32], u32);

/// Table 2: payload length 1, block of 7, arrivals 2 3 1 4 6 7 5. Ids are
/// the sequence numbers, so lists read as in the paper.
#[test]
fn table2_walk_through() {
    // Block size 8 so the 7th packet does not flush and step 7 can be inspected.
    let mut s = sorter(8, 512);
    let mut out = Vec::new();
    let f = flow(1);
    // (arrival, Prev, Curr, After, NextExp) after each step.
    let steps: [Step; 7] = [
        (2, &[], &[2], &[], 3),
        (3, &[], &[2, 3], &[], 4),
        (1, &[1], &[2, 3], &[], 4),
        (4, &[1], &[2, 3, 4], &[], 5),
        (6, &[1], &[2, 3, 4], &[6], 5),
        (7, &[1], &[2, 3, 4], &[6, 7], 5),
        (5, &[1], &[2, 3, 4, 5], &[6, 7], 6),
    ];
    for (i, (p, prev, curr, after, next)) in steps.iter().enumerate() {
        s.push(*p, &seg(1, *p, 1), &mut out);
        let m = s.manager(&f).unwrap();
        assert_eq!(
            (m.prev.as_slice(), m.curr.as_slice(), m.after.as_slice()),
            (*prev, *curr, *after),
            "step {}",
            i + 1
        );
        assert_eq!(m.next_exp, *next, "step {}", i + 1);
        assert_eq!(m.packet_count, i as u32 + 1);
        assert!(out.is_empty());
    }
    s.end_batch(&mut out);
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7]);

    // With the paper's block size of 7 the 7th packet flushes the manager.
    let mut s = sorter(7, 512);
    let mut out = Vec::new();
    for p in [2, 3, 1, 4, 6, 7] {
        s.push(p, &seg(1, p, 1), &mut out);
    }
    assert!(out.is_empty());
    s.push(5, &seg(1, 5, 1), &mut out);
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(s.manager(&f).unwrap().packet_count, 0);
}

/// The same walk-through with sequence numbers that wrap inside the block.
#[test]
fn table2_across_wrap() {
    let base = u32::MAX - 3; // packets 1..7 -> base+1 .. base+7 wraps after 4
    let mut s = sorter(7, 512);
    let mut out = Vec::new();
    for p in [2u32, 3, 1, 4, 6, 7, 5] {
        s.push(p, &seg(1, base.wrapping_add(p), 1), &mut out);
    }
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7]);
}

fn sorted_in_blocks(block: u32) -> Vec<u32> {
    let mut s = sorter(block, 512);
    let mut out = Vec::new();
    let batch: Vec<Descriptor> = common::TABLE1.iter().map(|&p| seg(1, p, 1)).collect();
    s.sort_batch(&batch, &mut out);
    out.iter().map(|&i| common::TABLE1[i as usize]).collect()
}

fn table1_row(seqs: &[u32]) -> (u64, f64, u64) {
    let m = reorder_metrics(
        seqs.iter().map(|&s| Arrival {
            seq: s,
            len: 1,
            time_ns: 0,
        }),
        &MetricsConfig::default(),
    );
    (m.reordered, m.reordered_ratio, m.max_extent)
}

/// Table 1: 6 (30%, extent 3) unsorted; 10% (extent 1) with blocks of 5 (2
/// packets: the table's "3" contradicts its own 10%, see `common::TABLE1`);
/// 1 (5%, extent 1) with blocks of 10.
#[test]
fn table1_block_sizes() {
    assert_eq!(table1_row(&sorted_in_blocks(1)), (6, 0.30, 3));
    assert_eq!(sorted_in_blocks(1), common::TABLE1);
    assert_eq!(table1_row(&sorted_in_blocks(5)), (2, 0.10, 1));
    let reordered_after_5 = {
        let out = sorted_in_blocks(5);
        let mut max = 0;
        let mut late = Vec::new();
        for p in out {
            if p < max {
                late.push(p);
            }
            max = max.max(p);
        }
        late
    };
    assert_eq!(
        reordered_after_5,
        [5, 10],
        "the packets section 3.2 names as inter-block"
    );
    assert_eq!(table1_row(&sorted_in_blocks(10)), (1, 0.05, 1));
    // A SRPIC block of 5 is exactly "sort each run of 5 arrivals".
    let by_sort: Vec<u32> = common::TABLE1
        .chunks(5)
        .flat_map(|c| {
            let mut c = c.to_vec();
            c.sort();
            c
        })
        .collect();
    assert_eq!(sorted_in_blocks(5), by_sort);
}

#[test]
fn ring_size_flushes_all_managers() {
    let mut s = sorter(32, 4);
    let mut out = Vec::new();
    s.push(0, &seg(1, 10, 1), &mut out);
    s.push(1, &seg(2, 50, 1), &mut out);
    s.push(2, &seg(1, 9, 1), &mut out);
    assert!(out.is_empty());
    s.push(3, &seg(2, 49, 1), &mut out);
    // Flush-all in the order the managers first held a packet.
    assert_eq!(out, [2, 0, 3, 1]);
    assert_eq!(s.stats().ring_flushes, 1);
    assert_eq!(s.holding(), 0);
}

#[test]
fn unsuitable_packets_go_up_at_once() {
    let mut s = sorter(32, 512);
    let mut out = Vec::new();
    s.push(0, &seg(1, 10, 1), &mut out);
    s.push(
        1,
        &Descriptor::Pass {
            flow: Some(flow(1)),
        },
        &mut out,
    );
    s.push(2, &Descriptor::Pass { flow: None }, &mut out);
    assert_eq!(out, [1, 2]);
    s.end_batch(&mut out);
    assert_eq!(out, [1, 2, 0]);

    // Opt-in: flush the flow first so a FIN does not overtake its data.
    let mut s = Sorter::new(SorterConfig {
        unsuitable: UnsuitablePolicy::FlushFlowFirst,
        ..SorterConfig::default()
    })
    .unwrap();
    let mut out = Vec::new();
    s.push(0, &seg(1, 10, 1), &mut out);
    s.push(1, &seg(2, 10, 1), &mut out);
    s.push(
        2,
        &Descriptor::Pass {
            flow: Some(flow(1)),
        },
        &mut out,
    );
    assert_eq!(out, [0, 2]);
    s.end_batch(&mut out);
    assert_eq!(out, [0, 2, 1]);
}

#[test]
fn full_table_passes_new_flows_through_and_idle_flows_are_reclaimed() {
    let mut s = Sorter::new(SorterConfig {
        max_flows: 2,
        idle_batches: 2,
        ..SorterConfig::default()
    })
    .unwrap();
    let mut out = Vec::new();
    s.push(0, &seg(1, 10, 1), &mut out);
    s.push(1, &seg(2, 10, 1), &mut out);
    s.push(2, &seg(3, 10, 1), &mut out); // table full
    assert_eq!(out, [2]);
    assert_eq!(s.stats().passed_table_full, 1);
    assert_eq!(s.flows(), 2);
    s.end_batch(&mut out);
    assert_eq!(out, [2, 0, 1]);
    // Flow 1 stays busy; flow 2 goes idle and is reclaimed, making room for flow 3.
    for b in 0..3u32 {
        out.clear();
        s.push(b, &seg(1, 11 + b, 1), &mut out);
        s.end_batch(&mut out);
    }
    assert_eq!(s.flows(), 1);
    assert!(s.stats().managers_reclaimed >= 1);
    out.clear();
    s.push(0, &seg(3, 11, 1), &mut out);
    assert!(out.is_empty(), "flow 3 now gets a manager");
    assert!(s.manager(&flow(3)).is_some());
}

/// A segment repeating data already in Curr (e.g. a zero-window probe):
/// Listing 1 puts it in Prev, ahead of the block; `AfterCurr` right after Curr.
#[test]
fn repeated_segment_placement() {
    let arrivals = [
        seg(1, 100, 10),
        seg(1, 110, 1),
        seg(1, 110, 1),
        seg(1, 200, 5),
    ];
    let mut out = Vec::new();
    sorter(32, 512).sort_batch(&arrivals, &mut out);
    assert_eq!(out, [2, 0, 1, 3]);
    let mut s = Sorter::new(SorterConfig {
        duplicates: DuplicatePolicy::AfterCurr,
        ..SorterConfig::default()
    })
    .unwrap();
    out.clear();
    s.sort_batch(&arrivals, &mut out);
    assert_eq!(out, [0, 1, 2, 3]);
}

#[test]
fn block_size_one_does_not_sort() {
    let mut s = sorter(1, 512);
    let mut out = Vec::new();
    s.sort_batch(&[seg(1, 3, 1), seg(1, 1, 1), seg(1, 2, 1)], &mut out);
    assert_eq!(out, [0, 1, 2]);
}

#[test]
fn bad_config_is_refused() {
    assert!(Sorter::new(SorterConfig {
        block_size: 0,
        ..SorterConfig::default()
    })
    .is_err());
    assert!(Sorter::new(SorterConfig {
        ring_size: 0,
        ..SorterConfig::default()
    })
    .is_err());
    assert!(Sorter::new(SorterConfig {
        max_flows: 0,
        ..SorterConfig::default()
    })
    .is_err());
}

// ---- properties -------------------------------------------------------------

fn any_descriptor() -> impl Strategy<Value = Descriptor> {
    prop_oneof![
        4 => (0u8..4, any::<u32>(), 0u32..3000).prop_map(|(f, s, l)| seg(f, s, l)),
        2 => (0u8..4, (u32::MAX - 5000)..=u32::MAX, 0u32..1500).prop_map(|(f, s, l)| seg(f, s, l)),
        1 => (0u8..4).prop_map(|f| Descriptor::Pass { flow: Some(flow(f)) }),
        1 => Just(Descriptor::Pass { flow: None }),
    ]
}

fn any_config() -> impl Strategy<Value = SorterConfig> {
    (
        1u32..40,
        1u32..100,
        1usize..5,
        1u32..4,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(block, ring, flows, idle, flush, dup)| SorterConfig {
            block_size: block,
            ring_size: ring,
            max_flows: flows,
            idle_batches: idle,
            unsuitable: if flush {
                UnsuitablePolicy::FlushFlowFirst
            } else {
                UnsuitablePolicy::DeliverAtOnce
            },
            duplicates: if dup {
                DuplicatePolicy::AfterCurr
            } else {
                DuplicatePolicy::Prev
            },
        })
}

/// A flow's segments: contiguous, non-overlapping, from `start` (may wrap),
/// then locally shuffled by swapping neighbours within `spread`.
fn reordered_flow(start: u32, lens: &[u32], swaps: &[(usize, usize)]) -> Vec<(u32, u32)> {
    let mut segs = Vec::new();
    let mut seq = start;
    for &l in lens {
        segs.push((seq, l));
        seq = seq.wrapping_add(l);
    }
    for &(a, d) in swaps {
        if segs.is_empty() {
            break;
        }
        let a = a % segs.len();
        let b = (a + d).min(segs.len() - 1);
        segs.swap(a, b);
    }
    segs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Packets in == packets out, batch by batch, for any input.
    #[test]
    fn no_loss_no_duplication(cfg in any_config(), batches in prop::collection::vec(prop::collection::vec(any_descriptor(), 0..120), 1..6)) {
        let mut s = Sorter::new(cfg).unwrap();
        let mut out = Vec::new();
        for batch in &batches {
            out.clear();
            s.sort_batch(batch, &mut out);
            let mut got = out.clone();
            got.sort();
            prop_assert_eq!(got, (0..batch.len() as u32).collect::<Vec<_>>());
            prop_assert_eq!(s.holding(), 0);
            prop_assert!(s.flows() <= cfg.max_flows);
            // Non-TCP (unsuitable) packets keep their relative order.
            let passes: Vec<u32> = out.iter().copied().filter(|&i| matches!(batch[i as usize], Descriptor::Pass { .. })).collect();
            let mut in_order = passes.clone();
            in_order.sort();
            prop_assert_eq!(passes, in_order);
        }
        prop_assert_eq!(s.stats().packets_in, s.stats().packets_out);
    }

    /// For unique, non-overlapping segments, each flushed block is sorted
    /// (equal to `sort()` of itself), also across the 2^32 wrap.
    #[test]
    fn flushed_blocks_are_sorted(
        cfg in any_config(),
        starts in prop::collection::vec(prop_oneof![any::<u32>(), (u32::MAX - 20_000)..=u32::MAX], 3),
        lens in prop::collection::vec(prop::collection::vec(1u32..1500, 0..60), 3),
        swaps in prop::collection::vec((0usize..60, 1usize..6), 0..30),
        interleave in prop::collection::vec(0usize..3, 0..200),
        batch_len in 1usize..100,
    ) {
        let flows: Vec<Vec<(u32, u32)>> = (0..3).map(|f| reordered_flow(starts[f], &lens[f], &swaps)).collect();
        // Interleave the flows' (already locally reordered) segments.
        let mut next = [0usize; 3];
        let mut arrivals: Vec<(u8, u32, u32)> = Vec::new();
        for &f in interleave.iter().chain([0, 1, 2].iter().cycle().take(200)) {
            if next[f] < flows[f].len() {
                let (s, l) = flows[f][next[f]];
                arrivals.push((f as u8, s, l));
                next[f] += 1;
            }
        }
        let mut s = Sorter::new(SorterConfig { max_flows: 3, ..cfg }).unwrap();
        for batch in arrivals.chunks(batch_len) {
            let descs: Vec<Descriptor> = batch.iter().map(|&(f, q, l)| seg(f, q, l)).collect();
            let mut chunks: Vec<Vec<u32>> = Vec::new();
            let mut out = Vec::new();
            for (i, d) in descs.iter().enumerate() {
                s.push(i as u32, d, &mut out);
                chunks.push(std::mem::take(&mut out));
            }
            s.end_batch(&mut out);
            chunks.push(out);
            for chunk in &chunks {
                for f in 0..3u8 {
                    let block: Vec<u32> = chunk.iter().filter(|&&i| batch[i as usize].0 == f).map(|&i| batch[i as usize].1).collect();
                    let key = |q: &u32| q.wrapping_sub(starts[f as usize]) as i32;
                    let mut sorted = block.clone();
                    sorted.sort_by_key(key);
                    prop_assert_eq!(&block, &sorted);
                }
            }
        }
    }

    /// The key type is only a representation: keyed by `FlowKeyV4`, the
    /// sorter delivers exactly what it delivers keyed by `FlowKey`, batch by
    /// batch and push by push, with the same counters (flow table limits
    /// and idle reclaim included).
    #[test]
    fn v4_key_sorts_as_flow_key(cfg in any_config(), batches in prop::collection::vec(prop::collection::vec(any_descriptor(), 0..120), 1..8)) {
        let mut general = Sorter::new(cfg).unwrap();
        let mut packed = Sorter::<FlowKeyV4>::new_keyed(cfg).unwrap();
        for batch in &batches {
            let (mut want, mut got) = (Vec::new(), Vec::new());
            for (id, desc) in (0u32..).zip(batch) {
                general.push(id, desc, &mut want);
                packed.push(id, &as_v4(desc), &mut got);
                prop_assert_eq!(&want, &got);
            }
            general.end_batch(&mut want);
            packed.end_batch(&mut got);
            prop_assert_eq!(&want, &got);
            prop_assert_eq!(general.stats(), packed.stats());
            prop_assert_eq!(general.flows(), packed.flows());
        }
    }
}

fn v4_key(f: &FlowKey) -> FlowKeyV4 {
    let word = |a: IpAddr| match a {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(_) => unreachable!("the test flows are IPv4"),
    };
    FlowKeyV4::new(word(f.src), f.sport, word(f.dst), f.dport)
}

fn as_v4(d: &Descriptor) -> Descriptor<FlowKeyV4> {
    match d {
        Descriptor::Hold(s) => Descriptor::Hold(TcpSegment {
            flow: v4_key(&s.flow),
            seq: s.seq,
            len: s.len,
        }),
        Descriptor::Pass { flow } => Descriptor::Pass {
            flow: flow.as_ref().map(v4_key),
        },
    }
}

#[test]
fn v4_key_round_trips_through_flow_key() {
    let k = FlowKeyV4::new(0x0a00_0102, 40_001, 0xc0a8_0001, 5201);
    assert_eq!(
        (k.src(), k.sport(), k.dst(), k.dport()),
        (0x0a00_0102, 40_001, 0xc0a8_0001, 5201)
    );
    let general = FlowKey::from(k);
    assert_eq!(general.to_string(), "10.0.1.2:40001 -> 192.168.0.1:5201");
    assert_eq!(v4_key(&general), k);
}

#[test]
fn a_variant_sets_the_policies_and_keeps_the_sizes() {
    let sized = SorterConfig {
        block_size: 8,
        ring_size: 100,
        ..SorterConfig::default()
    };
    let ordered = sized.with_variant(Variant::Ordered);
    assert_eq!(
        (ordered.unsuitable, ordered.duplicates),
        (UnsuitablePolicy::FlushFlowFirst, DuplicatePolicy::AfterCurr)
    );
    assert_eq!((ordered.block_size, ordered.ring_size), (8, 100));
    assert_eq!(ordered.with_variant(Variant::Paper), sized);
}

#[cfg(feature = "clap")]
#[test]
fn sorter_and_metrics_flags_default_to_the_library_values_and_need_a_block() {
    use clap::Parser;
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        sorter: SorterConfig,
        #[command(flatten)]
        metrics: MetricsConfig,
    }
    assert!(Flags::try_parse_from(["t"]).is_err());
    let flags = Flags::parse_from(["t", "--block", "32"]);
    assert_eq!(flags.sorter, SorterConfig::default());
    assert_eq!(flags.metrics, MetricsConfig::default());
}
