//! The veth checksum pitfall.
//!
//! A socket on one end of a veth pair hands the stack packets with
//! `CHECKSUM_PARTIAL` when the sending veth has tx checksum offload on: the
//! checksum is left for "the hardware", and veth never fills it (the receiver
//! trusts it as `CHECKSUM_UNNECESSARY`). When the receiving veth runs XDP and
//! redirects through a cpumap, the frame is rebuilt from an `xdp_frame` on
//! the remote CPU and that checksum state is lost: the stack then verifies an
//! unfilled checksum and TCP drops the segment. So the side that transmits
//! into the XDP veth must have tx checksum offload off
//! (`ethtool -K PEER tx off`, done by `host::link::set_tx_checksum`).
//!
//! [`check_peer`] finds the peer of a veth (in any named namespace or the
//! root namespace) and reports it when its tx checksum offload is on.

use crate::error::NicError;

/// The peer of veth `dev` (which lives in `netns`): its namespace and name.
/// `None` when `dev` is not a veth or the peer cannot be found.
///
/// A peer in another namespace is found by the namespace id the kernel
/// reports for the link (`IFLA_LINK_NETNSID`), mapped to a name under
/// /run/netns; an id without a name is taken to be the initial namespace,
/// where the peer must be a veth pointing back at `dev`.
pub fn veth_peer(dev: &str, netns: Option<&str>) -> Option<(Option<String>, String)> {
    let me = host::link::link(netns, dev).ok()?;
    if !me.is_veth {
        return None;
    }
    let peer_index = me.peer_ifindex?;
    let Some(nsid) = me.peer_netnsid else {
        let peer = host::link::links(netns)
            .ok()?
            .into_iter()
            .find(|l| l.ifindex == peer_index)?;
        return Some((netns.map(str::to_string), peer.name));
    };
    let ids = host::link::nsid_names(netns).unwrap_or_default();
    let peer_netns = match ids.into_iter().find(|(id, _)| *id == nsid) {
        Some((_, name)) => Some(name),
        None if netns.is_some() => None, // the initial namespace
        None => return None,
    };
    let found = host::link::links(peer_netns.as_deref())
        .ok()?
        .into_iter()
        .find(|l| l.is_veth && l.ifindex == peer_index && l.peer_ifindex == Some(me.ifindex))?;
    Some((peer_netns, found.name))
}

/// Fails with [`NicError::PeerChecksumOffload`] when `dev` is a veth whose
/// peer has tx checksum offload on. A device that is not a veth, or whose
/// peer cannot be found, passes.
pub fn check_peer(dev: &str, netns: Option<&str>) -> Result<(), NicError> {
    let Some((peer_netns, peer)) = veth_peer(dev, netns) else {
        return Ok(());
    };
    // A peer whose setting cannot be read passes, like one that is not found.
    let on = host::link::tx_checksum(peer_netns.as_deref(), &peer).unwrap_or(false);
    if !on {
        return Ok(());
    }
    let fix = match &peer_netns {
        Some(ns) => format!("ip netns exec {ns} ethtool -K {peer} tx off"),
        None => format!("ethtool -K {peer} tx off"),
    };
    Err(NicError::PeerChecksumOffload {
        dev: dev.to_string(),
        peer,
        peer_netns,
        fix,
    })
}
