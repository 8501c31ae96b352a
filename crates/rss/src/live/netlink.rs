//! Netlink for live inspection: the request loop is `host::netlink`'s; this
//! adds what only RSS inspection needs: resolving and calling a
//! generic-netlink family (`CTRL_CMD_GETFAMILY`, then ethtool's), and
//! turning a failure into a [`LiveError`] that classifies its errno.

use std::fmt::Debug;

use host::netlink::{NlFailure, NlSocket};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlMessage};

use super::error::LiveError;

/// A netlink failure as a [`LiveError`].
pub trait IntoLive {
    /// Converts to a [`LiveError`] for the operation `what` on device `dev`,
    /// classifying the errno and keeping the kernel's extended-ACK message.
    fn into_live(self, what: &str, dev: &str) -> LiveError;
}

impl IntoLive for NlFailure {
    fn into_live(self, what: &str, dev: &str) -> LiveError {
        match self {
            NlFailure::Errno { error, message } => {
                let what = match message {
                    Some(m) => format!("{what} (kernel says: {m})"),
                    None => what.to_string(),
                };
                LiveError::from_errno(what, dev, error)
            }
            NlFailure::Socket(error) => {
                LiveError::from_errno(format!("{what}: netlink socket"), dev, error)
            }
            NlFailure::Decode(reason) => LiveError::Decode {
                what: what.to_string(),
                reason,
            },
        }
    }
}

/// Resolves a generic-netlink family name to its id (`CTRL_CMD_GETFAMILY`).
pub fn resolve_family(socket: &mut NlSocket, name: &str) -> Result<u16, NlFailure> {
    let request = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName(name.to_string())],
    });
    let replies = socket.request(request, false)?;
    replies
        .iter()
        .flat_map(|m| m.payload.nlas.iter())
        .find_map(|a| match a {
            GenlCtrlAttrs::FamilyId(id) => Some(*id),
            _ => None,
        })
        .ok_or_else(|| NlFailure::Decode(format!("no family id in the reply for '{name}'")))
}

/// Sends a request of a generic-netlink family whose id was resolved.
pub fn genl_request<F>(
    socket: &mut NlSocket,
    family_id: u16,
    payload: F,
    dump: bool,
) -> Result<Vec<F>, NlFailure>
where
    F: GenlFamily
        + netlink_packet_core::Emitable
        + netlink_packet_core::ParseableParametrized<[u8], netlink_packet_generic::GenlHeader>
        + Debug,
{
    let mut message = GenlMessage::from_payload(payload);
    message.set_resolved_family_id(family_id);
    Ok(socket
        .request(message, dump)?
        .into_iter()
        .map(|m| m.payload)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::ethtool_nl::EthtoolMessage;
    use host::netlink::{decode_messages, Decoded};
    use netlink_packet_core::{
        NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST,
    };
    use proptest::prelude::*;

    #[test]
    fn reply_then_ack_decodes() {
        // genl reply: family 0x1a, cmd 38 (RSS_GET_REPLY), version 1, HFUNC = 1
        let mut b = Vec::new();
        b.extend_from_slice(&28u32.to_ne_bytes());
        b.extend_from_slice(&0x1au16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&3u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&[38, 1, 0, 0, 8, 0, 3, 0, 1, 0, 0, 0]);
        // ACK: NLMSG_ERROR with code 0 and the request header
        b.extend_from_slice(&36u32.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes());
        b.extend_from_slice(&0x100u16.to_ne_bytes());
        b.extend_from_slice(&3u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&0i32.to_ne_bytes());
        b.extend_from_slice(&[0; 16]);
        let out = decode_messages::<GenlMessage<EthtoolMessage>>(&b, 3).unwrap();
        assert_eq!(out.len(), 2);
        match &out[0] {
            Decoded::Message(m) => {
                assert_eq!(m.payload.cmd, 38);
                assert_eq!(m.payload.attrs, vec![8, 0, 3, 0, 1, 0, 0, 0]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(out[1], Decoded::End);
    }

    #[test]
    fn request_encodes_with_family_id() {
        let mut m = GenlMessage::from_payload(EthtoolMessage::get(38, "lo"));
        m.set_resolved_family_id(0x1a);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK;
        header.sequence_number = 1;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(m));
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        let mut expected = Vec::new();
        expected.extend_from_slice(&32u32.to_ne_bytes());
        expected.extend_from_slice(&0x1au16.to_ne_bytes());
        expected.extend_from_slice(&5u16.to_ne_bytes());
        expected.extend_from_slice(&1u32.to_ne_bytes());
        expected.extend_from_slice(&0u32.to_ne_bytes());
        expected.extend_from_slice(&[38, 1, 0, 0]);
        expected.extend_from_slice(&[12, 0, 1, 0x80, 7, 0, 2, 0, b'l', b'o', 0, 0]);
        assert_eq!(buf, expected);
    }

    proptest! {
        #[test]
        fn random_replies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), seq in 0u32..4) {
            let _ = decode_messages::<GenlMessage<EthtoolMessage>>(&bytes, seq);
            let _ = decode_messages::<GenlMessage<GenlCtrl>>(&bytes, seq);
        }
    }
}
