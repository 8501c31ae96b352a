//! Where an attachment lives after the process that made it exits.
//!
//! - maps and the program are pinned under
//!   `/sys/fs/bpf/steer/<netns or "root">/<dev>/` (bpffs is one per machine,
//!   so the namespace name is part of the path);
//! - the applied [`rss::RssConfig`] is written, as its own JSON form, to
//!   `/run/steer/nic/<netns or "root">/<dev>.json`, so any command can read
//!   "the config of a device running Steer's software RSS".

use std::path::{Path, PathBuf};

use crate::error::NicError;

/// bpffs mount point.
pub const BPFFS: &str = "/sys/fs/bpf";
/// Root of Steer's pins on bpffs.
pub const PIN_ROOT: &str = "/sys/fs/bpf/steer";
/// Root of the applied-config files.
pub const STATE_ROOT: &str = "/run/steer/nic";

/// Pin names (one file per map, plus the program and the links of the
/// cpumap tracepoint programs, which count for as long as they are pinned).
pub(crate) const PIN_PROG: &str = "prog";
pub(crate) const MAP_NAMES: [&str; 8] = [
    "config",
    "toeplitz",
    "indir",
    "cpu_map",
    "queue_stats",
    "non_ip",
    "flows",
    "cpumap_stats",
];
pub(crate) const PIN_LINKS: [&str; 2] = ["link_cpumap_enqueue", "link_cpumap_kthread"];

fn netns_label(netns: Option<&str>) -> &str {
    netns.unwrap_or("root")
}

/// Rejects names that could escape the state directories; such a device
/// cannot exist anyway (Linux interface names have no '/').
pub(crate) fn check_names(dev: &str, netns: Option<&str>) -> Result<(), NicError> {
    let bad = |s: &str| s.is_empty() || s.contains('/') || s == "." || s == ".." || s.len() > 15;
    if bad(dev) {
        return Err(NicError::NoSuchDevice {
            dev: dev.to_string(),
            netns: netns.map(str::to_string),
        });
    }
    if let Some(ns) = netns {
        if ns.is_empty() || ns.contains('/') || ns == "." || ns == ".." || ns == "root" {
            return Err(NicError::NoSuchNetns {
                netns: ns.to_string(),
            });
        }
    }
    Ok(())
}

/// The pin directory of (netns, dev).
pub fn pin_dir(dev: &str, netns: Option<&str>) -> PathBuf {
    Path::new(PIN_ROOT).join(netns_label(netns)).join(dev)
}

/// The applied-config file of (netns, dev).
pub fn config_path(dev: &str, netns: Option<&str>) -> PathBuf {
    Path::new(STATE_ROOT)
        .join(netns_label(netns))
        .join(format!("{dev}.json"))
}

/// Removes the pins and the config file of (netns, dev); missing ones are fine.
pub(crate) fn remove(dev: &str, netns: Option<&str>) -> Result<(), NicError> {
    let dir = pin_dir(dev, netns);
    for name in MAP_NAMES.iter().chain(&PIN_LINKS).chain([&PIN_PROG]) {
        remove_file_if_exists(&dir.join(name))?;
    }
    remove_dir_if_exists(&dir)?;
    let config = config_path(dev, netns);
    remove_file_if_exists(&config)?;
    // The namespace-level directories go once their last device is gone.
    for parent in [dir.parent(), config.parent()].into_iter().flatten() {
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}

fn remove_file_if_exists(path: &Path) -> Result<(), NicError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(NicError::io(format!("remove {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

fn remove_dir_if_exists(path: &Path) -> Result<(), NicError> {
    match std::fs::remove_dir(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(NicError::io(format!("remove {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

/// Writes the applied config.
pub(crate) fn write_config(
    dev: &str,
    netns: Option<&str>,
    config: &rss::RssConfig,
) -> Result<(), NicError> {
    let path = config_path(dev, netns);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| NicError::io(format!("create {}", dir.display()), e))?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, config.to_json())
        .map_err(|e| NicError::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, &path)
        .map_err(|e| NicError::io(format!("rename to {}", path.display()), e))
}

/// Reads the applied config, `None` if there is no file.
pub(crate) fn read_config(
    dev: &str,
    netns: Option<&str>,
) -> Result<Option<rss::RssConfig>, NicError> {
    let path = config_path(dev, netns);
    match rss::RssConfig::from_file(&path) {
        Ok(config) => Ok(Some(config)),
        Err(rss::RssError::Unreadable {
            kind: std::io::ErrorKind::NotFound,
            ..
        }) => Ok(None),
        Err(rss::RssError::Unreadable { kind, reason, .. }) => Err(NicError::io(
            format!("read {}", path.display()),
            std::io::Error::new(kind, reason),
        )),
        Err(e) => Err(NicError::State {
            path: path.display().to_string(),
            reason: match e {
                rss::RssError::InFile { source, .. } => source.to_string(),
                other => other.to_string(),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_separate_namespaces() {
        assert_eq!(
            pin_dir("veth0", None),
            PathBuf::from("/sys/fs/bpf/steer/root/veth0")
        );
        assert_eq!(
            config_path("veth0", Some("rcv")),
            PathBuf::from("/run/steer/nic/rcv/veth0.json")
        );
    }

    #[test]
    fn names_that_escape_are_rejected() {
        assert!(check_names("../x", None).is_err());
        assert!(check_names("eth0", Some("..")).is_err());
        assert!(check_names("a-very-long-interface-name", None).is_err());
        assert!(check_names("eth0", Some("snd")).is_ok());
    }
}
