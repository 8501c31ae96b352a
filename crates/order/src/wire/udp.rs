//! UDP header (RFC 768): only the ports matter here.

use super::{be16, ParseError};

#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    buf: &'a [u8],
}

impl<'a> Datagram<'a> {
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < 8 {
            return Err(ParseError::Truncated);
        }
        Ok(Datagram { buf })
    }
    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }
}
