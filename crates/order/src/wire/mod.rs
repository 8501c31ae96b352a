//! Checked views of the headers the sorter and the metrics need.
//!
//! In the manner of smoltcp's `wire` module: each header has a view over a
//! byte slice whose `new_checked` verifies the length once; after that no
//! accessor can panic. Untrusted input (captures, the wire) only ever goes
//! through `new_checked`. [`parse`] walks link layer → IP → transport and
//! returns a [`PacketInfo`] with what SRPIC needs (flow key, sequence number,
//! payload length, flags, suitability).

pub mod ethernet;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

mod parse;

pub use parse::{parse, LinkType, PacketInfo, Suitability, TcpInfo, Transport};

/// Why a frame could not be parsed. Kept small and cheap, like smoltcp's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The buffer ends before a header that its outer header announces.
    #[error("truncated packet")]
    Truncated,
    /// A header field holds an impossible value (version, header length, total length).
    #[error("malformed packet")]
    Malformed,
    /// A protocol this parser does not decode (e.g. an ethertype other than IP).
    #[error("unsupported protocol")]
    Unsupported,
}

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
