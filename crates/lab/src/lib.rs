//! The namespace lab: named network namespaces joined by veths, with Steer's
//! software RSS (crate `nic`) on the receiver.
//!
//! Two hosts (`snd`, `rcv`) are joined by one veth pair; more hosts are each
//! joined to a bridge in a switch namespace. Addresses come from a private
//! test range and live on the lab's veths only: `10.77.<index>.<host+1>/24`
//! and `fd77:<index>::<host+1>/64`, `index` derived from the lab name.
//!
//! # API
//!
//! ```text
//! pub struct LabSpec { name, hosts, queues, table, key, fields, ipv6, track_flows,
//!                      wire, software_rss }
//! impl LabSpec { pub fn new(name) -> Self }       // hosts snd,rcv; 4 queues; IPv6 on
//! impl Lab {
//!     pub fn up(&LabSpec) -> Result<Lab, LabError>      // idempotent
//!     pub fn open(name) / down(name) / status(name) / list()
//!     pub fn host(&self, name) -> Result<&Host, LabError>; receiver(); sender()
//!     pub fn command(&self, host, program) -> Result<Command, LabError>   // ip netns exec NS program
//!     pub fn rss_config(&self) -> Result<RssConfig, LabError>
//!     pub fn wire(&self) -> Option<&Wire>               // the middle host, if any
//!     pub fn switch_port(&self, host) -> Option<(String, String)> // (switch netns, port)
//!     pub fn teardown_on_drop(self) -> LabGuard
//! }
//! // code that runs inside a host's namespace: host::netns::run_in(Some(netns), f)
//! pub fn unique_name(prefix) -> String                  // prefix + pid + counter
//! pub mod packet  // Ethernet/IP/TCP/UDP frame builders; inject::send_frames (AF_PACKET)
//! ```
//!
//! # The wire (optional)
//!
//! With [`LabSpec::wire`] (two hosts only) the hosts are not joined directly:
//! each host's `veth0` is the peer of a device in a third namespace,
//! `<name>-wire`, named `to-<host>`. The wire namespace has no addresses; a
//! userspace forwarder there (crate `wire`, `steer wire`) moves frames
//! between its two devices and applies delay, loss and a rate limit. Both
//! hosts stay in one /24: the wire is a transparent L2 link. Until a
//! forwarder runs, nothing crosses. The hosts' veths get tx checksum offload
//! (and with it TSO) turned off, so the forwarder reads MTU-size frames with
//! complete checksums.
//!
//! # Cleanup rules
//!
//! `up` records every namespace it creates in `/run/steer/lab/<name>.json`
//! as soon as it exists; `down` (and a failed `up`) deletes only those, after
//! detaching the software RSS. A namespace that exists already and is not in
//! the state file is never touched (`up` fails instead). The veths live inside
//! the lab's namespaces and go away with them.
//!
//! # The checksum pitfall
//!
//! The veth that transmits into the receiver's XDP veth (the sender's, or the
//! switch port in front of the receiver) gets tx checksum offload turned off
//! with the `ETHTOOL_STXCSUM` ioctl (`nic::sys::set_tx_checksum`, same as
//! `ethtool -K DEV tx off`): otherwise frames redirected through the cpumap
//! reach TCP with unfilled checksums and are dropped (see `nic::offload`).

mod error;
pub mod inject;
pub mod packet;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use rand::RngCore;
use serde::{Deserialize, Serialize};

pub use error::LabError;

/// Where lab state files live.
pub const STATE_DIR: &str = "/run/steer/lab";
/// The lab's device name inside every host namespace.
pub const HOST_DEV: &str = "veth0";
/// Indirection table size of the default table.
pub const DEFAULT_TABLE_SIZE: usize = 128;

/// What to build.
#[derive(Debug, Clone)]
pub struct LabSpec {
    /// Lab name: letters, digits, '-' and '_', at most 20 characters.
    pub name: String,
    /// Host names; the receiver is `rcv` if listed, else the last host; the
    /// sender is `snd` if listed, else the first.
    pub hosts: Vec<String>,
    /// Software RSS queues on the receiver (queue q -> CPU q % online CPUs).
    pub queues: u32,
    /// Default: `ethtool -X equal` over 128 entries.
    pub table: Option<rss::IndirectionTable>,
    /// Default: a random 52-byte key (like Linux's per-boot netdev_rss_key).
    pub key: Option<rss::RssKey>,
    /// Default: 4-tuple for TCP, 2-tuple for UDP (the common driver default).
    pub fields: Option<rss::HashFieldsByFlow>,
    /// Give the lab veths IPv6 addresses; when false IPv6 is disabled on them
    /// (no autoconf, DAD, ND or MLD frames: a quiet link).
    pub ipv6: bool,
    /// Count flows in the datapath (nic::flows).
    pub track_flows: bool,
    /// Put a wire namespace between the two hosts (see the crate docs).
    pub wire: bool,
    /// Attach Steer's software RSS to the receiver's device (default true).
    pub software_rss: bool,
}

impl LabSpec {
    pub fn new(name: &str) -> Self {
        LabSpec {
            name: name.to_string(),
            hosts: vec!["snd".to_string(), "rcv".to_string()],
            queues: 4,
            table: None,
            key: None,
            fields: None,
            ipv6: true,
            track_flows: false,
            wire: false,
            software_rss: true,
        }
    }

    fn validate(&self) -> Result<(), LabError> {
        let ok_name = |s: &str, max: usize| {
            !s.is_empty()
                && s.len() <= max
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !ok_name(&self.name, 20) {
            return Err(LabError::InvalidSpec(format!(
                "lab name '{}': use 1-20 letters, digits, '-' or '_'",
                self.name
            )));
        }
        if self.hosts.len() < 2 || self.hosts.len() > 200 {
            return Err(LabError::InvalidSpec(format!(
                "{} hosts: a lab has 2..=200",
                self.hosts.len()
            )));
        }
        for (i, h) in self.hosts.iter().enumerate() {
            if !ok_name(h, 12) || h == "sw" {
                return Err(LabError::InvalidSpec(format!(
                    "host name '{h}': use 1-12 letters, digits, '-' or '_' (not 'sw')"
                )));
            }
            if self.hosts[..i].contains(h) {
                return Err(LabError::InvalidSpec(format!("host '{h}' is listed twice")));
            }
        }
        if self.queues == 0 {
            return Err(LabError::InvalidSpec("queues must be at least 1".into()));
        }
        if self.wire && self.hosts.len() != 2 {
            return Err(LabError::InvalidSpec(format!(
                "a wire joins exactly 2 hosts, not {}",
                self.hosts.len()
            )));
        }
        if self.wire && self.hosts.iter().any(|h| h == "wire") {
            return Err(LabError::InvalidSpec(
                "host name 'wire' is taken by the wire namespace".into(),
            ));
        }
        Ok(())
    }
}

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

/// The middle namespace of a lab built with [`LabSpec::wire`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wire {
    /// Network namespace (under /run/netns).
    pub netns: String,
    /// The device facing the sender (peer of the sender's `veth0`).
    pub sender_dev: String,
    /// The device facing the receiver (peer of the receiver's `veth0`).
    pub receiver_dev: String,
}

/// The lab state file: what was built, and so what `down` may delete.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LabState {
    name: String,
    index: u8,
    hosts: Vec<Host>,
    receiver: String,
    sender: String,
    /// Namespaces this lab created (deleted by `down`), in creation order.
    created_netns: Vec<String>,
    /// Switch namespace (more than two hosts).
    switch_netns: Option<String>,
    /// Set once the whole lab is up.
    complete: bool,
    /// The wire namespace between the two hosts, if any.
    #[serde(default)]
    wire: Option<Wire>,
}

/// A lab that is up.
#[derive(Debug, Clone)]
pub struct Lab {
    state: LabState,
}

/// What `steer lab status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    pub name: String,
    pub complete: bool,
    pub hosts: Vec<HostStatus>,
    pub switch_netns: Option<String>,
    pub receiver: String,
    pub sender: String,
    /// Whether Steer's software RSS runs on the receiver's device.
    pub software_rss: bool,
    pub queues: Option<u32>,
}

/// The human view: one line per host, then the software RSS state.
impl std::fmt::Display for LabStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "lab {}{}",
            self.name,
            if self.complete { "" } else { " (incomplete)" }
        )?;
        writeln!(
            f,
            "{:<12} {:<24} {:<8} {:<16} {:<24} role",
            "host", "netns", "dev", "ipv4", "ipv6"
        )?;
        for h in &self.hosts {
            let role = if h.host.name == self.receiver {
                "receiver"
            } else if h.host.name == self.sender {
                "sender"
            } else {
                ""
            };
            let ipv6 = h.host.ipv6.map_or("-".to_string(), |a| a.to_string());
            let missing = if h.netns_exists {
                ""
            } else {
                " (netns missing)"
            };
            writeln!(
                f,
                "{:<12} {:<24} {:<8} {:<16} {:<24} {role}{missing}",
                h.host.name, h.host.netns, h.host.dev, h.host.ipv4, ipv6
            )?;
        }
        if let Some(sw) = &self.switch_netns {
            writeln!(f, "switch netns: {sw}")?;
        }
        match self.queues {
            Some(q) if self.software_rss => write!(f, "software RSS: attached, {q} queues"),
            _ => write!(f, "software RSS: not attached"),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    #[serde(flatten)]
    pub host: Host,
    pub netns_exists: bool,
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

/// A lab name unique within this machine's running processes: `prefix`, the
/// pid and a counter (parallel `cargo test` threads get different ones).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}-{n}", std::process::id())
}

fn state_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.json"))
}

/// The lab's /24 and /64: from the name, so it is stable across `up`s.
fn lab_index(name: &str) -> u8 {
    // FNV-1a
    let h = name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (h % 250) as u8 + 1
}

fn ip(args: &[&str]) -> Result<String, LabError> {
    Ok(host::command::ip(args)?)
}

fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

impl LabState {
    fn save(&self) -> Result<(), LabError> {
        std::fs::create_dir_all(STATE_DIR)
            .map_err(|e| LabError::io(format!("create {STATE_DIR}"), e))?;
        let path = state_path(&self.name);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| LabError::State {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        std::fs::write(&tmp, text)
            .map_err(|e| LabError::io(format!("write {}", tmp.display()), e))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| LabError::io(format!("rename to {}", path.display()), e))
    }

    fn load(name: &str) -> Result<Option<LabState>, LabError> {
        let path = state_path(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LabError::io(format!("read {}", path.display()), e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| LabError::State {
                path: path.display().to_string(),
                reason: e.to_string(),
            })
    }

    fn receiver(&self) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == self.receiver)
            .unwrap_or(&self.hosts[self.hosts.len() - 1])
    }
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

    fn config_for(spec: &LabSpec) -> Result<rss::RssConfig, LabError> {
        let key = match &spec.key {
            Some(k) => k.clone(),
            None => {
                let mut bytes = vec![0u8; 52];
                rand::thread_rng().fill_bytes(&mut bytes);
                rss::RssKey::new(bytes)?
            }
        };
        let table = match &spec.table {
            Some(t) => t.clone(),
            None => rss::IndirectionTable::equal(DEFAULT_TABLE_SIZE, spec.queues, 0)?,
        };
        let cpus = online_cpus();
        let config = rss::RssConfig {
            version: rss::config::CONFIG_VERSION,
            hash_function: rss::HashFunction::Toeplitz,
            key,
            input_transform: rss::InputTransform::None,
            fields: spec
                .fields
                .unwrap_or_else(rss::HashFieldsByFlow::linux_default),
            queues: spec.queues,
            indirection_table: table,
            queue_cpus: (0..spec.queues).map(|q| q % cpus).collect(),
            rps_cpus: Vec::new(),
        };
        config.validate()?;
        Ok(config)
    }

    fn plan(spec: &LabSpec) -> LabState {
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
            wire: spec.wire.then(|| Wire {
                netns: format!("{}-wire", spec.name),
                sender_dev: format!("to-{}", spec.hosts[0]),
                receiver_dev: format!("to-{}", spec.hosts[1]),
            }),
        }
    }

    fn add_netns(state: &mut LabState, ns: &str) -> Result<(), LabError> {
        if host::netns::exists(ns) {
            return Err(LabError::NamespaceExists {
                netns: ns.to_string(),
            });
        }
        ip(&["netns", "add", ns])?;
        state.created_netns.push(ns.to_string());
        state.save()?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        Ok(())
    }

    /// Addresses and link state of one end; `quiet` disables IPv6 on it.
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
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/{len}"),
                "dev",
                dev,
            ])?;
        }
        if let Some(addr) = v6 {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/64"),
                "dev",
                dev,
                "nodad",
            ])?;
        }
        ip(&["-n", ns, "link", "set", dev, "up"])?;
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
                    ip(&[
                        "link",
                        "add",
                        dev,
                        "netns",
                        &wire.netns,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        HOST_DEV,
                        "netns",
                        &host.netns,
                    ])?;
                    Self::configure_link(&wire.netns, dev, None, None, false)?;
                }
                // Both hosts transmit into the forwarder: complete checksums, no TSO.
                let other = if state.hosts[0].name == receiver.name {
                    &state.hosts[1]
                } else {
                    &state.hosts[0]
                };
                let ns = receiver.netns.clone();
                host::netns::run_in(Some(&ns), || {
                    nic::sys::set_tx_checksum(HOST_DEV, false)
                        .map_err(|e| LabError::io(format!("ethtool -K {HOST_DEV} tx off"), e))
                })??;
                feeder = (other.netns.clone(), HOST_DEV.to_string());
            }
            None => {
                let (a, b) = (&state.hosts[0], &state.hosts[1]);
                ip(&[
                    "link", "add", HOST_DEV, "netns", &a.netns, "type", "veth", "peer", "name",
                    HOST_DEV, "netns", &b.netns,
                ])?;
                let other = if a.name == receiver.name { b } else { a };
                feeder = (other.netns.clone(), HOST_DEV.to_string());
            }
            Some(sw) => {
                Self::add_netns(state, &sw)?;
                ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
                if !spec.ipv6 {
                    host::netns::set_sysctl(&sw, "net.ipv6.conf.br0.disable_ipv6", "1")?;
                }
                ip(&["-n", &sw, "link", "set", "br0", "up"])?;
                let mut found = None;
                for (i, host) in state.hosts.iter().enumerate() {
                    let port = format!("port{i}");
                    ip(&[
                        "link",
                        "add",
                        &port,
                        "netns",
                        &sw,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        HOST_DEV,
                        "netns",
                        &host.netns,
                    ])?;
                    Self::configure_link(&sw, &port, None, None, spec.ipv6)?;
                    ip(&["-n", &sw, "link", "set", &port, "master", "br0"])?;
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
        host::netns::run_in(Some(&feed_ns), move || {
            nic::sys::set_tx_checksum(&feed_dev, false)
                .map_err(|e| LabError::io(format!("ethtool -K {feed_dev} tx off"), e))
        })??;
        if spec.software_rss {
            nic::attach(
                &receiver.dev,
                Some(&receiver.netns),
                config,
                &nic::AttachOptions {
                    track_flows: spec.track_flows,
                    ..nic::AttachOptions::default()
                },
            )?;
        }
        state.complete = true;
        state.save()
    }

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

    /// Detaches the software RSS and deletes the namespaces the lab created,
    /// then its state file. A lab that does not exist is fine.
    pub fn down(name: &str) -> Result<(), LabError> {
        let Some(state) = LabState::load(name)? else {
            return Ok(());
        };
        if !host::is_root() {
            return Err(LabError::Privilege);
        }
        let receiver = state.receiver().clone();
        match nic::detach(&receiver.dev, Some(&receiver.netns)) {
            Ok(())
            | Err(nic::NicError::NotAttached { .. })
            | Err(nic::NicError::NoSuchDevice { .. })
            | Err(nic::NicError::NoSuchNetns { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        for ns in state.created_netns.iter().rev() {
            if host::netns::exists(ns) {
                ip(&["netns", "del", ns])?;
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

    /// What exists of lab `name`.
    pub fn status(name: &str) -> Result<LabStatus, LabError> {
        let lab = Lab::open(name)?;
        let receiver = lab.receiver().clone();
        let config = if host::netns::exists(&receiver.netns) {
            nic::attached_config(&receiver.dev, Some(&receiver.netns)).unwrap_or(None)
        } else {
            None
        };
        Ok(LabStatus {
            name: lab.state.name.clone(),
            complete: lab.state.complete,
            hosts: lab
                .state
                .hosts
                .iter()
                .map(|h| HostStatus {
                    host: h.clone(),
                    netns_exists: host::netns::exists(&h.netns),
                })
                .collect(),
            switch_netns: lab.state.switch_netns.clone(),
            receiver: lab.state.receiver.clone(),
            sender: lab.state.sender.clone(),
            software_rss: config.is_some(),
            queues: config.map(|c| c.queues),
        })
    }

    /// Names of the labs with a state file.
    pub fn list() -> Result<Vec<String>, LabError> {
        let dir = match std::fs::read_dir(STATE_DIR) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(LabError::io(format!("read {STATE_DIR}"), e)),
        };
        let mut names: Vec<String> = dir
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(str::to_string)
            })
            .collect();
        names.sort();
        Ok(names)
    }

    pub fn name(&self) -> &str {
        &self.state.name
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

    /// `ip netns exec NS program`: add arguments and run it.
    pub fn command(&self, host: &str, program: &str) -> Result<Command, LabError> {
        let host = self.host(host)?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &host.netns, program]);
        Ok(cmd)
    }

    /// The receiver's software RSS config, as applied.
    pub fn rss_config(&self) -> Result<rss::RssConfig, LabError> {
        let r = self.receiver();
        nic::attached_config(&r.dev, Some(&r.netns))?.ok_or_else(|| {
            nic::NicError::NotAttached {
                dev: r.dev.clone(),
                netns: Some(r.netns.clone()),
            }
            .into()
        })
    }

    /// The wire namespace between the hosts (labs built with [`LabSpec::wire`]).
    pub fn wire(&self) -> Option<&Wire> {
        self.state.wire.as_ref()
    }

    pub fn teardown_on_drop(self) -> LabGuard {
        LabGuard { lab: self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_validation() {
        assert!(LabSpec::new("ok-lab_1").validate().is_ok());
        assert!(LabSpec::new("bad/name").validate().is_err());
        assert!(LabSpec::new("").validate().is_err());
        let mut spec = LabSpec::new("x");
        spec.hosts = vec!["a".into(), "a".into()];
        assert!(spec.validate().is_err());
        spec.hosts = vec!["a".into()];
        assert!(spec.validate().is_err());
        let mut spec = LabSpec::new("x");
        spec.queues = 0;
        assert!(!spec.validate().unwrap_err().is_environment());
    }

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
    fn unique_names_differ() {
        assert_ne!(unique_name("t"), unique_name("t"));
    }
}
