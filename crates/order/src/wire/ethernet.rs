//! Ethernet II (IEEE 802.3) with up to two 802.1Q / 802.1ad VLAN tags.

use super::{be16, ParseError};

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_QINQ: u16 = 0x88a8;

/// An Ethernet frame with its VLAN tags skipped.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    ethertype: u16,
    vlans: u8,
    payload: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Checks the 14-byte header and each VLAN tag (4 bytes, at most two).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        if buf.len() < 14 {
            return Err(ParseError::Truncated);
        }
        let mut ethertype = be16(buf, 12);
        let mut at = 14;
        let mut vlans = 0;
        while (ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ) && vlans < 2 {
            if buf.len() < at + 4 {
                return Err(ParseError::Truncated);
            }
            ethertype = be16(buf, at + 2);
            at += 4;
            vlans += 1;
        }
        Ok(Frame {
            ethertype,
            vlans,
            payload: &buf[at..],
        })
    }

    /// The ethertype after the VLAN tags.
    pub fn ethertype(&self) -> u16 {
        self.ethertype
    }

    /// How many VLAN tags were skipped.
    pub fn vlan_tags(&self) -> u8 {
        self.vlans
    }

    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_tag_is_skipped() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05, 0x08, 0x00, 0x45]);
        let frame = Frame::new_checked(&f).unwrap();
        assert_eq!(frame.ethertype(), ETHERTYPE_IPV4);
        assert_eq!(frame.vlan_tags(), 1);
        assert_eq!(frame.payload(), &[0x45]);
        assert_eq!(
            Frame::new_checked(&f[..16]).unwrap_err(),
            ParseError::Truncated
        );
    }
}
