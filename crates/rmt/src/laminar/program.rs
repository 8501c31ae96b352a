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

use crate::program::{ActionDecl, Program, ProgramBuilder, StageDecl, TableDecl};

use super::deparse::deparse;
use super::fields::*;
use super::ingress::{
    classify, from_descriptor, prebuild, rx_connection, translate, unknown_connection,
};
use super::parse::{parse, parse_mirror};
use super::reassembly::{rx_next_seq, rx_ooo_head, rx_ooo_tail, rx_window};
use super::transmission::{
    tx_avail_stage, tx_credits_stage, tx_dupack_cnt, tx_next_ack_stage, tx_remote_avail,
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

pub(super) const PORT_MAC: u64 = 1;
pub(super) const PORT_DMA: u64 = 2;
pub(super) const PORT_GEN: u64 = 3;

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
pub(super) fn seq_le(a: u32, b: u32) -> bool {
    b.wrapping_sub(a) as i32 >= 0
}

/// `a < b` modulo 2^32.
pub(super) fn seq_lt(a: u32, b: u32) -> bool {
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
