//! What the agent serves: one entry per device or config file, each with
//! the config last read, and a version that increments when it changes.
//!
//! The sampler thread calls [`Sources::read`] every config interval and
//! [`Snapshot::update`] compares each reading with the previous one; request
//! handlers only look entries up ([`Snapshot::by_addr`], [`Snapshot::by_dev`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use rss::RssConfig;

use crate::api::{ConfigOrigin, ServedEntry};
use crate::error::AgentError;
use nic::NicError;

/// `--config FILE --for ADDR`: a config for a host whose NIC cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    pub path: PathBuf,
    /// The local addresses the file's config applies to.
    pub addrs: Vec<IpAddr>,
}

/// Which devices are served from the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// Every device of the namespace (re-listed at each poll).
    All,
    /// These devices; each must give a config when the agent starts.
    Listed(Vec<String>),
    /// None: only the config files.
    None,
}

/// Where configs come from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub devices: Devices,
    pub files: Vec<FileSource>,
    /// The namespace name under which software RSS state is kept
    /// (`nic::attached_config(dev, netns)`).
    pub netns: Option<String>,
}

/// Identifies an entry across polls.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntryKey {
    Dev(String),
    File(PathBuf),
}

/// One reading of one entry.
#[derive(Debug, Clone)]
pub struct Reading {
    pub key: EntryKey,
    pub dev: Option<String>,
    pub addrs: Vec<IpAddr>,
    pub config: Result<(ConfigOrigin, RssConfig), String>,
}

/// The local addresses per interface (getifaddrs in the calling thread's
/// namespace). IPv4-mapped IPv6 forms are not listed; lookups canonicalize.
pub fn interface_addrs() -> Result<BTreeMap<String, Vec<IpAddr>>, AgentError> {
    let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    let addrs = nix::ifaddrs::getifaddrs().map_err(|e| AgentError::Io {
        what: "getifaddrs".into(),
        source: e.into(),
    })?;
    for ifa in addrs {
        let entry = out.entry(ifa.interface_name.clone()).or_default();
        let Some(addr) = ifa.address else { continue };
        let ip: Option<IpAddr> = if let Some(v4) = addr.as_sockaddr_in() {
            Some(v4.ip().into())
        } else {
            addr.as_sockaddr_in6().map(|v6| v6.ip().into())
        };
        if let Some(ip) = ip {
            if !entry.contains(&ip) {
                entry.push(ip);
            }
        }
    }
    Ok(out)
}

/// A device's config and where it comes from ([`nic::device_config`]).
pub fn device_config(
    dev: &str,
    netns: Option<&str>,
) -> Result<(ConfigOrigin, RssConfig), NicError> {
    let (source, config) = nic::device_config(dev, netns)?;
    let origin = match source {
        nic::ConfigSource::SoftwareRss => ConfigOrigin::SoftwareRss,
        nic::ConfigSource::Nic => ConfigOrigin::Nic,
    };
    Ok((origin, config))
}

/// `ip netns exec` gives the command a fresh /sys without the BPF
/// filesystem, so Steer's pinned software RSS cannot be seen from there.
fn with_bpffs_hint(message: String, err: &NicError) -> String {
    let hidden = !std::path::Path::new(nic::state::BPFFS)
        .join("steer")
        .exists();
    if hidden && matches!(err, NicError::NicRss(rss::live::LiveError::NoRss { .. })) {
        format!(
            "{message} (if Steer's software RSS runs on it: {} is not visible here; \
             run `steer agent --netns NS` instead of `ip netns exec NS steer agent`)",
            nic::state::BPFFS
        )
    } else {
        message
    }
}

/// Reads and validates a config file ([`RssConfig::from_file`]).
pub fn file_config(path: &std::path::Path) -> Result<RssConfig, AgentError> {
    RssConfig::from_file(path).map_err(|e| AgentError::ConfigFile {
        path: path.to_path_buf(),
        // The variant names the file itself.
        reason: match e {
            rss::RssError::Unreadable { reason, .. } => reason,
            rss::RssError::InFile { source, .. } => source.to_string(),
            other => other.to_string(),
        },
    })
}

impl Sources {
    /// What `steer agent` serves: the devices `devs` names, else every
    /// device unless config files are given (then those alone); in
    /// namespace `netns`, else the one the agent runs in.
    pub fn new(devs: Vec<String>, files: Vec<FileSource>, netns: Option<String>) -> Sources {
        let devices = if !devs.is_empty() {
            Devices::Listed(devs)
        } else if files.is_empty() {
            Devices::All
        } else {
            Devices::None
        };
        Sources {
            devices,
            files,
            netns: netns.or_else(host::netns::current_name),
        }
    }

    /// Reads every entry once (in the calling thread's namespace). With
    /// `strict`, a listed device or a file that gives no config is an error
    /// (used at start); otherwise, and always for [`Devices::All`] (lo has
    /// no RSS), the entry records why.
    pub fn read(&self, strict: bool) -> Result<Vec<Reading>, AgentError> {
        let ifaddrs = interface_addrs()?;
        let mut out = Vec::new();
        let devs: Vec<String> = match &self.devices {
            Devices::All => ifaddrs.keys().cloned().collect(),
            Devices::Listed(d) => d.clone(),
            Devices::None => Vec::new(),
        };
        let listed = matches!(self.devices, Devices::Listed(_));
        for dev in devs {
            let config = match device_config(&dev, self.netns.as_deref()) {
                Ok(c) => Ok(c),
                Err(source) if strict && listed => return Err(AgentError::Device { dev, source }),
                Err(e) => Err(with_bpffs_hint(crate::error::chain(&e), &e)),
            };
            out.push(Reading {
                key: EntryKey::Dev(dev.clone()),
                addrs: ifaddrs.get(&dev).cloned().unwrap_or_default(),
                dev: Some(dev),
                config,
            });
        }
        for file in &self.files {
            let config = match file_config(&file.path) {
                Ok(c) => Ok((ConfigOrigin::File, c)),
                Err(e) if strict => return Err(e),
                Err(e) => Err(e.to_string()),
            };
            let dev = ifaddrs
                .iter()
                .find(|(_, addrs)| file.addrs.iter().any(|a| addrs.contains(a)))
                .map(|(dev, _)| dev.clone());
            out.push(Reading {
                key: EntryKey::File(file.path.clone()),
                dev,
                addrs: file.addrs.clone(),
                config,
            });
        }
        Ok(out)
    }
}

/// One served entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: EntryKey,
    pub dev: Option<String>,
    pub addrs: Vec<IpAddr>,
    /// The current config, or why there is none.
    pub config: Result<(ConfigOrigin, RssConfig), String>,
    /// 0 until a config was read; then incremented at each change.
    pub version: u64,
    /// The last config served (kept while the entry is unreadable, so that
    /// the same config coming back does not count as a change).
    last: Option<(ConfigOrigin, RssConfig)>,
}

impl Entry {
    pub fn describe(&self) -> ServedEntry {
        let (origin, queues, error) = match &self.config {
            Ok((o, c)) => (Some(*o), Some(c.queues), None),
            Err(e) => (None, None, Some(e.clone())),
        };
        ServedEntry {
            dev: self.dev.clone(),
            addrs: self.addrs.clone(),
            origin,
            config_version: self.version,
            queues,
            error,
        }
    }
}

/// A change noticed by [`Snapshot::update`], for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub key: EntryKey,
    pub version: u64,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            EntryKey::Dev(d) => write!(f, "config of {d} is now version {}", self.version),
            EntryKey::File(p) => write!(
                f,
                "config from {} is now version {}",
                p.display(),
                self.version
            ),
        }
    }
}

/// All entries, as last read.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub entries: Vec<Entry>,
    /// Entries no longer read (a device removed), kept for their version
    /// numbers: a device that comes back continues its numbering.
    gone: BTreeMap<EntryKey, Entry>,
}

impl Snapshot {
    /// Applies a new reading; returns the entries whose config changed.
    pub fn update(&mut self, readings: Vec<Reading>) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut old: BTreeMap<EntryKey, Entry> =
            self.entries.drain(..).map(|e| (e.key.clone(), e)).collect();
        for r in readings {
            let prev = old.remove(&r.key).or_else(|| self.gone.remove(&r.key));
            let (mut version, mut last) = prev.map_or((0, None), |p| (p.version, p.last));
            if let Ok(current) = &r.config {
                if last.as_ref() != Some(current) {
                    version += 1;
                    last = Some(current.clone());
                    changes.push(Change {
                        key: r.key.clone(),
                        version,
                    });
                }
            }
            self.entries.push(Entry {
                key: r.key,
                dev: r.dev,
                addrs: r.addrs,
                config: r.config,
                version,
                last,
            });
        }
        self.gone.extend(old);
        changes
    }

    /// The entry serving a local address: a file given `--for` it first,
    /// else the device carrying it.
    pub fn by_addr(&self, addr: IpAddr) -> Option<&Entry> {
        let addr = addr.to_canonical();
        let has = |e: &&Entry| e.addrs.iter().any(|a| a.to_canonical() == addr);
        self.entries
            .iter()
            .filter(|e| matches!(e.key, EntryKey::File(_)))
            .find(has)
            .or_else(|| {
                self.entries
                    .iter()
                    .filter(|e| matches!(e.key, EntryKey::Dev(_)))
                    .find(has)
            })
    }

    /// The entry of a device: read from the kernel first, else a file whose
    /// address is on that device.
    pub fn by_dev(&self, dev: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.key == EntryKey::Dev(dev.to_string()))
            .or_else(|| self.entries.iter().find(|e| e.dev.as_deref() == Some(dev)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rss::RssKey;

    #[test]
    fn sources_serve_listed_devices_else_all_unless_files_are_given() {
        let file = || FileSource {
            path: "rcv.json".into(),
            addrs: vec![std::net::Ipv4Addr::LOCALHOST.into()],
        };
        let ns = || Some("x".to_string());
        let listed = Sources::new(vec!["veth0".into()], vec![file()], ns());
        assert_eq!(listed.devices, Devices::Listed(vec!["veth0".into()]));
        assert_eq!(listed.files.len(), 1);
        assert_eq!(listed.netns.as_deref(), Some("x"));
        assert_eq!(Sources::new(vec![], vec![], ns()).devices, Devices::All);
        assert_eq!(
            Sources::new(vec![], vec![file()], ns()).devices,
            Devices::None
        );
    }

    fn config(queues: u32) -> RssConfig {
        RssConfig::ethtool_default(RssKey::microsoft(), queues, 16).unwrap()
    }

    fn reading(key: EntryKey, dev: &str, addr: &str, config: Result<RssConfig, &str>) -> Reading {
        Reading {
            key,
            dev: Some(dev.to_string()),
            addrs: vec![addr.parse().unwrap()],
            config: config
                .map(|c| (ConfigOrigin::Nic, c))
                .map_err(str::to_string),
        }
    }

    #[test]
    fn versions_increment_only_on_change() {
        let dev = || EntryKey::Dev("eth0".into());
        let mut s = Snapshot::default();
        let ch = s.update(vec![reading(dev(), "eth0", "10.0.0.1", Ok(config(4)))]);
        assert_eq!(ch.len(), 1);
        assert_eq!(s.entries[0].version, 1);
        assert!(s
            .update(vec![reading(dev(), "eth0", "10.0.0.1", Ok(config(4)))])
            .is_empty());
        s.update(vec![reading(dev(), "eth0", "10.0.0.1", Err("gone"))]);
        assert_eq!(s.entries[0].version, 1);
        assert!(s.entries[0].config.is_err());
        // Same config back: no new version.
        assert!(s
            .update(vec![reading(dev(), "eth0", "10.0.0.1", Ok(config(4)))])
            .is_empty());
        let ch = s.update(vec![reading(dev(), "eth0", "10.0.0.1", Ok(config(2)))]);
        assert_eq!(ch[0].version, 2);
        // Device vanishes and comes back changed: numbering continues.
        s.update(vec![]);
        assert!(s.by_dev("eth0").is_none());
        let ch = s.update(vec![reading(dev(), "eth0", "10.0.0.1", Ok(config(4)))]);
        assert_eq!(ch[0].version, 3);
    }

    #[test]
    fn lookup_prefers_files_for_their_addresses() {
        let mut s = Snapshot::default();
        s.update(vec![
            reading(
                EntryKey::Dev("eth0".into()),
                "eth0",
                "10.0.0.1",
                Ok(config(4)),
            ),
            reading(
                EntryKey::File("/f.json".into()),
                "eth0",
                "10.0.0.1",
                Ok(config(2)),
            ),
            reading(
                EntryKey::Dev("eth1".into()),
                "eth1",
                "::ffff:10.0.0.2",
                Ok(config(8)),
            ),
        ]);
        let by_addr = |a: &str| s.by_addr(a.parse().unwrap()).map(|e| e.key.clone());
        assert_eq!(by_addr("10.0.0.1"), Some(EntryKey::File("/f.json".into())));
        assert_eq!(
            by_addr("::ffff:10.0.0.1"),
            Some(EntryKey::File("/f.json".into()))
        );
        assert_eq!(by_addr("10.0.0.2"), Some(EntryKey::Dev("eth1".into())));
        assert_eq!(by_addr("10.0.0.3"), None);
        assert_eq!(s.by_dev("eth0").unwrap().key, EntryKey::Dev("eth0".into()));
        assert!(s.by_dev("eth9").is_none());
    }
}
