//! The data path as a fine-grained parallel pipeline (thesis section 4.3,
//! Figs. 4.3 and 4.6-4.8): stage instances joined by single-producer
//! single-consumer rings, mapped onto worker threads.
//!
//! ```text
//! front (sequencer) ─► pre ×P ─► [reorder] protocol ×G ─► post ×Q ─► copy ×C ─► [reorder] tx + context queue
//!                       any group      one per flow group   per group  per group   per group
//! ```
//!
//! - The front end takes frames from the device and host-control requests
//!   from the application, finds each one's flow group (hash of the
//!   4-tuple % G) and gives it the group's next ticket.
//! - Pre-processors (replicated, serving any group) validate, look the
//!   connection up and summarise; they may finish out of order.
//! - A reorder buffer in front of each group's protocol stage admits items
//!   in ticket order (hazard 2 of Fig. 4.7: a false hole). The protocol
//!   stage, the only atomic one, numbers what it emits with the group's
//!   output tickets.
//! - Post-processors build ACK and segment headers; copy stages move
//!   payload between frames and the connection's buffers ("DMA").
//! - A reorder buffer per group in front of the device and the context
//!   queue releases frames and notifications in output-ticket order:
//!   segments leave in sequence order (hazard 1), and an ACK or a
//!   notification leaves only after its own copy and every earlier one
//!   completed (hazard 3; with replicated copy stages a later copy can
//!   finish first, and the hazard test caught exactly that when notices
//!   went out from the copy stage directly).
//!
//! With `sequencing` off the two reorder buffers pass items through as
//! they come, which is how the hazards show (the tests use it).
//!
//! A stage instance is a [`Stage`]; `threads` workers each run a share of
//! them round-robin, so 1 thread runs the whole pipeline to completion in
//! turn and N threads spread it, without a code change.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rtrb::{Consumer, Producer, RingBuffer};

use crate::buffer::PayloadBuf;
use crate::naps::{Naps, IDLE_ROUNDS, LONGEST_NAP};
use order::seq::distance;

use crate::protocol::{Placement, Refusal, RxOutcome, RxSummary, TxGrant};
use crate::recovery::LossInfo;
use crate::segment::{self, Flags, Frame, Header, Route};
use crate::sequencer::{Reorder, Sequencer};
use crate::stages::{ConnIdx, FourTuple, Post, Pre, Protocol, Snapshot, Steer};
use crate::state::ProtoState;

/// How the pipeline is laid out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PipelineConfig {
    /// Flow groups: protocol stages, each with its own post and copy.
    pub groups: usize,
    /// Pre-processors (shared by all groups).
    pub pre: usize,
    /// Post-processors and copy stages per group.
    pub post: usize,
    pub copy: usize,
    /// Worker threads the stage instances are spread over.
    pub threads: usize,
    /// Slots per ring.
    pub ring: usize,
    /// Reorder before the protocol stage and before transmit.
    pub sequencing: bool,
    /// Random per-item stalls in every stage (tests replay Fig. 4.7's
    /// hazards with them): (seed, longest stall, one item in `every`).
    pub jitter: Option<(u64, Duration, u32)>,
    /// Payload bytes per segment (a connection's own limit, set with
    /// [`Control::Limit`], takes its place).
    pub mss: u32,
    /// The origin of the timestamp clock (RFC 7323 TSval); None: the
    /// pipeline's start. An endpoint hands its own, so a connection's
    /// TSval keeps growing when the pipeline takes it over.
    pub clock: Option<Instant>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig::layout(1, 1, 1)
    }
}

impl PipelineConfig {
    /// `groups` flow groups, `replicas` pre-processors, post-processors and
    /// copy stages (per group for the last two), on `threads` workers;
    /// sequencing on, no stalls.
    pub const fn layout(groups: usize, replicas: usize, threads: usize) -> Self {
        PipelineConfig {
            groups,
            pre: replicas,
            post: replicas,
            copy: replicas,
            threads,
            ring: 1024,
            sequencing: true,
            jitter: None,
            mss: 1448,
            clock: None,
        }
    }
}

/// A connection's payload buffers, shared by the copy stages and the
/// application.
#[derive(Debug)]
pub struct Buffers {
    pub rx: Mutex<PayloadBuf>,
    pub tx: Mutex<PayloadBuf>,
}

/// What the context queue tells the application (after the copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// `n` more bytes are readable in order.
    Readable {
        conn: ConnIdx,
        n: u32,
    },
    /// `n` sent bytes were acknowledged: their buffer space is free.
    Acked {
        conn: ConnIdx,
        n: u32,
    },
    Fin {
        conn: ConnIdx,
    },
}

/// What enters the pipeline besides frames (host control, Fig. 4.4).
#[derive(Debug, Clone)]
pub enum Control {
    /// Install a connection's protocol state in its group's stage.
    Install {
        conn: ConnIdx,
        state: Box<ProtoState>,
        /// Tells this connection's published state from that of an
        /// earlier one with the same index ([`Published::epoch`]).
        epoch: u64,
    },
    /// The application queued `n` bytes (*Win*).
    Queued { conn: ConnIdx, n: u32 },
    /// The application read `n` bytes (*Win*); the window update goes
    /// out if the window reopens from below a segment.
    Consumed { conn: ConnIdx, n: u32 },
    /// The control plane's limits on transmit grants (thesis section 4.2:
    /// it writes per-flow congestion state): at most `cwnd` bytes in
    /// flight, segments of `mss` payload bytes; with `paced`, a segment
    /// also needs the flow scheduler's credit ([`Control::Credit`]), of
    /// which it takes its payload and `frame_overhead` header bytes.
    Limit {
        conn: ConnIdx,
        cwnd: u32,
        mss: u32,
        paced: bool,
        frame_overhead: u32,
        /// New data is ECN-capable (ECT(0)).
        ect: bool,
    },
    /// The policy cut the window on ECN-Echo: the next data segment
    /// carries CWR (RFC 3168 section 6.1.2).
    Cwr { conn: ConnIdx },
    /// The flow scheduler's grant to a paced flow (section 4.3.4: the
    /// control plane sets the rate): `bytes` more on the wire, the credit
    /// held at most `burst`, so an idle flow does not save up.
    Credit {
        conn: ConnIdx,
        bytes: u32,
        burst: u32,
    },
    /// The control plane's retransmission timeout: what was not
    /// acknowledged is sent again ([`crate::recovery`]).
    Timeout { conn: ConnIdx },
    /// The control plane's probe timer: a tail loss probe (RFC 8985).
    Probe { conn: ConnIdx },
    /// The application closed: a FIN after the queued bytes (*Fin*).
    Close { conn: ConnIdx },
    /// The connection is gone: nothing more is sent for it and its
    /// entries leave the shared tables.
    Remove { conn: ConnIdx },
}

impl Control {
    fn conn(&self) -> ConnIdx {
        match *self {
            Control::Install { conn, .. }
            | Control::Queued { conn, .. }
            | Control::Consumed { conn, .. }
            | Control::Limit { conn, .. }
            | Control::Credit { conn, .. }
            | Control::Cwr { conn }
            | Control::Timeout { conn }
            | Control::Probe { conn }
            | Control::Close { conn }
            | Control::Remove { conn } => conn,
        }
    }
}

/// A connection's state as the protocol stage last left it, for the
/// control plane (retransmission timeout, teardown, RST validation,
/// TCP_INFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    pub snap: Snapshot,
    /// SND.MAX: one past the highest sequence number sent.
    pub snd_max: u32,
    /// The loss state's counts for TCP_INFO, in segments: read here with
    /// the rest, as the loss state is the protocol stage's alone.
    pub loss: LossInfo,
    /// The [`Control::Install`] it follows: the control plane may reuse
    /// an index before this stage has seen the old connection's removal,
    /// and must not read the old one's state as the new one's.
    pub epoch: u64,
}

/// What the stages did, counted as they do it.
#[derive(Debug, Default)]
struct CounterCells {
    front: AtomicU64,
    pre: AtomicU64,
    protocol: AtomicU64,
    post: AtomicU64,
    copy: AtomicU64,
    tx_frames: AtomicU64,
    notices: AtomicU64,
    protocol_held: AtomicU64,
    tx_held: AtomicU64,
    fast_retransmits: AtomicU64,
    refused_duplicate: AtomicU64,
    refused_beyond_window: AtomicU64,
    refused_outside_interval: AtomicU64,
    refused_ack_of_unsent: AtomicU64,
    dsacks_received: AtomicU64,
    lost_retransmits: AtomicU64,
    sack_blocks_ignored: AtomicU64,
    sack_blocks_dropped: AtomicU64,
}

/// What the pipeline counted: items per stage and the items a reorder
/// buffer held because a lower ticket had not arrived yet (section 4.3.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PipelineCounters {
    /// Frames and host-control requests the front end ticketed.
    pub front: u64,
    /// Items the pre-processors summarised.
    pub pre: u64,
    /// Items the protocol stages processed.
    pub protocol: u64,
    /// Items the post-processors prepared.
    pub post: u64,
    /// Items the copy stages completed.
    pub copy: u64,
    /// Frames the transmit stage handed to the device.
    pub tx_frames: u64,
    /// Notifications released to the context queue.
    pub notices: u64,
    /// Items held in a protocol stage's reorder buffer.
    pub protocol_held: u64,
    /// Items held in the transmit stage's reorder buffers.
    pub tx_held: u64,
    /// The protocol stages' verdicts: fast retransmits (three duplicate
    /// ACKs) and segments refused, by reason.
    pub fast_retransmits: u64,
    pub refused_duplicate: u64,
    pub refused_beyond_window: u64,
    pub refused_outside_interval: u64,
    pub refused_ack_of_unsent: u64,
    /// The peer's SACK blocks: D-SACKs (a retransmission it did not
    /// need), blocks ignored as lies, blocks the full scoreboard dropped.
    pub dsacks_received: u64,
    /// Retransmissions found lost without a timeout.
    pub lost_retransmits: u64,
    pub sack_blocks_ignored: u64,
    pub sack_blocks_dropped: u64,
}

impl CounterCells {
    fn add(cell: &AtomicU64, n: usize) {
        if n > 0 {
            cell.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    fn read(&self) -> PipelineCounters {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PipelineCounters {
            front: r(&self.front),
            pre: r(&self.pre),
            protocol: r(&self.protocol),
            post: r(&self.post),
            copy: r(&self.copy),
            tx_frames: r(&self.tx_frames),
            notices: r(&self.notices),
            protocol_held: r(&self.protocol_held),
            tx_held: r(&self.tx_held),
            fast_retransmits: r(&self.fast_retransmits),
            refused_duplicate: r(&self.refused_duplicate),
            refused_beyond_window: r(&self.refused_beyond_window),
            refused_outside_interval: r(&self.refused_outside_interval),
            refused_ack_of_unsent: r(&self.refused_ack_of_unsent),
            dsacks_received: r(&self.dsacks_received),
            lost_retransmits: r(&self.lost_retransmits),
            sack_blocks_ignored: r(&self.sack_blocks_ignored),
            sack_blocks_dropped: r(&self.sack_blocks_dropped),
        }
    }

    /// Counts a protocol stage's verdict on a segment.
    fn verdict(&self, out: &RxOutcome) {
        if out.fast_retransmit {
            Self::add(&self.fast_retransmits, 1);
        }
        Self::add(&self.dsacks_received, usize::from(out.sack.dsack));
        Self::add(&self.lost_retransmits, usize::from(out.lost_retransmit));
        Self::add(&self.sack_blocks_ignored, usize::from(out.sack.ignored));
        Self::add(&self.sack_blocks_dropped, usize::from(out.sack.dropped));
        let refused = match out.refused {
            Some(Refusal::Duplicate) => &self.refused_duplicate,
            Some(Refusal::BeyondWindow) => &self.refused_beyond_window,
            Some(Refusal::OutsideInterval) => &self.refused_outside_interval,
            Some(Refusal::AckOfUnsent) => &self.refused_ack_of_unsent,
            None => return,
        };
        Self::add(refused, 1);
    }
}

/// The pipeline's observations, for the hazard tests and the experiment.
#[derive(Debug, Default)]
pub struct Trace {
    /// Per connection, the arrival index of each frame the protocol stage
    /// processed, in processing order.
    pub protocol_order: HashMap<ConnIdx, Vec<u64>>,
    /// Per connection, the sequence numbers of data segments in transmit
    /// order.
    pub tx_seq: HashMap<ConnIdx, Vec<u32>>,
}

/// The tables and queues the stages share with the control plane and the
/// application.
#[derive(Clone)]
pub struct Shared {
    pub pre: Arc<RwLock<Pre>>,
    pub post: Arc<RwLock<Post>>,
    pub buffers: Arc<RwLock<HashMap<ConnIdx, Arc<Buffers>>>>,
    /// What the stages observed (the hazard tests read it); None: nothing
    /// is recorded, as in measurements.
    pub trace: Option<Arc<Mutex<Trace>>>,
}

/// One stage instance: does what work is ready, returns how much.
trait Stage: Send {
    fn run(&mut self) -> usize;
}

/// An output ring and what did not fit yet (back-pressure, never a drop).
struct Out<T> {
    ring: Producer<T>,
    pending: VecDeque<T>,
}

impl<T> Out<T> {
    fn send(&mut self, item: T) {
        if self.pending.is_empty() {
            if let Err(rtrb::PushError::Full(item)) = self.ring.push(item) {
                self.pending.push_back(item);
            }
        } else {
            self.pending.push_back(item);
        }
    }

    /// Pushes what waits; true when nothing does.
    fn flush(&mut self) -> bool {
        while let Some(item) = self.pending.pop_front() {
            if let Err(rtrb::PushError::Full(item)) = self.ring.push(item) {
                self.pending.push_front(item);
                return false;
            }
        }
        true
    }
}

fn ring<T>(cap: usize) -> (Out<T>, Consumer<T>) {
    let (p, c) = RingBuffer::new(cap);
    (
        Out {
            ring: p,
            pending: VecDeque::new(),
        },
        c,
    )
}

/// Random stalls of a stage (tests only configure them).
struct Jitter(Option<(rand::rngs::StdRng, Duration, u32)>);

impl Jitter {
    fn new(cfg: &PipelineConfig, salt: u64) -> Self {
        Jitter(cfg.jitter.map(|(seed, max, every)| {
            (
                rand::rngs::StdRng::seed_from_u64(seed ^ salt),
                max,
                every.max(1),
            )
        }))
    }

    fn stall(&mut self) {
        if let Some((rng, max, every)) = &mut self.0 {
            if rng.gen_range(0..*every) == 0 {
                let us = rng.gen_range(0..=max.as_micros() as u64);
                std::thread::sleep(Duration::from_micros(us));
            }
        }
    }
}

// ---- messages between stages ----

enum Input {
    Frame(Vec<u8>),
    Control(Control),
}

/// An item with its flow group, its ticket in that group's stream, and
/// its place in arrival order (for the trace).
struct Ticketed<T> {
    group: usize,
    ticket: u64,
    arrival: u64,
    item: T,
}

impl<T> Ticketed<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Ticketed<U> {
        Ticketed {
            group: self.group,
            ticket: self.ticket,
            arrival: self.arrival,
            item: f(self.item),
        }
    }
}

/// What of a received segment goes past the protocol stage: the
/// addresses its ACK goes to, the payload to place, and its ECN marks (a
/// window update the protocol stage makes has no payload and no marks).
struct Inbound {
    route: Route,
    payload: Vec<u8>,
    ce: bool,
    ece: bool,
}

enum Summarised {
    Segment {
        conn: ConnIdx,
        summary: RxSummary,
        inbound: Inbound,
    },
    Control(Control),
    /// Not the data path's (or malformed): keeps the ticket stream whole.
    Skip,
}

enum Work {
    Rx {
        conn: ConnIdx,
        out: RxOutcome,
        snap: Snapshot,
        inbound: Inbound,
    },
    Tx {
        conn: ConnIdx,
        grant: TxGrant,
        snap: Snapshot,
        route: Route,
        marks: TxMarks,
    },
}

/// What the protocol stage tells the post-processor about a data segment.
#[derive(Debug, Clone, Copy, Default)]
struct TxMarks {
    /// ECT(0) on the frame and CWR in its header (RFC 3168).
    ect: bool,
    cwr: bool,
    /// The data was sent before (a retransmission): counted per
    /// connection.
    again: bool,
}

/// What leaves the copy stage: a frame to send and notices to give, both
/// released in output-ticket order, so neither overtakes an earlier copy.
struct Egress {
    frame: Option<(ConnIdx, Vec<u8>)>,
    notices: Vec<Notice>,
}

struct Copy {
    conn: ConnIdx,
    /// RX: payload to place, then notify.
    place: Option<(Placement, Vec<u8>)>,
    notices: Vec<Notice>,
    /// RX: the ACK, built.
    frame: Option<Vec<u8>>,
    /// TX: the segment's addresses and header, where its payload is, and
    /// whether the frame is ECN-capable.
    segment: Option<(Route, Header, TxGrant, bool)>,
}

/// Hands every item to a group by its flow group and numbers it.
struct Front {
    rx: DeviceRx,
    control: Receiver<Control>,
    seq: Sequencer,
    groups: usize,
    outs: Vec<Out<Ticketed<Input>>>,
    next: usize,
    arrival: u64,
    shared: Shared,
    counters: Arc<CounterCells>,
}

impl Front {
    /// The flow group of a frame, from its addresses and ports alone (as
    /// a NIC's steering reads them): validating it is the pre-processor's
    /// job, so the checksums are not computed twice.
    fn group_of_frame(&self, f: &[u8]) -> usize {
        let Ok(ip) = order::wire::ip_packet(order::wire::LinkType::Ethernet, f) else {
            return 0;
        };
        let ports = ip
            .upper
            .get(..4)
            .filter(|_| ip.protocol == 6 && ip.first_fragment);
        let Some(p) = ports else {
            return 0;
        };
        FourTuple {
            local: ip.dst,
            local_port: u16::from_be_bytes([p[2], p[3]]),
            remote: ip.src,
            remote_port: u16::from_be_bytes([p[0], p[1]]),
        }
        .flow_group(self.groups as u8) as usize
    }

    /// The group of a connection's frames: the same hash of its 4-tuple.
    fn group_of_conn(&self, conn: ConnIdx) -> usize {
        let pre = self.shared.pre.read().expect("pre table lock");
        pre.route(conn).map_or(0, |r| {
            FourTuple {
                local: r.src,
                local_port: r.src_port,
                remote: r.dst,
                remote_port: r.dst_port,
            }
            .flow_group(self.groups as u8) as usize
        })
    }

    fn dispatch(&mut self, group: usize, input: Input) {
        let t = Ticketed {
            group,
            ticket: self.seq.take(group),
            arrival: self.arrival,
            item: input,
        };
        self.arrival += 1;
        let n = self.outs.len();
        self.outs[self.next % n].send(t);
        self.next += 1;
    }
}

impl Stage for Front {
    fn run(&mut self) -> usize {
        if !self.outs.iter_mut().all(Out::flush) {
            return 0;
        }
        // Host control first: a request made before a frame arrived is
        // ordered before it.
        let mut m = 0;
        while let Ok(c) = self.control.try_recv() {
            let g = self.group_of_conn(c.conn());
            self.dispatch(g, Input::Control(c));
            m += 1;
        }
        let mut frames = Vec::new();
        let n = (self.rx)(&mut |f| frames.push(f.to_vec()));
        for f in frames {
            let g = self.group_of_frame(&f);
            self.dispatch(g, Input::Frame(f));
        }
        CounterCells::add(&self.counters.front, n + m);
        n + m
    }
}

/// A pre-processor: *Val*, *Id*, *Sum*, then to the item's group.
struct PreStage {
    input: Consumer<Ticketed<Input>>,
    outs: Vec<Out<Ticketed<Summarised>>>,
    shared: Shared,
    jitter: Jitter,
    counters: Arc<CounterCells>,
}

impl PreStage {
    fn summarise(shared: &Shared, input: Input) -> Summarised {
        let f = match input {
            Input::Control(c) => return Summarised::Control(c),
            Input::Frame(f) => f,
        };
        let Ok(Frame::Tcp(seg)) = segment::parse(&f) else {
            return Summarised::Skip;
        };
        let pre = shared.pre.read().expect("pre table lock");
        match pre.steer(&seg) {
            Steer::DataPath { conn, summary } => match pre.route(conn) {
                Some(route) => Summarised::Segment {
                    conn,
                    summary,
                    inbound: Inbound {
                        route,
                        payload: seg.payload.to_vec(),
                        ce: seg.ce,
                        ece: seg.flags.has(Flags::ECE),
                    },
                },
                None => Summarised::Skip,
            },
            Steer::Control => Summarised::Skip,
        }
    }
}

impl Stage for PreStage {
    fn run(&mut self) -> usize {
        let shared = &self.shared;
        let n = parallel_turn(&mut self.input, &mut self.outs, &mut self.jitter, |t| {
            (t.group, t.map(|i| PreStage::summarise(shared, i)))
        });
        CounterCells::add(&self.counters.pre, n);
        n
    }
}

/// A turn of a replicated stage (a pre- or post-processor): once its
/// outputs took what was pending, up to 64 items from `input`, each after
/// the jitter's stall, through `step`, which names the output it goes to.
/// How many items it took.
fn parallel_turn<I, O>(
    input: &mut Consumer<I>,
    outs: &mut [Out<O>],
    jitter: &mut Jitter,
    mut step: impl FnMut(I) -> (usize, O),
) -> usize {
    if !outs.iter_mut().all(Out::flush) {
        return 0;
    }
    let mut n = 0;
    while let Ok(item) = input.pop() {
        jitter.stall();
        let (out, item) = step(item);
        outs[out].send(item);
        n += 1;
        if n == 64 {
            break;
        }
    }
    n
}

/// A flow group's protocol stage, behind its reorder buffer.
struct ProtocolStage {
    inputs: Vec<Consumer<Ticketed<Summarised>>>,
    reorder: Reorder<Ticketed<Summarised>>,
    sequencing: bool,
    in_order: VecDeque<Ticketed<Summarised>>,
    proto: Protocol,
    /// Connections with bytes queued to send.
    routes: HashMap<ConnIdx, Route>,
    /// The control plane's limits per connection ([`Control::Limit`]).
    limits: HashMap<ConnIdx, Limits>,
    /// Each connection's [`Control::Install`] epoch.
    epochs: HashMap<ConnIdx, u64>,
    outs: Vec<Out<Ticketed<Work>>>,
    out_seq: u64,
    next: usize,
    group: usize,
    mss: u32,
    shared: Shared,
    jitter: Jitter,
    counters: Arc<CounterCells>,
    published: Arc<Mutex<HashMap<ConnIdx, Published>>>,
}

/// A connection's transmit limits, as the control plane last wrote them.
#[derive(Debug, Clone, Copy)]
struct Limits {
    cwnd: u32,
    mss: u32,
    /// A paced flow's credit, wire bytes (a segment may overdraw it);
    /// None: not paced.
    credit: Option<i64>,
    frame_overhead: u32,
    /// New data is marked ECT(0); the next data segment carries CWR.
    ect: bool,
    cwr: bool,
    /// One past the highest byte marked as new data.
    high: Option<u32>,
}

impl ProtocolStage {
    fn emit(&mut self, work: Work) {
        let n = self.outs.len();
        let t = Ticketed {
            group: self.group,
            ticket: self.out_seq,
            arrival: 0,
            item: work,
        };
        self.out_seq += 1;
        self.outs[self.next % n].send(t);
        self.next += 1;
    }

    fn process(&mut self, t: Ticketed<Summarised>) {
        match t.item {
            Summarised::Segment { conn, .. } if !self.proto.contains(conn) => {}
            Summarised::Control(ref c)
                if !matches!(c, Control::Install { .. }) && !self.proto.contains(c.conn()) => {}
            Summarised::Segment {
                conn,
                summary,
                inbound,
            } => {
                if let Some(trace) = &self.shared.trace {
                    trace
                        .lock()
                        .expect("trace lock")
                        .protocol_order
                        .entry(conn)
                        .or_default()
                        .push(t.arrival);
                }
                let (out, snap) = self.proto.rx(conn, &summary);
                self.counters.verdict(&out);
                self.routes.insert(conn, inbound.route);
                self.emit(Work::Rx {
                    conn,
                    out,
                    snap,
                    inbound,
                });
                self.transmit(conn);
                self.publish(conn);
            }
            Summarised::Control(c) => self.control(c),
            Summarised::Skip => {}
        }
    }

    /// Host control and the control plane's requests (Fig. 4.4).
    fn control(&mut self, c: Control) {
        let (conn, removing) = (c.conn(), matches!(c, Control::Remove { .. }));
        match c {
            Control::Install { conn, state, epoch } => {
                self.proto.install(conn, *state);
                self.epochs.insert(conn, epoch);
                self.limits.remove(&conn);
                let pre = self.shared.pre.read().expect("pre table lock");
                if let Some(r) = pre.route(conn) {
                    self.routes.insert(conn, r);
                }
            }
            Control::Queued { conn, n } => {
                self.proto.queued(conn, n);
                self.transmit(conn);
            }
            Control::Consumed { conn, n } => {
                let before = self.proto.consumed(conn, n);
                self.window_update(conn, before);
            }
            Control::Limit {
                conn,
                cwnd,
                mss,
                paced,
                frame_overhead,
                ect,
            } => {
                let old = self.limits.get(&conn);
                let credit = paced.then(|| old.and_then(|l| l.credit).unwrap_or(0));
                let (cwr, high) = old.map_or((false, None), |l| (l.cwr, l.high));
                self.limits.insert(
                    conn,
                    Limits {
                        cwnd,
                        mss,
                        credit,
                        frame_overhead,
                        ect,
                        cwr,
                        high,
                    },
                );
                self.transmit(conn);
            }
            Control::Credit { conn, bytes, burst } => {
                if let Some(c) = self.limits.get_mut(&conn).and_then(|l| l.credit.as_mut()) {
                    *c = (*c + i64::from(bytes)).min(i64::from(burst));
                }
                self.transmit(conn);
            }
            Control::Cwr { conn } => {
                if let Some(l) = self.limits.get_mut(&conn) {
                    l.cwr = true;
                }
            }
            Control::Timeout { conn } => {
                self.proto.timeout(conn);
                self.transmit(conn);
            }
            Control::Probe { conn } => {
                self.proto.probe(conn);
                self.transmit(conn);
            }
            Control::Close { conn } => {
                self.proto.close(conn);
                self.transmit(conn);
            }
            Control::Remove { conn } => self.remove(conn),
        }
        if !removing {
            self.publish(conn);
        }
    }

    /// A window update when the application's read reopened the window
    /// from below one segment (not after the peer's FIN: it sends nothing
    /// more, and may have gone).
    fn window_update(&mut self, conn: ConnIdx, before: u32) {
        let snap = self.proto.snapshot(conn);
        let mss = self.limits.get(&conn).map_or(self.mss, |l| l.mss);
        let Some(&route) = self.routes.get(&conn) else {
            return;
        };
        if before >= mss || snap.fin_received {
            return;
        }
        let out = RxOutcome {
            send_ack: true,
            ..RxOutcome::default()
        };
        let inbound = Inbound {
            route,
            payload: Vec::new(),
            ce: false,
            ece: false,
        };
        self.emit(Work::Rx {
            conn,
            out,
            snap,
            inbound,
        });
    }

    /// Nothing more is sent for `conn`; its pre-processor entry goes
    /// unless the index already names a new connection (the control plane
    /// may reuse it before this request arrives).
    fn remove(&mut self, conn: ConnIdx) {
        let route = self.routes.remove(&conn);
        self.limits.remove(&conn);
        self.epochs.remove(&conn);
        self.published
            .lock()
            .expect("published state lock")
            .remove(&conn);
        let mut pre = self.shared.pre.write().expect("pre table lock");
        if route.is_some() && pre.route(conn) == route {
            pre.remove(conn);
        }
    }

    /// The connection's state for the control plane.
    fn publish(&self, conn: ConnIdx) {
        // Only an installed connection has state, and its epoch with it.
        let (true, Some(&epoch)) = (self.proto.contains(conn), self.epochs.get(&conn)) else {
            return;
        };
        let (_, snd_max) = self.proto.una_and_max(conn);
        let mss = self.limits.get(&conn).map_or(self.mss, |l| l.mss);
        let p = Published {
            snap: self.proto.snapshot(conn),
            snd_max,
            loss: self.proto.loss_info(conn, mss),
            epoch,
        };
        self.published
            .lock()
            .expect("published state lock")
            .insert(conn, p);
    }

    /// Whether the control plane's window has room for a segment, as the
    /// run-to-completion scheduler asks (RFC 6675's `pipe`, the tail loss
    /// probe, PRR during a fast recovery:
    /// [`crate::recovery::LossState::may_send`]), and a paced flow has
    /// credit left.
    fn window_open(&mut self, conn: ConnIdx) -> bool {
        let Some(l) = self.limits.get(&conn) else {
            return true;
        };
        self.proto.may_send(conn, l.cwnd, l.mss) && l.credit.is_none_or(|c| c > 0)
    }

    /// What a data segment carries for ECN (RFC 3168 sections 6.1.2 and
    /// 6.1.5), as the run-to-completion path marks it: ECT(0) on new data
    /// of a flow whose policy reacts to ECN-Echo (never a retransmission),
    /// and CWR once on the first data segment after the policy cut its
    /// window. `grant` was just taken, so new data reaches SND.MAX. Also
    /// whether the data was sent before.
    fn data_marks(&mut self, conn: ConnIdx, grant: &TxGrant) -> TxMarks {
        let (_, snd_max) = self.proto.una_and_max(conn);
        let Some(l) = self.limits.get_mut(&conn).filter(|_| grant.len > 0) else {
            return TxMarks::default();
        };
        let end = grant.seq.wrapping_add(grant.len);
        let new_data = end == snd_max && l.high.is_none_or(|h| distance(h, end) > 0);
        if new_data {
            l.high = Some(end);
        }
        TxMarks {
            ect: l.ect && new_data,
            cwr: std::mem::take(&mut l.cwr),
            again: !new_data,
        }
    }

    /// *Seq*: the segments the peer's window and the control plane's
    /// limits allow now.
    fn transmit(&mut self, conn: ConnIdx) {
        let Some(&route) = self.routes.get(&conn) else {
            return;
        };
        let mss = self.limits.get(&conn).map_or(self.mss, |l| l.mss);
        while self.window_open(conn) {
            let Some((grant, snap)) = self.proto.tx(conn, mss) else {
                break;
            };
            if let Some(l) = self.limits.get_mut(&conn) {
                if let Some(c) = l.credit.as_mut() {
                    *c -= i64::from(grant.len + l.frame_overhead);
                }
            }
            let marks = self.data_marks(conn, &grant);
            self.emit(Work::Tx {
                conn,
                grant,
                snap,
                route,
                marks,
            });
        }
    }
}

impl Stage for ProtocolStage {
    fn run(&mut self) -> usize {
        if !self.outs.iter_mut().all(Out::flush) {
            return 0;
        }
        let mut held = 0;
        for input in &mut self.inputs {
            while let Ok(t) = input.pop() {
                if !self.sequencing {
                    self.in_order.push_back(t);
                    continue;
                }
                let before = self.reorder.held();
                if self.reorder.push(t.ticket, t).is_err() {
                    unreachable!("a ticket arrived twice");
                }
                while let Some(t) = self.reorder.pop() {
                    self.in_order.push_back(t);
                }
                held += usize::from(self.reorder.held() > before);
            }
        }
        let mut n = 0;
        while let Some(t) = self.in_order.pop_front() {
            self.jitter.stall();
            self.process(t);
            n += 1;
        }
        CounterCells::add(&self.counters.protocol_held, held);
        CounterCells::add(&self.counters.protocol, n);
        n
    }
}

/// A post-processor: *Ack*, *Stamp*, the segment headers.
struct PostStage {
    input: Consumer<Ticketed<Work>>,
    outs: Vec<Out<Ticketed<Copy>>>,
    next: usize,
    /// The timestamp clock's origin.
    clock: Instant,
    shared: Shared,
    jitter: Jitter,
    counters: Arc<CounterCells>,
}

impl PostStage {
    fn prepare(shared: &Shared, clock: Instant, work: Work) -> Copy {
        let now = clock.elapsed().as_millis() as u32;
        // *Stats*: the counts the control plane's congestion control and
        // TCP_INFO read; they commute, so replicas may add them in any
        // order.
        match &work {
            Work::Rx {
                conn, out, inbound, ..
            } if out.acked > 0 || out.fast_retransmit => {
                let mut post = shared.post.write().expect("post table lock");
                post.account(*conn, out, inbound.ce, inbound.ece);
            }
            Work::Tx { conn, marks, .. } if marks.again => {
                let mut post = shared.post.write().expect("post table lock");
                post.retransmitted(*conn);
            }
            _ => {}
        }
        let post = shared.post.read().expect("post table lock");
        match work {
            Work::Rx {
                conn,
                out,
                snap,
                inbound: Inbound {
                    route, payload, ce, ..
                },
            } => {
                let mut notices = Vec::new();
                if out.readable > 0 {
                    notices.push(Notice::Readable {
                        conn,
                        n: out.readable,
                    });
                }
                if out.acked > 0 {
                    notices.push(Notice::Acked { conn, n: out.acked });
                }
                if out.fin {
                    notices.push(Notice::Fin { conn });
                }
                let frame = out.send_ack.then(|| {
                    let h = post.header_for(conn, snap.seq, 0, &snap, now, ce);
                    let mut f = Vec::with_capacity(66);
                    segment::build(&route, &h, &[], &mut f);
                    f
                });
                Copy {
                    conn,
                    place: out.place.map(|p| (p, payload)),
                    notices,
                    frame,
                    segment: None,
                }
            }
            Work::Tx {
                conn,
                grant,
                snap,
                route,
                marks,
            } => {
                let mut flags = Flags::PSH;
                if grant.fin {
                    flags |= Flags::FIN;
                }
                if marks.cwr {
                    flags |= Flags::CWR;
                }
                let h = post.header_for(conn, grant.seq, flags, &snap, now, false);
                Copy {
                    conn,
                    place: None,
                    notices: Vec::new(),
                    frame: None,
                    segment: Some((route, h, grant, marks.ect)),
                }
            }
        }
    }
}

impl Stage for PostStage {
    fn run(&mut self) -> usize {
        let (shared, clock, next) = (&self.shared, self.clock, &mut self.next);
        let k = self.outs.len();
        let n = parallel_turn(&mut self.input, &mut self.outs, &mut self.jitter, |t| {
            *next += 1;
            (
                (*next - 1) % k,
                t.map(|w| PostStage::prepare(shared, clock, w)),
            )
        });
        CounterCells::add(&self.counters.post, n);
        n
    }
}

/// A copy stage ("DMA"): payload into the receive buffer, then the
/// notifications and the ACK; or payload out of the transmit buffer into
/// the segment.
struct CopyStage {
    inputs: Vec<Consumer<Ticketed<Copy>>>,
    out: Out<Ticketed<Egress>>,
    shared: Shared,
    jitter: Jitter,
    counters: Arc<CounterCells>,
}

impl CopyStage {
    fn copy(&self, c: Copy) -> Egress {
        let notices = c.notices.clone();
        Egress {
            frame: self.move_payload(c),
            notices,
        }
    }

    fn move_payload(&self, c: Copy) -> Option<(ConnIdx, Vec<u8>)> {
        let bufs = self
            .shared
            .buffers
            .read()
            .expect("buffers lock")
            .get(&c.conn)
            .cloned();
        let bufs = bufs?;
        if let Some((p, payload)) = &c.place {
            let data = &payload[p.skip as usize..(p.skip + p.len) as usize];
            bufs.rx.lock().expect("rx buffer lock").write(p.pos, data);
        }
        if let Some((route, h, g, ect)) = c.segment {
            let mut payload = vec![0u8; g.len as usize];
            bufs.tx
                .lock()
                .expect("tx buffer lock")
                .read(g.pos, &mut payload);
            let mut f = Vec::with_capacity(66 + payload.len());
            segment::build(&route, &h, &payload, &mut f);
            if ect {
                order::wire::ecn::set_ecn(&mut f, order::wire::ecn::Ecn::Ect0);
            }
            return Some((c.conn, f));
        }
        c.frame.map(|f| (c.conn, f))
    }
}

impl Stage for CopyStage {
    fn run(&mut self) -> usize {
        if !self.out.flush() {
            return 0;
        }
        let mut n = 0;
        for i in 0..self.inputs.len() {
            while let Ok(t) = self.inputs[i].pop() {
                self.jitter.stall();
                let t = t.map(|c| self.copy(c));
                self.out.send(t);
                n += 1;
            }
        }
        CounterCells::add(&self.counters.copy, n);
        n
    }
}

/// The device's transmit side and the context queue, behind one reorder
/// buffer per group.
struct TxStage {
    inputs: Vec<Consumer<Ticketed<Egress>>>,
    reorder: Vec<Reorder<Egress>>,
    sequencing: bool,
    notices: Sender<Notice>,
    tx: DeviceTx,
    wake: Option<Box<dyn FnMut() + Send>>,
    shared: Shared,
    counters: Arc<CounterCells>,
}

impl Stage for TxStage {
    fn run(&mut self) -> usize {
        let (mut ready, mut held) = (Vec::new(), 0);
        for input in &mut self.inputs {
            while let Ok(t) = input.pop() {
                if !self.sequencing {
                    ready.push(t.item);
                    continue;
                }
                let r = &mut self.reorder[t.group];
                let before = r.held();
                if r.push(t.ticket, t.item).is_err() {
                    unreachable!("an output ticket arrived twice");
                }
                while let Some(item) = r.pop() {
                    ready.push(item);
                }
                held += usize::from(r.held() > before);
            }
        }
        CounterCells::add(&self.counters.tx_held, held);
        let released = !ready.is_empty();
        for e in &ready {
            CounterCells::add(&self.counters.notices, e.notices.len());
            for n in &e.notices {
                let _ = self.notices.send(*n);
            }
        }
        let frames: Vec<Vec<u8>> = ready
            .into_iter()
            .filter_map(|e| e.frame)
            .map(|(conn, f)| {
                if let Some(trace) = &self.shared.trace {
                    if let Ok(Frame::Tcp(s)) = segment::parse(&f) {
                        if !s.payload.is_empty() {
                            trace
                                .lock()
                                .expect("trace lock")
                                .tx_seq
                                .entry(conn)
                                .or_default()
                                .push(s.seq);
                        }
                    }
                }
                f
            })
            .collect();
        let n = frames.len();
        if n > 0 {
            (self.tx)(&frames);
        }
        CounterCells::add(&self.counters.tx_frames, n);
        if let Some(wake) = self.wake.as_mut().filter(|_| released) {
            wake();
        }
        n
    }
}

/// A running pipeline; stopped when dropped.
pub struct Pipeline {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    naps: Arc<Naps>,
    control: Sender<Control>,
    pub notices: Receiver<Notice>,
    pub shared: Shared,
    counters: Arc<CounterCells>,
    published: Arc<Mutex<HashMap<ConnIdx, Published>>>,
}

/// Hands each ready frame to its callback; returns how many.
pub type DeviceRx = Box<dyn FnMut(&mut dyn FnMut(&[u8])) -> usize + Send>;
/// Sends a batch of frames; returns how many went.
pub type DeviceTx = Box<dyn FnMut(&[Vec<u8>]) -> usize + Send>;

/// Where frames come from and go.
pub struct Device {
    pub rx: DeviceRx,
    pub tx: DeviceTx,
    /// Called after the transmit stage released frames or notices (an
    /// endpoint's poll loop waits on it).
    pub wake: Option<Box<dyn FnMut() + Send>>,
}

impl Pipeline {
    /// Builds the stage instances and starts the workers.
    pub fn start(cfg: PipelineConfig, device: Device, shared: Shared) -> Pipeline {
        let (groups, pres) = (cfg.groups.max(1), cfg.pre.max(1));
        let (posts, copies) = (cfg.post.max(1), cfg.copy.max(1));
        let (control_tx, control_rx) = std::sync::mpsc::channel();
        let (notice_tx, notice_rx) = std::sync::mpsc::channel();
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        let salt = |k: u64| k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let counters = Arc::new(CounterCells::default());
        let published = Arc::new(Mutex::new(HashMap::new()));
        let clock = cfg.clock.unwrap_or_else(Instant::now);

        // front -> pre
        let (front_outs, pre_ins): (Vec<_>, Vec<_>) = (0..pres).map(|_| ring(cfg.ring)).unzip();
        // pre -> protocol: one ring per (pre, group)
        let mut proto_ins: Vec<Vec<Consumer<_>>> = (0..groups).map(|_| Vec::new()).collect();
        let mut pre_stages = Vec::new();
        for (p, input) in pre_ins.into_iter().enumerate() {
            let mut outs = Vec::new();
            for ins in proto_ins.iter_mut() {
                let (o, c) = ring(cfg.ring);
                outs.push(o);
                ins.push(c);
            }
            pre_stages.push(PreStage {
                input,
                outs,
                shared: shared.clone(),
                jitter: Jitter::new(&cfg, salt(1 + p as u64)),
                counters: counters.clone(),
            });
        }
        let mut tx_ins = Vec::new();
        let mut group_stages: Vec<Box<dyn Stage>> = Vec::new();
        for (g, inputs) in proto_ins.into_iter().enumerate() {
            let (post_outs, post_ins): (Vec<_>, Vec<_>) =
                (0..posts).map(|_| ring(cfg.ring)).unzip();
            group_stages.push(Box::new(ProtocolStage {
                inputs,
                reorder: Reorder::default(),
                sequencing: cfg.sequencing,
                in_order: VecDeque::new(),
                proto: Protocol::default(),
                routes: HashMap::new(),
                limits: HashMap::new(),
                epochs: HashMap::new(),
                outs: post_outs,
                out_seq: 0,
                next: 0,
                group: g,
                mss: cfg.mss,
                shared: shared.clone(),
                jitter: Jitter::new(&cfg, salt(100 + g as u64)),
                counters: counters.clone(),
                published: published.clone(),
            }));
            let mut copy_ins: Vec<Vec<Consumer<_>>> = (0..copies).map(|_| Vec::new()).collect();
            for (q, input) in post_ins.into_iter().enumerate() {
                let mut outs = Vec::new();
                for ins in copy_ins.iter_mut() {
                    let (o, c) = ring(cfg.ring);
                    outs.push(o);
                    ins.push(c);
                }
                group_stages.push(Box::new(PostStage {
                    input,
                    outs,
                    next: q,
                    clock,
                    shared: shared.clone(),
                    jitter: Jitter::new(&cfg, salt(200 + (g * posts + q) as u64)),
                    counters: counters.clone(),
                }));
            }
            for (c, inputs) in copy_ins.into_iter().enumerate() {
                let (out, tx_in) = ring(cfg.ring);
                tx_ins.push(tx_in);
                group_stages.push(Box::new(CopyStage {
                    inputs,
                    out,
                    shared: shared.clone(),
                    jitter: Jitter::new(&cfg, salt(300 + (g * copies + c) as u64)),
                    counters: counters.clone(),
                }));
            }
        }
        stages.push(Box::new(Front {
            rx: device.rx,
            control: control_rx,
            seq: Sequencer::new(groups),
            groups,
            outs: front_outs,
            next: 0,
            arrival: 0,
            shared: shared.clone(),
            counters: counters.clone(),
        }));
        stages.extend(
            pre_stages
                .into_iter()
                .map(|s| Box::new(s) as Box<dyn Stage>),
        );
        stages.extend(group_stages);
        stages.push(Box::new(TxStage {
            inputs: tx_ins,
            reorder: (0..groups).map(|_| Reorder::default()).collect(),
            sequencing: cfg.sequencing,
            notices: notice_tx,
            tx: device.tx,
            wake: device.wake,
            shared: shared.clone(),
            counters: counters.clone(),
        }));

        let stop = Arc::new(AtomicBool::new(false));
        let threads = cfg.threads.max(1);
        let naps = Naps::new(threads, LONGEST_NAP);
        let mut per_thread: Vec<Vec<Box<dyn Stage>>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, s) in stages.into_iter().enumerate() {
            per_thread[i % threads].push(s);
        }
        let workers = per_thread
            .into_iter()
            .enumerate()
            .map(|(i, mut mine)| {
                let (stop, naps) = (stop.clone(), naps.clone());
                std::thread::Builder::new()
                    .name(format!("toe-worker-{i}"))
                    .spawn(move || {
                        naps.register(i);
                        let mut round = || mine.iter_mut().map(|s| s.run()).sum::<usize>();
                        let mut idle = 0u32;
                        while !stop.load(Ordering::Relaxed) {
                            let mut work = round();
                            idle = if work == 0 { idle + 1 } else { 0 };
                            if idle > IDLE_ROUNDS {
                                work = naps.nap(i, &mut round);
                            } else if work == 0 {
                                std::thread::yield_now();
                            }
                            if work > 0 {
                                // Its output may be another worker's input.
                                naps.wake(Some(i));
                                idle = 0;
                            }
                        }
                    })
                    .expect("spawning a pipeline worker")
            })
            .collect();
        Pipeline {
            stop,
            workers,
            naps,
            control: control_tx,
            notices: notice_rx,
            shared,
            counters,
            published,
        }
    }

    /// What the stages did so far.
    pub fn counters(&self) -> PipelineCounters {
        self.counters.read()
    }

    /// The state the protocol stages last published of `conn`.
    pub fn published(&self, conn: ConnIdx) -> Option<Published> {
        self.published
            .lock()
            .expect("published state lock")
            .get(&conn)
            .copied()
    }

    /// Host control: a request into the pipeline, in order with frames.
    pub fn control(&self, c: Control) {
        let _ = self.control.send(c);
        self.naps.wake(None);
    }

    /// Frames were handed to the device's receive side: napping workers
    /// look for them.
    pub fn wake(&self) {
        self.naps.wake(None);
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.naps.wake_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::DUP_THRESH;
    use crate::sack::SackBlocks;
    use crate::segment::TcpOptions;
    use crate::state::{ConnId, PostState};

    const MSS: u32 = 1000;
    const ISS: u32 = 5000;
    const IRS: u32 = 7000;

    /// Polls the published state of connection 0 until `done` says so.
    fn wait_for(p: &Pipeline, what: &str, done: impl Fn(&Published) -> bool) -> Published {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = p.published(0).filter(|s| done(s)) {
                return s;
            }
            assert!(Instant::now() < deadline, "{what}: {:?}", p.published(0));
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The pipelined engine's TCP_INFO counts are what its protocol stage
    /// publishes with the sequence state (the control plane takes no other
    /// lock for them): ten segments out, the peer SACKs the fourth to
    /// sixth, the hole below goes again.
    #[test]
    fn the_protocol_stage_publishes_its_loss_state() {
        let id = ConnId {
            peer_mac: [2, 0, 0, 0, 0, 1],
            local_mac: [2, 0, 0, 0, 0, 2],
            peer_ip: "10.0.0.1".parse().unwrap(),
            local_ip: "10.0.0.2".parse().unwrap(),
            local_port: 80,
            remote_port: 40000,
            flow_group: 0,
        };
        let mut pre = Pre::default();
        pre.install(0, id, 0);
        let mut post = Post::default();
        post.install(
            0,
            PostState {
                sack: true,
                ..PostState::default()
            },
        );
        let buffers = Arc::new(Buffers {
            rx: Mutex::new(PayloadBuf::new(1 << 16)),
            tx: Mutex::new(PayloadBuf::new(1 << 16)),
        });
        let shared = Shared {
            pre: Arc::new(RwLock::new(pre)),
            post: Arc::new(RwLock::new(post)),
            buffers: Arc::new(RwLock::new(HashMap::from([(0, buffers)]))),
            trace: None,
        };
        let inbox: Arc<Mutex<VecDeque<Vec<u8>>>> = Arc::default();
        let rx = inbox.clone();
        let device = Device {
            rx: Box::new(move |f: &mut dyn FnMut(&[u8])| {
                let frames: Vec<_> = rx.lock().unwrap().drain(..).collect();
                frames.iter().for_each(|fr| f(fr));
                frames.len()
            }),
            tx: Box::new(|frames: &[Vec<u8>]| frames.len()),
            wake: None,
        };
        let p = Pipeline::start(PipelineConfig::default(), device, shared);
        p.control(Control::Install {
            conn: 0,
            state: Box::new(ProtoState {
                seq: ISS,
                tx_high: ISS,
                ack: IRS,
                rx_avail: 1 << 16,
                remote_win: 65535,
                ..ProtoState::default()
            }),
            epoch: 0,
        });
        p.control(Control::Limit {
            conn: 0,
            cwnd: 1 << 20,
            mss: MSS,
            paced: false,
            frame_overhead: 66,
            ect: false,
        });
        p.control(Control::Queued {
            conn: 0,
            n: 10 * MSS,
        });
        let s = wait_for(&p, "ten segments sent", |s| s.snd_max == ISS + 10 * MSS);
        let none = LossInfo {
            reordering: DUP_THRESH,
            ..LossInfo::default()
        };
        assert_eq!(s.loss, none);
        // The peer's ACK: nothing new acknowledged, 3000 bytes SACKed
        // above SND.UNA, so SND.UNA is lost (RFC 6675 IsLost).
        let h = Header {
            seq: IRS,
            ack: ISS,
            flags: Flags(Flags::ACK),
            window: 65535,
            options: TcpOptions {
                sack: SackBlocks::one((ISS + 3 * MSS, ISS + 6 * MSS)),
                ..TcpOptions::default()
            },
        };
        let mut f = Vec::new();
        segment::build(&id.route().reversed(), &h, &[], &mut f);
        inbox.lock().unwrap().push_back(f);
        // The hole's three segments are lost; the first goes again at
        // once (RFC 6675 section 5 step 4), the rest as the window allows.
        let s = wait_for(&p, "recovery", |s| s.loss.retrans > 0);
        let LossInfo {
            retrans,
            lost,
            sacked,
            reordering,
        } = s.loss;
        assert_eq!((sacked, lost, reordering), (3, 3, DUP_THRESH), "{s:?}");
        assert!(retrans <= lost, "{s:?}");
    }
}
