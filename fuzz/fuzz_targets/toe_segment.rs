//! Frames arriving at the toe data path: parsing never panics, and a
//! segment it accepts builds back into a frame that parses to the same
//! segment.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toe::segment::{build, parse, Flags, Frame, Header, Segment};

fuzz_target!(|data: &[u8]| {
    let Ok(Frame::Tcp(s)) = parse(data) else { return };
    let h = Header {
        seq: s.seq,
        ack: s.ack,
        flags: s.flags,
        window: s.window,
        options: s.options,
    };
    let mut out = Vec::new();
    build(&s.route, &h, s.payload, &mut out);
    let Ok(Frame::Tcp(again)) = parse(&out) else {
        panic!("a rebuilt segment does not parse")
    };
    // The acknowledgment number is one only with ACK set (RFC 9293
    // section 3.1): without it the field is not written again.
    let ack = |seg: &Segment| seg.flags.has(Flags::ACK).then_some(seg.ack);
    assert_eq!(
        (again.route, again.seq, ack(&again), again.payload),
        (s.route, s.seq, ack(&s), s.payload)
    );
});
