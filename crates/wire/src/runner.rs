//! What the forwarder ([`crate::forward`]) and the SRPIC driver
//! ([`crate::driver`]) share around their loops: the thread setup, the
//! stats snapshot refreshed while the loop runs, and the handle that runs a
//! loop on its own thread and stops it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::WireError;

/// Longest sleep, so a stop request is seen.
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(20);
/// How often the shared snapshot is refreshed.
const SNAPSHOT_NS: u64 = 50_000_000;

/// Prepares the calling thread for a loop that sleeps in `ppoll` until a
/// deadline: a timer slack of 1 ns so it wakes on time, and SCHED_FIFO at
/// `realtime_priority` (0: normal scheduling) so loaded cores do not delay it.
pub(crate) fn prepare_thread(realtime_priority: i32) -> Result<(), WireError> {
    pktio::set_timer_slack_ns(1)?;
    if realtime_priority > 0 {
        pktio::set_realtime_priority(realtime_priority)?;
    }
    Ok(())
}

/// A loop's stats published to its handle every 50 ms and once at the end.
pub(crate) struct Snapshots<'a, S> {
    target: Option<&'a Mutex<S>>,
    next_ns: u64,
}

impl<'a, S: Clone> Snapshots<'a, S> {
    pub(crate) fn new(target: Option<&'a Mutex<S>>, now_ns: u64) -> Self {
        Snapshots {
            target,
            next_ns: now_ns + SNAPSHOT_NS,
        }
    }

    /// Publishes `stats()` if there is a target and the last snapshot is
    /// 50 ms old; `stats` is not called otherwise (it is not free).
    pub(crate) fn tick(&mut self, now_ns: u64, stats: impl FnOnce() -> S) {
        if let Some(s) = self.target {
            if now_ns >= self.next_ns {
                self.next_ns = now_ns + SNAPSHOT_NS;
                let st = stats();
                if let Ok(mut g) = s.lock() {
                    *g = st;
                }
            }
        }
    }

    /// Publishes the final stats and returns them.
    pub(crate) fn last(&self, st: S) -> S {
        if let Some(s) = self.target {
            if let Ok(mut g) = s.lock() {
                *g = st.clone();
            }
        }
        st
    }
}

/// A loop running on its own thread until stopped (or dropped).
pub(crate) struct Runner<S: Clone + Default + Send + 'static> {
    stop: Arc<AtomicBool>,
    snapshot: Arc<Mutex<S>>,
    thread: Option<JoinHandle<Result<S, WireError>>>,
}

impl<S: Clone + Default + Send + 'static> Runner<S> {
    /// Starts thread `name` running `body(stop, snapshot)`; `op` names the
    /// spawn in its error.
    pub(crate) fn spawn(
        name: &str,
        op: &str,
        body: impl FnOnce(&AtomicBool, &Mutex<S>) -> Result<S, WireError> + Send + 'static,
    ) -> Result<Runner<S>, WireError> {
        let stop = Arc::new(AtomicBool::new(false));
        let snapshot = Arc::new(Mutex::new(S::default()));
        let (s, snap) = (stop.clone(), snapshot.clone());
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(&s, &snap))
            .map_err(|e| WireError::Io {
                op: op.into(),
                source: e,
            })?;
        Ok(Runner {
            stop,
            snapshot,
            thread: Some(thread),
        })
    }

    /// The latest snapshot (at most 50 ms old). A loop that panicked while
    /// publishing leaves its last snapshot, never zeros in its place.
    pub(crate) fn stats(&self) -> S {
        match self.snapshot.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Stops the loop and returns its final stats (a panic in the loop
    /// goes on in the caller).
    pub(crate) fn finish(&mut self) -> Result<S, WireError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => match t.join() {
                Ok(r) => r,
                Err(p) => std::panic::resume_unwind(p),
            },
            None => Ok(self.stats()),
        }
    }
}

impl<S: Clone + Default + Send + 'static> Drop for Runner<S> {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}
