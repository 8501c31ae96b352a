//! The endpoint with the Laminar engine ([`crate::laminar`]): established
//! connections receive through Laminar's program in the match-action
//! emulator; the endpoint's control plane keeps the handshake, teardown,
//! ARP and neighbour discovery, and transmission stays on the
//! run-to-completion path.
//!
//! Translation between real frames and the program's segments:
//! - In: a segment with payload becomes a program segment with that
//!   payload at its sequence number; options are not given to the program
//!   (it reads only SACK, which is not negotiated), the ACK bit is cleared
//!   (the acknowledgement belongs to the path that transmits, which gets it
//!   when it acknowledges something new) and so is FIN.
//! - Out: the program's ACKs are built into frames with the connection's
//!   route, the sequence number of the transmit path, the window the
//!   program advertised (already scaled by our window scale) and, when
//!   timestamps were negotiated, a timestamp option (RFC 7323: TSval our
//!   clock, TSecr the peer's latest TSval).
//! - FIN: once `rx-next-seq` reaches the FIN's sequence number, the
//!   receive side is handed back to the run-to-completion path, which takes
//!   the FIN, acknowledges it and tells the application (end of stream).
//!   A FIN arriving before all data is dropped; the peer sends it again.

use std::net::IpAddr;

use order::seq::distance;
use rmt::laminar::segment::TcpSegment;
use rmt::laminar::ConnectionSpec;

use super::{Endpoint, Handshake, ToeError};
use crate::laminar::{data_segment, LaminarCounters, LaminarEngine, LaminarError, RxWrite};
use crate::protocol::RxSummary;
use crate::segment::{Flags, Header, Segment, TcpOptions};
use crate::stages::{ConnIdx, FourTuple};

/// The data path that carries established connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Engine {
    /// The run-to-completion stages (thesis chapter 4's baseline).
    #[default]
    Toe,
    /// Laminar's program in the match-action emulator (chapter 5) receives;
    /// IPv4 only, as the program parses IPv4.
    Laminar,
}

/// The Laminar engine and what the endpoint keeps per connection for it.
pub(super) struct LaminarPath {
    engine: LaminarEngine,
    conns: Vec<Option<LaminarConn>>,
    /// An engine failure met where it could not be returned, returned by
    /// the next poll.
    error: Option<LaminarError>,
}

/// One connection's receive side as the host (libTOE) sees it.
struct LaminarConn {
    /// Data is ready up to here (the program's latest notification).
    ready_seq: u32,
    /// Bytes the application read and the window has not got back yet.
    ungranted: u32,
    /// Window scale of our advertisements.
    wscale: u8,
    /// The window the peer last heard from us, bytes.
    advertised: u32,
    /// The peer's latest TSval, when timestamps were negotiated.
    ts_recent: Option<u32>,
    timestamps: bool,
    /// The peer's FIN was taken: the run-to-completion path has the
    /// receive side again.
    handed_back: bool,
}

impl LaminarPath {
    pub(super) fn new(connections: u32) -> Result<Self, ToeError> {
        Ok(LaminarPath {
            engine: LaminarEngine::new(connections)?,
            conns: Vec::new(),
            error: None,
        })
    }
}

impl Endpoint {
    /// What the Laminar engine counted (None with the Toe engine).
    pub fn laminar_counters(&self) -> Option<LaminarCounters> {
        self.laminar.as_ref().map(|p| p.engine.counters())
    }

    /// After the handshake: the connection goes into Laminar's tables and
    /// registers, its receive buffer at base address 0 of the double
    /// mapping, position 0 holding the peer's first sequence number.
    pub(super) fn install_laminar(&mut self, conn: ConnIdx, t: &FourTuple, h: &Handshake) {
        let (rx_size, wscale, timestamps, iss) = {
            let post = self.post.state(conn);
            (post.rx_size, post.rx_wscale, post.timestamps, h.iss)
        };
        let Some(path) = self.laminar.as_mut() else {
            return;
        };
        let (IpAddr::V4(local), IpAddr::V4(remote)) = (t.local, t.remote) else {
            return;
        };
        let first = h.irs.wrapping_add(1);
        let spec = ConnectionSpec {
            local_ip: u32::from(local),
            local_port: t.local_port,
            remote_ip: u32::from(remote),
            remote_port: t.remote_port,
            ctx: 0,
            rx_next_seq: first,
            rx_buffer_addr: 0,
            rx_buffer_size: rx_size,
            rx_avail: rx_size,
            tx_base_seq: iss.wrapping_add(1),
            tx_next_ack: iss.wrapping_add(1),
            tx_credits: 0,
            credit_grant: 0,
            tx_remote_avail: 0,
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
            ungranted: 0,
            wscale,
            advertised: rx_size,
            ts_recent: h.peer.timestamp.map(|(val, _)| val),
            timestamps,
            handed_back: false,
        });
    }

    pub(super) fn release_laminar(&mut self, conn: ConnIdx) {
        if let Some(c) = self
            .laminar
            .as_mut()
            .and_then(|p| p.conns.get_mut(conn as usize))
        {
            *c = None;
        }
    }

    fn laminar_conn(&mut self, conn: ConnIdx) -> Option<&mut LaminarConn> {
        self.laminar
            .as_mut()?
            .conns
            .get_mut(conn as usize)?
            .as_mut()
    }

    fn now_ns_laminar(&self) -> u64 {
        (self.now - self.start).as_nanos() as u64
    }

    /// A data-path segment of `conn`: returns whether the Laminar engine
    /// took it (segments with payload or FIN of a Laminar connection whose
    /// FIN has not been taken yet; pure ACKs stay with the transmit path).
    pub(super) fn laminar_input(
        &mut self,
        conn: ConnIdx,
        seg: &Segment<'_>,
        summary: &RxSummary,
    ) -> bool {
        let fin = seg.flags.has(Flags::FIN);
        let now_ns = self.now_ns_laminar();
        let Some(lc) = self.laminar_conn(conn) else {
            return false;
        };
        if lc.handed_back || (seg.payload.is_empty() && !fin) {
            return false;
        }
        if let Some((val, _)) = seg.options.timestamp {
            lc.ts_recent = Some(val);
        }
        if let (false, IpAddr::V4(src), IpAddr::V4(dst)) =
            (seg.payload.is_empty(), seg.src, seg.dst)
        {
            let s = data_segment(
                u32::from(src),
                u32::from(dst),
                seg.src_port,
                seg.dst_port,
                seg.seq,
                seg.payload,
            );
            self.laminar_try(|e| e.receive(now_ns, &s));
        }
        let fin_seq = seg.seq.wrapping_add(seg.payload.len() as u32);
        if fin && self.laminar_reached(conn, fin_seq) {
            self.laminar_take_fin(conn, seg, summary, fin_seq);
            return true;
        }
        // A segment with data is never a duplicate ACK (RFC 5681 section
        // 2): the transmit path hears only of new acknowledgements.
        let (una, _) = self.proto.una_and_max(conn);
        if seg.flags.has(Flags::ACK) && distance(una, seg.ack) > 0 {
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
        let path = self.laminar.as_mut()?;
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

    /// The peer's FIN, with all data before it in: the run-to-completion
    /// path takes the receive side back from `fin_seq` and processes the
    /// FIN (end of stream, its ACK).
    fn laminar_take_fin(
        &mut self,
        conn: ConnIdx,
        seg: &Segment<'_>,
        summary: &RxSummary,
        fin_seq: u32,
    ) {
        if let Some(lc) = self.laminar_conn(conn) {
            lc.handed_back = true;
        }
        self.proto.received_elsewhere(conn, fin_seq);
        let fin_only = RxSummary {
            seq: fin_seq,
            len: 0,
            ..*summary
        };
        let (out, snap) = self.proto.rx(conn, &fin_only);
        self.after_protocol(conn, seg, &out, &snap);
    }

    /// Runs the pipeline to idle and applies what it produced; returns a
    /// failure of the engine met since the last call.
    pub(super) fn laminar_run(&mut self) -> Result<(), ToeError> {
        self.laminar_apply();
        match self.laminar.as_mut().and_then(|p| p.error.take()) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Runs the pipeline to idle and applies what it produced: payload
    /// writes and notifications to the receive buffers, ACKs to the port.
    fn laminar_apply(&mut self) {
        let Some(out) = self.laminar_try(LaminarEngine::run_to_idle) else {
            return;
        };
        for w in out.rx_data {
            self.laminar_write(w);
        }
        for s in out.segments {
            self.laminar_send(&s);
        }
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

    /// An ACK the program built, as a frame on the connection's route.
    fn laminar_send(&mut self, s: &TcpSegment) {
        let t = FourTuple {
            local: IpAddr::V4(s.src_ip.into()),
            local_port: s.src_port,
            remote: IpAddr::V4(s.dst_ip.into()),
            remote_port: s.dst_port,
        };
        if let Some(conn) = self.pre.lookup(&t) {
            self.laminar_ack(conn, s.ack, s.window);
        }
    }

    /// Sends an ACK of `ack` advertising `window` (scaled) on `conn`'s
    /// route: the transmit path's sequence number, and a timestamp option
    /// when timestamps were negotiated (RFC 7323 section 3: TSval our
    /// clock, TSecr the peer's latest TSval).
    fn laminar_ack(&mut self, conn: ConnIdx, ack: u32, window: u16) {
        let Some(route) = self.pre.route(conn) else {
            return;
        };
        let seq = self.proto.snapshot(conn).seq;
        let now_ms = self.now_ms();
        let Some(lc) = self.laminar_conn(conn) else {
            return;
        };
        if lc.handed_back {
            return;
        }
        lc.advertised = u32::from(window) << lc.wscale;
        let timestamp = lc.timestamps.then(|| (now_ms, lc.ts_recent.unwrap_or(0)));
        let h = Header {
            seq,
            ack,
            flags: Flags(Flags::ACK),
            window,
            options: TcpOptions {
                timestamp,
                ..TcpOptions::default()
            },
        };
        self.emit(&route, &h, &[]);
    }

    /// The application read `n` bytes of a Laminar connection: a host SYNC
    /// hands the space back once a quarter of the buffer was read
    /// (libTOE's threshold, §5.3.1.7). Returns whether `conn` is one.
    pub(super) fn laminar_consumed(&mut self, conn: ConnIdx, n: u32) -> bool {
        let now_ns = self.now_ns_laminar();
        let quarter = self.cfg.rx_buffer.next_power_of_two() / 4;
        let mss = u32::from(self.cfg.mss);
        let Some(lc) = self.laminar_conn(conn) else {
            return false;
        };
        lc.ungranted += n;
        if lc.handed_back || lc.ungranted < quarter {
            return true;
        }
        let grant = std::mem::take(&mut lc.ungranted);
        let reopened = lc.advertised < mss;
        self.laminar_try(|e| e.sync(now_ns, conn as u16, grant));
        if reopened {
            self.laminar_window_update(conn);
        }
        true
    }

    /// The window reopened from below one segment: the peer, which may be
    /// waiting for it, hears at once (the program sends ACKs only for
    /// segments, so the control plane builds this one from the registers).
    fn laminar_window_update(&mut self, conn: ConnIdx) {
        self.laminar_apply();
        let c = conn as u16;
        let Some((next, window)) = self.laminar_try(|e| Ok((e.rx_next_seq(c)?, e.rx_window(c)?)))
        else {
            return;
        };
        let Some(wscale) = self.laminar_conn(conn).map(|lc| lc.wscale) else {
            return;
        };
        let scaled = (window >> wscale).min(u32::from(u16::MAX)) as u16;
        self.laminar_ack(conn, next, scaled);
    }
}
