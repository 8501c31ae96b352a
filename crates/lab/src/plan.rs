//! The lab's plan: every namespace, device and address, derived from the spec
//! alone, so it is the same across `up`s.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::state::LabState;
use crate::{Host, Lab, LabSpec, Wire, HOST_DEV};

/// The lab's /24 and /64: from the name, so it is stable across `up`s.
fn lab_index(name: &str) -> u8 {
    // FNV-1a
    let h = name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h % 250) as u8 + 1
}

impl Lab {
    pub(crate) fn plan(spec: &LabSpec) -> LabState {
        let index = lab_index(&spec.name);
        let hosts: Vec<Host> = spec
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| Host {
                name: h.clone(),
                netns: format!("{}-{h}", spec.name),
                dev: HOST_DEV.to_string(),
                ipv4: Ipv4Addr::new(10, 77, index, i as u8 + 1),
                ipv6: spec
                    .ipv6
                    .then(|| Ipv6Addr::new(0xfd77, u16::from(index), 0, 0, 0, 0, 0, i as u16 + 1)),
            })
            .collect();
        let pick = |want: &str, default: usize| {
            if spec.hosts.iter().any(|h| h == want) {
                want.to_string()
            } else {
                spec.hosts[default].clone()
            }
        };
        LabState {
            name: spec.name.clone(),
            index,
            receiver: pick("rcv", spec.hosts.len() - 1),
            sender: pick("snd", 0),
            hosts,
            created_netns: Vec::new(),
            switch_netns: (spec.hosts.len() > 2).then(|| format!("{}-sw", spec.name)),
            complete: false,
            owner: spec.owner.clone(),
            wire: spec.wire.then(|| Wire {
                netns: format!("{}-wire", spec.name),
                sender_dev: format!("to-{}", spec.hosts[0]),
                receiver_dev: format!("to-{}", spec.hosts[1]),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_names_and_addresses() {
        let mut spec = LabSpec::new("lab7");
        spec.hosts = vec!["a".into(), "b".into(), "c".into()];
        let state = Lab::plan(&spec);
        assert_eq!(state.receiver, "c");
        assert_eq!(state.sender, "a");
        assert_eq!(state.hosts[1].netns, "lab7-b");
        assert_eq!(state.switch_netns.as_deref(), Some("lab7-sw"));
        let i = lab_index("lab7");
        assert_eq!(state.hosts[2].ipv4, Ipv4Addr::new(10, 77, i, 3));
        assert_eq!(state.hosts[0].ipv6.unwrap().segments()[1], u16::from(i));
    }

    #[test]
    fn plan_with_a_wire() {
        let mut spec = LabSpec::new("lab8");
        spec.wire = true;
        assert!(spec.validate().is_ok());
        let state = Lab::plan(&spec);
        let wire = state.wire.unwrap();
        assert_eq!(wire.netns, "lab8-wire");
        assert_eq!(wire.sender_dev, "to-snd");
        assert_eq!(wire.receiver_dev, "to-rcv");
        spec.hosts.push("c".into());
        assert!(spec.validate().is_err());
    }

    #[test]
    fn a_wired_lab_has_a_wire_and_leaves_the_receiver_free() {
        let spec = LabSpec::wired("lab9");
        assert!(spec.validate().is_ok());
        assert!(spec.wire && !spec.software_rss && !spec.ipv6);
        let state = Lab::plan(&spec);
        assert_eq!(state.wire.unwrap().netns, "lab9-wire");
        assert!(state.hosts.iter().all(|h| h.ipv6.is_none()));
    }
}
