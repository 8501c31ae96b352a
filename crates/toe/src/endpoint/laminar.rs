//! The endpoint with the Laminar engine ([`crate::laminar`]): established
//! connections receive and transmit through Laminar's program in the
//! match-action emulator; the endpoint's control plane keeps the
//! handshake, teardown, ARP and neighbour discovery, and the
//! retransmission timeout.
//!
//! Translation between real frames and the program's segments:
//! - In: a segment becomes a program segment with its payload at its
//!   sequence number and its ACK, the window rescaled from the peer's
//!   scale to ours (the program has one window scale per connection, and
//!   uses it both ways). Options are not given to the program (it reads
//!   only a SACK block); FIN is not either
//!   (the program would drop the whole segment as an exception). IPv6
//!   addresses become 32-bit handles ([`AddressHandles`]).
//! - Out: the program's segments are built into frames with the
//!   connection's route and, when timestamps were negotiated, a timestamp
//!   option (RFC 7323: TSval our clock, TSecr the peer's latest TSval);
//!   when SACK was negotiated, the program's SACK block (its out-of-order
//!   interval). New data is ECN-capable under a policy that reacts to
//!   ECN-Echo.
//! - Congestion control (§5.3.2.1): the data path's counters (bytes
//!   acknowledged, from the program's `tx-next-ack` reports; bytes
//!   acknowledged with ECN-Echo, counted at translation; the program's
//!   recovery episodes; RTT samples of one timed segment of new data at
//!   a time, none across a retransmission) go to the connection's policy every control
//!   interval, and its rate becomes the credits each generator SYNC
//!   grants. The host also keeps what is in flight (RFC 6675's `pipe`)
//!   within the policy's window.
//! - Loss recovery is the other engines' ([`crate::recovery`]): the
//!   control plane keeps a [`LossState`] beside each transmit side, fed
//!   by every ACK it translates (its SACK blocks, duplicate ACKs), and
//!   pushes what it says was lost as TX commands at their own offsets,
//!   before new data. The thesis's transmit path goes back to
//!   `tx-next-ack` on the program's fast retransmit (§5.3.2.3); here that
//!   signal is only a SYNC, and nothing is pushed twice unless lost.
//!   The retransmission timer is the other engines' too, tail loss probe
//!   included.
//! - FIN in: once `rx-next-seq` reaches the FIN, the control plane moves
//!   `rx-next-seq` past it, acknowledges it and tells the application (end
//!   of stream); a FIN arriving before all data is dropped and comes again.
//! - FIN out: once the application closed and everything it sent was
//!   acknowledged, transmission goes back to the run-to-completion path,
//!   which sends the FIN and handles the ACKs that follow.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use order::seq::distance;
use order::wire::ecn::{set_ecn, Ecn};
use rmt::laminar::segment::TcpSegment;
use rmt::laminar::ConnectionSpec;

use super::laminar_rx::{RxStore, RxView};
use super::timer::{Expiry, RetransmitTimer};
use super::{Endpoint, Handshake, ToeError};
use crate::laminar::{
    network_segment, AddressHandles, LaminarCounters, LaminarEngine, LaminarError, RxWrite, TxSync,
};
use crate::protocol::{RxSummary, TxGrant};
use crate::recovery::{AckEffect, LossState, Sent};
use crate::sack::Block;
use crate::segment::{Flags, Header, SackBlocks, Segment, TcpOptions};
use crate::stages::{ConnIdx, FourTuple};

/// How often the generator's SYNC grants each connection credits
/// (§5.3.2.1). How many is congestion control's: the control plane turns
/// the policy's rate into credits per period ([`Endpoint::laminar_set_rate`]).
const CREDIT_PERIOD: Duration = Duration::from_micros(100);
/// Most SYNCs raised for one connection in one poll (a poll late by more
/// than this many periods, 1 ms, loses the rest, as a generator would not
/// queue them either; the run-to-completion path's scheduler makes up as
/// much).
const MAX_SYNCS_PER_POLL: u64 = 10;
/// The largest payload the control plane injects as one segment (an
/// IPv4 datagram's length is 16 bits).
const MAX_INJECT: usize = 65_000;
/// Most TX commands one connection pushes per poll.
const MAX_PUSH_PER_POLL: u32 = 64;

/// The Laminar engine and what the endpoint keeps per connection for it.
pub(super) struct LaminarPath {
    engine: LaminarEngine,
    conns: Vec<Option<LaminarConn>>,
    /// An engine failure met where it could not be returned, returned by
    /// the next poll.
    error: Option<LaminarError>,
    /// Generator batches raised so far.
    batch: u16,
    /// The program's 32-bit address fields for IPv6 addresses.
    handles: AddressHandles,
    /// Connections whose store has something to settle.
    storing: Vec<ConnIdx>,
}

/// One connection as the host (libTOE) sees it.
struct LaminarConn {
    /// Data is ready up to here (the program's latest notification).
    ready_seq: u32,
    /// The sequence number at position 0 of the receive buffer.
    rx_base: u32,
    /// Out-of-order data past the program's interval, and the SACK
    /// blocks its ACKs carry ([`RxStore`]).
    store: RxStore,
    /// Bytes the application read and the window has not got back yet.
    ungranted: u32,
    /// Our window scale (the program's, both ways).
    wscale: u8,
    /// The window the peer last heard from us, bytes.
    advertised: u32,
    /// The peer's latest TSval, when timestamps were negotiated.
    ts_recent: Option<u32>,
    timestamps: bool,
    /// SACK was negotiated (RFC 2018): the program's SACK block goes out.
    sack: bool,
    /// The peer's FIN was taken.
    fin_received: bool,
    /// The transmit side while Laminar has it.
    tx: Option<LaminarTx>,
}

/// The transmit side, in offsets of the transmit buffer (offset 0 is our
/// first sequence number; the program translates, §5.3.3).
struct LaminarTx {
    base_seq: u32,
    /// The application wrote up to here.
    queued: u32,
    /// New data pushed to the pipeline up to here (SND.MAX: what is lost
    /// is pushed again from the loss state, never by rewinding this).
    pushed: u32,
    /// Acknowledged up to here, as the last SYNC said.
    acked: u32,
    /// Credits left, as the last SYNC said, less what was pushed since.
    credits: u32,
    /// What congestion control reads (§5.3.2.1), counted since install:
    /// bytes acknowledged (from the program's `tx-next-ack` reports),
    /// those acknowledged by ACKs with ECN-Echo (counted where segments
    /// are translated for the program, which keeps no ECN counter), and
    /// the program's fast retransmits.
    acked_bytes: u64,
    ecn_acked_bytes: u64,
    fast_retransmits: u32,
    /// The highest ACK the peer sent (for the ECN-Echo count, and
    /// recovery's SND.UNA).
    ack_high: u32,
    /// The peer's window on its last ACK (a duplicate ACK repeats it).
    peer_window: u32,
    last_sync: Instant,
    /// The retransmission timer, the other engines' ([`super::timer`]).
    timer: RetransmitTimer,
    /// Loss recovery, the other engines' ([`crate::recovery`]), in
    /// sequence numbers: fed by the ACKs the control plane translates.
    loss: LossState,
    close_requested: bool,
}

impl LaminarTx {
    /// SND.UNA (the highest ACK the control plane translated: the
    /// program's SYNCs report it later) and SND.MAX.
    fn sent(&self) -> Sent {
        Sent {
            una: self.ack_high,
            max: self.base_seq.wrapping_add(self.pushed),
        }
    }

    /// The next segment to push, taken from the loss state if it is a
    /// probe or a retransmission: its first sequence number, length, and
    /// whether it is sent again; None when nothing may go (see
    /// [`Endpoint::laminar_push`]).
    fn next_push(&mut self, mss: u32, cwnd: u32, remote: u32) -> Option<(u32, u32, bool)> {
        self.loss.snd_mss = mss;
        let sent = self.sent();
        let new_len = self.queued.wrapping_sub(self.pushed).min(mss);
        let new_fits = new_len > 0 && sent.outstanding() + new_len <= remote;
        let probe = self.loss.probe_due();
        // A probe without new data to carry it sends the last segment
        // again (RFC 8985 section 7.3).
        let last_segment = probe && !new_fits && sent.outstanding() > 0;
        let (from, len, again) = match self.loss.next_hole(sent) {
            _ if last_segment => {
                let len = sent.outstanding().min(mss);
                (sent.max.wrapping_sub(len), len, true)
            }
            Some((a, b)) => (a, b.wrapping_sub(a), true),
            None if new_fits => (sent.max, new_len, false),
            None => return None,
        };
        if len == 0 || self.credits < len || !self.loss.may_send(sent, cwnd, len) {
            return None;
        }
        // Taken: the probe (whatever goes with it), the retransmission.
        if probe {
            self.loss.take_probe(sent, !last_segment);
        }
        if again && !last_segment {
            self.loss.take_retransmission(sent);
        }
        self.loss.on_send(len);
        Some((from, len, again))
    }

    /// An ACK as the control plane translates it: its ECN-Echo counted,
    /// and loss recovery told (RFC 5681 section 2's duplicate ACK: no
    /// data, the same window, data outstanding). An ACK of what was never
    /// pushed is the program's to reject (stage 7), and recovery does not
    /// hear of it.
    fn take_ack(&mut self, seg: &Segment<'_>, window: u32, sack: &SackBlocks) -> Option<AckEffect> {
        let before = self.sent();
        if distance(seg.ack, before.max) < 0 {
            return None;
        }
        self.count_ack(seg.ack, seg.flags.has(Flags::ECE));
        let after = self.sent();
        let advanced = after.una != before.una;
        let duplicate = !advanced
            && seg.ack == before.una
            && seg.payload.is_empty()
            && before.outstanding() > 0
            && window == self.peer_window;
        self.peer_window = window;
        Some(self.loss.on_ack(after, advanced, duplicate, sack))
    }
}

impl LaminarPath {
    pub(super) fn new(connections: u32) -> Result<Self, ToeError> {
        Ok(LaminarPath {
            engine: LaminarEngine::new(connections)?,
            conns: Vec::new(),
            error: None,
            batch: 0,
            handles: AddressHandles::default(),
            storing: Vec::new(),
        })
    }
}

impl Endpoint {
    /// What the Laminar engine counted (None with the Toe engine).
    pub fn laminar_counters(&self) -> Option<LaminarCounters> {
        self.engine.laminar().map(|p| p.engine.counters())
    }

    /// After the handshake: the connection goes into Laminar's tables and
    /// registers, its receive buffer at base address 0 of the double
    /// mapping, position 0 holding the peer's first sequence number.
    pub(super) fn install_laminar(
        &mut self,
        conn: ConnIdx,
        t: &FourTuple,
        h: &Handshake,
        remote_win: u32,
    ) {
        let post = self.post.state(conn);
        let (rx_size, wscale, timestamps) = (post.rx_size, post.rx_wscale, post.timestamps);
        let now = self.now;
        let ooo_bound = self.cfg.ooo_bound;
        let initial_cwnd = self
            .flow_info(conn)
            .map_or(u32::from(self.cfg.mss), |f| f.cwnd);
        let Some(path) = self.engine.laminar_mut() else {
            return;
        };
        let first = h.irs.wrapping_add(1);
        let base_seq = h.iss.wrapping_add(1);
        // Until congestion control first runs: the initial window per
        // credit period.
        let grant = initial_cwnd;
        let spec = ConnectionSpec {
            local_ip: path.handles.assign(t.local),
            local_port: t.local_port,
            remote_ip: path.handles.assign(t.remote),
            remote_port: t.remote_port,
            ctx: 0,
            rx_next_seq: first,
            rx_buffer_addr: 0,
            rx_buffer_size: rx_size,
            rx_avail: rx_size,
            tx_base_seq: base_seq,
            tx_next_ack: base_seq,
            tx_credits: grant,
            credit_grant: grant,
            tx_remote_avail: remote_win,
            wscale,
        };
        if let Err(e) = path.engine.install(conn as u16, &spec) {
            path.error.get_or_insert(e);
            return;
        }
        let i = conn as usize;
        if path.conns.len() <= i {
            path.conns.resize_with(i + 1, || None);
        }
        path.conns[i] = Some(LaminarConn {
            ready_seq: first,
            rx_base: first,
            store: RxStore::new(ooo_bound, first),
            ungranted: 0,
            wscale,
            advertised: rx_size,
            ts_recent: h.peer.timestamp.map(|(val, _)| val),
            timestamps,
            sack: h.peer.sack_permitted,
            fin_received: false,
            tx: Some(LaminarTx {
                base_seq,
                queued: 0,
                pushed: 0,
                acked: 0,
                credits: grant,
                acked_bytes: 0,
                ecn_acked_bytes: 0,
                fast_retransmits: 0,
                ack_high: base_seq,
                peer_window: remote_win,
                last_sync: now,
                timer: RetransmitTimer::new(now, self.cfg.min_rto),
                loss: LossState::default(),
                close_requested: false,
            }),
        });
    }

    pub(super) fn release_laminar(&mut self, conn: ConnIdx) {
        let Some(path) = self.engine.laminar_mut() else {
            return;
        };
        if let Some(Some(_)) = path.conns.get_mut(conn as usize).map(Option::take) {
            if let Err(e) = path.engine.remove(conn as u16) {
                path.error.get_or_insert(e);
            }
        }
    }

    fn laminar_conn(&mut self, conn: ConnIdx) -> Option<&mut LaminarConn> {
        self.engine
            .laminar_mut()?
            .conns
            .get_mut(conn as usize)?
            .as_mut()
    }

    fn laminar_now_ns(&self) -> u64 {
        (self.now - self.start).as_nanos() as u64
    }

    /// A data-path segment of `conn`: returns whether the Laminar engine
    /// took it. It takes every segment while it transmits (ACKs are its
    /// stage 5's), and segments with payload or FIN until the peer's FIN.
    pub(super) fn laminar_input(
        &mut self,
        conn: ConnIdx,
        seg: &Segment<'_>,
        summary: &RxSummary,
    ) -> bool {
        let fin = seg.flags.has(Flags::FIN);
        let now_ns = self.laminar_now_ns();
        let Some(lc) = self.laminar_conn(conn) else {
            return false;
        };
        let transmits = lc.tx.is_some();
        let receives = !lc.fin_received && (!seg.payload.is_empty() || fin);
        if !transmits && !receives {
            return false;
        }
        if let Some((val, _)) = seg.options.timestamp {
            lc.ts_recent = Some(val);
        }
        let mut began_storing = false;
        if receives {
            let was_idle = lc.store.is_idle();
            lc.store.offer(lc.ready_seq, seg.seq, seg.payload);
            began_storing = was_idle && !lc.store.is_idle();
        }
        let effect = match (lc.tx.as_mut(), seg.flags.has(Flags::ACK)) {
            (Some(tx), true) => tx.take_ack(seg, summary.window, &summary.sack),
            _ => None,
        };
        if let Some(e) = effect {
            self.laminar_loss_effect(conn, &e);
        }
        if began_storing {
            if let Some(p) = self.engine.laminar_mut() {
                p.storing.push(conn);
            }
        }
        let Some(lc) = self.laminar_conn(conn) else {
            return false;
        };
        let window = (summary.window >> lc.wscale).min(u32::from(u16::MAX)) as u16;
        let ack = (transmits && seg.flags.has(Flags::ACK)).then_some((seg.ack, window));
        let handles = self.engine.laminar().map(|p| &p.handles);
        let Some((src, dst)) =
            handles.and_then(|h| Some((h.get(seg.route.src)?, h.get(seg.route.dst)?)))
        else {
            return false;
        };
        if ack.is_some() || !seg.payload.is_empty() {
            let s = network_segment(
                (src, dst),
                (seg.route.src_port, seg.route.dst_port),
                seg.seq,
                ack,
                seg.payload,
            );
            self.laminar_try(|e| e.receive(now_ns, &s));
        }
        if transmits && seg.flags.has(Flags::ACK) {
            self.flow_acked(conn, seg.ack);
        }
        let fin_seq = seg.seq.wrapping_add(seg.payload.len() as u32);
        if receives && fin && self.laminar_reached(conn, fin_seq) {
            self.laminar_take_fin(conn, summary, fin_seq);
        }
        // Without Laminar transmitting, the acknowledgement goes to the
        // run-to-completion path when it acknowledges something new (a
        // segment with data is never a duplicate ACK, RFC 5681 section 2).
        let (una, _) = self.proto.una_and_max(conn);
        if !transmits && seg.flags.has(Flags::ACK) && distance(una, seg.ack) > 0 {
            let seq = self.proto.snapshot(conn).ack;
            let ack_only = RxSummary {
                seq,
                flags: Flags(Flags::ACK),
                len: 0,
                ts_val: None,
                ..*summary
            };
            let (out, snap) = self.proto.rx(conn, &ack_only);
            self.after_protocol(conn, seg, &out, &snap);
        }
        true
    }

    /// Runs an engine call; a failure is kept for the next poll to return.
    fn laminar_try<T>(
        &mut self,
        call: impl FnOnce(&mut LaminarEngine) -> Result<T, LaminarError>,
    ) -> Option<T> {
        let path = self.engine.laminar_mut()?;
        match call(&mut path.engine) {
            Ok(v) => Some(v),
            Err(e) => {
                path.error.get_or_insert(e);
                None
            }
        }
    }

    /// Whether every byte before `seq` has been received: the pipeline is
    /// run to idle first, then the control plane reads `rx-next-seq`.
    fn laminar_reached(&mut self, conn: ConnIdx, seq: u32) -> bool {
        self.laminar_apply();
        self.laminar_try(|e| e.rx_next_seq(conn as u16)) == Some(seq)
    }

    /// The peer's FIN, with all data before it in: the control plane moves
    /// `rx-next-seq` past it, the run-to-completion path's receive state
    /// catches up (it handles the connection's end), the application hears
    /// of the end of stream and the peer gets the FIN's ACK.
    fn laminar_take_fin(&mut self, conn: ConnIdx, summary: &RxSummary, fin_seq: u32) {
        if let Some(lc) = self.laminar_conn(conn) {
            lc.fin_received = true;
        }
        self.laminar_try(|e| e.fin_received(conn as u16, fin_seq));
        self.proto.received_elsewhere(conn, fin_seq);
        let fin_only = RxSummary {
            seq: fin_seq,
            len: 0,
            flags: Flags(Flags::FIN),
            ..*summary
        };
        let (out, snap) = self.proto.rx(conn, &fin_only);
        if let Some(app) = self.app.get_mut(conn as usize).and_then(Option::as_mut) {
            app.eof |= out.fin;
        }
        self.laminar_window_update(conn);
        self.maybe_release(conn, &snap);
    }

    /// Runs the pipeline to idle and applies what it produced, pushes what
    /// the applications queued, runs it again; returns a failure of the
    /// engine met since the last call.
    pub(super) fn laminar_run(&mut self) -> Result<(), ToeError> {
        if self.engine.laminar().is_none() {
            return Ok(());
        }
        self.laminar_apply();
        self.laminar_transmit();
        self.laminar_apply();
        match self.engine.laminar_mut().and_then(|p| p.error.take()) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Runs the pipeline to idle and applies what it produced: payload
    /// writes and notifications to the receive buffers, SYNCs and fast
    /// retransmits to the transmit sides, segments to the port.
    ///
    /// The stores are settled before the ACKs leave, so that they carry
    /// the blocks the receiver holds; what a store injected runs next.
    /// A pure ACK that a later segment of the same run acknowledges past
    /// does not leave: it tells the sender nothing the later one does
    /// not, and one that stops at a block the store holds (bytes sent
    /// again went in order before the store settled, or the store's
    /// block before its injection) is reneging to a sender (Linux's
    /// `tcp_check_sack_reneging`, RFC 2018 section 8).
    fn laminar_apply(&mut self) {
        let mut segments = Vec::new();
        while let Some(out) = self.laminar_try(LaminarEngine::run_to_idle) {
            for w in out.rx_data {
                self.laminar_write(w);
            }
            for s in out.syncs {
                self.laminar_acked(&s);
            }
            // The program's fast retransmit (§5.3.2.3's third duplicate
            // ACK) is a SYNC here: the control plane's loss state saw the
            // same ACKs, with their SACK blocks, and decides what to send
            // again.
            for r in out.retransmits {
                self.laminar_acked(&r);
            }
            let injected = self.laminar_settle();
            segments.extend(out.segments);
            if !injected {
                break;
            }
        }
        let segments: Vec<_> = segments
            .into_iter()
            .filter_map(|s| Some((self.laminar_segment_conn(&s)?, s)))
            .collect();
        let mut last_ack = HashMap::new();
        for (conn, s) in &segments {
            last_ack.insert(*conn, s.ack);
        }
        for (conn, s) in &segments {
            let superseded = s.payload.is_empty() && distance(s.ack, last_ack[conn]) > 0;
            if !superseded {
                self.laminar_send(*conn, s);
            }
        }
    }

    /// Settles the store of every connection that has something in it
    /// ([`RxStore::settle`]); returns whether any injected a segment.
    fn laminar_settle(&mut self) -> bool {
        let Some(storing) = self
            .engine
            .laminar_mut()
            .map(|p| std::mem::take(&mut p.storing))
        else {
            return false;
        };
        let mut injected = false;
        let mut still = Vec::new();
        for conn in storing {
            injected |= self.laminar_settle_conn(conn).is_some();
            if self
                .laminar_conn(conn)
                .is_some_and(|lc| !lc.store.is_idle())
            {
                still.push(conn);
            }
        }
        if let Some(p) = self.engine.laminar_mut() {
            p.storing.extend(still);
        }
        injected
    }

    /// Reads the program's receive state, places in the receive buffer
    /// what the store keeps, and injects what is in order now, as few
    /// segments as the format allows (each is acknowledged). Returns what
    /// it injected.
    fn laminar_settle_conn(&mut self, conn: ConnIdx) -> Option<Block> {
        let c = conn as u16;
        let view = self.laminar_try(|e| {
            Ok(RxView {
                next: e.rx_next_seq(c)?,
                window: e.rx_window(c)?,
                interval: e.rx_ooo_interval(c)?,
            })
        })?;
        let lc = self.laminar_conn(conn)?;
        let settled = lc.store.settle(view);
        let base = lc.rx_base;
        self.counters.refused_outside_interval += settled.refused;
        let app = self.app.get_mut(conn as usize).and_then(Option::as_mut)?;
        for (seq, bytes) in &settled.place {
            app.rx.write(seq.wrapping_sub(base), bytes);
        }
        let (lo, hi) = settled.reinject?;
        let mut bytes = vec![0; hi.wrapping_sub(lo) as usize];
        app.rx.read(lo.wrapping_sub(base), &mut bytes);
        let (Some(route), Some(handles)) = (
            self.pre.route(conn),
            self.engine.laminar().map(|p| &p.handles),
        ) else {
            return None;
        };
        let ends = handles.get(route.dst).zip(handles.get(route.src))?;
        let now_ns = self.laminar_now_ns();
        for (i, chunk) in bytes.chunks(MAX_INJECT).enumerate() {
            let seq = lo.wrapping_add((i * MAX_INJECT) as u32);
            let s = network_segment(ends, (route.dst_port, route.src_port), seq, None, chunk);
            self.laminar_try(|e| e.receive(now_ns, &s));
        }
        Some((lo, hi))
    }

    /// A DMA write: payload into the receive buffer, then the notification
    /// makes bytes readable (never before their copy, Fig. 4.6).
    fn laminar_write(&mut self, w: RxWrite) {
        let conn = ConnIdx::from(w.conn);
        let newly_ready = match self.laminar_conn(conn) {
            Some(lc) => match w.notify {
                Some(seq) if distance(lc.ready_seq, seq) > 0 => {
                    let n = seq.wrapping_sub(lc.ready_seq);
                    lc.ready_seq = seq;
                    n
                }
                _ => 0,
            },
            None => return,
        };
        let Some(app) = self.app.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        // The buffer's position 0 holds the first sequence number, as the
        // program's translation maps it; positions wrap at its size.
        app.rx.write(w.addr as u32, &w.payload);
        app.rx_ready += newly_ready;
    }

    /// A SYNC (or a fast retransmit) told the host how far the peer
    /// acknowledged: the transmit buffer frees that space.
    fn laminar_acked(&mut self, s: &TxSync) {
        let conn = ConnIdx::from(s.conn);
        let now = self.now;
        let Some(tx) = self.laminar_conn(conn).and_then(|c| c.tx.as_mut()) else {
            return;
        };
        let acked = s.tx_next_ack.wrapping_sub(tx.base_seq);
        let newly = acked.wrapping_sub(tx.acked);
        if newly == 0 || newly > tx.queued.wrapping_sub(tx.acked) {
            tx.credits = s.credits;
            return;
        }
        tx.acked = acked;
        tx.acked_bytes += u64::from(newly);
        tx.credits = s.credits;
        tx.timer.progress(now);
        if let Some(app) = self.app.get_mut(conn as usize).and_then(Option::as_mut) {
            app.tx_free += newly;
        }
        self.flow_progress(conn);
    }

    /// The connection a segment the program built belongs to.
    fn laminar_segment_conn(&self, s: &TcpSegment) -> Option<ConnIdx> {
        let family = self.addr;
        let h = &self.engine.laminar()?.handles;
        let t = FourTuple {
            local: h.address(family, s.src_ip)?,
            local_port: s.src_port,
            remote: h.address(family, s.dst_ip)?,
            remote_port: s.dst_port,
        };
        self.pre.lookup(&t)
    }

    /// A segment the program built for `conn`, as a frame on its route.
    fn laminar_send(&mut self, conn: ConnIdx, s: &TcpSegment) {
        // Without Laminar transmitting, the sequence number is the
        // run-to-completion path's.
        let transmits = self.laminar_conn(conn).is_some_and(|lc| lc.tx.is_some());
        let seq = if transmits {
            s.seq
        } else {
            self.proto.snapshot(conn).seq
        };
        // New data is ECN-capable under a policy that reacts to ECN-Echo,
        // and the first after a cut carries CWR (RFC 3168 sections 6.1.2,
        // 6.1.5); leaving, it starts an RTT probe (Karn: new data only).
        let (ect, cwr) = if transmits && !s.payload.is_empty() {
            let data = TxGrant {
                seq,
                pos: 0,
                len: s.payload.len() as u32,
                fin: false,
            };
            self.data_marks(conn, &data)
        } else {
            (false, false)
        };
        let sack = match self.laminar_conn(conn) {
            Some(lc) if !lc.fin_received => lc.store.sack(s.ack, s.sack),
            _ => SackBlocks::from(s.sack),
        };
        let h = Header {
            seq,
            ack: s.ack,
            flags: Flags(s.flags | if cwr { Flags::CWR } else { 0 }),
            window: s.window,
            options: TcpOptions {
                sack,
                ..TcpOptions::default()
            },
        };
        if self.laminar_frame(conn, h, &s.payload) && ect {
            if let Some(f) = self.out.last_mut() {
                set_ecn(f, Ecn::Ect0);
            }
        }
    }

    /// Sends a segment of `conn`, with a timestamp option when timestamps
    /// were negotiated (RFC 7323 section 3) and the program's SACK block
    /// only when SACK was (RFC 2018 section 3). Returns whether it was
    /// sent.
    fn laminar_frame(&mut self, conn: ConnIdx, mut h: Header, payload: &[u8]) -> bool {
        let Some(route) = self.pre.route(conn) else {
            return false;
        };
        let now_ms = self.now_ms();
        let Some(lc) = self.laminar_conn(conn) else {
            return false;
        };
        lc.advertised = u32::from(h.window) << lc.wscale;
        h.options.timestamp = lc.timestamps.then(|| (now_ms, lc.ts_recent.unwrap_or(0)));
        if !lc.sack {
            h.options.sack = SackBlocks::default();
        }
        self.emit(&route, &h, payload);
        true
    }

    /// The application read `n` bytes of a Laminar connection: a host SYNC
    /// hands the space back once a quarter of the buffer was read
    /// (libTOE's threshold, §5.3.1.7). Returns whether `conn` is one.
    pub(super) fn laminar_consumed(&mut self, conn: ConnIdx, n: u32) -> bool {
        let now_ns = self.laminar_now_ns();
        let quarter = self.cfg.rx_buffer.next_power_of_two() / 4;
        let mss = u32::from(self.cfg.mss);
        let Some(lc) = self.laminar_conn(conn) else {
            return false;
        };
        lc.ungranted += n;
        if lc.fin_received || lc.ungranted < quarter {
            return true;
        }
        let grant = std::mem::take(&mut lc.ungranted);
        let reopened = lc.advertised < mss;
        self.laminar_try(|e| e.sync(now_ns, conn as u16, grant));
        if reopened {
            self.laminar_apply();
            self.laminar_window_update(conn);
        }
        true
    }

    /// An ACK built by the control plane from the registers: after the
    /// peer's FIN, as a challenge ACK, and when the window reopened from
    /// below one segment (the program sends ACKs only for segments).
    fn laminar_window_update(&mut self, conn: ConnIdx) {
        let c = conn as u16;
        let Some((next, window)) = self.laminar_try(|e| Ok((e.rx_next_seq(c)?, e.rx_window(c)?)))
        else {
            return;
        };
        let proto_seq = self.proto.snapshot(conn).seq;
        let Some(lc) = self.laminar_conn(conn) else {
            return;
        };
        let scaled = (window >> lc.wscale).min(u32::from(u16::MAX)) as u16;
        let seq = match &lc.tx {
            Some(tx) => tx.base_seq.wrapping_add(tx.pushed),
            None => proto_seq,
        };
        let h = Header {
            seq,
            ack: next,
            flags: Flags(Flags::ACK),
            window: scaled,
            options: TcpOptions::default(),
        };
        self.laminar_frame(conn, h, &[]);
    }

    /// The next sequence number expected on `conn` while Laminar receives
    /// for it (its `rx-next-seq`; the run-to-completion path's lags).
    pub(super) fn laminar_rcv_nxt(&mut self, conn: ConnIdx) -> Option<u32> {
        let receives = self.laminar_conn(conn).is_some_and(|lc| !lc.fin_received);
        if !receives {
            return None;
        }
        self.laminar_apply();
        self.laminar_try(|e| e.rx_next_seq(conn as u16))
    }

    /// A challenge ACK (RFC 5961 section 3.2) from the registers, for a
    /// connection Laminar receives for. Returns whether it was sent.
    pub(super) fn laminar_challenge_ack(&mut self, conn: ConnIdx) -> bool {
        let receives = self.laminar_conn(conn).is_some_and(|lc| !lc.fin_received);
        if receives {
            self.laminar_window_update(conn);
        }
        receives
    }

    /// The application queued `n` bytes: Laminar's host side pushes them.
    /// Returns whether Laminar transmits for `conn`.
    pub(super) fn laminar_queued(&mut self, conn: ConnIdx, n: u32) -> bool {
        match self.laminar_conn(conn).and_then(|c| c.tx.as_mut()) {
            Some(tx) => {
                tx.queued = tx.queued.wrapping_add(n);
                true
            }
            None => false,
        }
    }

    /// The application closed: the FIN waits until Laminar's transmit
    /// side is all acknowledged. Returns whether Laminar transmits.
    pub(super) fn laminar_close(&mut self, conn: ConnIdx) -> bool {
        match self.laminar_conn(conn).and_then(|c| c.tx.as_mut()) {
            Some(tx) => {
                tx.close_requested = true;
                true
            }
            None => false,
        }
    }

    /// Once per poll for every connection Laminar transmits for: the
    /// generator's SYNCs for the credit periods that passed, then TX
    /// commands for what was queued, as far as credits and the peer's
    /// window allow, what recovery sends again first; the retransmission
    /// timer (timeout and tail loss probe); the hand-over
    /// to the FIN once the application closed and all was acknowledged.
    fn laminar_transmit(&mut self) {
        let conns: Vec<ConnIdx> = match self.engine.laminar() {
            Some(p) => (0..p.conns.len() as ConnIdx)
                .filter(|&c| {
                    p.conns[c as usize]
                        .as_ref()
                        .is_some_and(|lc| lc.tx.is_some())
                })
                .collect(),
            None => return,
        };
        for &conn in &conns {
            self.laminar_credit_syncs(conn);
        }
        self.laminar_apply();
        for conn in conns {
            self.laminar_timeout(conn);
            self.laminar_push(conn);
            self.laminar_maybe_fin(conn);
        }
    }

    /// The loss state of `conn`'s transmit side while Laminar has it,
    /// with its SND.UNA and SND.MAX.
    pub(super) fn laminar_loss(&self, conn: ConnIdx) -> Option<(&LossState, Sent)> {
        let path = self.engine.laminar()?;
        let tx = path.conns.get(conn as usize)?.as_ref()?.tx.as_ref()?;
        Some((&tx.loss, tx.sent()))
    }

    /// What congestion control reads for `conn` while Laminar transmits
    /// for it: bytes acknowledged, of them ECN-Echo-acknowledged, fast
    /// retransmits (all since install).
    pub(super) fn laminar_flow_counts(&self, conn: ConnIdx) -> Option<(u64, u64, u32)> {
        let path = self.engine.laminar()?;
        let tx = path.conns.get(conn as usize)?.as_ref()?.tx.as_ref()?;
        Some((tx.acked_bytes, tx.ecn_acked_bytes, tx.fast_retransmits))
    }

    /// The control plane's step after the policy ran (or the application
    /// capped the rate): the enforced rate becomes the credits each
    /// generator SYNC grants (§5.3.2.1), and credits held are cut to one
    /// window. The rate counts whole frames on the wire, as the
    /// run-to-completion path's scheduler does; credits count payload, so
    /// the grant leaves out each segment's headers. Before the first RTT
    /// sample the policy has no rate: the window per period.
    pub(super) fn laminar_set_rate(&mut self, conn: ConnIdx) {
        let transmits = self.laminar_conn(conn).is_some_and(|lc| lc.tx.is_some());
        let (Some(info), Some(c), true) = (
            self.flow_info(conn),
            self.control[conn as usize].as_ref(),
            transmits,
        ) else {
            return;
        };
        let mss = u64::from(c.mss);
        let timestamps = self.post.state(conn).timestamps;
        let ip = if self.addr.is_ipv4() { 20 } else { 40 };
        let frame = mss + 14 + ip + 20 + if timestamps { 12 } else { 0 };
        let period_ns = CREDIT_PERIOD.as_nanos() as u64;
        let grant = match info.rate {
            Some(rate) => (u128::from(rate) * u128::from(period_ns) * u128::from(mss)
                / (1_000_000_000 * u128::from(frame)))
            .clamp(1, u128::from(u32::MAX)) as u32,
            None => info.cwnd,
        };
        let max_credits = info.cwnd.max(grant);
        if let Some(tx) = self.laminar_conn(conn).and_then(|lc| lc.tx.as_mut()) {
            tx.credits = tx.credits.min(max_credits);
        }
        self.laminar_try(|e| e.set_credit_grant(conn as u16, grant, max_credits));
    }

    fn laminar_credit_syncs(&mut self, conn: ConnIdx) {
        let (now, now_ns) = (self.now, self.laminar_now_ns());
        let Some(path) = self.engine.laminar_mut() else {
            return;
        };
        let Some(tx) = path
            .conns
            .get_mut(conn as usize)
            .and_then(Option::as_mut)
            .and_then(|c| c.tx.as_mut())
        else {
            return;
        };
        // A connection with nothing to send and nothing unacknowledged
        // gets no SYNCs (§5.3.2.1: Laminar pauses them for inactive
        // connections); they resume a period after the application
        // queues data, with the credits it had left.
        if tx.queued == tx.acked {
            tx.last_sync = now;
            return;
        }
        let periods = ((now - tx.last_sync).as_nanos() / CREDIT_PERIOD.as_nanos()) as u64;
        if periods == 0 {
            return;
        }
        // The generator's clock keeps its phase (a poll between two
        // periods loses no part of one), unless the poll came too late.
        tx.last_sync = if periods > MAX_SYNCS_PER_POLL {
            let lost =
                (now - tx.last_sync).saturating_sub(CREDIT_PERIOD * MAX_SYNCS_PER_POLL as u32);
            self.counters.pacing_lag_ns += lost.as_nanos() as u64;
            now
        } else {
            tx.last_sync + CREDIT_PERIOD * periods as u32
        };
        for _ in 0..periods.min(MAX_SYNCS_PER_POLL) {
            path.batch = path.batch.wrapping_add(1);
            if let Err(e) = path.engine.credit_sync(now_ns, conn as u16, path.batch) {
                path.error.get_or_insert(e);
            }
        }
    }

    /// The control plane's retransmission timer ([`super::timer`], the
    /// other engines'; thesis §5.3.2.3 leaves timeouts to it): a timeout
    /// makes everything unacknowledged lost, a probe timeout makes the
    /// next push a tail loss probe ([`crate::recovery`]).
    fn laminar_timeout(&mut self, conn: ConnIdx) {
        let now = self.now;
        let mss = self.control[conn as usize].as_ref().map_or(536, |c| c.mss);
        let srtt_us = self.flow_info(conn).and_then(|f| f.srtt_us);
        let Some(tx) = self.laminar_conn(conn).and_then(|c| c.tx.as_mut()) else {
            return;
        };
        let sent = tx.sent();
        let expiry = tx.timer.expired(now, sent.outstanding(), mss, srtt_us);
        match expiry {
            Some(Expiry::Timeout) => tx.loss.enter(sent, true),
            Some(Expiry::Probe) => tx.loss.probe(sent),
            None => return,
        }
        if expiry == Some(Expiry::Timeout) {
            self.counters.timeouts += 1;
            self.flow_timeout(conn);
        } else {
            self.counters.tail_loss_probes += 1;
        }
    }

    /// What an ACK did to the loss state, into the counters; an episode
    /// that began is a fast retransmit for congestion control, and voids
    /// the timed segment (Karn).
    fn laminar_loss_effect(&mut self, conn: ConnIdx, e: &AckEffect) {
        self.counters.count_ack(e.sack, e.lost_retransmit);
        if !e.began {
            return;
        }
        self.counters.fast_retransmits += 1;
        self.flow_recovering(conn);
        if let Some(tx) = self.laminar_conn(conn).and_then(|c| c.tx.as_mut()) {
            tx.fast_retransmits += 1;
        }
    }

    /// TX commands, one segment each: first a tail loss probe or what
    /// loss recovery says was lost (at its own offset: the program takes
    /// a TX command anywhere in the window), then queued bytes. Each
    /// waits for credits to cover it whole (stage 8 lets one through
    /// while any are left, so pushing on a remainder would send more than
    /// the rate) and for room in congestion control's window, compared
    /// with RFC 6675's `pipe` (the host's check: credits carry the
    /// policy's rate, the window bounds what is in flight while the
    /// feedback of a rate change is on its way; a probe may exceed it by
    /// one segment, RFC 8985 section 7.3). New data also needs the peer's
    /// window as the program last took it (stage 9 drops what goes
    /// beyond).
    fn laminar_push(&mut self, conn: ConnIdx) {
        let (now, now_ns) = (self.now, self.laminar_now_ns());
        let mss = self.control[conn as usize].as_ref().map_or(536, |c| c.mss);
        let cwnd = self.flow_info(conn).map_or(u32::MAX, |f| f.cwnd);
        let Some(remote) = self.laminar_try(|e| e.tx_remote_avail(conn as u16)) else {
            return;
        };
        let mut payload = std::mem::take(&mut self.tx_payload);
        for _ in 0..MAX_PUSH_PER_POLL {
            let Some(tx) = self
                .engine
                .laminar_mut()
                .and_then(|p| p.conns.get_mut(conn as usize))
                .and_then(Option::as_mut)
                .and_then(|lc| lc.tx.as_mut())
            else {
                break;
            };
            let Some((from, len, again)) = tx.next_push(mss, cwnd, remote) else {
                break;
            };
            let Some(app) = self.app.get(conn as usize).and_then(Option::as_ref) else {
                break;
            };
            // Nothing was in flight: the retransmission timer starts now,
            // not at the last acknowledgement.
            if tx.sent().outstanding() == 0 {
                tx.timer.last_progress = now;
            }
            let offset = from.wrapping_sub(tx.base_seq);
            payload.resize(len as usize, 0);
            app.tx.read(offset, &mut payload);
            if !again {
                tx.pushed = tx.pushed.wrapping_add(len);
            }
            // A retransmission is counted as it leaves (`data_marks`).
            tx.credits = tx.credits.saturating_sub(len);
            if let Some(path) = self.engine.laminar_mut() {
                if let Err(e) = path.engine.transmit(now_ns, conn as u16, offset, &payload) {
                    path.error.get_or_insert(e);
                }
            }
        }
        self.tx_payload = payload;
    }

    /// The application closed and all it sent was acknowledged: the
    /// run-to-completion path takes transmission back (its state moved
    /// past the bytes Laminar sent and, before the peer's FIN, past those
    /// Laminar received) and sends the FIN.
    fn laminar_maybe_fin(&mut self, conn: ConnIdx) {
        let Some(lc) = self.laminar_conn(conn) else {
            return;
        };
        let Some(tx) = &lc.tx else {
            return;
        };
        if !tx.close_requested || tx.acked != tx.queued {
            return;
        }
        let sent = tx.queued;
        let fin_received = lc.fin_received;
        lc.tx = None;
        if !fin_received {
            if let Some(next) = self.laminar_try(|e| e.rx_next_seq(conn as u16)) {
                self.proto.received_elsewhere(conn, next);
            }
        }
        self.closing(conn);
        self.proto.sent_elsewhere(conn, sent);
        self.proto.close(conn);
        self.activate(conn);
    }
}

impl LaminarTx {
    /// An ACK from the peer, before the program sees it: the bytes it
    /// newly acknowledges count as ECN-marked when it carries ECN-Echo
    /// (RFC 8257 section 3.3's bytes acknowledged with ECE). One beyond
    /// what was pushed is the program's to reject, and is not counted.
    fn count_ack(&mut self, ack: u32, ece: bool) {
        let advance = distance(self.ack_high, ack);
        let sent_end = self.base_seq.wrapping_add(self.queued);
        if advance <= 0 || distance(ack, sent_end) < 0 {
            return;
        }
        self.ack_high = ack;
        if ece {
            self.ecn_acked_bytes += advance as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::segment::Route;

    fn tx(queued: u32) -> LaminarTx {
        let now = Instant::now();
        LaminarTx {
            base_seq: u32::MAX - 100,
            queued,
            pushed: queued,
            acked: 0,
            credits: 0,
            acked_bytes: 0,
            ecn_acked_bytes: 0,
            fast_retransmits: 0,
            ack_high: u32::MAX - 100,
            peer_window: 0,
            last_sync: now,
            timer: RetransmitTimer::new(now, crate::EndpointConfig::default().min_rto),
            loss: LossState::default(),
            close_requested: false,
        }
    }

    /// Bytes newly acknowledged by an ACK with ECN-Echo count, across the
    /// sequence space's wrap; old, duplicate and impossible ACKs do not.
    #[test]
    fn ecn_echo_counts_the_bytes_it_newly_acknowledges() {
        let mut t = tx(1000);
        t.count_ack(t.base_seq.wrapping_add(300), true);
        t.count_ack(t.base_seq.wrapping_add(500), false);
        t.count_ack(t.base_seq.wrapping_add(400), true);
        t.count_ack(t.base_seq.wrapping_add(500), true);
        t.count_ack(t.base_seq.wrapping_add(1001), true);
        t.count_ack(t.base_seq.wrapping_add(900), true);
        assert_eq!(t.ecn_acked_bytes, 300 + 400);
        assert_eq!(t.ack_high, t.base_seq.wrapping_add(900));
    }

    /// An ACK from the peer: `ack` bytes from the base, SACK blocks as
    /// byte ranges from the base.
    fn ack(t: &mut LaminarTx, ack: u32, blocks: &[(u32, u32)]) -> Option<AckEffect> {
        let mut sack = SackBlocks::default();
        for &(a, b) in blocks {
            sack.push((t.base_seq.wrapping_add(a), t.base_seq.wrapping_add(b)));
        }
        let seg = Segment {
            route: Route {
                src_mac: [0; 6],
                dst_mac: [0; 6],
                src: IpAddr::V4(Ipv4Addr::LOCALHOST),
                dst: IpAddr::V4(Ipv4Addr::LOCALHOST),
                src_port: 1,
                dst_port: 2,
            },
            seq: 0,
            ack: t.base_seq.wrapping_add(ack),
            flags: Flags(Flags::ACK),
            window: 0,
            options: TcpOptions::default(),
            ce: false,
            payload: &[],
        };
        t.take_ack(&seg, 1 << 20, &sack)
    }

    /// Laminar's transmit side recovers as the other engines do: SACK
    /// blocks over three segments make the first hole lost, the host
    /// pushes each lost hole once (never SACKed bytes), then new data
    /// from SND.MAX, as PRR lets them go (RFC 6937).
    #[test]
    fn the_laminar_transmit_side_pushes_lost_holes_once_then_new_data() {
        const MSS: u32 = 1000;
        let mut t = tx(12 * MSS);
        t.pushed = 8 * MSS;
        t.credits = u32::MAX;
        let push = |t: &mut LaminarTx, cwnd| {
            t.next_push(MSS, cwnd, 1 << 20)
                .map(|(from, len, again)| (from.wrapping_sub(t.base_seq), len, again))
        };
        // Segments 0 and 1 lost, 2-4 SACKed: IsLost(SND.UNA).
        let e = ack(&mut t, 0, &[(2 * MSS, 5 * MSS)]).unwrap();
        assert!(e.began, "{e:?}");
        // In flight: 8 segments less 3 SACKed and 2 lost.
        assert_eq!(t.loss.pipe(t.sent()), 3 * MSS);
        // The first retransmission goes whatever the window (RFC 6937's
        // forward progress); then PRR holds the window at ssthresh.
        assert_eq!(push(&mut t, 3 * MSS), Some((0, MSS, true)));
        assert_eq!(push(&mut t, 3 * MSS), None, "the window is full");
        // Below a larger ssthresh, the ACK's delivery (three segments
        // SACKed) and one more segment may go (PRR-SSRB).
        assert_eq!(push(&mut t, 10 * MSS), Some((MSS, MSS, true)));
        // Segments 5-7 are not lost (nothing SACKed above them): new data.
        assert_eq!(push(&mut t, 10 * MSS), Some((8 * MSS, MSS, false)));
        assert_eq!(t.pushed, 8 * MSS, "the caller moves SND.MAX");
        // The ACK of everything up to the recovery point ends it.
        t.pushed = 9 * MSS;
        let e = ack(&mut t, 8 * MSS, &[]).unwrap();
        assert!(!e.began);
        assert_eq!(t.loss.recovery, None);
        // An ACK beyond SND.MAX is the program's to reject.
        assert_eq!(ack(&mut t, 10 * MSS, &[]), None);
    }
}
