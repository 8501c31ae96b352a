//! A TCP endpoint on one pktio port: the data-path stages run to
//! completion per segment (thesis Table 4.4's baseline; the pipelined
//! engine splits the same stages over threads), a control plane for what
//! the data path does not handle (section 4.1: connection setup and
//! teardown, RST, retransmission timeouts), and the application's side of
//! each connection (payload buffers and notifications, chapter 3's
//! context queue).
//!
//! The order of the last steps is the one Fig. 4.6 fixes: a segment's
//! payload is copied into the receive buffer before the application is
//! told and before the ACK leaves, so neither the host nor the peer can see
//! an acknowledgement of bytes not yet in place (section 4.3.2, hazard 3).
//!
//! With [`Engine::Laminar`] established connections run through Laminar's
//! program in the match-action emulator instead (`laminar`, thesis
//! chapter 5); the control plane stays the same. With
//! [`Engine::Pipeline`] they run through the fine-grained pipeline
//! (`pipelined`, thesis section 4.3) on its worker threads.

mod engine;
mod flow;
mod laminar;
mod laminar_rx;
mod open;
mod pipelined;
mod timer;

pub use engine::{Engine, EngineChoice, EngineName};
pub use flow::FlowInfo;
pub use pipelined::PipelineLayout;

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use pktio::{Match, PktIoError, Port};
use thiserror::Error;

use crate::buffer::PayloadBuf;
use crate::cc::Policy;
use crate::cycles::{ticks, StageCycles};
use crate::ooo::{OooBound, OooIntervals};
use crate::protocol::{Refusal, RxOutcome};
use crate::segment::{self, Flags, Frame, Header, Route, SackBlocks, Segment, TcpOptions};
use crate::stages::{ConnIdx, FourTuple, Post, Pre, Protocol, Snapshot, Steer};
use crate::state::{ConnId, PostState, ProtoState};
use crate::wheel::Wheel;

/// Our window scale: 7 (a 16 MiB window at most), as Linux uses for large
/// buffers.
const WSCALE: u8 = 7;
/// RFC 6298 bounds the retransmission timeout below by 1 s; Linux uses
/// 200 ms, which a lab's sub-millisecond RTT allows too.
const DEFAULT_MIN_RTO: Duration = Duration::from_millis(200);
const SYN_TRIES: u8 = 5;

/// Errors of the application interface.
#[derive(Debug, Error)]
pub enum ToeError {
    #[error("nothing to read or no room to write yet")]
    WouldBlock,
    #[error("no such connection")]
    NotConnected,
    #[error("connection reset by peer")]
    Reset,
    #[error("connection refused")]
    Refused,
    #[error("connection timed out")]
    TimedOut,
    #[error("local port {0} is in use")]
    AddrInUse(u16),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Io(#[from] PktIoError),
    #[error(transparent)]
    Laminar(#[from] crate::laminar::LaminarError),
}

impl ToeError {
    /// The machine lacks what the data path needs (privilege, AF_XDP).
    pub fn is_environment(&self) -> bool {
        matches!(self, ToeError::Io(e) if e.is_environment())
    }

    /// The caller asked for what cannot be: a bad configuration, a port in
    /// use, a device that does not exist. A refused, reset or timed-out
    /// connection and a Laminar fault are failures of the operation.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ToeError::Config(_) | ToeError::AddrInUse(_) => true,
            ToeError::Io(e) => e.is_bad_input(),
            _ => false,
        }
    }
}

/// Sizes and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointConfig {
    /// MSS we announce (MTU 1500 minus IPv4 and TCP headers).
    pub mss: u16,
    /// Payload buffer bytes per connection and direction.
    pub rx_buffer: u32,
    pub tx_buffer: u32,
    /// Most segments one connection sends per scheduler round.
    pub burst: u32,
    /// Most connections (the tables' size).
    pub max_conns: u32,
    /// The congestion control policy of every connection ([`crate::cc`]).
    pub congestion: Policy,
    /// Also pace each flow at a rate derived from its window and RTT.
    pub pacing: bool,
    /// How often the control plane runs the policies.
    pub control_interval: Duration,
    /// How long the side that closed first keeps a finished connection
    /// (TIME_WAIT, 2 MSL; RFC 9293 section 3.6).
    pub time_wait: Duration,
    /// The retransmission timeout a connection starts from and returns to
    /// on progress (doubled per timeout up to 4 s). 200 ms, Linux's
    /// `TCP_RTO_MIN`, by default; a datacenter path sets it lower, as
    /// Linux's `rto_min` route metric does.
    pub min_rto: Duration,
    /// Out-of-order intervals each connection keeps ([`crate::ooo`]; 64
    /// by default, 1 as FlexTOE and Laminar). On the Laminar engine the
    /// program's one interval counts, and its control plane keeps the
    /// rest (`endpoint::laminar_rx`).
    pub ooo_bound: OooBound,
    /// The data path of established connections.
    pub engine: Engine,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            mss: 1460,
            rx_buffer: 1 << 20,
            tx_buffer: 1 << 20,
            burst: 16,
            max_conns: 4096,
            congestion: Policy::NewReno,
            pacing: false,
            control_interval: Duration::from_micros(500),
            // Linux's TCP_TIMEWAIT_LEN: 60 s (RFC 9293's 2 MSL is 4 min).
            time_wait: Duration::from_secs(60),
            min_rto: DEFAULT_MIN_RTO,
            ooo_bound: OooBound::default(),
            engine: Engine::Toe,
        }
    }
}

/// What the endpoint counted: every frame it did not take is here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, derive_more::AddAssign)]
pub struct Counters {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub malformed: u64,
    pub bad_checksum: u64,
    pub arp_replies: u64,
    pub refused_duplicate: u64,
    pub refused_beyond_window: u64,
    pub refused_outside_interval: u64,
    pub refused_ack_of_unsent: u64,
    /// Recovery episodes begun by duplicate ACKs or SACK blocks.
    pub fast_retransmits: u64,
    pub timeouts: u64,
    /// Tail loss probes sent (RFC 8985 section 7).
    pub tail_loss_probes: u64,
    /// Retransmissions found lost without a timeout.
    pub lost_retransmits: u64,
    /// D-SACKs from the peer: retransmissions it did not need (RFC 2883),
    /// TCP_INFO's spurious retransmissions.
    pub dsacks_received: u64,
    /// SACK blocks outside SND.UNA..SND.MAX or empty: ignored.
    pub sack_blocks_ignored: u64,
    /// SACK blocks the full scoreboard could not keep.
    pub sack_blocks_dropped: u64,
    /// Time flows fell behind their schedule beyond the 1 ms they may make
    /// up, nanoseconds: rate not sent because the endpoint's loop ran late
    /// (its thread stalled or descheduled). Rate-limited flows on the
    /// run-to-completion engine, every sending connection's credit SYNCs
    /// on the Laminar engine.
    pub pacing_lag_ns: u64,
    pub resets_sent: u64,
    pub resets_received: u64,
    /// Resets for connections whose FINs had both been acknowledged,
    /// ignored (RFC 1337 section 3, F1): a peer that already closed
    /// answers a late segment with one.
    pub resets_after_close: u64,
    /// SYNs refused because the connection table was full.
    pub table_full: u64,
    /// SYNs dropped because the table of half-open connections was full.
    pub syn_dropped: u64,
    /// FINs sent again by a peer while we were in TIME_WAIT (each one
    /// acknowledged again).
    pub time_wait_acks: u64,
}

impl Counters {
    /// What one ACK's SACK blocks and loss detection did, on any engine.
    fn count_ack(&mut self, sack: crate::sack::SackUpdate, lost_retransmit: bool) {
        self.dsacks_received += u64::from(sack.dsack);
        self.sack_blocks_ignored += u64::from(sack.ignored);
        self.sack_blocks_dropped += u64::from(sack.dropped);
        self.lost_retransmits += u64::from(lost_retransmit);
    }
}

/// What TCP_INFO reports of a connection: its sequence and window state
/// and its loss state, read from the data path's transmit side (the
/// protocol stage, or Laminar's while it transmits), and the control
/// plane's retransmission counts. Counts are segments, as Linux's
/// `struct tcp_info` has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpInfo {
    pub snd_una: u32,
    pub snd_nxt: u32,
    pub rcv_nxt: u32,
    pub rcv_wnd: u32,
    pub snd_mss: u32,
    /// tcpi_retrans: sent again and still in flight (Linux's
    /// `retrans_out`; [`crate::recovery::LossInfo`] has the rest).
    pub retrans: u32,
    /// tcpi_lost: marked lost, those sent again included (`lost_out`).
    pub lost: u32,
    /// tcpi_sacked: SACKed above SND.UNA (`sacked_out`).
    pub sacked: u32,
    /// tcpi_reordering: the duplicate-ACK threshold (fixed at 3).
    pub reordering: u32,
    /// tcpi_total_retrans: data segments sent again, over the
    /// connection's life (tail loss probes included, as Linux counts
    /// them in `__tcp_retransmit_skb`).
    pub total_retrans: u32,
    /// tcpi_retransmits: retransmission timeouts since new data was last
    /// acknowledged (`icsk_retransmits`).
    pub retransmits: u32,
    /// tcpi_backoff: how often the retransmission timeout was doubled
    /// (`icsk_backoff`). The same count as `retransmits`: the timer
    /// doubles at each timeout and returns to its minimum at the first
    /// acknowledgement of new data (RFC 6298 section 5.7), where Linux
    /// keeps the backoff until an RTT sample.
    pub backoff: u32,
}

/// The application's side of a connection (what libTOE holds).
struct AppConn {
    rx: PayloadBuf,
    tx: PayloadBuf,
    /// Next receive position to read, and bytes readable from it.
    rx_read: u32,
    rx_ready: u32,
    /// Next transmit position to write, and free bytes from it.
    tx_write: u32,
    tx_free: u32,
    eof: bool,
    reset: bool,
    closed: bool,
}

/// The control plane's per-connection record: timers and segment size.
struct Control {
    /// Payload bytes per segment (the peer's MSS less our options).
    mss: u32,
    timer: timer::RetransmitTimer,
}

/// A connection being opened (passive: SYN received, SYN-ACK sent).
struct Handshake {
    peer_mac: [u8; 6],
    iss: u32,
    irs: u32,
    peer: TcpOptions,
    sent_at: Instant,
    tries: u8,
    /// ECN was negotiated (RFC 3168 section 6.1.1).
    ecn: bool,
}

/// A TCP endpoint on one address.
pub struct Endpoint {
    port: Port,
    mac: [u8; 6],
    addr: IpAddr,
    cfg: EndpointConfig,
    pre: Pre,
    proto: Protocol,
    post: Post,
    app: Vec<Option<AppConn>>,
    control: Vec<Option<Control>>,
    free: Vec<ConnIdx>,
    listeners: HashMap<u16, VecDeque<ConnIdx>>,
    handshakes: HashMap<FourTuple, Handshake>,
    /// The flow scheduler: connections with something to send.
    wheel: Wheel,
    /// Whether a connection is in the wheel (an entry whose flag is clear
    /// is stale: the connection went away after it was queued).
    scheduled: Vec<bool>,
    /// The control plane's congestion state per connection.
    flows: Vec<Option<flow::Flow>>,
    last_control: Instant,
    out: Vec<Vec<u8>>,
    /// Connections owed an ACK at the end of the receive batch.
    deferred_acks: Vec<ConnIdx>,
    /// Link-layer addresses learnt from ARP, neighbour discovery and SYNs.
    neighbors: HashMap<IpAddr, [u8; 6]>,
    /// Active opens: SYN sent (or the peer's address being resolved).
    opening: HashMap<FourTuple, open::Opening>,
    /// Active opens that failed, until the application closes them.
    failed: HashMap<ConnIdx, open::Failure>,
    next_port: u16,
    rx_scratch: Vec<Vec<u8>>,
    tx_payload: Vec<u8>,
    counters: Counters,
    start: Instant,
    /// When the current poll began: the time every timer and timestamp of
    /// the poll uses.
    now: Instant,
    cycles: StageCycles,
    /// The engine that carries established connections ([`engine`]).
    engine: engine::EnginePath,
}

/// A configuration the endpoint can run, or why not.
fn check_config(cfg: &EndpointConfig) -> Result<(), ToeError> {
    if cfg.max_conns == 0
        || cfg.rx_buffer < u32::from(cfg.mss)
        || cfg.tx_buffer == 0
        || cfg.control_interval.is_zero()
    {
        return Err(ToeError::Config(format!("{cfg:?}")));
    }
    if cfg.engine == Engine::Laminar && cfg.ooo_bound == OooBound::Intervals(0) {
        return Err(ToeError::Config(
            "out-of-order bound 0: the Laminar program always keeps one interval (1 is the thesis's receiver)".into(),
        ));
    }
    if cfg.engine == Engine::Laminar && cfg.max_conns > 1 << 16 {
        return Err(ToeError::Config(format!(
            "{} connections: the Laminar program names a connection in 16 bits",
            cfg.max_conns
        )));
    }
    Ok(())
}

impl Endpoint {
    /// An endpoint for `addr` on `port` (an AF_XDP port: it is told to take
    /// every frame for `addr`, ARP included, and leave the rest to the
    /// kernel). `mac` is the device's address.
    pub fn new(
        mut port: Port,
        mac: [u8; 6],
        addr: IpAddr,
        cfg: EndpointConfig,
    ) -> Result<Endpoint, ToeError> {
        check_config(&cfg)?;
        let mut rules = vec![Match {
            addr,
            proto: None,
            port: None,
        }];
        // Solicitations for an IPv6 address go to its solicited-node group.
        if let IpAddr::V6(a) = addr {
            rules.push(Match {
                addr: IpAddr::V6(segment::solicited_node(a)),
                proto: Some(58),
                port: None,
            });
        }
        let start = Instant::now();
        let engine = engine::EnginePath::new(cfg.engine, cfg.max_conns, start)?;
        port.steer_only(&rules)?;
        Ok(Endpoint {
            port,
            mac,
            addr,
            cfg,
            pre: Pre::default(),
            proto: Protocol::default(),
            post: Post::default(),
            app: Vec::new(),
            control: Vec::new(),
            free: Vec::new(),
            listeners: HashMap::new(),
            handshakes: HashMap::new(),
            wheel: flow::wheel(),
            scheduled: Vec::new(),
            flows: Vec::new(),
            last_control: Instant::now(),
            out: Vec::new(),
            deferred_acks: Vec::new(),
            neighbors: HashMap::new(),
            opening: HashMap::new(),
            failed: HashMap::new(),
            next_port: open::EPHEMERAL.start,
            rx_scratch: Vec::new(),
            tx_payload: Vec::new(),
            counters: Counters::default(),
            start,
            now: Instant::now(),
            cycles: StageCycles::default(),
            engine,
        })
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Frames the kernel dropped because the port could not take them
    /// (its ring full), since the port opened: what reached the host and
    /// never reached the data path.
    pub fn port_drops(&mut self) -> Result<u64, ToeError> {
        Ok(self.port.kernel_drops()?)
    }

    /// What each stage cost so far ([`crate::cycles`]).
    pub fn stage_cycles(&self) -> StageCycles {
        self.cycles
    }

    pub fn port(&self) -> &Port {
        &self.port
    }

    /// The address this endpoint serves.
    pub fn local_addr(&self) -> IpAddr {
        self.addr
    }

    /// Accepts connections to `port` from now on.
    pub fn listen(&mut self, port: u16) {
        self.listeners.entry(port).or_default();
    }

    /// A connection established on `port`, if one is waiting.
    pub fn accept(&mut self, port: u16) -> Option<ConnIdx> {
        self.listeners.get_mut(&port)?.pop_front()
    }

    /// Stops accepting connections to `port`; returns the established ones
    /// nobody accepted (the caller closes them).
    pub fn unlisten(&mut self, port: u16) -> Vec<ConnIdx> {
        self.listeners
            .remove(&port)
            .map(Vec::from)
            .unwrap_or_default()
    }

    /// The local and remote address of an established connection.
    pub fn addresses(&self, conn: ConnIdx) -> Option<(SocketAddr, SocketAddr)> {
        self.app.get(conn as usize)?.as_ref()?;
        let r = self.pre.route(conn)?;
        Some((
            SocketAddr::new(r.src, r.src_port),
            SocketAddr::new(r.dst, r.dst_port),
        ))
    }

    /// What TCP_INFO reports of an established connection: the
    /// protocol stage's sequence, window and loss state (on the pipelined
    /// engine as its protocol stage last published them; on the Laminar
    /// engine the transmit side's from Laminar's own loss state while
    /// Laminar transmits), its segment size, and the control plane's
    /// retransmission counts.
    pub fn tcp_info(&self, conn: ConnIdx) -> Option<TcpInfo> {
        let c = self.control.get(conn as usize)?.as_ref()?;
        let s = self.conn_snapshot(conn);
        let (snd_una, snd_nxt, loss) = self.engine_loss(conn, c.mss).unwrap_or_else(|| {
            (
                s.seq.wrapping_sub(s.tx_sent),
                s.seq,
                self.proto.loss_info(conn, c.mss),
            )
        });
        let (total_retrans, backoffs) = self
            .flow_info(conn)
            .map_or((0, 0), |f| (f.retrans_segs, f.backoffs));
        Some(TcpInfo {
            snd_una,
            snd_nxt,
            rcv_nxt: s.ack,
            rcv_wnd: s.rx_avail,
            snd_mss: c.mss,
            retrans: loss.retrans,
            lost: loss.lost,
            sacked: loss.sacked,
            reordering: loss.reordering,
            total_retrans,
            retransmits: backoffs,
            backoff: backoffs,
        })
    }

    /// Our timestamp clock (RFC 7323 TSval), in milliseconds: read from
    /// the time of the current poll, not the clock (reading the clock
    /// per segment cost a tenth of the data path's time in a VM).
    fn now_ms(&self) -> u32 {
        (self.now - self.start).as_millis() as u32
    }

    /// Receives, processes and sends what is ready; runs the timers.
    /// Returns the frames received.
    pub fn poll(&mut self) -> Result<usize, ToeError> {
        self.now = Instant::now();
        // Frames are copied out of the port's ring into buffers that keep
        // their capacity from one poll to the next.
        let mut frames = std::mem::take(&mut self.rx_scratch);
        let mut used = 0;
        let t = ticks();
        let n = self.port.recv_batch(64, |f| {
            if used == frames.len() {
                frames.push(Vec::with_capacity(2048));
            }
            frames[used].clear();
            frames[used].extend_from_slice(f.data);
            used += 1;
        });
        // A poll that found nothing is the busy loop waiting, not a
        // stage's cost.
        if n > 0 {
            self.cycles.netif += ticks() - t;
        }
        self.counters.rx_frames += n as u64;
        for f in &frames[..used] {
            self.input(f);
        }
        self.rx_scratch = frames;
        self.engine_run()?;
        self.send_deferred_acks();
        self.timers();
        self.open_timers();
        self.congestion_control();
        self.schedule();
        self.flush()?;
        Ok(n)
    }

    /// No timer can fire, so only a frame can give the endpoint work (a
    /// poll loop may sleep until one comes): no open or handshake in
    /// progress, and every connection idle, with nothing queued or in
    /// flight (no retransmission, probe or persist timer) and not in
    /// TIME_WAIT.
    pub fn is_quiet(&self) -> bool {
        self.handshakes.is_empty()
            && self.opening.is_empty()
            && (0..self.control.len() as ConnIdx)
                .all(|c| self.control[c as usize].is_none() || self.conn_is_quiet(c))
    }

    fn conn_is_quiet(&self, conn: ConnIdx) -> bool {
        let tx_size = self.cfg.tx_buffer.next_power_of_two();
        let idle_app = self.app[conn as usize]
            .as_ref()
            .is_some_and(|a| a.tx_free == tx_size);
        idle_app
            && self.conn_snapshot(conn).tx_sent == 0
            && self.flow_info(conn).is_none_or(|f| !f.time_wait)
    }

    /// Waits up to `timeout` for a frame.
    pub fn wait(&self, timeout: Duration) -> Result<(), ToeError> {
        let mut fds = vec![self.port.as_raw_fd()];
        fds.extend(self.wake_fd());
        pktio::wait_fds(&fds, Some(timeout))?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ToeError> {
        if !self.out.is_empty() {
            let t = ticks();
            let sent = self.port.send_batch(&self.out)?;
            self.cycles.netif += ticks() - t;
            self.counters.tx_frames += sent as u64;
            self.out.clear();
        }
        Ok(())
    }

    /// One received frame through the stages.
    fn input(&mut self, frame: &[u8]) {
        let t = ticks();
        let parsed = segment::parse(frame);
        if let Ok(Frame::Tcp(seg)) = &parsed {
            if seg.route.dst == self.addr {
                let steer = self.pre.steer(seg);
                self.cycles.pre += ticks() - t;
                return match steer {
                    Steer::DataPath { conn, summary } => {
                        if self.engine_input(conn, seg, &summary, Some(frame)) {
                            return;
                        }
                        let t = ticks();
                        let (out, snap) = self.proto.rx(conn, &summary);
                        self.cycles.protocol += ticks() - t;
                        self.cycles.rx_segments += 1;
                        self.after_protocol(conn, seg, &out, &snap);
                    }
                    Steer::Control => self.control_input(seg),
                };
            }
        }
        match parsed {
            Ok(Frame::Arp(a)) => {
                self.learn(IpAddr::V4(a.sender_ip), a.sender_mac);
                if a.op == 1 && IpAddr::V4(a.target_ip) == self.addr {
                    self.out.push(segment::arp_reply(&a, self.mac));
                    self.counters.arp_replies += 1;
                }
            }
            Ok(Frame::Nd(n)) => {
                if let Some(mac) = n.lladdr.or((!n.solicit).then_some(n.src_mac)) {
                    let who = if n.solicit { n.src } else { n.target };
                    if !who.is_unspecified() {
                        self.learn(IpAddr::V6(who), mac);
                    }
                }
                if let IpAddr::V6(ours) = self.addr {
                    if n.solicit && n.target == ours {
                        self.out.push(segment::na_reply(&n, self.mac, ours));
                        self.counters.arp_replies += 1;
                    }
                }
            }
            Ok(Frame::Tcp(_)) => {}
            Err(segment::SegmentError::BadIpChecksum | segment::SegmentError::BadTcpChecksum) => {
                self.counters.bad_checksum += 1
            }
            // Not TCP, ARP or neighbour discovery for us (ICMP, MLD, ...):
            // the data path has nothing to do with it.
            Err(segment::SegmentError::NotOurs) => {}
            Err(_) => self.counters.malformed += 1,
        }
    }

    /// Post-processing, payload copy, context queue, then the ACK.
    fn after_protocol(
        &mut self,
        conn: ConnIdx,
        seg: &Segment<'_>,
        out: &RxOutcome,
        snap: &Snapshot,
    ) {
        self.count_refusal(out.refused);
        let ece = seg.flags.has(Flags::ECE);
        let t = ticks();
        self.post.account(conn, out, seg.ce, ece);
        self.cycles.post += ticks() - t;
        if out.fast_retransmit {
            self.counters.fast_retransmits += 1;
        }
        self.counters.count_ack(out.sack, out.lost_retransmit);
        self.flow_feedback(conn, out, snap, seg.flags.has(Flags::FIN));
        let Some(app) = self.app[conn as usize].as_mut() else {
            return;
        };
        // Payload copy ("DMA").
        if let Some(p) = out.place {
            let t = ticks();
            let data = &seg.payload[p.skip as usize..(p.skip + p.len) as usize];
            app.rx.write(p.pos, data);
            self.cycles.copy += ticks() - t;
        }
        // Context queue: only after the copy.
        app.rx_ready += out.readable;
        app.tx_free += out.acked;
        app.eof |= out.fin;
        if out.acked > 0 {
            if let Some(c) = self.control[conn as usize].as_mut() {
                c.timer.progress(self.now);
            }
        }
        if out.send_ack {
            // In-order data is acknowledged once per receive batch (the
            // last state covers all of it, as GRO-style batching does);
            // anything else at once, so the peer sees every duplicate ACK.
            let in_order = out.refused.is_none() && out.readable > 0 && !out.fin;
            if in_order {
                if !self.deferred_acks.contains(&conn) {
                    self.deferred_acks.push(conn);
                }
            } else {
                // This ACK carries the latest state: one deferred for the
                // batch would only repeat it (and, after the peer's FIN,
                // reach a peer that has gone and draw a reset).
                self.deferred_acks.retain(|&c| c != conn);
                self.send_ack(conn, snap);
            }
        }
        self.activate(conn);
        self.maybe_release(conn, snap);
    }

    fn count_refusal(&mut self, r: Option<Refusal>) {
        let c = &mut self.counters;
        match r {
            Some(Refusal::Duplicate) => c.refused_duplicate += 1,
            Some(Refusal::BeyondWindow) => c.refused_beyond_window += 1,
            Some(Refusal::OutsideInterval) => c.refused_outside_interval += 1,
            Some(Refusal::AckOfUnsent) => c.refused_ack_of_unsent += 1,
            None => {}
        }
    }

    /// One ACK per connection for the in-order data of the batch, sent
    /// after every copy of the batch completed.
    fn send_deferred_acks(&mut self) {
        for conn in std::mem::take(&mut self.deferred_acks) {
            if self.pre.route(conn).is_some() {
                let snap = self.proto.snapshot(conn);
                self.send_ack(conn, &snap);
            }
        }
    }

    fn send_ack(&mut self, conn: ConnIdx, snap: &Snapshot) {
        let Some(route) = self.pre.route(conn) else {
            return;
        };
        let t = ticks();
        let h = self.post.header(conn, snap.seq, 0, snap, self.now_ms());
        self.emit(&route, &h, &[]);
        self.cycles.post += ticks() - t;
    }

    fn emit(&mut self, route: &Route, h: &Header, payload: &[u8]) {
        let mut f = Vec::with_capacity(66 + payload.len());
        segment::build(route, h, payload, &mut f);
        self.out.push(f);
    }

    fn transmit(&mut self, conn: ConnIdx, g: crate::protocol::TxGrant, snap: &Snapshot) {
        let (Some(route), Some(app)) = (self.pre.route(conn), self.app[conn as usize].as_ref())
        else {
            return;
        };
        let t = ticks();
        // A buffer kept from one segment to the next: the payload is copied
        // out of the ring (it may wrap) and into the frame.
        let mut payload = std::mem::take(&mut self.tx_payload);
        payload.resize(g.len as usize, 0);
        app.tx.read(g.pos, &mut payload);
        let t2 = ticks();
        self.cycles.copy += t2 - t;
        let (ect, cwr) = self.data_marks(conn, &g);
        let mut flags = Flags::PSH;
        if g.fin {
            flags |= Flags::FIN;
        }
        if cwr {
            flags |= Flags::CWR;
        }
        let h = self.post.header(conn, g.seq, flags, snap, self.now_ms());
        self.emit(&route, &h, &payload);
        if ect {
            if let Some(f) = self.out.last_mut() {
                order::wire::ecn::set_ecn(f, order::wire::ecn::Ecn::Ect0);
            }
        }
        self.tx_payload = payload;
        self.cycles.post += ticks() - t2;
        if let Some(c) = self.control[conn as usize].as_mut() {
            if snap.tx_sent == g.len + u32::from(g.fin) {
                c.timer.last_progress = self.now;
            }
        }
    }

    /// The control plane's retransmission timeouts and tail loss probes
    /// ([`timer`]), and handshake retries.
    fn timers(&mut self) {
        let now = self.now;
        for conn in 0..self.control.len() as ConnIdx {
            // An index taken by an open still in its handshake has no
            // protocol state yet.
            if self.control[conn as usize].is_none() {
                continue;
            }
            let in_flight = self.proto.snapshot(conn).tx_sent;
            let srtt = Some(self.post.state(conn).rtt_est).filter(|&us| us > 0);
            let Some(c) = self.control[conn as usize].as_mut() else {
                continue;
            };
            match c.timer.expired(now, in_flight, c.mss, srtt) {
                Some(timer::Expiry::Timeout) => {
                    self.proto.timeout(conn);
                    self.flow_timeout(conn);
                    self.counters.timeouts += 1;
                }
                Some(timer::Expiry::Probe) => {
                    self.proto.probe(conn);
                    self.counters.tail_loss_probes += 1;
                }
                None => continue,
            }
            self.activate(conn);
        }
        let due: Vec<FourTuple> = self
            .handshakes
            .iter()
            .filter(|(_, h)| now - h.sent_at >= Duration::from_secs(1))
            .map(|(t, _)| *t)
            .collect();
        for t in due {
            let Some(mut h) = self.handshakes.remove(&t) else {
                continue;
            };
            if h.tries < SYN_TRIES {
                h.tries += 1;
                h.sent_at = now;
                self.send_syn_ack(&t, &h);
                self.handshakes.insert(t, h);
            }
        }
    }

    /// What the data path does not handle: SYN, RST, unknown connections.
    fn control_input(&mut self, seg: &Segment<'_>) {
        let t = FourTuple::of(seg);
        let f = seg.flags;
        if f.has(Flags::RST) && self.opening.contains_key(&t) {
            self.refused(&t, seg);
        } else if f.has(Flags::RST) {
            self.reset_input(&t, seg);
        } else if f.has(Flags::SYN) && f.has(Flags::ACK) {
            self.syn_ack_input(t, seg);
        } else if f.has(Flags::SYN) {
            self.syn_input(t, seg);
        } else if f.has(Flags::ACK) && self.handshakes.contains_key(&t) {
            self.handshake_ack(t, seg);
        } else if self.pre.lookup(&t).is_none() {
            self.send_reset(seg);
        }
    }

    fn syn_input(&mut self, t: FourTuple, seg: &Segment<'_>) {
        if self.syn_in_time_wait(&t, seg) {
            return;
        }
        if let Some(h) = self.handshakes.get(&t) {
            // A retransmitted SYN: our SYN-ACK was lost.
            if h.irs == seg.seq {
                let h = Handshake { ..*h };
                self.send_syn_ack(&t, &h);
            }
            return;
        }
        if !self.listeners.contains_key(&seg.route.dst_port) {
            self.send_reset(seg);
            return;
        }
        // A SYN flood fills the table of half-open connections, not the
        // memory: past `max_conns` of them a SYN is dropped and counted
        // (the peer of a real connection sends it again).
        if self.handshakes.len() >= self.cfg.max_conns as usize {
            self.counters.syn_dropped += 1;
            return;
        }
        let h = Handshake {
            peer_mac: seg.route.src_mac,
            iss: rand::random(),
            irs: seg.seq,
            peer: seg.options,
            sent_at: self.now,
            tries: 0,
            // RFC 3168 section 6.1.1: an ECN-setup SYN has ECE and CWR.
            // Taken whatever our policy: as a receiver we echo CE marks;
            // our own data is ECN-capable only under a policy that reacts.
            ecn: seg.flags.has(Flags::ECE) && seg.flags.has(Flags::CWR),
        };
        self.send_syn_ack(&t, &h);
        self.handshakes.insert(t, h);
    }

    fn send_syn_ack(&mut self, t: &FourTuple, h: &Handshake) {
        let route = Route {
            src_mac: self.mac,
            dst_mac: h.peer_mac,
            src: t.local,
            dst: t.remote,
            src_port: t.local_port,
            dst_port: t.remote_port,
        };
        let header = Header {
            seq: h.iss,
            ack: h.irs.wrapping_add(1),
            flags: Flags(Flags::SYN | Flags::ACK | if h.ecn { Flags::ECE } else { 0 }),
            window: (self.cfg.rx_buffer.min(65535)) as u16,
            options: TcpOptions {
                mss: Some(self.cfg.mss),
                window_scale: h.peer.window_scale.map(|_| WSCALE),
                sack_permitted: h.peer.sack_permitted,
                timestamp: h.peer.timestamp.map(|(val, _)| (self.now_ms(), val)),
                sack: SackBlocks::default(),
            },
        };
        self.emit(&route, &header, &[]);
    }

    /// The ACK of our SYN-ACK: the connection is established and installed
    /// in every stage's table.
    fn handshake_ack(&mut self, t: FourTuple, seg: &Segment<'_>) {
        let Some(h) = self.handshakes.get(&t) else {
            return;
        };
        if seg.ack != h.iss.wrapping_add(1) {
            self.send_reset(seg);
            return;
        }
        let Some(h) = self.handshakes.remove(&t) else {
            return;
        };
        let Some(conn) = self.allocate() else {
            self.counters.table_full += 1;
            self.send_reset(seg);
            return;
        };
        self.install(conn, &t, &h, seg);
        if let Some(q) = self.listeners.get_mut(&t.local_port) {
            q.push_back(conn);
        }
        // The ACK may carry data or a FIN already.
        if !seg.payload.is_empty() || seg.flags.has(Flags::FIN) {
            if let Steer::DataPath { conn, summary } = self.pre.steer(seg) {
                if self.engine_input(conn, seg, &summary, None) {
                    return;
                }
                let (out, snap) = self.proto.rx(conn, &summary);
                self.after_protocol(conn, seg, &out, &snap);
            }
        }
    }

    fn allocate(&mut self) -> Option<ConnIdx> {
        if let Some(c) = self.free.pop() {
            return Some(c);
        }
        let next = self.app.len() as u32;
        (next < self.cfg.max_conns).then(|| {
            self.app.push(None);
            self.control.push(None);
            self.scheduled.push(false);
            next
        })
    }

    /// Installs an established connection in every stage's table. `seg` is
    /// the segment that completed the handshake; the window of a SYN is
    /// never scaled (RFC 7323 section 2.2), that of any later segment is.
    fn install(&mut self, conn: ConnIdx, t: &FourTuple, h: &Handshake, seg: &Segment<'_>) {
        let scaled = h.peer.window_scale.is_some();
        let timestamps = h.peer.timestamp.is_some();
        let peer_mss = u32::from(h.peer.mss.unwrap_or(536));
        let id = ConnId {
            peer_mac: h.peer_mac,
            local_mac: self.mac,
            peer_ip: t.remote,
            local_ip: t.local,
            local_port: t.local_port,
            remote_port: t.remote_port,
            flow_group: t.flow_group(1),
        };
        let peer_ws = h.peer.window_scale.unwrap_or(0);
        let peer_wscale = if scaled { peer_ws } else { 0 };
        self.pre.install(conn, id, peer_wscale);
        let rx = PayloadBuf::new(self.cfg.rx_buffer);
        let tx = PayloadBuf::new(self.cfg.tx_buffer);
        let remote_win = u32::from(seg.window)
            << if scaled && !seg.flags.has(Flags::SYN) {
                peer_ws
            } else {
                0
            };
        let proto = ProtoState {
            seq: h.iss.wrapping_add(1),
            tx_high: h.iss.wrapping_add(1),
            ack: h.irs.wrapping_add(1),
            rx_avail: rx.size(),
            remote_win,
            next_ts: seg.options.timestamp.map_or(0, |t| t.0),
            ooo: OooIntervals::new(self.cfg.ooo_bound),
            ..ProtoState::default()
        };
        self.proto.install(conn, proto.clone());
        let post = PostState {
            opaque: u64::from(conn),
            rx_size: rx.size(),
            tx_size: tx.size(),
            rx_wscale: if scaled { WSCALE } else { 0 },
            timestamps,
            // Offered on every SYN we send and answered on every SYN-ACK:
            // the peer's option says it was negotiated (RFC 2018 section 2).
            sack: h.peer.sack_permitted,
            ..PostState::default()
        };
        self.post.install(conn, post);
        let mss = peer_mss.min(u32::from(self.cfg.mss)) - if timestamps { 12 } else { 0 };
        self.control[conn as usize] = Some(Control {
            mss,
            timer: timer::RetransmitTimer::new(self.now, self.cfg.min_rto),
        });
        self.install_flow(conn, mss, h.ecn, h.iss.wrapping_add(1));
        self.app[conn as usize] = Some(AppConn {
            tx_free: tx.size(),
            rx,
            tx,
            rx_read: 0,
            rx_ready: 0,
            tx_write: 0,
            eof: false,
            reset: false,
            closed: false,
        });
        let installed = pipelined::Installed {
            id,
            peer_wscale,
            proto,
            post,
        };
        self.engine_install(conn, t, h, remote_win, installed);
    }

    /// RFC 5961 section 3.2: a RST is taken only at exactly the next
    /// expected sequence number; one elsewhere in the window gets a
    /// challenge ACK.
    fn reset_input(&mut self, t: &FourTuple, seg: &Segment<'_>) {
        if self.handshakes.remove(t).is_some() {
            return;
        }
        let Some(conn) = self.pre.lookup(t) else {
            return;
        };
        let snap = self.conn_snapshot(conn);
        if snap.fin_received && snap.fin_acked {
            // Both directions are closed and acknowledged (TIME-WAIT, or
            // the last ACK of a passive close): a reset aborts nothing,
            // and what arrived stays readable up to the end of file.
            self.counters.resets_after_close += 1;
            return;
        }
        let rcv_nxt = self.engine_rcv_nxt(conn).unwrap_or(snap.ack);
        if seg.seq == rcv_nxt {
            self.counters.resets_received += 1;
            if let Some(app) = self.app[conn as usize].as_mut() {
                app.reset = true;
            }
            self.engine_release(conn);
            self.pre.remove(conn);
            self.scheduled[conn as usize] = false;
        } else if !self.engine_challenge_ack(conn) {
            self.send_ack(conn, &snap);
        }
    }

    /// RFC 9293 section 3.10.7.1: the reset for a segment of no connection.
    fn send_reset(&mut self, seg: &Segment<'_>) {
        let route = Route {
            src_mac: self.mac,
            ..seg.route.reversed()
        };
        let len = seg.payload.len() as u32
            + u32::from(seg.flags.has(Flags::SYN))
            + u32::from(seg.flags.has(Flags::FIN));
        let header = if seg.flags.has(Flags::ACK) {
            Header {
                seq: seg.ack,
                ack: 0,
                flags: Flags(Flags::RST),
                window: 0,
                options: TcpOptions::default(),
            }
        } else {
            Header {
                seq: 0,
                ack: seg.seq.wrapping_add(len),
                flags: Flags(Flags::RST | Flags::ACK),
                window: 0,
                options: TcpOptions::default(),
            }
        };
        self.emit(&route, &header, &[]);
        self.counters.resets_sent += 1;
    }

    /// Frees a connection both sides closed, whose FIN was acknowledged
    /// and whose bytes the application has read.
    fn maybe_release(&mut self, conn: ConnIdx, snap: &Snapshot) {
        let done = self.app[conn as usize]
            .as_ref()
            .is_some_and(|a| a.closed && a.rx_ready == 0 && snap.fin_received && snap.fin_acked);
        if done && !self.in_time_wait(conn) {
            self.release(conn);
        }
    }

    fn release(&mut self, conn: ConnIdx) {
        self.engine_release(conn);
        self.pre.remove(conn);
        self.app[conn as usize] = None;
        self.control[conn as usize] = None;
        if let Some(f) = self.flows.get_mut(conn as usize) {
            *f = None;
        }
        self.scheduled[conn as usize] = false;
        self.free.push(conn);
    }

    fn app(&mut self, conn: ConnIdx) -> Result<&mut AppConn, ToeError> {
        if let Some(f) = self.failed.get(&conn) {
            return Err(f.error());
        }
        if self.opening.values().any(|o| o.conn == conn) {
            return Err(ToeError::WouldBlock);
        }
        self.app
            .get_mut(conn as usize)
            .and_then(Option::as_mut)
            .ok_or(ToeError::NotConnected)
    }

    /// Reads what arrived in order: Ok(0) once the peer closed and all was
    /// read, WouldBlock while nothing is ready.
    pub fn recv(&mut self, conn: ConnIdx, buf: &mut [u8]) -> Result<usize, ToeError> {
        let app = self.app(conn)?;
        let n = (app.rx_ready as usize).min(buf.len());
        if n == 0 {
            return match (app.reset, app.eof) {
                (true, _) => Err(ToeError::Reset),
                (_, true) => {
                    let snap = self.conn_snapshot(conn);
                    self.maybe_release(conn, &snap);
                    Ok(0)
                }
                _ => Err(ToeError::WouldBlock),
            };
        }
        let pos = app.rx_read;
        app.rx_read = app.rx_read.wrapping_add(n as u32);
        app.rx_ready -= n as u32;
        self.read_rx(conn, pos, &mut buf[..n]);
        if self.engine_consumed(conn, n as u32) {
            return Ok(n);
        }
        // Host control *Win*: tell the peer when the window reopens from
        // below one segment (not after the peer's FIN: it sends nothing
        // more, and may have gone, so the update would draw a reset).
        let before = self.proto.consumed(conn, n as u32);
        let snap = self.proto.snapshot(conn);
        if before < u32::from(self.cfg.mss) && !snap.fin_received {
            self.send_ack(conn, &snap);
        }
        Ok(n)
    }

    /// Queues bytes to send; returns how many fit (WouldBlock if none).
    pub fn send(&mut self, conn: ConnIdx, data: &[u8]) -> Result<usize, ToeError> {
        let app = self.app(conn)?;
        if app.reset {
            return Err(ToeError::Reset);
        }
        let n = (app.tx_free as usize).min(data.len());
        if n == 0 {
            return Err(ToeError::WouldBlock);
        }
        let pos = app.tx_write;
        app.tx_write = app.tx_write.wrapping_add(n as u32);
        app.tx_free -= n as u32;
        self.write_tx(conn, pos, &data[..n]);
        if self.engine_queued(conn, n as u32) {
            return Ok(n);
        }
        self.proto.queued(conn, n as u32);
        self.activate(conn);
        Ok(n)
    }

    /// Closes our direction: a FIN follows the queued bytes. The
    /// connection is freed once both FINs are acknowledged.
    pub fn close(&mut self, conn: ConnIdx) -> Result<(), ToeError> {
        if self.abandon_open(conn) {
            return Ok(());
        }
        let app = self.app(conn)?;
        app.closed = true;
        if app.reset {
            self.release(conn);
            return Ok(());
        }
        if self.engine_close(conn) {
            return Ok(());
        }
        self.closing(conn);
        self.proto.close(conn);
        self.activate(conn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_laminar_engine_refuses_a_bound_of_no_interval() {
        let laminar = |ooo_bound| EndpointConfig {
            ooo_bound,
            engine: Engine::Laminar,
            ..EndpointConfig::default()
        };
        let err = check_config(&laminar(OooBound::Intervals(0))).unwrap_err();
        assert!(
            err.to_string().contains("always keeps one interval"),
            "{err}"
        );
        assert!(check_config(&laminar(OooBound::THESIS)).is_ok());
        let toe = EndpointConfig {
            ooo_bound: OooBound::Intervals(0),
            ..EndpointConfig::default()
        };
        assert!(check_config(&toe).is_ok());
    }
}
