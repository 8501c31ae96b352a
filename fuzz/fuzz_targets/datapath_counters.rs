//! The text the experiments read counters from (/proc/net/softnet_stat
//! for `steer exp xdp-overhead`, /proc/net/snmp and netstat for `steer exp
//! srpic`; the devices' and qdiscs' counters come over route netlink,
//! fuzzed by `netlink_reply`): parsing arbitrary text never panics.
#![no_main]

use exp::xdp_overhead::counters;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = counters::parse_softnet_dropped(text);
    let _ = host::snmp::parse(text);
});
