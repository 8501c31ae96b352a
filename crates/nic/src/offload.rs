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
//! (`ethtool -K PEER tx off`, done by [`crate::sys::set_tx_checksum`]).
//!
//! [`check_peer`] finds the peer of a veth (in any named namespace or the
//! root namespace) and reports it when its tx checksum offload is on.

use serde_json::Value;

use crate::error::NicError;
use crate::sys;

/// One end of a veth pair, as `ip -d -j link show` reports it.
struct LinkInfo {
    ifindex: u64,
    name: String,
    is_veth: bool,
    /// The peer's ifindex (in the peer's namespace).
    peer_ifindex: Option<u64>,
    /// The peer's namespace id, relative to this namespace, when the peer
    /// is in another namespace.
    peer_netnsid: Option<u64>,
}

fn links(dev: Option<&str>) -> Option<Vec<LinkInfo>> {
    let mut args = vec!["-d", "-j", "link", "show"];
    if let Some(dev) = dev {
        args.extend(["dev", dev]);
    }
    let out = host::command::ip(&args).ok()?;
    let value: Value = serde_json::from_str(&out).ok()?;
    let list = value.as_array()?;
    let by_name: Vec<(String, u64)> = list
        .iter()
        .filter_map(|l| Some((l["ifname"].as_str()?.to_string(), l["ifindex"].as_u64()?)))
        .collect();
    Some(
        list.iter()
            .filter_map(|l| {
                let name = l["ifname"].as_str()?.to_string();
                let ifindex = l["ifindex"].as_u64()?;
                let is_veth = l["linkinfo"]["info_kind"].as_str() == Some("veth");
                let peer_netnsid = l["link_netnsid"].as_u64();
                // Same namespace: "link": "peer-name"; elsewhere: "link_index".
                let peer_ifindex = l["link_index"].as_u64().or_else(|| {
                    let peer = l["link"].as_str()?;
                    by_name.iter().find(|(n, _)| n == peer).map(|(_, i)| *i)
                });
                Some(LinkInfo {
                    ifindex,
                    name,
                    is_veth,
                    peer_ifindex,
                    peer_netnsid,
                })
            })
            .collect(),
    )
}

/// The names of the namespaces this namespace has ids for
/// (`ip -j netns list-id`: nsid -> name under /run/netns).
fn nsid_names() -> Vec<(u64, String)> {
    let Ok(out) = host::command::ip(&["-j", "netns", "list-id"]) else {
        return Vec::new();
    };
    let value: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    value
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|e| Some((e["nsid"].as_u64()?, e["name"].as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The peer of veth `dev` (which lives in `netns`): its namespace and name.
/// `None` when `dev` is not a veth or the peer cannot be found.
///
/// A peer in another namespace is found by the namespace id the kernel
/// reports for the link (`IFLA_LINK_NETNSID`), mapped to a name under
/// /run/netns; an id without a name is taken to be the initial namespace,
/// where the peer must be a veth pointing back at `dev`.
pub fn veth_peer(dev: &str, netns: Option<&str>) -> Option<(Option<String>, String)> {
    let dev_owned = dev.to_string();
    let (me, all, ids) = host::netns::run_in(netns, move || {
        (links(Some(&dev_owned)), links(None), nsid_names())
    })
    .ok()?;
    let me = me?.into_iter().next()?;
    if !me.is_veth {
        return None;
    }
    let peer_index = me.peer_ifindex?;
    let Some(nsid) = me.peer_netnsid else {
        let peer = all?.into_iter().find(|l| l.ifindex == peer_index)?;
        return Some((netns.map(str::to_string), peer.name));
    };
    let peer_netns = match ids.into_iter().find(|(id, _)| *id == nsid) {
        Some((_, name)) => Some(name),
        None if netns.is_some() => None, // the initial namespace
        None => return None,
    };
    let found = host::netns::run_in(peer_netns.as_deref(), move || links(None))
        .ok()
        .flatten()?
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
    let name = peer.clone();
    let on = host::netns::run_in(peer_netns.as_deref(), move || {
        sys::tx_checksum(&name).unwrap_or(false)
    })?;
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
