//! Reading and writing capture files (pcap and pcapng) with the `pcap-file`
//! crate, from an in-memory buffer.
//!
//! This is the one capture reader of the project: SRPIC's replay and metrics
//! and the load balancer's trace simulator both read through it.
//!
//! The record headers are parsed "raw" and checked here: pcap-file's checked
//! packet type rejects records whose original length exceeds the file's snap
//! length, which every capture cut to its headers has (the tcptrace traces).
//! A record whose header is impossible (a captured length above
//! [`MAX_RECORD_LEN`] and the snap length, or above the original length; a
//! sub-second field of a second or more) is corrupt: the rest of the file
//! cannot be trusted. A file that is cut or corrupted part-way is an error
//! ([`CaptureError::Truncated`] / [`CaptureError::Corrupt`]) that says how
//! many packets were read before it; [`Capture::read_lenient`] instead keeps
//! the packets before the damage and reports it in [`Capture::damage`].

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapParser, PcapWriter, RawPcapPacket};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
use pcap_file::pcapng::{Block, PcapNgParser, PcapNgWriter};
use pcap_file::{PcapError, TsResolution};
use serde::Serialize;

use crate::wire::LinkType;

/// Largest record accepted whatever the file's snap length says (the largest
/// snap length tcpdump writes).
pub const MAX_RECORD_LEN: u32 = 262_144;

/// Why a capture could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot read {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not a pcap or pcapng capture")]
    NotACapture,
    #[error("capture header: {0}")]
    BadHeader(String),
    #[error("capture truncated after {packets} packets (at byte {offset})")]
    Truncated { packets: usize, offset: usize },
    #[error("capture corrupt after {packets} packets (at byte {offset}): {reason}")]
    Corrupt {
        packets: usize,
        offset: usize,
        reason: String,
    },
    #[error("link type {0} is not supported (Ethernet, raw IP, Linux cooked, loopback are)")]
    UnsupportedLinkType(u32),
    #[error("writing capture: {0}")]
    Write(String),
}

impl CaptureError {
    /// True when the file may not be read (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        matches!(self, CaptureError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied)
    }

    /// True for a capture that is missing or not a readable capture (exit
    /// 2). Neither this nor [`is_environment`](Self::is_environment): an
    /// I/O failure, or writing failed (exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            CaptureError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::IsADirectory
                    | std::io::ErrorKind::InvalidData
            ),
            CaptureError::Write(_) => false,
            _ => true,
        }
    }
}

/// The container format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Pcap,
    PcapNg,
}

/// A record's timestamp as stored, so it can be written back unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawTime {
    /// pcap: seconds and fraction (µs or ns per the file header).
    Pcap { sec: u32, frac: u32 },
    /// pcapng: units of the interface's if_tsresol.
    PcapNg(u64),
}

/// One captured packet.
#[derive(Debug, Clone)]
pub struct Packet {
    /// Arrival time in ns since the epoch (clamped on overflow).
    pub time_ns: u64,
    pub raw_time: RawTime,
    pub link: LinkType,
    /// pcapng interface id (0 for pcap).
    pub interface: u32,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// What a damaged file lost (lenient reading).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Damage {
    pub offset: usize,
    pub reason: String,
}

/// A whole capture in memory.
#[derive(Debug, Clone)]
pub struct Capture {
    pub format: Format,
    pub packets: Vec<Packet>,
    /// pcapng blocks other than packets and interfaces that were skipped.
    pub skipped_blocks: usize,
    /// Set by [`Capture::read_lenient`] when the file is cut or corrupt.
    pub damage: Option<Damage>,
    header: Header,
}

#[derive(Debug, Clone)]
enum Header {
    Pcap(PcapHeader),
    PcapNg {
        section: SectionHeaderBlock<'static>,
        interfaces: Vec<InterfaceDescriptionBlock<'static>>,
    },
}

impl Capture {
    /// Reads a file; any damage is an error.
    pub fn read_file(path: &Path) -> Result<Capture, CaptureError> {
        let bytes = std::fs::read(path).map_err(|source| CaptureError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Capture::read(&bytes)
    }

    /// Parses a capture held in memory; any damage is an error.
    pub fn read(bytes: &[u8]) -> Result<Capture, CaptureError> {
        let (cap, err) = Capture::read_partial(bytes)?;
        match err {
            Some(e) => Err(e),
            None => Ok(cap),
        }
    }

    /// Parses a capture, keeping the packets before any damage. Fails only
    /// when the file is not a capture at all.
    pub fn read_lenient(bytes: &[u8]) -> Result<Capture, CaptureError> {
        let (mut cap, err) = Capture::read_partial(bytes)?;
        cap.damage = err.map(|e| match e {
            CaptureError::Truncated { offset, .. } => Damage {
                offset,
                reason: "truncated".into(),
            },
            CaptureError::Corrupt { offset, reason, .. } => Damage { offset, reason },
            other => Damage {
                offset: 0,
                reason: other.to_string(),
            },
        });
        Ok(cap)
    }

    /// Parses a capture, returning the packets before any damage together
    /// with the damage as an error ([`CaptureError::Truncated`] or
    /// [`CaptureError::Corrupt`]), for callers that treat the two apart.
    /// Fails only when the file is not a capture at all.
    pub fn read_partial(bytes: &[u8]) -> Result<(Capture, Option<CaptureError>), CaptureError> {
        if bytes.len() < 4 {
            return Err(CaptureError::NotACapture);
        }
        match &bytes[..4] {
            [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d] => read_pcap(bytes),
            [0x0a, 0x0d, 0x0d, 0x0a] => read_pcapng(bytes),
            _ => Err(CaptureError::NotACapture),
        }
    }

    /// The link type number of the file (pcap header), or of its first
    /// interface (pcapng); `None` for a pcapng without interfaces.
    pub fn link_code(&self) -> Option<u32> {
        match &self.header {
            Header::Pcap(h) => Some(u32::from(h.datalink)),
            Header::PcapNg { interfaces, .. } => interfaces.first().map(|i| u32::from(i.linktype)),
        }
    }

    /// Writes `order` (indices into `packets`) as a capture of the same
    /// format and header; `times[k]`, when given, replaces the timestamp of
    /// the k-th packet written by that of packet `times[k]`.
    pub fn write<W: Write>(
        &self,
        out: W,
        order: &[usize],
        times: Option<&[usize]>,
    ) -> Result<(), CaptureError> {
        let werr = |e: PcapError| CaptureError::Write(e.to_string());
        let time_of = |k: usize, i: usize| -> RawTime {
            let src = times.and_then(|t| t.get(k)).copied().unwrap_or(i);
            self.packets
                .get(src)
                .map(|p| p.raw_time)
                .unwrap_or(RawTime::PcapNg(0))
        };
        match &self.header {
            Header::Pcap(h) => {
                let mut w = PcapWriter::with_header(out, *h).map_err(werr)?;
                for (k, &i) in order.iter().enumerate() {
                    let Some(p) = self.packets.get(i) else {
                        continue;
                    };
                    let (ts_sec, ts_frac) = match time_of(k, i) {
                        RawTime::Pcap { sec, frac } => (sec, frac),
                        RawTime::PcapNg(_) => (0, 0),
                    };
                    let raw = RawPcapPacket {
                        ts_sec,
                        ts_frac,
                        incl_len: p.data.len() as u32,
                        orig_len: p.orig_len,
                        data: Cow::Borrowed(&p.data),
                    };
                    w.write_raw_packet(&raw).map_err(werr)?;
                }
            }
            Header::PcapNg {
                section,
                interfaces,
            } => {
                let mut w =
                    PcapNgWriter::with_section_header(out, section.clone()).map_err(werr)?;
                for idb in interfaces {
                    w.write_pcapng_block(idb.clone()).map_err(werr)?;
                }
                for (k, &i) in order.iter().enumerate() {
                    let Some(p) = self.packets.get(i) else {
                        continue;
                    };
                    let units = match time_of(k, i) {
                        RawTime::PcapNg(u) => u,
                        RawTime::Pcap { .. } => 0,
                    };
                    let epb = EnhancedPacketBlock {
                        interface_id: p.interface,
                        timestamp: Duration::from_nanos(units),
                        original_len: p.orig_len,
                        data: Cow::Borrowed(&p.data),
                        options: vec![],
                    };
                    w.write_pcapng_block(epb).map_err(werr)?;
                }
            }
        }
        Ok(())
    }
}

/// What a failed record or block means: the file ends inside it
/// (truncated) or it cannot be read (corrupt).
fn damage_at(e: PcapError, packets: usize, offset: usize) -> CaptureError {
    match e {
        PcapError::IncompleteBuffer => CaptureError::Truncated { packets, offset },
        e => CaptureError::Corrupt {
            packets,
            offset,
            reason: e.to_string(),
        },
    }
}

fn read_pcap(bytes: &[u8]) -> Result<(Capture, Option<CaptureError>), CaptureError> {
    let (mut rest, parser) =
        PcapParser::new(bytes).map_err(|e| CaptureError::BadHeader(e.to_string()))?;
    let header = parser.header();
    let link_code = u32::from(header.datalink);
    let link =
        LinkType::from_pcap(link_code).ok_or(CaptureError::UnsupportedLinkType(link_code))?;
    let nanos = header.ts_resolution == TsResolution::NanoSecond;
    let frac_limit: u32 = if nanos { 1_000_000_000 } else { 1_000_000 };
    let max_len = MAX_RECORD_LEN.max(header.snaplen);
    let mut packets = Vec::new();
    let mut damage = None;
    while !rest.is_empty() {
        let offset = bytes.len() - rest.len();
        let corrupt = |packets: usize, reason: String| CaptureError::Corrupt {
            packets,
            offset,
            reason,
        };
        // Check the declared length before the parser slices with it: a huge
        // one would otherwise read as a file cut short.
        if let Some(field) = rest.get(8..12) {
            let field = [field[0], field[1], field[2], field[3]];
            let incl_len = match header.endianness {
                pcap_file::Endianness::Big => u32::from_be_bytes(field),
                pcap_file::Endianness::Little => u32::from_le_bytes(field),
            };
            if incl_len > max_len {
                damage = Some(corrupt(
                    packets.len(),
                    format!("captured length {incl_len} exceeds {max_len}"),
                ));
                break;
            }
        }
        match parser.next_raw_packet(rest) {
            Ok((r, raw)) => {
                rest = r;
                if raw.incl_len > raw.orig_len {
                    damage = Some(corrupt(
                        packets.len(),
                        "captured length exceeds original length".into(),
                    ));
                    break;
                }
                if raw.ts_frac >= frac_limit {
                    damage = Some(corrupt(
                        packets.len(),
                        format!(
                            "sub-second timestamp {} is not below {frac_limit}",
                            raw.ts_frac
                        ),
                    ));
                    break;
                }
                let frac_ns = if nanos {
                    u64::from(raw.ts_frac)
                } else {
                    u64::from(raw.ts_frac) * 1000
                };
                packets.push(Packet {
                    time_ns: u64::from(raw.ts_sec) * 1_000_000_000 + frac_ns,
                    raw_time: RawTime::Pcap {
                        sec: raw.ts_sec,
                        frac: raw.ts_frac,
                    },
                    link,
                    interface: 0,
                    orig_len: raw.orig_len,
                    data: raw.data.into_owned(),
                });
            }
            Err(e) => {
                damage = Some(damage_at(e, packets.len(), offset));
                break;
            }
        }
    }
    let cap = Capture {
        format: Format::Pcap,
        packets,
        skipped_blocks: 0,
        damage: None,
        header: Header::Pcap(header),
    };
    Ok((cap, damage))
}

/// ns per unit of an interface's if_tsresol (RFC draft pcapng section 4.2):
/// high bit clear: 10^-n s; set: 2^-n s. None when finer than 1 ns or absurd.
fn tsresol_ns(idb: &InterfaceDescriptionBlock) -> (u64, u64) {
    let mut resol = 6u8;
    for o in &idb.options {
        if let InterfaceDescriptionOption::IfTsResol(r) = o {
            resol = *r;
        }
    }
    if resol & 0x80 == 0 {
        let n = u32::from(resol.min(19));
        if n <= 9 {
            (10u64.pow(9 - n), 1)
        } else {
            (1, 10u64.pow(n - 9))
        }
    } else {
        let n = u32::from(resol & 0x7f).min(63);
        (1_000_000_000, 1u64 << n)
    }
}

fn read_pcapng(bytes: &[u8]) -> Result<(Capture, Option<CaptureError>), CaptureError> {
    let (mut rest, mut parser) =
        PcapNgParser::new(bytes).map_err(|e| CaptureError::BadHeader(e.to_string()))?;
    let section = parser.section().clone();
    let mut packets = Vec::new();
    let mut interfaces: Vec<InterfaceDescriptionBlock<'static>> = Vec::new();
    let mut skipped = 0usize;
    let mut damage = None;
    while !rest.is_empty() {
        let offset = bytes.len() - rest.len();
        let block = match parser.next_block(rest) {
            Ok((r, b)) => {
                rest = r;
                b
            }
            Err(e) => {
                damage = Some(damage_at(e, packets.len(), offset));
                break;
            }
        };
        match block {
            Block::InterfaceDescription(idb) => {
                let code = u32::from(idb.linktype);
                if LinkType::from_pcap(code).is_none() {
                    return Err(CaptureError::UnsupportedLinkType(code));
                }
                interfaces.push(idb.into_owned());
            }
            Block::EnhancedPacket(epb) => {
                let Some(idb) = interfaces.get(epb.interface_id as usize) else {
                    damage = Some(CaptureError::Corrupt {
                        packets: packets.len(),
                        offset,
                        reason: format!(
                            "packet names interface {} which is not described",
                            epb.interface_id
                        ),
                    });
                    break;
                };
                let link = LinkType::from_pcap(u32::from(idb.linktype))
                    .ok_or(CaptureError::UnsupportedLinkType(u32::from(idb.linktype)))?;
                let units = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                let (mul, div) = tsresol_ns(idb);
                let time_ns = u64::try_from(u128::from(units) * u128::from(mul) / u128::from(div))
                    .unwrap_or(u64::MAX);
                packets.push(Packet {
                    time_ns,
                    raw_time: RawTime::PcapNg(units),
                    link,
                    interface: epb.interface_id,
                    orig_len: epb.original_len,
                    data: epb.data.into_owned(),
                });
            }
            Block::SectionHeader(_) => {
                // A second section restarts interface numbering; this reader keeps one section.
                damage = Some(CaptureError::Corrupt {
                    packets: packets.len(),
                    offset,
                    reason: "more than one pcapng section is not supported".into(),
                });
                break;
            }
            _ => skipped += 1,
        }
    }
    let cap = Capture {
        format: Format::PcapNg,
        packets,
        skipped_blocks: skipped,
        damage: None,
        header: Header::PcapNg {
            section,
            interfaces,
        },
    };
    Ok((cap, damage))
}

/// A little-endian microsecond pcap of `(time_ns, frame)` records with the
/// given link type (tests, fuzz seeds, examples). Times are cut to the
/// microsecond.
pub fn write_pcap(link_type: u32, records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let header = PcapHeader {
        datalink: link_type.into(),
        endianness: pcap_file::Endianness::Little,
        ..PcapHeader::default()
    };
    let mut out = Vec::new();
    // Writing into a Vec fails only on allocation failure, which aborts.
    if let Ok(mut w) = PcapWriter::with_header(&mut out, header) {
        for (time_ns, frame) in records {
            let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
            let raw = RawPcapPacket {
                ts_sec: u32::try_from(time_ns / 1_000_000_000).unwrap_or(u32::MAX),
                ts_frac: (time_ns % 1_000_000_000 / 1000) as u32,
                incl_len: len,
                orig_len: len,
                data: Cow::Borrowed(frame),
            };
            if w.write_raw_packet(&raw).is_err() {
                break;
            }
        }
    }
    out
}

/// A pcapng (one section, one interface with nanosecond timestamps) of
/// `(time_ns, frame)` records with the given link type (tests, examples).
pub fn write_pcapng(link_type: u32, records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok(mut w) = PcapNgWriter::new(&mut out) {
        let idb = InterfaceDescriptionBlock {
            linktype: link_type.into(),
            snaplen: 0,
            // if_tsresol 9: timestamps count nanoseconds.
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        };
        if w.write_pcapng_block(idb).is_ok() {
            for (time_ns, frame) in records {
                let epb = EnhancedPacketBlock {
                    interface_id: 0,
                    // pcap-file stores the Duration's nanoseconds as the raw
                    // timestamp units (see `RawTime::PcapNg`).
                    timestamp: Duration::from_nanos(*time_ns),
                    original_len: u32::try_from(frame.len()).unwrap_or(u32::MAX),
                    data: Cow::Borrowed(frame),
                    options: vec![],
                };
                if w.write_pcapng_block(epb).is_err() {
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_no_capture_are_bad_input() {
        for bytes in [&b""[..], b"abc", b"GIF89a and more"] {
            let err = Capture::read(bytes).unwrap_err();
            assert!(matches!(err, CaptureError::NotACapture), "{err}");
            assert!(err.is_bad_input() && !err.is_environment());
        }
        let missing = Capture::read_file(Path::new("/nonexistent/x.pcap")).unwrap_err();
        assert!(
            missing.is_bad_input() && !missing.is_environment(),
            "{missing}"
        );
    }
}
