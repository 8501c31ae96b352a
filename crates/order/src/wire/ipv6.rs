//! IPv6 header (RFC 8200 section 3) and the walk over its extension headers
//! (RFC 8200 section 4) to the upper-layer header.

use std::net::Ipv6Addr;

use super::{be16, ParseError};

pub const NEXT_HOP_BY_HOP: u8 = 0;
pub const NEXT_ROUTING: u8 = 43;
pub const NEXT_FRAGMENT: u8 = 44;
pub const NEXT_AH: u8 = 51;
pub const NEXT_DEST_OPTS: u8 = 60;
pub const NEXT_MOBILITY: u8 = 135;
pub const NEXT_HIP: u8 = 139;
pub const NEXT_SHIM6: u8 = 140;

/// A checked IPv6 header with its extension headers walked.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    buf: &'a [u8],
    upper_protocol: u8,
    upper_offset: usize,
    extension_headers: u8,
    fragment: bool,
    first_fragment: bool,
}

impl<'a> Packet<'a> {
    /// Checks the 40-byte header and every extension header it chains to;
    /// stops at the first header that is not an extension header (TCP, UDP,
    /// ICMPv6, ESP, No Next Header, …), or after a non-first fragment header
    /// (the rest is not a header).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < 40 {
            return Err(ParseError::Truncated);
        }
        if buf[0] >> 4 != 6 {
            return Err(ParseError::Malformed);
        }
        let mut next = buf[6];
        let mut at = 40;
        let mut count = 0u8;
        let mut fragment = false;
        let mut first_fragment = true;
        loop {
            let len = match next {
                NEXT_HOP_BY_HOP | NEXT_ROUTING | NEXT_DEST_OPTS | NEXT_MOBILITY | NEXT_HIP
                | NEXT_SHIM6 => {
                    if buf.len() < at + 2 {
                        return Err(ParseError::Truncated);
                    }
                    (usize::from(buf[at + 1]) + 1) * 8
                }
                NEXT_AH => {
                    if buf.len() < at + 2 {
                        return Err(ParseError::Truncated);
                    }
                    (usize::from(buf[at + 1]) + 2) * 4
                }
                NEXT_FRAGMENT => {
                    if buf.len() < at + 8 {
                        return Err(ParseError::Truncated);
                    }
                    let off_flags = be16(buf, at + 2);
                    fragment = true;
                    first_fragment = off_flags & 0xfff8 == 0;
                    8
                }
                _ => break,
            };
            if buf.len() < at + len {
                return Err(ParseError::Truncated);
            }
            next = buf[at];
            at += len;
            count = count.saturating_add(1);
            if fragment && !first_fragment {
                break;
            }
        }
        Ok(Packet {
            buf,
            upper_protocol: next,
            upper_offset: at,
            extension_headers: count,
            fragment,
            first_fragment,
        })
    }

    /// Payload Length field: extension headers plus upper-layer data.
    pub fn payload_len(&self) -> u16 {
        be16(self.buf, 4)
    }

    pub fn src(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buf[8..24]);
        Ipv6Addr::from(a)
    }

    pub fn dst(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buf[24..40]);
        Ipv6Addr::from(a)
    }

    /// The protocol number after the extension headers.
    pub fn upper_protocol(&self) -> u8 {
        self.upper_protocol
    }

    /// Bytes of fixed header plus extension headers.
    pub fn header_len(&self) -> usize {
        self.upper_offset
    }

    pub fn extension_headers(&self) -> u8 {
        self.extension_headers
    }

    pub fn is_fragment(&self) -> bool {
        self.fragment
    }

    pub fn is_first_fragment(&self) -> bool {
        self.first_fragment
    }

    pub fn upper_payload(&self) -> &'a [u8] {
        &self.buf[self.upper_offset..]
    }
}
