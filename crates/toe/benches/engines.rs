//! The endpoint's two engines side by side: segments per second through
//! the receive path of one established connection, in process, from the
//! received frame to the ACK frame, for full-sized (1448 B) and 64 B
//! in-order segments.
//!
//! - toe (run to completion, thesis chapter 4): parse and validate the
//!   frame, pre-processing's lookup and summary, the protocol stage,
//!   post-processing's counters, the payload copy into the receive
//!   buffer, one ACK frame per receive batch (as the endpoint sends it).
//! - Laminar (chapter 5): parse and validate the frame, its translation
//!   into the program's segment, the program in the RMT emulator (ingress,
//!   egress stages, the mirrored pseudo segment that becomes the ACK, the
//!   DMA record), the DMA write into the receive buffer, and one ACK frame
//!   per segment (each pseudo segment is one, as on the hardware).
//!
//! Both read what arrived and hand the space back (the protocol stage's
//! window; a host SYNC every quarter buffer), so the stream never stops.
//! A batch is 32 frames, the endpoint's receive batch size order. The
//! time is the benchmark thread's CPU time, so the rate is per core even
//! when other work shares the machine.
//!
//! cargo bench -p toe --bench engines

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use host::cpu::thread_cpu_time;
use rmt::laminar::ConnectionSpec;
use toe::buffer::PayloadBuf;
use toe::laminar::{network_segment, LaminarEngine};
use toe::segment::{self, Flags, Frame, Header, Route, TcpOptions};
use toe::stages::{Post, Pre, Protocol, Steer};
use toe::state::{ConnId, PostState, ProtoState};

const BATCH: usize = 32;
const BUFFER: u32 = 1 << 20;
const PEER_SEQ: u32 = 1_000_000;
const OUR_SEQ: u32 = 77;

const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_PORT: u16 = 40000;
const OUR_PORT: u16 = 5555;

/// The peer's route to us, and ours back.
fn route(back: bool) -> Route {
    let (a, b) = ((PEER_MAC, PEER, PEER_PORT), (OUR_MAC, US, OUR_PORT));
    let ((sm, s, sp), (dm, d, dp)) = if back { (b, a) } else { (a, b) };
    Route {
        src_mac: sm,
        dst_mac: dm,
        src: IpAddr::V4(s),
        dst: IpAddr::V4(d),
        src_port: sp,
        dst_port: dp,
    }
}

/// A ring of the peer's in-order data frames, `payload` bytes each, from
/// `first` on; frame `k` of the stream is `ring[k % len]` with its
/// sequence number rewritten, so the ring is built once.
struct Stream {
    frames: Vec<Vec<u8>>,
    payload: usize,
    next: u32,
}

impl Stream {
    fn new(payload: usize) -> Self {
        let frames = (0..BATCH)
            .map(|k| {
                let h = Header {
                    seq: 0,
                    ack: OUR_SEQ,
                    flags: Flags(Flags::ACK | Flags::PSH),
                    window: 0xffff,
                    options: TcpOptions::default(),
                };
                let mut f = Vec::new();
                segment::build(&route(false), &h, &vec![k as u8; payload], &mut f);
                f
            })
            .collect();
        Stream {
            frames,
            payload,
            next: PEER_SEQ,
        }
    }

    /// The next batch of frames, numbered in sequence (the TCP checksum
    /// is fixed up for the new sequence number, RFC 1624).
    fn batch(&mut self) -> &[Vec<u8>] {
        for f in &mut self.frames {
            set_seq(f, self.next);
            self.next = self.next.wrapping_add(self.payload as u32);
        }
        &self.frames
    }
}

/// Writes `seq` into an Ethernet + IPv4 + TCP frame and updates its TCP
/// checksum incrementally (RFC 1624 equation 3).
fn set_seq(frame: &mut [u8], seq: u32) {
    const SEQ_AT: usize = 14 + 20 + 4;
    const SUM_AT: usize = 14 + 20 + 16;
    let word = |f: &[u8], at: usize| u32::from(u16::from_be_bytes([f[at], f[at + 1]]));
    let mut sum = !word(frame, SUM_AT) & 0xffff;
    for half in [SEQ_AT, SEQ_AT + 2] {
        sum += !word(frame, half) & 0xffff;
    }
    frame[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seq.to_be_bytes());
    for half in [SEQ_AT, SEQ_AT + 2] {
        sum += word(frame, half);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    frame[SUM_AT..SUM_AT + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// The run-to-completion stages with one connection installed.
struct ToeRx {
    pre: Pre,
    proto: Protocol,
    post: Post,
    rx: PayloadBuf,
    out: Vec<u8>,
    acks: u64,
}

impl ToeRx {
    fn new() -> Self {
        let (mut pre, mut proto, mut post) = (Pre::default(), Protocol::default(), Post::default());
        let id = ConnId {
            peer_mac: PEER_MAC,
            local_mac: OUR_MAC,
            peer_ip: IpAddr::V4(PEER),
            local_ip: IpAddr::V4(US),
            local_port: OUR_PORT,
            remote_port: PEER_PORT,
            flow_group: 0,
        };
        pre.install(0, id, 0);
        proto.install(
            0,
            ProtoState {
                seq: OUR_SEQ,
                tx_high: OUR_SEQ,
                ack: PEER_SEQ,
                rx_avail: BUFFER,
                remote_win: 0xffff,
                ..ProtoState::default()
            },
        );
        post.install(
            0,
            PostState {
                rx_size: BUFFER,
                tx_size: BUFFER,
                ..PostState::default()
            },
        );
        ToeRx {
            pre,
            proto,
            post,
            rx: PayloadBuf::new(BUFFER),
            out: Vec::with_capacity(128),
            acks: 0,
        }
    }

    /// One receive batch; returns the bytes made readable.
    fn receive(&mut self, frames: &[Vec<u8>]) -> u32 {
        let mut readable = 0;
        for f in frames {
            let Ok(Frame::Tcp(seg)) = segment::parse(f) else {
                panic!("a frame of the stream does not parse");
            };
            let Steer::DataPath { conn, summary } = self.pre.steer(&seg) else {
                panic!("the stream's connection is not installed");
            };
            let (out, _) = self.proto.rx(conn, &summary);
            self.post.account(conn, &out, seg.ce, false);
            if let Some(p) = out.place {
                let data = &seg.payload[p.skip as usize..(p.skip + p.len) as usize];
                self.rx.write(p.pos, data);
            }
            readable += out.readable;
        }
        // The batch's ACK, after every copy.
        let snap = self.proto.snapshot(0);
        let h = self.post.header(0, snap.seq, 0, &snap, 0);
        self.out.clear();
        segment::build(&route(true), &h, &[], &mut self.out);
        self.acks += 1;
        // The application read it all.
        self.proto.consumed(0, readable);
        readable
    }
}

/// Laminar's program with one connection installed, and the host's side.
struct LaminarRx {
    engine: LaminarEngine,
    rx: PayloadBuf,
    ready: u32,
    ungranted: u32,
    out: Vec<u8>,
    acks: u64,
}

impl LaminarRx {
    fn new() -> Self {
        let mut engine = LaminarEngine::new(4).expect("Laminar's program loads");
        let spec = ConnectionSpec {
            local_ip: u32::from(US),
            local_port: OUR_PORT,
            remote_ip: u32::from(PEER),
            remote_port: PEER_PORT,
            ctx: 0,
            rx_next_seq: PEER_SEQ,
            rx_buffer_addr: 0,
            rx_buffer_size: BUFFER,
            rx_avail: BUFFER,
            tx_base_seq: OUR_SEQ,
            tx_next_ack: OUR_SEQ,
            tx_credits: 0,
            credit_grant: 0,
            tx_remote_avail: 0xffff,
            wscale: 0,
        };
        engine.install(0, &spec).expect("the connection installs");
        LaminarRx {
            engine,
            rx: PayloadBuf::new(BUFFER),
            ready: PEER_SEQ,
            ungranted: 0,
            out: Vec::with_capacity(128),
            acks: 0,
        }
    }

    /// One receive batch; returns the bytes made readable.
    fn receive(&mut self, frames: &[Vec<u8>]) -> u32 {
        for f in frames {
            let Ok(Frame::Tcp(seg)) = segment::parse(f) else {
                panic!("a frame of the stream does not parse");
            };
            let s = network_segment(
                (u32::from(PEER), u32::from(US)),
                (seg.route.src_port, seg.route.dst_port),
                seg.seq,
                None,
                seg.payload,
            );
            // Time 0: the engine enters each frame at the pipeline's
            // time, spaced as on a 10 Gbit/s link.
            self.engine.receive(0, &s).expect("injected");
        }
        let out = self.engine.run_to_idle().expect("the pipeline runs");
        let mut readable = 0;
        for w in out.rx_data {
            self.rx.write(w.addr as u32, &w.payload);
            if let Some(seq) = w.notify {
                readable += seq.wrapping_sub(self.ready);
                self.ready = seq;
            }
        }
        for a in out.segments {
            let h = Header {
                seq: a.seq,
                ack: a.ack,
                flags: Flags(a.flags),
                window: a.window,
                options: TcpOptions::default(),
            };
            self.out.clear();
            segment::build(&route(true), &h, &a.payload, &mut self.out);
            self.acks += 1;
        }
        // The application read it all: a host SYNC per quarter buffer.
        self.ungranted += readable;
        if self.ungranted >= BUFFER / 4 {
            let grant = std::mem::take(&mut self.ungranted);
            self.engine.sync(0, 0, grant).expect("injected");
        }
        readable
    }
}

/// Runs `iters` batches through `receive`; every byte must become
/// readable, and the CPU time is returned.
fn run(iters: u64, stream: &mut Stream, mut receive: impl FnMut(&[Vec<u8>]) -> u32) -> Duration {
    let start = thread_cpu_time().expect("thread CPU time");
    for _ in 0..iters {
        let batch = stream.batch();
        let readable = receive(batch);
        assert_eq!(readable as usize, BATCH * stream.payload, "bytes lost");
    }
    thread_cpu_time()
        .expect("thread CPU time")
        .saturating_sub(start)
}

fn engines(c: &mut Criterion) {
    for payload in [1448usize, 64] {
        let mut group = c.benchmark_group(format!("receive {payload} B"));
        group.throughput(Throughput::Elements(BATCH as u64));
        group.measurement_time(Duration::from_secs(5));
        group.bench_function("toe run to completion", |b| {
            let (mut stream, mut toe) = (Stream::new(payload), ToeRx::new());
            b.iter_custom(|iters| run(iters, &mut stream, |f| toe.receive(f)));
            assert!(toe.acks > 0);
        });
        group.bench_function("laminar program in rmt", |b| {
            let (mut stream, mut lam) = (Stream::new(payload), LaminarRx::new());
            b.iter_custom(|iters| run(iters, &mut stream, |f| lam.receive(f)));
            assert!(lam.acks > 0);
        });
        group.finish();
    }
}

criterion_group!(benches, engines);
criterion_main!(benches);
