//! A small synchronous netlink client: send one request, collect the replies
//! until the kernel's ACK (for a `doit` request) or `NLMSG_DONE` (for a dump),
//! and turn an `NLMSG_ERROR` into an errno with the kernel's extended-ACK
//! message (netlink(7), Documentation/userspace-api/netlink/intro.rst
//! "Extended ACK"). The message types come from the netlink-packet crates;
//! this is only the request/reply loop they leave to their users, written
//! once for route, generic and sock_diag netlink alike.

use std::fmt::Debug;
use std::io;

use netlink_packet_core::{
    NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
    NlasIterator, NLA_TYPE_MASK, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE,
    NLM_F_REQUEST,
};
use netlink_sys::{Socket, SocketAddr};

use crate::HostError;

/// `NLM_F_CAPPED`: the error message carries only the request's header.
const NLM_F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS`: extended-ACK attributes follow.
const NLM_F_ACK_TLVS: u16 = 0x200;
/// `NLMSGERR_ATTR_MSG` (include/uapi/linux/netlink.h).
const NLMSGERR_ATTR_MSG: u16 = 1;
/// Size of `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;

/// Why a request failed.
#[derive(Debug)]
pub enum NlFailure {
    /// The kernel answered with an errno, and possibly an extended-ACK message.
    Errno {
        error: io::Error,
        message: Option<String>,
    },
    /// The socket itself failed (socket, bind, send, recv).
    Socket(io::Error),
    /// A reply that does not decode.
    Decode(String),
}

impl NlFailure {
    /// The errno, if the kernel or the socket returned one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NlFailure::Errno { error, .. } | NlFailure::Socket(error) => error.raw_os_error(),
            NlFailure::Decode(_) => None,
        }
    }

    /// This failure as a [`HostError`] about `what`, keeping the errno's
    /// kind and the kernel's extended-ACK message.
    pub fn into_host(self, what: &str) -> HostError {
        let (what, source) = match self {
            NlFailure::Errno {
                error,
                message: Some(m),
            } => (format!("{what} (kernel says: {m})"), error),
            NlFailure::Errno { error, .. } => (what.to_string(), error),
            NlFailure::Socket(error) => (format!("{what}: netlink socket"), error),
            NlFailure::Decode(reason) => (
                what.to_string(),
                io::Error::new(io::ErrorKind::InvalidData, reason),
            ),
        };
        HostError::io(what, source)
    }
}

/// The extended-ACK message of an `NLMSG_ERROR`, if the kernel sent one.
/// `flags` are the error message's own header flags; `payload` is what
/// follows the error code (the original request, whole or capped, then TLVs).
pub fn extack_message(flags: u16, payload: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let request_len = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        let len: [u8; 4] = payload.get(..4)?.try_into().ok()?;
        u32::from_ne_bytes(len) as usize
    };
    let start = request_len.checked_add(3)? & !3;
    let tlvs = payload.get(start..)?;
    let value = NlasIterator::new(tlvs)
        .map_while(Result::ok)
        .find(|nla| nla.kind() & NLA_TYPE_MASK == NLMSGERR_ATTR_MSG)?
        .value()
        .to_vec();
    // NLA_STRING: up to the first NUL, if any.
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8(value[..end].to_vec())
        .ok()
        .filter(|m| !m.is_empty())
}

/// What one received buffer told us.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<I> {
    Message(I),
    /// ACK (error code 0) or NLMSG_DONE: the answer is complete.
    End,
    Error {
        errno: i32,
        message: Option<String>,
    },
    /// Noop, overrun, or a message for another sequence number.
    Skip,
}

/// Splits a buffer received from a netlink socket into messages, keeping
/// only those answering `seq`. Never panics, whatever the bytes (checked by
/// a property test).
pub fn decode_messages<I>(buf: &[u8], seq: u32) -> Result<Vec<Decoded<I>>, String>
where
    I: NetlinkDeserializable + Debug,
{
    Ok(decode_with_seq(buf)?
        .into_iter()
        .map(|(s, d)| if s == seq { d } else { Decoded::Skip })
        .collect())
}

/// Splits a buffer into messages, each with the sequence number it answers.
fn decode_with_seq<I>(buf: &[u8]) -> Result<Vec<(u32, Decoded<I>)>, String>
where
    I: NetlinkDeserializable + Debug,
{
    let mut out = Vec::new();
    let mut offset = 0usize;
    while offset < buf.len() {
        let rest = &buf[offset..];
        let message =
            NetlinkMessage::<I>::deserialize(rest).map_err(|e| format!("at byte {offset}: {e}"))?;
        let len = message.header.length as usize;
        if len < NLMSG_HDRLEN {
            return Err(format!("at byte {offset}: message length {len}"));
        }
        let flags = message.header.flags;
        let decoded = match message.payload {
            NetlinkPayload::InnerMessage(m) => Decoded::Message(m),
            NetlinkPayload::Done(_) => Decoded::End,
            NetlinkPayload::Error(e) => match e.code {
                None => Decoded::End,
                Some(code) => Decoded::Error {
                    errno: code.get().checked_abs().unwrap_or(i32::MAX),
                    message: extack_message(flags, &e.header),
                },
            },
            _ => Decoded::Skip,
        };
        out.push((message.header.sequence_number, decoded));
        offset = match offset.checked_add((len + 3) & !3) {
            Some(next) => next,
            None => break,
        };
    }
    Ok(out)
}

/// One netlink socket of one protocol.
pub struct NlSocket {
    socket: Socket,
    seq: u32,
}

impl NlSocket {
    /// Opens and binds a socket of `protocol` (`NETLINK_GENERIC`,
    /// `NETLINK_SOCK_DIAG`), asking for extended ACK messages.
    pub fn open(protocol: isize) -> Result<Self, NlFailure> {
        let mut socket = Socket::new(protocol).map_err(NlFailure::Socket)?;
        socket.bind_auto().map_err(NlFailure::Socket)?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(NlFailure::Socket)?;
        // Extended ACK is a courtesy; old kernels reject the option.
        let _ = socket.set_ext_ack(true);
        Ok(NlSocket { socket, seq: 0 })
    }

    /// Sends `payload` and returns every reply to it. `dump` selects
    /// `NLM_F_DUMP` (the answer ends with NLMSG_DONE) instead of a single
    /// object (the answer ends with the ACK).
    pub fn request<I>(&mut self, payload: I, dump: bool) -> Result<Vec<I>, NlFailure>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        self.request_with_flags(payload, if dump { NLM_F_DUMP } else { 0 })
    }

    /// Asks the kernel to create an object (`NLM_F_CREATE | NLM_F_EXCL`: an
    /// object of that name already there is an error, `EEXIST`) and waits
    /// for its ACK.
    pub fn create<I>(&mut self, payload: I) -> Result<(), NlFailure>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        self.request_with_flags(payload, NLM_F_CREATE | NLM_F_EXCL)
            .map(drop)
    }

    /// Asks the kernel to create an object or replace the one of the same
    /// key (`NLM_F_CREATE | NLM_F_REPLACE`, as `ip route replace` does) and
    /// waits for its ACK.
    pub fn replace<I>(&mut self, payload: I) -> Result<(), NlFailure>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        self.request_with_flags(payload, NLM_F_CREATE | NLM_F_REPLACE)
            .map(drop)
    }

    /// [`request`](Self::request) with `flags` added to
    /// `NLM_F_REQUEST | NLM_F_ACK`.
    fn request_with_flags<I>(&mut self, payload: I, flags: u16) -> Result<Vec<I>, NlFailure>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = self.seq;
        let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(payload));
        message.finalize();
        let mut buf = vec![0u8; message.buffer_len()];
        message.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(NlFailure::Socket)?;

        let mut replies = Vec::new();
        loop {
            let (data, _) = self.socket.recv_from_full().map_err(NlFailure::Socket)?;
            if data.is_empty() {
                return Err(NlFailure::Decode("empty read from netlink socket".into()));
            }
            for decoded in decode_messages::<I>(&data, self.seq).map_err(NlFailure::Decode)? {
                match decoded {
                    Decoded::Message(m) => replies.push(m),
                    Decoded::End => return Ok(replies),
                    Decoded::Error { errno, message } => {
                        return Err(NlFailure::Errno {
                            error: io::Error::from_raw_os_error(errno),
                            message,
                        })
                    }
                    Decoded::Skip => {}
                }
            }
        }
    }

    /// Sends every payload as its own `doit` request (with ACK), all in one
    /// datagram: the kernel answers them one after another (netlink(7)), so
    /// N lookups cost one send instead of N round trips. Returns each
    /// request's replies, or its errno, in the order of `payloads`. Callers
    /// keep batches small enough for the socket's receive buffer (the
    /// kernel drops replies that do not fit).
    pub fn request_each<I>(
        &mut self,
        payloads: Vec<I>,
    ) -> Result<Vec<Result<Vec<I>, NlFailure>>, NlFailure>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        let count = payloads.len();
        if count == 0 {
            return Ok(Vec::new());
        }
        let first = self.seq.wrapping_add(1);
        let mut buf = Vec::new();
        for payload in payloads {
            self.seq = self.seq.wrapping_add(1);
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | NLM_F_ACK;
            header.sequence_number = self.seq;
            let mut message = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(payload));
            message.finalize();
            let start = buf.len();
            buf.resize(start + message.buffer_len(), 0);
            message.serialize(&mut buf[start..]);
        }
        self.socket.send(&buf, 0).map_err(NlFailure::Socket)?;

        let mut replies: Vec<Vec<I>> = (0..count).map(|_| Vec::new()).collect();
        let mut outcome: Vec<Option<Result<(), NlFailure>>> = (0..count).map(|_| None).collect();
        let mut open = count;
        while open > 0 {
            let (data, _) = self.socket.recv_from_full().map_err(NlFailure::Socket)?;
            if data.is_empty() {
                return Err(NlFailure::Decode("empty read from netlink socket".into()));
            }
            for (seq, decoded) in decode_with_seq::<I>(&data).map_err(NlFailure::Decode)? {
                let i = seq.wrapping_sub(first) as usize;
                // Answers to earlier requests, or after this one's end.
                let Some(slot) = outcome.get_mut(i).filter(|o| o.is_none()) else {
                    continue;
                };
                match decoded {
                    Decoded::Message(m) => replies[i].push(m),
                    Decoded::End => *slot = Some(Ok(())),
                    Decoded::Error { errno, message } => {
                        *slot = Some(Err(NlFailure::Errno {
                            error: io::Error::from_raw_os_error(errno),
                            message,
                        }))
                    }
                    Decoded::Skip => continue,
                }
                if slot.is_some() {
                    open -= 1;
                }
            }
        }
        Ok(replies
            .into_iter()
            .zip(outcome)
            .map(|(r, o)| match o {
                Some(Err(e)) => Err(e),
                _ => Ok(r),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::RouteNetlinkMessage;
    use proptest::prelude::*;

    /// NLMSG_ERROR -EOPNOTSUPP for a 36-byte request, capped, with an
    /// extended-ACK message "no RSS".
    fn error_reply(seq: u32) -> Vec<u8> {
        let mut b = Vec::new();
        let total: u32 = 16 + 4 + 16 + 12;
        b.extend_from_slice(&total.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes()); // NLMSG_ERROR
        b.extend_from_slice(&(NLM_F_CAPPED | NLM_F_ACK_TLVS).to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&(-libc::EOPNOTSUPP).to_ne_bytes());
        // the request's header (capped): len 36, type 0x1a, flags, seq, pid
        b.extend_from_slice(&36u32.to_ne_bytes());
        b.extend_from_slice(&0x1au16.to_ne_bytes());
        b.extend_from_slice(&5u16.to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        // NLMSGERR_ATTR_MSG "no RSS\0" (len 11, padded to 12)
        b.extend_from_slice(&[11, 0, 1, 0, b'n', b'o', b' ', b'R', b'S', b'S', 0, 0]);
        b
    }

    #[test]
    fn error_with_extack_decodes() {
        let out = decode_messages::<RouteNetlinkMessage>(&error_reply(7), 7).unwrap();
        assert_eq!(
            out,
            vec![Decoded::Error {
                errno: libc::EOPNOTSUPP,
                message: Some("no RSS".into())
            }]
        );
        // Other sequence numbers are skipped.
        let out = decode_messages::<RouteNetlinkMessage>(&error_reply(7), 8).unwrap();
        assert_eq!(out, vec![Decoded::Skip]);
    }

    #[test]
    fn a_failure_keeps_the_errno_and_the_kernels_message() {
        let e = NlFailure::Errno {
            error: io::Error::from_raw_os_error(libc::ENODEV),
            message: Some("no such device".into()),
        };
        assert_eq!(e.errno(), Some(libc::ENODEV));
        let host = e.into_host("device x");
        assert!(
            host.to_string().contains("kernel says: no such device"),
            "{host}"
        );
        match host {
            HostError::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::ENODEV)),
            other => panic!("{other:?}"),
        }
    }

    proptest! {
        #[test]
        fn random_replies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), seq in 0u32..4) {
            let _ = decode_messages::<RouteNetlinkMessage>(&bytes, seq);
            let _ = extack_message(NLM_F_ACK_TLVS, &bytes);
        }

        #[test]
        fn mutated_error_replies_never_panic(i in 0usize..48, v in any::<u8>(), cut in 0usize..48) {
            let mut b = error_reply(1);
            let n = b.len();
            b[i % n] = v;
            b.truncate(n - cut.min(n));
            let _ = decode_messages::<RouteNetlinkMessage>(&b, 1);
        }
    }
}
