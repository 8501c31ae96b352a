//! Building and tearing down a lab: namespaces, veths, links and addresses,
//! in the order the crate docs describe, with cleanup on failure.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::state::{state_path, LabState};
use crate::{softrss, Lab, LabError, LabSpec, HOST_DEV};

/// A veth pair: `dev` in namespace `netns`, its peer [`HOST_DEV`] in
/// `host_netns`. Every link of a lab is one such pair.
fn add_veth_pair(dev: &str, netns: &str, host_netns: &str) -> Result<(), LabError> {
    Ok(host::link::add_veth(dev, netns, HOST_DEV, host_netns)?)
}

impl Lab {
    /// Builds the lab, or returns it if a complete lab of that name is up.
    /// A half-built lab of that name (an interrupted `up`) is torn down and
    /// rebuilt. On failure everything created so far is removed.
    pub fn up(spec: &LabSpec) -> Result<Lab, LabError> {
        spec.validate()?;
        if !host::is_root() {
            return Err(LabError::Privilege);
        }
        if let Some(state) = LabState::load(&spec.name)? {
            let intact =
                state.complete && state.created_netns.iter().all(|ns| host::netns::exists(ns));
            if intact {
                return Ok(Lab { state });
            }
            Lab::down(&spec.name)?;
        }
        let config = Self::config_for(spec)?;
        let mut state = Self::plan(spec);
        match Self::build(spec, &mut state, &config) {
            Ok(()) => Ok(Lab { state }),
            Err(e) => {
                if let Err(cleanup) = Lab::down(&spec.name) {
                    eprintln!("lab {}: cleanup after failed up: {cleanup}", spec.name);
                }
                Err(e)
            }
        }
    }

    fn add_netns(state: &mut LabState, ns: &str) -> Result<(), LabError> {
        if host::netns::exists(ns) {
            return Err(LabError::NamespaceExists {
                netns: ns.to_string(),
            });
        }
        host::netns::add(ns)?;
        state.created_netns.push(ns.to_string());
        state.save()?;
        host::link::set_up(ns, "lo")?;
        Ok(())
    }

    /// Addresses and link state of one end; `ipv6` false disables IPv6 on it.
    fn configure_link(
        ns: &str,
        dev: &str,
        v4: Option<(Ipv4Addr, u8)>,
        v6: Option<Ipv6Addr>,
        ipv6: bool,
    ) -> Result<(), LabError> {
        if ipv6 {
            // No router advertisements or autoconf; DAD is skipped per address.
            host::netns::set_sysctl(ns, &format!("net.ipv6.conf.{dev}.accept_ra"), "0")?;
            host::netns::set_sysctl(ns, &format!("net.ipv6.conf.{dev}.autoconf"), "0")?;
        } else {
            host::netns::set_sysctl(ns, &format!("net.ipv6.conf.{dev}.disable_ipv6"), "1")?;
        }
        if let Some((addr, len)) = v4 {
            host::link::add_address(ns, dev, addr.into(), len)?;
        }
        if let Some(addr) = v6 {
            host::link::add_address(ns, dev, addr.into(), 64)?;
        }
        host::link::set_up(ns, dev)?;
        Ok(())
    }

    fn build(
        spec: &LabSpec,
        state: &mut LabState,
        config: &rss::RssConfig,
    ) -> Result<(), LabError> {
        state.save()?;
        for host in state.hosts.clone() {
            Self::add_netns(state, &host.netns)?;
        }
        let receiver = state.receiver().clone();
        // The veth end that transmits into the receiver's XDP device.
        let feeder: (String, String);
        match state.switch_netns.clone() {
            None if state.wire.is_some() => {
                let wire = state
                    .wire
                    .clone()
                    .ok_or_else(|| LabError::InvalidSpec("wire".into()))?;
                Self::add_netns(state, &wire.netns)?;
                for (host, dev) in [
                    (&state.hosts[0], &wire.sender_dev),
                    (&state.hosts[1], &wire.receiver_dev),
                ] {
                    add_veth_pair(dev, &wire.netns, &host.netns)?;
                    Self::configure_link(&wire.netns, dev, None, None, false)?;
                }
                // Both hosts transmit into the forwarder: complete checksums, no TSO.
                let other = if state.hosts[0].name == receiver.name {
                    &state.hosts[1]
                } else {
                    &state.hosts[0]
                };
                host::link::set_tx_checksum(Some(&receiver.netns), HOST_DEV, false)?;
                feeder = (other.netns.clone(), HOST_DEV.to_string());
            }
            None => {
                let (a, b) = (&state.hosts[0], &state.hosts[1]);
                add_veth_pair(HOST_DEV, &a.netns, &b.netns)?;
                let other = if a.name == receiver.name { b } else { a };
                feeder = (other.netns.clone(), HOST_DEV.to_string());
            }
            Some(sw) => {
                Self::add_netns(state, &sw)?;
                host::link::add_bridge(&sw, "br0")?;
                if !spec.ipv6 {
                    host::netns::set_sysctl(&sw, "net.ipv6.conf.br0.disable_ipv6", "1")?;
                }
                host::link::set_up(&sw, "br0")?;
                let mut found = None;
                for (i, host) in state.hosts.iter().enumerate() {
                    let port = format!("port{i}");
                    add_veth_pair(&port, &sw, &host.netns)?;
                    Self::configure_link(&sw, &port, None, None, spec.ipv6)?;
                    host::link::set_controller(&sw, &port, "br0")?;
                    if host.name == receiver.name {
                        found = Some((sw.clone(), port));
                    }
                }
                feeder = found.ok_or_else(|| LabError::InvalidSpec("no receiver".into()))?;
            }
        }
        for host in &state.hosts {
            Self::configure_link(
                &host.netns,
                HOST_DEV,
                Some((host.ipv4, 24)),
                host.ipv6,
                spec.ipv6,
            )?;
        }
        let (feed_ns, feed_dev) = feeder;
        // `ethtool -K DEV tx off` on the side that feeds the receiver: see
        // "The checksum pitfall" in the crate docs.
        host::link::set_tx_checksum(Some(&feed_ns), &feed_dev, false)?;
        if spec.software_rss {
            softrss::attach(&receiver, config, spec.track_flows)?;
        }
        state.complete = true;
        state.save()
    }

    /// Detaches the software RSS and deletes the namespaces the lab created,
    /// then its state file. A lab that does not exist is fine.
    pub fn down(name: &str) -> Result<(), LabError> {
        let Some(state) = LabState::load(name)? else {
            return Ok(());
        };
        if !host::is_root() {
            return Err(LabError::Privilege);
        }
        softrss::detach(state.receiver())?;
        for ns in state.created_netns.iter().rev() {
            if host::netns::exists(ns) {
                host::netns::delete(ns)?;
            }
        }
        match std::fs::remove_file(state_path(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LabError::io(
                format!("remove {}", state_path(name).display()),
                e,
            )),
            _ => Ok(()),
        }
    }

    pub fn teardown_on_drop(self) -> LabGuard {
        LabGuard { lab: self }
    }
}

/// Tears the lab down when dropped (for tests).
pub struct LabGuard {
    lab: Lab,
}

impl std::ops::Deref for LabGuard {
    type Target = Lab;
    fn deref(&self) -> &Lab {
        &self.lab
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        if let Err(e) = Lab::down(&self.lab.state.name) {
            eprintln!("lab {}: teardown failed: {e}", self.lab.state.name);
        }
    }
}
