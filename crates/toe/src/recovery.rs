//! Loss recovery in the protocol stage: what to send again, and how much
//! is in flight while recovering.
//!
//! - SACK-based recovery (RFC 6675 section 5): three duplicate ACKs, or
//!   more than two segments' worth of bytes SACKed above SND.UNA
//!   (`IsLost(HighACK + 1)`), begin an episode that lasts until SND.UNA
//!   reaches the SND.MAX of its start (RecoveryPoint). The first segment
//!   at SND.UNA goes at once (section 5, step 4); then each hole below the
//!   highest SACKed byte that `IsLost` (more than (DupThresh - 1) * SMSS
//!   bytes SACKed above it) is sent once, lowest first (`NextSeg` rule 1),
//!   before new data. SACKed bytes are never sent again.
//! - Without SACK (the peer did not offer it) the same episode is
//!   NewReno's (RFC 6582): each partial ACK makes the segment at the new
//!   SND.UNA due.
//! - A retransmission timeout clears the scoreboard (RFC 2018 section 8:
//!   the receiver may have reneged) and begins an episode in which every
//!   byte not cumulatively acknowledged is lost (RFC 6675 section 5.1),
//!   sent again in order as the window allows; bytes SACKed after the
//!   timeout are skipped.
//! - A lost retransmission is found without a timeout, as RACK finds it
//!   by time (RFC 8985 section 6.2) but counted in sequence space: when
//!   more than (DupThresh - 1) * SMSS bytes sent after the latest
//!   retransmission are SACKed while the holes it filled are still not
//!   acknowledged, those retransmissions were lost, and the holes are due
//!   again.
//! - A tail loss probe (RFC 8985 section 7): when the control plane's
//!   probe timer fires (no ACK for two smoothed RTTs), the next grant may
//!   exceed the window by one segment: new data if there is some, else
//!   the last segment again. When the probe's ACK SACKs the tail while
//!   holes remain below it, every hole below is lost (they were sent at
//!   least a probe timeout earlier: RACK's rule for them), so recovery
//!   begins at once instead of after a retransmission timeout.
//! - In flight is RFC 6675's `pipe` (section 4, SetPipe): bytes sent and
//!   neither SACKed nor lost, plus those lost and sent again.
//!
//! This replaces the thesis's go-back-N (section 4.3.1), which sent every
//! byte after the hole again. The state is the protocol partition's
//! (Table 4.1): the scoreboard and the episode change with every ACK, in
//! arrival order, as the sequence state does.

use order::seq::distance;

use crate::protocol::TxGrant;
use crate::sack::Block;
use crate::state::ProtoState;

/// RFC 5681's duplicate-ACK threshold (DupThresh).
pub const DUP_THRESH: u32 = 3;

/// A recovery episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// SND.MAX when the episode began (RecoveryPoint): it ends when
    /// SND.UNA reaches it.
    pub point: u32,
    /// One past the highest byte sent again in it (HighRxt).
    pub high_rxt: u32,
    /// The segment at SND.UNA is due again: the episode's first
    /// retransmission, or NewReno's after a partial ACK.
    pub una_due: bool,
    /// A retransmission timeout began it: every byte not SACKed is lost.
    pub after_timeout: bool,
    /// Every hole below this is lost (a tail loss probe's ACK said so).
    pub lost_below: Option<u32>,
    /// SND.MAX when the latest retransmission left: bytes SACKed beyond
    /// it were sent after it.
    pub rxt_snd_max: Option<u32>,
}

/// A tail loss probe under way: SND.MAX when it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub high: u32,
    /// The probe is granted with the next transmission, window or not.
    pub due: bool,
}

/// SND.UNA.
pub fn una(s: &ProtoState) -> u32 {
    s.seq.wrapping_sub(s.tx_sent)
}

/// The segment size recovery counts in (the last one granted).
fn smss(s: &ProtoState) -> u32 {
    s.snd_mss.max(1)
}

/// Begins an episode: after three duplicate ACKs or `IsLost(SND.UNA)`,
/// or after a retransmission timeout.
pub fn enter(s: &mut ProtoState, after_timeout: bool) {
    let una = una(s);
    if after_timeout {
        s.scoreboard.clear();
        s.probe = None;
    }
    s.recovery = Some(Recovery {
        point: s.tx_high,
        high_rxt: una,
        una_due: !after_timeout,
        after_timeout,
        lost_below: None,
        rxt_snd_max: None,
    });
    s.dupack_cnt = 0;
}

/// The control plane's probe timer fired: the next grant is a tail loss
/// probe (RFC 8985 section 7.3).
pub fn probe(s: &mut ProtoState) {
    if s.tx_sent > 0 {
        s.probe = Some(Probe {
            high: s.tx_high,
            due: true,
        });
    }
}

/// Whether a probe waits to be sent (it may exceed the window).
pub fn probe_due(s: &ProtoState) -> bool {
    s.probe.is_some_and(|p| p.due)
}

/// The probe as a grant: new data if the peer's window takes some
/// (the caller's new-data path sends it), else the last segment again.
fn probe_grant(s: &mut ProtoState) -> Option<TxGrant> {
    let p = s.probe.as_mut().filter(|p| p.due)?;
    p.due = false;
    if s.tx_avail > 0 && s.remote_win > s.tx_sent {
        return None;
    }
    let from = s.tx_high.wrapping_sub(s.tx_sent.min(smss(s)));
    Some(grant(s, from, s.tx_high))
}

/// After an ACK was taken (SND.UNA advanced if `advanced`) and its SACK
/// blocks merged: ends an episode SND.UNA completed, makes the segment at
/// SND.UNA due after a partial ACK without SACK, and begins an episode
/// when the scoreboard says SND.UNA is lost. Returns whether one began.
pub fn after_ack(s: &mut ProtoState, advanced: bool) -> bool {
    let una = una(s);
    let tail = probe_answered(s, una);
    let limit = (DUP_THRESH - 1) * smss(s);
    match s.recovery.as_mut() {
        Some(r) if distance(r.point, una) >= 0 => s.recovery = None,
        Some(r) => {
            if advanced && s.scoreboard.is_empty() && !r.after_timeout {
                r.una_due = true;
            }
            if tail.is_some() {
                // What was sent again before the probe is lost too.
                r.lost_below = tail;
                r.high_rxt = una;
            }
            if r.rxt_snd_max
                .is_some_and(|m| s.scoreboard.sacked_above(m) > limit)
            {
                r.high_rxt = una;
                r.rxt_snd_max = None;
                s.lost_retransmits = s.lost_retransmits.wrapping_add(1);
            }
            return false;
        }
        None => {}
    }
    if s.tx_sent > 0 && (tail.is_some() || is_lost(s, una)) {
        enter(s, false);
        if let Some(r) = s.recovery.as_mut() {
            r.lost_below = tail;
        }
        return true;
    }
    false
}

/// The probe's ACK: done when SND.UNA passed what it probed; when a SACK
/// block reached it with holes below, returns where the holes end (every
/// one of them lost, RFC 8985 section 7.4 with RACK's rule).
fn probe_answered(s: &mut ProtoState, una: u32) -> Option<u32> {
    let p = s.probe?;
    if distance(p.high, una) >= 0 {
        s.probe = None;
        return None;
    }
    let high = s.scoreboard.high()?;
    if p.due || distance(p.high, high) < 0 {
        return None;
    }
    s.probe = None;
    Some(high)
}

/// RFC 6675 `IsLost(seq)`: more than (DupThresh - 1) * SMSS bytes SACKed
/// above it, or the episode began with a timeout.
fn is_lost(s: &ProtoState, seq: u32) -> bool {
    s.recovery
        .is_some_and(|r| r.after_timeout || r.lost_below.is_some_and(|b| distance(seq, b) > 0))
        || s.scoreboard.sacked_above(seq) > (DUP_THRESH - 1) * smss(s)
}

/// Where lost holes may lie: up to the highest SACKed byte, or to SND.MAX
/// after a timeout.
fn lost_limit(s: &ProtoState, r: &Recovery) -> u32 {
    match s.scoreboard.high() {
        _ if r.after_timeout => s.tx_high,
        Some(h) => h,
        None => una(s),
    }
}

/// The next range to send again, at most one segment, without taking it.
pub fn next_hole(s: &ProtoState) -> Option<Block> {
    let r = s.recovery.as_ref()?;
    let una = una(s);
    let mss = smss(s);
    let clip = |(a, b): Block| {
        let end = if distance(a, b) > mss as i32 {
            a.wrapping_add(mss)
        } else {
            b
        };
        (a, end)
    };
    if r.una_due && distance(r.high_rxt, una) >= 0 {
        let next_sacked = s.scoreboard.blocks().first().map_or(s.tx_high, |b| b.0);
        if distance(una, next_sacked) > 0 {
            return Some(clip((una, next_sacked)));
        }
    }
    lost_holes(s, r).next().map(clip)
}

/// The lost holes not yet sent again in the episode, lowest first.
fn lost_holes<'a>(s: &'a ProtoState, r: &Recovery) -> impl Iterator<Item = Block> + 'a {
    let una = una(s);
    let from = if distance(una, r.high_rxt) > 0 {
        r.high_rxt
    } else {
        una
    };
    s.scoreboard
        .holes(from, lost_limit(s, r))
        .filter(move |h| is_lost(s, h.0))
}

/// Takes the next retransmission, if one is due: its sequence number,
/// buffer position, length and FIN (the FIN takes the sequence number
/// after the data, RFC 9293 section 3.4).
pub fn retransmission(s: &mut ProtoState) -> Option<TxGrant> {
    if let Some(g) = probe_grant(s) {
        return Some(g);
    }
    let (a, b) = next_hole(s)?;
    let high = s.tx_high;
    let r = s.recovery.as_mut()?;
    r.high_rxt = b;
    r.una_due = false;
    r.rxt_snd_max = Some(high);
    Some(grant(s, a, b))
}

/// Bytes [a, b) again (the FIN with them if b passes the data).
fn grant(s: &ProtoState, a: u32, b: u32) -> TxGrant {
    let data_end = s.seq.wrapping_sub(u32::from(s.fin_sent));
    let data_stop = if distance(data_end, b) > 0 {
        data_end
    } else {
        b
    };
    let len = distance(a, data_stop).max(0) as u32;
    TxGrant {
        seq: a,
        pos: s.tx_pos.wrapping_sub(distance(a, data_end) as u32),
        len,
        fin: s.fin_sent && distance(data_end, b) > 0,
    }
}

/// RFC 6675 `pipe`: bytes in flight.
pub fn pipe(s: &ProtoState) -> u32 {
    let outstanding = distance(una(s), s.tx_high).max(0) as u32;
    let sacked = s.scoreboard.sacked();
    let lost_unsent = s.recovery.as_ref().map_or(0, |r| {
        lost_holes(s, r).map(|(a, b)| b.wrapping_sub(a)).sum()
    });
    outstanding
        .saturating_sub(sacked)
        .saturating_sub(lost_unsent)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::ooo::{OooBound, OooIntervals};
    use crate::protocol::{rx, timeout, tx, RxSummary};
    use crate::sack::Block;
    use crate::segment::Flags;
    use crate::state::ProtoState;

    use super::*;

    const MSS: u32 = 100;
    const CWND: u32 = 8 * MSS;

    fn overlaps(a: Block, b: Block) -> bool {
        distance(a.0, b.1) > 0 && distance(b.0, a.1) > 0
    }

    proptest! {
        /// A sender and a receiver joined by a path that loses, reorders
        /// and duplicates segments and loses ACKs, then heals: the stream
        /// arrives whole, no retransmission covers bytes the scoreboard
        /// holds as SACKed, `pipe` never exceeds what is outstanding, and a
        /// round without progress ends in a timeout (the control plane's
        /// timer) from which recovery goes on.
        #[test]
        fn recovery_delivers_the_stream_and_never_resends_sacked_bytes(
            len in 1u32..6000,
            fate in proptest::collection::vec(0u8..10, 1..200),
            ack_loss in proptest::collection::vec(any::<bool>(), 1..50),
            sack in any::<bool>(),
        ) {
            let (iss, irs) = (u32::MAX - 2500, 7000u32);
            let mut snd = ProtoState {
                seq: iss, tx_high: iss, remote_win: 1 << 20, tx_avail: len,
                ..ProtoState::default()
            };
            let mut rcv = ProtoState {
                ack: iss, seq: irs, tx_high: irs, rx_avail: 1 << 20,
                ooo: OooIntervals::new(OooBound::Intervals(8)),
                ..ProtoState::default()
            };
            let (mut fates, mut ack_fates) = (fate.iter().cycle(), ack_loss.iter().cycle());
            for round in 0..200 {
                if snd.tx_sent == 0 && snd.tx_avail == 0 {
                    break;
                }
                prop_assert!(round < 199, "no progress 100 rounds after the path healed");
                // The sender fills its window.
                let mut wire = Vec::new();
                while pipe(&snd) == 0 || pipe(&snd) + MSS <= CWND {
                    let Some(g) = tx(&mut snd, MSS) else { break };
                    let end = g.seq.wrapping_add(g.len);
                    for &b in snd.scoreboard.blocks() {
                        prop_assert!(!overlaps((g.seq, end), b), "resent SACKed {:?} over {:?}", (g.seq, end), b);
                    }
                    wire.push((g.seq, g.len));
                }
                let before = una(&snd);
                // The path: 0-1 lost, 2 duplicated, 3-4 swapped with the next.
                let mut arrived = Vec::new();
                for (i, seg) in wire.iter().enumerate() {
                    // After 100 rounds the path heals: recovery must then
                    // finish (the property is progress, not luck).
                    let f = fates.next().copied().filter(|_| round < 100);
                    match f.unwrap_or(5) {
                        0 | 1 => {}
                        2 => arrived.extend([*seg, *seg]),
                        3 | 4 if i + 1 < wire.len() => arrived.insert(arrived.len().saturating_sub(1), *seg),
                        _ => arrived.push(*seg),
                    }
                }
                for (seq, n) in arrived {
                    let o = rx(&mut rcv, &RxSummary { seq, len: n, flags: Flags(Flags::ACK), ack: irs, window: 1 << 20, ..RxSummary::default() });
                    rcv.rx_avail += o.readable;
                    if *ack_fates.next().unwrap_or(&false) && round < 100 {
                        continue;
                    }
                    let blocks = if sack { rcv.sack_reported.option(o.dsack) } else { Default::default() };
                    let a = RxSummary { seq: irs, ack: rcv.ack, flags: Flags(Flags::ACK), window: 1 << 20, len: 0, ts_val: None, sack: blocks.truncated(3) };
                    let o = rx(&mut snd, &a);
                    prop_assert_eq!(o.refused, None);
                    prop_assert!(pipe(&snd) <= snd.tx_sent);
                }
                // The control plane's timer: a round without progress.
                if una(&snd) == before && snd.tx_sent > 0 {
                    timeout(&mut snd);
                }
            }
            prop_assert_eq!(rcv.ack, iss.wrapping_add(len));

        }
    }
}
