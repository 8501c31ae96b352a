//! A checked walker over netlink attributes (`struct nlattr`, RFC 3549
//! section 2.3.2): every read is bounds-checked, so any byte string, however
//! malformed, yields attributes or an [`AttrError`], never a panic (the
//! property test in `tests` feeds it random bytes).

use std::fmt;

use netlink_packet_core::{NlasIterator, NLA_HEADER_SIZE, NLA_TYPE_MASK};

/// A reply attribute that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrError {
    /// The attribute (or message part) being read, e.g. `ETHTOOL_A_RSS_INDIR`.
    pub what: &'static str,
    pub reason: String,
}

impl AttrError {
    pub(crate) fn new(what: &'static str, reason: impl Into<String>) -> Self {
        AttrError {
            what,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for AttrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.reason)
    }
}

impl std::error::Error for AttrError {}

/// One attribute: its type (flags masked off) and its value bytes (padding
/// excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr<'a> {
    pub kind: u16,
    pub value: &'a [u8],
}

impl<'a> Attr<'a> {
    /// A `NLA_U32` value: exactly 4 bytes, host byte order.
    pub fn u32(&self, what: &'static str) -> Result<u32, AttrError> {
        let bytes: [u8; 4] = self
            .value
            .try_into()
            .map_err(|_| AttrError::new(what, format!("u32 of {} bytes", self.value.len())))?;
        Ok(u32::from_ne_bytes(bytes))
    }

    /// A `NLA_U16` value.
    pub fn u16(&self, what: &'static str) -> Result<u16, AttrError> {
        let bytes: [u8; 2] = self
            .value
            .try_into()
            .map_err(|_| AttrError::new(what, format!("u16 of {} bytes", self.value.len())))?;
        Ok(u16::from_ne_bytes(bytes))
    }

    /// An array of u32 in host byte order (`ETHTOOL_A_RSS_INDIR`).
    pub fn u32_array(&self, what: &'static str) -> Result<Vec<u32>, AttrError> {
        let chunks = self.value.chunks_exact(4);
        if !chunks.remainder().is_empty() {
            return Err(AttrError::new(
                what,
                format!("{} bytes is not a whole number of u32", self.value.len()),
            ));
        }
        Ok(chunks
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// A `NLA_NUL_STRING` (the trailing NUL, if any, is dropped; invalid UTF-8
    /// is an error).
    pub fn string(&self, what: &'static str) -> Result<String, AttrError> {
        let bytes = match self.value.iter().position(|&b| b == 0) {
            Some(end) => &self.value[..end],
            None => self.value,
        };
        String::from_utf8(bytes.to_vec()).map_err(|_| AttrError::new(what, "string is not UTF-8"))
    }
}

/// The attributes in `buf`, in order. Stops at the first malformed one with an
/// error.
pub fn attrs(buf: &[u8]) -> Result<Vec<Attr<'_>>, AttrError> {
    let mut out = Vec::new();
    for nla in NlasIterator::new(buf) {
        let nla = nla.map_err(|e| AttrError::new("attribute", e.to_string()))?;
        let kind = nla.kind() & NLA_TYPE_MASK;
        let length = usize::from(nla.length());
        // new_checked guarantees NLA_HEADER_SIZE <= length <= the slice length.
        let value = nla
            .into_inner()
            .get(NLA_HEADER_SIZE..length)
            .ok_or_else(|| AttrError::new("attribute", format!("length {length}")))?;
        out.push(Attr { kind, value });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn walks_aligned_attributes() {
        // u32 attribute 3 = 1; 5-byte binary attribute 5 (padded to 8); nested 1.
        let buf = [
            8, 0, 3, 0, 1, 0, 0, 0, //
            9, 0, 5, 0, 1, 2, 3, 4, 5, 0, 0, 0, //
            4, 0, 1, 0x80,
        ];
        let list = attrs(&buf).unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].kind, 3);
        assert_eq!(list[0].u32("x").unwrap(), 1);
        assert_eq!(list[1].value, &[1, 2, 3, 4, 5]);
        assert_eq!(list[2].kind, 1, "nested flag is masked off");
        assert!(list[2].value.is_empty());
    }

    #[test]
    fn truncated_attribute_is_an_error() {
        assert!(attrs(&[8, 0, 3, 0, 1, 0]).is_err());
        assert!(attrs(&[2, 0, 3, 0]).is_err(), "length below header size");
        assert!(attrs(&[1]).is_err());
        assert_eq!(attrs(&[]).unwrap(), vec![]);
    }

    #[test]
    fn typed_reads_check_length() {
        let a = Attr {
            kind: 1,
            value: &[1, 2, 3],
        };
        assert!(a.u32("a").is_err());
        assert!(a.u16("a").is_err());
        assert!(a.u32_array("a").is_err());
        let s = Attr {
            kind: 2,
            value: b"eth0\0",
        };
        assert_eq!(s.string("s").unwrap(), "eth0");
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(list) = attrs(&bytes) {
                for a in list {
                    let _ = a.u32("x");
                    let _ = a.u32_array("x");
                    let _ = a.string("x");
                    let _ = attrs(a.value);
                }
            }
        }
    }
}
