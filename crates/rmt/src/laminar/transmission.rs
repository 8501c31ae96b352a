//! Laminar's egress stages 5-9: (re-)transmission (§5.3.2).

use crate::program::ActionIo;

use super::program::{class, seq_le, seq_lt, workflow, DUPACK_THRESHOLD};
use super::segment::flags;

/// Stage 5, `tx-next-ack` (§5.3.2.3 ①, §5.3.2.2 ①): advance on a new ACK,
/// note a duplicate; a TX segment wholly below it is stale.
pub(super) fn tx_next_ack_stage(io: &mut ActionIo<'_>) {
    let &[wf, ack, tcp_flags, plen, seq] = io.reads else {
        return;
    };
    let next_ack = io.registers[0] as u32;
    let (mut after, mut adv, mut dup, mut stale) = (next_ack, 0, 0, 0);
    match wf {
        workflow::RX if tcp_flags & u64::from(flags::ACK) != 0 => {
            let ack = ack as u32;
            if seq_lt(next_ack, ack) {
                (after, adv) = (ack, ack.wrapping_sub(next_ack));
            } else if ack == next_ack && plen == 0 {
                dup = 1;
            }
        }
        workflow::TX => stale = u64::from(seq_le((seq as u32).wrapping_add(plen as u32), next_ack)),
        _ => {}
    }
    io.registers[0] = u64::from(after);
    io.writes
        .copy_from_slice(&[u64::from(next_ack), u64::from(adv), dup, stale]);
}

/// Stage 6, `tx-dupack-cnt` (②): count duplicate ACKs, reset on a new one;
/// the third triggers fast retransmit.
pub(super) fn tx_dupack_cnt(io: &mut ActionIo<'_>) {
    let &[wf, dup, adv] = io.reads else { return };
    let count = io.registers[0];
    let mut fast = 0;
    if wf == workflow::RX {
        if dup == 1 {
            io.registers[0] = (count + 1).min(255);
            fast = u64::from(count + 1 == DUPACK_THRESHOLD);
        } else if adv > 0 {
            io.registers[0] = 0;
        }
    }
    io.writes[0] = fast;
}

/// Stage 7, `tx-avail` (③): bytes sent beyond `tx-next-ack`. An ACK for
/// more than was sent is out of window: the control plane resets the
/// connection. A TX segment beyond the window extends it.
pub(super) fn tx_avail_stage(io: &mut ActionIo<'_>) {
    let &[wf, adv, stale, seq, plen, pre_ack] = io.reads else {
        return;
    };
    let avail = io.registers[0];
    let (mut after, mut out_of_window) = (avail, 0);
    match wf {
        workflow::RX if adv > avail => {
            out_of_window = 1;
            io.verdict.digest = true;
        }
        workflow::RX => after = avail - adv,
        workflow::TX if stale == 0 => {
            let end = (seq as u32)
                .wrapping_add(plen as u32)
                .wrapping_sub(pre_ack as u32);
            after = avail.max(u64::from(end));
        }
        _ => {}
    }
    io.registers[0] = after;
    io.writes.copy_from_slice(&[out_of_window, after]);
}

/// Stage 8, `tx-credits` (④): the generator's SYNC grants credits, a TX
/// segment spends them (dropped when none are left), fast retransmit
/// halves them as TCP Reno halves its window.
pub(super) fn tx_credits_stage(io: &mut ActionIo<'_>) {
    let &[wf, stale, plen, fast, grant] = io.reads else {
        return;
    };
    let credits = io.registers[0];
    let (mut after, mut none_left) = (credits, 0);
    match wf {
        workflow::SYNC_TIMER => after = (credits + grant).min(u64::from(u32::MAX)),
        workflow::TX if stale == 0 && credits == 0 => none_left = 1,
        workflow::TX if stale == 0 => after = credits.saturating_sub(plen),
        workflow::RX if fast == 1 => after = credits / 2,
        _ => {}
    }
    io.registers[0] = after;
    io.writes.copy_from_slice(&[after, none_left]);
}

/// Stage 9, `tx-remote-avail` (⑤): the peer's window, taken only from ACKs
/// that reassembly found in order; a TX segment that would put more than
/// that in flight is dropped.
pub(super) fn tx_remote_avail(io: &mut ActionIo<'_>) {
    let &[wf, tcp_flags, window, wscale, class, seq, pre_next, stale, none_left, plen, pre_ack] =
        io.reads
    else {
        return;
    };
    let remote = io.registers[0];
    let (mut after, mut blocked) = (remote, 0);
    match wf {
        workflow::RX if tcp_flags & u64::from(flags::ACK) != 0 => {
            let in_order = class == class::IN_ORDER || (class == class::NONE && seq == pre_next);
            if in_order {
                after = window << wscale;
            }
        }
        workflow::TX if stale == 0 && none_left == 0 => {
            let in_flight = (seq as u32)
                .wrapping_add(plen as u32)
                .wrapping_sub(pre_ack as u32);
            blocked = u64::from(u64::from(in_flight) > remote);
        }
        _ => {}
    }
    if wf == workflow::TX {
        io.verdict.drop = stale == 1 || none_left == 1 || blocked == 1;
    }
    io.registers[0] = after;
    io.writes.copy_from_slice(&[after, blocked]);
}
