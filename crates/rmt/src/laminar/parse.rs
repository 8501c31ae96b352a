//! Laminar's parser (§5.2): what each port carries, and the mirror parser
//! that turns an ACK mirror into a pseudo segment (§5.3.1.4, §5.3.1.5).

use crate::pktgen;
use crate::program::{ParseError, ParserOut, Port};
use crate::Phv;

use super::fields::*;
use super::program::{workflow, PORT_DMA, PORT_GEN, PORT_MAC};
use super::segment::{is_tx, parse_command, parse_tcp, COMMAND_LEN};

/// The parser: a TCP/IPv4 segment on a MAC port, a command on a DMA
/// channel, a generator header from the packet generator.
pub(super) fn parse(
    port: Port,
    bytes: &[u8],
    out: &mut ParserOut<'_>,
) -> Result<usize, ParseError> {
    match port {
        Port::Mac(_) => {
            let (h, payload) = parse_tcp(bytes)?;
            out.set(PORT_KIND, PORT_MAC);
            out.set(SRC_IP, u64::from(h.src_ip));
            out.set(DST_IP, u64::from(h.dst_ip));
            out.set(SRC_PORT, u64::from(h.src_port));
            out.set(DST_PORT, u64::from(h.dst_port));
            out.set(SEQ, u64::from(h.seq));
            out.set(ACK, u64::from(h.ack));
            out.set(FLAGS, u64::from(h.flags));
            out.set(WINDOW, u64::from(h.window));
            out.set(PLEN, payload.len() as u64);
            Ok(payload.start)
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
pub(super) fn parse_mirror(phv: &mut Phv) {
    phv.set(WORKFLOW, workflow::PSEUDO);
    phv.set(SEG_SEQ, phv.get(MERGE_SEQ));
    phv.set(PLEN, phv.get(MERGE_LEN));
}
