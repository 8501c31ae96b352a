//! One direction of the wire: the rate limiter, the loss process and the
//! delay line, ordered by departure time.
//!
//! A frame arriving at `t` is first serialized at the link rate: it starts
//! when the link is free (`max(t, link_free)`) and ends `bytes * 8 / rate`
//! later; if more than `queue_frames` frames' worth of bytes wait, it is
//! dropped (overload); if `ecn_mark_frames` frames' worth wait and it is
//! ECN-capable, it is marked CE (DCTCP's instantaneous-queue marking at
//! threshold K). Its departure is that end plus a fresh draw of the
//! delay distribution. Departures go into a min-heap keyed by (departure,
//! arrival number), so frames leave in departure order, ties in arrival
//! order: reordering is exactly what independent per-frame delays imply,
//! whatever the wakeup jitter of the loop that sends them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use order::wire::ecn::{ecn, set_ecn, Ecn};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::impair::{Impairment, LossState};

/// Ethernet preamble, start delimiter, FCS and inter-frame gap: bytes a
/// frame occupies on a real link beyond what the socket sees.
const FRAMING_BYTES: u64 = 24;
/// A full-size frame, for turning `queue_frames` into bytes.
const MTU_FRAME: u64 = 1514;

/// Counters of one direction. `packets_in == packets_out + dropped_policy
/// + dropped_overload + queued` at any moment the loop is between steps.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct DirectionCounters {
    /// Frames read from the ingress device.
    pub packets_in: u64,
    pub bytes_in: u64,
    /// Frames handed to the egress device.
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Dropped by the loss process.
    pub dropped_policy: u64,
    /// Dropped because the rate limiter's queue or the delay line was full,
    /// the egress device refused it, or it was longer than a ring slot.
    pub dropped_overload: u64,
    /// In the wire now (rate queue or delay line).
    pub queued: u64,
    /// Frames the kernel dropped before the wire read them (ring full);
    /// not part of `packets_in`. `None` (JSON null) when the kernel's
    /// counter could not be read.
    pub ring_drops: Option<u64>,
    /// Frames delivered after a frame that arrived later (the reordering
    /// the delays caused).
    pub reordered: u64,
    /// Frames that arrived ECN-capable (ECT(0), ECT(1) or CE: RFC 3168
    /// section 5), before loss or the queue: whether a sender negotiated
    /// ECN, read from the wire and not from the sender's settings.
    pub ecn_capable: u64,
    /// ECN-capable frames marked Congestion Experienced.
    pub ce_marked: u64,
    /// The rate limiter's backlog seen by each arriving frame: how many
    /// arrivals were sampled, the sum and the largest backlog in bytes.
    pub queue_samples: u64,
    pub queue_bytes_sum: u64,
    pub queue_bytes_max: u64,
}

impl DirectionCounters {
    /// The mean backlog an arriving frame found, in full frames (MTU
    /// frame plus framing); None without a rate limit or arrivals.
    pub fn mean_queue_frames(&self) -> Option<f64> {
        (self.queue_samples > 0).then(|| {
            self.queue_bytes_sum as f64
                / self.queue_samples as f64
                / (MTU_FRAME + FRAMING_BYTES) as f64
        })
    }
}

#[derive(Debug)]
struct Held {
    departure_ns: u64,
    arrival_no: u64,
    buf: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.departure_ns, self.arrival_no) == (o.departure_ns, o.arrival_no)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.departure_ns, self.arrival_no).cmp(&(o.departure_ns, o.arrival_no))
    }
}

/// A frame due to leave: its bytes and when it should have left.
#[derive(Debug)]
pub struct Due {
    pub departure_ns: u64,
    pub buf: Vec<u8>,
}

/// One direction's state.
#[derive(Debug)]
pub struct Direction {
    imp: Impairment,
    rng: StdRng,
    loss: LossState,
    heap: BinaryHeap<Reverse<Held>>,
    link_free_ns: u64,
    last_arrival_ns: u64,
    arrivals: u64,
    /// Highest arrival number delivered so far (for `reordered`).
    max_delivered: Option<u64>,
    max_held: usize,
    pool: Vec<Vec<u8>>,
    pub counters: DirectionCounters,
}

impl Direction {
    /// `max_held` bounds the frames in the delay line (memory).
    pub fn new(imp: Impairment, seed: u64, max_held: usize) -> Self {
        Direction {
            imp,
            rng: StdRng::seed_from_u64(seed),
            loss: LossState::new(imp.loss),
            heap: BinaryHeap::new(),
            link_free_ns: 0,
            last_arrival_ns: 0,
            arrivals: 0,
            max_delivered: None,
            max_held,
            pool: Vec::new(),
            counters: DirectionCounters::default(),
        }
    }

    pub fn impairment(&self) -> &Impairment {
        &self.imp
    }

    /// Takes one frame that arrived at `t_ns`. Arrival times are clamped to
    /// be non-decreasing (kernel receive stamps from different CPUs can be
    /// a little out of ring order), so a constant delay never reorders.
    pub fn arrive(&mut self, frame: &[u8], t_ns: u64) {
        let t_ns = t_ns.max(self.last_arrival_ns);
        self.last_arrival_ns = t_ns;
        self.counters.packets_in += 1;
        self.counters.bytes_in += frame.len() as u64;
        self.counters.ecn_capable += u64::from(ecn(frame).is_some_and(Ecn::is_capable));
        if self.loss.lose(&mut self.rng) {
            self.counters.dropped_policy += 1;
            return;
        }
        let mut depart = t_ns;
        let mut congested = false;
        if let Some(rate) = std::num::NonZeroU64::new(self.imp.rate_bps) {
            let ns_per_byte = |bytes: u64| bytes * 8 * 1_000_000_000 / rate;
            let start = self.link_free_ns.max(t_ns);
            let limit_ns =
                ns_per_byte(u64::from(self.imp.queue_frames) * (MTU_FRAME + FRAMING_BYTES));
            let backlog =
                (u128::from(start - t_ns) * u128::from(rate.get()) / 8_000_000_000) as u64;
            self.counters.queue_samples += 1;
            self.counters.queue_bytes_sum += backlog;
            self.counters.queue_bytes_max = self.counters.queue_bytes_max.max(backlog);
            if start - t_ns > limit_ns {
                self.counters.dropped_overload += 1;
                return;
            }
            congested = self
                .imp
                .ecn_mark_frames
                .is_some_and(|k| backlog >= u64::from(k) * (MTU_FRAME + FRAMING_BYTES));
            self.link_free_ns = start + ns_per_byte(frame.len() as u64 + FRAMING_BYTES);
            depart = self.link_free_ns;
        }
        if self.heap.len() >= self.max_held {
            self.counters.dropped_overload += 1;
            return;
        }
        depart += self.imp.delay.sample(&mut self.rng);
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        if congested && ecn(&buf).is_some_and(Ecn::is_capable) {
            set_ecn(&mut buf, Ecn::Ce);
            self.counters.ce_marked += 1;
        }
        self.heap.push(Reverse(Held {
            departure_ns: depart,
            arrival_no: self.arrivals,
            buf,
        }));
        self.arrivals += 1;
        self.counters.queued = self.heap.len() as u64;
    }

    /// Counts a frame dropped before `arrive` (truncated in the ring).
    pub fn arrive_dropped(&mut self, bytes: usize) {
        self.counters.packets_in += 1;
        self.counters.bytes_in += bytes as u64;
        self.counters.dropped_overload += 1;
    }

    /// The earliest departure waiting.
    pub fn next_departure(&self) -> Option<u64> {
        self.heap.peek().map(|h| h.0.departure_ns)
    }

    /// Moves every frame due at `now_ns` (at most `max`) to `out`, in departure order.
    pub fn take_due(&mut self, now_ns: u64, max: usize, out: &mut Vec<Due>) {
        while out.len() < max {
            match self.heap.peek() {
                Some(h) if h.0.departure_ns <= now_ns => {}
                _ => break,
            }
            let Some(Reverse(h)) = self.heap.pop() else {
                break;
            };
            match self.max_delivered {
                Some(m) if h.arrival_no < m => self.counters.reordered += 1,
                _ => self.max_delivered = Some(h.arrival_no),
            }
            out.push(Due {
                departure_ns: h.departure_ns,
                buf: h.buf,
            });
        }
        self.counters.queued = self.heap.len() as u64;
    }

    /// Records the outcome of sending frames taken with `take_due`: `sent`
    /// of them went out, the rest were refused. Their buffers come back.
    pub fn sent(&mut self, due: &mut Vec<Due>, sent: usize) {
        let refused = due.len().saturating_sub(sent);
        self.counters.packets_out += sent as u64;
        self.counters.bytes_out += due
            .iter()
            .take(sent)
            .map(|d| d.buf.len() as u64)
            .sum::<u64>();
        self.counters.dropped_overload += refused as u64;
        for d in due.drain(..) {
            if self.pool.len() < 4096 {
                self.pool.push(d.buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impair::{Delay, Loss};

    fn frame(i: u32) -> Vec<u8> {
        let mut f = vec![0u8; 1000];
        f[..4].copy_from_slice(&i.to_be_bytes());
        f
    }

    fn id(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    #[test]
    fn constant_delay_keeps_order_and_counts_balance() {
        let imp = Impairment {
            delay: Delay::Constant { ns: 1000 },
            ..Impairment::default()
        };
        let mut d = Direction::new(imp, 1, 1 << 20);
        for i in 0..100 {
            d.arrive(&frame(i), u64::from(i) * 10);
        }
        let mut out = Vec::new();
        d.take_due(1000 + 495, usize::MAX, &mut out);
        assert_eq!(out.len(), 50);
        let ids: Vec<u32> = out.iter().map(|o| id(&o.buf)).collect();
        assert_eq!(ids, (0..50).collect::<Vec<_>>());
        d.sent(&mut out, 50);
        let c = d.counters;
        assert_eq!(
            c.packets_in,
            c.packets_out + c.dropped_policy + c.dropped_overload + c.queued
        );
        assert_eq!(c.reordered, 0);
    }

    #[test]
    fn independent_delays_reorder_exactly_as_drawn() {
        let imp = Impairment {
            delay: Delay::Normal {
                mean_ns: 2_500_000,
                sd_ns: 250_000,
            },
            ..Impairment::default()
        };
        // Replay the same draws to know the answer.
        let mut d = Direction::new(imp, 42, 1 << 20);
        let mut rng = StdRng::seed_from_u64(42);
        let mut expect: Vec<(u64, u32)> = (0..1000u32)
            .map(|i| {
                let t = u64::from(i) * 12_000;
                (t + imp.delay.sample(&mut rng), i)
            })
            .collect();
        for i in 0..1000u32 {
            d.arrive(&frame(i), u64::from(i) * 12_000);
        }
        expect.sort();
        let mut out = Vec::new();
        d.take_due(u64::MAX, usize::MAX, &mut out);
        let got: Vec<u32> = out.iter().map(|o| id(&o.buf)).collect();
        assert_eq!(got, expect.iter().map(|e| e.1).collect::<Vec<_>>());
        assert!(d.counters.reordered > 0);
    }

    #[test]
    fn rate_limit_spaces_and_drops_beyond_the_queue() {
        let imp = Impairment {
            rate_bps: 1_000_000_000,
            queue_frames: 10,
            loss: Loss::None,
            ..Impairment::default()
        };
        let mut d = Direction::new(imp, 1, 1 << 20);
        for i in 0..100 {
            d.arrive(&vec![0u8; 1514], 0);
            let _ = i;
        }
        // 10 frames' worth may wait, plus the one on the link.
        assert_eq!(d.counters.queued, 11);
        assert_eq!(d.counters.dropped_overload, 89);
        let mut out = Vec::new();
        d.take_due(u64::MAX, usize::MAX, &mut out);
        let deps: Vec<u64> = out.iter().map(|o| o.departure_ns).collect();
        // 1538 bytes at 1 Gbit/s = 12.304 us apart.
        assert_eq!(deps[1] - deps[0], 12_304);
    }

    /// An IPv4 TCP frame of 1514 bytes with the given ECN codepoint.
    fn ip_frame(codepoint: Ecn) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1, 2, 0, 100)
            .write(&mut f, &[0u8; 1460])
            .unwrap();
        set_ecn(&mut f, codepoint);
        f
    }

    #[test]
    fn ecn_capable_frames_are_marked_past_the_threshold_and_others_never() {
        let imp = Impairment {
            rate_bps: 1_000_000_000,
            queue_frames: 100,
            ecn_mark_frames: Some(5),
            ..Impairment::default()
        };
        let mut d = Direction::new(imp, 1, 1 << 20);
        // 20 ECT(0) frames at once: the first finds an idle link, the n-th
        // finds n - 1 frames' worth waiting (1514 + 24 bytes each).
        for _ in 0..20 {
            d.arrive(&ip_frame(Ecn::Ect0), 0);
        }
        for _ in 0..5 {
            d.arrive(&ip_frame(Ecn::NotEct), 0);
        }
        let mut out = Vec::new();
        d.take_due(u64::MAX, usize::MAX, &mut out);
        let marks: Vec<Ecn> = out.iter().map(|o| ecn(&o.buf).unwrap()).collect();
        let expect: Vec<Ecn> = (0..25)
            .map(|i| match i {
                0..=4 => Ecn::Ect0,
                5..=19 => Ecn::Ce,
                _ => Ecn::NotEct,
            })
            .collect();
        assert_eq!(marks, expect);
        assert_eq!(d.counters.ce_marked, 15);
        assert_eq!(d.counters.ecn_capable, 20);
        // The backlogs seen were 0, 1, ..., 24 frames: mean 12.
        assert_eq!(d.counters.mean_queue_frames(), Some(12.0));
        assert_eq!(d.counters.queue_bytes_max, 24 * 1538);
        // Without a threshold nothing is marked.
        let mut plain = Direction::new(
            Impairment {
                ecn_mark_frames: None,
                ..imp
            },
            1,
            1 << 20,
        );
        for _ in 0..20 {
            plain.arrive(&ip_frame(Ecn::Ect0), 0);
        }
        assert_eq!(plain.counters.ce_marked, 0);
        // Counted as capable whether or not the bottleneck marks.
        assert_eq!(plain.counters.ecn_capable, 20);
    }

    #[test]
    fn uniform_loss_drops_by_policy() {
        let imp = Impairment {
            loss: Loss::Uniform { p: 0.1 },
            ..Impairment::default()
        };
        let mut d = Direction::new(imp, 3, 1 << 20);
        for i in 0..10_000 {
            d.arrive(&frame(i), 0);
        }
        let c = d.counters;
        assert!(
            (900..1100).contains(&c.dropped_policy),
            "{}",
            c.dropped_policy
        );
        assert_eq!(c.packets_in, c.dropped_policy + c.queued);
    }
}
