//! Frames from captures or the wire: parsing never panics, and whatever it
//! returns yields a descriptor and a suitability verdict; rewriting a
//! frame's ECN field never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use order::wire::{ecn, parse, LinkType};

const LINKS: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::RawIp,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Null,
    LinkType::Loop,
];

// The first byte picks the link type, the rest is the frame.
fuzz_target!(|data: &[u8]| {
    let Some((&sel, frame)) = data.split_first() else { return };
    if let Ok(info) = parse(LINKS[usize::from(sel) % LINKS.len()], frame) {
        let _ = info.suitability();
        let _ = info.descriptor();
        let _ = info.flow();
    }
    // Rewriting the ECN field checks the headers first: never a panic.
    let mut copy = frame.to_vec();
    let _ = ecn::set_ecn(&mut copy, ecn::Ecn::Ce);
});
