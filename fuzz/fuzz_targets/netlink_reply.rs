//! A route netlink reply from the kernel (or anything claiming to be one):
//! splitting it into messages and decoding them never panics, whatever the
//! bytes, and every message is answered for one sequence number only.
#![no_main]

use host::netlink::{decode_messages, Decoded};
use libfuzzer_sys::fuzz_target;
use netlink_packet_route::RouteNetlinkMessage;

fuzz_target!(|data: &[u8]| {
    let Ok(all) = decode_messages::<RouteNetlinkMessage>(data, 1) else { return };
    let Ok(other) = decode_messages::<RouteNetlinkMessage>(data, 2) else { return };
    assert_eq!(all.len(), other.len(), "the same messages, whichever is asked for");
    for (a, b) in all.iter().zip(&other) {
        let skipped = |d: &Decoded<RouteNetlinkMessage>| matches!(d, Decoded::Skip);
        assert!(skipped(a) || skipped(b), "one message answers one sequence number");
    }
});
