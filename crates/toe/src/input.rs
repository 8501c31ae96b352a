//! Parallel TCP input after OpenBSD (../shared/papers/
//! openbsd-parallel-tcp-slides.txt, "Parallel TCP Input, Socket Lock per
//! Thread", 2025): softnet threads each process a batch of segments from
//! their receive queue, and what differs is how they guard connection
//! state:
//!
//! - [`Locking::Exclusive`]: one lock over all connections, held for a
//!   whole batch (the exclusive net lock before parallel input);
//! - [`Locking::PerPacket`]: each connection's lock taken and released for
//!   every segment;
//! - [`Locking::PerFlowBatch`]: one connection's lock held across the
//!   consecutive segments of that connection in the batch (OpenBSD 7.8).
//!
//! Every mode does the same work per segment: the protocol stage
//! ([`crate::protocol::rx`]) and the copy of its payload into the
//! connection's receive buffer. [`run`] measures segments per second over
//! pre-built batches, flows spread over threads by hash as RSS would.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use crate::buffer::PayloadBuf;
use crate::protocol::{self, RxSummary};
use crate::segment::Flags;
use crate::state::ProtoState;

/// How connection state is guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Locking {
    Exclusive,
    PerPacket,
    PerFlowBatch,
}

impl Locking {
    pub const ALL: [Locking; 3] = [
        Locking::Exclusive,
        Locking::PerPacket,
        Locking::PerFlowBatch,
    ];
}

/// One connection's state: the protocol partition and its receive buffer.
struct Conn {
    state: ProtoState,
    rx: PayloadBuf,
    delivered: u64,
}

/// A segment as a softnet thread sees it.
#[derive(Clone, Copy)]
struct Seg {
    conn: usize,
    seq: u32,
}

/// The workload: `streams` connections, `segments` in-order segments of
/// `len` bytes each per connection, `threads` softnet threads, batches of
/// `batch` segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Workload {
    pub streams: usize,
    pub segments: u32,
    pub len: u32,
    pub threads: usize,
    pub batch: usize,
}

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct InputRun {
    pub locking: Locking,
    pub workload: Workload,
    /// Segments processed per second, all threads together.
    pub segments_per_s: f64,
    /// Bytes every connection delivered in order, summed: the check that
    /// all modes did the whole job.
    pub delivered: u64,
}

/// The batches of each thread: connection `c` arrives on thread
/// `c % threads` (its RSS queue), connections on one thread interleaved
/// in bursts of 4 segments, as a NIC queue mixes flows.
fn batches(w: &Workload) -> Vec<Vec<Vec<Seg>>> {
    (0..w.threads)
        .map(|t| {
            let mine: Vec<usize> = (0..w.streams).filter(|c| c % w.threads == t).collect();
            let mut order = Vec::new();
            for base in (0..w.segments).step_by(4) {
                for &conn in &mine {
                    for i in base..(base + 4).min(w.segments) {
                        order.push(Seg {
                            conn,
                            seq: i * w.len,
                        });
                    }
                }
            }
            order.chunks(w.batch.max(1)).map(<[Seg]>::to_vec).collect()
        })
        .collect()
}

fn process(conn: &mut Conn, seg: Seg, payload: &[u8]) {
    let out = protocol::rx(
        &mut conn.state,
        &RxSummary {
            seq: seg.seq,
            ack: 0,
            flags: Flags(Flags::PSH),
            window: 0,
            len: payload.len() as u32,
            ts_val: None,
            sack: Default::default(),
        },
    );
    if let Some(p) = out.place {
        conn.rx
            .write(p.pos, &payload[p.skip as usize..(p.skip + p.len) as usize]);
    }
    conn.delivered += u64::from(out.readable);
    // The application reads at once: the window stays open.
    conn.state.rx_avail += out.readable;
}

fn fresh(w: &Workload) -> Vec<Conn> {
    (0..w.streams)
        .map(|_| Conn {
            state: ProtoState {
                rx_avail: 1 << 20,
                ..ProtoState::default()
            },
            rx: PayloadBuf::new(1 << 20),
            delivered: 0,
        })
        .collect()
}

/// Runs the workload with `locking`; returns the rate.
pub fn run(locking: Locking, w: Workload) -> InputRun {
    let payload = vec![0x5au8; w.len as usize];
    let work = batches(&w);
    let total: usize = work.iter().flatten().map(Vec::len).sum();
    let start = Arc::new(Barrier::new(w.threads + 1));
    let (elapsed, delivered) = match locking {
        Locking::Exclusive => {
            let all = Arc::new(Mutex::new(fresh(&w)));
            let t = spawn(work, &start, &payload, {
                let all = all.clone();
                move |batch: &[Seg], payload: &[u8]| {
                    let mut conns = all.lock().expect("connections lock");
                    for &s in batch {
                        process(&mut conns[s.conn], s, payload);
                    }
                }
            });
            let e = t.join();
            let d = all
                .lock()
                .expect("connections lock")
                .iter()
                .map(|c| c.delivered)
                .sum();
            (e, d)
        }
        Locking::PerPacket | Locking::PerFlowBatch => {
            let conns: Arc<Vec<Mutex<Conn>>> =
                Arc::new(fresh(&w).into_iter().map(Mutex::new).collect());
            let per_flow = locking == Locking::PerFlowBatch;
            let t = spawn(work, &start, &payload, {
                let conns = conns.clone();
                move |batch: &[Seg], payload: &[u8]| {
                    if per_flow {
                        for run in batch.chunk_by(|a, b| a.conn == b.conn) {
                            let mut c = conns[run[0].conn].lock().expect("connection lock");
                            for &s in run {
                                process(&mut c, s, payload);
                            }
                        }
                    } else {
                        for &s in batch {
                            process(
                                &mut conns[s.conn].lock().expect("connection lock"),
                                s,
                                payload,
                            );
                        }
                    }
                }
            });
            let e = t.join();
            let d = conns
                .iter()
                .map(|c| c.lock().expect("connection lock").delivered)
                .sum();
            (e, d)
        }
    };
    InputRun {
        locking,
        workload: w,
        segments_per_s: total as f64 / elapsed,
        delivered,
    }
}

/// The softnet threads, started together.
struct Threads {
    handles: Vec<std::thread::JoinHandle<(Instant, Instant)>>,
    start: Arc<Barrier>,
}

impl Threads {
    /// Releases the threads; returns the seconds from the first thread's
    /// start to the last one's end (each thread reads the clock itself: the
    /// releasing thread may run only after they finished).
    fn join(self) -> f64 {
        self.start.wait();
        let spans: Vec<(Instant, Instant)> = self
            .handles
            .into_iter()
            .map(|h| h.join().expect("a softnet thread panicked"))
            .collect();
        let first = spans
            .iter()
            .map(|s| s.0)
            .min()
            .expect("at least one thread");
        let last = spans
            .iter()
            .map(|s| s.1)
            .max()
            .expect("at least one thread");
        (last - first).as_secs_f64()
    }
}

fn spawn<F>(work: Vec<Vec<Vec<Seg>>>, start: &Arc<Barrier>, payload: &[u8], f: F) -> Threads
where
    F: Fn(&[Seg], &[u8]) + Send + Sync + Clone + 'static,
{
    let handles = work
        .into_iter()
        .map(|mine| {
            let (start, f, payload) = (start.clone(), f.clone(), payload.to_vec());
            std::thread::spawn(move || {
                start.wait();
                let began = Instant::now();
                for batch in &mine {
                    f(batch, &payload);
                }
                (began, Instant::now())
            })
        })
        .collect();
    Threads {
        handles,
        start: start.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_delivers_every_byte_in_order() {
        for streams in [1, 10] {
            let w = Workload {
                streams,
                segments: 500,
                len: 100,
                threads: 2,
                batch: 32,
            };
            for l in Locking::ALL {
                let r = run(l, w);
                assert_eq!(r.delivered, streams as u64 * 500 * 100, "{l:?} {streams}");
                assert!(r.segments_per_s > 0.0);
            }
        }
    }

    #[test]
    fn flows_stay_on_their_thread_and_batches_mix_them() {
        let w = Workload {
            streams: 3,
            segments: 8,
            len: 1,
            threads: 2,
            batch: 5,
        };
        let b = batches(&w);
        assert!(b[0].iter().flatten().all(|s| s.conn % 2 == 0));
        assert!(b[1].iter().flatten().all(|s| s.conn == 1));
        assert_eq!(
            b[0][0].iter().map(|s| s.conn).collect::<Vec<_>>(),
            [0, 0, 0, 0, 2]
        );
    }
}
