//! The data path's stages (thesis section 4.3, Figs. 4.5 and 4.6), each
//! with its own table of one [`state`](crate::state) partition, indexed by
//! the connection index the pre-processor finds:
//!
//! - [`Pre`]: header validation happened in [`segment::parse`]; here the
//!   connection lookup by 4-tuple (*Id*), the header summary (*Sum*), the
//!   flow group (*Steer*) and the headers of what is sent (*Head*);
//! - [`Protocol`]: the [`protocol`] functions over the protocol partition;
//! - [`Post`]: ACK and segment headers with timestamps and ECN feedback
//!   (*Ack*, *Stamp*), and congestion statistics (*Stats*).
//!
//! Payload copy and the context queue act on the payload buffers and the
//! application's queues, which are not connection state.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::protocol::{self, RxOutcome, RxSummary, TxGrant};
use crate::recovery::LossInfo;
use crate::sack::SackBlocks;
use crate::segment::{Flags, Header, Route, Segment, TcpOptions};
use crate::state::{ConnId, PostState, ProtoState};

/// A connection's index in every stage's table.
pub type ConnIdx = u32;

/// A connection's addresses and ports, as seen from this end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FourTuple {
    pub local: IpAddr,
    pub local_port: u16,
    pub remote: IpAddr,
    pub remote_port: u16,
}

impl FourTuple {
    /// The tuple a received segment belongs to.
    pub fn of(seg: &Segment<'_>) -> Self {
        FourTuple {
            local: seg.route.dst,
            local_port: seg.route.dst_port,
            remote: seg.route.src,
            remote_port: seg.route.src_port,
        }
    }

    /// hash(4-tuple) % groups: the flow group (thesis section 4.3).
    pub fn flow_group(&self, groups: u8) -> u8 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        (h.finish() % u64::from(groups.max(1))) as u8
    }
}

/// Where a received segment goes after pre-processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// An established connection's segment: to the protocol stage.
    DataPath { conn: ConnIdx, summary: RxSummary },
    /// SYN, RST or an unknown connection: to the control plane.
    Control,
}

/// The pre-processor and its partition.
#[derive(Debug, Default)]
pub struct Pre {
    ids: Vec<Option<ConnId>>,
    /// The peer's window scale, which the summary applies (RFC 7323).
    peer_wscale: Vec<u8>,
    by_tuple: HashMap<FourTuple, ConnIdx>,
}

impl Pre {
    pub fn install(&mut self, conn: ConnIdx, id: ConnId, peer_wscale: u8) {
        let i = conn as usize;
        if self.ids.len() <= i {
            self.ids.resize(i + 1, None);
            self.peer_wscale.resize(i + 1, 0);
        }
        self.ids[i] = Some(id);
        self.peer_wscale[i] = peer_wscale;
        self.by_tuple.insert(tuple_of(&id), conn);
    }

    pub fn remove(&mut self, conn: ConnIdx) {
        if let Some(id) = self.ids.get_mut(conn as usize).and_then(Option::take) {
            self.by_tuple.remove(&tuple_of(&id));
        }
    }

    pub fn lookup(&self, t: &FourTuple) -> Option<ConnIdx> {
        self.by_tuple.get(t).copied()
    }

    /// Whether an installed connection uses local port `port`.
    pub fn uses_local_port(&self, port: u16) -> bool {
        self.by_tuple.keys().any(|t| t.local_port == port)
    }

    /// *Id*, *Sum*, *Steer*: data-path segments carry no SYN or RST and
    /// belong to an installed connection.
    pub fn steer(&self, seg: &Segment<'_>) -> Steer {
        if seg.flags.has(Flags::SYN) || seg.flags.has(Flags::RST) {
            return Steer::Control;
        }
        let Some(conn) = self.lookup(&FourTuple::of(seg)) else {
            return Steer::Control;
        };
        let shift = self.peer_wscale[conn as usize];
        Steer::DataPath {
            conn,
            summary: RxSummary {
                seq: seg.seq,
                ack: seg.ack,
                flags: seg.flags,
                window: u32::from(seg.window) << shift,
                len: seg.payload.len() as u32,
                ts_val: seg.options.timestamp.map(|t| t.0),
                sack: seg.options.sack,
            },
        }
    }

    /// The connection's flow group.
    pub fn flow_group(&self, conn: ConnIdx) -> Option<u8> {
        Some(self.ids.get(conn as usize)?.as_ref()?.flow_group)
    }

    /// *Head*: the addresses of what this connection sends.
    pub fn route(&self, conn: ConnIdx) -> Option<Route> {
        Some(self.ids.get(conn as usize)?.as_ref()?.route())
    }
}

fn tuple_of(id: &ConnId) -> FourTuple {
    FourTuple {
        local: id.local_ip,
        local_port: id.local_port,
        remote: id.peer_ip,
        remote_port: id.remote_port,
    }
}

/// What the protocol stage passes downstream with each verdict: the state
/// the post-processor needs, read in the same atomic step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// The next sequence number to send.
    pub seq: u32,
    pub ack: u32,
    pub rx_avail: u32,
    pub next_ts: u32,
    pub tx_sent: u32,
    pub fin_received: bool,
    pub fin_acked: bool,
    /// The SACK blocks an ACK carries now (a D-SACK block first right
    /// after a duplicate), sent where SACK was negotiated.
    pub sack: SackBlocks,
}

/// The protocol stage and its partition.
#[derive(Debug, Default)]
pub struct Protocol {
    conns: Vec<ProtoState>,
}

impl Protocol {
    pub fn install(&mut self, conn: ConnIdx, s: ProtoState) {
        let i = conn as usize;
        if self.conns.len() <= i {
            self.conns.resize(i + 1, ProtoState::default());
        }
        self.conns[i] = s;
    }

    /// Whether `conn` was installed here.
    pub fn contains(&self, conn: ConnIdx) -> bool {
        (conn as usize) < self.conns.len()
    }

    fn at(&mut self, conn: ConnIdx) -> &mut ProtoState {
        &mut self.conns[conn as usize]
    }

    pub fn rx(&mut self, conn: ConnIdx, summary: &RxSummary) -> (RxOutcome, Snapshot) {
        let s = self.at(conn);
        let out = protocol::rx(s, summary);
        let sack = s.sack_reported.option(out.dsack);
        (
            out,
            Snapshot {
                sack,
                ..self.snapshot(conn)
            },
        )
    }

    pub fn tx(&mut self, conn: ConnIdx, mss: u32) -> Option<(TxGrant, Snapshot)> {
        let g = protocol::tx(self.at(conn), mss)?;
        Some((g, self.snapshot(conn)))
    }

    /// Host control *Win*: the application queued `n` bytes to send.
    pub fn queued(&mut self, conn: ConnIdx, n: u32) {
        self.at(conn).tx_avail += n;
    }

    /// Host control *Win*: the application read `n` bytes. Returns the
    /// window before, so a caller can tell the peer a window reopened.
    pub fn consumed(&mut self, conn: ConnIdx, n: u32) -> u32 {
        let s = self.at(conn);
        let before = s.rx_avail;
        s.rx_avail += n;
        before
    }

    /// Another engine (Laminar's, [`crate::laminar`]) received the bytes
    /// up to `ack` and placed them: the receive state catches up, so this
    /// stage can take the peer's FIN from there.
    pub fn received_elsewhere(&mut self, conn: ConnIdx, ack: u32) {
        let s = self.at(conn);
        let n = ack.wrapping_sub(s.ack);
        s.ack = ack;
        s.rx_pos = s.rx_pos.wrapping_add(n);
    }

    /// Another engine sent (and had acknowledged) `n` bytes: the transmit
    /// state moves past them, so this stage can send the FIN after them.
    pub fn sent_elsewhere(&mut self, conn: ConnIdx, n: u32) {
        let s = self.at(conn);
        s.seq = s.seq.wrapping_add(n);
        s.tx_pos = s.tx_pos.wrapping_add(n);
        s.tx_high = s.seq;
    }

    /// Host control *Fin*: send a FIN after the queued bytes.
    pub fn close(&mut self, conn: ConnIdx) {
        self.at(conn).fin_queued = true;
    }

    /// The control plane's retransmission timeout (*Reset*): what was
    /// not acknowledged is sent again. Returns the bytes in flight.
    pub fn timeout(&mut self, conn: ConnIdx) -> u32 {
        protocol::timeout(self.at(conn))
    }

    /// The control plane's probe timer: the next grant is a tail loss
    /// probe ([`crate::recovery`], RFC 8985 section 7).
    pub fn probe(&mut self, conn: ConnIdx) {
        let s = self.at(conn);
        s.loss.probe(s.sent());
    }

    /// Whether `len` more bytes may go under the congestion window `cwnd`
    /// ([`crate::recovery::LossState::may_send`]: `pipe`, the tail loss
    /// probe and PRR).
    pub fn may_send(&self, conn: ConnIdx, cwnd: u32, len: u32) -> bool {
        let s = &self.conns[conn as usize];
        s.loss.may_send(s.sent(), cwnd, len)
    }

    /// Retransmissions found lost without a timeout, over the
    /// connection's life.
    pub fn lost_retransmits(&self, conn: ConnIdx) -> u32 {
        self.conns[conn as usize].loss.lost_retransmits
    }

    /// TCP_INFO's loss counts, in segments of `mss` bytes
    /// ([`crate::recovery::LossInfo`]).
    pub fn loss_info(&self, conn: ConnIdx, mss: u32) -> LossInfo {
        let s = &self.conns[conn as usize];
        s.loss.info(s.sent(), mss)
    }

    /// Bytes in flight, RFC 6675's `pipe`: what the congestion window
    /// is compared with.
    pub fn pipe(&self, conn: ConnIdx) -> u32 {
        let s = &self.conns[conn as usize];
        s.loss.pipe(s.sent())
    }

    pub fn snapshot(&self, conn: ConnIdx) -> Snapshot {
        let s = &self.conns[conn as usize];
        Snapshot {
            seq: s.seq,
            ack: s.ack,
            rx_avail: s.rx_avail,
            next_ts: s.next_ts,
            tx_sent: s.tx_sent,
            fin_received: s.fin_received,
            fin_acked: s.fin_sent && s.tx_sent == 0,
            sack: s.sack_reported.option(None),
        }
    }

    /// SND.UNA and SND.MAX.
    pub fn una_and_max(&self, conn: ConnIdx) -> (u32, u32) {
        let sent = self.conns[conn as usize].sent();
        (sent.una, sent.max)
    }

    /// Whether anything waits to be sent (queued bytes, an unsent FIN, a
    /// retransmission recovery has due).
    pub fn has_work(&self, conn: ConnIdx) -> bool {
        let s = &self.conns[conn as usize];
        s.tx_avail > 0
            || (s.fin_queued && !s.fin_sent)
            || s.loss.next_hole(s.sent()).is_some()
            || s.loss.probe_due()
    }
}

/// The post-processor and its partition.
#[derive(Debug, Default)]
pub struct Post {
    conns: Vec<PostState>,
}

impl Post {
    pub fn install(&mut self, conn: ConnIdx, s: PostState) {
        let i = conn as usize;
        if self.conns.len() <= i {
            self.conns.resize(i + 1, PostState::default());
        }
        self.conns[i] = s;
    }

    pub fn state(&self, conn: ConnIdx) -> &PostState {
        &self.conns[conn as usize]
    }

    /// *Stats*: counts that commute, so their order does not matter.
    pub fn account(&mut self, conn: ConnIdx, out: &RxOutcome, ce: bool, ece: bool) {
        let s = &mut self.conns[conn as usize];
        s.cnt_ackb += u64::from(out.acked);
        if ece {
            s.cnt_ecnb += u64::from(out.acked);
        }
        if out.fast_retransmit {
            s.cnt_fretx += 1;
        }
        s.ece |= ce;
    }

    /// *Stats*: a data segment sent again (counted, like the others, in
    /// any order).
    pub fn retransmitted(&mut self, conn: ConnIdx) {
        let s = &mut self.conns[conn as usize];
        s.cnt_retx = s.cnt_retx.wrapping_add(1);
    }

    /// *Stats*: an RTT sample, microseconds, into the smoothed estimate
    /// (RFC 6298 section 2: the first sample as is, then 7/8 old + 1/8
    /// new).
    pub fn rtt_sample(&mut self, conn: ConnIdx, us: u32) {
        let s = &mut self.conns[conn as usize];
        s.rtt_est = if s.rtt_est == 0 {
            us
        } else {
            ((u64::from(s.rtt_est) * 7 + u64::from(us)) / 8) as u32
        };
    }

    /// *Ack*, *Stamp*: the header of an ACK (or of a segment carrying
    /// data, with `seq` and `flags`), echoing a CE mark once.
    pub fn header(
        &mut self,
        conn: ConnIdx,
        seq: u32,
        flags: u8,
        snap: &Snapshot,
        now_ms: u32,
    ) -> Header {
        let ece = std::mem::take(&mut self.conns[conn as usize].ece);
        self.header_for(conn, seq, flags, snap, now_ms, ece)
    }

    /// The same without touching the partition: post-processor replicas
    /// share it read-only and echo the CE mark of the segment they answer.
    pub fn header_for(
        &self,
        conn: ConnIdx,
        seq: u32,
        flags: u8,
        snap: &Snapshot,
        now_ms: u32,
        ece: bool,
    ) -> Header {
        let s = &self.conns[conn as usize];
        let mut flags = flags | Flags::ACK;
        if ece {
            flags |= Flags::ECE;
        }
        Header {
            seq,
            ack: snap.ack,
            flags: Flags(flags),
            window: (snap.rx_avail >> s.rx_wscale).min(65535) as u16,
            options: TcpOptions {
                timestamp: s.timestamps.then_some((now_ms, snap.next_ts)),
                sack: if s.sack {
                    snap.sack
                } else {
                    SackBlocks::default()
                },
                ..TcpOptions::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::DUP_THRESH;

    /// The peer's pure ACK of `ack` with SACK block `sack`.
    fn ack(ack: u32, sack: (u32, u32)) -> RxSummary {
        RxSummary {
            seq: 7000,
            ack,
            flags: Flags(Flags::ACK),
            window: 1 << 20,
            len: 0,
            ts_val: None,
            sack: SackBlocks::one(sack),
        }
    }

    /// The run-to-completion engine's TCP_INFO counts come from its
    /// protocol stage: ten segments out, the fourth to sixth SACKed, the
    /// first hole sent again.
    #[test]
    fn the_protocol_stage_reports_its_loss_state_in_segments() {
        const MSS: u32 = 1000;
        let mut p = Protocol::default();
        p.install(
            0,
            ProtoState {
                seq: 5000,
                tx_high: 5000,
                ack: 7000,
                rx_avail: 1 << 20,
                remote_win: 1 << 20,
                ..ProtoState::default()
            },
        );
        p.queued(0, 10 * MSS);
        while p.tx(0, MSS).is_some() {}
        let i = p.loss_info(0, MSS);
        assert_eq!(
            (i.sacked, i.lost, i.retrans, i.reordering),
            (0, 0, 0, DUP_THRESH)
        );
        let (out, _) = p.rx(0, &ack(5000, (8000, 11_000)));
        assert!(out.fast_retransmit);
        let i = p.loss_info(0, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (3, 3, 0));
        let (g, _) = p.tx(0, MSS).unwrap();
        assert_eq!((g.seq, g.len), (5000, MSS));
        let i = p.loss_info(0, MSS);
        assert_eq!((i.sacked, i.lost, i.retrans), (3, 3, 1));
        // In flight is Linux's packets_out - (sacked_out + lost_out) +
        // retrans_out, as the window sees it.
        assert_eq!((10 - 3 - 3 + 1) * MSS, p.pipe(0));
    }
}
