//! Laminar's deparser (§5.2 ⑦-⑧): what leaves the pipeline.

use crate::phv::FieldId;
use crate::program::{Emitted, Port};
use crate::Phv;

use super::fields::*;
use super::program::{class, workflow, FROZEN};
use super::segment::{flags, rx_data_record, HostEvent, TcpSegment};

/// The window to advertise: none while a rollback is pending (§5.3.1.2).
pub(super) fn advertised_window(avail: u64, wscale: u64) -> u16 {
    if avail & FROZEN != 0 {
        0
    } else {
        (avail >> wscale).min(u64::from(u16::MAX)) as u16
    }
}

pub(super) fn get(phv: &Phv, f: FieldId) -> u32 {
    phv.get(f) as u32
}

/// RX data goes to the host buffer (with the notification); a pseudo
/// segment leaves as an ACK (with one SACK block when `SACK`); TX leaves as
/// a segment carrying the current ACK; a generator SYNC tells libTOE its
/// credits; fast retransmit tells libTOE where to resume.
pub(super) fn deparse<const SACK: bool>(phv: &Phv, payload: &[u8], out: &mut Vec<Emitted>) {
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
