//! Making and changing devices and addresses over route netlink
//! (rtnetlink(7): `RTM_NEWLINK`, `RTM_DELLINK`, `RTM_NEWADDR`,
//! `RTM_DELADDR`, `RTM_NEWROUTE`): what `ip link add ... type veth`,
//! `ip link set ... up|master|address|mtu|arp`, `ip addr add|del` and
//! `ip route add|replace` do, without a program per step.
//!
//! Creating a namespace stays with `ip netns add` (it is a mount, not a
//! netlink request).

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use netlink_packet_route::address::{
    AddressAttribute, AddressHeaderFlags, AddressMessage, AddressScope,
};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteMetric, RouteProtocol,
    RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::in_netns;
use crate::HostError;

/// A veth pair: `name` in namespace `netns` and its peer `peer` in
/// `peer_netns`, both down (`ip link add NAME netns NS type veth peer name
/// PEER netns PEER_NS`). The request is made from the caller's namespace
/// and names both targets by file descriptor (`IFLA_NET_NS_FD`), so the
/// ends are born where they belong.
pub fn add_veth(name: &str, netns: &str, peer: &str, peer_netns: &str) -> Result<(), HostError> {
    let (own, other) = (crate::netns::open(netns)?, crate::netns::open(peer_netns)?);
    let mut peer_message = LinkMessage::default();
    peer_message.attributes = vec![
        LinkAttribute::IfName(peer.to_string()),
        LinkAttribute::NetNsFd(other.as_raw_fd()),
    ];
    let mut message = LinkMessage::default();
    message.attributes = vec![
        LinkAttribute::IfName(name.to_string()),
        LinkAttribute::NetNsFd(own.as_raw_fd()),
        LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Veth),
            LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer_message))),
        ]),
    ];
    let what = format!("adding veth {name} in {netns} with peer {peer} in {peer_netns}");
    // The files stay open until the kernel has answered.
    let result = in_netns(None, &what, move |socket| {
        socket.create(RouteNetlinkMessage::NewLink(message))
    });
    drop((own, other));
    result
}

/// A bridge `name` in `netns`, down (`ip link add NAME type bridge`).
pub fn add_bridge(netns: &str, name: &str) -> Result<(), HostError> {
    let mut message = LinkMessage::default();
    message.attributes = vec![
        LinkAttribute::IfName(name.to_string()),
        LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Bridge)]),
    ];
    let what = format!("adding bridge {name} in {netns}");
    in_netns(Some(netns), &what, move |socket| {
        socket.create(RouteNetlinkMessage::NewLink(message))
    })
}

/// Brings `dev` in `netns` up (`ip link set DEV up`).
pub fn set_up(netns: &str, dev: &str) -> Result<(), HostError> {
    let mut message = LinkMessage::default();
    message.header.flags = LinkFlags::Up;
    message.header.change_mask = LinkFlags::Up;
    message.attributes = vec![LinkAttribute::IfName(dev.to_string())];
    change_link(netns, &format!("setting {dev} up in {netns}"), message)
}

/// Makes `controller` (a bridge) the controller of `dev`, both in `netns`
/// (`ip link set DEV master CONTROLLER`).
pub fn set_controller(netns: &str, dev: &str, controller: &str) -> Result<(), HostError> {
    let index = super::link(Some(netns), controller)?.ifindex;
    let mut message = LinkMessage::default();
    message.attributes = vec![
        LinkAttribute::IfName(dev.to_string()),
        LinkAttribute::Controller(index),
    ];
    let what = format!("adding {dev} to {controller} in {netns}");
    change_link(netns, &what, message)
}

/// Deletes `dev` in `netns`, and with a veth its peer (`ip link del DEV`).
pub fn delete(netns: &str, dev: &str) -> Result<(), HostError> {
    let mut message = LinkMessage::default();
    message.attributes = vec![LinkAttribute::IfName(dev.to_string())];
    let what = format!("deleting {dev} in {netns}");
    in_netns(Some(netns), &what, move |socket| {
        socket
            .request(RouteNetlinkMessage::DelLink(message), false)
            .map(drop)
    })
}

/// Adds `addr/prefix_len` to `dev` in `netns` (`ip addr add`). An IPv6
/// address skips duplicate address detection (`nodad`): the callers place
/// addresses in namespaces they made, and DAD would hold the address
/// unusable for a second or more.
pub fn add_address(netns: &str, dev: &str, addr: IpAddr, prefix_len: u8) -> Result<(), HostError> {
    let message = address_message(netns, dev, addr, prefix_len)?;
    let what = format!("adding {addr}/{prefix_len} to {dev} in {netns}");
    in_netns(Some(netns), &what, move |socket| {
        socket.create(RouteNetlinkMessage::NewAddress(message))
    })
}

/// Takes `addr/prefix_len` off `dev` in `netns` (`ip addr del`).
pub fn delete_address(
    netns: &str,
    dev: &str,
    addr: IpAddr,
    prefix_len: u8,
) -> Result<(), HostError> {
    let message = address_message(netns, dev, addr, prefix_len)?;
    let what = format!("deleting {addr}/{prefix_len} from {dev} in {netns}");
    in_netns(Some(netns), &what, move |socket| {
        socket
            .request(RouteNetlinkMessage::DelAddress(message), false)
            .map(drop)
    })
}

/// The `RTM_{NEW,DEL}ADDR` message naming `addr/prefix_len` on `dev`.
fn address_message(
    netns: &str,
    dev: &str,
    addr: IpAddr,
    prefix_len: u8,
) -> Result<AddressMessage, HostError> {
    let mut message = AddressMessage::default();
    message.header.family = match addr {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    message.header.prefix_len = prefix_len;
    message.header.scope = AddressScope::Universe;
    message.header.index = super::link(Some(netns), dev)?.ifindex;
    if addr.is_ipv6() {
        message.header.flags = AddressHeaderFlags::Nodad;
    }
    message.attributes = vec![
        AddressAttribute::Local(addr),
        AddressAttribute::Address(addr),
    ];
    Ok(message)
}

/// Sets `dev`'s hardware address (`ip link set DEV address MAC`).
pub fn set_mac(netns: &str, dev: &str, mac: [u8; 6]) -> Result<(), HostError> {
    let mut message = LinkMessage::default();
    message.attributes = vec![
        LinkAttribute::IfName(dev.to_string()),
        LinkAttribute::Address(mac.to_vec()),
    ];
    change_link(
        netns,
        &format!("setting the MAC of {dev} in {netns}"),
        message,
    )
}

/// Sets `dev`'s MTU (`ip link set DEV mtu MTU`).
pub fn set_mtu(netns: &str, dev: &str, mtu: u32) -> Result<(), HostError> {
    let mut message = LinkMessage::default();
    message.attributes = vec![
        LinkAttribute::IfName(dev.to_string()),
        LinkAttribute::Mtu(mtu),
    ];
    change_link(
        netns,
        &format!("setting MTU {mtu} on {dev} in {netns}"),
        message,
    )
}

/// Turns address resolution on `dev` on or off (`ip link set DEV arp
/// on|off`: the `IFF_NOARP` flag).
pub fn set_arp(netns: &str, dev: &str, on: bool) -> Result<(), HostError> {
    let mut message = LinkMessage::default();
    if !on {
        message.header.flags = LinkFlags::Noarp;
    }
    message.header.change_mask = LinkFlags::Noarp;
    message.attributes = vec![LinkAttribute::IfName(dev.to_string())];
    let what = format!(
        "setting arp {} on {dev} in {netns}",
        if on { "on" } else { "off" }
    );
    change_link(netns, &what, message)
}

/// A route to `dest/prefix_len` through gateway `via` in the main table of
/// `netns` (`ip route add DEST/LEN via VIA`). Both addresses must be of one
/// family.
pub fn add_route(netns: &str, dest: IpAddr, prefix_len: u8, via: IpAddr) -> Result<(), HostError> {
    let what = format!("adding a route to {dest}/{prefix_len} via {via} in {netns}");
    let ((family, _), (via_family, gateway)) = (route_address(dest), route_address(via));
    if family != via_family {
        return Err(HostError::io(
            what,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "destination and gateway of different families",
            ),
        ));
    }
    let message = unicast_route(
        dest,
        prefix_len,
        RouteScope::Universe,
        [RouteAttribute::Gateway(gateway)],
    );
    in_netns(Some(netns), &what, move |socket| {
        socket.create(RouteNetlinkMessage::NewRoute(message))
    })
}

/// The route to `dest/prefix_len` out of `dev` in the main table of
/// `netns`, made or replaced, with a minimum retransmission timeout
/// (`ip route replace DEST/LEN dev DEV rto_min MS`: `RTAX_RTO_MIN`, which
/// TCP reads for connections on the route, net/ipv4/tcp.c `tcp_rto_min`).
pub fn replace_route_rto_min(
    netns: &str,
    dest: IpAddr,
    prefix_len: u8,
    dev: &str,
    rto_min: Duration,
) -> Result<(), HostError> {
    let index = super::link(Some(netns), dev)?.ifindex;
    let ms = u32::try_from(rto_min.as_millis()).unwrap_or(u32::MAX);
    let what = format!("setting rto_min {ms}ms on the route to {dest}/{prefix_len} in {netns}");
    let message = unicast_route(
        dest,
        prefix_len,
        RouteScope::Link,
        [
            RouteAttribute::Oif(index),
            // Locked, as `ip route ... rto_min` locks it: TCP reads the
            // metric only when its lock bit is set (include/net/tcp.h
            // `tcp_rto_min`, `dst_metric_locked`).
            RouteAttribute::Metrics(vec![
                RouteMetric::Lock(1 << RTAX_RTO_MIN),
                RouteMetric::RtoMin(ms),
            ]),
        ],
    );
    in_netns(Some(netns), &what, move |socket| {
        socket.replace(RouteNetlinkMessage::NewRoute(message))
    })
}

/// An address as a route attribute takes it, with its family.
fn route_address(addr: IpAddr) -> (AddressFamily, RouteAddress) {
    match addr {
        IpAddr::V4(a) => (AddressFamily::Inet, RouteAddress::Inet(a)),
        IpAddr::V6(a) => (AddressFamily::Inet6, RouteAddress::Inet6(a)),
    }
}

/// A unicast route to `dest/prefix_len` of the main table, as `ip route`
/// makes one (protocol boot), with `next_hop` saying where it leads.
fn unicast_route(
    dest: IpAddr,
    prefix_len: u8,
    scope: RouteScope,
    next_hop: impl IntoIterator<Item = RouteAttribute>,
) -> RouteMessage {
    let (family, dest) = route_address(dest);
    let mut message = RouteMessage::default();
    message.header.address_family = family;
    message.header.destination_prefix_length = prefix_len;
    message.header.table = RouteHeader::RT_TABLE_MAIN;
    message.header.protocol = RouteProtocol::Boot;
    message.header.scope = scope;
    message.header.kind = RouteType::Unicast;
    message.attributes = std::iter::once(RouteAttribute::Destination(dest))
        .chain(next_hop)
        .collect();
    message
}

/// `RTAX_RTO_MIN`'s index in a route's metrics (include/uapi/linux/rtnetlink.h).
const RTAX_RTO_MIN: u32 = 13;

/// Sends a change of an existing link (`RTM_NEWLINK` without
/// `NLM_F_CREATE`: the kernel's setlink).
fn change_link(netns: &str, what: &str, message: LinkMessage) -> Result<(), HostError> {
    in_netns(Some(netns), what, move |socket| {
        socket
            .request(RouteNetlinkMessage::NewLink(message), false)
            .map(drop)
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};

    use super::*;

    /// One TCP exchange from `from` to `to`: proves the devices are up and
    /// the addresses are there, as traffic sees them.
    fn exchange(from: &str, to: &str, addr: SocketAddr) {
        let listener = crate::netns::run_in(Some(to), move || TcpListener::bind(addr))
            .unwrap()
            .unwrap();
        let client = crate::netns::spawn_in(from, move || -> std::io::Result<()> {
            TcpStream::connect(addr)?.write_all(b"ping")
        })
        .unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        client.join().unwrap().unwrap().unwrap();
        assert_eq!(got, b"ping");
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn a_veth_pair_with_addresses_carries_tcp_over_ipv4_and_ipv6() {
        let ns = crate::test_lab::veth_pair("hostsetup");
        let (a, b) = (ns[0].name(), ns[1].name());
        let e = add_veth("va", a, "vb", b).unwrap_err().to_string();
        assert!(
            e.contains("adding veth va"),
            "a second pair of the same names: {e}"
        );
        for (netns, dev, v4, v6) in [
            (a, "va", Ipv4Addr::new(10, 9, 0, 1), "fd09::1"),
            (b, "vb", Ipv4Addr::new(10, 9, 0, 2), "fd09::2"),
        ] {
            add_address(netns, dev, v4.into(), 24).unwrap();
            add_address(netns, dev, v6.parse::<Ipv6Addr>().unwrap().into(), 64).unwrap();
            set_up(netns, dev).unwrap();
            set_up(netns, "lo").unwrap();
        }
        exchange(a, b, "10.9.0.2:7001".parse().unwrap());
        exchange(a, b, "[fd09::2]:7002".parse().unwrap());
        // An address on b's loopback, reached from a through a route via b.
        let far = Ipv4Addr::new(10, 99, 0, 1);
        add_address(b, "lo", far.into(), 32).unwrap();
        add_route(a, far.into(), 32, Ipv4Addr::new(10, 9, 0, 2).into()).unwrap();
        exchange(a, b, SocketAddr::new(far.into(), 7003));
        let mixed = add_route(
            a,
            far.into(),
            32,
            "fd09::2".parse::<Ipv6Addr>().unwrap().into(),
        );
        assert!(mixed
            .unwrap_err()
            .to_string()
            .contains("different families"));
        // The offload settings read back as set.
        for on in [false, true] {
            super::super::set_tx_checksum(Some(a), "va", on).unwrap();
            assert_eq!(super::super::tx_checksum(Some(a), "va").unwrap(), on);
            super::super::set_gro(Some(a), "va", on).unwrap();
        }
        delete(a, "va").unwrap();
        assert!(
            super::super::link(Some(b), "vb").is_err(),
            "the peer goes too"
        );
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn a_port_joins_a_bridge() {
        testkit::require_root("network namespaces");
        let ns = [
            testkit::Netns::new("hostsetup-sw"),
            testkit::Netns::new("hostsetup-h"),
        ];
        let (sw, h) = (ns[0].name(), ns[1].name());
        add_bridge(sw, "br0").unwrap();
        add_veth("port0", sw, "eth0", h).unwrap();
        set_controller(sw, "port0", "br0").unwrap();
        set_up(sw, "br0").unwrap();
        let bridge = super::super::link(Some(sw), "br0").unwrap();
        let port = super::super::link(Some(sw), "port0").unwrap();
        assert_eq!(port.controller, Some(bridge.ifindex));
        assert!(bridge.up && !port.up);
        let e = set_controller(sw, "port0", "br-none")
            .unwrap_err()
            .to_string();
        assert!(e.contains("br-none"), "{e}");
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn link_attributes_addresses_and_a_routes_rto_min_read_back() {
        let ns = crate::test_lab::veth_pair("hostattr");
        let a = ns[0].name();
        set_mac(a, "va", [0x02, 0, 0, 0, 0xaa, 0x01]).unwrap();
        set_mtu(a, "va", 1400).unwrap();
        set_arp(a, "va", false).unwrap();
        let va = super::super::link(Some(a), "va").unwrap();
        assert_eq!(va.mac, Some([0x02, 0, 0, 0, 0xaa, 0x01]));
        assert_eq!(va.mtu, Some(1400));
        assert!(!va.arp);
        set_arp(a, "va", true).unwrap();
        assert!(super::super::link(Some(a), "va").unwrap().arp);

        let v4: IpAddr = "10.9.1.1".parse().unwrap();
        let v6: IpAddr = "fd09:1::1".parse().unwrap();
        add_address(a, "va", v4, 24).unwrap();
        add_address(a, "va", v6, 64).unwrap();
        let on = super::super::addresses(Some(a), "va").unwrap();
        assert!(on.contains(&(v4, 24)) && on.contains(&(v6, 64)), "{on:?}");
        delete_address(a, "va", v4, 24).unwrap();
        let on = super::super::addresses(Some(a), "va").unwrap();
        assert!(!on.contains(&(v4, 24)) && on.contains(&(v6, 64)), "{on:?}");
        let e = delete_address(a, "va", v4, 24).unwrap_err().to_string();
        assert!(e.contains("deleting 10.9.1.1/24 from va"), "{e}");

        // Replacing twice leaves one route, with the second value.
        set_up(a, "va").unwrap();
        let far: IpAddr = "10.9.2.7".parse().unwrap();
        for ms in [10, 25] {
            replace_route_rto_min(a, far, 32, "va", Duration::from_millis(ms)).unwrap();
        }
        let shown = crate::command::ip(&["-n", a, "route", "show", "10.9.2.7/32"]).unwrap();
        assert_eq!(shown.lines().count(), 1, "{shown}");
        assert!(
            shown.contains("dev va") && shown.contains("rto_min lock 25ms"),
            "{shown}"
        );
    }
}
