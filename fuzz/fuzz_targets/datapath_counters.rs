//! The outputs `steer exp xdp-overhead` reads its drop counters from
//! (`tc -s -j qdisc`, /proc/net/softnet_stat; the devices' own counters
//! come over netlink, fuzzed by `netlink_reply`): parsing
//! arbitrary text never panics.
#![no_main]

use exp::xdp_overhead::counters;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = counters::parse_qdisc(text);
    let _ = counters::parse_softnet_dropped(text);
});
