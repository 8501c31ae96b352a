//! IPv4 header (RFC 791 section 3.1).

use std::net::Ipv4Addr;

use super::{be16, ParseError};

/// A checked IPv4 header view.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> Packet<'a> {
    /// Checks version 4, IHL >= 5 and that the whole header (options included) is present.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < 20 {
            return Err(ParseError::Truncated);
        }
        if buf[0] >> 4 != 4 {
            return Err(ParseError::Malformed);
        }
        let header_len = usize::from(buf[0] & 0x0f) * 4;
        if header_len < 20 {
            return Err(ParseError::Malformed);
        }
        if buf.len() < header_len {
            return Err(ParseError::Truncated);
        }
        Ok(Packet { buf, header_len })
    }

    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Total Length field: header plus payload, as sent (not as captured).
    pub fn total_len(&self) -> u16 {
        be16(self.buf, 2)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buf, 4)
    }

    /// MF set or a non-zero fragment offset: this datagram is a fragment.
    pub fn is_fragment(&self) -> bool {
        let frag = be16(self.buf, 6);
        frag & 0x2000 != 0 || frag & 0x1fff != 0
    }

    /// Fragment offset is zero (this fragment, if any, carries the transport header).
    pub fn is_first_fragment(&self) -> bool {
        be16(self.buf, 6) & 0x1fff == 0
    }

    pub fn protocol(&self) -> u8 {
        self.buf[9]
    }

    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[12], self.buf[13], self.buf[14], self.buf[15])
    }

    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[16], self.buf[17], self.buf[18], self.buf[19])
    }

    pub fn has_options(&self) -> bool {
        self.header_len > 20
    }

    /// The bytes after the header, as captured (may be shorter than announced).
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[self.header_len..]
    }
}
