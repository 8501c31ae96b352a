//! An RssConfig file from anywhere: parsing never panics, and whatever parses
//! and validates also predicts without panicking and round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rss::{FlowTuple, L4Proto, RssConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(config) = RssConfig::from_json(text) else { return };
    let flow = FlowTuple::new(
        "10.0.0.1".parse().unwrap(), 1234, "10.0.0.2".parse().unwrap(), 80, L4Proto::Tcp,
    );
    let _ = config.place(&flow);
    assert_eq!(RssConfig::from_json(&config.to_json()).unwrap(), config);
});
