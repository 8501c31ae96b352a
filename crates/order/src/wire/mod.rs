//! The project's packet parser, on etherparse's checked header views (no
//! byte of a frame is read any other way, so untrusted input cannot make it
//! panic). [`ip_packet`] walks link layer → IP and returns an [`IpPacket`]
//! (what the load balancer's trace needs); [`parse`] goes on to the
//! transport and returns a [`PacketInfo`] with what SRPIC needs (flow key,
//! sequence number, payload length, flags, suitability).

pub mod ecn;
pub mod tcp;

mod parse;

pub use parse::{
    ip_packet, parse, IpPacket, LinkType, PacketInfo, Suitability, TcpInfo, Transport,
};

/// Why a frame could not be parsed. Kept small and cheap, like smoltcp's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The buffer ends before a header that its outer header announces.
    #[error("truncated packet")]
    Truncated,
    /// A header field holds an impossible value (version, header length, total length).
    #[error("malformed packet")]
    Malformed,
    /// A protocol this parser does not decode (an ethertype other than IP,
    /// an IP version other than 4 and 6).
    #[error("unsupported protocol")]
    Unsupported,
}
