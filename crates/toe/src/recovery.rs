//! Loss recovery, one for every engine: what to send again, and how much
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
//! - TCP_INFO's tcpi_sacked, tcpi_lost, tcpi_retrans and tcpi_reordering
//!   ([`LossInfo`]) are read from this state in Linux's terms, so that
//!   they add up to `pipe` as Linux's add up to its in-flight count.
//!
//! This replaces the thesis's go-back-N (section 4.3.1), which sent every
//! byte after the hole again. The state ([`LossState`]) is the protocol
//! partition's (Table 4.1) on the run-to-completion and pipelined engines:
//! the scoreboard and the episode change with every ACK, in arrival
//! order, as the sequence state does. On the Laminar engine the control
//! plane keeps it beside each transmit side, fed by the ACKs it
//! translates, and pushes what it says to send (see
//! `endpoint::laminar`).

use order::seq::distance;

use crate::prr::Prr;
use crate::sack::{Block, SackBlocks, SackUpdate, Scoreboard};

/// RFC 5681's duplicate-ACK threshold (DupThresh).
pub const DUP_THRESH: u32 = 3;

/// The sender's sequence space as recovery sees it: SND.UNA and SND.MAX
/// (every engine's sender keeps SND.NXT at SND.MAX: nothing is sent
/// twice by rewinding it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub una: u32,
    pub max: u32,
}

impl Sent {
    /// Bytes sent and not acknowledged.
    pub fn outstanding(self) -> u32 {
        distance(self.una, self.max).max(0) as u32
    }
}

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

/// What one ACK did to the loss state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckEffect {
    /// A recovery episode began (three duplicate ACKs, or `IsLost`).
    pub began: bool,
    /// What the SACK blocks did to the scoreboard.
    pub sack: SackUpdate,
    /// A retransmission was found lost.
    pub lost_retransmit: bool,
}

/// A sender's loss state: the scoreboard, the episode, the probe. One
/// type for every engine: the protocol stage keeps it in its partition,
/// Laminar's control plane beside each transmit side.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LossState {
    /// What the peer SACKed (RFC 6675 section 3).
    pub scoreboard: Scoreboard,
    /// The recovery episode under way, if any.
    pub recovery: Option<Recovery>,
    /// A tail loss probe under way.
    pub probe: Option<Probe>,
    pub dupack_cnt: u8,
    /// The segment size of the last grant: what recovery counts in.
    pub snd_mss: u32,
    /// Retransmissions found lost without a timeout, over the
    /// connection's life.
    pub lost_retransmits: u32,
    /// The episode's rate reduction (RFC 6937), unless a timeout began
    /// it (slow start follows a timeout instead).
    pub prr: Option<Prr>,
}

impl LossState {
    fn smss(&self) -> u32 {
        self.snd_mss.max(1)
    }

    /// Begins an episode: after three duplicate ACKs or `IsLost(SND.UNA)`,
    /// or after a retransmission timeout.
    pub fn enter(&mut self, sent: Sent, after_timeout: bool) {
        if after_timeout {
            self.scoreboard.clear();
            self.probe = None;
        }
        self.prr = (!after_timeout)
            .then(|| Prr::begin(sent.outstanding(), sent.una, self.scoreboard.sacked()));
        self.recovery = Some(Recovery {
            point: sent.max,
            high_rxt: sent.una,
            una_due: !after_timeout,
            after_timeout,
            lost_below: None,
            rxt_snd_max: None,
        });
        self.dupack_cnt = 0;
    }

    /// An acceptable ACK was taken: `sent` is after it, `advanced` says
    /// SND.UNA moved, `duplicate` that it is RFC 5681 section 2's
    /// duplicate ACK. Counts duplicates, merges the SACK blocks, and ends,
    /// continues or begins an episode.
    pub fn on_ack(
        &mut self,
        sent: Sent,
        advanced: bool,
        duplicate: bool,
        sack: &SackBlocks,
    ) -> AckEffect {
        let mut e = AckEffect::default();
        let reducing = self.prr.is_some();
        let sacked_before = self.scoreboard.sacked();
        if advanced {
            self.dupack_cnt = 0;
            self.scoreboard.acked(sent.una);
        } else if duplicate {
            self.dupack_cnt = self.dupack_cnt.saturating_add(1);
            if u32::from(self.dupack_cnt) == DUP_THRESH && self.recovery.is_none() {
                self.enter(sent, false);
                e.began = true;
            }
        }
        if !sack.is_empty() {
            e.sack = self.scoreboard.update(sent.una, sent.max, sack);
        }
        let lost_before = self.lost_retransmits;
        e.began |= self.after_ack(sent, advanced);
        e.lost_retransmit = self.lost_retransmits != lost_before;
        let (sacked, mss) = (self.scoreboard.sacked(), self.smss());
        if let Some(p) = self.prr.as_mut() {
            // RFC 6937 counts the ACK that begins the episode too: what
            // it newly SACKed was delivered.
            if !reducing || e.began {
                *p = Prr::begin(sent.outstanding(), sent.una, sacked_before);
            }
            p.on_ack(sent.una, sacked, mss);
        }
        e
    }

    /// `len` bytes were sent (new data or again): PRR counts them while
    /// it reduces.
    pub fn on_send(&mut self, len: u32) {
        if let Some(p) = self.prr.as_mut() {
            p.on_send(len);
        }
    }

    /// Whether `len` more bytes may go under the congestion window
    /// `cwnd`: always with nothing in flight or a tail loss probe due
    /// (RFC 8985 section 7.3); during a fast recovery as PRR allows
    /// (RFC 6937, `cwnd` its ssthresh); else if `cwnd` has room beyond
    /// `pipe` (RFC 6675).
    pub fn may_send(&self, sent: Sent, cwnd: u32, len: u32) -> bool {
        let pipe = self.pipe(sent);
        if pipe == 0 || self.probe_due() {
            return true;
        }
        match &self.prr {
            Some(p) => p.quota(pipe, cwnd, self.smss()) >= len,
            None => cwnd.saturating_sub(pipe) >= len,
        }
    }

    /// The control plane's probe timer fired: the next grant is a tail
    /// loss probe (RFC 8985 section 7.3).
    pub fn probe(&mut self, sent: Sent) {
        if sent.outstanding() > 0 {
            self.probe = Some(Probe {
                high: sent.max,
                due: true,
            });
        }
    }

    /// Whether a probe waits to be sent (it may exceed the window).
    pub fn probe_due(&self) -> bool {
        self.probe.is_some_and(|p| p.due)
    }

    /// Takes a due probe: None if `new_data` (the peer's window takes
    /// some: the caller's new-data path sends it), else the last segment
    /// again.
    pub fn take_probe(&mut self, sent: Sent, new_data: bool) -> Option<Block> {
        let smss = self.smss();
        let p = self.probe.as_mut().filter(|p| p.due)?;
        p.due = false;
        if new_data {
            return None;
        }
        Some((
            sent.max.wrapping_sub(sent.outstanding().min(smss)),
            sent.max,
        ))
    }

    /// After an ACK was taken and its SACK blocks merged: ends an episode
    /// SND.UNA completed, makes the segment at SND.UNA due after a
    /// partial ACK without SACK, and begins an episode when the
    /// scoreboard says SND.UNA is lost. Returns whether one began.
    fn after_ack(&mut self, sent: Sent, advanced: bool) -> bool {
        let tail = self.probe_answered(sent.una);
        let limit = (DUP_THRESH - 1) * self.smss();
        match self.recovery.as_mut() {
            Some(r) if distance(r.point, sent.una) >= 0 => {
                self.recovery = None;
                self.prr = None;
            }
            Some(r) => {
                if advanced && self.scoreboard.is_empty() && !r.after_timeout {
                    r.una_due = true;
                }
                if tail.is_some() {
                    // What was sent again before the probe is lost too.
                    r.lost_below = tail;
                    r.high_rxt = sent.una;
                }
                if r.rxt_snd_max
                    .is_some_and(|m| self.scoreboard.sacked_above(m) > limit)
                {
                    r.high_rxt = sent.una;
                    r.rxt_snd_max = None;
                    self.lost_retransmits = self.lost_retransmits.wrapping_add(1);
                }
                return false;
            }
            None => {}
        }
        if sent.outstanding() > 0 && (tail.is_some() || self.is_lost(sent.una)) {
            self.enter(sent, false);
            if let Some(r) = self.recovery.as_mut() {
                r.lost_below = tail;
            }
            return true;
        }
        false
    }

    /// The probe's ACK: done when SND.UNA passed what it probed; when a
    /// SACK block reached it with holes below, returns where the holes
    /// end (every one of them lost, RFC 8985 section 7.4 with RACK's rule).
    fn probe_answered(&mut self, una: u32) -> Option<u32> {
        let p = self.probe?;
        if distance(p.high, una) >= 0 {
            self.probe = None;
            return None;
        }
        let high = self.scoreboard.high()?;
        if p.due || distance(p.high, high) < 0 {
            return None;
        }
        self.probe = None;
        Some(high)
    }

    /// RFC 6675 `IsLost(seq)`: more than (DupThresh - 1) * SMSS bytes
    /// SACKed above it, or the episode began with a timeout.
    fn is_lost(&self, seq: u32) -> bool {
        self.recovery
            .is_some_and(|r| r.after_timeout || r.lost_below.is_some_and(|b| distance(seq, b) > 0))
            || self.scoreboard.sacked_above(seq) > (DUP_THRESH - 1) * self.smss()
    }

    /// Where lost holes may lie: up to the highest SACKed byte, or to
    /// SND.MAX after a timeout.
    fn lost_limit(&self, sent: Sent, r: &Recovery) -> u32 {
        match self.scoreboard.high() {
            _ if r.after_timeout => sent.max,
            Some(h) => h,
            None => sent.una,
        }
    }

    /// The next range to send again, at most one segment, without taking
    /// it.
    pub fn next_hole(&self, sent: Sent) -> Option<Block> {
        let r = self.recovery.as_ref()?;
        let mss = self.smss();
        let clip = |(a, b): Block| {
            let end = if distance(a, b) > mss as i32 {
                a.wrapping_add(mss)
            } else {
                b
            };
            (a, end)
        };
        if r.una_due && distance(r.high_rxt, sent.una) >= 0 {
            let next_sacked = self.scoreboard.blocks().first().map_or(sent.max, |b| b.0);
            if distance(sent.una, next_sacked) > 0 {
                return Some(clip((sent.una, next_sacked)));
            }
        }
        self.lost_holes(sent, r).next().map(clip)
    }

    /// The lost holes not yet sent again in the episode, lowest first.
    fn lost_holes<'a>(&'a self, sent: Sent, r: &Recovery) -> impl Iterator<Item = Block> + 'a {
        let from = if distance(sent.una, r.high_rxt) > 0 {
            r.high_rxt
        } else {
            sent.una
        };
        self.scoreboard
            .holes(from, self.lost_limit(sent, r))
            .filter(move |h| self.is_lost(h.0))
    }

    /// Takes the next retransmission, if one is due: at most one segment
    /// of bytes to send again.
    pub fn take_retransmission(&mut self, sent: Sent) -> Option<Block> {
        let (a, b) = self.next_hole(sent)?;
        let r = self.recovery.as_mut()?;
        r.high_rxt = b;
        r.una_due = false;
        r.rxt_snd_max = Some(sent.max);
        Some((a, b))
    }

    /// RFC 6675 `pipe`: bytes in flight.
    pub fn pipe(&self, sent: Sent) -> u32 {
        sent.outstanding()
            .saturating_sub(self.scoreboard.sacked())
            .saturating_sub(self.lost(sent))
    }

    /// Bytes RFC 6675 holds lost and not yet sent again (what `pipe`
    /// leaves out).
    pub fn lost(&self, sent: Sent) -> u32 {
        self.recovery.as_ref().map_or(0, |r| {
            self.lost_holes(sent, r)
                .map(|(a, b)| b.wrapping_sub(a))
                .sum()
        })
    }

    /// Bytes sent again in the episode and still in flight: the holes
    /// below HighRxt, neither SACKed nor acknowledged (what `pipe` counts
    /// back in, RFC 6675 section 4's "retransmitted" octets). Linux's
    /// `retrans_out`. A tail loss probe is not among them: Linux sends
    /// one with `__tcp_retransmit_skb`, which leaves `retrans_out` alone
    /// (the probe counts in tcpi_total_retrans only, as here).
    pub fn retrans_out(&self, sent: Sent) -> u32 {
        self.recovery.as_ref().map_or(0, |r| {
            self.scoreboard
                .holes(sent.una, r.high_rxt)
                .map(|(a, b)| b.wrapping_sub(a))
                .sum()
        })
    }

    /// Bytes marked lost, sent again or not: Linux's `lost_out`, which
    /// keeps a lost segment marked after its retransmission (the mark
    /// goes with the segment's ACK or SACK, or when the retransmission
    /// is found lost too and the hole is due again). Linux's
    /// include/net/tcp.h reads in-flight as "packets sent once on
    /// transmission queue MINUS packets left network, but not honestly
    /// ACKed yet PLUS packets fast retransmitted", `packets_out -
    /// (sacked_out + lost_out) + retrans_out` (`tcp_packets_in_flight`,
    /// `tcp_left_out`): with the retransmitted bytes in `lost_out` and in
    /// `retrans_out` that is this module's `pipe`, so what TCP_INFO
    /// reports adds up as Linux's does. [`LossState::lost`], the lost
    /// bytes not yet sent again, is `lost_out - retrans_out`.
    pub fn lost_out(&self, sent: Sent) -> u32 {
        self.lost(sent) + self.retrans_out(sent)
    }

    /// What TCP_INFO reports of the loss state, in segments of `mss`
    /// bytes (the connection's, tcpi_snd_mss), as Linux counts them.
    pub fn info(&self, sent: Sent, mss: u32) -> LossInfo {
        let segments = |bytes: u32| bytes.div_ceil(mss.max(1));
        // Outside an episode nothing is lost or sent again (`lost` and
        // `retrans_out` are 0): only the SACKed bytes are counted, so
        // the data path's publishers pay for the holes only in recovery.
        let (retrans, lost) = match self.recovery {
            Some(_) => (self.retrans_out(sent), self.lost_out(sent)),
            None => (0, 0),
        };
        LossInfo {
            retrans: segments(retrans),
            lost: segments(lost),
            sacked: segments(self.scoreboard.sacked()),
            reordering: DUP_THRESH,
        }
    }
}

/// A connection's loss state as TCP_INFO reports it, in segments
/// (Linux's `tcp_sock` counts segments: include/linux/tcp.h's
/// `retrans_out`, `lost_out`, `sacked_out`, `reordering`). Bytes are
/// rounded up to whole segments, so a short hole is one segment, as the
/// short segment that left it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LossInfo {
    /// tcpi_retrans: segments sent again and still in flight
    /// ([`LossState::retrans_out`]).
    pub retrans: u32,
    /// tcpi_lost: segments marked lost, those sent again included
    /// ([`LossState::lost_out`], Linux's meaning).
    pub lost: u32,
    /// tcpi_sacked: segments SACKed above SND.UNA (the scoreboard's
    /// bytes). Without SACK 0: Linux instead counts duplicate ACKs there
    /// (`tcp_add_reno_sack`), which this state does not report.
    pub sacked: u32,
    /// tcpi_reordering: the duplicate threshold in segments,
    /// [`DUP_THRESH`]. Fixed: RFC 6675's DupThresh is not adapted to
    /// reordering seen (Linux raises `tp->reordering` up to
    /// `tcp_max_reordering`; RFC 8985's RACK uses a time window
    /// instead).
    pub reordering: u32,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::ooo::{OooBound, OooIntervals};
    use crate::protocol::{rx, timeout, tx, RxSummary};
    use crate::sack::{Block, SackBlocks};
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
                while snd.loss.pipe(snd.sent()) == 0 || snd.loss.pipe(snd.sent()) + MSS <= CWND {
                    let Some(g) = tx(&mut snd, MSS) else { break };
                    let end = g.seq.wrapping_add(g.len);
                    for &b in snd.loss.scoreboard.blocks() {
                        prop_assert!(!overlaps((g.seq, end), b), "resent SACKed {:?} over {:?}", (g.seq, end), b);
                    }
                    wire.push((g.seq, g.len));
                }
                let before = snd.sent().una;
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
                    prop_assert!(snd.loss.pipe(snd.sent()) <= snd.tx_sent);
                    // TCP_INFO's counts add up as Linux's do: in flight
                    // is out - (sacked + lost) + retransmitted.
                    let (l, sent) = (&snd.loss, snd.sent());
                    prop_assert!(l.retrans_out(sent) <= l.lost_out(sent));
                    prop_assert_eq!(
                        sent.outstanding() + l.retrans_out(sent),
                        l.scoreboard.sacked() + l.lost_out(sent) + l.pipe(sent)
                    );
                }
                // The control plane's timer: a round without progress.
                if snd.sent().una == before && snd.tx_sent > 0 {
                    timeout(&mut snd);
                }
            }
            prop_assert_eq!(rcv.ack, iss.wrapping_add(len));

        }
    }

    /// A loss state counting in segments of [`MSS`].
    fn loss() -> LossState {
        LossState {
            snd_mss: MSS,
            ..LossState::default()
        }
    }

    fn out(una: u32, max: u32) -> Sent {
        Sent { una, max }
    }

    /// Linux's in-flight from TCP_INFO's counts: `packets_out -
    /// (sacked_out + lost_out) + retrans_out` (include/net/tcp.h).
    fn linux_in_flight(sent: Sent, i: LossInfo) -> u32 {
        sent.outstanding().div_ceil(MSS) - (i.sacked + i.lost) + i.retrans
    }

    #[test]
    fn tcp_info_counts_sacked_lost_and_resent_segments_as_linux_does() {
        // Ten segments out, the fourth to sixth SACKed: three segments
        // SACKed above SND.UNA make it lost (IsLost), an episode begins.
        let mut l = loss();
        let sent = out(1000, 2000);
        assert_eq!(
            l.info(sent, MSS),
            LossInfo {
                reordering: DUP_THRESH,
                ..LossInfo::default()
            }
        );
        let e = l.on_ack(sent, false, true, &SackBlocks::one((1300, 1600)));
        assert!(e.began);
        let i = l.info(sent, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (3, 3, 0));
        assert_eq!(linux_in_flight(sent, i) * MSS, l.pipe(sent));
        // The segment at SND.UNA goes again: still lost (Linux keeps the
        // mark until it is acknowledged), and in flight again.
        assert_eq!(l.take_retransmission(sent), Some((1000, 1100)));
        let i = l.info(sent, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (3, 3, 1));
        assert_eq!(l.lost(sent), 200);
        assert_eq!(l.retrans_out(sent), 100);
        assert_eq!(linux_in_flight(sent, i) * MSS, l.pipe(sent));
        // Its ACK: the retransmission left the network.
        let sent = out(1100, 2000);
        l.on_ack(sent, true, false, &SackBlocks::one((1300, 1600)));
        let i = l.info(sent, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (3, 2, 0));
        // The rest of the hole goes, then the episode's end.
        assert_eq!(l.take_retransmission(sent), Some((1100, 1200)));
        assert_eq!(l.take_retransmission(sent), Some((1200, 1300)));
        let i = l.info(sent, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (3, 2, 2));
        assert_eq!(linux_in_flight(sent, i) * MSS, l.pipe(sent));
        let sent = out(2000, 2000);
        l.on_ack(sent, true, false, &SackBlocks::default());
        assert_eq!(l.recovery, None);
        let i = l.info(sent, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans, i.reordering), (0, 0, 0, 3));
    }

    #[test]
    fn a_retransmission_found_lost_is_lost_again_and_no_longer_in_flight() {
        let mut l = loss();
        let sent = out(1000, 2000);
        l.on_ack(sent, false, true, &SackBlocks::one((1100, 1400)));
        assert_eq!(l.take_retransmission(sent), Some((1000, 1100)));
        assert_eq!(l.info(sent, MSS).retrans, 1);
        // New data left after it; more than two segments of it SACKed
        // while SND.UNA stays: the retransmission was lost too.
        let sent = out(1000, 2400);
        let e = l.on_ack(sent, false, true, &SackBlocks::one((2000, 2400)));
        assert!(e.lost_retransmit);
        let i = l.info(sent, MSS);
        assert_eq!((i.lost, i.retrans), (7, 0));
        assert_eq!(linux_in_flight(sent, i) * MSS, l.pipe(sent));
    }

    #[test]
    fn after_a_timeout_everything_out_is_lost_and_each_resend_in_flight() {
        let mut l = loss();
        let sent = out(1000, 2000);
        l.on_ack(sent, false, true, &SackBlocks::one((1500, 1600)));
        l.enter(sent, true);
        // RFC 2018 section 8: the scoreboard is cleared, nothing reads
        // SACKed (Linux's `tcp_timeout_mark_lost` clears its marks only
        // when the receiver reneged on the first segment's).
        let i = l.info(sent, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (0, 10, 0));
        l.take_retransmission(sent);
        l.take_retransmission(sent);
        let i = l.info(sent, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (0, 10, 2));
        assert_eq!(linux_in_flight(sent, i) * MSS, l.pipe(sent));
    }

    #[test]
    fn a_short_hole_or_block_is_a_whole_segment() {
        let mut l = loss();
        let sent = out(1000, 1450);
        l.on_ack(sent, false, true, &SackBlocks::one((1050, 1450)));
        let i = l.info(sent, MSS);
        // 400 bytes SACKed: 4 segments; the 50-byte hole: 1.
        assert_eq!((i.sacked, i.lost), (4, 1));
        assert_eq!(l.info(sent, 0).sacked, 400, "no segment size: bytes");
    }
}
