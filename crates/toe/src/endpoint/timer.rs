//! The control plane's retransmission timer, one for every engine: the
//! retransmission timeout (RFC 6298 section 5, Linux's 200 ms minimum by
//! default, doubled per expiry up to 4 s) and, before it, the tail loss
//! probe timeout (RFC 8985 section 7.2). Thesis section 4.1 leaves
//! timeouts to the control plane; the data path only sends what the
//! protocol stage is then told to.

use std::time::{Duration, Instant};

/// The longest retransmission timeout, after backing off.
pub(super) const MAX_RTO: Duration = Duration::from_secs(4);
/// The shortest probe timeout: Linux's floor for TLP (10 ms), below which
/// a probe would race ACKs a receiver delays by a batch.
const MIN_PTO: Duration = Duration::from_millis(10);
/// RFC 8985 section 7.2's WCDelAckT: with one segment in flight the
/// receiver may delay its ACK this long, so the probe waits for it too.
const MAX_ACK_DELAY: Duration = Duration::from_millis(200);

/// What a timer expiry asks of the protocol stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expiry {
    /// Everything unacknowledged is lost (RFC 6298 section 5.4).
    Timeout,
    /// Send a tail loss probe (RFC 8985 section 7.3).
    Probe,
}

/// One connection's timer state.
#[derive(Debug, Clone, Copy)]
pub(super) struct RetransmitTimer {
    /// When data in flight last made progress (or started to be in flight).
    pub last_progress: Instant,
    pub rto: Duration,
    min_rto: Duration,
    /// A probe went since the last progress (one per tail, section 7.3).
    probed: bool,
}

impl RetransmitTimer {
    pub fn new(now: Instant, min_rto: Duration) -> Self {
        RetransmitTimer {
            last_progress: now,
            rto: min_rto,
            min_rto,
            probed: false,
        }
    }

    /// New data was acknowledged: the timer restarts from the minimum.
    pub fn progress(&mut self, now: Instant) {
        self.last_progress = now;
        self.rto = self.min_rto;
        self.probed = false;
    }

    /// Whether the timer expired for `in_flight` bytes, `mss` a segment,
    /// `srtt_us` the smoothed RTT (None before a sample: no probe). A timeout
    /// backs the timer off.
    pub fn expired(
        &mut self,
        now: Instant,
        in_flight: u32,
        mss: u32,
        srtt_us: Option<u32>,
    ) -> Option<Expiry> {
        if in_flight == 0 {
            return None;
        }
        let idle = now - self.last_progress;
        if idle >= self.rto {
            self.last_progress = now;
            self.rto = (self.rto * 2).min(MAX_RTO);
            return Some(Expiry::Timeout);
        }
        let srtt_us = srtt_us.filter(|_| !self.probed)?;
        let mut pto = (Duration::from_micros(u64::from(srtt_us)) * 2).max(MIN_PTO);
        if in_flight <= mss {
            pto += MAX_ACK_DELAY;
        }
        if idle < pto || pto >= self.rto {
            return None;
        }
        self.probed = true;
        Some(Expiry::Probe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_comes_before_the_timeout_once_per_tail() {
        let t0 = Instant::now();
        let min = Duration::from_millis(200);
        let mut t = RetransmitTimer::new(t0, min);
        let at = |ms| t0 + Duration::from_millis(ms);
        // 2 ms RTT: a probe after 10 ms (the floor), then nothing until the RTO.
        assert_eq!(t.expired(at(9), 10_000, 1448, Some(2000)), None);
        assert_eq!(
            t.expired(at(10), 10_000, 1448, Some(2000)),
            Some(Expiry::Probe)
        );
        assert_eq!(t.expired(at(150), 10_000, 1448, Some(2000)), None);
        assert_eq!(
            t.expired(at(200), 10_000, 1448, Some(2000)),
            Some(Expiry::Timeout)
        );
        assert_eq!(t.rto, min * 2);
        // One segment in flight: the receiver may delay its ACK 200 ms, so
        // the probe would come after the RTO: none.
        t.progress(at(300));
        assert_eq!(t.expired(at(499), 1000, 1448, Some(2000)), None);
        assert_eq!(
            t.expired(at(500), 1000, 1448, Some(2000)),
            Some(Expiry::Timeout)
        );
        // Nothing in flight, no RTT sample: nothing.
        t.progress(at(600));
        assert_eq!(t.expired(at(900), 0, 1448, Some(2000)), None);
        assert_eq!(t.expired(at(700), 10_000, 1448, None), None);
    }
}
