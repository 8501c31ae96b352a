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
    pub rpcs: u64,
    /// Request payload per second (the thesis counts one direction).
    pub mbit_per_s: f64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p9999_us: Option<f64>,
}

/// The designs of Table 4.4 that a multi-core x86 host can run, each
/// adding one step (the NFP's eight hardware threads per core have no
/// counterpart here).
pub const LAYOUTS: [(&str, PipelineConfig); 4] = [
    (
        "run to completion (1 thread)",
        PipelineConfig::layout(1, 1, 1),
    ),
    ("+ pipelining (2 threads)", PipelineConfig::layout(1, 1, 2)),
    (
        "+ replicated pre/post/copy (x2)",
        PipelineConfig::layout(1, 2, 2),
    ),
    ("+ flow groups (2)", PipelineConfig::layout(2, 2, 2)),
];

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

/// One peer: its next sequence number, what it acknowledges, and its
/// request in flight.
struct PeerConn {
    seq: u32,
    ack: u32,
    answer_left: u32,
    sent_at: Instant,
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
}

impl Harness {
    fn send_request(&mut self, conn: ConnIdx) {
        let p = &mut self.peers[conn as usize];
        let mut at = 0;
        let mut q = self.to_pipeline.lock().expect("device queue");
        while at < self.cfg.rpc_bytes {
            let len = MSS.min(self.cfg.rpc_bytes - at);
            let h = Header {
                seq: p.seq.wrapping_add(at),
                ack: p.ack,
                flags: Flags(Flags::ACK | Flags::PSH),
                window: 65535,
                options: TcpOptions::default(),
            };
            let payload = vec![conn as u8; len as usize];
            let mut f = Vec::with_capacity(66 + len as usize);
            segment::build(&peer_route(conn), &h, &payload, &mut f);
            q.push_back(f);
            at += len;
        }
        p.seq = p.seq.wrapping_add(self.cfg.rpc_bytes);
        p.answer_left = self.cfg.rpc_bytes;
        p.sent_at = Instant::now();
    }

    /// The peers' side: answers complete RPCs and send the next request.
    fn peer_input(&mut self) {
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
            if s.payload.is_empty() || p.answer_left == 0 {
                continue;
            }
            let n = (s.payload.len() as u32).min(p.answer_left);
            p.answer_left -= n;
            p.ack = s.seq.wrapping_add(s.payload.len() as u32);
            if p.answer_left == 0 {
                self.latencies_us
                    .push(p.sent_at.elapsed().as_secs_f64() * 1e6);
                self.rpcs += 1;
                self.send_request(conn);
            }
        }
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
        });
    }
    let n = cfg.connections as usize;
    let mut h = Harness {
        cfg,
        to_pipeline,
        from_pipeline,
        peers: (0..n)
            .map(|_| PeerConn {
                seq: PEER_ISN,
                ack: OUR_ISN,
                answer_left: 0,
                sent_at: Instant::now(),
            })
            .collect(),
        readable: vec![0; n],
        read_pos: vec![0; n],
        write_pos: vec![0; n],
        latencies_us: Vec::new(),
        rpcs: 0,
    };
    // The installs go first: they take the front's control path.
    std::thread::sleep(Duration::from_millis(20));
    for conn in 0..cfg.connections {
        h.send_request(conn);
    }
    let start = Instant::now();
    while start.elapsed() < cfg.duration {
        h.app(&pipeline);
        h.peer_input();
        std::thread::yield_now();
    }
    let secs = start.elapsed().as_secs_f64();
    drop(pipeline);
    let p = |q: f64| stats::percentile(&h.latencies_us, q);
    AblationResult {
        rpcs: h.rpcs,
        mbit_per_s: h.rpcs as f64 * f64::from(cfg.rpc_bytes) * 8.0 / secs / 1e6,
        p50_us: p(50.0),
        p99_us: p(99.0),
        p9999_us: p(99.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }
}
