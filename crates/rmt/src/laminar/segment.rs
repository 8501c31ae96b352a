//! The bytes Laminar's program reads and writes: TCP/IPv4 segments on the
//! network port, and the DMA records exchanged with the host (libTOE) on a
//! context's channel.
//!
//! Parsing is checked: every length is validated before a field is read,
//! and malformed bytes give a [`ParseError`], never a panic. Emitted
//! segments carry correct IPv4 and TCP checksums; parsed ones have only the
//! IPv4 header checksum verified, since the thesis's pipeline cannot check
//! payload checksums either (§5.4 "Limitations").

use std::ops::Range;

use crate::program::ParseError;

/// TCP flags (RFC 9293 §3.1).
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

const IPV4_LEN: usize = 20;
const TCP_LEN: usize = 20;
const PROTO_TCP: u8 = 6;
/// TCP option kinds (RFC 9293 §3.2, RFC 2018 for SACK).
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_SACK: u8 = 5;

/// A TCP segment over IPv4, as the program sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSegment {
    pub src_ip: u32,
    pub dst_ip: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// One SACK block [left, right) (RFC 2018), if the segment carries one.
    pub sack: Option<(u32, u32)>,
    pub payload: Vec<u8>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn malformed(header: &'static str, reason: impl Into<String>) -> ParseError {
    ParseError::Malformed {
        header,
        reason: reason.into(),
    }
}

fn need(header: &'static str, bytes: &[u8], len: usize) -> Result<(), ParseError> {
    if bytes.len() < len {
        Err(ParseError::TooShort {
            header,
            len: bytes.len(),
            need: len,
        })
    } else {
        Ok(())
    }
}

/// The one's-complement sum of RFC 1071 over `bytes`, folded.
fn ones_complement(mut sum: u32, bytes: &[u8]) -> u16 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Parses an IPv4 packet carrying TCP: checks versions, lengths, the IPv4
/// header checksum and the TCP header length; reads a SACK option. Returns
/// the segment with its payload left empty (the parser's fast path copies
/// no bytes) and where the payload lies in `bytes` (it starts where the
/// headers end).
pub fn parse_tcp(bytes: &[u8]) -> Result<(TcpSegment, Range<usize>), ParseError> {
    need("IPv4", bytes, IPV4_LEN)?;
    if bytes[0] >> 4 != 4 {
        return Err(malformed("IPv4", format!("version {}", bytes[0] >> 4)));
    }
    let ihl = usize::from(bytes[0] & 0x0f) * 4;
    if ihl < IPV4_LEN {
        return Err(malformed("IPv4", format!("header length {ihl}")));
    }
    need("IPv4", bytes, ihl)?;
    let total = usize::from(be16(bytes, 2));
    if total < ihl || total > bytes.len() {
        return Err(malformed(
            "IPv4",
            format!(
                "total length {total} with a {ihl}-byte header in {} bytes",
                bytes.len()
            ),
        ));
    }
    if ones_complement(0, &bytes[..ihl]) != 0xffff {
        return Err(malformed("IPv4", "header checksum"));
    }
    if be16(bytes, 6) & 0x3fff != 0 {
        return Err(malformed("IPv4", "a fragment"));
    }
    if bytes[9] != PROTO_TCP {
        return Err(malformed("IPv4", format!("protocol {}, not TCP", bytes[9])));
    }
    let tcp = &bytes[ihl..total];
    need("TCP", tcp, TCP_LEN)?;
    let data_offset = usize::from(tcp[12] >> 4) * 4;
    if data_offset < TCP_LEN || data_offset > tcp.len() {
        return Err(malformed(
            "TCP",
            format!("data offset {data_offset} in {} bytes", tcp.len()),
        ));
    }
    let segment = TcpSegment {
        src_ip: be32(bytes, 12),
        dst_ip: be32(bytes, 16),
        src_port: be16(tcp, 0),
        dst_port: be16(tcp, 2),
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        flags: tcp[13],
        window: be16(tcp, 14),
        sack: parse_sack(&tcp[TCP_LEN..data_offset])?,
        payload: Vec::new(),
    };
    Ok((segment, ihl + data_offset..total))
}

/// The first SACK block of the options, if any (RFC 2018 §3).
fn parse_sack(mut options: &[u8]) -> Result<Option<(u32, u32)>, ParseError> {
    while let Some(&kind) = options.first() {
        match kind {
            OPT_END => break,
            OPT_NOP => options = &options[1..],
            _ => {
                let len = usize::from(
                    *options
                        .get(1)
                        .ok_or_else(|| malformed("TCP", "option without length"))?,
                );
                if len < 2 || len > options.len() {
                    return Err(malformed("TCP", format!("option {kind} of length {len}")));
                }
                if kind == OPT_SACK && len >= 10 {
                    return Ok(Some((be32(options, 2), be32(options, 6))));
                }
                options = &options[len..];
            }
        }
    }
    Ok(None)
}

impl TcpSegment {
    /// Parses a whole segment (headers and payload).
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let (mut segment, payload) = parse_tcp(bytes)?;
        segment.payload = bytes[payload].to_vec();
        Ok(segment)
    }

    /// The segment as IPv4 + TCP bytes with both checksums filled in.
    pub fn emit(&self) -> Vec<u8> {
        let options = if self.sack.is_some() { 12 } else { 0 };
        let tcp_len = TCP_LEN + options + self.payload.len();
        let total = IPV4_LEN + tcp_len;
        // The headers are built in place, then copied out once with the
        // payload (this runs for every ACK the pipeline sends).
        let mut h = [0u8; IPV4_LEN + TCP_LEN + 12];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        h[6] = 0x40;
        h[8] = 64;
        h[9] = PROTO_TCP;
        h[12..16].copy_from_slice(&self.src_ip.to_be_bytes());
        h[16..20].copy_from_slice(&self.dst_ip.to_be_bytes());
        let ip_sum = !ones_complement(0, &h[..IPV4_LEN]);
        h[10..12].copy_from_slice(&ip_sum.to_be_bytes());
        let t = &mut h[IPV4_LEN..];
        t[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        t[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        t[4..8].copy_from_slice(&self.seq.to_be_bytes());
        t[8..12].copy_from_slice(&self.ack.to_be_bytes());
        t[12] = (((TCP_LEN + options) / 4) as u8) << 4;
        t[13] = self.flags;
        t[14..16].copy_from_slice(&self.window.to_be_bytes());
        if let Some((left, right)) = self.sack {
            t[20..24].copy_from_slice(&[OPT_NOP, OPT_NOP, OPT_SACK, 10]);
            t[24..28].copy_from_slice(&left.to_be_bytes());
            t[28..32].copy_from_slice(&right.to_be_bytes());
        }
        let headers = IPV4_LEN + TCP_LEN + options;
        let mut b = Vec::with_capacity(total);
        b.extend_from_slice(&h[..headers]);
        b.extend_from_slice(&self.payload);
        // RFC 9293 §3.1: the checksum covers a pseudo header and the segment.
        let mut pseudo = 0u32;
        for half in [
            self.src_ip >> 16,
            self.src_ip & 0xffff,
            self.dst_ip >> 16,
            self.dst_ip & 0xffff,
        ] {
            pseudo += half;
        }
        pseudo += u32::from(PROTO_TCP) + tcp_len as u32;
        let tcp_sum = !ones_complement(pseudo, &b[IPV4_LEN..]);
        b[IPV4_LEN + 16..IPV4_LEN + 18].copy_from_slice(&tcp_sum.to_be_bytes());
        b
    }
}

/// Commands from libTOE on a context's DMA channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostCommand {
    /// Transmit `payload`, found at `offset` of the connection's transmit
    /// buffer (the pipeline turns the offset into a sequence number).
    Tx {
        conn: u16,
        offset: u32,
        payload: Vec<u8>,
    },
    /// The application consumed `rx_grant` bytes: the receive window grows
    /// by that much (§5.3.1.7).
    Sync { conn: u16, rx_grant: u32 },
}

const CMD_TX: u8 = 1;
const CMD_SYNC: u8 = 2;
/// Length of a command header.
pub const COMMAND_LEN: usize = 12;

/// A command header's fields: (type, conn, word1, word2).
pub fn parse_command(bytes: &[u8]) -> Result<(u8, u16, u32, u32), ParseError> {
    need("DMA command", bytes, COMMAND_LEN)?;
    let kind = bytes[0];
    let conn = be16(bytes, 2);
    let (w1, w2) = (be32(bytes, 4), be32(bytes, 8));
    match kind {
        CMD_TX if w2 as usize != bytes.len() - COMMAND_LEN => Err(malformed(
            "DMA command",
            format!(
                "TX of {w2} bytes with {} bytes of payload",
                bytes.len() - COMMAND_LEN
            ),
        )),
        CMD_TX if w2 == 0 => Err(malformed("DMA command", "TX without payload")),
        CMD_SYNC if bytes.len() != COMMAND_LEN => {
            Err(malformed("DMA command", "SYNC with payload"))
        }
        CMD_TX | CMD_SYNC => Ok((kind, conn, w1, w2)),
        other => Err(malformed("DMA command", format!("type {other}"))),
    }
}

/// Whether a parsed command is a TX (else a SYNC).
pub fn is_tx(kind: u8) -> bool {
    kind == CMD_TX
}

impl HostCommand {
    pub fn emit(&self) -> Vec<u8> {
        let (kind, conn, w1, w2, payload): (u8, u16, u32, u32, &[u8]) = match self {
            HostCommand::Tx {
                conn,
                offset,
                payload,
            } => (CMD_TX, *conn, *offset, payload.len() as u32, payload),
            HostCommand::Sync { conn, rx_grant } => (CMD_SYNC, *conn, *rx_grant, 0, &[]),
        };
        let mut b = vec![kind, 0];
        b.extend_from_slice(&conn.to_be_bytes());
        b.extend_from_slice(&w1.to_be_bytes());
        b.extend_from_slice(&w2.to_be_bytes());
        b.extend_from_slice(payload);
        b
    }
}

/// What the pipeline writes to the host over DMA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    /// Payload written at `addr` of the receive buffer's double mapping;
    /// `notify` is the sequence number up to which data is ready (§5.3.1.6).
    RxData {
        conn: u16,
        addr: u64,
        notify: Option<u32>,
        payload: Vec<u8>,
    },
    /// A SYNC grant: transmit credits, and what the peer acknowledged.
    Sync {
        conn: u16,
        tx_next_ack: u32,
        credits: u32,
    },
    /// Three duplicate ACKs: retransmit from `tx_next_ack` (§5.3.2.3).
    Retransmit { conn: u16, tx_next_ack: u32 },
}

const EV_RX: u8 = 1;
const EV_SYNC: u8 = 2;
const EV_REXMIT: u8 = 3;
const EVENT_LEN: usize = 20;

/// The bytes of an [`HostEvent::RxData`] record, written straight from the
/// payload it carries.
pub fn rx_data_record(conn: u16, addr: u64, notify: Option<u32>, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(EVENT_LEN + payload.len());
    b.push(EV_RX);
    b.push(u8::from(notify.is_some()));
    b.extend_from_slice(&conn.to_be_bytes());
    b.extend_from_slice(&addr.to_be_bytes());
    b.extend_from_slice(&notify.unwrap_or(0).to_be_bytes());
    b.extend_from_slice(&[0; EVENT_LEN - 16]);
    b.extend_from_slice(payload);
    b
}

impl HostEvent {
    pub fn emit(&self) -> Vec<u8> {
        if let HostEvent::RxData {
            conn,
            addr,
            notify,
            payload,
        } = self
        {
            return rx_data_record(*conn, *addr, *notify, payload);
        }
        let payload_len = match self {
            HostEvent::RxData { payload, .. } => payload.len(),
            _ => 0,
        };
        let mut b = Vec::with_capacity(EVENT_LEN + payload_len);
        b.resize(EVENT_LEN, 0);
        let (kind, conn) = match self {
            HostEvent::RxData {
                conn, addr, notify, ..
            } => {
                b[4..12].copy_from_slice(&addr.to_be_bytes());
                b[12..16].copy_from_slice(&notify.unwrap_or(0).to_be_bytes());
                b[1] = u8::from(notify.is_some());
                (EV_RX, conn)
            }
            HostEvent::Sync {
                conn,
                tx_next_ack,
                credits,
            } => {
                b[4..8].copy_from_slice(&tx_next_ack.to_be_bytes());
                b[8..12].copy_from_slice(&credits.to_be_bytes());
                (EV_SYNC, conn)
            }
            HostEvent::Retransmit { conn, tx_next_ack } => {
                b[4..8].copy_from_slice(&tx_next_ack.to_be_bytes());
                (EV_REXMIT, conn)
            }
        };
        b[0] = kind;
        b[2..4].copy_from_slice(&conn.to_be_bytes());
        if let HostEvent::RxData { payload, .. } = self {
            b.extend_from_slice(payload);
        }
        b
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        need("DMA event", bytes, EVENT_LEN)?;
        let conn = be16(bytes, 2);
        match bytes[0] {
            EV_RX => Ok(HostEvent::RxData {
                conn,
                addr: u64::from_be_bytes(
                    bytes[4..12]
                        .try_into()
                        .map_err(|_| malformed("DMA event", "address"))?,
                ),
                notify: (bytes[1] == 1).then(|| be32(bytes, 12)),
                payload: bytes[EVENT_LEN..].to_vec(),
            }),
            EV_SYNC => Ok(HostEvent::Sync {
                conn,
                tx_next_ack: be32(bytes, 4),
                credits: be32(bytes, 8),
            }),
            EV_REXMIT => Ok(HostEvent::Retransmit {
                conn,
                tx_next_ack: be32(bytes, 4),
            }),
            other => Err(malformed("DMA event", format!("type {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment() -> TcpSegment {
        TcpSegment {
            src_ip: 0x0a00_0001,
            dst_ip: 0x0a00_0002,
            src_port: 40000,
            dst_port: 5201,
            seq: 1000,
            ack: 77,
            flags: flags::ACK | flags::PSH,
            window: 512,
            sack: Some((1500, 2000)),
            payload: b"hello".to_vec(),
        }
    }

    #[test]
    fn a_segment_round_trips_with_valid_checksums() {
        let s = segment();
        let bytes = s.emit();
        assert_eq!(TcpSegment::parse(&bytes).unwrap(), s);
        // The TCP checksum verifies: summing the pseudo header and the
        // segment, checksum included, gives all ones.
        let tcp_len = bytes.len() - IPV4_LEN;
        let pseudo = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 + tcp_len as u32;
        assert_eq!(ones_complement(pseudo, &bytes[IPV4_LEN..]), 0xffff);
    }

    #[test]
    fn every_truncation_and_a_bad_checksum_are_errors() {
        let bytes = segment().emit();
        for len in 0..bytes.len() {
            assert!(parse_tcp(&bytes[..len]).is_err(), "{len} bytes parsed");
        }
        let mut bad = bytes.clone();
        bad[8] ^= 1;
        assert_eq!(
            parse_tcp(&bad).unwrap_err(),
            malformed("IPv4", "header checksum")
        );
    }

    #[test]
    fn commands_and_events_round_trip_and_reject_bad_lengths() {
        let tx = HostCommand::Tx {
            conn: 3,
            offset: 9,
            payload: vec![1, 2, 3],
        };
        let bytes = tx.emit();
        assert_eq!(parse_command(&bytes), Ok((CMD_TX, 3, 9, 3)));
        assert!(parse_command(&bytes[..bytes.len() - 1]).is_err());
        let ev = HostEvent::RxData {
            conn: 1,
            addr: 1 << 40,
            notify: Some(5),
            payload: vec![9; 4],
        };
        assert_eq!(HostEvent::parse(&ev.emit()).unwrap(), ev);
        assert!(HostEvent::parse(&[7; 20]).is_err());
    }
}
