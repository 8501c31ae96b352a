//! The three hazards of thesis Fig. 4.7, replayed on the real pipeline
//! with random stalls in every stage (2 pre-processors, 2 post-processors
//! and 2 copy stages per group, 2 groups, 2 worker threads):
//!
//! 1. per-connection protocol order equals arrival order (no false hole);
//! 2. transmit order equals sequence order;
//! 3. no ACK and no notification before its payload is in the buffer:
//!    checked at the moment the ACK leaves and the moment the application
//!    is told, against the bytes the peer sent.
//!
//! With sequencing off the same run must show the hazards, which proves
//! the checks can fail.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use toe::buffer::PayloadBuf;
use toe::pipeline::{Buffers, Control, Device, Notice, Pipeline, PipelineConfig, Shared, Trace};
use toe::segment::{self, Flags, Frame, Header, TcpOptions};
use toe::stages::{Post, Pre};
use toe::state::{ConnId, PostState, ProtoState};

const SEGMENTS: u32 = 300;
const LEN: u32 = 1000;
const PEER_ISN: u32 = 1000;
const OUR_ISN: u32 = 5000;
const TX_BYTES: u32 = 200_000;

fn stream(i: u32) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 24) as u8
}

fn local() -> IpAddr {
    "10.0.0.2".parse().unwrap()
}

fn peer() -> IpAddr {
    "10.0.0.1".parse().unwrap()
}

/// The one connection: port 80 here, 40000 at the peer.
fn conn_id() -> ConnId {
    ConnId {
        peer_mac: [2, 0, 0, 0, 0, 1],
        local_mac: [2, 0, 0, 0, 0, 2],
        peer_ip: peer(),
        local_ip: local(),
        local_port: 80,
        remote_port: 40000,
        flow_group: 1,
    }
}

fn shared() -> Shared {
    let mut pre = Pre::default();
    pre.install(0, conn_id(), 0);
    let mut post = Post::default();
    post.install(0, PostState::default());
    let buffers = Arc::new(Buffers {
        rx: Mutex::new(PayloadBuf::new(1 << 20)),
        tx: Mutex::new(PayloadBuf::new(1 << 20)),
    });
    Shared {
        pre: Arc::new(RwLock::new(pre)),
        post: Arc::new(RwLock::new(post)),
        buffers: Arc::new(RwLock::new(HashMap::from([(0, buffers)]))),
        trace: Some(Arc::new(Mutex::new(Trace::default()))),
    }
}

/// The peer's data segments, in order.
fn frames() -> VecDeque<Vec<u8>> {
    let route = conn_id().route().reversed();
    (0..SEGMENTS)
        .map(|i| {
            let payload: Vec<u8> = (i * LEN..(i + 1) * LEN).map(stream).collect();
            let h = Header {
                seq: PEER_ISN + i * LEN,
                ack: OUR_ISN,
                flags: Flags(Flags::ACK | Flags::PSH),
                window: 65535,
                options: TcpOptions::default(),
            };
            let mut f = Vec::new();
            segment::build(&route, &h, &payload, &mut f);
            f
        })
        .collect()
}

/// Whether the receive buffer holds the peer's bytes [0, n).
fn in_place(shared: &Shared, n: u32) -> bool {
    let bufs = shared.buffers.read().unwrap()[&0].clone();
    let mut got = vec![0u8; n as usize];
    bufs.rx.lock().unwrap().read(0, &mut got);
    got.iter().enumerate().all(|(i, &b)| b == stream(i as u32))
}

struct Run {
    trace: Trace,
    /// ACKs that left before their bytes were in place.
    early_acks: u64,
    /// Notifications before their bytes were in place.
    early_notices: u64,
    readable: u32,
}

fn run(sequencing: bool, until_done: bool) -> Run {
    let shared = shared();
    let input: Arc<Mutex<VecDeque<Vec<u8>>>> = Arc::new(Mutex::new(VecDeque::new()));
    let early_acks = Arc::new(AtomicU64::new(0));
    let rx_input = input.clone();
    let tx_shared = shared.clone();
    let tx_early = early_acks.clone();
    let device = Device {
        rx: Box::new(move |f: &mut dyn FnMut(&[u8])| {
            let mut q = rx_input.lock().unwrap();
            let n = q.len().min(8);
            for frame in q.drain(..n) {
                f(&frame);
            }
            n
        }),
        tx: Box::new(move |frames: &[Vec<u8>]| {
            for fr in frames {
                if let Ok(Frame::Tcp(s)) = segment::parse(fr) {
                    if s.payload.is_empty() && !in_place(&tx_shared, s.ack - PEER_ISN) {
                        tx_early.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            frames.len()
        }),
        wake: None,
    };
    let cfg = PipelineConfig {
        groups: 2,
        pre: 2,
        post: 2,
        copy: 2,
        threads: 2,
        sequencing,
        jitter: Some((7, Duration::from_micros(300), 3)),
        ..PipelineConfig::default()
    };
    // The application's transmit bytes, in the buffer before they are
    // queued.
    {
        let bufs = shared.buffers.read().unwrap()[&0].clone();
        let data: Vec<u8> = (0..TX_BYTES).map(|i| stream(i ^ 0x55)).collect();
        bufs.tx.lock().unwrap().write(0, &data);
    }
    let p = Pipeline::start(cfg, device, shared.clone());
    p.control(Control::Install {
        conn: 0,
        state: Box::new(ProtoState {
            seq: OUR_ISN,
            tx_high: OUR_ISN,
            ack: PEER_ISN,
            rx_avail: 1 << 20,
            remote_win: 1 << 20,
            ..ProtoState::default()
        }),
    });
    for _ in 0..20 {
        p.control(Control::Queued {
            conn: 0,
            n: TX_BYTES / 20,
        });
    }
    // The peer's frames once the connection is installed (host control
    // is ordered before the frames that arrive after it).
    std::thread::sleep(Duration::from_millis(100));
    *input.lock().unwrap() = frames();
    let mut readable = 0u32;
    let mut early_notices = 0;
    let deadline = Instant::now() + Duration::from_secs(if until_done { 60 } else { 10 });
    while Instant::now() < deadline {
        match p.notices.recv_timeout(Duration::from_millis(50)) {
            Ok(Notice::Readable { n, .. }) => {
                readable += n;
                if !in_place(&shared, readable) {
                    early_notices += 1;
                }
            }
            Ok(_) => {}
            Err(_) if !until_done && input.lock().unwrap().is_empty() => break,
            Err(_) => {}
        }
        let sent = shared
            .trace
            .as_ref()
            .unwrap()
            .lock()
            .unwrap()
            .tx_seq
            .get(&0)
            .map_or(0, Vec::len);
        if until_done && readable == SEGMENTS * LEN && sent >= (TX_BYTES / 1448) as usize {
            break;
        }
    }
    drop(p);
    let trace = std::mem::take(&mut *shared.trace.as_ref().unwrap().lock().unwrap());
    Run {
        trace,
        early_acks: early_acks.load(Ordering::Relaxed),
        early_notices,
        readable,
    }
}

fn increasing<T: PartialOrd>(v: &[T]) -> bool {
    v.windows(2).all(|w| w[0] < w[1])
}

#[test]
fn sequencing_prevents_all_three_hazards() {
    let r = run(true, true);
    assert_eq!(r.readable, SEGMENTS * LEN, "not everything arrived");
    let order = &r.trace.protocol_order[&0];
    assert_eq!(order.len(), SEGMENTS as usize);
    assert!(
        increasing(order),
        "protocol order differs from arrival order"
    );
    let tx = &r.trace.tx_seq[&0];
    assert!(
        tx.len() as u32 >= TX_BYTES / 1448,
        "{} segments sent",
        tx.len()
    );
    assert!(increasing(tx), "segments left out of sequence order");
    assert_eq!((r.early_acks, r.early_notices), (0, 0));
}

#[test]
fn without_sequencing_the_hazards_show() {
    let r = run(false, false);
    let protocol_reordered = !increasing(&r.trace.protocol_order[&0]);
    let tx_reordered = r.trace.tx_seq.get(&0).is_some_and(|v| !increasing(v));
    assert!(
        protocol_reordered && tx_reordered,
        "stalls in replicated stages reorder items: protocol {protocol_reordered}, transmit {tx_reordered}"
    );
}
