//! The forwarder and the SRPIC driver run for a fixed time on the calling
//! thread (`steer wire run|srpic --seconds N`): the loop stops at the first
//! check of its stop flag after the time is up (the loops sleep at most
//! 20 ms between checks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{Driver, DriverStats, Wire, WireError, WireStats};

/// A stop flag that a timer thread sets after `after`.
fn stop_after(after: Duration) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        flag.store(true, Ordering::Relaxed);
    });
    stop
}

impl Wire {
    /// Forwards for `duration`, then returns the counters.
    pub fn run_for(&mut self, duration: Duration) -> Result<WireStats, WireError> {
        self.run(&stop_after(duration), None)
    }
}

impl Driver {
    /// Runs the receive path for `duration`, then returns the counters.
    pub fn run_for(&mut self, duration: Duration) -> Result<DriverStats, WireError> {
        self.run(&stop_after(duration), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_flag_is_set_after_the_time_and_not_before() {
        let start = Instant::now();
        let stop = stop_after(Duration::from_millis(50));
        assert!(!stop.load(Ordering::Relaxed));
        while !stop.load(Ordering::Relaxed) {
            assert!(start.elapsed() < Duration::from_secs(10), "never set");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(start.elapsed() >= Duration::from_millis(50));
    }
}
