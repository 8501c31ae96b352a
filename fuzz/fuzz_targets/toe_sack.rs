//! SACK from a peer that may lie: the option bytes of a segment, then a
//! run of ACKs with any blocks against a sender in recovery.
//!
//! - Option parsing never panics, keeps at most four blocks, and a parsed
//!   option builds back into a frame with the same blocks (three beside a
//!   timestamp, RFC 2018 section 3).
//! - The scoreboard stays sorted, disjoint, inside SND.UNA..SND.MAX and
//!   within its bound; `pipe` never exceeds what is outstanding; no grant
//!   sends again bytes the scoreboard holds (RFC 6675), and every grant
//!   lies inside what was queued.
#![no_main]

use etherparse::PacketBuilder;
use libfuzzer_sys::fuzz_target;
use order::seq::distance;
use toe::protocol::{rx, timeout, tx, RxSummary};
use toe::sack::{SackBlocks, Scoreboard};
use toe::segment::{build, parse, Flags, Frame, Header};
use toe::state::ProtoState;

const ISS: u32 = u32::MAX - 40_000;

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (opts, acks) = rest.split_at((usize::from(n % 11) * 4).min(rest.len()) / 4 * 4);
    options(opts);
    scoreboard(acks);
});

fn options(raw: &[u8]) {
    let mut frame = Vec::new();
    let Ok(step) = PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1, 2, 3, 4)
        .options_raw(raw)
    else {
        return;
    };
    if step.write(&mut frame, &[]).is_err() {
        return;
    }
    let Ok(Frame::Tcp(s)) = parse(&frame) else {
        return;
    };
    assert!(s.options.sack.len() <= SackBlocks::MAX);
    let h = Header {
        seq: s.seq,
        ack: s.ack,
        flags: s.flags,
        window: s.window,
        options: s.options,
    };
    let mut again = Vec::new();
    build(&s.route, &h, &[], &mut again);
    let Ok(Frame::Tcp(t)) = parse(&again) else {
        panic!("a rebuilt SACK option does not parse")
    };
    let fit = if s.options.timestamp.is_some() { 3 } else { 4 };
    assert_eq!(t.options.sack, s.options.sack.truncated(fit));
}

// Each 24-byte record: cumulative ACK offset (u32), two blocks as
// (left, right) offsets (4 x u32), then an action byte (bit 0: queue and
// send, bit 1: a timeout) and three bytes unused.
fn scoreboard(records: &[u8]) {
    let mut s = ProtoState {
        seq: ISS,
        tx_high: ISS,
        remote_win: 1 << 20,
        ..ProtoState::default()
    };
    let mut queued = 0u32;
    for r in records.chunks_exact(24) {
        let w = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]) % 60_000;
        if r[20] & 1 == 1 && queued < 1 << 20 {
            s.tx_avail += 5000;
            queued += 5000;
        }
        if r[20] & 2 == 2 {
            timeout(&mut s);
        }
        while let Some(g) = tx(&mut s, 1000) {
            let end = g.seq.wrapping_add(g.len);
            assert!(distance(ISS, end) as u32 <= queued);
            for &(l, rr) in s.loss.scoreboard.blocks() {
                assert!(
                    distance(end, l) >= 0 || distance(rr, g.seq) >= 0,
                    "resent SACKed bytes"
                );
            }
        }
        let mut sack = SackBlocks::default();
        sack.push((ISS.wrapping_add(w(4)), ISS.wrapping_add(w(8))));
        sack.push((ISS.wrapping_add(w(12)), ISS.wrapping_add(w(16))));
        let ack = RxSummary {
            ack: ISS.wrapping_add(w(0)),
            flags: Flags(Flags::ACK),
            window: 1 << 20,
            sack,
            ..RxSummary::default()
        };
        rx(&mut s, &ack);
        let una = s.seq.wrapping_sub(s.tx_sent);
        let blocks = s.loss.scoreboard.blocks();
        assert!(blocks.len() <= Scoreboard::MAX);
        let mut at = una;
        for &(l, rr) in blocks {
            assert!(
                distance(at, l) >= 0 && distance(l, rr) > 0,
                "{blocks:?} from {una}"
            );
            at = rr;
        }
        assert!(distance(at, s.tx_high) >= 0);
        assert!(s.loss.pipe(s.sent()) <= s.tx_sent);
    }
}
