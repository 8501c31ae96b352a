//! Packet reordering metrics per flow: RFC 4737 (reordered ratio, extent,
//! n-reordering, late-time and byte offsets) and RFC 5236 (reorder density
//! RD, reorder buffer-occupancy density RBD).
//!
//! The sequence numbers are TCP's, so the byte-stream form of RFC 4737
//! applies (section 3.3: `NextExp = s + payload size`). Choices (also in
//! docs/srpic.md):
//! - Only data segments (payload > 0) are evaluated; SYN/FIN-only and pure
//!   ACKs carry no data and take no sequence space for this purpose.
//! - Sequence numbers are unwrapped to 64 bits per flow ([`seq::Unwrapper`]),
//!   so a flow that wraps 2^32 is measured like any other.
//! - Duplicates: a segment whose first sequence number was already seen in
//!   the flow (a retransmission) is counted in `duplicates` and otherwise
//!   ignored (RFC 4737 section 3.3: only the first copy is considered).
//! - Extent (RFC 4737 section 4.2.1): `i - j` for the earliest arrival `j`
//!   with `s[j] > s[i]`. A segment that starts inside already-received data at
//!   a new sequence number (a repacketised retransmission) is reordered but
//!   has no such `j`; it is measured to the earliest segment whose data
//!   covers its start (`s[j] + len[j] > s[i]`).
//! - n-reordering (section 5): a reordered packet is n-reordered when each of
//!   the n packets before it has a greater sequence number; reported as the
//!   number of packets that are n-reordered for n = 1..=`max_n`.
//! - RD and RBD (RFC 5236) use, as a packet's expected position, its rank by
//!   sequence number among the received unique segments, so loss does not
//!   displace later packets. RD: displacement `D = receive index - rank`
//!   (positive: late), packets with |D| > `threshold` are excluded as RFC
//!   5236 excludes them (counted in `rd_beyond_threshold`). RBD: occupancy of
//!   a reorder buffer that holds packets arriving before their predecessor;
//!   when it would exceed `threshold`, the missing packet is given up on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use serde::Serialize;

use crate::flow::FlowKey;
use crate::seq::Unwrapper;
use crate::wire::PacketInfo;

/// One data segment as it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub seq: u32,
    pub len: u32,
    /// Arrival time, nanoseconds on any fixed clock.
    pub time_ns: u64,
}

/// With the `clap` feature, `steer reorder stats`'s flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct MetricsConfig {
    /// RFC 5236 displacement threshold DT.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = MetricsConfig::default().threshold)
    )]
    pub threshold: u32,
    /// Largest n for n-reordering.
    #[cfg_attr(feature = "clap", arg(skip = MetricsConfig::default().max_n))]
    pub max_n: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            threshold: 64,
            max_n: 8,
        }
    }
}

/// One bin of a density (RD or RBD).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bin {
    pub value: i64,
    pub count: u64,
    pub fraction: f64,
}

/// The metrics of one flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReorderMetrics {
    /// Unique data segments evaluated (the denominator of the ratio).
    pub packets: u64,
    /// Data segments whose first sequence number was seen before.
    pub duplicates: u64,
    /// RFC 4737 Type-P-Reordered packets.
    pub reordered: u64,
    /// `reordered / packets`, 0 to 1.
    pub reordered_ratio: f64,
    /// Largest reordering extent (0 when nothing is reordered).
    pub max_extent: u64,
    pub mean_extent: f64,
    /// `n_reordering[n-1]`: packets that are n-reordered.
    pub n_reordering: Vec<u64>,
    /// Largest reordering late-time offset (RFC 4737 section 4.3), ns.
    pub max_late_time_ns: u64,
    pub mean_late_time_ns: f64,
    /// Largest reordering byte offset (RFC 4737 section 4.4).
    pub max_byte_offset: u64,
    pub mean_byte_offset: f64,
    /// RFC 5236 reorder density: displacement bins, including 0.
    pub rd: Vec<Bin>,
    pub rd_beyond_threshold: u64,
    /// RFC 5236 reorder buffer-occupancy density: occupancy bins, including 0.
    pub rbd: Vec<Bin>,
    pub max_buffer_occupancy: u64,
}

/// Computes the metrics of one flow's data segments in arrival order.
pub fn reorder_metrics<I>(arrivals: I, cfg: &MetricsConfig) -> ReorderMetrics
where
    I: IntoIterator<Item = Arrival>,
{
    // Unwrap and drop duplicates.
    let mut unwrap = Unwrapper::new();
    let mut seen = HashSet::new();
    let mut duplicates = 0u64;
    let mut s: Vec<i64> = Vec::new();
    let mut len: Vec<u64> = Vec::new();
    let mut t: Vec<u64> = Vec::new();
    for a in arrivals {
        let v = unwrap.unwrap(a.seq);
        if !seen.insert(v) {
            duplicates += 1;
            continue;
        }
        s.push(v);
        len.push(u64::from(a.len));
        t.push(a.time_ns);
    }
    let n = s.len();

    // Prefix maxima of s and of s + len, prefix sums of len.
    let mut max_start = Vec::with_capacity(n);
    let mut max_end = Vec::with_capacity(n);
    let mut bytes_before = Vec::with_capacity(n + 1);
    bytes_before.push(0u64);
    for i in 0..n {
        let prev_s = if i == 0 { i64::MIN } else { max_start[i - 1] };
        let prev_e = if i == 0 { i64::MIN } else { max_end[i - 1] };
        max_start.push(prev_s.max(s[i]));
        max_end.push(prev_e.max(s[i] + len[i] as i64));
        bytes_before.push(bytes_before[i] + len[i]);
    }

    let mut next_exp: Option<i64> = None;
    let mut reordered = 0u64;
    let (mut sum_extent, mut max_extent) = (0u64, 0u64);
    let (mut sum_late, mut max_late) = (0u128, 0u64);
    let (mut sum_bytes, mut max_bytes) = (0u128, 0u64);
    let mut n_reordering = vec![0u64; cfg.max_n];
    for i in 0..n {
        match next_exp {
            Some(e) if s[i] < e => {}
            _ => {
                next_exp = Some(s[i] + len[i] as i64);
                continue;
            }
        }
        reordered += 1;
        let j = {
            let by_start = max_start[..i].partition_point(|&m| m <= s[i]);
            if by_start < i {
                by_start
            } else {
                max_end[..i].partition_point(|&m| m <= s[i])
            }
        };
        let extent = (i - j) as u64;
        sum_extent += extent;
        max_extent = max_extent.max(extent);
        let late = t[i].saturating_sub(t[j]);
        sum_late += u128::from(late);
        max_late = max_late.max(late);
        let bytes = bytes_before[i] - bytes_before[j];
        sum_bytes += u128::from(bytes);
        max_bytes = max_bytes.max(bytes);
        let mut degree = 0;
        while degree < cfg.max_n && degree < i && s[i - degree - 1] > s[i] {
            degree += 1;
        }
        for slot in n_reordering.iter_mut().take(degree) {
            *slot += 1;
        }
    }
    let mean = |sum: f64| {
        if reordered == 0 {
            0.0
        } else {
            sum / reordered as f64
        }
    };

    // Ranks by sequence number (stable), for RD and RBD.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (s[i], i));
    let mut rank = vec![0usize; n];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    let dt = i64::from(cfg.threshold);
    let mut rd_counts: BTreeMap<i64, u64> = BTreeMap::new();
    let mut beyond = 0u64;
    for (i, &r) in rank.iter().enumerate() {
        let d = i as i64 - r as i64;
        if d.abs() > dt {
            beyond += 1;
        } else {
            *rd_counts.entry(d).or_default() += 1;
        }
    }
    let (rbd_counts, max_occ) = buffer_occupancy(&rank, cfg.threshold as usize);

    ReorderMetrics {
        packets: n as u64,
        duplicates,
        reordered,
        reordered_ratio: if n == 0 {
            0.0
        } else {
            reordered as f64 / n as f64
        },
        max_extent,
        mean_extent: mean(sum_extent as f64),
        n_reordering,
        max_late_time_ns: max_late,
        mean_late_time_ns: mean(sum_late as f64),
        max_byte_offset: max_bytes,
        mean_byte_offset: mean(sum_bytes as f64),
        rd: density(&rd_counts),
        rd_beyond_threshold: beyond,
        rbd: density(&rbd_counts),
        max_buffer_occupancy: max_occ,
    }
}

/// RFC 5236 RBD over ranks: returns occupancy counts and the maximum.
fn buffer_occupancy(rank: &[usize], threshold: usize) -> (BTreeMap<i64, u64>, u64) {
    let mut buffered = vec![false; rank.len() + 1];
    let mut occupancy = 0usize;
    let mut expected = 0usize;
    let mut counts: BTreeMap<i64, u64> = BTreeMap::new();
    let mut max = 0usize;
    for &r in rank {
        if r < expected {
            // Given up on as lost when the buffer overflowed: not counted.
            continue;
        }
        if r == expected {
            expected += 1;
        } else {
            buffered[r] = true;
            occupancy += 1;
            if occupancy > threshold {
                // The expected packet is declared lost: skip to the lowest buffered one.
                while !buffered[expected] {
                    expected += 1;
                }
            }
        }
        while buffered[expected] {
            buffered[expected] = false;
            occupancy -= 1;
            expected += 1;
        }
        max = max.max(occupancy);
        *counts.entry(occupancy as i64).or_default() += 1;
    }
    (counts, max as u64)
}

fn density(counts: &BTreeMap<i64, u64>) -> Vec<Bin> {
    let total: u64 = counts.values().sum();
    counts
        .iter()
        .map(|(&value, &count)| Bin {
            value,
            count,
            fraction: if total == 0 {
                0.0
            } else {
                count as f64 / total as f64
            },
        })
        .collect()
}

/// The metrics of one direction of one TCP connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    /// Every TCP packet of the flow (data or not).
    pub segments: u64,
    #[serde(flatten)]
    pub metrics: ReorderMetrics,
}

/// Groups TCP data segments by flow, in arrival order, and measures each flow.
/// `packets` yields (arrival time in ns, parsed headers). Flows come out with
/// the most data segments first.
pub fn flow_reports<'a, I>(packets: I, cfg: &MetricsConfig) -> Vec<FlowReport>
where
    I: IntoIterator<Item = (u64, &'a PacketInfo)>,
{
    let mut flows: HashMap<FlowKey, (u64, Vec<Arrival>)> = HashMap::new();
    let mut order: Vec<FlowKey> = Vec::new();
    for (time_ns, info) in packets {
        let (Some(tcp), Some(flow)) = (info.tcp(), info.flow()) else {
            continue;
        };
        let entry = flows.entry(flow).or_insert_with(|| {
            order.push(flow);
            (0, Vec::new())
        });
        entry.0 += 1;
        if tcp.payload_len > 0 {
            entry.1.push(Arrival {
                seq: tcp.seq,
                len: tcp.payload_len,
                time_ns,
            });
        }
    }
    let mut reports: Vec<FlowReport> = order
        .into_iter()
        .filter_map(|flow| {
            let (segments, arrivals) = flows.remove(&flow)?;
            Some(FlowReport {
                src: flow.src,
                dst: flow.dst,
                sport: flow.sport,
                dport: flow.dport,
                segments,
                metrics: reorder_metrics(arrivals, cfg),
            })
        })
        .collect();
    reports.sort_by_key(|r| std::cmp::Reverse(r.metrics.packets));
    reports
}
