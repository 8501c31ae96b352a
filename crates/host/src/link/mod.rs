//! Network devices through the kernel's own interfaces instead of `ip` and
//! `ethtool`: what route netlink says about them (rtnetlink(7):
//! `RTM_GETLINK`, `RTM_GETNSID`; here), making and changing them (`setup`:
//! veths, bridges, addresses, routes) and their offloads (`offload`: the
//! ethtool ioctls). Answers are typed, and no program has to be installed,
//! found or parsed.
//!
//! Every call runs in a namespace by name (`None`: the caller's own), on a
//! short-lived thread inside it (see [`crate::netns::run_in`]), because a
//! route netlink socket answers for the namespace it was opened in.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::nsid::{NsidAttribute, NsidMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::protocols::NETLINK_ROUTE;

use crate::netlink::{NlFailure, NlSocket};
use crate::HostError;

mod offload;
mod qdisc;
mod setup;
pub use offload::{set_gro, set_tx_checksum, tx_checksum};
pub use qdisc::{qdiscs, replace_root_pfifo, Qdisc, QdiscQueue};
pub use setup::{
    add_address, add_bridge, add_route, add_veth, delete, delete_address, replace_route_rto_min,
    set_arp, set_controller, set_mac, set_mtu, set_up,
};

/// One network device as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub name: String,
    /// The hardware address (`IFLA_ADDRESS`); none for devices without one.
    pub mac: Option<[u8; 6]>,
    pub mtu: Option<u32>,
    /// Whether the device is administratively up (`IFF_UP`).
    pub up: bool,
    /// Whether the device resolves addresses by ARP (no `IFF_NOARP`).
    pub arp: bool,
    /// The ifindex of its controller (a bridge port's bridge: `IFLA_MASTER`).
    pub controller: Option<u32>,
    /// Whether `IFLA_INFO_KIND` says `veth`.
    pub is_veth: bool,
    /// The other end's ifindex (`IFLA_LINK`), in the peer's namespace when
    /// [`peer_netnsid`](Self::peer_netnsid) is set.
    pub peer_ifindex: Option<u32>,
    /// The namespace id of the other end (`IFLA_LINK_NETNSID`), relative to
    /// the namespace asked: set when the peer lives in another namespace.
    pub peer_netnsid: Option<i32>,
    /// The device's counters (`IFLA_STATS64`), when the kernel sent them.
    pub stats: Option<LinkStats>,
}

/// The counters of [`Link`] that the project reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

/// Every device of namespace `netns` (`None`: this one).
pub fn links(netns: Option<&str>) -> Result<Vec<Link>, HostError> {
    in_netns(netns, "listing network devices", |socket| {
        let replies = socket.request(RouteNetlinkMessage::GetLink(LinkMessage::default()), true)?;
        Ok(replies.into_iter().filter_map(link_of).collect())
    })
}

/// Device `dev` of namespace `netns`: an error naming both when there is
/// no such device.
pub fn link(netns: Option<&str>, dev: &str) -> Result<Link, HostError> {
    let what = match netns {
        Some(ns) => format!("device {dev} in namespace {ns}"),
        None => format!("device {dev}"),
    };
    let name = dev.to_string();
    in_netns(netns, &what, move |socket| {
        let mut request = LinkMessage::default();
        request.attributes.push(LinkAttribute::IfName(name));
        let replies = socket.request(RouteNetlinkMessage::GetLink(request), false)?;
        Ok(replies.into_iter().find_map(link_of))
    })?
    .ok_or_else(|| HostError::Io {
        what,
        source: io::Error::new(io::ErrorKind::InvalidData, "no link in the kernel's reply"),
    })
}

/// The addresses on device `dev` of namespace `netns`, as (address,
/// prefix length), IPv4 and IPv6 (`ip addr show dev DEV`).
pub fn addresses(netns: Option<&str>, dev: &str) -> Result<Vec<(IpAddr, u8)>, HostError> {
    let index = link(netns, dev)?.ifindex;
    let what = format!("listing the addresses of {dev}");
    in_netns(netns, &what, move |socket| {
        let request = RouteNetlinkMessage::GetAddress(AddressMessage::default());
        let replies = socket.request(request, true)?;
        Ok(replies
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(m) if m.header.index == index => {
                    let prefix_len = m.header.prefix_len;
                    m.attributes.into_iter().find_map(|a| match a {
                        AddressAttribute::Address(addr) => Some((addr, prefix_len)),
                        _ => None,
                    })
                }
                _ => None,
            })
            .collect())
    })
}

/// The namespaces under /run/netns that namespace `netns` has ids for, as
/// (nsid, name): what `ip netns list-id` shows. A namespace without an id
/// there is left out.
pub fn nsid_names(netns: Option<&str>) -> Result<Vec<(i32, String)>, HostError> {
    let names = crate::netns::names()?;
    in_netns(netns, "reading namespace ids", move |socket| {
        let mut out = Vec::new();
        for name in names {
            // A namespace deleted since the listing has no id to report.
            let Ok(file) = crate::netns::open(&name) else {
                continue;
            };
            let mut request = NsidMessage::default();
            let fd = u32::try_from(file.as_raw_fd()).unwrap_or(u32::MAX);
            request.attributes.push(NsidAttribute::Fd(fd));
            // Nor one being deleted while we ask: skip it, keep the others.
            let Ok(replies) = socket.request(RouteNetlinkMessage::GetNsId(request), false) else {
                continue;
            };
            let id = replies.iter().find_map(|m| match m {
                RouteNetlinkMessage::NewNsId(m) => m.attributes.iter().find_map(|a| match a {
                    NsidAttribute::Id(id) if *id >= 0 => Some(*id),
                    _ => None,
                }),
                _ => None,
            });
            if let Some(id) = id {
                out.push((id, name));
            }
        }
        Ok(out)
    })
}

/// Opens a route netlink socket inside `netns` and runs `query` on it.
pub(crate) fn in_netns<T: Send + 'static>(
    netns: Option<&str>,
    what: &str,
    query: impl FnOnce(&mut NlSocket) -> Result<T, NlFailure> + Send + 'static,
) -> Result<T, HostError> {
    let result = crate::netns::run_in(netns, move || {
        let mut socket = NlSocket::open(NETLINK_ROUTE)?;
        query(&mut socket)
    })?;
    result.map_err(|e| e.into_host(what))
}

/// The [`Link`] a `RTM_NEWLINK` reply describes.
fn link_of(message: RouteNetlinkMessage) -> Option<Link> {
    let RouteNetlinkMessage::NewLink(message) = message else {
        return None;
    };
    let mut link = Link {
        ifindex: message.header.index,
        name: String::new(),
        mac: None,
        mtu: None,
        up: message.header.flags.contains(LinkFlags::Up),
        arp: !message.header.flags.contains(LinkFlags::Noarp),
        controller: None,
        is_veth: false,
        peer_ifindex: None,
        peer_netnsid: None,
        stats: None,
    };
    for attribute in message.attributes {
        match attribute {
            LinkAttribute::IfName(name) => link.name = name,
            LinkAttribute::Address(bytes) => link.mac = bytes.try_into().ok(),
            LinkAttribute::Mtu(mtu) => link.mtu = Some(mtu),
            LinkAttribute::Controller(index) => link.controller = Some(index),
            LinkAttribute::Link(index) => link.peer_ifindex = Some(index),
            LinkAttribute::LinkNetNsId(id) => link.peer_netnsid = Some(id),
            LinkAttribute::LinkInfo(infos) => {
                link.is_veth = infos
                    .iter()
                    .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Veth)));
            }
            LinkAttribute::Stats64(s) => {
                link.stats = Some(LinkStats {
                    rx_packets: s.rx_packets,
                    tx_packets: s.tx_packets,
                    rx_dropped: s.rx_dropped,
                    tx_dropped: s.tx_dropped,
                })
            }
            _ => {}
        }
    }
    Some(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_by_name_and_in_the_dump() {
        let lo = link(None, "lo").unwrap();
        assert_eq!(lo.name, "lo");
        assert!(!lo.is_veth);
        assert!(lo.stats.is_some(), "the kernel sends IFLA_STATS64");
        let all = links(None).unwrap();
        assert!(all
            .iter()
            .any(|l| l.ifindex == lo.ifindex && l.name == "lo"));
    }

    /// The fuzz seeds are real replies: a dump of a namespace holding a
    /// veth pair, and the error for a device that is not there.
    #[test]
    fn the_fuzz_seeds_decode_into_links_and_an_errno() {
        use crate::netlink::{decode_messages, Decoded};
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/netlink_reply");
        let dump = std::fs::read(dir.join("getlink_dump.bin")).unwrap();
        let links: Vec<Link> = decode_messages::<RouteNetlinkMessage>(&dump, 1)
            .unwrap()
            .into_iter()
            .filter_map(|d| match d {
                Decoded::Message(m) => link_of(m),
                _ => None,
            })
            .collect();
        let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["lo", "vb", "va"]);
        assert!(links[1].is_veth && links[1].peer_ifindex == Some(links[2].ifindex));
        let error = std::fs::read(dir.join("getlink_enodev.bin")).unwrap();
        let decoded = decode_messages::<RouteNetlinkMessage>(&error, 2).unwrap();
        assert!(
            matches!(decoded[..], [Decoded::Error { errno, .. }] if errno == libc::ENODEV),
            "{decoded:?}"
        );
    }

    #[test]
    fn a_missing_device_is_an_error_naming_it() {
        let e = link(None, "steer-nodev0").unwrap_err().to_string();
        assert!(e.contains("steer-nodev0"), "{e}");
    }

    #[test]
    fn a_missing_namespace_is_bad_input() {
        let e = link(Some("steer-no-such-netns"), "lo").unwrap_err();
        assert!(e.is_bad_input(), "{e}");
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn a_veth_peer_in_another_namespace_is_found_by_its_nsid() {
        let ns = crate::test_lab::veth_pair("hostlink");
        let pair = (ns[0].name().to_string(), ns[1].name().to_string());
        let va = link(Some(&pair.0), "va").unwrap();
        let vb = link(Some(&pair.1), "vb").unwrap();
        assert!(va.is_veth && vb.is_veth);
        assert!(va.mac.is_some() && va.mac != vb.mac);
        assert_eq!(va.peer_ifindex, Some(vb.ifindex));
        let nsid = va.peer_netnsid.expect("the peer is in another namespace");
        let names = nsid_names(Some(&pair.0)).unwrap();
        assert!(names.contains(&(nsid, pair.1.clone())), "{names:?}");
        assert!(links(Some(&pair.1)).unwrap().iter().any(|l| l.name == "vb"));
    }
}
