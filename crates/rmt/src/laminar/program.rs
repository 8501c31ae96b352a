//! Laminar's transport logic (thesis §5.2, §5.3) as a program for the
//! emulator.
//!
//! Ingress is read-only (§5.2): ① classify RX / TX / SYNC, ② look up the
//! connection, ③ translate between sequence numbers and buffer addresses
//! (§5.3.3), ④ prebuild the outgoing headers. Egress holds all mutable
//! state, one register per stage, in the order of Table 5.1 and §5.3.2:
//! reassembly 1 `rx-next-seq`, 2 `rx-avail`, 3 `rx-ooo-tail`,
//! 4 `rx-ooo-head`, then (re-)transmission 5 `tx-next-ack`,
//! 6 `tx-dupack-cnt`, 7 `tx-avail`, 8 `tx-credits`, 9 `tx-remote-avail`.
//!
//! Sequence numbers are 32-bit and compared modulo 2^32 (RFC 9293 §3.4).
//! `rx-ooo-tail` and `rx-ooo-head` are offsets from `rx-next-seq`: the
//! out-of-order interval is [next + head, next + tail), none when tail is 0.

use crate::phv::FieldId;
use crate::pktgen;
use crate::program::{
    ActionDecl, ActionIo, Emitted, ParseError, ParserOut, Port, Program, ProgramBuilder, StageDecl,
    TableDecl,
};
use crate::Phv;

use super::fields::*;
use super::segment::{
    flags, is_tx, parse_command, parse_tcp, rx_data_record, HostEvent, TcpSegment, COMMAND_LEN,
};

/// The workflow a packet follows (§5.2), plus the two kinds the pipeline
/// makes itself.
pub mod workflow {
    /// A segment from the network.
    pub const RX: u64 = 1;
    /// Payload pushed by libTOE.
    pub const TX: u64 = 2;
    /// libTOE replenishes the receive window (§5.3.1.7).
    pub const SYNC_HOST: u64 = 3;
    /// The generator's periodic credit grant (§5.3.2.1).
    pub const SYNC_TIMER: u64 = 4;
    /// A mirrored pseudo segment: an ACK to send, and maybe a range to merge
    /// (§5.3.1.4, §5.3.1.5).
    pub const PSEUDO: u64 = 5;
    /// SYN, FIN or RST: connection management is the control plane's.
    pub const EXCEPTION: u64 = 6;
}

/// How stage 1 classified a segment's data.
pub mod class {
    pub const NONE: u64 = 0;
    pub const IN_ORDER: u64 = 1;
    pub const OUT_OF_ORDER: u64 = 2;
    pub const DUPLICATE: u64 = 3;
}

/// Out-of-window outcomes of stage 2.
pub mod oow {
    pub const NONE: u64 = 0;
    /// In order but beyond the window: state must be rolled back (§5.3.1.2).
    pub const ROLLBACK: u64 = 1;
    /// Out of order and beyond the window: dropped, nothing changed.
    pub const BEYOND: u64 = 2;
}

/// The bit of `rx-avail` that marks a pending rollback: every segment is
/// out of window until the control plane restores the state (§5.3.1.2).
pub const FROZEN: u64 = 1 << 31;

/// Duplicate ACKs that trigger a fast retransmit (§5.3.2.3).
pub const DUPACK_THRESHOLD: u64 = 3;

const PORT_MAC: u64 = 1;
const PORT_DMA: u64 = 2;
const PORT_GEN: u64 = 3;

/// Names of the registers, in stage order.
pub mod register {
    pub const RX_NEXT_SEQ: &str = "rx-next-seq";
    pub const RX_AVAIL: &str = "rx-avail";
    pub const RX_OOO_TAIL: &str = "rx-ooo-tail";
    pub const RX_OOO_HEAD: &str = "rx-ooo-head";
    pub const TX_NEXT_ACK: &str = "tx-next-ack";
    pub const TX_DUPACK_CNT: &str = "tx-dupack-cnt";
    pub const TX_AVAIL: &str = "tx-avail";
    pub const TX_CREDITS: &str = "tx-credits";
    pub const TX_REMOTE_AVAIL: &str = "tx-remote-avail";
}

/// Names of the control plane's tables.
pub mod table {
    pub const CONNECTIONS: &str = "connections";
    pub const TRANSLATION: &str = "translation";
    pub const HEADERS: &str = "headers";
}

/// Options of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaminarConfig {
    /// Connections (the size of every register and table).
    pub connections: u32,
    /// Encode the out-of-order interval as one SACK block in ACKs (§5.5.4.3).
    pub sack: bool,
}

impl Default for LaminarConfig {
    fn default() -> Self {
        LaminarConfig {
            connections: 1024,
            sack: false,
        }
    }
}

/// `a <= b` modulo 2^32.
fn seq_le(a: u32, b: u32) -> bool {
    b.wrapping_sub(a) as i32 >= 0
}

/// `a < b` modulo 2^32.
fn seq_lt(a: u32, b: u32) -> bool {
    a != b && seq_le(a, b)
}

/// Builds the program.
pub fn program(config: LaminarConfig) -> Program {
    let mut b = ProgramBuilder::new(if config.sack {
        "laminar-sack"
    } else {
        "laminar"
    });
    for (i, (name, bits)) in ALL.iter().enumerate() {
        let id = b.field(name, *bits);
        debug_assert_eq!(id.index(), i);
    }
    let n = config.connections;
    let reg = |b: &mut ProgramBuilder, name: &str, bytes: u8| b.register(name, bytes, n, CONN);
    let rx_next = reg(&mut b, register::RX_NEXT_SEQ, 4);
    let rx_avail = reg(&mut b, register::RX_AVAIL, 4);
    let rx_tail = reg(&mut b, register::RX_OOO_TAIL, 4);
    let rx_head = reg(&mut b, register::RX_OOO_HEAD, 4);
    let tx_next_ack = reg(&mut b, register::TX_NEXT_ACK, 4);
    let tx_dupacks = reg(&mut b, register::TX_DUPACK_CNT, 1);
    let tx_avail = reg(&mut b, register::TX_AVAIL, 4);
    let tx_credits = reg(&mut b, register::TX_CREDITS, 4);
    let tx_remote = reg(&mut b, register::TX_REMOTE_AVAIL, 4);

    b.parser(
        &[
            PORT_KIND, DMA_TYPE, DMA_CTX, SRC_IP, DST_IP, SRC_PORT, DST_PORT, SEQ, ACK, FLAGS,
            WINDOW, PLEN, DESC_CONN, DESC_WORD,
        ],
        parse,
    );

    // Ingress ①-④: read-only.
    b.ingress(
        StageDecl::new("classify").table(TableDecl::keyless(
            "classify",
            ActionDecl::new("classify", classify)
                .reads(&[PORT_KIND, DMA_TYPE, FLAGS])
                .writes(&[WORKFLOW]),
        )),
    );
    b.ingress(StageDecl::new("connection lookup").table(TableDecl::exact(
        table::CONNECTIONS,
        &[SRC_IP, DST_IP, SRC_PORT, DST_PORT],
        n,
        vec![
            ActionDecl::new("rx-connection", rx_connection)
                .reads(&[WORKFLOW, DESC_CONN])
                .writes(&[CONN])
                .data(1),
            ActionDecl::new("from-descriptor", from_descriptor)
                .reads(&[WORKFLOW, DESC_CONN])
                .writes(&[CONN]),
        ],
        1,
        &[],
    )));
    b.ingress(
        StageDecl::new("sequence-address translation").table(TableDecl::exact(
            table::TRANSLATION,
            &[CONN],
            n,
            vec![
                ActionDecl::new("translate", translate)
                    .reads(&[WORKFLOW, SEQ, DESC_WORD])
                    .writes(&[SEG_SEQ, RX_BUF_ADDR, RX_OFFSET, RX_BUF_MASK])
                    .data(4),
                ActionDecl::new("unknown-connection", unknown_connection),
            ],
            1,
            &[],
        )),
    );
    b.ingress(StageDecl::new("header prebuild").table(TableDecl::exact(
        table::HEADERS,
        &[CONN],
        n,
        vec![
                ActionDecl::new("prebuild", prebuild)
                    .writes(&[
                        OUT_SRC_IP,
                        OUT_DST_IP,
                        OUT_SRC_PORT,
                        OUT_DST_PORT,
                        OUT_CTX,
                        WSCALE,
                        CREDIT_GRANT,
                    ])
                    .data(7),
                ActionDecl::new("unknown-connection", unknown_connection),
            ],
        1,
        &[],
    )));

    // Egress: one register per stage (§5.3.1, §5.3.2).
    let stage = |name: &str, action: ActionDecl| {
        StageDecl::new(name).table(TableDecl::keyless(name, action))
    };
    b.egress(stage(
        register::RX_NEXT_SEQ,
        ActionDecl::new("advance", rx_next_seq)
            .reads(&[WORKFLOW, SEG_SEQ, PLEN])
            .writes(&[RX_PRE_NEXT, RX_NEXT, RX_CLASS, RX_ADV, RX_TRIM])
            .registers(&[rx_next]),
    ));
    b.egress(stage(
        register::RX_AVAIL,
        ActionDecl::new("window", rx_window)
            .reads(&[
                WORKFLOW,
                RX_CLASS,
                RX_ADV,
                RX_PRE_NEXT,
                SEG_SEQ,
                PLEN,
                DESC_WORD,
            ])
            .writes(&[RX_PRE_AVAIL, RX_AVAIL, RX_OOW])
            .registers(&[rx_avail]),
    ));
    b.egress(stage(
        register::RX_OOO_TAIL,
        ActionDecl::new("tail", rx_ooo_tail)
            .reads(&[RX_CLASS, RX_OOW, RX_ADV, RX_PRE_NEXT, SEG_SEQ, PLEN])
            .writes(&[RX_TAIL, RX_OOO_NEW, RX_OOO_FITS, RX_PRE_TAIL])
            .registers(&[rx_tail]),
    ));
    b.egress(stage(
        register::RX_OOO_HEAD,
        ActionDecl::new("head", rx_ooo_head)
            .reads(&[
                WORKFLOW,
                RX_CLASS,
                RX_OOW,
                RX_ADV,
                RX_PRE_NEXT,
                SEG_SEQ,
                PLEN,
                RX_OOO_NEW,
                RX_OOO_FITS,
                RX_TAIL,
                RX_NEXT,
                RX_PRE_TAIL,
            ])
            .writes(&[
                RX_HEAD, RX_ACCEPT, RX_PRESENT, MERGE_SEQ, MERGE_LEN, NOTIFY, NOTIFY_SEQ,
            ])
            .registers(&[rx_head]),
    ));
    b.egress(stage(
        register::TX_NEXT_ACK,
        ActionDecl::new("acknowledge", tx_next_ack_stage)
            .reads(&[WORKFLOW, ACK, FLAGS, PLEN, SEG_SEQ])
            .writes(&[TX_PRE_ACK, ACK_ADV, ACK_DUP, TX_STALE])
            .registers(&[tx_next_ack]),
    ));
    b.egress(stage(
        register::TX_DUPACK_CNT,
        ActionDecl::new("count-duplicates", tx_dupack_cnt)
            .reads(&[WORKFLOW, ACK_DUP, ACK_ADV])
            .writes(&[FAST_REXMIT])
            .registers(&[tx_dupacks]),
    ));
    b.egress(stage(
        register::TX_AVAIL,
        ActionDecl::new("in-flight", tx_avail_stage)
            .reads(&[WORKFLOW, ACK_ADV, TX_STALE, SEG_SEQ, PLEN, TX_PRE_ACK])
            .writes(&[ACK_OOW, TX_AVAIL])
            .registers(&[tx_avail]),
    ));
    b.egress(stage(
        register::TX_CREDITS,
        ActionDecl::new("credits", tx_credits_stage)
            .reads(&[WORKFLOW, TX_STALE, PLEN, FAST_REXMIT, CREDIT_GRANT])
            .writes(&[TX_CREDITS, TX_NO_CREDIT])
            .registers(&[tx_credits]),
    ));
    b.egress(stage(
        register::TX_REMOTE_AVAIL,
        ActionDecl::new("flow-control", tx_remote_avail)
            .reads(&[
                WORKFLOW,
                FLAGS,
                WINDOW,
                WSCALE,
                RX_CLASS,
                SEG_SEQ,
                RX_PRE_NEXT,
                TX_STALE,
                TX_NO_CREDIT,
                PLEN,
                TX_PRE_ACK,
            ])
            .writes(&[TX_REMOTE, TX_BLOCKED])
            .registers(&[tx_remote]),
    ));
    b.mirror_parser(parse_mirror);
    b.deparser(
        &[
            WORKFLOW,
            CONN,
            RX_ACCEPT,
            RX_PRESENT,
            RX_CLASS,
            RX_BUF_ADDR,
            RX_OFFSET,
            RX_BUF_MASK,
            RX_TRIM,
            RX_ADV,
            PLEN,
            NOTIFY,
            NOTIFY_SEQ,
            OUT_SRC_IP,
            OUT_DST_IP,
            OUT_SRC_PORT,
            OUT_DST_PORT,
            OUT_CTX,
            RX_NEXT,
            RX_PRE_NEXT,
            RX_AVAIL,
            WSCALE,
            RX_HEAD,
            RX_TAIL,
            TX_PRE_ACK,
            ACK_ADV,
            TX_AVAIL,
            TX_CREDITS,
            FAST_REXMIT,
            SEG_SEQ,
        ],
        if config.sack {
            deparse::<true>
        } else {
            deparse::<false>
        },
    );
    b.build()
}

/// The parser: a TCP/IPv4 segment on a MAC port, a command on a DMA
/// channel, a generator header from the packet generator.
fn parse(port: Port, bytes: &[u8], out: &mut ParserOut<'_>) -> Result<usize, ParseError> {
    match port {
        Port::Mac(_) => {
            let h = parse_tcp(bytes)?;
            out.set(PORT_KIND, PORT_MAC);
            out.set(SRC_IP, u64::from(h.src_ip));
            out.set(DST_IP, u64::from(h.dst_ip));
            out.set(SRC_PORT, u64::from(h.src_port));
            out.set(DST_PORT, u64::from(h.dst_port));
            out.set(SEQ, u64::from(h.seq));
            out.set(ACK, u64::from(h.ack));
            out.set(FLAGS, u64::from(h.flags));
            out.set(WINDOW, u64::from(h.window));
            out.set(PLEN, h.payload_len as u64);
            Ok(h.header_len)
        }
        Port::Dma(ctx) => {
            let (kind, conn, word, len) = parse_command(bytes)?;
            out.set(PORT_KIND, PORT_DMA);
            out.set(DMA_TYPE, u64::from(kind));
            out.set(DMA_CTX, u64::from(ctx));
            out.set(DESC_CONN, u64::from(conn));
            out.set(DESC_WORD, u64::from(word));
            out.set(PLEN, if is_tx(kind) { u64::from(len) } else { 0 });
            Ok(COMMAND_LEN)
        }
        Port::Generator(_) => {
            let (_, _, packet) = pktgen::parse_header(bytes).ok_or(ParseError::TooShort {
                header: "generator",
                len: bytes.len(),
                need: pktgen::HEADER_LEN,
            })?;
            out.set(PORT_KIND, PORT_GEN);
            out.set(DESC_CONN, u64::from(packet));
            Ok(pktgen::HEADER_LEN)
        }
        Port::Recirculation => Err(ParseError::Malformed {
            header: "port",
            reason: "Laminar processes each segment in one pass and never recirculates".into(),
        }),
    }
}

/// The copy of a data segment becomes a pseudo segment: an ACK to send and
/// the range [merge-seq, +merge-len) to merge, empty for a plain ACK.
fn parse_mirror(phv: &mut Phv) {
    phv.set(WORKFLOW, workflow::PSEUDO);
    phv.set(SEG_SEQ, phv.get(MERGE_SEQ));
    phv.set(PLEN, phv.get(MERGE_LEN));
}

// ---- ingress ----

/// ① RX from the MAC, TX or SYNC from a DMA channel, SYNC from the generator.
fn classify(io: &mut ActionIo<'_>) {
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
fn rx_connection(io: &mut ActionIo<'_>) {
    let &[wf, desc_conn] = io.reads else { return };
    io.writes[0] = if wf == workflow::RX {
        io.data[0]
    } else {
        desc_conn
    };
}

/// ② A miss: TX and SYNC name their connection; an RX segment of no
/// Laminar connection is not ours.
fn from_descriptor(io: &mut ActionIo<'_>) {
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
fn translate(io: &mut ActionIo<'_>) {
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

fn unknown_connection(io: &mut ActionIo<'_>) {
    io.verdict.drop = true;
}

/// ④ The headers of what this connection sends, from the control plane.
fn prebuild(io: &mut ActionIo<'_>) {
    io.writes.copy_from_slice(io.data);
}

// ---- egress: reassembly (§5.3.1) ----

/// Stage 1, `rx-next-seq` (§5.3.1.1): optimistically advance over the
/// in-order part of a segment; drop full duplicates, trim partial ones.
/// Pseudo segments take the same path (§5.3.1.5).
fn rx_next_seq(io: &mut ActionIo<'_>) {
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
fn rx_window(io: &mut ActionIo<'_>) {
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
fn ooo_offsets(pre_next: u64, seq: u64, plen: u64) -> (u64, u64) {
    let start = u64::from((seq as u32).wrapping_sub(pre_next as u32));
    (start, start + plen)
}

/// Stage 3, `rx-ooo-tail` (§5.3.1.3): an in-order segment moves the end of
/// the interval closer (it is an offset); an out-of-order one starts the
/// interval or extends its end when it overlaps or touches it.
fn rx_ooo_tail(io: &mut ActionIo<'_>) {
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
fn rx_ooo_head(io: &mut ActionIo<'_>) {
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

// ---- egress: (re-)transmission (§5.3.2) ----

/// Stage 5, `tx-next-ack` (§5.3.2.3 ①, §5.3.2.2 ①): advance on a new ACK,
/// note a duplicate; a TX segment wholly below it is stale.
fn tx_next_ack_stage(io: &mut ActionIo<'_>) {
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
fn tx_dupack_cnt(io: &mut ActionIo<'_>) {
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
fn tx_avail_stage(io: &mut ActionIo<'_>) {
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
fn tx_credits_stage(io: &mut ActionIo<'_>) {
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
fn tx_remote_avail(io: &mut ActionIo<'_>) {
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

// ---- deparser ----

/// The window to advertise: none while a rollback is pending (§5.3.1.2).
fn advertised_window(avail: u64, wscale: u64) -> u16 {
    if avail & FROZEN != 0 {
        0
    } else {
        (avail >> wscale).min(u64::from(u16::MAX)) as u16
    }
}

fn get(phv: &Phv, f: FieldId) -> u32 {
    phv.get(f) as u32
}

/// RX data goes to the host buffer (with the notification); a pseudo
/// segment leaves as an ACK (with one SACK block when `SACK`); TX leaves as
/// a segment carrying the current ACK; a generator SYNC tells libTOE its
/// credits; fast retransmit tells libTOE where to resume.
fn deparse<const SACK: bool>(phv: &Phv, payload: &[u8], out: &mut Vec<Emitted>) {
    let ctx = Port::Dma(phv.get(OUT_CTX) as u8);
    let conn = phv.get(CONN) as u16;
    let segment = |seq: u32, ack: u32, tcp_flags: u8, sack, data: &[u8]| TcpSegment {
        src_ip: get(phv, OUT_SRC_IP),
        dst_ip: get(phv, OUT_DST_IP),
        src_port: phv.get(OUT_SRC_PORT) as u16,
        dst_port: phv.get(OUT_DST_PORT) as u16,
        seq,
        ack,
        flags: tcp_flags,
        window: advertised_window(phv.get(RX_AVAIL), phv.get(WSCALE)),
        sack,
        payload: data.to_vec(),
    };
    match phv.get(WORKFLOW) {
        workflow::RX => {
            if phv.get(RX_ACCEPT) == 1 {
                let (skip, len) = if phv.get(RX_CLASS) == class::IN_ORDER {
                    (phv.get(RX_TRIM), phv.get(RX_ADV))
                } else {
                    (0, phv.get(PLEN))
                };
                let present = phv.get(RX_PRESENT).min(len);
                let (skip, len) = (skip + present, len - present);
                let Some(data) = payload.get(skip as usize..(skip + len) as usize) else {
                    return;
                };
                let offset = (phv.get(RX_OFFSET) + skip) & phv.get(RX_BUF_MASK);
                let notify = (phv.get(NOTIFY) == 1).then(|| get(phv, NOTIFY_SEQ));
                let addr = phv.get(RX_BUF_ADDR) + offset;
                out.push(Emitted {
                    port: ctx,
                    bytes: rx_data_record(conn, addr, notify, data),
                });
            }
            if phv.get(FAST_REXMIT) == 1 {
                let tx_next_ack = get(phv, TX_PRE_ACK).wrapping_add(get(phv, ACK_ADV));
                let event = HostEvent::Retransmit { conn, tx_next_ack };
                out.push(Emitted {
                    port: ctx,
                    bytes: event.emit(),
                });
            }
        }
        workflow::PSEUDO => {
            let next = get(phv, RX_NEXT);
            let (head, tail) = (get(phv, RX_HEAD), get(phv, RX_TAIL));
            let sack =
                (SACK && tail > 0).then(|| (next.wrapping_add(head), next.wrapping_add(tail)));
            let snd_max = get(phv, TX_PRE_ACK).wrapping_add(get(phv, TX_AVAIL));
            let ack = segment(snd_max, next, flags::ACK, sack, &[]);
            out.push(Emitted {
                port: Port::Mac(0),
                bytes: ack.emit(),
            });
        }
        workflow::TX => {
            let Some(data) = payload.get(..phv.get(PLEN) as usize) else {
                return;
            };
            let s = segment(
                get(phv, SEG_SEQ),
                get(phv, RX_PRE_NEXT),
                flags::ACK | flags::PSH,
                None,
                data,
            );
            out.push(Emitted {
                port: Port::Mac(0),
                bytes: s.emit(),
            });
        }
        workflow::SYNC_TIMER => {
            let event = HostEvent::Sync {
                conn,
                tx_next_ack: get(phv, TX_PRE_ACK),
                credits: get(phv, TX_CREDITS),
            };
            out.push(Emitted {
                port: ctx,
                bytes: event.emit(),
            });
        }
        _ => {}
    }
}
