//! The endpoint with the pipelined engine ([`crate::pipeline`], thesis
//! section 4.3): established connections receive and transmit through the
//! fine-grained pipeline (front end, pre-processors, one protocol stage per
//! flow group behind its reorder buffer, post-processors, copy stages, the
//! ordered transmit stage), on its own worker threads. The endpoint's
//! control plane keeps what section 4.1 leaves to it: the handshake, RST
//! validation, ARP and neighbour discovery, TIME_WAIT, the retransmission
//! timeout and congestion control.
//!
//! - In: a data-path segment of a connection the pipeline serves goes to
//!   the front end as the frame it arrived in.
//! - Out: the transmit stage's frames go out through the endpoint's port;
//!   its notices (readable, acknowledged, FIN) become the application's
//!   readiness, as the run-to-completion path's context queue does.
//! - The connection's payload buffers move into the pipeline's shared
//!   table: the copy stages write and read them, the application reads and
//!   writes them through [`Endpoint::recv`] and [`Endpoint::send`].
//! - Congestion control runs in the control plane as for the other
//!   engines, over the post-processors' counters; the window it sets is
//!   written to the protocol stage ([`Control::Limit`], section 4.2: the
//!   control plane writes per-flow state), whose transmit grants respect
//!   it. The retransmission timer is the control plane's: it tells the
//!   protocol stage of a timeout ([`Control::Timeout`]: everything
//!   unacknowledged is lost, [`crate::recovery`]) or a probe.
//! - The control plane reads each connection's sequence state from what
//!   the protocol stage published ([`crate::pipeline::Published`]) to
//!   validate a RST, answer a SYN in TIME_WAIT and free a finished
//!   connection.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use order::seq::distance;

use super::timer::Expiry;
use super::{Endpoint, ToeError};
use crate::app::ctl;
use crate::buffer::PayloadBuf;
use crate::pipeline::{
    Buffers, Control, Device, Notice, Pipeline, PipelineConfig, PipelineCounters, Published, Shared,
};
use crate::protocol::RxOutcome;
use crate::recovery::LossInfo;
use crate::segment::{self, Header, Route, Segment};
use crate::stages::{ConnIdx, Post, Pre, Snapshot};
use crate::state::{ConnId, PostState, ProtoState};

/// How the pipelined engine is laid out (thesis Fig. 4.8): flow groups,
/// replicas of the parallel stages, and the worker threads they share.
/// On the command line, the `--pipeline-*` options (only with `--engine
/// pipeline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PipelineLayout {
    /// Flow groups: protocol stages, each with its own post-processors and
    /// copy stages (a connection's group is a hash of its 4-tuple).
    #[cfg_attr(feature = "clap", arg(long = "pipeline-groups", value_name = "N", default_value_t = 1,
        value_parser = counts(255)))]
    pub groups: usize,
    /// Pre-processors, shared by all flow groups.
    #[cfg_attr(feature = "clap", arg(long = "pipeline-pre", value_name = "N", default_value_t = 1,
        value_parser = counts(u16::MAX.into())))]
    pub pre: usize,
    /// Post-processors per flow group.
    #[cfg_attr(feature = "clap", arg(long = "pipeline-post", value_name = "N", default_value_t = 1,
        value_parser = counts(u16::MAX.into())))]
    pub post: usize,
    /// Copy stages per flow group.
    #[cfg_attr(feature = "clap", arg(long = "pipeline-copy", value_name = "N", default_value_t = 1,
        value_parser = counts(u16::MAX.into())))]
    pub copy: usize,
    /// Worker threads the stages are spread over: 1 runs them all in turn
    /// on one core (run to completion of the same pipeline); a machine with
    /// cores to spare gives more.
    #[cfg_attr(feature = "clap", arg(long = "pipeline-threads", value_name = "N", default_value_t = 1,
        value_parser = counts(u16::MAX.into())))]
    pub threads: usize,
}

/// A count of 1 to `most` on the command line.
#[cfg(feature = "clap")]
fn counts(most: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=most)
}

impl Default for PipelineLayout {
    fn default() -> Self {
        PipelineLayout {
            groups: 1,
            pre: 1,
            post: 1,
            copy: 1,
            threads: 1,
        }
    }
}

impl PipelineLayout {
    /// Every count at least 1 and at most what a flow group's index holds.
    pub fn check(&self) -> Result<(), ToeError> {
        let counts = [self.groups, self.pre, self.post, self.copy, self.threads];
        if counts.contains(&0) || self.groups > 255 {
            return Err(ToeError::Config(format!(
                "{self:?}: every count of a pipeline layout is at least 1, and at most 255 flow groups (a group is named in 8 bits)"
            )));
        }
        Ok(())
    }
}

/// The pipeline and what the endpoint keeps per connection for it.
pub(super) struct PipelinePath {
    pipeline: Pipeline,
    /// Frames for the front end.
    inbox: Sender<Vec<u8>>,
    /// Frames the transmit stage released.
    outbox: Receiver<Vec<u8>>,
    /// Readable when the transmit stage released something.
    wake: Arc<OwnedFd>,
    conns: Vec<Option<PipelinedConn>>,
    /// The pipeline's counters the endpoint's already include.
    counted: PipelineCounters,
    /// Connections installed so far: the next one's epoch.
    installs: u64,
}

/// One connection the pipeline serves, as the control plane sees it.
struct PipelinedConn {
    buffers: Arc<Buffers>,
    /// Its [`Control::Install`]'s epoch: what the protocol stage publishes
    /// under another is an earlier connection's with the same index.
    epoch: u64,
    /// The window, pacing and ECN capability last written to the
    /// protocol stage.
    written: Option<(u32, bool, bool)>,
    /// A paced flow's credit is granted up to here.
    granted_to: Instant,
    /// Header bytes of each frame (Ethernet, IP, TCP with options): the
    /// rate counts whole frames, as the time wheel does.
    frame_overhead: u32,
    /// The RTT probe: SND.MAX as published when it was taken, when, and
    /// the fast retransmits counted then (one probe at a time, none
    /// across a retransmission: Karn).
    probe: Option<(u32, Instant, u32)>,
}

/// Least credit a grant carries (fewer, larger grants keep the control
/// queue short), and how long a grant may wait to reach it.
const MIN_GRANT: u64 = 1514;
const MAX_GRANT_WAIT: Duration = Duration::from_micros(500);
/// How much credit a paced flow may hold: as the time wheel lets a late
/// flow make up 1 ms, at least 16 full frames.
const CATCH_UP: Duration = Duration::from_millis(1);

impl PipelinePath {
    pub(super) fn new(layout: PipelineLayout, clock: Instant) -> Result<Self, ToeError> {
        layout.check()?;
        let wake = Arc::new(ctl::eventfd().map_err(|e| ToeError::Config(format!("eventfd: {e}")))?);
        let (inbox, front_rx) = mpsc::channel::<Vec<u8>>();
        let (tx_out, outbox) = mpsc::channel::<Vec<u8>>();
        let waker = wake.clone();
        let device = Device {
            rx: Box::new(move |f: &mut dyn FnMut(&[u8])| {
                let mut n = 0;
                while let Ok(frame) = front_rx.try_recv() {
                    f(&frame);
                    n += 1;
                    if n == 64 {
                        break;
                    }
                }
                n
            }),
            tx: Box::new(move |frames: &[Vec<u8>]| {
                for f in frames {
                    let _ = tx_out.send(f.clone());
                }
                frames.len()
            }),
            wake: Some(Box::new(move || ctl::signal(&waker))),
        };
        let cfg = PipelineConfig {
            groups: layout.groups,
            pre: layout.pre,
            post: layout.post,
            copy: layout.copy,
            threads: layout.threads,
            clock: Some(clock),
            ..PipelineConfig::default()
        };
        let shared = Shared {
            pre: Arc::new(RwLock::new(Pre::default())),
            post: Arc::new(RwLock::new(Post::default())),
            buffers: Arc::new(RwLock::new(HashMap::new())),
            trace: None,
        };
        Ok(PipelinePath {
            pipeline: Pipeline::start(cfg, device, shared),
            inbox,
            outbox,
            wake,
            conns: Vec::new(),
            counted: PipelineCounters::default(),
            installs: 0,
        })
    }

    fn conn(&self, conn: ConnIdx) -> Option<&PipelinedConn> {
        self.conns.get(conn as usize)?.as_ref()
    }

    /// What the protocol stage last published of `conn`, if it has
    /// published since installing it.
    fn published(&self, conn: ConnIdx) -> Option<Published> {
        let epoch = self.conn(conn)?.epoch;
        self.pipeline.published(conn).filter(|p| p.epoch == epoch)
    }
}

/// The state a connection is installed with, in each stage's partition.
pub(super) struct Installed {
    pub id: ConnId,
    pub peer_wscale: u8,
    pub proto: ProtoState,
    pub post: PostState,
}

impl Endpoint {
    /// What the pipelined engine counted (None with another engine).
    pub fn pipeline_counters(&self) -> Option<PipelineCounters> {
        self.engine.pipeline().map(|p| p.pipeline.counters())
    }

    /// The descriptor a poll loop waits on besides the port: readable when
    /// the pipeline released frames or notifications (None with another
    /// engine).
    pub fn wake_fd(&self) -> Option<RawFd> {
        self.engine.pipeline().map(|p| p.wake.as_raw_fd())
    }

    fn pipelined(&self, conn: ConnIdx) -> Option<&PipelinedConn> {
        self.engine.pipeline()?.conn(conn)
    }

    /// After the handshake: the connection goes into the pipeline's
    /// tables with the state the control plane set up, its payload buffers
    /// into the shared table, and the control plane's first limits.
    pub(super) fn install_pipelined(&mut self, conn: ConnIdx, s: Installed) {
        let Some(path) = self.engine.pipeline_mut() else {
            return;
        };
        let Some(app) = self.app.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        let buffers = Arc::new(Buffers {
            rx: Mutex::new(std::mem::replace(&mut app.rx, PayloadBuf::new(1))),
            tx: Mutex::new(std::mem::replace(&mut app.tx, PayloadBuf::new(1))),
        });
        let shared = &path.pipeline.shared;
        shared
            .buffers
            .write()
            .expect("buffers lock")
            .insert(conn, buffers.clone());
        shared
            .pre
            .write()
            .expect("pre table lock")
            .install(conn, s.id, s.peer_wscale);
        shared
            .post
            .write()
            .expect("post table lock")
            .install(conn, s.post);
        path.installs += 1;
        let epoch = path.installs;
        path.pipeline.control(Control::Install {
            conn,
            state: Box::new(s.proto),
            epoch,
        });
        let i = conn as usize;
        if path.conns.len() <= i {
            path.conns.resize_with(i + 1, || None);
        }
        let ip = if s.id.local_ip.is_ipv4() { 20 } else { 40 };
        path.conns[i] = Some(PipelinedConn {
            buffers,
            epoch,
            written: None,
            granted_to: self.now,
            frame_overhead: 14 + ip + 20 + if s.post.timestamps { 12 } else { 0 },
            probe: None,
        });
        self.pipeline_limits(conn);
    }

    /// The connection is gone: the pipeline stops serving it. After a
    /// reset the application may still read what arrived before it (as
    /// from a kernel socket), so the payload buffers come back to the
    /// control plane's table as they stand.
    pub(super) fn release_pipelined(&mut self, conn: ConnIdx) {
        let Some(path) = self.engine.pipeline_mut() else {
            return;
        };
        let Some(c) = path.conns.get_mut(conn as usize).and_then(Option::take) else {
            return;
        };
        path.pipeline.control(Control::Remove { conn });
        if let Some(app) = self.app.get_mut(conn as usize).and_then(Option::as_mut) {
            // A copy stage may still hold the buffers until it sees the
            // removal: copy them rather than take them.
            app.rx = c.buffers.rx.lock().expect("rx buffer lock").clone();
            app.tx = c.buffers.tx.lock().expect("tx buffer lock").clone();
        }
    }

    /// A data-path segment of `conn` as it arrived: to the front end if
    /// the pipeline serves `conn`. Returns whether it took it. A FIN in
    /// TIME_WAIT (the peer sent it again) restarts the wait; the protocol
    /// stage acknowledges it again as a duplicate.
    pub(super) fn pipelined_input(&mut self, conn: ConnIdx, frame: &[u8], fin: bool) -> bool {
        if self.pipelined(conn).is_none() {
            return false;
        }
        if fin && self.flow_info(conn).is_some_and(|f| f.time_wait) {
            let snap = self.conn_snapshot(conn);
            self.flow_feedback(conn, &RxOutcome::default(), &snap, true);
        }
        if let Some(p) = self.engine.pipeline() {
            let _ = p.inbox.send(frame.to_vec());
            p.pipeline.wake();
        }
        true
    }

    /// A segment that completed the handshake and carries data or a FIN:
    /// built again into a frame for the front end (the control plane has
    /// only the parsed segment there).
    pub(super) fn pipelined_segment(&mut self, conn: ConnIdx, seg: &Segment<'_>) -> bool {
        if self.pipelined(conn).is_none() {
            return false;
        }
        let route = Route {
            dst_mac: self.mac,
            ..seg.route
        };
        let h = Header {
            seq: seg.seq,
            ack: seg.ack,
            flags: seg.flags,
            window: seg.window,
            options: seg.options,
        };
        let mut f = Vec::with_capacity(66 + seg.payload.len());
        segment::build(&route, &h, seg.payload, &mut f);
        self.pipelined_input(conn, &f, seg.flags.has(crate::segment::Flags::FIN))
    }

    /// The connection's sequence state: what the pipeline's protocol stage
    /// published for the connections it serves, the control plane's own
    /// protocol table for the others.
    pub(super) fn conn_snapshot(&self, conn: ConnIdx) -> Snapshot {
        self.pipelined(conn)
            .and(self.engine.pipeline())
            .and_then(|p| p.published(conn))
            .map_or_else(|| self.proto.snapshot(conn), |p| p.snap)
    }

    /// TCP_INFO's loss counts of a connection the pipeline serves, as
    /// its protocol stage last published them (None for the others).
    pub(super) fn pipelined_loss(&self, conn: ConnIdx) -> Option<LossInfo> {
        self.pipelined(conn)
            .and(self.engine.pipeline())
            .and_then(|p| p.published(conn))
            .map(|p| p.loss)
    }

    /// The post-processor's partition of `conn` (its congestion counters
    /// are the pipeline's for the connections it serves).
    pub(super) fn post_state(&self, conn: ConnIdx) -> PostState {
        match self.pipelined(conn).and(self.engine.pipeline()) {
            Some(p) => *p
                .pipeline
                .shared
                .post
                .read()
                .expect("post table lock")
                .state(conn),
            None => *self.post.state(conn),
        }
    }

    /// Copies `out.len()` received bytes from position `pos`.
    pub(super) fn read_rx(&self, conn: ConnIdx, pos: u32, out: &mut [u8]) {
        if let Some(c) = self.pipelined(conn) {
            c.buffers.rx.lock().expect("rx buffer lock").read(pos, out);
        } else if let Some(app) = self.app.get(conn as usize).and_then(Option::as_ref) {
            app.rx.read(pos, out);
        }
    }

    /// Writes bytes to send at position `pos`.
    pub(super) fn write_tx(&mut self, conn: ConnIdx, pos: u32, data: &[u8]) {
        if let Some(c) = self.pipelined(conn) {
            c.buffers
                .tx
                .lock()
                .expect("tx buffer lock")
                .write(pos, data);
        } else if let Some(app) = self.app.get_mut(conn as usize).and_then(Option::as_mut) {
            app.tx.write(pos, data);
        }
    }

    /// The application read `n` bytes of a connection the pipeline
    /// serves (*Win*). Returns whether it serves `conn`.
    pub(super) fn pipelined_consumed(&mut self, conn: ConnIdx, n: u32) -> bool {
        self.pipelined_control(conn, Control::Consumed { conn, n })
    }

    /// The application queued `n` bytes. Returns whether the pipeline
    /// serves `conn`.
    pub(super) fn pipelined_queued(&mut self, conn: ConnIdx, n: u32) -> bool {
        self.start_rto_clock(conn);
        self.pipelined_control(conn, Control::Queued { conn, n })
    }

    /// The application closed: the FIN follows the queued bytes. Returns
    /// whether the pipeline serves `conn`.
    pub(super) fn pipelined_close(&mut self, conn: ConnIdx) -> bool {
        if self.pipelined(conn).is_none() {
            return false;
        }
        self.closing(conn);
        self.start_rto_clock(conn);
        self.pipelined_control(conn, Control::Close { conn })
    }

    fn pipelined_control(&mut self, conn: ConnIdx, c: Control) -> bool {
        match self.engine.pipeline().filter(|p| p.conn(conn).is_some()) {
            Some(p) => {
                p.pipeline.control(c);
                true
            }
            None => false,
        }
    }

    /// Nothing was in flight: the retransmission timer starts now, not at
    /// the last acknowledgement.
    fn start_rto_clock(&mut self, conn: ConnIdx) {
        let now = self.now;
        if self.conn_snapshot(conn).tx_sent == 0 {
            if let Some(c) = self.control.get_mut(conn as usize).and_then(Option::as_mut) {
                c.timer.last_progress = now;
            }
        }
    }

    /// Once per poll: the pipeline's notices to the applications, its
    /// frames to the port, the control plane's limits and timeouts to the
    /// pipeline, and the connections that finished freed.
    pub(super) fn pipeline_run(&mut self) -> Result<(), ToeError> {
        self.pipeline_verdicts();
        let Some(path) = self.engine.pipeline() else {
            return Ok(());
        };
        ctl::drain(&path.wake);
        let notices: Vec<Notice> = path.pipeline.notices.try_iter().collect();
        let frames: Vec<Vec<u8>> = path.outbox.try_iter().collect();
        self.out.extend(frames);
        for n in notices {
            self.pipeline_notice(n);
        }
        let conns: Vec<ConnIdx> = match self.engine.pipeline() {
            Some(p) => (0..p.conns.len() as ConnIdx)
                .filter(|&c| p.conns[c as usize].is_some())
                .collect(),
            None => return Ok(()),
        };
        for conn in conns {
            self.pipeline_rtt(conn);
            self.pipeline_limits(conn);
            self.pipeline_timeout(conn);
            let eof = self
                .app
                .get(conn as usize)
                .and_then(Option::as_ref)
                .is_some_and(|a| a.eof);
            if eof {
                let snap = self.conn_snapshot(conn);
                self.maybe_release(conn, &snap);
            }
        }
        Ok(())
    }

    /// The protocol stages' verdicts join the endpoint's counters, as the
    /// run-to-completion path counts them.
    fn pipeline_verdicts(&mut self) {
        let Some(path) = self.engine.pipeline_mut() else {
            return;
        };
        let now = path.pipeline.counters();
        let was = std::mem::replace(&mut path.counted, now);
        let c = &mut self.counters;
        c.fast_retransmits += now.fast_retransmits - was.fast_retransmits;
        c.refused_duplicate += now.refused_duplicate - was.refused_duplicate;
        c.refused_beyond_window += now.refused_beyond_window - was.refused_beyond_window;
        c.refused_outside_interval += now.refused_outside_interval - was.refused_outside_interval;
        c.refused_ack_of_unsent += now.refused_ack_of_unsent - was.refused_ack_of_unsent;
        c.dsacks_received += now.dsacks_received - was.dsacks_received;
        c.lost_retransmits += now.lost_retransmits - was.lost_retransmits;
        c.sack_blocks_ignored += now.sack_blocks_ignored - was.sack_blocks_ignored;
        c.sack_blocks_dropped += now.sack_blocks_dropped - was.sack_blocks_dropped;
    }

    /// The context queue: released after the copy it tells of.
    fn pipeline_notice(&mut self, n: Notice) {
        let now = self.now;
        let conn = match n {
            Notice::Readable { conn, .. } | Notice::Acked { conn, .. } | Notice::Fin { conn } => {
                conn
            }
        };
        if self.pipelined(conn).is_none() {
            return;
        }
        let Some(app) = self.app.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        match n {
            Notice::Readable { n, .. } => app.rx_ready += n,
            Notice::Acked { n, .. } => {
                app.tx_free += n;
                if let Some(c) = self.control.get_mut(conn as usize).and_then(Option::as_mut) {
                    c.timer.progress(now);
                }
                self.flow_progress(conn);
            }
            Notice::Fin { .. } => app.eof = true,
        }
    }

    /// Writes the congestion window, and whether the flow is paced, to
    /// the protocol stage when they changed; grants a paced flow the
    /// credit its rate earned since the last grant (the flow scheduler's
    /// part, section 4.3.4: the control plane sets the rate, the data
    /// path's grants respect it).
    fn pipeline_limits(&mut self, conn: ConnIdx) {
        let now = self.now;
        let burst_frames = self.cfg.burst.max(16);
        let Some(info) = self.flow_info(conn) else {
            return;
        };
        // RFC 3168: new data is ECN-capable only under a policy that
        // reacts to ECN-Echo, as for the run-to-completion path.
        let ect = info.ecn && self.cfg.congestion.ecn();
        let cwr = self.take_cwr(conn);
        let Some(mss) = self
            .control
            .get(conn as usize)
            .and_then(|c| c.as_ref().map(|c| c.mss))
        else {
            return;
        };
        let Some(path) = self.engine.pipeline_mut() else {
            return;
        };
        let Some(c) = path.conns.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        let paced = info.rate.is_some();
        if c.written != Some((info.cwnd, paced, ect)) {
            if paced && c.written.is_none_or(|(_, was, _)| !was) {
                c.granted_to = now;
            }
            c.written = Some((info.cwnd, paced, ect));
            path.pipeline.control(Control::Limit {
                conn,
                cwnd: info.cwnd,
                mss,
                paced,
                frame_overhead: c.frame_overhead,
                ect,
            });
        }
        if cwr {
            path.pipeline.control(Control::Cwr { conn });
        }
        let Some(rate) = info.rate else {
            return;
        };
        let waited = now.saturating_duration_since(c.granted_to);
        let bytes = (waited.as_nanos() * u128::from(rate) / 1_000_000_000) as u64;
        if bytes < MIN_GRANT && waited < MAX_GRANT_WAIT {
            return;
        }
        c.granted_to = now;
        let frame = u64::from(mss + c.frame_overhead);
        let burst = (rate * CATCH_UP.as_nanos() as u64 / 1_000_000_000)
            .max(frame * u64::from(burst_frames));
        path.pipeline.control(Control::Credit {
            conn,
            bytes: bytes.min(u64::from(u32::MAX)) as u32,
            burst: burst.min(u64::from(u32::MAX)) as u32,
        });
    }

    /// An RTT sample for the policies, timed by the control plane as for
    /// the run-to-completion path: a probe starts when the published
    /// SND.MAX moves past what is acknowledged and ends when SND.UNA
    /// reaches it; a retransmission in between voids it (Karn).
    fn pipeline_rtt(&mut self, conn: ConnIdx) {
        let now = self.now;
        let Some(path) = self.engine.pipeline_mut() else {
            return;
        };
        let Some(p) = path.published(conn) else {
            return;
        };
        let fretx = path
            .pipeline
            .shared
            .post
            .read()
            .expect("post table lock")
            .state(conn)
            .cnt_fretx;
        let Some(c) = path.conns.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        let una = p.snap.seq.wrapping_sub(p.snap.tx_sent);
        match c.probe {
            Some((_, _, seen)) if seen != fretx => c.probe = None,
            Some((end, at, _)) if distance(end, una) >= 0 => {
                c.probe = None;
                let us = (now - at).as_micros().clamp(1, u128::from(u32::MAX)) as u32;
                let mut post = path.pipeline.shared.post.write().expect("post table lock");
                post.rtt_sample(conn, us);
            }
            Some(_) => {}
            None if distance(una, p.snd_max) > 0 => c.probe = Some((p.snd_max, now, fretx)),
            None => {}
        }
    }

    /// The control plane's timers ([`super::timer`], the same as the
    /// run-to-completion engine's): a tail loss probe or a retransmission
    /// timeout, asked of the protocol stage (thesis section 4.1 leaves
    /// timeouts to the control plane).
    fn pipeline_timeout(&mut self, conn: ConnIdx) {
        let now = self.now;
        if self.control.get(conn as usize).is_none_or(Option::is_none) {
            return;
        }
        let in_flight = self.conn_snapshot(conn).tx_sent;
        let srtt = Some(self.post_state(conn).rtt_est).filter(|&us| us > 0);
        let Some(c) = self.control.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        match c.timer.expired(now, in_flight, c.mss, srtt) {
            Some(Expiry::Timeout) => {}
            Some(Expiry::Probe) => {
                self.counters.tail_loss_probes += 1;
                self.pipelined_control(conn, Control::Probe { conn });
                return;
            }
            None => return,
        }
        self.counters.timeouts += 1;
        self.flow_timeout(conn);
        if let Some(p) = self
            .engine
            .pipeline_mut()
            .and_then(|p| p.conns.get_mut(conn as usize))
            .and_then(Option::as_mut)
        {
            p.probe = None;
        }
        self.pipelined_control(conn, Control::Timeout { conn });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_needs_every_stage_and_at_most_255_groups() {
        assert!(PipelineLayout::default().check().is_ok());
        let none = PipelineLayout {
            copy: 0,
            ..PipelineLayout::default()
        };
        assert!(matches!(none.check(), Err(ToeError::Config(_))));
        let too_many = PipelineLayout {
            groups: 256,
            ..PipelineLayout::default()
        };
        assert!(too_many.check().is_err());
    }
}
