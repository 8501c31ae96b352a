//! What to build: the lab's spec and its validation, and unique lab names.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::LabError;

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
    /// The receiver's whole software RSS config, as given (input transform
    /// and queue -> CPU map included); when set it is used instead of
    /// `queues`, `table`, `key` and `fields` ([`LabSpec::with_config`]).
    pub config: Option<rss::RssConfig>,
    /// Give the lab veths IPv6 addresses; when false IPv6 is disabled on them
    /// (no autoconf, DAD, ND or MLD frames: a quiet link).
    pub ipv6: bool,
    /// Count flows in the datapath (nic::flows).
    pub track_flows: bool,
    /// Put a wire namespace between the two hosts (see the crate docs).
    pub wire: bool,
    /// Attach Steer's software RSS to the receiver's device (default true).
    pub software_rss: bool,
    /// Who made the lab, so a cleaner takes down only its own labs
    /// (`steer bench run` tags each case's labs). Default: the
    /// [`OWNER_ENV`] environment variable, if set.
    pub owner: Option<String>,
}

/// The environment variable whose value a new lab records as its owner.
pub const OWNER_ENV: &str = "STEER_LAB_OWNER";

impl LabSpec {
    pub fn new(name: &str) -> Self {
        LabSpec {
            name: name.to_string(),
            hosts: vec!["snd".to_string(), "rcv".to_string()],
            queues: 4,
            table: None,
            key: None,
            fields: None,
            config: None,
            ipv6: true,
            track_flows: false,
            wire: false,
            software_rss: true,
            owner: std::env::var(OWNER_ENV).ok().filter(|o| !o.is_empty()),
        }
    }

    /// A lab whose two hosts are joined through a wire namespace (snd
    /// —veth— NAME-wire —veth— rcv) for the impairment wire and the SRPIC
    /// driver: IPv4 only, and no software RSS, so the receiver's device is
    /// free for the driver's or a data path's XDP program.
    pub fn wired(name: &str) -> Self {
        LabSpec {
            wire: true,
            software_rss: false,
            ipv6: false,
            ..LabSpec::new(name)
        }
    }

    /// This spec with the receiver's software RSS set to `config` exactly
    /// (e.g. `steer lab up --config`, a file from `steer rss config`).
    pub fn with_config(mut self, config: rss::RssConfig) -> Self {
        self.queues = config.queues;
        self.config = Some(config);
        self
    }

    pub(crate) fn validate(&self) -> Result<(), LabError> {
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

/// A lab name unique within this machine's running processes: `prefix`, the
/// pid and a counter (parallel `cargo test` threads get different ones).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}-{n}", std::process::id())
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
    fn unique_names_differ() {
        assert_ne!(unique_name("t"), unique_name("t"));
    }
}
