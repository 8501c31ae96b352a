//! What each stage costs, in the manner of thesis Table 2.2 (TAS's
//! per-request breakdown): time-stamp counter ticks spent in each stage of
//! the run-to-completion data path, and the segments it handled. On x86-64
//! the TSC runs at the nominal CPU frequency (constant_tsc), so ticks are
//! cycles at that frequency; elsewhere the counts are monotonic-clock
//! nanoseconds. A VM without hardware performance counters (this one) has
//! no other way to split the cost by stage.

/// Ticks per stage, cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, derive_more::AddAssign)]
pub struct StageCycles {
    /// Reading frames from the port and handing frames to it.
    pub netif: u64,
    /// Validation (checksums), connection lookup, summary.
    pub pre: u64,
    /// The protocol stage, receive and transmit.
    pub protocol: u64,
    /// Statistics, ACK and segment headers with timestamps.
    pub post: u64,
    /// Payload into the receive buffer and out of the transmit buffer.
    pub copy: u64,
    pub rx_segments: u64,
    pub tx_segments: u64,
}

/// What a tick is on this machine.
pub const UNIT: &str = if cfg!(target_arch = "x86_64") {
    "TSC ticks"
} else {
    "ns"
};

/// Now, in ticks.
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86-64 CPU and has no operands.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_advance() {
        let a = ticks();
        let mut x = 0u64;
        for i in 0..10_000 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(ticks() > a);
    }
}
