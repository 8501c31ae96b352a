//! The control plane's congestion control and the data path's flow
//! scheduler (thesis section 4.3.4), and TIME_WAIT.
//!
//! - Once per control interval the control plane reads each flow's
//!   counters from the post-processor's partition (acknowledged bytes,
//!   ECN-Echo-marked bytes, fast retransmits; timeouts it counted itself;
//!   the smoothed RTT), runs the flow's [`CongestionControl`] over the
//!   deltas and writes back a window and a rate. The data path never runs
//!   the policy; it only counts.
//! - The scheduler sends a flow's segments while its window has room and,
//!   if it has a rate, while its next transmission time has come; a flow
//!   with a rate waits in the [`Wheel`] for that time, one without goes
//!   round-robin. The rate is enforced on the bytes that leave the port
//!   (whole frames), so what a receiver's device counts is the rate set.
//! - ECN (RFC 3168): a policy that reacts to ECN-Echo offers ECN on its
//!   SYN, marks its new data ECT(0) (never a retransmission: section
//!   6.1.5) and sets CWR on the first segment after it cut its window. A
//!   peer's ECN-setup SYN is accepted under any policy: as a receiver the
//!   endpoint echoes CE marks as ECN-Echo either way.
//! - TIME_WAIT (RFC 9293 section 3.6): the side that sent its FIN first
//!   keeps the connection installed for `time_wait` after both FINs were
//!   acknowledged, so a FIN sent again is acknowledged again (and restarts
//!   the wait) and the 4-tuple is not handed to a new connection.

use std::time::Instant;

use order::seq::distance;

use super::{Endpoint, ToeError};
use crate::cc::{CongestionControl, FlowStats, Limits};
use crate::cycles::ticks;
use crate::protocol::{RxOutcome, TxGrant};
use crate::segment::Segment;
use crate::stages::{ConnIdx, FourTuple, Snapshot};
use crate::wheel::Wheel;

/// The wheel's slot time and size: 2 us slots (an MTU frame takes 1.2 us
/// at 10 Gbit/s) and an 8 ms horizon (one frame at 1.5 Mbit/s).
const SLOT_NS: u64 = 2_000;
const SLOTS: usize = 4096;
/// How far behind its schedule a rate-limited flow may fall and still make
/// the time up (in a burst): the endpoint is a userspace loop on a shared
/// host, so its thread can be descheduled for a while; after a longer gap
/// the flow restarts from now instead of bursting the whole gap out.
const CATCH_UP_NS: u64 = 1_000_000;

pub(super) fn wheel() -> Wheel {
    Wheel::new(SLOT_NS, SLOTS)
}

/// The control plane's congestion state of one flow.
pub(super) struct Flow {
    cc: Box<dyn CongestionControl>,
    limits: Limits,
    /// A rate the application set, bytes per second; the enforced rate is
    /// the lower of it and the policy's.
    rate_cap: Option<u64>,
    /// The enforced rate as time per byte, picoseconds (0: no rate; the
    /// thesis's control plane likewise hands the scheduler an interval per
    /// byte so it needs no division).
    ps_per_byte: u64,
    /// When the next frame may leave, ns on the endpoint's clock.
    next_tx_ns: u64,
    /// ECN was negotiated.
    ecn: bool,
    /// One past the highest byte sent: data below it is sent again.
    sent_high: u32,
    /// The post-processor's counters when the policy last ran.
    seen_acked: u64,
    seen_ecn: u64,
    seen_fretx: u32,
    /// Retransmission timeouts since the policy last ran.
    timeouts: u32,
    /// Retransmission timeouts since the last acknowledgement of new data
    /// (TCP_INFO's tcpi_retransmits and tcpi_backoff, as Linux's
    /// icsk_retransmits counts them).
    backoffs: u32,
    /// The segment being timed for an RTT sample: its end and when it
    /// left (one at a time, and none across a retransmission: Karn).
    probe: Option<(u32, Instant)>,
    /// We sent our FIN before the peer's arrived (RFC 9293 "active
    /// close"): the connection ends in TIME_WAIT.
    active_close: bool,
    time_wait_until: Option<Instant>,
}

/// A flow's congestion state, as the application can read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FlowInfo {
    /// The policy's name (TCP_CONGESTION's spelling).
    pub congestion: &'static str,
    pub cwnd: u32,
    /// The enforced rate, bytes per second (None: not rate-limited).
    pub rate: Option<u64>,
    /// Smoothed RTT, microseconds (None: no sample yet).
    pub srtt_us: Option<u32>,
    pub ecn: bool,
    pub time_wait: bool,
    /// Data segments sent again, over the connection's life.
    pub retrans_segs: u32,
    /// Retransmission timeouts since new data was last acknowledged.
    pub backoffs: u32,
}

impl Endpoint {
    /// Nanoseconds since the endpoint started, at the current poll.
    fn now_ns(&self) -> u64 {
        (self.now - self.start).as_nanos() as u64
    }

    /// A new connection's congestion state: `seq` is its first sequence
    /// number to send.
    pub(super) fn install_flow(&mut self, conn: ConnIdx, mss: u32, ecn: bool, seq: u32) {
        // The Laminar engine's data path is rate-based (credits, thesis
        // section 5.3.2.1): its policy always writes a rate.
        let rate_based = self.engine.laminar().is_some();
        let cc = self
            .cfg
            .congestion
            .build(mss, self.cfg.pacing || rate_based);
        let i = conn as usize;
        if self.flows.len() <= i {
            self.flows.resize_with(i + 1, || None);
        }
        self.flows[i] = Some(Flow {
            limits: cc.limits(),
            cc,
            rate_cap: None,
            ps_per_byte: 0,
            next_tx_ns: 0,
            ecn,
            sent_high: seq,
            seen_acked: 0,
            seen_ecn: 0,
            seen_fretx: 0,
            timeouts: 0,
            backoffs: 0,
            probe: None,
            active_close: false,
            time_wait_until: None,
        });
    }

    fn flow(&mut self, conn: ConnIdx) -> Option<&mut Flow> {
        self.flows.get_mut(conn as usize).and_then(Option::as_mut)
    }

    /// Limits `conn` to `rate` bytes per second on the wire (frames
    /// counted whole), or lifts the limit; the policy's own rate, if
    /// lower, still applies.
    pub fn set_rate(&mut self, conn: ConnIdx, rate: Option<u64>) -> Result<(), ToeError> {
        if rate == Some(0) {
            return Err(ToeError::Config("a rate of 0 bytes per second".into()));
        }
        let f = self.flow(conn).ok_or(ToeError::NotConnected)?;
        f.rate_cap = rate;
        f.ps_per_byte = ps_per_byte(f);
        self.engine_rate_changed(conn);
        Ok(())
    }

    /// The flow's congestion state.
    pub fn flow_info(&self, conn: ConnIdx) -> Option<FlowInfo> {
        let f = self.flows.get(conn as usize)?.as_ref()?;
        let post = self.post_state(conn);
        let srtt = post.rtt_est;
        Some(FlowInfo {
            congestion: f.cc.name(),
            cwnd: f.limits.cwnd,
            rate: (f.ps_per_byte > 0).then(|| 1_000_000_000_000 / f.ps_per_byte),
            srtt_us: (srtt > 0).then_some(srtt),
            ecn: f.ecn,
            time_wait: f.time_wait_until.is_some(),
            retrans_segs: post.cnt_retx,
            backoffs: f.backoffs,
        })
    }

    /// Queues `conn` with the scheduler if it has something to send and
    /// room in its window: in the wheel at its next transmission time if
    /// that has not come, else round-robin.
    pub(super) fn activate(&mut self, conn: ConnIdx) {
        let c = conn as usize;
        // A connection reset by the peer keeps its state until the
        // application closes it, but sends nothing more.
        if self.scheduled[c] || !self.proto.has_work(conn) || self.pre.route(conn).is_none() {
            return;
        }
        if !self.window_open(conn) {
            return;
        }
        self.scheduled[c] = true;
        let now_ns = self.now_ns();
        // A flow that was idle (nothing to send, or a closed window) owes
        // no time from before: its schedule restarts here, so what
        // `serve` counts as lag is the loop's lateness alone.
        if let Some(f) = self.flow(conn) {
            f.next_tx_ns = f.next_tx_ns.max(now_ns.saturating_sub(CATCH_UP_NS));
        }
        match self.not_due(conn, now_ns) {
            Some(at) => self.wheel.schedule_at(conn, at),
            None => self.wheel.schedule_now(conn),
        }
    }

    /// The flow's next transmission time, if it has a rate and that time
    /// is in a later slot.
    fn not_due(&self, conn: ConnIdx, now_ns: u64) -> Option<u64> {
        let f = self.flows.get(conn as usize)?.as_ref()?;
        (f.ps_per_byte > 0 && !self.wheel.due(f.next_tx_ns, now_ns)).then_some(f.next_tx_ns)
    }

    /// Whether the congestion window has room for a segment: in flight is
    /// the protocol stage's RFC 6675 `pipe` (sent and neither SACKed nor
    /// lost, plus what was sent again; after a timeout only what was sent
    /// since, RFC 5681 section 3.1's slow start from one segment). A flow
    /// with nothing in flight may always send one segment, a tail loss
    /// probe goes whatever the window (RFC 8985 section 7.3), and during
    /// a fast recovery PRR paces the reduction (RFC 6937); see
    /// [`crate::recovery::LossState::may_send`].
    fn window_open(&self, conn: ConnIdx) -> bool {
        let Some(Some(f)) = self.flows.get(conn as usize) else {
            return true;
        };
        let mss = self.control[conn as usize].as_ref().map_or(536, |c| c.mss);
        self.proto.may_send(conn, f.limits.cwnd, mss)
    }

    /// The flow scheduler: releases the flows whose time came, then serves
    /// the queue round-robin, at most `burst` segments per flow per round.
    pub(super) fn schedule(&mut self) {
        let now_ns = self.now_ns();
        self.wheel.advance(now_ns);
        for _ in 0..self.wheel.ready_len() {
            let Some(conn) = self.wheel.next_ready() else {
                break;
            };
            if std::mem::replace(&mut self.scheduled[conn as usize], false) {
                self.serve(conn, now_ns);
            }
        }
    }

    fn serve(&mut self, conn: ConnIdx, now_ns: u64) {
        let mss = self.control[conn as usize].as_ref().map_or(536, |c| c.mss);
        for _ in 0..self.cfg.burst {
            // Not yet its time (a flow released up to a slot early, or
            // one whose rate was just set): back to the wheel.
            if let Some(at) = self.not_due(conn, now_ns) {
                self.scheduled[conn as usize] = true;
                self.wheel.schedule_at(conn, at);
                return;
            }
            // Out of window (or of work): the next ACK brings it back.
            if !self.window_open(conn) {
                return;
            }
            let t = ticks();
            let grant = self.proto.tx(conn, mss);
            self.cycles.protocol += ticks() - t;
            let Some((g, snap)) = grant else {
                return;
            };
            self.transmit(conn, g, &snap);
            self.cycles.tx_segments += 1;
            let frame = self.out.last().map_or(0, Vec::len) as u64;
            if let Some(f) = self.flow(conn) {
                if f.ps_per_byte > 0 {
                    // Time advances from the previous departure, not the
                    // release, so a late release loses no rate, up to
                    // CATCH_UP_NS; beyond it the rate is lost and counted.
                    let earliest = now_ns.saturating_sub(CATCH_UP_NS);
                    let lag = earliest.saturating_sub(f.next_tx_ns);
                    f.next_tx_ns = f.next_tx_ns.max(earliest) + frame * f.ps_per_byte / 1_000;
                    self.counters.pacing_lag_ns += lag;
                }
            }
        }
        // Out of burst: the next round.
        self.activate(conn);
    }

    /// What a data segment carries for ECN: ECT(0) on new data of a flow
    /// that negotiated ECN, and CWR once after the policy cut its window
    /// (RFC 3168 sections 6.1.2 and 6.1.5). Also starts an RTT probe.
    pub(super) fn data_marks(&mut self, conn: ConnIdx, g: &TxGrant) -> (bool, bool) {
        let now = self.now;
        let Some(f) = self.flow(conn) else {
            return (false, false);
        };
        let end = g.seq.wrapping_add(g.len);
        let new_data = g.len > 0 && distance(f.sent_high, end) > 0;
        if new_data {
            f.sent_high = end;
            if f.probe.is_none() {
                f.probe = Some((end, now));
            }
        }
        let capable = f.ecn && f.cc.ecn();
        let cwr = capable && g.len > 0 && f.cc.take_cwr();
        if g.len > 0 && !new_data {
            self.post.retransmitted(conn);
        }
        (capable && new_data, cwr)
    }

    /// Whether the policy cut the window on ECN-Echo since it was last
    /// asked (another engine's next data segment then carries CWR).
    pub(super) fn take_cwr(&mut self, conn: ConnIdx) -> bool {
        self.flow(conn)
            .is_some_and(|f| f.ecn && f.cc.ecn() && f.cc.take_cwr())
    }

    /// After the protocol stage: an RTT sample when the timed segment is
    /// acknowledged (none across a retransmission), and in TIME_WAIT a FIN
    /// sent again restarts the wait (its ACK goes out as for any
    /// duplicate).
    pub(super) fn flow_feedback(
        &mut self,
        conn: ConnIdx,
        out: &RxOutcome,
        snap: &Snapshot,
        fin: bool,
    ) {
        let (now, wait) = (self.now, self.cfg.time_wait);
        let Some(f) = self.flow(conn) else {
            return;
        };
        if out.fast_retransmit {
            f.probe = None;
        }
        if out.acked > 0 {
            f.backoffs = 0;
        }
        let una = snap.seq.wrapping_sub(snap.tx_sent);
        let sample = if out.acked > 0 {
            f.probe_acked(una, now)
        } else {
            None
        };
        let mut restarted = false;
        if let Some(until) = f.time_wait_until.as_mut() {
            if fin {
                *until = now + wait;
                restarted = true;
            }
        }
        if let Some(us) = sample {
            self.post.rtt_sample(conn, us.max(1));
        }
        if restarted {
            self.counters.time_wait_acks += 1;
        }
    }

    /// An acknowledgement up to `una` on a path that does not go through
    /// the protocol stage (the Laminar engine's): the RTT sample if it
    /// covers the timed segment.
    pub(super) fn flow_acked(&mut self, conn: ConnIdx, una: u32) {
        let now = self.now;
        if let Some(us) = self.flow(conn).and_then(|f| f.probe_acked(una, now)) {
            self.post.rtt_sample(conn, us.max(1));
        }
    }

    /// New data was acknowledged on a path that does not go through the
    /// protocol stage (Laminar's, the pipeline's): the timeouts in a row
    /// start again from zero (TCP_INFO's tcpi_retransmits, as the kernel
    /// resets `icsk_retransmits` on an ACK of new data).
    pub(super) fn flow_progress(&mut self, conn: ConnIdx) {
        if let Some(f) = self.flow(conn) {
            f.backoffs = 0;
        }
    }

    /// A recovery episode began on a path that does not go through the
    /// protocol stage (Laminar's): the timed segment may be sent again,
    /// so it gives no sample (Karn).
    pub(super) fn flow_recovering(&mut self, conn: ConnIdx) {
        if let Some(f) = self.flow(conn) {
            f.probe = None;
        }
    }

    /// The control plane's retransmission timeout: the policy hears of it
    /// at its next run, and the timed segment is void (Karn).
    pub(super) fn flow_timeout(&mut self, conn: ConnIdx) {
        if let Some(f) = self.flow(conn) {
            f.timeouts += 1;
            f.backoffs += 1;
            f.probe = None;
        }
    }

    /// Once per control interval: every flow's counters through its
    /// policy, the new limits written back.
    pub(super) fn congestion_control(&mut self) {
        if self.now - self.last_control < self.cfg.control_interval {
            return;
        }
        self.last_control = self.now;
        for conn in 0..self.flows.len() as ConnIdx {
            if self.flows[conn as usize].is_none() {
                continue;
            }
            let p = self.post_state(conn);
            // An engine that counts for itself (Laminar's transmit side:
            // the post-processor sees none of its segments).
            let (acked, ecn, fretx) =
                self.engine_flow_counts(conn)
                    .unwrap_or((p.cnt_ackb, p.cnt_ecnb, p.cnt_fretx));
            let Some(f) = self.flow(conn) else {
                continue;
            };
            // Saturating: the source changes when transmission goes back
            // from the Laminar engine to the run-to-completion path.
            let stats = FlowStats {
                acked: acked.saturating_sub(f.seen_acked),
                ecn_acked: ecn.saturating_sub(f.seen_ecn),
                fast_retransmits: fretx.saturating_sub(f.seen_fretx),
                timeouts: std::mem::take(&mut f.timeouts),
                srtt_us: (p.rtt_est > 0).then_some(p.rtt_est),
            };
            (f.seen_acked, f.seen_ecn, f.seen_fretx) = (acked, ecn, fretx);
            f.limits = f.cc.update(&stats);
            f.ps_per_byte = ps_per_byte(f);
            self.engine_rate_changed(conn);
            self.activate(conn);
        }
        self.time_wait_timers();
    }

    /// The application closed `conn`: remember who closed first.
    pub(super) fn closing(&mut self, conn: ConnIdx) {
        let fin_received = self.conn_snapshot(conn).fin_received;
        if let Some(f) = self.flow(conn) {
            f.active_close = !fin_received;
        }
    }

    /// Whether a finished connection stays in TIME_WAIT instead of being
    /// freed now (starting the wait if it just finished).
    pub(super) fn in_time_wait(&mut self, conn: ConnIdx) -> bool {
        let until = self.now + self.cfg.time_wait;
        let Some(f) = self.flow(conn) else {
            return false;
        };
        if f.active_close && f.time_wait_until.is_none() {
            f.time_wait_until = Some(until);
        }
        f.time_wait_until.is_some()
    }

    /// A SYN for a 4-tuple in TIME_WAIT (RFC 9293 section 3.10.7.4, RFC
    /// 6191): one beyond RCV.NXT starts a new incarnation, so the old one
    /// is freed now (Linux's rule when there are no timestamps to
    /// compare); any other is an old duplicate, answered with an ACK and
    /// dropped. Returns whether the SYN was dropped.
    pub(super) fn syn_in_time_wait(&mut self, t: &FourTuple, seg: &Segment<'_>) -> bool {
        let Some(conn) = self.pre.lookup(t) else {
            return false;
        };
        if self.flow(conn).is_none_or(|f| f.time_wait_until.is_none()) {
            return false;
        }
        let snap = self.conn_snapshot(conn);
        if distance(snap.ack, seg.seq) > 0 {
            self.release(conn);
            return false;
        }
        self.send_ack(conn, &snap);
        true
    }

    /// Frees the connections whose TIME_WAIT is over.
    fn time_wait_timers(&mut self) {
        let now = self.now;
        let over: Vec<ConnIdx> = (0..self.flows.len() as ConnIdx)
            .filter(|&c| {
                self.flows[c as usize]
                    .as_ref()
                    .and_then(|f| f.time_wait_until)
                    .is_some_and(|t| now >= t)
            })
            .collect();
        for conn in over {
            self.release(conn);
        }
    }
}

impl Flow {
    /// The RTT sample, microseconds, if an acknowledgement up to `una`
    /// covers the timed segment (which is then done).
    fn probe_acked(&mut self, una: u32, now: Instant) -> Option<u32> {
        let (end, at) = self.probe?;
        if distance(end, una) < 0 {
            return None;
        }
        self.probe = None;
        Some((now - at).as_micros() as u32)
    }
}

/// The enforced rate as picoseconds per byte (0: none).
fn ps_per_byte(f: &Flow) -> u64 {
    let rate = match (f.limits.rate, f.rate_cap) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => match a.or(b) {
            Some(r) => r,
            None => return 0,
        },
    };
    (1_000_000_000_000 / rate.max(1)).max(1)
}
