//! The Laminar receiver's bounded store: out-of-order data past what the
//! program's one interval holds (thesis section 5.3.1.3), kept by the
//! control plane as further intervals ([`crate::ooo`]), and the SACK
//! blocks the program's ACKs carry out.
//!
//! Stage 4 drops an out-of-order segment that neither overlaps nor touches
//! the program's interval, and its sender must send it again: one
//! interval costs a loss-based sender a second retransmission for every
//! hole past the first. The thesis names the way out: track a few more
//! intervals for the large flows that need them (section 6, "Robust OOO
//! handling"; Table 5.3 finds 1-2 more enough). The program stays as the
//! thesis built it; what it drops is the control plane's, as an
//! out-of-window segment is (section 5.3.1.2):
//!
//! - Segments past what the host knows of `rx-next-seq` are copied aside
//!   as they go in ([`RxStore::offer`]): only the pipeline knows what it
//!   took.
//! - Once the pipeline ran to idle, the registers say it
//!   ([`RxStore::settle`] with an [`RxView`]): bytes past `rx-next-seq`,
//!   inside the window and outside the program's interval were dropped.
//!   They are placed in the receive buffer at their position, as an
//!   interval of the store, while the bound allows.
//! - When `rx-next-seq` reaches an interval of the store, its bytes are
//!   read back and injected as a segment. In order now, the program takes
//!   it as any other: it advances the window, notifies libTOE and
//!   acknowledges.
//! - Every ACK the program builds leaves with the blocks the receiver
//!   holds, newest first (RFC 2018 section 4), the program's interval
//!   among them, after a D-SACK block for a duplicate (RFC 2883).
//!
//! The bound counts the program's interval: `ooo_bound` 1 is the thesis's
//! receiver exactly (nothing is stored; the ACKs carry the program's block
//! and D-SACKs), N keeps N - 1 intervals here.

use order::seq::distance;

use crate::ooo::{OooBound, OooIntervals};
use crate::sack::{Block, ReportedBlocks, SackBlocks};

/// The program's receive state as the control plane reads it from the
/// registers once the pipeline is idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RxView {
    /// `rx-next-seq`.
    pub next: u32,
    /// `rx-avail`: the window past `next` (0 while a rollback is pending).
    pub window: u32,
    /// The program's interval [next + head, next + tail), if it holds one.
    pub interval: Option<Block>,
}

/// What settling the store asks of the endpoint.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Settled {
    /// Bytes to place in the receive buffer at their sequence number.
    pub place: Vec<(u32, Vec<u8>)>,
    /// Bytes of the buffer to inject into the program, now in order.
    pub reinject: Option<Block>,
    /// Segments not kept because the bound was reached.
    pub refused: u64,
}

/// One connection's store.
#[derive(Debug)]
pub(super) struct RxStore {
    /// Intervals kept past the program's, their bytes in the buffer.
    held: OooIntervals,
    /// Whether the bound leaves any interval to the store.
    keeps: bool,
    reported: ReportedBlocks,
    /// Out-of-order segments given to the program since the last settle.
    pending: Vec<(u32, Vec<u8>)>,
    /// `rx-next-seq` as stage 1 advances it, followed within a batch so
    /// that in-order segments are not copied (exact after each settle).
    rcv_high: u32,
    /// A duplicate for the next ACK to report.
    dsack: Option<Block>,
}

impl RxStore {
    /// The store of a connection whose first expected sequence number is
    /// `first`, under the endpoint's bound.
    pub fn new(bound: OooBound, first: u32) -> Self {
        let (held, keeps) = match bound {
            OooBound::Intervals(n) => (OooBound::Intervals(n.saturating_sub(1)), n > 1),
            OooBound::Unbounded => (OooBound::Unbounded, true),
        };
        RxStore {
            held: OooIntervals::new(held),
            keeps,
            reported: ReportedBlocks::default(),
            pending: Vec::new(),
            rcv_high: first,
            dsack: None,
        }
    }

    /// A segment going into the program. `ready` is what the program last
    /// said was in order (exact: `rx-next-seq` only grows).
    pub fn offer(&mut self, ready: u32, seq: u32, payload: &[u8]) {
        if payload.is_empty() {
            return;
        }
        let end = seq.wrapping_add(payload.len() as u32);
        let off = |s: u32| distance(ready, s);
        let stored_already = off(seq) > 0
            && self
                .held
                .holding(ready, off(seq) as u32, off(end) as u32)
                .is_some();
        if off(end) <= 0 || stored_already {
            self.dsack = Some((seq, end));
            return;
        }
        if distance(self.rcv_high, seq) > 0 {
            if self.keeps {
                self.pending.push((seq, payload.to_vec()));
            }
        } else if distance(self.rcv_high, end) > 0 {
            self.rcv_high = end;
        }
    }

    /// Whether a settle has anything to do.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.held.is_empty()
    }

    /// The pipeline is idle and `v` is its state: keeps what it dropped,
    /// and hands back what is in order now. The program's ACKs of this
    /// run that stop below the bytes handed back must not leave: the
    /// injected segment's ACK follows at once, and a sender takes a
    /// cumulative ACK that stops at a SACKed block for reneging (Linux's
    /// `tcp_check_sack_reneging` then times out, RFC 2018 section 8). The
    /// endpoint sends a connection's pure ACKs only at the run's last
    /// acknowledged sequence number.
    pub fn settle(&mut self, v: RxView) -> Settled {
        let mut out = Settled::default();
        self.rcv_high = v.next;
        for (seq, data) in std::mem::take(&mut self.pending) {
            self.keep(v, seq, &data, &mut out);
        }
        let reached = self.held.take_reached(v.next);
        if reached > 0 {
            out.reinject = Some((v.next, v.next.wrapping_add(reached)));
        }
        self.reported.trim(v.next);
        out
    }

    /// Keeps the bytes of one segment the program did not take.
    fn keep(&mut self, v: RxView, seq: u32, data: &[u8], out: &mut Settled) {
        // Offsets from rx-next-seq, clipped to the window. A segment that
        // starts in order now was the program's to take.
        let start = distance(v.next, seq);
        if start <= 0 {
            return;
        }
        let lo = start as u32;
        let hi = (lo + data.len() as u32).min(v.window);
        if hi <= lo {
            return;
        }
        let program = v.interval.map(|(a, b)| {
            (
                distance(v.next, a).max(0) as u32,
                distance(v.next, b).max(0) as u32,
            )
        });
        if let (Some(block), Some((a, b))) = (v.interval, program) {
            if lo < b && a < hi {
                self.reported.record(block);
            }
        }
        let pieces = match program {
            Some((a, b)) => [(lo, hi.min(a)), (lo.max(b), hi)],
            None => [(lo, hi), (0, 0)],
        };
        for (p_lo, p_hi) in pieces {
            if p_lo >= p_hi {
                continue;
            }
            let Some(i) = self.held.insert(v.next, p_lo, p_hi) else {
                out.refused += 1;
                continue;
            };
            self.reported.record((i.start, i.start.wrapping_add(i.len)));
            let from = (p_lo - lo) as usize;
            let piece = data[from..from + (p_hi - p_lo) as usize].to_vec();
            out.place.push((v.next.wrapping_add(p_lo), piece));
        }
    }

    /// The SACK option for an ACK of `ack` the program built with its
    /// interval `program`: a pending D-SACK first, then the held blocks
    /// newest first, the program's among them.
    pub fn sack(&mut self, ack: u32, program: Option<Block>) -> SackBlocks {
        let dsack = self.dsack.take();
        if !self.keeps {
            let mut out = SackBlocks::from(dsack);
            if let Some(b) = program.filter(|&b| Some(b) != dsack) {
                out.push(b);
            }
            return out;
        }
        // A block must start past the ACK: a sender discards one that
        // does not (Linux's `tcp_is_sackblock_valid`), and takes a
        // cumulative ACK reaching a SACKed block for reneging (the store's
        // blocks are reached before the control plane injects them; the
        // endpoint holds such ACKs back, [`RxStore::settle`]).
        let mut reported = self.reported;
        reported.trim(ack);
        let mut out = SackBlocks::from(dsack);
        let past_ack = |b: &Block| distance(ack, b.0) > 0;
        for &b in reported
            .option(None)
            .as_slice()
            .iter()
            .filter(|b| past_ack(b))
        {
            if Some(b) != dsack {
                out.push(b);
            }
        }
        if let Some(b) = program.filter(past_ack) {
            let covered = out
                .as_slice()
                .iter()
                .any(|&r| distance(r.0, b.0) >= 0 && distance(b.1, r.1) >= 0);
            if !covered {
                out.push(b);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEXT: u32 = 1000;

    fn view(next: u32, interval: Option<Block>) -> RxView {
        RxView {
            next,
            window: 1 << 16,
            interval,
        }
    }

    fn seg(seq: u32, len: u32) -> (u32, Vec<u8>) {
        (seq, (seq..seq + len).map(|b| b as u8).collect())
    }

    #[test]
    fn a_segment_the_program_dropped_is_kept_and_given_back_in_order() {
        let mut s = RxStore::new(OooBound::Intervals(4), NEXT);
        // Holes at 1000 and 1200: the program holds 1100..1200, drops 1300..1400.
        for (seq, data) in [seg(1100, 100), seg(1300, 100)] {
            s.offer(NEXT, seq, &data);
        }
        let out = s.settle(view(NEXT, Some((1100, 1200))));
        assert_eq!(out.place, vec![seg(1300, 100)]);
        assert_eq!(out.reinject, None);
        // The newest block first, the program's after it.
        assert_eq!(
            s.sack(NEXT, Some((1100, 1200))).as_slice(),
            &[(1300, 1400), (1100, 1200)]
        );
        // 1000 arrives, the program merges its interval: next 1200; then
        // 1200 arrives: next 1300 reaches the store.
        s.offer(NEXT, 1000, &seg(1000, 100).1);
        assert_eq!(s.settle(view(1200, None)), Settled::default());
        s.offer(1200, 1200, &seg(1200, 100).1);
        let out = s.settle(view(1300, None));
        assert_eq!(out.reinject, Some((1300, 1400)));
        assert!(out.place.is_empty());
        assert!(s.is_idle());
        // A block the ACK reaches is not reported (the sender would take
        // it for reneging; the endpoint holds such an ACK back).
        assert!(s.sack(1300, None).is_empty());
        assert!(s.sack(1400, None).is_empty());
    }

    #[test]
    fn what_the_program_took_or_the_window_refuses_is_not_kept() {
        let mut s = RxStore::new(OooBound::Intervals(4), NEXT);
        s.offer(NEXT, 1100, &seg(1100, 100).1);
        // Partly the program's interval: only the rest is kept.
        s.offer(NEXT, 1150, &seg(1150, 100).1);
        let v = RxView {
            next: NEXT,
            window: 240,
            interval: Some((1100, 1200)),
        };
        let out = s.settle(v);
        assert_eq!(out.place, vec![seg(1200, 40)]);
    }

    #[test]
    fn in_order_segments_are_not_copied_and_duplicates_are_reported() {
        let mut s = RxStore::new(OooBound::Intervals(4), NEXT);
        for seq in [1000, 1100, 1200] {
            s.offer(NEXT, seq, &seg(seq, 100).1);
        }
        assert!(s.is_idle());
        // A segment below what the program had in order: a D-SACK, once.
        s.offer(1300, 1000, &seg(1000, 100).1);
        assert_eq!(s.sack(1300, None).as_slice(), &[(1000, 1100)]);
        assert!(s.sack(1300, None).is_empty());
    }

    #[test]
    fn the_bound_counts_the_program_interval() {
        let mut thesis = RxStore::new(OooBound::THESIS, NEXT);
        thesis.offer(NEXT, 1300, &seg(1300, 100).1);
        assert!(thesis.is_idle());
        assert_eq!(
            thesis.sack(NEXT, Some((1100, 1200))).as_slice(),
            &[(1100, 1200)]
        );
        let mut two = RxStore::new(OooBound::Intervals(2), NEXT);
        for seq in [1100, 1300, 1500] {
            two.offer(NEXT, seq, &seg(seq, 100).1);
        }
        let out = two.settle(view(NEXT, Some((1100, 1200))));
        assert_eq!(out.place, vec![seg(1300, 100)]);
        assert_eq!(out.refused, 1);
    }

    /// The case a Linux peer found: bytes the store held were sent again
    /// and went in order, with a segment past them the program dropped,
    /// before the store settled (an interval then started below
    /// `rx-next-seq`; the search for where to keep the segment indexed
    /// past its end).
    #[test]
    fn held_bytes_sent_again_in_order_before_a_settle() {
        let mut s = RxStore::new(OooBound::Unbounded, NEXT);
        s.offer(NEXT, 1300, &seg(1300, 100).1);
        s.offer(NEXT, 1800, &seg(1800, 100).1);
        let out = s.settle(view(NEXT, None));
        assert_eq!(out.place, vec![seg(1300, 100), seg(1800, 100)]);
        // 1000..1450 in order, 1300..1400 among it; 1500 dropped.
        s.offer(NEXT, 1500, &seg(1500, 100).1);
        let out = s.settle(view(1450, None));
        assert_eq!(out.place, vec![seg(1500, 100)]);
        assert_eq!(out.reinject, None);
        let held: Vec<_> = s.held.iter().map(|i| (i.start, i.len)).collect();
        assert_eq!(held, [(1500, 100), (1800, 100)]);
        let out = s.settle(view(1500, None));
        assert_eq!(out.reinject, Some((1500, 1600)));
        let out = s.settle(view(1800, None));
        assert_eq!(out.reinject, Some((1800, 1900)));
        assert!(s.is_idle());
    }

    /// The store beside Laminar's real program (in the emulator), as the
    /// endpoint runs them: a sender that never sends SACKed bytes again
    /// always completes the stream, and every byte arrives as sent.
    mod with_the_program {
        use super::*;
        use crate::laminar::test_spec;
        use crate::laminar::{network_segment, LaminarEngine};
        use proptest::prelude::*;
        use rmt::laminar::segment::TcpSegment;

        /// The test connection's first sequence number and buffer.
        const FIRST: u32 = 1000;
        const BUF: u32 = 4096;
        const SEG: u32 = 100;
        const SEGS: u32 = 40;
        const CONN: u16 = 1;

        /// A segment from the test connection's peer.
        fn from_peer(seq: u32, data: &[u8]) -> TcpSegment {
            let s = test_spec();
            let ends = (s.remote_ip, s.local_ip);
            network_segment(ends, (s.remote_port, s.local_port), seq, None, data)
        }

        fn byte(seq: u32) -> u8 {
            (seq.wrapping_mul(7) >> 2) as u8
        }

        fn segment(seq: u32, len: u32) -> TcpSegment {
            let data: Vec<u8> = (seq..seq + len).map(byte).collect();
            from_peer(seq, &data)
        }

        /// The receiver: the program, the store, the buffer.
        struct Receiver {
            engine: LaminarEngine,
            store: RxStore,
            buf: Vec<u8>,
        }

        impl Receiver {
            fn new(bound: OooBound) -> Self {
                let mut engine = LaminarEngine::new(4).unwrap();
                let spec = test_spec();
                assert_eq!((spec.rx_next_seq, spec.rx_buffer_size), (FIRST, BUF));
                engine.install(CONN, &spec).unwrap();
                Receiver {
                    engine,
                    store: RxStore::new(bound, FIRST),
                    buf: vec![0; BUF as usize],
                }
            }

            fn put(&mut self, seq: u32, data: &[u8]) {
                for (i, &b) in data.iter().enumerate() {
                    self.buf[((seq - FIRST) as usize + i) % BUF as usize] = b;
                }
            }

            fn ready(&self) -> u32 {
                self.engine.rx_next_seq(CONN).unwrap()
            }

            /// Everything up to `end` is in order, every byte as sent,
            /// and the store holds nothing.
            fn assert_whole(&self, end: u32) {
                assert_eq!(self.ready(), end);
                for q in FIRST..end {
                    assert_eq!(self.buf[(q - FIRST) as usize], byte(q), "byte {q}");
                }
                assert!(self.store.is_idle());
            }

            /// One segment in; the ACKs that leave, with their blocks.
            fn receive(&mut self, s: &TcpSegment) -> Vec<(u32, SackBlocks)> {
                self.receive_batch(std::slice::from_ref(s))
            }

            /// A receive batch in, as the endpoint takes one: every
            /// segment offered against what was in order before it, then
            /// the pipeline run to idle and the store settled.
            fn receive_batch(&mut self, batch: &[TcpSegment]) -> Vec<(u32, SackBlocks)> {
                let ready = self.ready();
                for s in batch {
                    self.store.offer(ready, s.seq, &s.payload);
                    self.engine.receive(0, s).unwrap();
                }
                let mut acks = Vec::new();
                loop {
                    let out = self.engine.run_to_idle().unwrap();
                    for w in out.rx_data {
                        let seq = FIRST + w.addr as u32;
                        self.put(seq, &w.payload);
                    }
                    let view = RxView {
                        next: self.ready(),
                        window: self.engine.rx_window(CONN).unwrap(),
                        interval: self.engine.rx_ooo_interval(CONN).unwrap(),
                    };
                    let settled = self.store.settle(view);
                    for (seq, data) in &settled.place {
                        self.put(*seq, data);
                    }
                    acks.extend(out.segments);
                    let Some((lo, hi)) = settled.reinject else {
                        break;
                    };
                    let data: Vec<u8> = (lo..hi)
                        .map(|q| self.buf[((q - FIRST) % BUF) as usize])
                        .collect();
                    let again = from_peer(lo, &data);
                    self.engine.receive(0, &again).unwrap();
                }
                // As the endpoint sends them: a later ACK supersedes one.
                let last = acks.last().map_or(0, |a: &TcpSegment| a.ack);
                acks.into_iter()
                    .filter(|a| a.ack == last)
                    .map(|a| (a.ack, self.store.sack(a.ack, a.sack)))
                    .collect()
            }
        }

        /// What the sender knows: the cumulative ACK and the SACKed bytes.
        #[derive(Default)]
        struct Sender {
            una: u32,
            sacked: Vec<(u32, u32)>,
        }

        impl Sender {
            /// Takes the ACKs in order. A cumulative ACK that stops at a
            /// byte SACKed before is reneging to the sender (Linux's
            /// `tcp_check_sack_reneging` times out on it).
            fn take(&mut self, acks: Vec<(u32, SackBlocks)>) {
                for (ack, blocks) in acks {
                    assert!(
                        !self.sacked(ack, ack + 1),
                        "ACK {ack} stops at a SACKed byte ({:?})",
                        self.sacked
                    );
                    self.una = self.una.max(ack);
                    for &(lo, hi) in blocks.as_slice() {
                        prop_assert_eq_blocks(lo, hi, ack);
                        if lo > ack {
                            self.sacked.push((lo, hi));
                        }
                    }
                }
            }

            fn sacked(&self, lo: u32, hi: u32) -> bool {
                self.sacked.iter().any(|&(a, b)| a <= lo && hi <= b)
            }
        }

        /// A block is either a D-SACK below the ACK or lies past it.
        fn prop_assert_eq_blocks(lo: u32, hi: u32, ack: u32) {
            assert!(lo < hi, "an empty block ({lo}, {hi})");
            assert!(
                hi <= ack || lo > ack,
                "block ({lo}, {hi}) straddles ACK {ack}"
            );
            assert!(
                hi <= FIRST + SEG * SEGS,
                "block ({lo}, {hi}) past what was sent"
            );
        }

        fn deliver(order: &[u32], bound: OooBound) {
            let mut rx = Receiver::new(bound);
            let mut tx = Sender {
                una: FIRST,
                ..Sender::default()
            };
            for &i in order {
                let acks = rx.receive(&segment(FIRST + i * SEG, SEG));
                tx.take(acks);
            }
            // Recovery: the lowest segment neither acknowledged nor
            // SACKed goes again, until all is acknowledged.
            let end = FIRST + SEG * SEGS;
            for _ in 0..4 * SEGS {
                if tx.una >= end {
                    break;
                }
                let Some(lo) = (0..SEGS)
                    .map(|i| FIRST + i * SEG)
                    .find(|&lo| lo + SEG > tx.una && !tx.sacked(lo.max(tx.una), lo + SEG))
                else {
                    panic!(
                        "stalled at {}: everything after it is SACKed ({:?})",
                        tx.una, tx.sacked
                    );
                };
                let acks = rx.receive(&segment(lo, SEG));
                tx.take(acks);
            }
            assert_eq!(tx.una, end, "the stream did not complete");
            rx.assert_whole(end);
        }

        proptest! {
            #[test]
            fn a_sender_honouring_every_block_completes_the_stream(
                order in proptest::collection::vec(0..SEGS, 0..80),
                bound in prop_oneof![Just(OooBound::THESIS), Just(OooBound::Intervals(3)), Just(OooBound::Unbounded)],
            ) {
                deliver(&order, bound);
            }
        }

        /// A sender that goes back to its cumulative ACK and sends again,
        /// SACKed or not (as after a timeout), in batches, some segments
        /// lost again (`lost` cycles; a batch's first always arrives):
        /// bytes the store holds go into the program in order before the
        /// store next settles, with segments past them it drops.
        fn deliver_going_back(order: &[u32], batches: &[usize], lost: &[bool], bound: OooBound) {
            let mut rx = Receiver::new(bound);
            let mut tx = Sender {
                una: FIRST,
                ..Sender::default()
            };
            let mut sizes = batches.iter().copied().cycle();
            let mut lost = lost.iter().copied().cycle();
            for chunk in order.chunks(sizes.next().unwrap_or(1)) {
                let segs: Vec<_> = chunk
                    .iter()
                    .map(|&i| segment(FIRST + i * SEG, SEG))
                    .collect();
                tx.take(rx.receive_batch(&segs));
            }
            let end = FIRST + SEG * SEGS;
            while tx.una < end {
                let from = (tx.una - FIRST) / SEG;
                let segs: Vec<_> = (from..SEGS)
                    .take(sizes.next().unwrap_or(1))
                    .filter(|&i| i == from || !lost.next().unwrap_or(false))
                    .map(|i| segment(FIRST + i * SEG, SEG))
                    .collect();
                let before = tx.una;
                tx.take(rx.receive_batch(&segs));
                assert!(tx.una > before, "no progress at {before}");
            }
            rx.assert_whole(end);
        }

        proptest! {
            #[test]
            fn a_sender_going_back_over_held_bytes_completes_the_stream(
                order in proptest::collection::vec(0..SEGS, 0..80),
                batches in proptest::collection::vec(1usize..8, 1..8),
                lost in proptest::collection::vec(any::<bool>(), 1..16),
                bound in prop_oneof![Just(OooBound::THESIS), Just(OooBound::Intervals(3)), Just(OooBound::Unbounded)],
            ) {
                deliver_going_back(&order, &batches, &lost, bound);
            }
        }

        #[test]
        fn three_holes_are_kept_and_filled() {
            let order: Vec<u32> = (0..SEGS).filter(|i| ![0, 10, 20].contains(i)).collect();
            deliver(&order, OooBound::Unbounded);
        }
    }
}
