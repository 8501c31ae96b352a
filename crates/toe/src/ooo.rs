//! The out-of-order intervals a receiver keeps in its window (thesis
//! section 5.5.4.3, Table 5.3's "OOO fidelity"): bytes past RCV.NXT that
//! arrived before the hole in front of them filled, already placed in the
//! receive buffer, tracked as at most `bound` disjoint intervals.
//!
//! - 0 intervals: every out-of-order segment is dropped (go-back-N, what
//!   RDMA NICs do);
//! - 1 interval: FlexTOE's and Laminar's receiver (sections 4.3.1 and
//!   5.3.1.3, TAS's fast path): a segment extends the interval it touches
//!   or is dropped;
//! - N intervals: the same with N;
//! - unbounded: every out-of-order byte in the window is kept (Table 5.3's
//!   "max", an ideal reassembler).
//!
//! A segment that touches or overlaps intervals merges them into one; a
//! segment disjoint from all of them opens a new one if the bound allows
//! and is dropped otherwise (the segment is answered with an ACK for
//! RCV.NXT either way, so the sender learns nothing it could not learn
//! from the one-interval receiver).

use std::fmt;
use std::str::FromStr;

use order::seq::distance;

/// How many out-of-order intervals a receiver may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OooBound {
    /// At most this many (0: none).
    Intervals(u16),
    /// As many as the window holds.
    Unbounded,
}

impl OooBound {
    /// The bounds Table 5.3 compares, in its row order after "max".
    pub const TABLE_5_3: [OooBound; 4] = [
        OooBound::Unbounded,
        OooBound::Intervals(0),
        OooBound::Intervals(1),
        OooBound::Intervals(2),
    ];

    fn allows(self, n: usize) -> bool {
        match self {
            OooBound::Intervals(max) => n <= usize::from(max),
            OooBound::Unbounded => true,
        }
    }
}

impl OooBound {
    /// FlexTOE's and Laminar's receiver: one interval (thesis Table 4.1).
    pub const THESIS: OooBound = OooBound::Intervals(1);
}

/// The endpoint's default: 64 intervals, 512 bytes per connection at
/// most. One interval collapses under loss: every segment past it is
/// dropped and sent again (a Linux bbr sender reached a twelfth of its
/// goodput at 0.1% loss, docs/toe.md "Loss recovery"); Linux keeps every
/// out-of-order segment its buffer holds. 64 holes is a hole every 11
/// segments of a 1 MiB window, more than 2% loss makes.
impl Default for OooBound {
    fn default() -> Self {
        OooBound::Intervals(64)
    }
}

impl fmt::Display for OooBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OooBound::Intervals(n) => write!(f, "{n}"),
            OooBound::Unbounded => f.write_str("unbounded"),
        }
    }
}

/// A bound that is neither a count nor `unbounded`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("out-of-order bound '{0}': expected a number of intervals (0-65535) or 'unbounded'")]
pub struct BadBound(pub String);

impl FromStr for OooBound {
    type Err = BadBound;
    fn from_str(s: &str) -> Result<Self, BadBound> {
        match s {
            "unbounded" | "max" => Ok(OooBound::Unbounded),
            _ => s
                .parse()
                .map(OooBound::Intervals)
                .map_err(|_| BadBound(s.to_string())),
        }
    }
}

impl serde::Serialize for OooBound {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One interval: its first sequence number and its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub start: u32,
    pub len: u32,
}

/// The intervals of one connection, in sequence order, disjoint and not
/// touching, all past RCV.NXT and inside the window (the protocol stage
/// keeps them there: it only inserts bytes it accepted into the window).
/// With a bound of 1 no memory is allocated beyond the first interval's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OooIntervals {
    bound: OooBound,
    intervals: Vec<Interval>,
}

impl OooIntervals {
    pub fn new(bound: OooBound) -> Self {
        OooIntervals {
            bound,
            intervals: Vec::new(),
        }
    }

    pub fn bound(&self) -> OooBound {
        self.bound
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    /// The intervals in sequence order.
    pub fn iter(&self) -> impl Iterator<Item = Interval> + '_ {
        self.intervals.iter().copied()
    }

    /// The interval nearest RCV.NXT (the one Laminar's stages 3 and 4
    /// hold as `rx-ooo-tail`/`rx-ooo-head`).
    pub fn first(&self) -> Option<Interval> {
        self.intervals.first().copied()
    }

    /// Keeps bytes [lo, hi) past `ack` (0 < lo < hi): merges them with
    /// every interval they touch, or opens a new interval, and returns the
    /// interval that holds them now. None when they touch none and the
    /// bound is reached: the caller drops them.
    ///
    /// An interval may start at or before `ack` (the peer sent its bytes
    /// again and they went in order before [`Self::take_reached`] ran):
    /// offsets are signed so that the search stays ordered.
    pub fn insert(&mut self, ack: u32, lo: u32, hi: u32) -> Option<Interval> {
        let (lo, hi) = (i64::from(lo), i64::from(hi));
        let off = |i: &Interval| i64::from(distance(ack, i.start));
        let end = |i: &Interval| off(i) + i64::from(i.len);
        // The first interval ending at or after `lo`, and the first one
        // starting after `hi`: those between touch [lo, hi).
        let first = self.intervals.partition_point(|i| end(i) < lo);
        let past = self.intervals.partition_point(|i| off(i) <= hi);
        if first >= past {
            if !self.bound.allows(self.intervals.len() + 1) {
                return None;
            }
            let new = Interval {
                start: ack.wrapping_add(lo as u32),
                len: (hi - lo) as u32,
            };
            self.intervals.insert(first, new);
            return Some(new);
        }
        let new_lo = lo.min(off(&self.intervals[first]));
        let new_hi = hi.max(end(&self.intervals[past - 1]));
        self.intervals.drain(first + 1..past);
        let merged = Interval {
            start: ack.wrapping_add(new_lo as u32),
            len: (new_hi - new_lo) as u32,
        };
        self.intervals[first] = merged;
        Some(merged)
    }

    /// The interval that already holds all of bytes [lo, hi) past `ack`,
    /// if one does (a duplicate: RFC 2883's D-SACK reports it).
    pub fn holding(&self, ack: u32, lo: u32, hi: u32) -> Option<Interval> {
        let (lo, hi) = (i64::from(lo), i64::from(hi));
        let off = |i: &Interval| i64::from(distance(ack, i.start));
        let end = |i: &Interval| off(i) + i64::from(i.len);
        let at = self.intervals.partition_point(|i| end(i) < hi);
        let i = self.intervals.get(at)?;
        (off(i) <= lo && hi <= end(i)).then_some(*i)
    }

    /// RCV.NXT reached `ack`: removes every interval that now starts at or
    /// before it and returns how many bytes past `ack` they make readable
    /// (the hole before them filled; thesis section 5.3.1.5's merge).
    pub fn take_reached(&mut self, ack: u32) -> u32 {
        let mut next = ack;
        let mut reached = 0;
        for i in &self.intervals {
            if distance(next, i.start) > 0 {
                break;
            }
            let end = i.start.wrapping_add(i.len);
            if distance(next, end) > 0 {
                next = end;
            }
            reached += 1;
        }
        self.intervals.drain(..reached);
        next.wrapping_sub(ack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spans(s: &OooIntervals, ack: u32) -> Vec<(u32, u32)> {
        s.iter()
            .map(|i| {
                let lo = i.start.wrapping_sub(ack);
                (lo, lo + i.len)
            })
            .collect()
    }

    #[test]
    fn bounds_parse_and_print() {
        assert_eq!("0".parse(), Ok(OooBound::Intervals(0)));
        assert_eq!("2".parse(), Ok(OooBound::Intervals(2)));
        assert_eq!("unbounded".parse(), Ok(OooBound::Unbounded));
        assert_eq!("max".parse(), Ok(OooBound::Unbounded));
        assert!("-1".parse::<OooBound>().is_err());
        assert!("lots"
            .parse::<OooBound>()
            .unwrap_err()
            .to_string()
            .contains("'lots'"));
        assert_eq!(OooBound::Unbounded.to_string(), "unbounded");
        assert_eq!(OooBound::THESIS, OooBound::Intervals(1));
    }

    #[test]
    fn zero_intervals_keep_nothing() {
        let mut s = OooIntervals::new(OooBound::Intervals(0));
        assert!(s.insert(100, 10, 20).is_none());
        assert!(s.is_empty());
    }

    #[test]
    fn one_interval_extends_or_refuses() {
        let mut s = OooIntervals::new(OooBound::Intervals(1));
        assert!(s.insert(100, 10, 20).is_some());
        // Touching at either end extends it.
        assert!(s.insert(100, 20, 30).is_some());
        assert!(s.insert(100, 5, 10).is_some());
        assert_eq!(spans(&s, 100), [(5, 30)]);
        assert!(s.insert(100, 40, 50).is_none());
        assert_eq!(spans(&s, 100), [(5, 30)]);
    }

    #[test]
    fn a_segment_bridging_intervals_merges_them() {
        let mut s = OooIntervals::new(OooBound::Intervals(3));
        assert!(s.insert(0, 10, 20).is_some());
        assert!(s.insert(0, 40, 50).is_some());
        assert!(s.insert(0, 70, 80).is_some());
        assert!(
            s.insert(0, 90, 95).is_none(),
            "a fourth interval exceeds the bound"
        );
        assert!(s.insert(0, 15, 45).is_some());
        assert_eq!(spans(&s, 0), [(10, 50), (70, 80)]);
        assert!(s.insert(0, 90, 95).is_some());
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn reaching_intervals_makes_them_readable() {
        let mut s = OooIntervals::new(OooBound::Unbounded);
        s.insert(1000, 100, 200);
        s.insert(1000, 200 + 1, 300);
        // RCV.NXT moved to 1150, inside the first interval.
        assert_eq!(s.take_reached(1150), 50);
        assert_eq!(spans(&s, 1200), [(1, 100)]);
        // RCV.NXT past an interval's end takes it without adding bytes.
        assert_eq!(s.take_reached(1400), 0);
        assert!(s.is_empty());
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut s = OooIntervals::new(OooBound::Intervals(2));
        let ack = u32::MAX - 50;
        assert!(s.insert(ack, 40, 100).is_some());
        assert!(s.insert(ack, 120, 130).is_some());
        assert_eq!(spans(&s, ack), [(40, 100), (120, 130)]);
        assert_eq!(s.take_reached(ack.wrapping_add(40)), 60);
    }

    /// Through the protocol stage: with holes at 0..100 and 200..300 and
    /// segments 100..200 and 300..400 ahead of them, none drops all three
    /// out-of-order ones, one interval drops the second, two keep both
    /// and make everything readable as the holes fill.
    #[test]
    fn the_protocol_stage_keeps_as_many_intervals_as_its_bound() {
        use crate::protocol::{rx, Refusal, RxSummary};
        use crate::segment::Flags;
        use crate::state::ProtoState;
        let seg = |seq: u32| RxSummary {
            seq,
            ack: 0,
            flags: Flags(0),
            window: 0,
            len: 100,
            ts_val: None,
            sack: Default::default(),
        };
        let readable = |bound: OooBound| {
            let mut s = ProtoState {
                ack: 1000,
                rx_avail: 10_000,
                ooo: OooIntervals::new(bound),
                ..ProtoState::default()
            };
            let mut refused = 0;
            let mut read = Vec::new();
            for seq in [1100, 1300, 1000, 1200] {
                let o = rx(&mut s, &seg(seq));
                refused += usize::from(o.refused == Some(Refusal::OutsideInterval));
                read.push(o.readable);
            }
            (refused, read)
        };
        assert_eq!(readable(OooBound::Intervals(0)), (3, vec![0, 0, 100, 0]));
        assert_eq!(readable(OooBound::Intervals(1)), (1, vec![0, 0, 200, 100]));
        assert_eq!(readable(OooBound::Intervals(2)), (0, vec![0, 0, 200, 200]));
        assert_eq!(readable(OooBound::Unbounded), (0, vec![0, 0, 200, 200]));
    }

    /// A reference reassembler: one flag per byte of the window.
    struct Reference {
        got: Vec<bool>,
        next: usize,
    }

    impl Reference {
        fn receive(&mut self, lo: usize, hi: usize) {
            self.got[lo..hi].iter_mut().for_each(|b| *b = true);
            while self.next < self.got.len() && self.got[self.next] {
                self.next += 1;
            }
        }

        /// Runs of received bytes past the readable prefix.
        fn runs(&self) -> Vec<(u32, u32)> {
            let mut out = Vec::new();
            let mut i = self.next;
            while i < self.got.len() {
                if self.got[i] {
                    let lo = i;
                    while i < self.got.len() && self.got[i] {
                        i += 1;
                    }
                    out.push((lo as u32, i as u32));
                } else {
                    i += 1;
                }
            }
            out
        }
    }

    fn bound_strategy() -> impl Strategy<Value = OooBound> {
        prop_oneof![
            (0u16..4).prop_map(OooBound::Intervals),
            Just(OooBound::Unbounded)
        ]
    }

    proptest! {
        /// Through the protocol stage with every bound: segments of a
        /// stream in any order, duplicated and lost, are placed where they
        /// belong (every readable byte is the stream's, every byte kept in
        /// an interval too), an unbounded receiver makes readable exactly
        /// the prefix that arrived, and go-back-N from RCV.NXT completes
        /// the stream.
        #[test]
        fn the_protocol_stage_places_the_stream_with_any_bound(
            bound in bound_strategy(),
            len in 1usize..3000,
            cuts in proptest::collection::vec(1u32..500, 1..30),
            order in proptest::collection::vec(any::<prop::sample::Index>(), 0..60),
        ) {
            use crate::protocol::{rx, RxSummary};
            use crate::segment::Flags;
            use crate::state::ProtoState;
            let stream: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
            let segs = crate::protocol::tests::cut_into_segments(len, &cuts);
            let base = u32::MAX - 1000;
            let mut s = ProtoState {
                ack: base,
                rx_avail: len as u32,
                ooo: OooIntervals::new(bound),
                ..ProtoState::default()
            };
            let mut buf = vec![0u8; len];
            let mut reference = Reference { got: vec![false; len], next: 0 };
            let mut deliver = |s: &mut ProtoState, (off, n): (u32, u32), reference: &mut Reference| {
                reference.receive(off as usize, (off + n) as usize);
                let o = rx(s, &RxSummary { seq: base.wrapping_add(off), ack: 0, flags: Flags(0), window: 0, len: n, ts_val: None, sack: Default::default() });
                if let Some(p) = o.place {
                    let src = &stream[(off + p.skip) as usize..(off + p.skip + p.len) as usize];
                    buf[p.pos as usize..(p.pos + p.len) as usize].copy_from_slice(src);
                }
                let readable = s.ack.wrapping_sub(base) as usize;
                prop_assert_eq!(&buf[..readable], &stream[..readable]);
                for i in s.ooo.iter() {
                    let lo = i.start.wrapping_sub(base) as usize;
                    let hi = lo + i.len as usize;
                    prop_assert_eq!(&buf[lo..hi], &stream[lo..hi]);
                }
                prop_assert!(readable <= reference.next);
                if bound == OooBound::Unbounded {
                    prop_assert_eq!(readable, reference.next);
                }
                Ok(())
            };
            for i in &order {
                deliver(&mut s, segs[i.index(segs.len())], &mut reference)?;
            }
            // Go-back-N from RCV.NXT, in order: one round completes it.
            let from = s.ack.wrapping_sub(base);
            for &(off, n) in segs.iter().filter(|&&(o, n)| o + n > from) {
                deliver(&mut s, (off, n), &mut reference)?;
            }
            prop_assert_eq!(s.ack.wrapping_sub(base) as usize, len);
            prop_assert!(s.ooo.is_empty());
            prop_assert_eq!(&buf, &stream);
        }
    }

    proptest! {
        /// Segments of a window of `len` bytes in any order, duplicated
        /// and lost, through a receiver with each bound, against the
        /// reference: an unbounded receiver is the reference exactly; a
        /// bounded one never has more intervals than its bound, keeps only
        /// bytes that arrived, and never reads further than the reference.
        #[test]
        fn intervals_match_a_reference_reassembler(
            bound in bound_strategy(),
            base in any::<u32>(),
            len in 1u32..3000,
            segs in proptest::collection::vec((0u32..3000, 1u32..400), 1..60),
        ) {
            let mut s = OooIntervals::new(bound);
            let mut ack = 0u32;
            let mut reference = Reference { got: vec![false; len as usize], next: 0 };
            for (lo, n) in segs {
                let lo = lo % len;
                let hi = (lo + n).min(len);
                reference.receive(lo as usize, hi as usize);
                if lo <= ack {
                    // In order: RCV.NXT moves, then reaches intervals.
                    ack = ack.max(hi);
                    ack += s.take_reached(base.wrapping_add(ack));
                } else {
                    s.insert(base.wrapping_add(ack), lo - ack, hi - ack);
                }
                let mine: Vec<(u32, u32)> = spans(&s, base.wrapping_add(ack))
                    .into_iter()
                    .map(|(a, b)| (a + ack, b + ack))
                    .collect();
                prop_assert!(bound.allows(mine.len()));
                for w in mine.windows(2) {
                    prop_assert!(w[0].1 < w[1].0, "intervals touch or overlap: {:?}", mine);
                }
                for &(a, b) in &mine {
                    prop_assert!(ack < a && b <= len);
                    prop_assert!(reference.got[a as usize..b as usize].iter().all(|&g| g));
                }
                prop_assert!(ack as usize <= reference.next);
                if bound == OooBound::Unbounded {
                    prop_assert_eq!(ack as usize, reference.next);
                    prop_assert_eq!(mine, reference.runs());
                }
            }
        }
    }
}
