//! Proportional Rate Reduction (RFC 6937): how much a sender may send
//! during a fast recovery, so that the window comes down to the
//! congestion control's target (ssthresh) smoothly, one segment for every
//! so many delivered, instead of falling silent until `pipe` drains below
//! the halved window and then sending in a burst (RFC 6675 alone).
//!
//! - While `pipe` is above ssthresh, sends are proportional to what the
//!   receiver got: `ceil(prr_delivered * ssthresh / RecoverFS) - prr_out`
//!   (section 3).
//! - Once it is at or below, Slow Start Reduction Bound (PRR-SSRB) brings
//!   it back up to ssthresh no faster than slow start: each ACK allows
//!   what it delivered plus one segment (section 3, `limit`).
//! - The first segment of an episode always goes (RFC 6937bis section
//!   6's forward progress: the fast retransmit itself).
//!
//! The data path's congestion control runs in the control plane, once per
//! interval (thesis section 4.2), so ssthresh is the window it last set:
//! the old window until its next run, the reduced one after.

use order::seq::distance;

/// One episode's accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prr {
    /// FlightSize when the episode began (RecoverFS: SND.MAX - SND.UNA).
    recover_fs: u32,
    /// Bytes the receiver got during the episode (prr_delivered).
    delivered: u64,
    /// Bytes sent during the episode (prr_out).
    out: u64,
    /// PRR-SSRB's allowance of the latest ACK: what it delivered plus a
    /// segment, less what was sent since.
    ack_allowance: u32,
    /// SND.UNA and the bytes SACKed at the latest ACK: what the next
    /// one delivered is counted from.
    una: u32,
    sacked: u32,
}

impl Prr {
    /// An episode begins with `recover_fs` bytes in flight, SND.UNA at
    /// `una` and `sacked` bytes SACKed.
    pub fn begin(recover_fs: u32, una: u32, sacked: u32) -> Self {
        Prr {
            recover_fs: recover_fs.max(1),
            delivered: 0,
            out: 0,
            ack_allowance: 0,
            una,
            sacked,
        }
    }

    /// An ACK of the episode: DeliveredData is how far SND.UNA moved plus
    /// the change in SACKed bytes (RFC 6937 section 3).
    pub fn on_ack(&mut self, una: u32, sacked: u32, mss: u32) {
        let cumulative = i64::from(distance(self.una, una).max(0));
        let delivered = (cumulative + i64::from(sacked) - i64::from(self.sacked)).max(0) as u32;
        self.una = una;
        self.sacked = sacked;
        self.delivered += u64::from(delivered);
        self.ack_allowance = delivered.saturating_add(mss);
    }

    /// `len` bytes went during the episode.
    pub fn on_send(&mut self, len: u32) {
        self.out += u64::from(len);
        self.ack_allowance = self.ack_allowance.saturating_sub(len);
    }

    /// Bytes that may go now with `pipe` in flight and the target
    /// `ssthresh` (sndcnt).
    pub fn quota(&self, pipe: u32, ssthresh: u32, mss: u32) -> u32 {
        let sndcnt = if pipe > ssthresh {
            let due = (self.delivered * u64::from(ssthresh)).div_ceil(u64::from(self.recover_fs));
            due.saturating_sub(self.out)
        } else {
            let caught_up = self.delivered.saturating_sub(self.out);
            let limit = caught_up.max(u64::from(self.ack_allowance));
            limit.min(u64::from(ssthresh - pipe))
        };
        let first = if self.out == 0 { mss } else { 0 };
        sndcnt.max(u64::from(first)).min(u64::from(u32::MAX)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    /// RFC 6937 section 4's example: 20 segments in flight, one lost,
    /// ssthresh half the window. Each ACK delivers one segment; PRR sends
    /// one segment for every two (after the retransmission itself),
    /// where RFC 6675 alone would send nothing for ten ACKs and then one
    /// per ACK. By the end ssthresh is in flight.
    #[test]
    fn a_halved_window_sends_one_segment_per_two_delivered() {
        let ssthresh = 10 * MSS;
        let mut p = Prr::begin(20 * MSS, 0, 0);
        let mut pipe = 19 * MSS;
        assert_eq!(
            p.quota(pipe, ssthresh, MSS),
            MSS,
            "the fast retransmit goes"
        );
        p.on_send(MSS);
        pipe += MSS;
        let mut sent_per_ack = Vec::new();
        for i in 1..=18 {
            // An ACK SACKs one more segment: one delivered, one less in flight.
            p.on_ack(0, i * MSS, MSS);
            pipe -= MSS;
            let mut n = 0;
            while p.quota(pipe, ssthresh, MSS) >= MSS {
                p.on_send(MSS);
                pipe += MSS;
                n += 1;
            }
            sent_per_ack.push(n);
        }
        assert_eq!(sent_per_ack.iter().sum::<u32>(), 8, "{sent_per_ack:?}");
        assert!(sent_per_ack.iter().all(|&n| n <= 1), "{sent_per_ack:?}");
        assert_eq!(pipe, ssthresh, "the episode ends with ssthresh in flight");
    }

    /// Below ssthresh (more was lost than the reduction), PRR-SSRB grows
    /// `pipe` back as slow start would: each ACK allows what it delivered
    /// plus one segment, never beyond ssthresh.
    #[test]
    fn below_ssthresh_each_ack_allows_its_delivery_and_one_segment() {
        let ssthresh = 10 * MSS;
        let mut p = Prr::begin(20 * MSS, 0, 0);
        p.on_send(MSS);
        p.on_ack(0, 2 * MSS, MSS);
        // 4 segments in flight: the ACK delivered two, so three may go.
        assert_eq!(p.quota(4 * MSS, ssthresh, MSS), 3 * MSS);
        p.on_send(3 * MSS);
        assert_eq!(p.quota(7 * MSS, ssthresh, MSS), 0);
        // Never past ssthresh.
        p.on_ack(MSS, 2 * MSS, MSS);
        assert_eq!(p.quota(ssthresh - 500, ssthresh, MSS), 500);
    }

    /// SND.UNA passing SACKed bytes delivers only what was not SACKed
    /// before; a SACK block reneged (fewer SACKed bytes) delivers nothing.
    #[test]
    fn delivered_data_counts_each_byte_once() {
        let mut p = Prr::begin(10 * MSS, 0, 0);
        p.on_ack(0, 3 * MSS, MSS);
        p.on_ack(4 * MSS, 0, MSS);
        p.on_ack(4 * MSS, 0, MSS);
        assert_eq!(p.delivered, u64::from(4 * MSS));
    }
}
