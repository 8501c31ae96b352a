//! Randomised equivalence: a sender pushes a byte stream through loss,
//! reordering and duplication into a Laminar receiver whose mirror path
//! also loses pseudo segments. The stream the application reads is always
//! a prefix of what a simple reference reassembler (every byte that
//! arrived, unbounded out-of-order state) delivers, equals it once the
//! sender has retransmitted everything, and the receive state keeps its
//! invariants after every packet the pipeline processes.

use proptest::prelude::*;

use rmt::channel::{ChannelConfig, Loss};
use rmt::laminar::example::table_5_1_connection;
use rmt::laminar::program::{register, LaminarConfig, FROZEN};
use rmt::laminar::receiver::Receiver;
use rmt::laminar::ConnectionSpec;
use rmt::PipelineConfig;

const FIRST_SEQ: u32 = 0xffff_f000; // wraps 2^32 within the stream
const BUFFER: u32 = 2048;

/// What the network does to one transmission.
#[derive(Debug, Clone)]
struct Fate {
    /// Go back to the first unacknowledged byte before sending.
    go_back: bool,
    lost: bool,
    duplicated: bool,
    /// Held back for this many later transmissions (reordering).
    delay: usize,
    /// Send one segment reaching past the advertised window (a misbehaving
    /// sender): out of window, rolled back by the control plane.
    beyond_window: bool,
    gap_ns: u64,
}

fn fate() -> impl Strategy<Value = Fate> {
    (
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.05),
        prop_oneof![8 => Just(0usize), 2 => 1usize..5],
        prop::bool::weighted(0.05),
        10u64..400,
    )
        .prop_map(
            |(go_back, lost, duplicated, delay, beyond_window, gap_ns)| Fate {
                go_back,
                lost,
                duplicated,
                delay,
                beyond_window,
                gap_ns,
            },
        )
}

/// The reference: every byte that arrived, delivered up to the first hole.
struct Reference {
    have: Vec<bool>,
}

impl Reference {
    fn add(&mut self, start: usize, len: usize) {
        self.have[start..start + len]
            .iter_mut()
            .for_each(|b| *b = true);
    }

    fn delivered(&self) -> usize {
        self.have.iter().position(|b| !b).unwrap_or(self.have.len())
    }
}

fn spec() -> ConnectionSpec {
    ConnectionSpec {
        rx_next_seq: FIRST_SEQ,
        rx_buffer_size: BUFFER,
        rx_avail: BUFFER,
        ..table_5_1_connection()
    }
}

/// The receive-state invariants (§5.3.1), read from the registers.
fn check_invariants(r: &Receiver, stream: &[u8]) {
    let read = |name| r.pipeline.register_read(name, 0).unwrap();
    let next = read(register::RX_NEXT_SEQ) as u32;
    let avail = read(register::RX_AVAIL);
    let (tail, head) = (read(register::RX_OOO_TAIL), read(register::RX_OOO_HEAD));
    assert!(head <= tail, "head {head} beyond tail {tail}");
    assert!(tail > 0 || head == 0, "no interval but head {head}");
    if avail & FROZEN == 0 {
        // The window's right edge moves only by SYNC grants.
        let taken = u64::from(next.wrapping_sub(FIRST_SEQ));
        assert_eq!(
            taken + avail,
            u64::from(BUFFER) + r.granted,
            "right edge moved"
        );
        assert!(
            tail <= avail,
            "interval end {tail} beyond the window {avail}"
        );
        // libTOE was told data is ready from rx-next-seq up to at most the
        // interval's end (while a rollback is pending, rx-next-seq is not
        // yet restored).
        let ready = u64::from(r.host.ready().wrapping_sub(next));
        assert!(
            ready <= tail,
            "ready {ready} bytes past rx-next-seq, interval ends at {tail}"
        );
    }
    if let Some(at) = r.delivered.iter().zip(stream).position(|(a, b)| a != b) {
        panic!(
            "delivered byte {at} differs ({} delivered)",
            r.delivered.len()
        );
    }
}

fn run(stream: Vec<u8>, mss: usize, fates: Vec<Fate>, mirror_loss: f64, seed: u64, latency: u64) {
    let config = PipelineConfig {
        mirror: ChannelConfig {
            latency_ns: latency,
            capacity: 64,
            loss: Loss::Random {
                probability: mirror_loss,
                seed,
            },
        },
        ..PipelineConfig::default()
    };
    let mut r = Receiver::new(config, LaminarConfig::default(), spec()).unwrap();
    let mut reference = Reference {
        have: vec![false; stream.len()],
    };
    let (mut una, mut nxt, mut window) = (0usize, 0usize, BUFFER as usize);
    let mut acks_seen = 0;
    let mut held: Vec<(usize, usize, usize)> = Vec::new(); // (release at, start, len)
    let mut t = 0u64;
    let check = |r: &Receiver| check_invariants(r, &stream);

    let deliver =
        |r: &mut Receiver, reference: &mut Reference, t: u64, start: usize, len: usize| {
            let seq = FIRST_SEQ.wrapping_add(start as u32);
            let bytes = r.segment(seq, &stream[start..start + len]);
            r.receive(t, &bytes).unwrap();
            reference.add(start, len);
        };

    for (i, f) in fates.into_iter().enumerate() {
        t += f.gap_ns;
        if f.go_back || nxt >= stream.len() {
            nxt = una;
        }
        let window_end = (una + window).min(stream.len());
        let len = if f.beyond_window {
            // One segment running a full MSS past the window.
            (window_end + mss).min(stream.len()).saturating_sub(nxt)
        } else {
            mss.min(window_end.saturating_sub(nxt))
        };
        if len > 0 {
            let start = nxt;
            nxt += len;
            if !f.lost {
                let copies = if f.duplicated { 2 } else { 1 };
                for _ in 0..copies {
                    held.push((i + f.delay, start, len));
                }
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = held.into_iter().partition(|(at, _, _)| *at <= i);
        held = later;
        for (_, start, len) in due {
            deliver(&mut r, &mut reference, t, start, len);
        }
        r.run_to(t, check).unwrap();
        for ack in &r.sent[acks_seen..] {
            let acked = ack.ack.wrapping_sub(FIRST_SEQ) as usize;
            if acked > una && acked <= stream.len() {
                una = acked;
                nxt = nxt.max(una);
            }
            window = usize::from(ack.window);
        }
        acks_seen = r.sent.len();
        assert!(reference.delivered() >= r.delivered.len());
    }
    for (_, start, len) in std::mem::take(&mut held) {
        t += 100;
        deliver(&mut r, &mut reference, t, start, len);
    }
    r.settle(check).unwrap();
    t = r.pipeline.now();

    // Retransmit everything from the first unacknowledged byte, without
    // loss on the wire (the mirror path still loses), until all is read.
    for _round in 0..4 * stream.len() / mss + 64 {
        if r.delivered.len() == stream.len() {
            break;
        }
        let start_una = una.min(r.delivered.len());
        let mut at = start_una;
        while at < stream.len() && at < start_una + BUFFER as usize / 2 {
            let len = mss.min(stream.len() - at);
            t += 50;
            deliver(&mut r, &mut reference, t, at, len);
            at += len;
        }
        r.settle(check).unwrap();
        t = r.pipeline.now();
        for ack in &r.sent[acks_seen..] {
            let acked = ack.ack.wrapping_sub(FIRST_SEQ) as usize;
            if acked > una && acked <= stream.len() {
                una = acked;
            }
        }
        acks_seen = r.sent.len();
    }
    assert_eq!(reference.delivered(), stream.len());
    assert_eq!(
        r.delivered.len(),
        stream.len(),
        "the receiver delivered everything"
    );
    assert!(r.delivered == stream, "delivered stream differs");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_delivered_stream_equals_the_reference_reassemblers(
        stream in prop::collection::vec(any::<u8>(), 1..20_000),
        mss in 1usize..700,
        fates in prop::collection::vec(fate(), 0..1500),
        mirror_loss in prop_oneof![Just(0.0), 0.0f64..0.5],
        seed in any::<u64>(),
        latency in 20u64..800,
    ) {
        run(stream, mss, fates, mirror_loss, seed, latency);
    }
}

#[test]
fn a_lossy_reordering_run_losing_half_the_pseudo_segments_delivers_everything() {
    let stream: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 256) as u8).collect();
    let fates = (0..400)
        .map(|i| Fate {
            go_back: i % 37 == 0,
            lost: i % 5 == 1,
            duplicated: i % 11 == 0,
            delay: if i % 7 == 0 { 3 } else { 0 },
            beyond_window: i % 97 == 50,
            gap_ns: 120,
        })
        .collect();
    run(stream, 300, fates, 0.5, 1, 300);
}
