//! What a lab is: its hosts, the optional wire and switch, and how to find
//! them in a lab that is up.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::state::{state_path, LabState};
use crate::LabError;

/// The lab's device name inside every host namespace.
pub const HOST_DEV: &str = "veth0";

/// One host of a lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    /// Network namespace (under /run/netns).
    pub netns: String,
    /// The lab device inside `netns`.
    pub dev: String,
    pub ipv4: Ipv4Addr,
    pub ipv6: Option<Ipv6Addr>,
}

/// The middle namespace of a lab built with [`LabSpec::wire`](crate::LabSpec::wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wire {
    /// Network namespace (under /run/netns).
    pub netns: String,
    /// The device facing the sender (peer of the sender's `veth0`).
    pub sender_dev: String,
    /// The device facing the receiver (peer of the receiver's `veth0`).
    pub receiver_dev: String,
}

/// A lab that is up.
#[derive(Debug, Clone)]
pub struct Lab {
    pub(crate) state: LabState,
}

impl Lab {
    /// The lab `name`, from its state file.
    pub fn open(name: &str) -> Result<Lab, LabError> {
        match LabState::load(name)? {
            Some(state) => Ok(Lab { state }),
            None => Err(LabError::NoSuchLab {
                name: name.to_string(),
                path: state_path(name).display().to_string(),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Who made the lab ([`crate::LabSpec::owner`]), if it said.
    pub fn owner(&self) -> Option<&str> {
        self.state.owner.as_deref()
    }

    pub fn hosts(&self) -> &[Host] {
        &self.state.hosts
    }

    pub fn host(&self, name: &str) -> Result<&Host, LabError> {
        self.state
            .hosts
            .iter()
            .find(|h| h.name == name)
            .ok_or_else(|| LabError::NoSuchHost {
                lab: self.state.name.clone(),
                host: name.to_string(),
            })
    }

    /// The host whose device runs the software RSS.
    pub fn receiver(&self) -> &Host {
        self.state.receiver()
    }

    /// The default sending host.
    pub fn sender(&self) -> &Host {
        self.state
            .hosts
            .iter()
            .find(|h| h.name == self.state.sender)
            .unwrap_or(&self.state.hosts[0])
    }

    /// The switch port facing `host` in a lab of more than two hosts:
    /// (switch namespace, port device). The port is the veth peer of the
    /// host's `veth0` and transmits into it, so a host that runs XDP needs tx
    /// checksum offload off there (see "The checksum pitfall").
    pub fn switch_port(&self, host: &str) -> Option<(String, String)> {
        let sw = self.state.switch_netns.clone()?;
        let i = self.state.hosts.iter().position(|h| h.name == host)?;
        Some((sw, format!("port{i}")))
    }

    /// The wire namespace between the hosts (labs built with
    /// [`LabSpec::wire`](crate::LabSpec::wire)).
    pub fn wire(&self) -> Option<&Wire> {
        self.state.wire.as_ref()
    }
}
