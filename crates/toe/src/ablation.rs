//! Thesis Table 4.4's ablation on this machine: the same data path run to
//! completion, pipelined over worker threads, with replicated pre- and
//! post-processing, and with flow groups, under the thesis's workload: 64
//! connections with one 2 KB RPC in flight each, echoed by the
//! application.
//!
//! The pipeline is driven in-process (its device is a pair of queues), so
//! what is measured is the data path itself, as the thesis measures the
//! NIC's: a closed-loop client plays the peers (it sends a request, and the
//! next one with the ACK of the answer once the answer is complete), and
//! an echo application reads each request from its connection's buffer
//! and queues the answer. Both run on one harness thread beside the
//! pipeline's workers.
//!
//! An RPC counts only when its answer is its request, byte for byte: every
//! request is a pattern of its own (per connection and per RPC), and each
//! answer segment is compared with the request's bytes at the segment's
//! offset, so an echo of the wrong bytes, of another connection's, of an
//! earlier request's or at a wrong offset is counted
//! (`mismatched_segments`) and never completes the RPC.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::buffer::PayloadBuf;
use crate::pipeline::{Buffers, Control, Device, Notice, Pipeline, PipelineConfig, Shared};
use crate::segment::{self, Flags, Frame, Header, Route, TcpOptions};
use crate::stages::{ConnIdx, FourTuple, Post, Pre};
use crate::state::{ConnId, PostState, ProtoState};

/// The workload and the pipeline's layout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AblationConfig {
    pub connections: u32,
    pub rpc_bytes: u32,
    pub duration: Duration,
    pub pipeline: PipelineConfig,
}

/// What one layout achieved.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AblationResult {
    /// RPCs whose whole answer arrived and equalled the request.
    pub rpcs: u64,
    /// Answer segments whose bytes were not the request's at their
    /// offset (or lay beyond the request's end).
    pub mismatched_segments: u64,
    /// At least one RPC completed and no answer segment mismatched.
    pub byte_exact: bool,
    /// Request payload per second (the thesis counts one direction).
    pub mbit_per_s: f64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p9999_us: Option<f64>,
}

/// The step of Table 4.4 a layout adds (the NFP's eight hardware threads
/// per core have no counterpart on an x86 host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The whole data path on one thread.
    RunToCompletion,
    /// The stages spread over worker threads.
    Pipelining,
    /// Pre-processing, post-processing and the payload copy replicated.
    Replication,
    /// Connections split into flow groups, each with its own protocol
    /// stage (the one stage that cannot be replicated).
    FlowGroups,
}

/// One design of the ablation: its step, a name saying its layout, and
/// the layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub step: Step,
    pub design: String,
    pub pipeline: PipelineConfig,
}

/// Replicas of pre-processing, post-processing and the payload copy in the
/// replicated layouts (the thesis replicates each stage; two already show
/// what replication gives, and more only add stages per group).
const REPLICAS: usize = 2;

/// The most flow groups a layout has: the workload has 64 connections, and
/// more groups than that would leave protocol stages without one.
pub const MAX_GROUPS: usize = 32;

/// Stage instances of a pipeline with `groups` flow groups and `replicas`
/// of the replicated stages: the front end and transmit, the shared
/// pre-processors, and per group its protocol stage, post-processors and
/// copy stages ([`Pipeline::start`]). More worker threads than this would
/// have nothing to run.
pub const fn stage_instances(groups: usize, replicas: usize) -> usize {
    2 + replicas + groups * (1 + 2 * replicas)
}

/// The most worker threads a layout can use: the stage instances of the
/// largest.
pub const MAX_THREADS: usize = stage_instances(MAX_GROUPS, REPLICAS);

/// Flow groups for `threads` worker threads: one per two threads, at least
/// two, so each group's protocol stage gets about a core of its own with
/// its post-processing and copy beside it.
fn groups_for(threads: usize) -> usize {
    (threads / 2).clamp(2, MAX_GROUPS)
}

/// The thread counts the flow-group layouts scale over: doubling from 2
/// up to `threads`, and `threads` itself.
fn thread_steps(threads: usize) -> Vec<usize> {
    let mut steps: Vec<usize> = std::iter::successors(Some(2), |t| Some(t * 2))
        .take_while(|&t| t < threads)
        .collect();
    if threads >= 2 {
        steps.push(threads);
    }
    steps
}

/// The designs of Table 4.4 for up to `threads` worker threads (the CPUs
/// present, or what the user asks for), each adding one step: run to
/// completion on 1 thread; pipelining and replication over as many
/// threads as they have stages for; then flow groups on 2, 4, 8, ...
/// threads up to `threads`, so the same command scales with the host. One
/// thread gives run to completion alone. `threads` is at most
/// [`MAX_THREADS`] (more have no stage to run).
pub fn layouts(threads: usize) -> Vec<Layout> {
    let threads = threads.clamp(1, MAX_THREADS);
    let mut out = vec![Layout {
        step: Step::RunToCompletion,
        design: "run to completion (1 thread)".into(),
        pipeline: PipelineConfig::layout(1, 1, 1),
    }];
    if threads < 2 {
        return out;
    }
    let t = threads.min(stage_instances(1, 1));
    out.push(Layout {
        step: Step::Pipelining,
        design: format!("+ pipelining ({t} threads)"),
        pipeline: PipelineConfig::layout(1, 1, t),
    });
    let t = threads.min(stage_instances(1, REPLICAS));
    out.push(Layout {
        step: Step::Replication,
        design: format!("+ replicated pre/post/copy (x{REPLICAS}, {t} threads)"),
        pipeline: PipelineConfig::layout(1, REPLICAS, t),
    });
    for t in thread_steps(threads) {
        let groups = groups_for(t);
        out.push(Layout {
            step: Step::FlowGroups,
            design: format!("+ flow groups ({groups} groups, {t} threads)"),
            pipeline: PipelineConfig::layout(groups, REPLICAS, t),
        });
    }
    out
}

const OUR_ISN: u32 = 1_000;
const PEER_ISN: u32 = 7_000_000;
const MSS: u32 = 1448;

fn local() -> IpAddr {
    IpAddr::from([10, 0, 0, 2])
}

fn peer() -> IpAddr {
    IpAddr::from([10, 0, 0, 1])
}

fn peer_route(conn: ConnIdx) -> Route {
    Route {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src: peer(),
        dst: local(),
        src_port: 10_000 + conn as u16,
        dst_port: 80,
    }
}

/// The connections installed in the shared tables, as the control plane
/// would after the handshakes.
fn shared(connections: u32, groups: usize) -> Shared {
    let mut pre = Pre::default();
    let mut post = Post::default();
    let mut buffers = HashMap::new();
    for conn in 0..connections {
        let r = peer_route(conn);
        let tuple = FourTuple {
            local: r.dst,
            local_port: r.dst_port,
            remote: r.src,
            remote_port: r.src_port,
        };
        let id = ConnId {
            peer_mac: r.src_mac,
            local_mac: r.dst_mac,
            peer_ip: r.src,
            local_ip: r.dst,
            local_port: r.dst_port,
            remote_port: r.src_port,
            flow_group: tuple.flow_group(groups as u8),
        };
        pre.install(conn, id, 0);
        post.install(conn, PostState::default());
        buffers.insert(
            conn,
            Arc::new(Buffers {
                rx: Mutex::new(PayloadBuf::new(1 << 16)),
                tx: Mutex::new(PayloadBuf::new(1 << 16)),
            }),
        );
    }
    Shared {
        pre: Arc::new(RwLock::new(pre)),
        post: Arc::new(RwLock::new(post)),
        buffers: Arc::new(RwLock::new(buffers)),
        trace: None,
    }
}

/// The bytes of request `rpc` on connection `conn`: a xorshift64 stream
/// seeded by both (8 bytes per step), so every request differs from the
/// other connections' and from its own connection's earlier ones, and
/// each offset of it from the others.
fn request_bytes(conn: ConnIdx, rpc: u64, len: u32) -> Vec<u8> {
    let mut x = ((u64::from(conn) << 40) ^ rpc).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len as usize + 8);
    while out.len() < len as usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len as usize);
    out
}

/// What an answer segment did to its peer's RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Its bytes are the request's at its offset; the answer is not whole yet.
    Partial,
    /// The answer is whole and equal to the request.
    Complete,
    /// Bytes before the answer's start: a copy of an earlier answer's.
    Earlier,
    /// Bytes that differ from the request's at their offset, or lie
    /// beyond its end.
    Mismatch,
}

/// One peer: its next sequence number, and its request in flight with what
/// of the answer arrived.
struct PeerConn {
    seq: u32,
    /// Our sequence number of the answer's first byte.
    answer_start: u32,
    /// The request in flight: the answer must be these bytes.
    request: Vec<u8>,
    /// Which bytes of the answer arrived (each equal to the request's).
    arrived: Vec<bool>,
    /// Distinct bytes of the answer that arrived.
    arrived_bytes: usize,
    /// Bytes of the answer that arrived in order from its start: the peer
    /// acknowledges `answer_start + in_order`.
    in_order: usize,
    /// Requests sent so far (seeds the next request's bytes).
    sent: u64,
    sent_at: Instant,
}

impl PeerConn {
    fn new() -> PeerConn {
        PeerConn {
            seq: PEER_ISN,
            answer_start: OUR_ISN,
            request: Vec::new(),
            arrived: Vec::new(),
            arrived_bytes: 0,
            in_order: 0,
            sent: 0,
            sent_at: Instant::now(),
        }
    }

    /// What the peer acknowledges: every answer byte that arrived in order.
    fn ack(&self) -> u32 {
        self.answer_start.wrapping_add(self.in_order as u32)
    }

    /// The next request, `len` bytes; its answer starts where the last one
    /// ended.
    fn next_request(&mut self, conn: ConnIdx, len: u32) -> &[u8] {
        self.answer_start = self.ack();
        self.request = request_bytes(conn, self.sent, len);
        self.arrived.clear();
        self.arrived.resize(len as usize, false);
        (self.arrived_bytes, self.in_order) = (0, 0);
        self.sent += 1;
        &self.request
    }

    /// Takes an answer segment of our sequence number `seq`.
    fn take(&mut self, seq: u32, payload: &[u8]) -> Answer {
        let offset = seq.wrapping_sub(self.answer_start);
        if (offset as i32) < 0 {
            return Answer::Earlier;
        }
        let (offset, end) = (offset as usize, offset as usize + payload.len());
        if self.request.get(offset..end) != Some(payload) {
            return Answer::Mismatch;
        }
        for got in &mut self.arrived[offset..end] {
            self.arrived_bytes += usize::from(!*got);
            *got = true;
        }
        while self.arrived.get(self.in_order) == Some(&true) {
            self.in_order += 1;
        }
        if self.arrived_bytes == self.request.len() {
            Answer::Complete
        } else {
            Answer::Partial
        }
    }
}

/// The closed-loop client and the echo application.
struct Harness {
    cfg: AblationConfig,
    to_pipeline: Arc<Mutex<VecDeque<Vec<u8>>>>,
    from_pipeline: Arc<Mutex<VecDeque<Vec<u8>>>>,
    peers: Vec<PeerConn>,
    /// Request bytes readable per connection (the application's view).
    readable: Vec<u32>,
    read_pos: Vec<u32>,
    write_pos: Vec<u32>,
    latencies_us: Vec<f64>,
    rpcs: u64,
    mismatched_segments: u64,
}

impl Harness {
    fn send_request(&mut self, conn: ConnIdx) {
        let p = &mut self.peers[conn as usize];
        let (seq, ack) = (p.seq, p.ack());
        p.seq = p.seq.wrapping_add(self.cfg.rpc_bytes);
        p.sent_at = Instant::now();
        let request = p.next_request(conn, self.cfg.rpc_bytes);
        let mut q = self.to_pipeline.lock().expect("device queue");
        for (i, payload) in request.chunks(MSS as usize).enumerate() {
            let h = Header {
                seq: seq.wrapping_add(i as u32 * MSS),
                ack,
                flags: Flags(Flags::ACK | Flags::PSH),
                window: 65535,
                options: TcpOptions::default(),
            };
            let mut f = Vec::with_capacity(66 + payload.len());
            segment::build(&peer_route(conn), &h, payload, &mut f);
            q.push_back(f);
        }
    }

    /// The peers' side: answers complete RPCs and send the next request.
    /// Returns whether a request went to the pipeline.
    fn peer_input(&mut self) -> bool {
        let mut sent = false;
        let frames: Vec<Vec<u8>> = self
            .from_pipeline
            .lock()
            .expect("device queue")
            .drain(..)
            .collect();
        for f in frames {
            let Ok(Frame::Tcp(s)) = segment::parse(&f) else {
                continue;
            };
            let conn = u32::from(s.route.dst_port - 10_000);
            let Some(p) = self.peers.get_mut(conn as usize) else {
                continue;
            };
            if s.payload.is_empty() {
                continue;
            }
            match p.take(s.seq, s.payload) {
                Answer::Partial | Answer::Earlier => {}
                Answer::Mismatch => self.mismatched_segments += 1,
                Answer::Complete => {
                    self.latencies_us
                        .push(p.sent_at.elapsed().as_secs_f64() * 1e6);
                    self.rpcs += 1;
                    self.send_request(conn);
                    sent = true;
                }
            }
        }
        sent
    }

    /// The echo application: a whole request read, its answer queued.
    fn app(&mut self, pipeline: &Pipeline) {
        while let Ok(n) = pipeline.notices.try_recv() {
            let Notice::Readable { conn, n } = n else {
                continue;
            };
            let c = conn as usize;
            self.readable[c] += n;
            while self.readable[c] >= self.cfg.rpc_bytes {
                let size = self.cfg.rpc_bytes;
                let bufs = pipeline.shared.buffers.read().expect("buffers")[&conn].clone();
                let mut req = vec![0u8; size as usize];
                bufs.rx
                    .lock()
                    .expect("rx buffer")
                    .read(self.read_pos[c], &mut req);
                self.read_pos[c] = self.read_pos[c].wrapping_add(size);
                self.readable[c] -= size;
                pipeline.control(Control::Consumed { conn, n: size });
                bufs.tx
                    .lock()
                    .expect("tx buffer")
                    .write(self.write_pos[c], &req);
                self.write_pos[c] = self.write_pos[c].wrapping_add(size);
                pipeline.control(Control::Queued { conn, n: size });
            }
        }
    }
}

/// Runs the workload on one layout for `cfg.duration`.
pub fn run(cfg: AblationConfig) -> AblationResult {
    let shared = shared(cfg.connections, cfg.pipeline.groups.max(1));
    let to_pipeline = Arc::new(Mutex::new(VecDeque::new()));
    let from_pipeline = Arc::new(Mutex::new(VecDeque::new()));
    let (rx_q, tx_q) = (to_pipeline.clone(), from_pipeline.clone());
    let device = Device {
        rx: Box::new(move |f: &mut dyn FnMut(&[u8])| {
            let batch: Vec<Vec<u8>> = {
                let mut q = rx_q.lock().expect("device queue");
                let n = q.len().min(64);
                q.drain(..n).collect()
            };
            for frame in &batch {
                f(frame);
            }
            batch.len()
        }),
        tx: Box::new(move |frames: &[Vec<u8>]| {
            tx_q.lock()
                .expect("device queue")
                .extend(frames.iter().cloned());
            frames.len()
        }),
        wake: None,
    };
    let pipeline = Pipeline::start(cfg.pipeline, device, shared);
    for conn in 0..cfg.connections {
        pipeline.control(Control::Install {
            conn,
            state: Box::new(ProtoState {
                seq: OUR_ISN,
                tx_high: OUR_ISN,
                ack: PEER_ISN,
                rx_avail: 1 << 16,
                remote_win: 1 << 20,
                ..ProtoState::default()
            }),
            epoch: 0,
        });
    }
    let n = cfg.connections as usize;
    let mut h = Harness {
        cfg,
        to_pipeline,
        from_pipeline,
        peers: (0..n).map(|_| PeerConn::new()).collect(),
        readable: vec![0; n],
        read_pos: vec![0; n],
        write_pos: vec![0; n],
        latencies_us: Vec::new(),
        rpcs: 0,
        mismatched_segments: 0,
    };
    // The installs go first: they take the front's control path.
    std::thread::sleep(Duration::from_millis(20));
    for conn in 0..cfg.connections {
        h.send_request(conn);
    }
    pipeline.wake();
    let start = Instant::now();
    while start.elapsed() < cfg.duration {
        h.app(&pipeline);
        if h.peer_input() {
            pipeline.wake();
        }
        std::thread::yield_now();
    }
    let secs = start.elapsed().as_secs_f64();
    drop(pipeline);
    let p = |q: f64| stats::percentile(&h.latencies_us, q);
    AblationResult {
        rpcs: h.rpcs,
        mismatched_segments: h.mismatched_segments,
        byte_exact: h.rpcs > 0 && h.mismatched_segments == 0,
        mbit_per_s: h.rpcs as f64 * f64::from(cfg.rpc_bytes) * 8.0 / secs / 1e6,
        p50_us: p(50.0),
        p99_us: p(99.0),
        p9999_us: p(99.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each layout is, as (step, groups, replicas, threads).
    fn shapes(threads: usize) -> Vec<(Step, usize, usize, usize)> {
        layouts(threads)
            .iter()
            .map(|l| {
                let p = l.pipeline;
                (l.step, p.groups, p.pre, p.threads)
            })
            .collect()
    }

    /// On this 2-CPU machine the derivation gives the four designs the
    /// fixed list had; on a bigger host the same command uses every CPU
    /// (the fixed list stopped at 2 threads).
    #[test]
    fn layouts_scale_from_one_thread_to_all_of_them() {
        use Step::*;
        assert_eq!(shapes(1), [(RunToCompletion, 1, 1, 1)]);
        assert_eq!(
            shapes(2),
            [
                (RunToCompletion, 1, 1, 1),
                (Pipelining, 1, 1, 2),
                (Replication, 1, 2, 2),
                (FlowGroups, 2, 2, 2),
            ]
        );
        assert_eq!(
            shapes(16),
            [
                (RunToCompletion, 1, 1, 1),
                (Pipelining, 1, 1, 6),
                (Replication, 1, 2, 9),
                (FlowGroups, 2, 2, 2),
                (FlowGroups, 2, 2, 4),
                (FlowGroups, 4, 2, 8),
                (FlowGroups, 8, 2, 16),
            ]
        );
        let odd = shapes(12);
        assert_eq!(odd.last(), Some(&(FlowGroups, 6, 2, 12)));
        assert_eq!(odd.iter().filter(|s| s.0 == FlowGroups).count(), 4);
        // A big host: every layout has a stage for each of its threads,
        // and the largest uses all of them.
        for cpus in [3, 7, 64, 96, 128, MAX_THREADS] {
            let all = layouts(cpus);
            assert_eq!(all.last().unwrap().pipeline.threads, cpus, "{cpus}");
            for l in &all {
                let p = l.pipeline;
                assert!(p.threads <= stage_instances(p.groups, p.pre), "{l:?}");
                assert!(p.groups <= MAX_GROUPS, "{l:?}");
            }
        }
        assert_eq!(layouts(0), layouts(1));
        assert_eq!(layouts(MAX_THREADS + 50), layouts(MAX_THREADS));
        assert_eq!(
            layouts(4)[3].design,
            "+ flow groups (2 groups, 2 threads)",
            "the name says the layout"
        );
    }

    #[test]
    fn every_layout_completes_rpcs() {
        for pipeline in [PipelineConfig::default(), PipelineConfig::layout(2, 2, 2)] {
            let r = run(AblationConfig {
                connections: 8,
                rpc_bytes: 2048,
                duration: Duration::from_millis(300),
                pipeline,
            });
            assert!(r.rpcs > 8, "{pipeline:?}: {r:?}");
            assert!(r.p50_us.is_some());
            assert!(r.byte_exact && r.mismatched_segments == 0, "{r:?}");
        }
    }

    /// A peer whose request of 2048 bytes is in flight.
    fn peer_with_request(conn: ConnIdx) -> PeerConn {
        let mut p = PeerConn::new();
        p.next_request(conn, 2048);
        p
    }

    #[test]
    fn an_answer_counts_only_when_it_is_the_request_byte_for_byte() {
        let mut p = peer_with_request(3);
        let want = p.request.clone();
        // In order, in two segments: the ACK follows.
        assert_eq!(p.take(OUR_ISN, &want[..1448]), Answer::Partial);
        assert_eq!(p.ack(), OUR_ISN + 1448);
        assert_eq!(p.take(OUR_ISN + 1448, &want[1448..]), Answer::Complete);
        // The next request, answered out of order: complete once both
        // halves are there; the ACK stays at the hole until it is filled.
        p.next_request(3, 2048);
        assert_ne!(p.request, want, "the next request has bytes of its own");
        let want = p.request.clone();
        let start = p.answer_start;
        assert_eq!(start, OUR_ISN + 2048);
        assert_eq!(p.take(start + 1000, &want[1000..]), Answer::Partial);
        assert_eq!(p.ack(), start);
        assert_eq!(p.take(start, &want[..1000]), Answer::Complete);
        assert_eq!(p.ack(), start + 2048);
    }

    #[test]
    fn an_echo_of_other_bytes_is_a_mismatch_not_an_rpc() {
        let p = peer_with_request(3);
        let want = p.request.clone();
        let mut flipped = want.clone();
        flipped[700] ^= 1;
        // The old count by length took all of these as a whole answer.
        let wrong = [
            ("one byte flipped", OUR_ISN, flipped),
            ("another connection's", OUR_ISN, request_bytes(4, 0, 2048)),
            ("the next request's", OUR_ISN, request_bytes(3, 1, 2048)),
            ("shifted by one", OUR_ISN + 1, want[..2047].to_vec()),
            ("past the end", OUR_ISN + 1, want.clone()),
        ];
        for (what, seq, bytes) in wrong {
            let mut p = peer_with_request(3);
            assert_eq!(p.take(seq, &bytes), Answer::Mismatch, "{what}");
            assert_eq!((p.arrived_bytes, p.ack()), (0, OUR_ISN), "{what}");
        }
        // A copy of an earlier answer's bytes is not this answer's.
        let mut p = peer_with_request(3);
        p.take(OUR_ISN, &want);
        p.next_request(3, 2048);
        assert_eq!(p.take(OUR_ISN + 1448, &want[1448..]), Answer::Earlier);
    }
}
