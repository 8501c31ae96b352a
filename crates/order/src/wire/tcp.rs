//! TCP header (RFC 9293 section 3.1) and its options.

use serde::Serialize;

use super::{be16, be32, ParseError};

/// TCP control bits (the low 8 flag bits of byte 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Flags(pub u8);

impl Flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// The control bits the SRPIC paper (section 3.3) says need immediate
    /// treatment: SYN, FIN, RST, URG, ECE, CWR (everything but ACK and PSH).
    pub fn needs_immediate_delivery(self) -> bool {
        self.0 & !(Self::ACK | Self::PSH) != 0
    }
}

/// What the options area holds, as far as SRPIC cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Options {
    /// No options (data offset 5), or only padding (NOP/EOL).
    None,
    /// Only the timestamp option (RFC 7323), with NOP/EOL padding.
    TimestampOnly,
    /// Any other option (SACK, MSS, window scale, MPTCP, …).
    Other,
    /// The options area was cut by the capture or is malformed.
    Unreadable,
}

/// A checked TCP header view: the 20-byte fixed part is present; the options
/// may be cut short by a capture's snap length (see [`Segment::options`]).
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> Segment<'a> {
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < 20 {
            return Err(ParseError::Truncated);
        }
        let header_len = usize::from(buf[12] >> 4) * 4;
        if header_len < 20 {
            return Err(ParseError::Malformed);
        }
        Ok(Segment { buf, header_len })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }
    pub fn seq(&self) -> u32 {
        be32(self.buf, 4)
    }
    pub fn ack(&self) -> u32 {
        be32(self.buf, 8)
    }
    /// Data offset in bytes (20..=60).
    pub fn header_len(&self) -> usize {
        self.header_len
    }
    pub fn flags(&self) -> Flags {
        Flags(self.buf[13])
    }

    /// Classifies the options (RFC 9293 section 3.2: kind 0 ends the list,
    /// kind 1 is one byte, every other kind has a length byte >= 2).
    pub fn options(&self) -> Options {
        if self.header_len == 20 {
            return Options::None;
        }
        let Some(opts) = self.buf.get(20..self.header_len) else {
            return Options::Unreadable;
        };
        let mut at = 0;
        let mut timestamp = false;
        while at < opts.len() {
            match opts[at] {
                0 => break,
                1 => at += 1,
                kind => {
                    let Some(&len) = opts.get(at + 1) else {
                        return Options::Unreadable;
                    };
                    let len = usize::from(len);
                    if len < 2 || at + len > opts.len() {
                        return Options::Unreadable;
                    }
                    if kind == 8 && len == 10 {
                        timestamp = true;
                    } else {
                        return Options::Other;
                    }
                    at += len;
                }
            }
        }
        if timestamp {
            Options::TimestampOnly
        } else {
            Options::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(opts: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; 20];
        h[12] = (((20 + opts.len()) / 4) as u8) << 4;
        h.extend_from_slice(opts);
        h
    }

    #[test]
    fn options_are_classified() {
        let ts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(
            Segment::new_checked(&header(&ts)).unwrap().options(),
            Options::TimestampOnly
        );
        let sack = [1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(
            Segment::new_checked(&header(&sack)).unwrap().options(),
            Options::Other
        );
        let bad = [1, 1, 8, 0];
        assert_eq!(
            Segment::new_checked(&header(&bad)).unwrap().options(),
            Options::Unreadable
        );
        let cut = header(&ts);
        assert_eq!(
            Segment::new_checked(&cut[..24]).unwrap().options(),
            Options::Unreadable
        );
        assert_eq!(
            Segment::new_checked(&header(&[])).unwrap().options(),
            Options::None
        );
    }

    #[test]
    fn control_bits() {
        assert!(!Flags(Flags::ACK | Flags::PSH).needs_immediate_delivery());
        for bit in [
            Flags::SYN,
            Flags::FIN,
            Flags::RST,
            Flags::URG,
            Flags::ECE,
            Flags::CWR,
        ] {
            assert!(Flags(Flags::ACK | bit).needs_immediate_delivery());
        }
    }
}
