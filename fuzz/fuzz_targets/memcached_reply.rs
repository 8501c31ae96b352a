//! What memcached answers `steer exp apps`' load client (its text
//! protocol's storage, retrieval and error replies): parsing arbitrary
//! bytes never panics, and a reply is self-delimiting: it takes at least
//! one byte and at most all, and parses the same from exactly those.
#![no_main]

use exp::apps::memcached::parse_reply;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((reply, used))) = parse_reply(data) {
        assert!(0 < used && used <= data.len(), "{used} of {}", data.len());
        assert_eq!(parse_reply(&data[..used]), Ok(Some((reply, used))));
    }
});
