//! Laminar's ingress (§5.2 ①-④): read-only, no register.

use crate::program::ActionIo;

use super::program::{workflow, PORT_DMA, PORT_MAC};
use super::segment::{flags, is_tx};

/// ① RX from the MAC, TX or SYNC from a DMA channel, SYNC from the generator.
pub(super) fn classify(io: &mut ActionIo<'_>) {
    let &[port, dma_type, tcp_flags] = io.reads else {
        return;
    };
    let wf = match port {
        PORT_MAC if tcp_flags & u64::from(flags::SYN | flags::FIN | flags::RST) != 0 => {
            workflow::EXCEPTION
        }
        PORT_MAC => workflow::RX,
        PORT_DMA if is_tx(dma_type as u8) => workflow::TX,
        PORT_DMA => workflow::SYNC_HOST,
        _ => workflow::SYNC_TIMER,
    };
    if wf == workflow::EXCEPTION {
        io.verdict.digest = true;
        io.verdict.drop = true;
    }
    io.writes[0] = wf;
}

/// ② An RX segment's 4-tuple found its connection.
pub(super) fn rx_connection(io: &mut ActionIo<'_>) {
    let &[wf, desc_conn] = io.reads else { return };
    io.writes[0] = if wf == workflow::RX {
        io.data[0]
    } else {
        desc_conn
    };
}

/// ② A miss: TX and SYNC name their connection; an RX segment of no
/// Laminar connection is not ours.
pub(super) fn from_descriptor(io: &mut ActionIo<'_>) {
    let &[wf, desc_conn] = io.reads else { return };
    if wf == workflow::RX {
        io.verdict.drop = true;
    }
    io.writes[0] = desc_conn;
}

/// ③ Sequence number to receive-buffer offset for RX, transmit-buffer
/// offset to sequence number for TX (§5.3.3). The buffer (a power of two)
/// is mapped twice in a row, so an address plus a segment's length never
/// needs splitting; the deparser adds the bytes trimmed in egress to the
/// offset, modulo the size.
pub(super) fn translate(io: &mut ActionIo<'_>) {
    let &[wf, seq, offset] = io.reads else { return };
    let &[rx_base_seq, rx_buf_addr, rx_buf_size, tx_base_seq] = io.data else {
        return;
    };
    let mask = rx_buf_size.saturating_sub(1);
    let (seg_seq, rx_offset) = match wf {
        workflow::RX => (
            seq,
            u64::from((seq as u32).wrapping_sub(rx_base_seq as u32)) & mask,
        ),
        workflow::TX => (
            u64::from((tx_base_seq as u32).wrapping_add(offset as u32)),
            0,
        ),
        _ => (0, 0),
    };
    io.writes
        .copy_from_slice(&[seg_seq, rx_buf_addr, rx_offset, mask]);
}

pub(super) fn unknown_connection(io: &mut ActionIo<'_>) {
    io.verdict.drop = true;
}

/// ④ The headers of what this connection sends, from the control plane.
pub(super) fn prebuild(io: &mut ActionIo<'_>) {
    io.writes.copy_from_slice(io.data);
}
