//! The forwarder: one thread moving frames between two devices through two
//! [`Direction`]s, in batches.
//!
//! Loop: read up to `budget` frames from each device's ring (arrival time =
//! the kernel's receive stamp), send every frame whose departure has come
//! (one `sendmmsg` per batch, in departure order), then sleep in `ppoll`
//! until the next departure or a new frame, with a timer slack of 1 ns.
//! The applied-delay error of a frame is the time its `sendmmsg` returned
//! minus its scheduled departure.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use order::wire::{parse, LinkType};
use order::FlowKey;
use pktio::{Port, PortConfig};
use serde::Serialize;

use crate::impair::Impairment;
use crate::runner::{prepare_thread, Runner, Snapshots, MAX_SLEEP};
use crate::sched::{Direction, DirectionCounters, Due};
use crate::stats::{Histogram, LatencySummary};
use crate::WireError;

/// A departure this close is sent now rather than slept for.
const SPIN_NS: u64 = 2_000;

/// What to forward, where, and how.
#[derive(Debug, Clone, Serialize)]
pub struct WireConfig {
    /// Network namespace of both devices (`None`: the caller's).
    pub netns: Option<String>,
    /// Device A (e.g. the one facing the sender).
    pub a_dev: String,
    /// Device B (e.g. the one facing the receiver).
    pub b_dev: String,
    /// Applied to frames from A to B.
    pub a_to_b: Impairment,
    /// Applied to frames from B to A.
    pub b_to_a: Impairment,
    pub seed: u64,
    /// Most frames read from one device per loop pass.
    pub budget: usize,
    /// Most frames in one direction's delay line.
    pub max_held: usize,
    /// Run the loop as SCHED_FIFO at this priority (0: normal scheduling).
    /// The wire stands for a separate machine; on a shared host a real-time
    /// loop keeps its departures on time while senders and receivers load
    /// the cores.
    pub realtime_priority: i32,
}

impl WireConfig {
    pub fn new(netns: Option<&str>, a_dev: &str, b_dev: &str) -> Self {
        WireConfig {
            netns: netns.map(str::to_string),
            a_dev: a_dev.to_string(),
            b_dev: b_dev.to_string(),
            a_to_b: Impairment::default(),
            b_to_a: Impairment::default(),
            seed: 1,
            budget: 256,
            max_held: 200_000,
            realtime_priority: 10,
        }
    }
}

/// Counters of one direction plus what the wire measured on it.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct DirectionStats {
    #[serde(flatten)]
    pub counters: DirectionCounters,
    /// Pure ACKs forwarded (TCP, no payload, no SYN/FIN/RST).
    pub pure_acks: u64,
    /// Pure ACKs that repeat their flow's previous ACK number: the
    /// duplicate ACKs the far end receives (RFC 5681 section 2, without the
    /// window check).
    pub dup_acks: u64,
    /// Actual minus scheduled departure, µs; `None` (JSON null) when no
    /// frame was scheduled.
    pub delay_error: Option<LatencySummary>,
    /// Frames per `sendmmsg` batch (mean); `None` when nothing was sent.
    pub mean_tx_batch: Option<f64>,
}

/// Both directions.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WireStats {
    pub a_to_b: DirectionStats,
    pub b_to_a: DirectionStats,
    pub elapsed_s: f64,
    /// Loop passes and sleeps.
    pub passes: u64,
    pub sleeps: u64,
}

impl WireStats {
    /// `in == out + dropped + queued` in both directions.
    pub fn balanced(&self) -> bool {
        [self.a_to_b.counters, self.b_to_a.counters]
            .iter()
            .all(|c| {
                c.packets_in == c.packets_out + c.dropped_policy + c.dropped_overload + c.queued
            })
    }
}

#[derive(Default)]
struct AckCounter {
    last: HashMap<FlowKey, u32>,
    pure: u64,
    dup: u64,
}

impl AckCounter {
    fn see(&mut self, frame: &[u8]) {
        let Ok(info) = parse(LinkType::Ethernet, frame) else {
            return;
        };
        let Some(t) = info.tcp() else {
            return;
        };
        let f = t.flags;
        // SYN 0x02, FIN 0x01, RST 0x04, ACK 0x10
        if t.payload_len != 0 || f.0 & 0x07 != 0 || f.0 & 0x10 == 0 {
            if let Some(flow) = info.flow() {
                if f.0 & 0x10 != 0 {
                    self.last.insert(flow, t.ack);
                }
            }
            return;
        }
        let Some(flow) = info.flow() else {
            return;
        };
        self.pure += 1;
        if self.last.len() > 65_536 {
            self.last.clear();
        }
        if self.last.insert(flow, t.ack) == Some(t.ack) {
            self.dup += 1;
        }
    }
}

struct Side {
    dir: Direction,
    error: Histogram,
    acks: AckCounter,
    tx_batches: u64,
    tx_frames: u64,
}

impl Side {
    fn stats(&self) -> DirectionStats {
        DirectionStats {
            counters: self.dir.counters,
            pure_acks: self.acks.pure,
            dup_acks: self.acks.dup,
            delay_error: self.error.summary(),
            mean_tx_batch: (self.tx_batches > 0)
                .then(|| self.tx_frames as f64 / self.tx_batches as f64),
        }
    }
}

/// An open wire, ready to run.
pub struct Wire {
    cfg: WireConfig,
    ports: [Port; 2],
    sides: [Side; 2],
    passes: u64,
    sleeps: u64,
    started_ns: u64,
}

impl Wire {
    /// Opens both devices (root).
    pub fn open(cfg: &WireConfig) -> Result<Wire, WireError> {
        if cfg.budget == 0 || cfg.max_held == 0 {
            return Err(WireError::Config(
                "budget and max_held must be at least 1".into(),
            ));
        }
        let pc = PortConfig::default();
        let netns = cfg.netns.as_deref();
        let a = Port::open(&cfg.a_dev, netns, &pc)?;
        let b = Port::open(&cfg.b_dev, netns, &pc)?;
        let side = |imp: Impairment, seed: u64| Side {
            dir: Direction::new(imp, seed, cfg.max_held),
            error: Histogram::default(),
            acks: AckCounter::default(),
            tx_batches: 0,
            tx_frames: 0,
        };
        Ok(Wire {
            cfg: cfg.clone(),
            ports: [a, b],
            sides: [
                side(cfg.a_to_b, cfg.seed),
                side(cfg.b_to_a, cfg.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 1),
            ],
            passes: 0,
            sleeps: 0,
            started_ns: pktio::now_ns(),
        })
    }

    pub fn stats(&mut self) -> WireStats {
        for (i, side) in self.sides.iter_mut().enumerate() {
            side.dir.counters.ring_drops = self.ports[i].kernel_drops().ok();
        }
        WireStats {
            a_to_b: self.sides[0].stats(),
            b_to_a: self.sides[1].stats(),
            elapsed_s: (pktio::now_ns() - self.started_ns) as f64 / 1e9,
            passes: self.passes,
            sleeps: self.sleeps,
        }
    }

    /// Forwards until `stop` is set; `snapshot`, if given, is refreshed
    /// every 50 ms.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        snapshot: Option<&Mutex<WireStats>>,
    ) -> Result<WireStats, WireError> {
        prepare_thread(self.cfg.realtime_priority)?;
        self.started_ns = pktio::now_ns();
        let mut due: Vec<Due> = Vec::with_capacity(self.cfg.budget);
        let mut snapshots = Snapshots::new(snapshot, self.started_ns);
        while !stop.load(Ordering::Relaxed) {
            self.passes += 1;
            // Receive: side i reads port i and feeds direction i.
            for i in 0..2 {
                let side = &mut self.sides[i];
                self.ports[i].recv_batch(self.cfg.budget, |f| {
                    if f.truncated() {
                        side.dir.arrive_dropped(f.wire_len as usize);
                    } else {
                        side.dir.arrive(f.data, f.rx_ns);
                    }
                });
            }
            // Transmit: direction i leaves through the other port.
            let now = pktio::now_ns();
            for i in 0..2 {
                loop {
                    self.sides[i]
                        .dir
                        .take_due(now + SPIN_NS, self.cfg.budget, &mut due);
                    if due.is_empty() {
                        break;
                    }
                    let sent = self.ports[1 - i]
                        .send_batch(&due.iter().map(|d| d.buf.as_slice()).collect::<Vec<_>>())?;
                    let t = pktio::now_ns();
                    let side = &mut self.sides[i];
                    side.tx_batches += 1;
                    side.tx_frames += due.len() as u64;
                    for d in due.iter().take(sent) {
                        side.error.record(t.saturating_sub(d.departure_ns));
                        side.acks.see(&d.buf);
                    }
                    side.dir.sent(&mut due, sent);
                }
            }
            let now = pktio::now_ns();
            snapshots.tick(now, || self.stats());
            if self.ports.iter().any(Port::has_frames) {
                continue;
            }
            let next = self
                .sides
                .iter()
                .filter_map(|s| s.dir.next_departure())
                .min();
            let timeout = match next {
                Some(t) if t <= now + SPIN_NS => continue,
                Some(t) => Duration::from_nanos(t - now).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            self.sleeps += 1;
            pktio::wait_readable(&[&self.ports[0], &self.ports[1]], Some(timeout))?;
        }
        Ok(snapshots.last(self.stats()))
    }
}

/// A wire running on its own thread.
pub struct WireHandle(Runner<WireStats>);

impl WireHandle {
    /// Opens the wire here (errors come back at once), then runs it on a thread.
    pub fn spawn(cfg: &WireConfig) -> Result<WireHandle, WireError> {
        let mut wire = Wire::open(cfg)?;
        let runner = Runner::spawn("wire", "spawn the wire thread", move |stop, snapshot| {
            wire.run(stop, Some(snapshot))
        })?;
        Ok(WireHandle(runner))
    }

    /// The latest snapshot (at most 50 ms old).
    pub fn stats(&self) -> WireStats {
        self.0.stats()
    }

    /// Stops the loop and returns the final counters.
    pub fn stop(mut self) -> Result<WireStats, WireError> {
        self.0.finish()
    }
}
