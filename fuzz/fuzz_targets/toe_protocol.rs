//! Segments in any order, with any flags, sequence and acknowledgement
//! numbers, through the protocol stage: it never panics (the fuzz build
//! checks overflow), the out-of-order intervals stay inside the receive
//! window and within their bound, and what it makes readable never exceeds
//! what it placed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toe::ooo::{OooBound, OooIntervals};
use toe::protocol::{rx, tx, RxSummary};
use toe::segment::Flags;
use toe::state::ProtoState;

// Each 12-byte record: seq offset (u32), ack offset (u32), length (u16),
// flags (u8), and whether the application queues data first (u8, bit 0).
// Bits 1-2 of the first record's last byte choose the receiver's bound of
// out-of-order intervals (0 keeps the default, one).
fuzz_target!(|data: &[u8]| {
    let bound = match data.get(11).map_or(0, |b| (b >> 1) & 3) {
        0 => OooBound::Intervals(1),
        1 => OooBound::Intervals(0),
        2 => OooBound::Intervals(2),
        _ => OooBound::Unbounded,
    };
    let mut s = ProtoState {
        ooo: OooIntervals::new(bound),
        seq: 1_000,
        tx_high: 1_000,
        ack: 5_000,
        rx_avail: 65_536,
        remote_win: 65_536,
        ..ProtoState::default()
    };
    for r in data.chunks_exact(12) {
        let word = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
        if r[11] & 1 == 1 && s.tx_avail < 1 << 20 {
            s.tx_avail += 3000;
            while tx(&mut s, 1448).is_some() {}
        }
        let before = s.rx_avail;
        let out = rx(
            &mut s,
            &RxSummary {
                seq: 5_000u32.wrapping_add(word(0) % 200_000),
                ack: 1_000u32.wrapping_add(word(4) % 200_000),
                flags: Flags(r[10]),
                window: 65_536,
                len: u32::from(u16::from_le_bytes([r[8], r[9]])) % 3000,
                ts_val: None,
                sack: Default::default(),
            },
        );
        assert!(out.readable <= before);
        if let OooBound::Intervals(n) = bound {
            assert!(s.ooo.len() <= usize::from(n));
        }
        for i in s.ooo.iter() {
            let lo = i.start.wrapping_sub(s.ack);
            assert!(lo > 0 && lo as u64 + u64::from(i.len) <= u64::from(s.rx_avail));
        }
        // The application reads everything (host control *Win*).
        s.rx_avail += out.readable;
    }
});
