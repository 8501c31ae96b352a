//! The ethtool generic-netlink family: the two requests Steer sends
//! (`ETHTOOL_MSG_RSS_GET`, `ETHTOOL_MSG_CHANNELS_GET`) and the parsers for
//! their replies.
//!
//! Numbers are from include/uapi/linux/ethtool_netlink_generated.h (Linux
//! 6.14+; include/uapi/linux/ethtool_netlink.h before), and the message
//! layout from Documentation/networking/ethtool-netlink.rst ("RSS_GET",
//! "CHANNELS_GET"): every request carries a nested request header
//! (`ETHTOOL_A_*_HEADER`) naming the device; the reply repeats the header
//! (with `ETHTOOL_A_HEADER_DEV_INDEX`) and the data attributes.

use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, Nla, ParseableParametrized, NLA_F_NESTED,
};
use netlink_packet_generic::{GenlFamily, GenlHeader};
use serde::Serialize;

use super::attr::{attrs, AttrError};

/// `ETHTOOL_GENL_NAME` / `ETHTOOL_FAMILY_NAME`.
pub const FAMILY_NAME: &str = "ethtool";
/// `ETHTOOL_GENL_VERSION`.
pub const FAMILY_VERSION: u8 = 1;

/// `ETHTOOL_MSG_CHANNELS_GET` (user -> kernel message ids, enum starting at
/// `ETHTOOL_MSG_USER_NONE = 0`).
pub const MSG_CHANNELS_GET: u8 = 17;
/// `ETHTOOL_MSG_RSS_GET` (Linux 6.3+).
pub const MSG_RSS_GET: u8 = 38;
/// `ETHTOOL_MSG_CHANNELS_GET_REPLY` (kernel -> user ids).
pub const MSG_CHANNELS_GET_REPLY: u8 = 18;
/// `ETHTOOL_MSG_RSS_GET_REPLY`.
pub const MSG_RSS_GET_REPLY: u8 = 38;

/// `ETHTOOL_A_HEADER_*`: the nested request/reply header.
pub const A_HEADER_DEV_INDEX: u16 = 1;
pub const A_HEADER_DEV_NAME: u16 = 2;

/// `ETHTOOL_A_CHANNELS_*`.
pub const A_CHANNELS_HEADER: u16 = 1;
pub const A_CHANNELS_RX_MAX: u16 = 2;
pub const A_CHANNELS_TX_MAX: u16 = 3;
pub const A_CHANNELS_OTHER_MAX: u16 = 4;
pub const A_CHANNELS_COMBINED_MAX: u16 = 5;
pub const A_CHANNELS_RX_COUNT: u16 = 6;
pub const A_CHANNELS_TX_COUNT: u16 = 7;
pub const A_CHANNELS_OTHER_COUNT: u16 = 8;
pub const A_CHANNELS_COMBINED_COUNT: u16 = 9;

/// `ETHTOOL_A_RSS_*`.
pub const A_RSS_HEADER: u16 = 1;
pub const A_RSS_CONTEXT: u16 = 2;
/// u32 bitmask of `ETH_RSS_HASH_*` (include/uapi/linux/ethtool.h).
pub const A_RSS_HFUNC: u16 = 3;
/// binary: array of u32 queue numbers.
pub const A_RSS_INDIR: u16 = 4;
/// binary: the hash key.
pub const A_RSS_HKEY: u16 = 5;
/// u32 bitmask of `RXH_XFRM_*` (Linux 6.8+).
pub const A_RSS_INPUT_XFRM: u16 = 6;

/// `ETH_RSS_HASH_TOP` / `_XOR` / `_CRC32` (bits 0, 1, 2 of the hfunc mask).
pub const ETH_RSS_HASH_TOP: u32 = 1 << 0;
pub const ETH_RSS_HASH_XOR: u32 = 1 << 1;
pub const ETH_RSS_HASH_CRC32: u32 = 1 << 2;
/// `RXH_XFRM_SYM_XOR` / `RXH_XFRM_SYM_OR_XOR` (include/uapi/linux/ethtool.h).
pub const RXH_XFRM_SYM_XOR: u32 = 1 << 0;
pub const RXH_XFRM_SYM_OR_XOR: u32 = 1 << 1;

/// One ethtool genl message: the command and its raw attributes. Requests are
/// built with [`EthtoolMessage::get`]; replies are decoded by the typed
/// parsers below ([`RssReply::parse`], [`Channels::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthtoolMessage {
    pub cmd: u8,
    pub attrs: Vec<u8>,
}

/// `ETHTOOL_A_*_HEADER` nest carrying `ETHTOOL_A_HEADER_DEV_NAME`.
struct RequestHeader<'a> {
    dev: &'a str,
}

impl RequestHeader<'_> {
    fn name_attr(&self) -> DefaultNla {
        let mut name = self.dev.as_bytes().to_vec();
        name.push(0);
        DefaultNla::new(A_HEADER_DEV_NAME, name)
    }
}

impl Nla for RequestHeader<'_> {
    fn value_len(&self) -> usize {
        self.name_attr().buffer_len()
    }
    fn kind(&self) -> u16 {
        // Every ethtool request's header attribute is number 1.
        1 | NLA_F_NESTED
    }
    fn emit_value(&self, buffer: &mut [u8]) {
        self.name_attr().emit(buffer)
    }
}

impl EthtoolMessage {
    /// A GET request (`cmd` is `MSG_RSS_GET` or `MSG_CHANNELS_GET`) for `dev`.
    pub fn get(cmd: u8, dev: &str) -> Self {
        let header = RequestHeader { dev };
        let mut attrs = vec![0; header.buffer_len()];
        header.emit(&mut attrs);
        EthtoolMessage { cmd, attrs }
    }
}

impl GenlFamily for EthtoolMessage {
    fn family_name() -> &'static str {
        FAMILY_NAME
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        FAMILY_VERSION
    }
}

impl Emitable for EthtoolMessage {
    fn buffer_len(&self) -> usize {
        self.attrs.len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        buffer[..self.attrs.len()].copy_from_slice(&self.attrs)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for EthtoolMessage {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        Ok(EthtoolMessage {
            cmd: header.cmd,
            attrs: buf.to_vec(),
        })
    }
}

/// The device named in a reply header (`ETHTOOL_A_HEADER_DEV_INDEX`, `_NAME`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyHeader {
    pub ifindex: Option<u32>,
    pub dev: Option<String>,
}

impl ReplyHeader {
    fn parse(value: &[u8]) -> Result<Self, AttrError> {
        let mut header = ReplyHeader::default();
        for a in attrs(value)? {
            match a.kind {
                A_HEADER_DEV_INDEX => header.ifindex = Some(a.u32("ETHTOOL_A_HEADER_DEV_INDEX")?),
                A_HEADER_DEV_NAME => header.dev = Some(a.string("ETHTOOL_A_HEADER_DEV_NAME")?),
                _ => {}
            }
        }
        Ok(header)
    }
}

/// `ETHTOOL_MSG_RSS_GET_REPLY`, as the kernel sent it (net/ethtool/rss.c
/// rss_fill_reply: each attribute is left out when the driver reports
/// nothing for it, e.g. `INDIR` when the table size is 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RssReply {
    pub header: ReplyHeader,
    pub context: Option<u32>,
    /// `ETH_RSS_HASH_*` bitmask.
    pub hfunc: Option<u32>,
    pub indir: Vec<u32>,
    pub hkey: Vec<u8>,
    /// `RXH_XFRM_*` bitmask.
    pub input_xfrm: Option<u32>,
}

impl RssReply {
    /// Parses the attributes of an RSS_GET reply. Unknown attributes (newer
    /// kernels add some, e.g. `ETHTOOL_A_RSS_FLOW_HASH`) are skipped.
    pub fn parse(buf: &[u8]) -> Result<Self, AttrError> {
        let mut reply = RssReply::default();
        for a in attrs(buf)? {
            match a.kind {
                A_RSS_HEADER => reply.header = ReplyHeader::parse(a.value)?,
                A_RSS_CONTEXT => reply.context = Some(a.u32("ETHTOOL_A_RSS_CONTEXT")?),
                A_RSS_HFUNC => reply.hfunc = Some(a.u32("ETHTOOL_A_RSS_HFUNC")?),
                A_RSS_INDIR => reply.indir = a.u32_array("ETHTOOL_A_RSS_INDIR")?,
                A_RSS_HKEY => reply.hkey = a.value.to_vec(),
                A_RSS_INPUT_XFRM => reply.input_xfrm = Some(a.u32("ETHTOOL_A_RSS_INPUT_XFRM")?),
                _ => {}
            }
        }
        Ok(reply)
    }
}

/// Current and maximum number of one kind of channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChannelCount {
    pub current: u32,
    pub max: u32,
}

/// Channel counts (`ethtool -l`). A kind the device does not have is `None`
/// (the kernel leaves out both attributes when its maximum is 0,
/// net/ethtool/channels.c channels_fill_reply).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Channels {
    pub rx: Option<ChannelCount>,
    pub tx: Option<ChannelCount>,
    pub other: Option<ChannelCount>,
    pub combined: Option<ChannelCount>,
}

impl Channels {
    /// Receive queues: rx-only plus combined channels.
    pub fn rx_queues(&self) -> u32 {
        self.rx.map_or(0, |c| c.current) + self.combined.map_or(0, |c| c.current)
    }

    /// Parses the attributes of a CHANNELS_GET reply.
    pub fn parse(buf: &[u8]) -> Result<Self, AttrError> {
        let mut max = [None; 4];
        let mut count = [None; 4];
        for a in attrs(buf)? {
            match a.kind {
                A_CHANNELS_RX_MAX..=A_CHANNELS_COMBINED_MAX => {
                    max[usize::from(a.kind - A_CHANNELS_RX_MAX)] =
                        Some(a.u32("ETHTOOL_A_CHANNELS_*_MAX")?)
                }
                A_CHANNELS_RX_COUNT..=A_CHANNELS_COMBINED_COUNT => {
                    count[usize::from(a.kind - A_CHANNELS_RX_COUNT)] =
                        Some(a.u32("ETHTOOL_A_CHANNELS_*_COUNT")?)
                }
                _ => {}
            }
        }
        let kind = |i: usize| match (count[i], max[i]) {
            (None, None) => None,
            (c, m) => Some(ChannelCount {
                current: c.unwrap_or(0),
                max: m.unwrap_or(0),
            }),
        };
        Ok(Channels {
            rx: kind(0),
            tx: kind(1),
            other: kind(2),
            combined: kind(3),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rss_get_request_bytes() {
        let msg = EthtoolMessage::get(MSG_RSS_GET, "eth0");
        // nest(len 16, type 1|NESTED) { DEV_NAME(len 9, type 2) "eth0\0" + 3 pad }
        assert_eq!(
            msg.attrs,
            [
                16, 0, 0x01, 0x80, //
                9, 0, 2, 0, b'e', b't', b'h', b'0', 0, 0, 0, 0
            ]
        );
        assert_eq!(msg.command(), 38);
        assert_eq!(msg.version(), 1);
    }

    /// An RSS_GET reply as Linux 6.18 builds it for a 4-entry table and a
    /// 40-byte key (values in host byte order, little endian here).
    fn rss_reply_bytes() -> Vec<u8> {
        let mut b = vec![
            // header nest: DEV_INDEX = 4, DEV_NAME = "eth0"
            24, 0, 0x01, 0x80, 8, 0, 1, 0, 4, 0, 0, 0, 9, 0, 2, 0, b'e', b't', b'h', b'0', 0, 0, 0,
            0, //
            // INDIR = [0, 1, 0, 1]
            20, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, //
            // HFUNC = toeplitz
            8, 0, 3, 0, 1, 0, 0, 0, //
            // INPUT_XFRM = sym-xor
            8, 0, 6, 0, 1, 0, 0, 0, //
            // HKEY, 40 bytes
            44, 0, 5, 0,
        ];
        b.extend_from_slice(&crate::key::MICROSOFT_KEY);
        // an attribute this parser does not know (ETHTOOL_A_RSS_FLOW_HASH, nested)
        b.extend_from_slice(&[4, 0, 8, 0x80]);
        b
    }

    #[test]
    fn rss_reply_parses() {
        let reply = RssReply::parse(&rss_reply_bytes()).unwrap();
        assert_eq!(reply.header.ifindex, Some(4));
        assert_eq!(reply.header.dev.as_deref(), Some("eth0"));
        assert_eq!(reply.indir, vec![0, 1, 0, 1]);
        assert_eq!(reply.hfunc, Some(ETH_RSS_HASH_TOP));
        assert_eq!(reply.input_xfrm, Some(RXH_XFRM_SYM_XOR));
        assert_eq!(reply.hkey, crate::key::MICROSOFT_KEY);
        assert_eq!(reply.context, None);
    }

    #[test]
    fn rss_reply_without_table_or_key() {
        // What a single-queue virtio_net answers: header and HFUNC only.
        let b = [
            24, 0, 0x01, 0x80, 8, 0, 1, 0, 4, 0, 0, 0, 9, 0, 2, 0, b'e', b't', b'h', b'0', 0, 0, 0,
            0, 8, 0, 3, 0, 1, 0, 0, 0,
        ];
        let reply = RssReply::parse(&b).unwrap();
        assert!(reply.indir.is_empty() && reply.hkey.is_empty());
        assert_eq!(reply.hfunc, Some(1));
    }

    #[test]
    fn rss_reply_with_ragged_table_is_an_error() {
        let b = [7, 0, 4, 0, 0, 0, 0, 0];
        let err = RssReply::parse(&b).unwrap_err();
        assert_eq!(err.what, "ETHTOOL_A_RSS_INDIR");
    }

    #[test]
    fn channels_reply_parses() {
        // combined max 1, combined count 1; rx/tx absent (virtio_net).
        let b = [
            12, 0, 0x01, 0x80, 8, 0, 1, 0, 4, 0, 0, 0, //
            8, 0, 5, 0, 1, 0, 0, 0, //
            8, 0, 9, 0, 1, 0, 0, 0,
        ];
        let c = Channels::parse(&b).unwrap();
        assert_eq!(c.combined, Some(ChannelCount { current: 1, max: 1 }));
        assert_eq!(c.rx, None);
        assert_eq!(c.rx_queues(), 1);
        // rx 2 of 8 plus tx 2 of 8 (veth with 2 queues)
        let b = [
            8, 0, 2, 0, 8, 0, 0, 0, 8, 0, 3, 0, 8, 0, 0, 0, //
            8, 0, 6, 0, 2, 0, 0, 0, 8, 0, 7, 0, 2, 0, 0, 0,
        ];
        let c = Channels::parse(&b).unwrap();
        assert_eq!(c.rx, Some(ChannelCount { current: 2, max: 8 }));
        assert_eq!(c.rx_queues(), 2);
    }

    proptest! {
        #[test]
        fn reply_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = RssReply::parse(&bytes);
            let _ = Channels::parse(&bytes);
        }

        #[test]
        fn mutated_replies_never_panic(i in 0usize..200, v in any::<u8>(), cut in 0usize..200) {
            let mut b = rss_reply_bytes();
            let n = b.len();
            b[i % n] = v;
            b.truncate(n - cut.min(n));
            let _ = RssReply::parse(&b);
        }
    }
}
