//! The load balancer's trace (pcap or pcapng, through order's reader and
//! parser) on arbitrary bytes: never panics, and whatever it keeps can be
//! replayed and placed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = lb::Trace::parse(data) {
        assert!(!trace.packets.is_empty());
        assert!(trace.packets.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        assert_eq!(trace.stats.kept(), trace.packets.len());
        let _ = lb::sim::Replay::new(&trace, 1.0, 2, 1_000_000_000);
    }
});
