//! Congestion control, out of band (thesis section 4.3.4; Laminar section
//! 5.3.2.1 describes the same split): the data path only accumulates
//! per-flow counters (acknowledged bytes, ECN-Echo-marked acknowledged
//! bytes, fast retransmits, RTT samples; post-processing's *Stats*), and
//! the control plane runs a policy over the counters' deltas once per
//! control interval, writing back a window and, optionally, a rate that
//! the flow scheduler ([`crate::wheel`]) enforces.
//!
//! Two policies behind [`CongestionControl`]:
//! - [`NewReno`]: RFC 5681 slow start and congestion avoidance (with RFC
//!   3465 byte counting, since the policy sees bytes, not ACKs), RFC 6582's
//!   one reduction per recovery episode. It does not negotiate ECN.
//! - [`Dctcp`]: RFC 8257: the fraction F of ECN-Echo-marked bytes per
//!   observation window (about one window of data) drives
//!   `alpha = (1 - g) alpha + g F` with g = 1/16, and a window with marks
//!   is cut by `alpha / 2` once; losses are handled as NewReno does.
//!
//! The out-of-band policy sees an interval's acknowledged bytes as one
//! aggregate, so slow start grows by all of them (RFC 3465 with no per-ACK
//! limit L) and "once per window" is counted in acknowledged bytes: after
//! a reduction, the next `cwnd`-before-the-cut bytes acknowledged belong to
//! the same episode (RFC 6582's `recover`, in bytes rather than a sequence
//! number, which the control plane does not see).

use std::fmt;
use std::str::FromStr;

/// What the data path counted for one flow during one control interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowStats {
    /// Bytes newly acknowledged.
    pub acked: u64,
    /// Of those, bytes acknowledged by ACKs carrying ECN-Echo.
    pub ecn_acked: u64,
    /// Recovery episodes begun without a timeout (three duplicate ACKs,
    /// or SACK blocks: RFC 6675).
    pub fast_retransmits: u32,
    /// Retransmission timeouts.
    pub timeouts: u32,
    /// The smoothed RTT, microseconds, if any sample was taken.
    pub srtt_us: Option<u32>,
}

/// What a policy writes for a flow: the most bytes in flight, and a
/// transmit rate in bytes per second (None: no rate limit, the scheduler's
/// work-conserving round-robin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub cwnd: u32,
    pub rate: Option<u64>,
}

/// A congestion control policy for one flow, run by the control plane.
pub trait CongestionControl: Send {
    /// The policy's name, as Linux's TCP_CONGESTION spells it.
    fn name(&self) -> &'static str;
    /// Whether the flow negotiates ECN and marks its data ECN-capable
    /// (RFC 3168): only a policy that reacts to ECN-Echo should.
    fn ecn(&self) -> bool;
    /// One control interval's counters in, the flow's new limits out.
    fn update(&mut self, stats: &FlowStats) -> Limits;
    /// The limits now, without new counters.
    fn limits(&self) -> Limits;
    /// Whether the next data segment should carry CWR (RFC 3168 section
    /// 6.1.2: the sender reduced its window after an ECN-Echo). Reading
    /// it clears it.
    fn take_cwr(&mut self) -> bool {
        false
    }
}

/// Which policy a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    #[default]
    NewReno,
    Dctcp,
}

impl Policy {
    /// Whether connections under this policy negotiate ECN.
    pub fn ecn(self) -> bool {
        self == Policy::Dctcp
    }

    /// A fresh policy instance for a flow with segments of `mss` bytes.
    /// `pacing`: also write a rate derived from the window and the RTT.
    pub fn build(self, mss: u32, pacing: bool) -> Box<dyn CongestionControl> {
        match self {
            Policy::NewReno => Box::new(NewReno::new(mss, pacing)),
            Policy::Dctcp => Box::new(Dctcp::new(mss, pacing)),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::NewReno => "reno",
            Policy::Dctcp => "dctcp",
        })
    }
}

/// A policy name that is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown congestion control '{0}': expected reno or dctcp")]
pub struct UnknownPolicy(pub String);

impl FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, UnknownPolicy> {
        match s {
            "reno" | "newreno" => Ok(Policy::NewReno),
            "dctcp" => Ok(Policy::Dctcp),
            _ => Err(UnknownPolicy(s.to_string())),
        }
    }
}

/// RFC 6928's initial window: 10 segments.
const INITIAL_SEGMENTS: u32 = 10;
/// The window never grows past this (the largest scaled TCP window, RFC
/// 7323 section 2.3).
const MAX_CWND: u32 = 1 << 30;

/// The window arithmetic both policies share (RFC 5681, RFC 3465, RFC
/// 6582).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub mss: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    /// Bytes acknowledged in congestion avoidance not yet turned into
    /// window (RFC 3465 section 2.1).
    ca_acked: u32,
    /// Bytes still to be acknowledged before a new loss or mark signal
    /// may cut the window again (RFC 6582's `recover`, in bytes).
    recover: u32,
    /// Write a rate derived from the window and the RTT.
    pacing: bool,
}

impl Window {
    pub fn new(mss: u32, pacing: bool) -> Self {
        let mss = mss.max(1);
        Window {
            mss,
            cwnd: INITIAL_SEGMENTS * mss,
            ssthresh: MAX_CWND,
            ca_acked: 0,
            recover: 0,
            pacing,
        }
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Whether a cut happened within the last window of data.
    pub fn recovering(&self) -> bool {
        self.recover > 0
    }

    /// Counts `acked` bytes against the current episode; returns the ones
    /// acknowledged after it ended.
    fn settle(&mut self, acked: u64) -> u64 {
        let n = acked.min(u64::from(self.recover));
        self.recover -= n as u32;
        acked - n
    }

    /// Slow start, then congestion avoidance (RFC 5681 section 3.1).
    fn grow(&mut self, acked: u64) {
        let mut acked = acked.min(u64::from(MAX_CWND)) as u32;
        if self.in_slow_start() {
            let n = acked.min(self.ssthresh - self.cwnd);
            self.cwnd += n;
            acked -= n;
        }
        // One segment per window acknowledged (RFC 3465 section 2.1).
        self.ca_acked += acked;
        while self.ca_acked >= self.cwnd {
            self.ca_acked -= self.cwnd;
            self.cwnd = (self.cwnd + self.mss).min(MAX_CWND);
        }
    }

    /// Cuts the window to `to` (at least two segments) and opens an
    /// episode one pre-cut window long (RFC 5681 equation 4, RFC 6582).
    fn cut(&mut self, to: u32) {
        self.recover = self.cwnd;
        self.ssthresh = to.max(2 * self.mss);
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
    }

    /// RFC 5681 section 3.1: after a timeout, ssthresh is half the window
    /// and the window one segment ("loss window").
    fn timeout(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
        self.cwnd = self.mss;
        self.ca_acked = 0;
        self.recover = 0;
    }

    /// One interval's reaction, in RFC 5681/6582 order: a timeout
    /// collapses the window; otherwise the acknowledged bytes first settle
    /// the current episode, then, outside an episode, a fast retransmit
    /// halves the window and an ECN mark (a policy that reacts to them
    /// passes the factor it cuts by) cuts it; with no cut the bytes past
    /// the episode grow it.
    fn step(&mut self, s: &FlowStats, mark_factor: Option<f64>) -> Reaction {
        if s.timeouts > 0 {
            self.timeout();
            return Reaction::Timeout;
        }
        let fresh = self.settle(s.acked);
        if !self.recovering() {
            if s.fast_retransmits > 0 {
                self.cut(self.cwnd / 2);
                return Reaction::LossCut;
            }
            if let Some(f) = mark_factor {
                self.cut((f64::from(self.cwnd) * f) as u32);
                return Reaction::MarkCut;
            }
        }
        self.grow(fresh);
        Reaction::Grew
    }

    /// Linux's pacing rate (`tcp_update_pacing_rate`): twice the window
    /// per RTT in slow start, 1.2 times in congestion avoidance, so the
    /// window, not the pace, is what limits a flow once the RTT is known.
    pub fn limits(&self, srtt_us: Option<u32>) -> Limits {
        let rate = match srtt_us {
            Some(rtt) if self.pacing && rtt > 0 => {
                let per_rtt = u64::from(self.cwnd) * if self.in_slow_start() { 20 } else { 12 };
                Some(per_rtt * 100_000 / u64::from(rtt))
            }
            _ => None,
        };
        Limits {
            cwnd: self.cwnd,
            rate,
        }
    }
}

/// What one interval did to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reaction {
    Timeout,
    LossCut,
    MarkCut,
    Grew,
}

/// NewReno (RFC 5681, RFC 6582), without ECN.
#[derive(Debug, Clone)]
pub struct NewReno {
    pub window: Window,
    srtt_us: Option<u32>,
}

impl NewReno {
    pub fn new(mss: u32, pacing: bool) -> Self {
        NewReno {
            window: Window::new(mss, pacing),
            srtt_us: None,
        }
    }
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn ecn(&self) -> bool {
        false
    }

    fn update(&mut self, s: &FlowStats) -> Limits {
        self.srtt_us = s.srtt_us.or(self.srtt_us);
        self.window.step(s, None);
        self.limits()
    }

    fn limits(&self) -> Limits {
        self.window.limits(self.srtt_us)
    }
}

/// RFC 8257 section 4.2's weight of a new observation: g = 1/16.
pub const DCTCP_G: f64 = 1.0 / 16.0;

/// DCTCP (RFC 8257).
#[derive(Debug, Clone)]
pub struct Dctcp {
    pub window: Window,
    /// The estimate of the fraction of bytes marked, in [0, 1].
    pub alpha: f64,
    /// The current observation window: bytes acknowledged, of them marked,
    /// and how many bytes it spans (the window when it began).
    obs_acked: u64,
    obs_marked: u64,
    obs_span: u64,
    cwr_pending: bool,
    srtt_us: Option<u32>,
}

impl Dctcp {
    pub fn new(mss: u32, pacing: bool) -> Self {
        let window = Window::new(mss, pacing);
        Dctcp {
            window,
            // RFC 8257 section 3.3 leaves the start to the implementation;
            // 1 (as Linux's dctcp_alpha_on_init) makes the first reaction
            // a full halving, as a classic ECN sender's.
            alpha: 1.0,
            obs_acked: 0,
            obs_marked: 0,
            obs_span: u64::from(window.cwnd),
            cwr_pending: false,
            srtt_us: None,
        }
    }

    /// RFC 8257 section 3.3 steps 4-8: at the end of an observation
    /// window, `alpha = (1 - g) alpha + g F`.
    fn observe(&mut self, acked: u64, marked: u64) {
        self.obs_acked += acked;
        self.obs_marked += marked.min(acked);
        if self.obs_acked >= self.obs_span && self.obs_acked > 0 {
            let f = self.obs_marked as f64 / self.obs_acked as f64;
            self.alpha = (1.0 - DCTCP_G) * self.alpha + DCTCP_G * f;
            self.obs_acked = 0;
            self.obs_marked = 0;
            self.obs_span = u64::from(self.window.cwnd);
        }
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &'static str {
        "dctcp"
    }

    fn ecn(&self) -> bool {
        true
    }

    fn update(&mut self, s: &FlowStats) -> Limits {
        self.srtt_us = s.srtt_us.or(self.srtt_us);
        self.observe(s.acked, s.ecn_acked);
        // RFC 8257 section 3.3 steps 9-11: a window with marks is cut by
        // alpha / 2, once per window of data, and the next segment says so
        // with CWR.
        let mark = (s.ecn_acked > 0).then_some(1.0 - self.alpha / 2.0);
        if self.window.step(s, mark) == Reaction::MarkCut {
            self.cwr_pending = true;
        }
        self.limits()
    }

    fn limits(&self) -> Limits {
        self.window.limits(self.srtt_us)
    }

    fn take_cwr(&mut self) -> bool {
        std::mem::take(&mut self.cwr_pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn acked(n: u64) -> FlowStats {
        FlowStats {
            acked: n,
            ..FlowStats::default()
        }
    }

    #[test]
    fn new_reno_slow_start_then_avoidance_by_byte_counting() {
        let mut r = NewReno::new(MSS, false);
        assert_eq!(r.limits().cwnd, 10_000);
        // Slow start doubles the window per window acknowledged.
        assert_eq!(r.update(&acked(10_000)).cwnd, 20_000);
        r.window.ssthresh = 25_000;
        // 5000 bytes reach ssthresh; the other 15000 count towards one
        // segment per 25000 acknowledged.
        assert_eq!(r.update(&acked(20_000)).cwnd, 25_000);
        assert_eq!(r.update(&acked(9_999)).cwnd, 25_000);
        assert_eq!(r.update(&acked(1)).cwnd, 26_000);
        // Now 26000 bytes per segment.
        assert_eq!(r.update(&acked(25_999)).cwnd, 26_000);
        assert_eq!(r.update(&acked(1)).cwnd, 27_000);
    }

    #[test]
    fn new_reno_cuts_once_per_episode_and_collapses_on_timeout() {
        let mut r = NewReno::new(MSS, false);
        r.update(&acked(30_000)); // 40000, slow start
        let loss = FlowStats {
            acked: 4_000,
            fast_retransmits: 1,
            ..FlowStats::default()
        };
        assert_eq!(r.update(&loss).cwnd, 20_000);
        assert_eq!(r.window.ssthresh, 20_000);
        // The same episode (the 40000 bytes in flight at the cut): no cut.
        assert_eq!(r.update(&loss).cwnd, 20_000);
        // No growth until the episode's bytes are acknowledged ...
        assert_eq!(r.update(&acked(36_000)).cwnd, 20_000);
        // ... then avoidance: 20000 more bytes, one more segment.
        assert_eq!(r.update(&acked(20_000)).cwnd, 21_000);
        // A new loss cuts again.
        assert_eq!(r.update(&loss).cwnd, 10_500);
        let rto = FlowStats {
            timeouts: 1,
            ..FlowStats::default()
        };
        assert_eq!(r.update(&rto).cwnd, 1_000);
        assert_eq!(r.window.ssthresh, 5_250);
        // Slow start up to ssthresh, then avoidance.
        assert_eq!(r.update(&acked(4_250)).cwnd, 5_250);
        // The window never drops below two segments on a cut.
        let mut small = NewReno::new(MSS, false);
        small.window.cwnd = 3_000;
        assert_eq!(small.update(&loss).cwnd, 2_000);
    }

    #[test]
    fn pacing_rate_is_the_window_per_rtt_times_linux_ratios() {
        let mut r = NewReno::new(MSS, true);
        assert_eq!(r.limits().rate, None, "no RTT yet: no rate");
        let s = FlowStats {
            srtt_us: Some(1_000),
            ..FlowStats::default()
        };
        // 10000 bytes per ms in slow start, times 2: 20 MB/s.
        assert_eq!(r.update(&s).rate, Some(20_000_000));
        r.window.ssthresh = 10_000;
        assert_eq!(r.update(&s).rate, Some(12_000_000));
        assert_eq!(NewReno::new(MSS, false).update(&s).rate, None);
    }

    #[test]
    fn dctcp_alpha_follows_the_marked_fraction_with_g_one_sixteenth() {
        let mut d = Dctcp::new(MSS, false);
        d.window.ssthresh = 10_000; // congestion avoidance from the start
                                    // Window 1: 10000 bytes, none marked: alpha = 15/16; the window
                                    // grows one segment.
        assert_eq!(d.update(&acked(10_000)).cwnd, 11_000);
        assert_eq!(d.alpha, 15.0 / 16.0);
        // Window 2 (10000 bytes long): half marked, in two intervals. The
        // first mark cuts at once: 11000 * (1 - 15/32) = 5843.75.
        let half = FlowStats {
            acked: 5_000,
            ecn_acked: 5_000,
            ..FlowStats::default()
        };
        assert_eq!(d.update(&half).cwnd, 5_843);
        assert!(d.take_cwr());
        assert!(!d.take_cwr(), "CWR goes out once");
        assert_eq!(d.alpha, 15.0 / 16.0, "the window is not over yet");
        assert_eq!(d.update(&acked(5_000)).cwnd, 5_843);
        // F = 1/2: alpha = 15/16 * 15/16 + 1/32.
        let a2 = (15.0 / 16.0) * (15.0 / 16.0) + 0.5 / 16.0;
        assert_eq!(d.alpha, a2);
        // Window 3 spans 5843 bytes, all marked: F = 1. They fall in the
        // episode of the cut (11000 bytes from it), so no second cut.
        let marked = FlowStats {
            acked: 5_843,
            ecn_acked: 5_843,
            ..FlowStats::default()
        };
        assert_eq!(d.update(&marked).cwnd, 5_843);
        assert!(!d.take_cwr());
        let a3 = (1.0 - DCTCP_G) * a2 + DCTCP_G;
        assert_eq!(d.alpha, a3);
        // 157 bytes end the episode; a mark after them cuts by alpha / 2.
        let mark = FlowStats {
            acked: 200,
            ecn_acked: 200,
            ..FlowStats::default()
        };
        assert_eq!(d.update(&mark).cwnd, (5_843.0 * (1.0 - a3 / 2.0)) as u32);
        assert!(d.take_cwr());
    }

    #[test]
    fn dctcp_without_marks_decays_alpha_and_grows_like_new_reno() {
        let mut d = Dctcp::new(MSS, false);
        let mut r = NewReno::new(MSS, false);
        for _ in 0..20 {
            let w = d.limits().cwnd;
            assert_eq!(
                d.update(&acked(u64::from(w))),
                r.update(&acked(u64::from(w)))
            );
        }
        assert!(d.alpha < 0.3, "{}", d.alpha);
        assert!(d.ecn() && !r.ecn());
    }

    #[test]
    fn policy_names_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!("dctcp".parse::<Policy>().unwrap(), Policy::Dctcp);
        assert_eq!("reno".parse::<Policy>().unwrap(), Policy::NewReno);
        let e = "cubic".parse::<Policy>().unwrap_err();
        assert!(e.to_string().contains("reno or dctcp"), "{e}");
        assert_eq!(Policy::Dctcp.build(MSS, false).name(), "dctcp");
    }
}
