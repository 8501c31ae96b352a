//! The protocol stage (thesis section 4.3.1, Fig. 4.6 *Win*; TAS's fast
//! path): the only stage that changes a connection's sequence state, and
//! so the only one that must see a connection's segments one at a time and
//! in arrival order. Everything here is a pure function of a
//! [`ProtoState`] and a header summary; the payload itself is copied by a
//! later stage to where this one placed it.
//!
//! - Receive: in-order payload is accepted up to the receive window and
//!   advances `ack`; out-of-order intervals are kept ([`crate::ooo`]: one
//!   by default), their segments placed directly in the receive buffer,
//!   and merged when the hole before them fills; a segment outside the
//!   window or one the intervals cannot take is dropped and answered with
//!   an ACK for the expected byte. Every out-of-order segment is answered
//!   at once (RFC 5681 section 4.2); where SACK was negotiated the ACK
//!   carries the intervals as blocks, newest first, and a duplicate first
//!   as a D-SACK block ([`crate::sack`]; RFC 2018, RFC 2883).
//! - ACKs: acknowledged bytes leave `tx_sent`; SACK blocks go into the
//!   scoreboard ([`crate::sack`]); three duplicate ACKs or a scoreboard
//!   that says the first unacknowledged byte is lost begin a recovery
//!   episode that sends again only what was lost ([`crate::recovery`],
//!   RFC 6675; the thesis's go-back-N sent everything after it); an ACK
//!   for bytes never sent drops the segment (RFC 9293 section 3.10.7.4).
//! - Transmit: the next segment's sequence number and buffer position,
//!   within the peer's window; the FIN after the last byte.

use order::seq::distance;

use crate::sack::{Block, SackBlocks, SackUpdate};
use crate::segment::Flags;
use crate::state::ProtoState;

/// What the pre-processor's header summary (*Sum*) carries to this stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxSummary {
    pub seq: u32,
    pub ack: u32,
    pub flags: Flags,
    /// The peer's window, scaled to bytes.
    pub window: u32,
    /// Payload bytes.
    pub len: u32,
    pub ts_val: Option<u32>,
    /// The peer's SACK blocks (RFC 2018), as received.
    pub sack: SackBlocks,
}

/// Where payload goes: `len` bytes from payload offset `skip` to receive
/// buffer position `pos` (free-running, modulo the buffer size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub pos: u32,
    pub skip: u32,
    pub len: u32,
}

/// Why a segment (or its payload) was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// All of it was received before (a retransmission).
    Duplicate,
    /// It starts beyond the receive window.
    BeyondWindow,
    /// Out of order and not taken by the out-of-order intervals.
    OutsideInterval,
    /// It acknowledges bytes never sent.
    AckOfUnsent,
}

/// The stage's verdict on one received segment: what the post-processor,
/// the payload copy and the context queue do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxOutcome {
    pub place: Option<Placement>,
    /// Bytes that became readable in order (merged interval included).
    pub readable: u32,
    /// Transmitted bytes this ACK acknowledged (the FIN not counted).
    pub acked: u32,
    /// A recovery episode began (three duplicate ACKs, or SACK blocks
    /// saying SND.UNA is lost): the segment at SND.UNA is due again.
    pub fast_retransmit: bool,
    /// The peer's FIN arrived in order.
    pub fin: bool,
    /// Answer with an ACK (every data segment, every refused one).
    pub send_ack: bool,
    pub refused: Option<Refusal>,
    /// The segment repeated bytes already received: its ACK reports them
    /// first, as a D-SACK block (RFC 2883 section 4).
    pub dsack: Option<Block>,
    /// What the peer's SACK blocks told the sender.
    pub sack: SackUpdate,
    /// Retransmissions were found lost (sent again without a timeout).
    pub lost_retransmit: bool,
}

/// Processes one received segment of an established connection.
pub fn rx(s: &mut ProtoState, seg: &RxSummary) -> RxOutcome {
    let mut out = RxOutcome::default();
    if seg.flags.has(Flags::ACK) {
        if let Err(r) = ack(s, seg, &mut out) {
            out.refused = Some(r);
            out.send_ack = true;
            return out;
        }
    }
    let fin = seg.flags.has(Flags::FIN);
    if seg.len > 0 || fin {
        payload(s, seg, fin, &mut out);
    }
    out
}

/// ACK processing: acknowledged bytes, SACK blocks, duplicate ACKs,
/// window; loss recovery ([`crate::recovery`]) hears of each.
fn ack(s: &mut ProtoState, seg: &RxSummary, out: &mut RxOutcome) -> Result<(), Refusal> {
    let d = distance(s.sent().una, seg.ack);
    let mut duplicate = false;
    if d > 0 {
        if distance(seg.ack, s.tx_high) < 0 {
            return Err(Refusal::AckOfUnsent);
        }
        // SND.NXT is SND.MAX (nothing is sent twice by rewinding it), so
        // an ACK up to SND.MAX acknowledges at most what is in flight.
        let d = (d as u32).min(s.tx_sent);
        // The FIN takes the last sequence number (RFC 9293 section 3.4).
        let fin_acked = s.fin_sent && d == s.tx_sent;
        out.acked += d - u32::from(fin_acked);
        s.tx_sent -= d;
        s.remote_win = seg.window;
    } else if d == 0 {
        // RFC 5681 section 2: a duplicate ACK carries no data, does not
        // change the window and arrives while data is outstanding.
        duplicate = seg.len == 0 && s.tx_sent > 0 && seg.window == s.remote_win;
        if !duplicate {
            s.remote_win = seg.window;
        }
    }
    let e = s.loss.on_ack(s.sent(), d > 0, duplicate, &seg.sack);
    out.fast_retransmit = e.began;
    out.sack = e.sack;
    out.lost_retransmit = e.lost_retransmit;
    Ok(())
}

/// The control plane's retransmission timeout (thesis Fig. 4.4 *Reset*):
/// every byte not acknowledged is lost and is sent again, in order, as
/// the window allows ([`crate::recovery`]). Returns the bytes in flight.
pub fn timeout(s: &mut ProtoState) -> u32 {
    s.loss.enter(s.sent(), true);
    s.tx_sent
}

fn payload(s: &mut ProtoState, seg: &RxSummary, fin: bool, out: &mut RxOutcome) {
    out.send_ack = true;
    let off = i64::from(distance(s.ack, seg.seq));
    let end = off + i64::from(seg.len);
    if end <= 0 && !(fin && end == 0 && !s.fin_received) {
        out.refused = Some(Refusal::Duplicate);
        if seg.len > 0 {
            out.dsack = Some((seg.seq, seg.seq.wrapping_add(seg.len)));
        }
        return;
    }
    if seg.len > 0 && off >= i64::from(s.rx_avail) {
        out.refused = Some(Refusal::BeyondWindow);
        return;
    }
    let start = off.max(0);
    let stop = end.min(i64::from(s.rx_avail));
    let (skip, n) = ((start - off) as u32, (stop - start).max(0) as u32);
    if start == 0 {
        if n > 0 {
            out.place = Some(Placement {
                pos: s.rx_pos,
                skip,
                len: n,
            });
        }
        advance(s, n, out);
        merge_interval(s, out);
        if let Some(ts) = seg.ts_val {
            s.next_ts = ts;
        }
        if fin && stop == end && !s.fin_received && s.ooo.is_empty() {
            s.fin_received = true;
            s.ack = s.ack.wrapping_add(1);
            out.fin = true;
        }
    } else if n > 0 {
        out_of_order(s, start as u32, n, skip, out);
    }
}

fn advance(s: &mut ProtoState, n: u32, out: &mut RxOutcome) {
    s.ack = s.ack.wrapping_add(n);
    s.rx_pos = s.rx_pos.wrapping_add(n);
    s.rx_avail -= n;
    out.readable += n;
    s.sack_reported.trim(s.ack);
}

/// The hole before an interval is filled: its bytes become readable.
fn merge_interval(s: &mut ProtoState, out: &mut RxOutcome) {
    let reached = s.ooo.take_reached(s.ack);
    if reached > 0 {
        advance(s, reached, out);
    }
}

/// Bytes [start, start + n) past `ack`: kept in an interval (new or
/// extended, as [`crate::ooo`]'s bound allows), which becomes the newest
/// SACK block, or dropped. Bytes an interval holds already are a
/// duplicate, reported as a D-SACK block (RFC 2883 section 4).
fn out_of_order(s: &mut ProtoState, start: u32, n: u32, skip: u32, out: &mut RxOutcome) {
    let lo = s.ack.wrapping_add(start);
    if s.ooo.holding(s.ack, start, start + n).is_some() {
        out.refused = Some(Refusal::Duplicate);
        out.dsack = Some((lo, lo.wrapping_add(n)));
        return;
    }
    let Some(held) = s.ooo.insert(s.ack, start, start + n) else {
        out.refused = Some(Refusal::OutsideInterval);
        return;
    };
    s.sack_reported
        .record((held.start, held.start.wrapping_add(held.len)));
    out.place = Some(Placement {
        pos: s.rx_pos.wrapping_add(start),
        skip,
        len: n,
    });
}

/// The next segment to transmit: sequence number, transmit buffer
/// position and length (thesis Fig. 4.5 *Seq*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxGrant {
    pub seq: u32,
    pub pos: u32,
    pub len: u32,
    /// A FIN goes with it (after its bytes).
    pub fin: bool,
}

/// Bytes [a, b) again (the FIN with them if b passes the data).
fn again(s: &ProtoState, a: u32, b: u32) -> TxGrant {
    let data_end = s.seq.wrapping_sub(u32::from(s.fin_sent));
    let data_stop = if distance(data_end, b) > 0 {
        data_end
    } else {
        b
    };
    TxGrant {
        seq: a,
        pos: s.tx_pos.wrapping_sub(distance(a, data_end) as u32),
        len: distance(a, data_stop).max(0) as u32,
        fin: s.fin_sent && distance(data_end, b) > 0,
    }
}

/// A retransmission recovery has due, else up to `mss` bytes of queued
/// data within the peer's window, or the FIN once everything queued was
/// sent; None when nothing may go.
pub fn tx(s: &mut ProtoState, mss: u32) -> Option<TxGrant> {
    s.loss.snd_mss = mss;
    let sent = s.sent();
    let new_data = s.tx_avail > 0 && s.remote_win > s.tx_sent;
    if let Some((a, b)) = s
        .loss
        .take_probe(sent, new_data)
        .or_else(|| s.loss.take_retransmission(sent))
    {
        let g = again(s, a, b);
        s.loss.on_send(g.len);
        return Some(g);
    }
    let window = s.remote_win.saturating_sub(s.tx_sent);
    let len = mss.min(s.tx_avail).min(window);
    let fin = s.fin_queued && !s.fin_sent && len == s.tx_avail;
    if len == 0 && !fin {
        return None;
    }
    let grant = TxGrant {
        seq: s.seq,
        pos: s.tx_pos,
        len,
        fin,
    };
    let used = len + u32::from(fin);
    s.seq = s.seq.wrapping_add(used);
    s.tx_sent += used;
    s.tx_pos = s.tx_pos.wrapping_add(len);
    s.tx_avail -= len;
    s.fin_sent |= fin;
    if distance(s.tx_high, s.seq) > 0 {
        s.tx_high = s.seq;
    }
    s.loss.on_send(len);
    Some(grant)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ooo::{OooBound, OooIntervals};
    use proptest::prelude::*;

    /// (offset, length) of the segments `cuts` (lengths, repeated as
    /// needed) make of a `len`-byte stream, in order.
    pub(crate) fn cut_into_segments(len: usize, cuts: &[u32]) -> Vec<(u32, u32)> {
        let mut segs = Vec::new();
        let mut at = 0u32;
        for c in cuts.iter().cycle() {
            if at as usize >= len {
                break;
            }
            let n = (*c).min(len as u32 - at);
            segs.push((at, n));
            at += n;
        }
        segs
    }

    fn state(rx_avail: u32) -> ProtoState {
        ProtoState {
            ack: 1000,
            seq: 5000,
            tx_high: 5000,
            rx_avail,
            remote_win: 65535,
            ooo: OooIntervals::new(OooBound::THESIS),
            ..ProtoState::default()
        }
    }

    fn blocks(snap_of: &ProtoState, dsack: Option<Block>) -> Vec<Block> {
        snap_of.sack_reported.option(dsack).as_slice().to_vec()
    }

    #[test]
    fn every_hole_is_reported_newest_first_and_duplicates_as_dsack() {
        let mut s = ProtoState {
            ooo: OooIntervals::new(OooBound::Intervals(8)),
            ..state(10_000)
        };
        // 1000..1100 lost; 1100..1200 and 1300..1400 arrive, 1200..1300
        // lost too.
        rx(&mut s, &data(1100, 100));
        let o = rx(&mut s, &data(1300, 100));
        assert!(o.send_ack && o.dsack.is_none());
        assert_eq!(blocks(&s, None), [(1300, 1400), (1100, 1200)]);
        // The same segment again: reported as a D-SACK block, then the
        // interval holding it.
        let o = rx(&mut s, &data(1100, 100));
        assert_eq!(o.refused, Some(Refusal::Duplicate));
        assert_eq!(o.dsack, Some((1100, 1200)));
        assert_eq!(
            blocks(&s, o.dsack),
            [(1100, 1200), (1300, 1400)],
            "the D-SACK block, then the other interval (the one holding it is the same block)"
        );
        // The second hole fills: one interval, newest first.
        rx(&mut s, &data(1200, 100));
        assert_eq!(blocks(&s, None), [(1100, 1400)]);
        // The first hole fills: everything readable, nothing to report.
        let o = rx(&mut s, &data(1000, 100));
        assert_eq!(o.readable, 400);
        assert!(blocks(&s, None).is_empty());
        // Old data again: a D-SACK block below RCV.NXT.
        let o = rx(&mut s, &data(1000, 100));
        assert_eq!(o.dsack, Some((1000, 1100)));
    }

    fn data(seq: u32, len: u32) -> RxSummary {
        RxSummary {
            seq,
            ack: 5000,
            flags: Flags(Flags::ACK),
            window: 65535,
            len,
            ts_val: None,
            sack: Default::default(),
        }
    }

    #[test]
    fn in_order_then_hole_then_merge() {
        let mut s = state(10_000);
        let o = rx(&mut s, &data(1000, 100));
        assert_eq!(o.readable, 100);
        assert_eq!(
            o.place,
            Some(Placement {
                pos: 0,
                skip: 0,
                len: 100
            })
        );
        // 1100..1200 is lost; 1200..1300 opens the interval.
        let o = rx(&mut s, &data(1200, 100));
        assert_eq!(o.readable, 0);
        assert_eq!(
            s.ooo.first(),
            Some(crate::ooo::Interval {
                start: 1200,
                len: 100
            })
        );
        assert_eq!(
            o.place,
            Some(Placement {
                pos: 200,
                skip: 0,
                len: 100
            })
        );
        assert!(o.send_ack);
        // Disjoint from the interval: dropped.
        let o = rx(&mut s, &data(1400, 50));
        assert_eq!(o.refused, Some(Refusal::OutsideInterval));
        // Filling the hole makes both readable.
        let o = rx(&mut s, &data(1100, 100));
        assert_eq!(o.readable, 200);
        assert_eq!((s.ack, s.ooo.len(), s.rx_pos), (1300, 0, 300));
    }

    #[test]
    fn payload_is_trimmed_to_the_window_and_old_bytes() {
        let mut s = state(150);
        let o = rx(&mut s, &data(950, 100));
        assert_eq!(
            o.place,
            Some(Placement {
                pos: 0,
                skip: 50,
                len: 50
            })
        );
        let o = rx(&mut s, &data(1050, 200));
        assert_eq!(
            o.place,
            Some(Placement {
                pos: 50,
                skip: 0,
                len: 100
            })
        );
        assert_eq!(s.rx_avail, 0);
        assert_eq!(
            rx(&mut s, &data(1150, 10)).refused,
            Some(Refusal::BeyondWindow)
        );
        assert_eq!(
            rx(&mut s, &data(1000, 10)).refused,
            Some(Refusal::Duplicate)
        );
    }

    fn pure_ack(ack: u32, sack: &[Block]) -> RxSummary {
        let mut blocks = SackBlocks::default();
        for &b in sack {
            blocks.push(b);
        }
        RxSummary {
            ack,
            len: 0,
            sack: blocks,
            ..data(1000, 0)
        }
    }

    /// Sends `n` segments of 1000 bytes from sequence number 5000.
    fn sent(n: u32) -> ProtoState {
        let mut s = state(1000);
        s.tx_avail = n * 1000;
        while tx(&mut s, 1000).is_some() {}
        assert_eq!((s.tx_sent, s.seq), (n * 1000, 5000 + n * 1000));
        s
    }

    fn grants(s: &mut ProtoState) -> Vec<(u32, u32)> {
        std::iter::from_fn(|| tx(s, 1000))
            .map(|g| (g.seq, g.len))
            .collect()
    }

    #[test]
    fn three_duplicate_acks_send_the_first_segment_again_not_the_rest() {
        let mut s = sent(3);
        assert_eq!(rx(&mut s, &pure_ack(6000, &[])).acked, 1000);
        assert!(!rx(&mut s, &pure_ack(6000, &[])).fast_retransmit);
        assert!(!rx(&mut s, &pure_ack(6000, &[])).fast_retransmit);
        assert!(rx(&mut s, &pure_ack(6000, &[])).fast_retransmit);
        // Only the segment at SND.UNA goes again; SND.NXT stays SND.MAX.
        assert_eq!(grants(&mut s), [(6000, 1000)]);
        assert_eq!((s.seq, s.tx_sent, s.tx_pos), (8000, 2000, 3000));
        assert_eq!(
            rx(&mut s, &pure_ack(9000, &[])).refused,
            Some(Refusal::AckOfUnsent)
        );
        // A partial ACK without SACK (NewReno, RFC 6582): the next
        // segment at SND.UNA is due.
        assert_eq!(rx(&mut s, &pure_ack(7000, &[])).acked, 1000);
        assert_eq!(grants(&mut s), [(7000, 1000)]);
        let o = rx(&mut s, &pure_ack(8000, &[]));
        assert_eq!(o.acked, 1000);
        assert_eq!((s.tx_sent, s.loss.recovery), (0, None));
    }

    #[test]
    fn sack_recovery_sends_each_lost_hole_once_and_never_sacked_data() {
        // Ten segments 5000..15000; 6000..7000 and 9000..10000 lost.
        let mut s = sent(10);
        let o = rx(&mut s, &pure_ack(6000, &[]));
        assert_eq!(o.acked, 1000);
        rx(&mut s, &pure_ack(6000, &[(7000, 8000)]));
        rx(&mut s, &pure_ack(6000, &[(7000, 9000)]));
        assert_eq!(s.loss.recovery, None, "two segments SACKed: not yet lost");
        let o = rx(&mut s, &pure_ack(6000, &[(10000, 11000), (7000, 9000)]));
        assert!(o.fast_retransmit, "three segments SACKed above SND.UNA");
        assert_eq!(s.loss.pipe(s.sent()), 9000 - 3000 - 1000);
        // 6000..7000 now; 9000..10000 has only 1000 bytes SACKed above it.
        assert_eq!(grants(&mut s), [(6000, 1000)]);
        rx(&mut s, &pure_ack(6000, &[(10000, 13000), (7000, 9000)]));
        assert_eq!(grants(&mut s), [(9000, 1000)]);
        assert_eq!(grants(&mut s), []);
        // Everything up to the recovery point: the episode ends.
        let o = rx(&mut s, &pure_ack(15000, &[]));
        assert_eq!(o.acked, 9000);
        assert_eq!(
            (s.loss.recovery, s.loss.scoreboard.is_empty()),
            (None, true)
        );
    }

    #[test]
    fn a_lost_retransmission_is_sent_again_without_a_timeout() {
        let mut s = sent(6);
        s.tx_avail = 10_000;
        // 5000..6000 lost; three segments SACKed above it.
        let o = rx(&mut s, &pure_ack(5000, &[(6000, 9000)]));
        assert!(o.fast_retransmit);
        // The hole goes again (the rest is new data while the window
        // allows: SND.MAX was 11000 when it left).
        let g = grants(&mut s);
        assert_eq!(g[0], (5000, 1000));
        assert!(g[1..].iter().all(|&(seq, _)| seq >= 11_000));
        // The retransmission is lost too: new data sent after it arrives.
        let o = rx(&mut s, &pure_ack(5000, &[(11_000, 13_000), (6000, 9000)]));
        assert!(!o.lost_retransmit, "two segments beyond it: not yet");
        let o = rx(&mut s, &pure_ack(5000, &[(11_000, 14_100), (6000, 9000)]));
        assert!(o.lost_retransmit);
        assert_eq!(grants(&mut s)[0], (5000, 1000));
    }

    #[test]
    fn a_tail_loss_probe_sends_the_last_segment_and_its_sack_starts_recovery() {
        let mut s = sent(4);
        // The last three segments are lost; the first was acknowledged.
        rx(&mut s, &pure_ack(6000, &[]));
        s.loss.probe(s.sent());
        assert!(s.loss.probe_due());
        assert_eq!(grants(&mut s), [(8000, 1000)], "the last segment again");
        assert!(!s.loss.probe_due());
        // Its ACK SACKs it: the holes below it are lost at once (one
        // segment SACKed is below the duplicate-ACK threshold).
        let o = rx(&mut s, &pure_ack(6000, &[(8000, 9000)]));
        assert!(o.fast_retransmit);
        assert_eq!(grants(&mut s), [(6000, 1000), (7000, 1000)]);
        // With new data queued the probe is new data.
        let mut s = sent(2);
        s.tx_avail = 500;
        s.loss.probe(s.sent());
        assert_eq!(grants(&mut s), [(7000, 500)]);
    }

    #[test]
    fn a_timeout_sends_everything_not_acknowledged_once_in_order() {
        let mut s = sent(4);
        rx(&mut s, &pure_ack(5000, &[(7000, 8000)]));
        assert_eq!(timeout(&mut s), 4000);
        // The scoreboard is cleared (the receiver may have reneged).
        assert_eq!(s.loss.pipe(s.sent()), 0);
        assert_eq!(
            grants(&mut s),
            [(5000, 1000), (6000, 1000), (7000, 1000), (8000, 1000)]
        );
        assert_eq!(s.loss.pipe(s.sent()), 4000);
        // SACKed after the timeout: skipped.
        let mut s = sent(4);
        timeout(&mut s);
        rx(&mut s, &pure_ack(5000, &[(6000, 8000)]));
        assert_eq!(grants(&mut s), [(5000, 1000), (8000, 1000)]);
    }

    #[test]
    fn lying_sack_blocks_are_ignored_and_counted() {
        // Below SND.UNA first: a D-SACK; beyond SND.MAX, reversed: lies.
        let mut s = sent(3);
        let o = rx(
            &mut s,
            &pure_ack(5000, &[(4000, 4500), (9000, 9500), (6000, 5000)]),
        );
        assert_eq!((o.sack.ignored, o.sack.dsack), (2, true));
        assert!(s.loss.scoreboard.is_empty());
    }

    #[test]
    fn a_lost_fin_goes_again_with_its_last_bytes() {
        let mut s = state(1000);
        s.tx_avail = 1500;
        s.fin_queued = true;
        assert_eq!(grants(&mut s), [(5000, 1000), (6000, 500)]);
        assert!(s.fin_sent);
        timeout(&mut s);
        let g: Vec<TxGrant> = std::iter::from_fn(|| tx(&mut s, 1000)).collect();
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[1].seq, g[1].pos, g[1].len, g[1].fin),
            (6000, 1000, 500, true)
        );
        assert_eq!((g[0].pos, g[0].fin), (0, false));
    }

    #[test]
    fn fin_follows_the_data_and_its_ack_is_not_data() {
        let mut s = state(1000);
        s.tx_avail = 10;
        s.fin_queued = true;
        let g = tx(&mut s, 1000).unwrap();
        assert_eq!((g.len, g.fin, s.seq), (10, true, 5011));
        let o = rx(
            &mut s,
            &RxSummary {
                ack: 5011,
                ..data(1000, 0)
            },
        );
        assert_eq!((o.acked, s.tx_sent), (10, 0));
        // The peer's FIN in order.
        let o = rx(
            &mut s,
            &RxSummary {
                flags: Flags(Flags::ACK | Flags::FIN),
                ack: 5011,
                ..data(1000, 5)
            },
        );
        assert!(o.fin);
        assert_eq!(s.ack, 1006);
    }

    proptest! {
        /// Whatever the network does (reordering, duplication, loss), what
        /// the stage places is the stream, what it makes readable is a
        /// prefix of it, the interval stays inside the window, and
        /// go-back-N from `ack` completes the transfer.
        #[test]
        fn reassembly_delivers_the_stream(
            len in 1usize..4000,
            cuts in proptest::collection::vec(1u32..600, 1..40),
            order in proptest::collection::vec(any::<prop::sample::Index>(), 0..80),
        ) {
            let stream: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let segs = cut_into_segments(len, &cuts);
            let base = 7000u32;
            let mut s = ProtoState { ack: base, rx_avail: len as u32, remote_win: 0, ..ProtoState::default() };
            let mut buf = vec![0u8; len];
            let mut readable = 0u32;
            let deliver = |s: &mut ProtoState, (off, n): (u32, u32), buf: &mut Vec<u8>, readable: &mut u32| {
                let o = rx(s, &RxSummary { seq: base + off, ack: 0, flags: Flags(0), window: 0, len: n, ts_val: None, sack: Default::default() });
                if let Some(p) = o.place {
                    let src = &stream[(off + p.skip) as usize..(off + p.skip + p.len) as usize];
                    buf[p.pos as usize..(p.pos + p.len) as usize].copy_from_slice(src);
                }
                *readable += o.readable;
                prop_assert_eq!(*readable, s.ack.wrapping_sub(base));
                prop_assert_eq!(&buf[..*readable as usize], &stream[..*readable as usize]);
                if let Some(i) = s.ooo.first() {
                    let lo = distance(s.ack, i.start);
                    prop_assert!(lo > 0);
                    prop_assert!(lo as u32 + i.len <= s.rx_avail);
                }
                Ok(())
            };
            for i in &order {
                deliver(&mut s, segs[i.index(segs.len())], &mut buf, &mut readable)?;
            }
            // Go-back-N from what was acknowledged, in order.
            let mut rounds = 0;
            while (readable as usize) < len {
                let from = readable;
                for &(off, n) in segs.iter().filter(|&&(o, n)| o + n > from) {
                    deliver(&mut s, (off, n), &mut buf, &mut readable)?;
                }
                rounds += 1;
                prop_assert!(rounds < 3, "go-back-N did not complete");
            }
            prop_assert_eq!(&buf, &stream);
        }
    }
}
