//! Idle pipeline workers sleep until work comes, so a data path that
//! shares its cores with the application costs next to nothing while idle
//! (issue: the data path shares its core). A worker that found nothing to
//! do for a while naps; whoever hands it work (the control plane with a
//! frame or a request, another worker with a stage's output) wakes it.
//!
//! A wake can race with a worker going to sleep: the worker says it naps
//! first and then looks once more for work before it parks, and the waker
//! hands over the work first and then reads whether the worker naps. A
//! sequentially consistent fence on each side between the two steps makes
//! one of them see the other, whatever ordering the queue itself uses;
//! and `Thread::unpark` before `park` makes that park return at once.

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

/// The pipeline's longest nap: it keeps no timers of its own (the
/// control plane's drive it), so this only bounds a wake that went
/// missing.
pub const LONGEST_NAP: Duration = Duration::from_millis(50);

/// Rounds without work, yielding between them, before a worker naps.
pub const IDLE_ROUNDS: u32 = 4096;

/// One flag and thread handle per worker.
#[derive(Debug, Default)]
pub struct Naps {
    workers: Vec<Worker>,
    longest: Duration,
}

#[derive(Debug, Default)]
struct Worker {
    napping: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Naps {
    /// Naps for `workers` workers, each at most `longest`.
    pub fn new(workers: usize, longest: Duration) -> Arc<Naps> {
        Arc::new(Naps {
            workers: (0..workers).map(|_| Worker::default()).collect(),
            longest,
        })
    }

    /// Worker `i` is the calling thread (called once, as it starts).
    pub fn register(&self, i: usize) {
        let _ = self.workers[i].thread.set(std::thread::current());
    }

    /// Worker `i` has had nothing to do: it sleeps until woken, unless
    /// `look` (one more round of its stages) finds work first. Returns
    /// the work `look` found.
    pub fn nap(&self, i: usize, look: impl FnOnce() -> usize) -> usize {
        let w = &self.workers[i];
        w.napping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let work = look();
        if work == 0 {
            std::thread::park_timeout(self.longest);
        }
        w.napping.store(false, Ordering::SeqCst);
        work
    }

    /// Wakes every napping worker but `except` (work was just handed to
    /// the pipeline, or a worker produced output another may take).
    pub fn wake(&self, except: Option<usize>) {
        fence(Ordering::SeqCst);
        for (i, w) in self.workers.iter().enumerate() {
            if Some(i) != except && w.napping.load(Ordering::SeqCst) {
                if let Some(t) = w.thread.get() {
                    t.unpark();
                }
            }
        }
    }

    /// Wakes every worker, napping or not (to see the stop flag).
    pub fn wake_all(&self) {
        for t in self.workers.iter().filter_map(|w| w.thread.get()) {
            t.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    /// A worker napping on an empty queue takes each item handed to it
    /// long before its nap would end: every wake reaches it (naps of 10 s:
    /// one lost wake makes the run that long).
    #[test]
    fn every_wake_ends_a_nap() {
        const NAP: Duration = Duration::from_secs(10);
        let naps = Naps::new(1, NAP);
        let queued = Arc::new(AtomicUsize::new(0));
        let (n, q) = (naps.clone(), queued.clone());
        let worker = std::thread::spawn(move || {
            n.register(0);
            let mut naps_taken = 0;
            let mut taken = 0;
            while taken < 100 {
                let work = n.nap(0, || q.swap(0, Ordering::SeqCst));
                taken += work;
                naps_taken += usize::from(work == 0);
            }
            naps_taken
        });
        let start = Instant::now();
        for _ in 0..100 {
            queued.fetch_add(1, Ordering::SeqCst);
            naps.wake(None);
            std::thread::sleep(Duration::from_micros(200));
        }
        let naps_taken = worker.join().unwrap();
        assert!(naps_taken > 0, "the worker never napped");
        assert!(start.elapsed() < NAP, "a wake was lost");
    }
}
