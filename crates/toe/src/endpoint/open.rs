//! Active open (RFC 9293 section 3.5): resolve the peer's link-layer
//! address (ARP, or neighbour discovery for IPv6), send a SYN with our
//! options, install the connection when the SYN-ACK arrives and answer it;
//! retry, and report a refusal (RST) or a timeout to the application.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::{Duration, Instant};

use super::{Endpoint, Handshake, ToeError, SYN_TRIES, WSCALE};
use crate::segment::{self, Flags, Header, Route, SackBlocks, Segment, TcpOptions};
use crate::stages::{ConnIdx, FourTuple};

/// Local ports for active opens (RFC 6335's dynamic range).
pub(super) const EPHEMERAL: Range<u16> = 49152..65535;
/// How long a SYN or an address resolution waits before it is sent again.
const RETRY: Duration = Duration::from_secs(1);

/// An active open in progress.
pub(super) struct Opening {
    pub(super) conn: ConnIdx,
    iss: u32,
    sent_at: Instant,
    tries: u8,
    /// The SYN went out (else the peer's address is being resolved).
    syn_sent: bool,
}

/// Why an active open failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    Refused,
    TimedOut,
}

impl Failure {
    pub(super) fn error(self) -> ToeError {
        match self {
            Failure::Refused => ToeError::Refused,
            Failure::TimedOut => ToeError::TimedOut,
        }
    }
}

impl Endpoint {
    /// Opens a connection to `remote`. Returns its index at once; `recv`
    /// and `send` say WouldBlock until it is established
    /// ([`Endpoint::is_established`]), and Refused or TimedOut if it fails.
    pub fn connect(&mut self, remote: SocketAddr) -> Result<ConnIdx, ToeError> {
        self.open(None, remote)
    }

    /// Opens a connection to `remote` from local port `local_port`, as a
    /// socket bound to a port before connect(2) does (RFC 9293 section
    /// 3.10.1, OPEN with a local port); AddrInUse if a listener or another
    /// connection holds that port (bind(2)'s EADDRINUSE).
    pub fn connect_from(
        &mut self,
        local_port: u16,
        remote: SocketAddr,
    ) -> Result<ConnIdx, ToeError> {
        self.open(Some(local_port), remote)
    }

    fn open(&mut self, bound: Option<u16>, remote: SocketAddr) -> Result<ConnIdx, ToeError> {
        if remote.is_ipv4() != self.addr.is_ipv4() {
            return Err(ToeError::Config(format!(
                "{remote}: this endpoint's address {} is of the other family",
                self.addr
            )));
        }
        let local_port = match bound {
            Some(p) if self.local_port_taken(p) => return Err(ToeError::AddrInUse(p)),
            Some(p) => p,
            None => self.ephemeral_port(remote)?,
        };
        let conn = self.allocate().ok_or_else(|| {
            self.counters.table_full += 1;
            ToeError::Config(format!(
                "the connection table is full ({} connections)",
                self.cfg.max_conns
            ))
        })?;
        let t = FourTuple {
            local: self.addr,
            local_port,
            remote: remote.ip(),
            remote_port: remote.port(),
        };
        let o = Opening {
            conn,
            iss: rand::random(),
            sent_at: self.now,
            tries: 0,
            syn_sent: false,
        };
        self.opening.insert(t, o);
        self.advance_open(&t);
        Ok(conn)
    }

    /// Whether `conn` is established (its handshake completed).
    pub fn is_established(&self, conn: ConnIdx) -> bool {
        self.app.get(conn as usize).is_some_and(Option::is_some)
    }

    /// Whether a listener, an open in progress or a connection holds
    /// local port `port`.
    fn local_port_taken(&self, port: u16) -> bool {
        self.listeners.contains_key(&port)
            || self.opening.keys().any(|t| t.local_port == port)
            || self.pre.uses_local_port(port)
    }

    /// A free local port for `remote`, after the last one handed out.
    fn ephemeral_port(&mut self, remote: SocketAddr) -> Result<u16, ToeError> {
        for _ in EPHEMERAL {
            let p = self.next_port;
            self.next_port = if p + 1 == EPHEMERAL.end {
                EPHEMERAL.start
            } else {
                p + 1
            };
            let t = FourTuple {
                local: self.addr,
                local_port: p,
                remote: remote.ip(),
                remote_port: remote.port(),
            };
            if self.pre.lookup(&t).is_none() && !self.opening.contains_key(&t) {
                return Ok(p);
            }
        }
        Err(ToeError::Config(format!("no free local port for {remote}")))
    }

    /// Sends the SYN if the peer's address is known, else asks for it.
    fn advance_open(&mut self, t: &FourTuple) {
        let Some(o) = self.opening.get(t) else {
            return;
        };
        let iss = o.iss;
        match self.neighbors.get(&t.remote).copied() {
            Some(mac) => {
                self.send_syn(t, mac, iss);
                if let Some(o) = self.opening.get_mut(t) {
                    o.syn_sent = true;
                }
            }
            None => self.resolve(t.remote),
        }
    }

    fn resolve(&mut self, ip: IpAddr) {
        let frame = match (self.addr, ip) {
            (IpAddr::V4(ours), IpAddr::V4(theirs)) => segment::arp_request(self.mac, ours, theirs),
            (IpAddr::V6(ours), IpAddr::V6(theirs)) => segment::ns_request(self.mac, ours, theirs),
            _ => return,
        };
        self.out.push(frame);
    }

    fn send_syn(&mut self, t: &FourTuple, peer_mac: [u8; 6], iss: u32) {
        let route = Route {
            src_mac: self.mac,
            dst_mac: peer_mac,
            src: t.local,
            dst: t.remote,
            src_port: t.local_port,
            dst_port: t.remote_port,
        };
        let h = Header {
            seq: iss,
            ack: 0,
            // RFC 3168 section 6.1.1: an ECN-setup SYN.
            flags: Flags(if self.cfg.congestion.ecn() {
                Flags::SYN | Flags::ECE | Flags::CWR
            } else {
                Flags::SYN
            }),
            window: self.cfg.rx_buffer.min(65535) as u16,
            options: TcpOptions {
                mss: Some(self.cfg.mss),
                window_scale: Some(WSCALE),
                // Every engine's ACKs carry SACK blocks: the
                // run-to-completion and pipelined engines' intervals, the
                // Laminar program's one (thesis section 5.5.4.3).
                sack_permitted: true,
                timestamp: Some((self.now_ms(), 0)),
                sack: SackBlocks::default(),
            },
        };
        self.emit(&route, &h, &[]);
    }

    /// A link-layer address learnt: opens waiting for it send their SYN.
    /// The table is bounded: when full, only an address an open waits for
    /// is taken (a flood of ARP from made-up senders cannot grow it).
    pub(super) fn learn(&mut self, ip: IpAddr, mac: [u8; 6]) {
        let waiting: Vec<FourTuple> = self
            .opening
            .iter()
            .filter(|(t, o)| t.remote == ip && !o.syn_sent)
            .map(|(t, _)| *t)
            .collect();
        let full = self.neighbors.len() >= 4 * self.cfg.max_conns as usize;
        if full && waiting.is_empty() && !self.neighbors.contains_key(&ip) {
            return;
        }
        if self.neighbors.insert(ip, mac) == Some(mac) {
            return;
        }
        for t in waiting {
            self.advance_open(&t);
        }
    }

    /// SYN-ACK: install the connection and acknowledge it.
    pub(super) fn syn_ack_input(&mut self, t: FourTuple, seg: &Segment<'_>) {
        let Some(o) = self.opening.get(&t) else {
            // Not ours (or a retransmission after we completed): the
            // segment's ACK tells the peer where we are.
            if let Some(conn) = self.pre.lookup(&t) {
                let snap = self.proto.snapshot(conn);
                self.send_ack(conn, &snap);
            } else {
                self.send_reset(seg);
            }
            return;
        };
        if seg.ack != o.iss.wrapping_add(1) {
            self.send_reset(seg);
            return;
        }
        let (conn, iss) = (o.conn, o.iss);
        self.opening.remove(&t);
        let h = Handshake {
            peer_mac: seg.route.src_mac,
            iss,
            irs: seg.seq,
            peer: seg.options,
            sent_at: self.now,
            tries: 0,
            // An ECN-setup SYN-ACK has ECE without CWR.
            ecn: self.cfg.congestion.ecn()
                && seg.flags.has(Flags::ECE)
                && !seg.flags.has(Flags::CWR),
        };
        self.install(conn, &t, &h, seg);
        let snap = self.proto.snapshot(conn);
        self.send_ack(conn, &snap);
    }

    /// RST|ACK for our SYN (RFC 9293 section 3.10.7.3): refused.
    pub(super) fn refused(&mut self, t: &FourTuple, seg: &Segment<'_>) {
        let Some(o) = self.opening.get(t) else {
            return;
        };
        if seg.flags.has(Flags::ACK) && seg.ack == o.iss.wrapping_add(1) {
            let conn = o.conn;
            self.opening.remove(t);
            self.failed.insert(conn, Failure::Refused);
        }
    }

    /// Sends again what got no answer; gives up after `SYN_TRIES`.
    pub(super) fn open_timers(&mut self) {
        let now = self.now;
        let due: Vec<FourTuple> = self
            .opening
            .iter()
            .filter(|(_, o)| now - o.sent_at >= RETRY)
            .map(|(t, _)| *t)
            .collect();
        for t in due {
            let Some(o) = self.opening.get_mut(&t) else {
                continue;
            };
            if o.tries >= SYN_TRIES {
                let conn = o.conn;
                self.opening.remove(&t);
                self.failed.insert(conn, Failure::TimedOut);
                continue;
            }
            o.tries += 1;
            o.sent_at = now;
            o.syn_sent = false;
            self.advance_open(&t);
        }
    }

    /// The application gave up on an open (or a failed one): free its slot.
    pub(super) fn abandon_open(&mut self, conn: ConnIdx) -> bool {
        let open = self
            .opening
            .iter()
            .find(|(_, o)| o.conn == conn)
            .map(|(t, _)| *t);
        if let Some(t) = open {
            self.opening.remove(&t);
        } else if self.failed.remove(&conn).is_none() {
            return false;
        }
        self.free.push(conn);
        true
    }
}
