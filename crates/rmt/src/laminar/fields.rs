//! The PHV layout of Laminar's program: every field, in declaration order.
//! Parser, mirror parser and deparser name fields by these constants;
//! actions get values in the order they declared them.

use crate::phv::FieldId;

macro_rules! fields {
    ($($id:ident = $name:literal : $bits:literal),* $(,)?) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[repr(u16)]
        enum Index { $($id),* }
        $(pub const $id: FieldId = FieldId::from_index(Index::$id as u16);)*
        /// (name, bits) of every field, in the order of their ids.
        pub(crate) const ALL: &[(&str, u8)] = &[$(($name, $bits)),*];
    };
}

fields! {
    // Parser: where the packet came from and its headers.
    PORT_KIND = "port-kind": 2,
    DMA_TYPE = "dma-type": 8,
    DMA_CTX = "dma-ctx": 8,
    SRC_IP = "ip.src": 32,
    DST_IP = "ip.dst": 32,
    SRC_PORT = "tcp.sport": 16,
    DST_PORT = "tcp.dport": 16,
    SEQ = "tcp.seq": 32,
    ACK = "tcp.ack": 32,
    FLAGS = "tcp.flags": 8,
    WINDOW = "tcp.window": 16,
    PLEN = "payload-len": 32,
    DESC_CONN = "desc.conn": 16,
    DESC_WORD = "desc.word": 32,
    // Ingress: classification, lookup, translation, prebuilt headers.
    WORKFLOW = "workflow": 3,
    CONN = "conn": 16,
    SEG_SEQ = "seg-seq": 32,
    RX_BUF_ADDR = "rx-buffer-addr": 64,
    RX_OFFSET = "rx-buffer-offset": 32,
    RX_BUF_MASK = "rx-buffer-mask": 32,
    OUT_SRC_IP = "out.ip.src": 32,
    OUT_DST_IP = "out.ip.dst": 32,
    OUT_SRC_PORT = "out.tcp.sport": 16,
    OUT_DST_PORT = "out.tcp.dport": 16,
    OUT_CTX = "out.ctx": 8,
    WSCALE = "wscale": 4,
    CREDIT_GRANT = "credit-grant": 32,
    // Egress reassembly (§5.3.1): snapshots and decisions.
    RX_PRE_NEXT = "rx.pre-next-seq": 32,
    RX_NEXT = "rx.next-seq": 32,
    RX_CLASS = "rx.class": 2,
    RX_ADV = "rx.advance": 32,
    RX_TRIM = "rx.trim": 32,
    RX_PRE_AVAIL = "rx.pre-avail": 32,
    RX_AVAIL = "rx.avail": 32,
    RX_OOW = "rx.out-of-window": 2,
    RX_TAIL = "rx.ooo-tail": 32,
    RX_OOO_NEW = "rx.ooo-new": 1,
    RX_OOO_FITS = "rx.ooo-fits": 1,
    RX_PRE_TAIL = "rx.pre-ooo-tail": 32,
    RX_HEAD = "rx.ooo-head": 32,
    RX_ACCEPT = "rx.accept": 1,
    RX_PRESENT = "rx.already-present": 32,
    MERGE_SEQ = "merge.seq": 32,
    MERGE_LEN = "merge.len": 32,
    NOTIFY = "notify": 1,
    NOTIFY_SEQ = "notify.seq": 32,
    // Egress (re-)transmission (§5.3.2).
    TX_PRE_ACK = "tx.pre-next-ack": 32,
    ACK_ADV = "ack.advance": 32,
    ACK_DUP = "ack.duplicate": 1,
    TX_STALE = "tx.stale": 1,
    FAST_REXMIT = "fast-retransmit": 1,
    ACK_OOW = "ack.out-of-window": 1,
    TX_AVAIL = "tx.avail": 32,
    TX_CREDITS = "tx.credits": 32,
    TX_NO_CREDIT = "tx.no-credit": 1,
    TX_REMOTE = "tx.remote-avail": 32,
    TX_BLOCKED = "tx.flow-blocked": 1,
}
