//! Selective acknowledgements: the blocks of one SACK option (RFC 2018
//! section 3), and the blocks a receiver reports, newest first (RFC 2018
//! section 4), with a duplicate reported first as a D-SACK block (RFC 2883
//! section 4).
//!
//! The sender's [`Scoreboard`] (RFC 6675 section 3) is what those blocks
//! told it. The receiver's blocks and the scoreboard are protocol-stage state (thesis Table 4.1's
//! protocol partition): they change with every out-of-order segment, in
//! arrival order, as the out-of-order intervals ([`crate::ooo`]) do.

use order::seq::distance;

/// A block [left, right) of sequence space.
pub type Block = (u32, u32);

/// The blocks of one SACK option, in wire order. 40 option bytes hold 4
/// blocks, 3 beside a timestamp option (RFC 2018 section 3).
#[derive(Debug, Clone, Copy, Default)]
pub struct SackBlocks {
    blocks: [Block; SackBlocks::MAX],
    len: u8,
}

impl SackBlocks {
    pub const MAX: usize = 4;

    /// One block.
    pub fn one(b: Block) -> Self {
        let mut s = SackBlocks::default();
        s.push(b);
        s
    }

    /// Appends `b`; false (and nothing changes) when the option is full.
    pub fn push(&mut self, b: Block) -> bool {
        let n = usize::from(self.len);
        if n == Self::MAX {
            return false;
        }
        self.blocks[n] = b;
        self.len += 1;
        true
    }

    pub fn as_slice(&self) -> &[Block] {
        &self.blocks[..usize::from(self.len)]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn first(&self) -> Option<Block> {
        self.as_slice().first().copied()
    }

    /// The first `n` blocks (the ones that fit beside other options).
    pub fn truncated(mut self, n: usize) -> Self {
        self.len = self.len.min(n.min(Self::MAX) as u8);
        self
    }
}

/// Equal when the blocks in use are (slots past `len` are not blocks).
impl PartialEq for SackBlocks {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SackBlocks {}

impl From<Option<Block>> for SackBlocks {
    fn from(b: Option<Block>) -> Self {
        b.map(SackBlocks::one).unwrap_or_default()
    }
}

/// Whether two blocks overlap or touch.
fn meet(a: Block, b: Block) -> bool {
    distance(a.0, b.1) >= 0 && distance(b.0, a.1) >= 0
}

/// The blocks a receiver reports, newest first: the block holding the
/// most recently received out-of-order segment, then the blocks reported
/// before it that still hold data past RCV.NXT (RFC 2018 section 4; the
/// same list FreeBSD's `tcp_update_sack_list` keeps). Each block is an
/// out-of-order interval the receiver holds, so a block never claims data
/// the receiver does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportedBlocks(SackBlocks);

impl ReportedBlocks {
    /// A segment landed in out-of-order interval `newest` (after merging):
    /// it goes first, and the blocks it absorbed are gone.
    pub fn record(&mut self, newest: Block) {
        let mut next = SackBlocks::one(newest);
        for &b in self.0.as_slice() {
            if !meet(b, newest) {
                next.push(b);
            }
        }
        self.0 = next;
    }

    /// RCV.NXT reached `rcv_nxt`: blocks at or below it were delivered in
    /// order and are no longer reported.
    pub fn trim(&mut self, rcv_nxt: u32) {
        let mut next = SackBlocks::default();
        for &b in self.0.as_slice() {
            if distance(rcv_nxt, b.1) > 0 {
                next.push(b);
            }
        }
        self.0 = next;
    }

    /// The option to send: a D-SACK block first when the segment answered
    /// was a duplicate (RFC 2883 section 4, "the first block reports the
    /// duplicate"), then the newest blocks.
    pub fn option(&self, dsack: Option<Block>) -> SackBlocks {
        let mut out = SackBlocks::from(dsack);
        for &b in self.0.as_slice() {
            // A D-SACK inside an interval is followed by that interval
            // (section 4, example 3); never by the same block twice.
            if Some(b) != dsack {
                out.push(b);
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What one ACK's SACK blocks told the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackUpdate {
    /// The first block reported a duplicate (RFC 2883 section 4): a
    /// retransmission the receiver did not need.
    pub dsack: bool,
    /// Blocks outside SND.UNA..SND.MAX or empty (RFC 2018 section 3 asks
    /// nothing of such blocks; a receiver that sends them lies): ignored.
    pub ignored: u8,
    /// Blocks not kept because the scoreboard was full.
    pub dropped: u8,
}

/// The sender's scoreboard (RFC 6675 section 3): the bytes above SND.UNA
/// the receiver reported holding, as disjoint blocks in sequence order.
/// Bounded at [`Scoreboard::MAX`] blocks (FreeBSD's `tcp_sack.c` bounds its
/// holes likewise); a block past the bound is dropped and counted, which
/// at worst sends its bytes again. SACKed bytes are never taken as
/// acknowledged: a receiver may renege (RFC 2018 section 8), so the
/// scoreboard is cleared on a retransmission timeout and everything not
/// cumulatively acknowledged is sent again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scoreboard {
    blocks: Vec<Block>,
}

impl Scoreboard {
    /// 256 blocks, 2 KiB per connection at most (allocated as holes
    /// appear). 32 overflowed: a queue's tail drops in a window of
    /// thousands of segments leave more holes than that, and every
    /// dropped block's bytes were sent again (306 D-SACKs for 204 drops in
    /// one `steer exp loss` transfer at 0.1%).
    pub const MAX: usize = 256;

    /// Takes the blocks of an ACK whose cumulative acknowledgement (after
    /// processing) is `una`, with `snd_max` one past the highest byte
    /// sent.
    pub fn update(&mut self, una: u32, snd_max: u32, blocks: &SackBlocks) -> SackUpdate {
        let mut u = SackUpdate::default();
        let all = blocks.as_slice();
        // RFC 2883 section 4: a D-SACK block is the first, and lies below
        // the cumulative ACK or inside the second block.
        if let Some(&(l, r)) = all.first() {
            let inside_second = all
                .get(1)
                .is_some_and(|&(l2, r2)| distance(l2, l) >= 0 && distance(r, r2) >= 0);
            if distance(l, r) > 0 && (distance(una, r) <= 0 || inside_second) {
                u.dsack = true;
            }
        }
        let span = distance(una, snd_max);
        for &(l, r) in &all[usize::from(u.dsack)..] {
            let (lo, hi) = (distance(una, l).max(0), distance(una, r));
            if distance(l, r) <= 0 || hi <= 0 || hi > span {
                u.ignored += 1;
                continue;
            }
            if !self.insert(una, (una.wrapping_add(lo as u32), r)) {
                u.dropped += 1;
            }
        }
        u
    }

    /// Merges block `b` (inside the window) into the scoreboard; false
    /// when it touches no block and the scoreboard is full.
    fn insert(&mut self, una: u32, b: Block) -> bool {
        let off = |x: u32| distance(una, x);
        let first = self.blocks.partition_point(|x| off(x.1) < off(b.0));
        let past = self.blocks.partition_point(|x| off(x.0) <= off(b.1));
        if first == past {
            if self.blocks.len() >= Self::MAX {
                return false;
            }
            self.blocks.insert(first, b);
            return true;
        }
        let lo = if off(self.blocks[first].0) < off(b.0) {
            self.blocks[first].0
        } else {
            b.0
        };
        let hi = if off(self.blocks[past - 1].1) > off(b.1) {
            self.blocks[past - 1].1
        } else {
            b.1
        };
        self.blocks.drain(first + 1..past);
        self.blocks[first] = (lo, hi);
        true
    }

    /// SND.UNA moved to `una`: what it passed is acknowledged, not SACKed.
    pub fn acked(&mut self, una: u32) {
        let gone = self.blocks.partition_point(|b| distance(una, b.1) <= 0);
        self.blocks.drain(..gone);
        if let Some(b) = self.blocks.first_mut() {
            if distance(una, b.0) < 0 {
                b.0 = una;
            }
        }
    }

    pub fn clear(&mut self) {
        self.blocks.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The blocks, lowest first.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Bytes SACKed (RFC 6675's count of SACKed octets).
    pub fn sacked(&self) -> u32 {
        self.blocks.iter().map(|b| b.1.wrapping_sub(b.0)).sum()
    }

    /// Bytes SACKed above `seq`.
    pub fn sacked_above(&self, seq: u32) -> u32 {
        self.blocks
            .iter()
            .map(|&(l, r)| {
                let from = if distance(seq, l) > 0 { l } else { seq };
                distance(from, r).max(0) as u32
            })
            .sum()
    }

    /// One past the highest byte SACKed.
    pub fn high(&self) -> Option<u32> {
        self.blocks.last().map(|b| b.1)
    }

    /// The holes (not SACKed) in [from, to), in sequence order.
    pub fn holes(&self, from: u32, to: u32) -> impl Iterator<Item = Block> + '_ {
        let mut at = from;
        let mut blocks = self.blocks.iter();
        std::iter::from_fn(move || loop {
            if distance(at, to) <= 0 {
                return None;
            }
            match blocks.next() {
                Some(&(_, r)) if distance(at, r) <= 0 => continue,
                Some(&(l, r)) if distance(at, l) <= 0 => at = r,
                Some(&(l, r)) => {
                    let end = if distance(l, to) < 0 { to } else { l };
                    let hole = (at, end);
                    at = r;
                    return Some(hole);
                }
                None => {
                    let hole = (at, to);
                    at = to;
                    return Some(hole);
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_block_goes_first_and_absorbs_what_it_merged() {
        let mut r = ReportedBlocks::default();
        r.record((2000, 3000));
        r.record((4000, 5000));
        r.record((6000, 7000));
        assert_eq!(
            r.option(None).as_slice(),
            &[(6000, 7000), (4000, 5000), (2000, 3000)]
        );
        // A segment 3000..4000 merges the first two intervals.
        r.record((2000, 5000));
        assert_eq!(r.option(None).as_slice(), &[(2000, 5000), (6000, 7000)]);
        r.trim(5000);
        assert_eq!(r.option(None).as_slice(), &[(6000, 7000)]);
    }

    #[test]
    fn at_most_four_blocks_are_kept_the_oldest_drop() {
        let mut r = ReportedBlocks::default();
        for i in 0..6u32 {
            r.record((i * 1000 + 100, i * 1000 + 200));
        }
        let o = r.option(None);
        assert_eq!(o.len(), 4);
        assert_eq!(o.first(), Some((5100, 5200)));
        assert_eq!(o.truncated(3).as_slice(), &o.as_slice()[..3]);
    }

    #[test]
    fn a_duplicate_is_reported_first() {
        let mut r = ReportedBlocks::default();
        r.record((2000, 3000));
        // Below RCV.NXT: the D-SACK block, then the interval.
        assert_eq!(
            r.option(Some((500, 1000))).as_slice(),
            &[(500, 1000), (2000, 3000)]
        );
        // Inside the interval: the duplicate, then the interval holding it.
        assert_eq!(
            r.option(Some((2100, 2200))).as_slice(),
            &[(2100, 2200), (2000, 3000)]
        );
    }

    #[test]
    fn the_scoreboard_merges_ignores_lies_and_sees_dsack() {
        let mut sb = Scoreboard::default();
        let blocks = |b: &[Block]| {
            let mut s = SackBlocks::default();
            for &x in b {
                s.push(x);
            }
            s
        };
        // SND.UNA 1000, SND.MAX 9000.
        let u = sb.update(1000, 9000, &blocks(&[(3000, 4000), (6000, 7000)]));
        assert_eq!(u, SackUpdate::default());
        assert_eq!(sb.blocks(), [(3000, 4000), (6000, 7000)]);
        // Beyond SND.MAX, empty, reversed: ignored.
        let u = sb.update(
            1000,
            9000,
            &blocks(&[(8000, 9500), (5000, 5000), (7000, 6500)]),
        );
        assert_eq!(u.ignored, 3);
        // Below the cumulative ACK: a D-SACK block; then a bridging one.
        let u = sb.update(1000, 9000, &blocks(&[(500, 1000), (4000, 6000)]));
        assert!(u.dsack);
        assert_eq!(sb.blocks(), [(3000, 7000)]);
        assert_eq!(sb.sacked(), 4000);
        assert_eq!(sb.sacked_above(5000), 2000);
        assert_eq!(
            sb.holes(1000, 9000).collect::<Vec<_>>(),
            [(1000, 3000), (7000, 9000)]
        );
        assert_eq!(sb.holes(3500, 7000).collect::<Vec<_>>(), []);
        // Inside the second block: D-SACK too.
        assert!(
            sb.update(1000, 9000, &blocks(&[(3100, 3200), (3000, 7000)]))
                .dsack
        );
        sb.acked(3500);
        assert_eq!(sb.blocks(), [(3500, 7000)]);
        sb.acked(7000);
        assert!(sb.is_empty());
    }

    #[test]
    fn the_scoreboard_is_bounded_and_counts_what_it_drops() {
        let mut sb = Scoreboard::default();
        for i in 0..Scoreboard::MAX as u32 + 3 {
            let l = 2000 + i * 200;
            sb.update(1000, 100_000, &SackBlocks::one((l, l + 100)));
        }
        assert_eq!(sb.blocks().len(), Scoreboard::MAX);
        let l = 2000 + (Scoreboard::MAX as u32 + 10) * 200;
        assert_eq!(
            sb.update(1000, 100_000, &SackBlocks::one((l, l + 100)))
                .dropped,
            1
        );
    }

    #[test]
    fn blocks_wrap_around_sequence_space() {
        let mut r = ReportedBlocks::default();
        r.record((u32::MAX - 100, 200));
        r.record((300, 400));
        r.trim(250);
        assert_eq!(r.option(None).as_slice(), &[(300, 400)]);
    }
}
