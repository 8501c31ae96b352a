//! Queueing disciplines over route netlink (`RTM_GETQDISC`,
//! `RTM_NEWQDISC`; tc(8) and net/sched/sch_api.c), instead of running `tc`
//! and parsing its JSON.

use netlink_packet_core::{DefaultNla, Nla};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption, TcStats2};
use netlink_packet_route::RouteNetlinkMessage;

use super::in_netns;
use crate::HostError;

/// `TCA_OPTIONS` (include/uapi/linux/rtnetlink.h). A pfifo's options are a
/// bare `struct tc_fifo_qopt`, not nested attributes, so they are sent as
/// one raw attribute.
const TCA_OPTIONS: u16 = 2;

/// One qdisc of a device, as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    /// `TCA_KIND`: `pfifo`, `noqueue`, `mq`, ...
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
    /// The packet limit of a `pfifo` or `bfifo` (`struct tc_fifo_qopt`).
    pub limit: Option<u32>,
    /// The queue counters of `TCA_STATS2` (`gnet_stats_queue`), when the
    /// kernel sent them.
    pub queue: Option<QdiscQueue>,
}

/// A qdisc's queue counters (`struct gnet_stats_queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QdiscQueue {
    pub qlen: u32,
    pub backlog: u32,
    pub drops: u32,
    pub requeues: u32,
    pub overlimits: u32,
}

/// The qdiscs of device `dev` in namespace `netns` (`tc -s qdisc show dev
/// DEV`): the root and any below it.
pub fn qdiscs(netns: Option<&str>, dev: &str) -> Result<Vec<Qdisc>, HostError> {
    let index = super::link(netns, dev)?.ifindex;
    let what = format!("listing the qdiscs of {dev}");
    in_netns(netns, &what, move |socket| {
        let request = RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default());
        let replies = socket.request(request, true)?;
        Ok(replies
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewQueueDiscipline(m)
                    if u32::try_from(m.header.index) == Ok(index) =>
                {
                    Some(qdisc_of(m))
                }
                _ => None,
            })
            .collect())
    })
}

/// Makes a pfifo of `limit` packets the root qdisc of `dev` in `netns`
/// (`tc qdisc replace dev DEV root pfifo limit N`).
pub fn replace_root_pfifo(netns: &str, dev: &str, limit: u32) -> Result<(), HostError> {
    let index = super::link(Some(netns), dev)?.ifindex;
    let what = format!("setting a pfifo of {limit} packets on {dev} in {netns}");
    let mut message = TcMessage::default();
    message.header.index = i32::try_from(index).unwrap_or(i32::MAX);
    message.header.handle = TcHandle::UNSPEC;
    message.header.parent = TcHandle::ROOT;
    message.attributes = vec![
        TcAttribute::Kind("pfifo".into()),
        TcAttribute::Other(DefaultNla::new(TCA_OPTIONS, limit.to_ne_bytes().to_vec())),
    ];
    in_netns(Some(netns), &what, move |socket| {
        socket.replace(RouteNetlinkMessage::NewQueueDiscipline(message))
    })
}

/// The [`Qdisc`] an `RTM_NEWQDISC` reply describes.
fn qdisc_of(message: TcMessage) -> Qdisc {
    let mut qdisc = Qdisc {
        kind: String::new(),
        handle: message.header.handle.into(),
        parent: message.header.parent.into(),
        limit: None,
        queue: None,
    };
    let mut options = None;
    for attribute in message.attributes {
        match attribute {
            TcAttribute::Kind(kind) => qdisc.kind = kind,
            // A kind the crate does not know keeps its options raw, as one
            // attribute (netlink-packet-route `VecTcOption`).
            TcAttribute::Options(o) => {
                options = o.into_iter().find_map(|o| match o {
                    TcOption::Other(nla) if nla.kind() == TCA_OPTIONS => {
                        let mut value = vec![0; nla.value_len()];
                        nla.emit_value(&mut value);
                        Some(value)
                    }
                    _ => None,
                })
            }
            TcAttribute::Stats2(stats) => {
                qdisc.queue = stats.into_iter().find_map(|s| match s {
                    TcStats2::Queue(q) => Some(QdiscQueue {
                        qlen: q.qlen,
                        backlog: q.backlog,
                        drops: q.drops,
                        requeues: q.requeues,
                        overlimits: q.overlimits,
                    }),
                    _ => None,
                })
            }
            _ => {}
        }
    }
    if matches!(qdisc.kind.as_str(), "pfifo" | "bfifo") {
        qdisc.limit = options.and_then(|o| {
            o.get(..4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        });
    }
    qdisc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two namespaces joined by a veth, `va` up.
    fn veth(prefix: &str) -> [testkit::Netns; 2] {
        let ns = crate::test_lab::veth_pair(prefix);
        crate::link::set_up(ns[0].name(), "va").unwrap();
        ns
    }

    /// The fuzz seed is a real reply: the dump of a namespace whose veth
    /// has a pfifo of 1000 packets as its root (the fifo's options are raw
    /// bytes, not attributes).
    #[test]
    fn the_fuzz_seed_decodes_into_a_pfifo_with_its_limit() {
        use crate::netlink::{decode_messages, Decoded};
        let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/seeds/netlink_reply/getqdisc_dump.bin");
        let dump = std::fs::read(seed).unwrap();
        let found: Vec<Qdisc> = decode_messages::<RouteNetlinkMessage>(&dump, 1)
            .unwrap()
            .into_iter()
            .filter_map(|d| match d {
                Decoded::Message(RouteNetlinkMessage::NewQueueDiscipline(m)) => Some(qdisc_of(m)),
                _ => None,
            })
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        let pfifo = &found[0];
        assert_eq!((pfifo.kind.as_str(), pfifo.limit), ("pfifo", Some(1000)));
        assert_eq!(pfifo.parent, u32::from(TcHandle::ROOT));
        assert_eq!(pfifo.queue.map(|q| q.drops), Some(0));
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn a_replaced_pfifo_is_the_root_qdisc_with_its_limit_and_counters() {
        let ns = veth("hostqdisc");
        let a = ns[0].name();
        for limit in [37, 1000] {
            replace_root_pfifo(a, "va", limit).unwrap();
            let found = qdiscs(Some(a), "va").unwrap();
            let root = found
                .iter()
                .find(|q| q.parent == u32::from(TcHandle::ROOT))
                .unwrap_or_else(|| panic!("no root qdisc in {found:?}"));
            assert_eq!(root.kind, "pfifo");
            assert_eq!(root.limit, Some(limit), "{root:?}");
            let queue = root.queue.expect("the kernel sends TCA_STATS2");
            assert_eq!((queue.drops, queue.qlen), (0, 0));
        }
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn an_unknown_device_is_an_error_naming_it() {
        let ns = veth("hostqdnone");
        let e = replace_root_pfifo(ns[0].name(), "nosuchdev", 10).unwrap_err();
        assert!(e.to_string().contains("nosuchdev"), "{e}");
        let e = qdiscs(Some(ns[0].name()), "nosuchdev").unwrap_err();
        assert!(e.to_string().contains("nosuchdev"), "{e}");
    }
}
