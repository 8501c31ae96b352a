//! What sorting does on the GRO path, judged from the runs: the change
//! SRPIC makes to GRO's merge ratio and to the duplicate ACKs per Mbit,
//! each with a 95% interval (Welch, `stats::diff_ci95`), in two cells:
//!
//! - **reordered**: the most reordered cell (largest spread). Linux GRO
//!   flushes a flow at every segment that does not follow the previous
//!   one (net/ipv4/tcp_offload.c, `tcp_gro_receive`: `flush |= seq !=
//!   TCP_SKB_CB(p)->seq + ...`), so reordering splits aggregates and
//!   sorting the batch first should merge them again (paper section 3.2,
//!   with GRO in place of the paper's per-packet delivery).
//! - **in order**: spread 0, where there is nothing to sort and sorting
//!   should change neither beyond noise.

use serde::Serialize;
use stats::{diff_ci95, stat, Stat};

use super::{Cell, Sample, SenderKind};

/// SRPIC minus no SRPIC: the difference of the means and its 95% interval
/// (`low`/`high` `None`, JSON null, with fewer than two runs on a side).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    pub mean: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

impl Change {
    fn of(d: Stat) -> Change {
        Change {
            mean: d.mean,
            low: d.ci95.map(|h| d.mean - h),
            high: d.ci95.map(|h| d.mean + h),
        }
    }
}

/// One GRO-path cell, without and with SRPIC.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effect {
    pub sender: SenderKind,
    pub streams: u32,
    pub spread: f64,
    pub merge_ratio_none: Stat,
    pub merge_ratio_srpic: Stat,
    pub merge_ratio_change: Change,
    pub dup_acks_per_mbit_change: Change,
}

/// The two cells the checks judge; `None` (JSON null) when the runs do
/// not have that cell on the GRO path with both sides measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroEffect {
    pub reordered: Option<Effect>,
    pub in_order: Option<Effect>,
}

/// The GRO-path reordering cells without SRPIC, in the order run.
fn gro_controls(samples: &[Sample]) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::new();
    for s in samples {
        let c = s.cell;
        if c.gro && c.kind == "reorder" && !c.srpic && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

fn effect(control: Cell, samples: &[Sample]) -> Option<Effect> {
    let side = |srpic: bool| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| s.cell == Cell { srpic, ..control })
            .collect()
    };
    let (none, srpic) = (side(false), side(true));
    let merge = |v: &[&Sample]| v.iter().filter_map(|s| s.merge_ratio).collect::<Vec<_>>();
    let dups = |v: &[&Sample]| v.iter().map(|s| s.dup_acks_per_mbit).collect::<Vec<_>>();
    Some(Effect {
        sender: control.sender,
        streams: control.streams,
        spread: control.spread,
        merge_ratio_none: stat(&merge(&none))?,
        merge_ratio_srpic: stat(&merge(&srpic))?,
        merge_ratio_change: Change::of(diff_ci95(&merge(&srpic), &merge(&none))?),
        dup_acks_per_mbit_change: Change::of(diff_ci95(&dups(&srpic), &dups(&none))?),
    })
}

/// The most reordered GRO-path cell and the in-order one (the first run
/// of each, by sender and stream count).
pub fn gro_effect(samples: &[Sample]) -> GroEffect {
    let controls = gro_controls(samples);
    let most_reordered =
        controls
            .iter()
            .filter(|c| c.spread > 0.0)
            .fold(None, |best: Option<Cell>, c| match best {
                Some(b) if b.spread >= c.spread => Some(b),
                _ => Some(*c),
            });
    GroEffect {
        reordered: most_reordered.and_then(|c| effect(c, samples)),
        in_order: controls
            .iter()
            .find(|c| c.spread == 0.0)
            .and_then(|c| effect(*c, samples)),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use wire::stats::{FineHistogram, Histogram};

    fn cell(spread: f64, srpic: bool) -> Cell {
        Cell {
            kind: "reorder",
            sender: SenderKind::Static,
            streams: 1,
            spread,
            drop: 0.0,
            gro: true,
            srpic,
        }
    }

    pub(in crate::srpic) fn sample(c: Cell, merge: Option<f64>, dups: f64) -> Sample {
        let mut h = Histogram::default();
        h.record(1_000);
        let mut f = FineHistogram::default();
        f.record(1_000);
        Sample {
            cell: c,
            repetition: 0,
            mbit_per_s: 900.0,
            mbit: 9000.0,
            retrans_segs: 0,
            timeouts: 0,
            dup_acks: 0,
            ofo_queue: 0,
            retrans_per_mbit: 0.0,
            dup_acks_per_mbit: dups,
            ofo_per_mbit: 0.0,
            mean_block: 8.0,
            reordered_by_wire: 0,
            wire_congestion_drops: Some(0),
            driver_ring_drops: Some(0),
            frames_delivered: 0,
            segments_in: 0,
            skbs_to_tcp: 0,
            merge_ratio: merge,
            driver_added_delay_p99_us: 0.0,
            driver_added_delay: h.summary().unwrap(),
            poll_cycle: h.summary().unwrap(),
            sort_added_delay: f.summary().unwrap(),
            sorter_hold: None,
        }
    }

    #[test]
    fn the_most_reordered_and_the_in_order_cell_are_judged() {
        let mut v = Vec::new();
        for (spread, none, srpic) in [(0.02, 1.5, 3.0), (0.1, 1.1, 1.4), (0.0, 8.0, 8.0)] {
            for k in 0..3 {
                let jitter = f64::from(k) * 0.01;
                v.push(sample(
                    cell(spread, false),
                    Some(none + jitter),
                    40.0 + jitter,
                ));
                v.push(sample(
                    cell(spread, true),
                    Some(srpic + jitter),
                    30.0 - jitter,
                ));
            }
        }
        let e = gro_effect(&v);
        let r = e.reordered.unwrap();
        assert_eq!(r.spread, 0.1);
        assert!((r.merge_ratio_change.mean - 0.3).abs() < 1e-9);
        assert!(r.merge_ratio_change.low.unwrap() > 0.0);
        assert!(r.dup_acks_per_mbit_change.high.unwrap() < 0.0);
        let o = e.in_order.unwrap();
        assert_eq!(o.spread, 0.0);
        let c = o.merge_ratio_change;
        assert!(c.low.unwrap() <= 0.0 && c.high.unwrap() >= 0.0, "{c:?}");
    }

    #[test]
    fn a_side_without_runs_or_merge_ratios_has_no_effect() {
        // Only the control ran, or the TAP path only: nothing to judge.
        let only_none = vec![sample(cell(0.1, false), Some(1.2), 40.0)];
        assert_eq!(gro_effect(&only_none), GroEffect::default());
        let mut tap = sample(cell(0.1, false), Some(1.0), 40.0);
        tap.cell.gro = false;
        assert_eq!(gro_effect(&[tap]), GroEffect::default());
        // Merge ratios not measured on one side.
        let unmeasured = vec![
            sample(cell(0.1, false), Some(1.2), 40.0),
            sample(cell(0.1, true), None, 30.0),
        ];
        assert_eq!(gro_effect(&unmeasured).reordered, None);
        // One run a side: a change without an interval.
        let single = vec![
            sample(cell(0.1, false), Some(1.2), 40.0),
            sample(cell(0.1, true), Some(1.5), 30.0),
        ];
        let r = gro_effect(&single).reordered.unwrap();
        assert_eq!(
            (r.merge_ratio_change.low, r.merge_ratio_change.high),
            (None, None)
        );
        let v = serde_json::to_value(r).unwrap();
        assert!(v["merge_ratio_change"]["low"].is_null());
    }

    #[test]
    fn merge_ratio_needs_an_skb() {
        assert_eq!(super::super::merge_ratio(100, 0), None);
        assert_eq!(super::super::merge_ratio(100, 25), Some(4.0));
    }
}
