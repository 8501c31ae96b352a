//! Laminar's program on the emulator: segments per second for one
//! connection receiving 64-byte segments, in order, and with 10% of them
//! arriving after their successor (reordered, RFC 4737 §3.3). Each segment
//! runs ingress and egress, its mirrored pseudo segment runs egress again and
//! leaves as an ACK, and the payload leaves as a DMA write, all within the
//! measured time, as does a go-back-N sender reading those ACKs.
//!
//! The time is the benchmark thread's CPU time, so the rate is per core
//! even when other work shares the machine's cores.
//!
//! cargo bench -p rmt --bench laminar

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use host::cpu::thread_cpu_time;
use rmt::channel::SplitMix64;
use rmt::laminar::example::table_5_1_connection;
use rmt::laminar::segment::{flags, HostCommand, TcpSegment};
use rmt::laminar::{install, program, ConnectionSpec, LaminarConfig};
use rmt::program::Port;
use rmt::{Pipeline, PipelineConfig};

const PAYLOAD: usize = 64;
/// Segments before the connection is installed afresh (4 MiB of stream).
const RING: usize = 1 << 16;
const BUFFER: u32 = 1 << 20;
/// Arrival spacing: the pipeline takes 1 ns per packet, a mirror 300 ns.
const GAP_NS: u64 = 10;
/// Offset of the acknowledgment number in an IPv4 + TCP header.
const ACK_AT: usize = 28;

fn spec() -> ConnectionSpec {
    ConnectionSpec {
        rx_buffer_size: BUFFER,
        rx_avail: BUFFER,
        ..table_5_1_connection()
    }
}

/// Segment `k` of the stream.
fn segment(k: usize) -> Vec<u8> {
    let s = spec();
    TcpSegment {
        src_ip: s.remote_ip,
        dst_ip: s.local_ip,
        src_port: s.remote_port,
        dst_port: s.local_port,
        seq: s.rx_next_seq.wrapping_add((k * PAYLOAD) as u32),
        ack: 0,
        flags: flags::ACK,
        window: 0xffff,
        sack: None,
        payload: vec![k as u8; PAYLOAD],
    }
    .emit()
}

/// A sender and a pipeline running Laminar. The sender sends segment after
/// segment, holding one back behind its successor with the probability that
/// reorders the wanted fraction; on three duplicate ACKs it goes back to the
/// first unacknowledged segment (go-back-N). The host hands back window as
/// data is acknowledged, a quarter buffer at a time, as libTOE would.
struct Feed {
    pipeline: Pipeline,
    segments: Vec<Vec<u8>>,
    swap: f64,
    rng: SplitMix64,
    next: usize,
    held: Option<usize>,
    acked: usize,
    granted: usize,
    dupacks: u32,
    recovering: bool,
    now: u64,
    sent: u64,
    reordered: u64,
    retransmitted: u64,
}

impl Feed {
    fn new(reordered: f64) -> Self {
        let mut pipeline =
            Pipeline::load(program(LaminarConfig::default()), PipelineConfig::default())
                .expect("Laminar loads");
        install(&mut pipeline, 0, &spec()).expect("connection installs");
        Feed {
            pipeline,
            segments: (0..RING).map(segment).collect(),
            // Holding back with probability p reorders p / (1 + p).
            swap: reordered / (1.0 - reordered),
            rng: SplitMix64(42),
            next: 0,
            held: None,
            acked: 0,
            granted: 0,
            dupacks: 0,
            recovering: false,
            now: 0,
            sent: 0,
            reordered: 0,
            retransmitted: 0,
        }
    }

    /// Starts the stream over once the ring is used up.
    fn rewind(&mut self) {
        self.pipeline.run_until_idle(u64::MAX);
        self.pipeline.clear_emitted();
        install(&mut self.pipeline, 0, &spec()).expect("connection installs");
        (self.next, self.held, self.acked, self.granted) = (0, None, 0, 0);
        (self.dupacks, self.recovering) = (0, false);
        self.now = self.pipeline.now();
    }

    /// The next segment to send.
    fn pick(&mut self) -> usize {
        if let Some(k) = self.held.take() {
            return k;
        }
        let k = self.next;
        self.next += 1;
        if self.next < RING && self.rng.next_unit() < self.swap {
            self.held = Some(k);
            self.reordered += 1;
            self.next += 1;
            return k + 1;
        }
        k
    }

    /// Reads the ACKs the pipeline sent.
    fn read_acks(&mut self) {
        let first = spec().rx_next_seq;
        for out in self.pipeline.emitted() {
            let Some(ack) = out.bytes.get(ACK_AT..ACK_AT + 4) else {
                continue;
            };
            if out.port != Port::Mac(0) {
                continue;
            }
            let ack = u32::from_be_bytes([ack[0], ack[1], ack[2], ack[3]]);
            let k = ack.wrapping_sub(first) as usize / PAYLOAD;
            if k > self.acked {
                (self.acked, self.dupacks, self.recovering) = (k, 0, false);
            } else if k == self.acked && k < self.next && !self.recovering {
                self.dupacks += 1;
                if self.dupacks >= 3 {
                    self.retransmitted += (self.next - k) as u64;
                    (self.next, self.held, self.recovering) = (k, None, true);
                }
            }
        }
        self.pipeline.clear_emitted();
    }

    fn send_one(&mut self) {
        if self.next >= RING && self.held.is_none() {
            self.rewind();
        }
        let k = self.pick();
        self.now += GAP_NS;
        self.sent += 1;
        let _ = self
            .pipeline
            .inject(self.now, Port::Mac(0), &self.segments[k]);
        if (self.acked - self.granted) * PAYLOAD >= BUFFER as usize / 4 {
            let rx_grant = ((self.acked - self.granted) * PAYLOAD) as u32;
            let sync = HostCommand::Sync { conn: 0, rx_grant };
            let _ = self.pipeline.inject(self.now, Port::Dma(0), &sync.emit());
            self.granted = self.acked;
        }
        if self.sent.is_multiple_of(16) {
            self.read_acks();
        }
    }

    /// Sends `n` segments; returns the CPU time that took.
    fn run(&mut self, n: u64) -> Duration {
        let start = thread_cpu_time().expect("thread CPU time");
        for _ in 0..n {
            self.send_one();
        }
        thread_cpu_time()
            .expect("thread CPU time")
            .saturating_sub(start)
    }
}

fn laminar(c: &mut Criterion) {
    let mut group = c.benchmark_group("laminar");
    group.throughput(Throughput::Elements(1));
    for (name, reordered) in [("in-order-64B", 0.0), ("reordered-10pct-64B", 0.1)] {
        let mut feed = Feed::new(reordered);
        group.bench_function(name, |b| b.iter_custom(|iters| feed.run(iters)));
        let c = feed.pipeline.counters();
        eprintln!(
            "{name}: {} segments sent, {:.1}% reordered, {:.1}% retransmitted; \
             egress {} packets ({} dropped by the program); mirror {} lost of {}",
            feed.sent,
            100.0 * feed.reordered as f64 / feed.sent as f64,
            100.0 * feed.retransmitted as f64 / feed.sent as f64,
            c.egress_processed,
            c.egress_dropped,
            c.mirror.lost_full + c.mirror.lost_random,
            c.mirror.offered
        );
    }
    group.finish();
}

criterion_group!(benches, laminar);
criterion_main!(benches);
