//! Laminar's egress stages 1-4: segment reassembly (§5.3.1).

use crate::program::ActionIo;

use super::program::{class, oow, seq_le, workflow, FROZEN};

/// Stage 1, `rx-next-seq` (§5.3.1.1): optimistically advance over the
/// in-order part of a segment; drop full duplicates, trim partial ones.
/// Pseudo segments take the same path (§5.3.1.5).
pub(super) fn rx_next_seq(io: &mut ActionIo<'_>) {
    let &[wf, seq, plen] = io.reads else { return };
    let next = io.registers[0] as u32;
    let (seq, plen) = (seq as u32, plen as u32);
    let (class, adv, trim, after) = if (wf == workflow::RX || wf == workflow::PSEUDO) && plen > 0 {
        let end = seq.wrapping_add(plen);
        if !seq_le(seq, next) {
            (class::OUT_OF_ORDER, 0, 0, next)
        } else if seq_le(end, next) {
            (class::DUPLICATE, 0, 0, next)
        } else {
            (
                class::IN_ORDER,
                end.wrapping_sub(next),
                next.wrapping_sub(seq),
                end,
            )
        }
    } else {
        (class::NONE, 0, 0, next)
    };
    io.registers[0] = u64::from(after);
    io.writes.copy_from_slice(&[
        u64::from(next),
        u64::from(after),
        class,
        u64::from(adv),
        u64::from(trim),
    ]);
}

/// Stage 2, `rx-avail`: shrink the window by what stage 1 took, even when it
/// turns out out of window, then check (deferred validation, §5.3.1.1). An
/// in-order segment beyond the window freezes the window and asks the
/// control plane to roll back (§5.3.1.2); until then every segment is out
/// of window. A host SYNC grows the window (§5.3.1.7).
pub(super) fn rx_window(io: &mut ActionIo<'_>) {
    let &[wf, class, adv, pre_next, seq, plen, grant] = io.reads else {
        return;
    };
    let avail = io.registers[0];
    let frozen = avail & FROZEN != 0;
    let room = avail & !FROZEN;
    let mut after = avail;
    let mut outcome = oow::NONE;
    match (wf, class) {
        (workflow::SYNC_HOST, _) => after = (avail & FROZEN) | (room + grant).min(FROZEN - 1),
        (_, class::IN_ORDER) if frozen => outcome = oow::ROLLBACK,
        (_, class::IN_ORDER) if adv > room => {
            outcome = oow::ROLLBACK;
            after = FROZEN;
            io.verdict.digest = true;
        }
        (_, class::IN_ORDER) => after = avail - adv,
        (_, class::OUT_OF_ORDER) => {
            let end = (seq as u32)
                .wrapping_add(plen as u32)
                .wrapping_sub(pre_next as u32);
            if frozen || u64::from(end) > room {
                outcome = oow::BEYOND;
            }
        }
        _ => {}
    }
    io.registers[0] = after;
    io.writes.copy_from_slice(&[avail, after, outcome]);
}

/// The offsets [start, end) of an out-of-order segment from `rx-next-seq`.
pub(super) fn ooo_offsets(pre_next: u64, seq: u64, plen: u64) -> (u64, u64) {
    let start = u64::from((seq as u32).wrapping_sub(pre_next as u32));
    (start, start + plen)
}

/// Stage 3, `rx-ooo-tail` (§5.3.1.3): an in-order segment moves the end of
/// the interval closer (it is an offset); an out-of-order one starts the
/// interval or extends its end when it overlaps or touches it.
pub(super) fn rx_ooo_tail(io: &mut ActionIo<'_>) {
    let &[class, outcome, adv, pre_next, seq, plen] = io.reads else {
        return;
    };
    let tail = io.registers[0];
    let (mut after, mut new, mut fits) = (tail, 0, 0);
    if outcome == oow::NONE {
        match class {
            class::IN_ORDER => after = tail.saturating_sub(adv),
            class::OUT_OF_ORDER => {
                let (start, end) = ooo_offsets(pre_next, seq, plen);
                if tail == 0 {
                    (after, new, fits) = (end, 1, 1);
                } else if start <= tail {
                    (after, fits) = (tail.max(end), 1);
                }
            }
            _ => {}
        }
    }
    io.registers[0] = after;
    io.writes.copy_from_slice(&[after, new, fits, tail]);
}

/// Stage 4, `rx-ooo-head`: the start of the interval, likewise. A segment
/// that leaves the interval starting at `rx-next-seq` (head 0) closed the
/// gap: a pseudo segment over [rx-next-seq, +tail) rides on its ACK mirror
/// to merge the interval in stages 1 and 2 (§5.3.1.5), and libTOE is told
/// at once that the data up to the tail is ready (§5.3.1.6). Out-of-order
/// segments that neither overlap nor touch the interval are dropped.
pub(super) fn rx_ooo_head(io: &mut ActionIo<'_>) {
    let &[wf, class, outcome, adv, pre_next, seq, plen, new, fits, tail, next, pre_tail] = io.reads
    else {
        return;
    };
    let head = io.registers[0];
    let mut after = head;
    let mut accept = false;
    if outcome == oow::NONE {
        match class {
            class::IN_ORDER => {
                after = if tail == 0 {
                    0
                } else {
                    head.saturating_sub(adv)
                };
                accept = true;
            }
            class::OUT_OF_ORDER => {
                let (start, end) = ooo_offsets(pre_next, seq, plen);
                if new == 1 {
                    (after, accept) = (start, true);
                } else if fits == 1 && end >= head {
                    (after, accept) = (head.min(start), true);
                }
            }
            _ => {}
        }
    }
    io.registers[0] = after;
    let rx = wf == workflow::RX;
    let gap_closed = accept && tail > 0 && after == 0;
    let (merge_seq, merge_len) = if rx && gap_closed {
        (next, tail)
    } else {
        (0, 0)
    };
    let notify = rx && accept && (class == class::IN_ORDER || gap_closed);
    let notify_seq =
        u64::from((next as u32).wrapping_add(if gap_closed { tail as u32 } else { 0 }));
    if rx && plen > 0 {
        io.verdict.mirror = true;
        io.verdict.drop = !accept;
    }
    // With the gap closed (head 0), the interval's bytes were announced to
    // libTOE and may be consumed already, their space granted back for
    // later data: a segment covering them again must not rewrite them.
    let present = match class {
        _ if !accept || head != 0 || pre_tail == 0 => 0,
        class::IN_ORDER => adv.min(pre_tail),
        _ => {
            let (start, _) = ooo_offsets(pre_next, seq, plen);
            plen.min(pre_tail.saturating_sub(start))
        }
    };
    io.writes.copy_from_slice(&[
        after,
        u64::from(accept),
        present,
        merge_seq,
        merge_len,
        u64::from(notify),
        notify_seq,
    ]);
}
