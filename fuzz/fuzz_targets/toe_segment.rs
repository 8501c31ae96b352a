//! Frames arriving at the toe data path: parsing never panics, and a
//! segment it accepts builds back into a frame that parses to the same
//! segment.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toe::segment::{build, parse, Frame, Header};

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
    assert_eq!(
        (again.route, again.seq, again.ack, again.payload),
        (s.route, s.seq, s.ack, s.payload)
    );
});
