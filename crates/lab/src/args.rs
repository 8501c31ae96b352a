//! What `steer lab up` builds, as a command line gives it: flags, defaults
//! and help written once here (doc comments are the help; feature `clap`
//! derives `clap::Args`), turned into a [`LabSpec`] in one step.

use std::path::PathBuf;

use crate::LabSpec;

/// The hosts and the receiver's software RSS of a lab to build.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SpecArgs {
    /// Hosts; the first is the sender, the second the receiver.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "snd,rcv")
    )]
    pub hosts: Vec<String>,
    /// Receive queues of the receiver's software RSS.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = LabSpec::new("").queues))]
    pub queues: u32,
    /// RssConfig JSON for the receiver (key, table, fields and its queue
    /// count, so not with --queues) instead of defaults.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "queues"))]
    pub config: Option<PathBuf>,
    /// Count packets per flow in the receiver's software RSS. Default: off.
    #[cfg_attr(feature = "clap", arg(long))]
    pub track_flows: bool,
    /// IPv4 only (default: IPv4 and IPv6 addresses).
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_ipv6: bool,
    /// No software RSS on the receiver, so its device is free for another
    /// XDP program (the data path of `steer toe run`).
    #[cfg_attr(
        feature = "clap",
        arg(long, conflicts_with_all = ["config", "track_flows"])
    )]
    pub no_software_rss: bool,
}

impl Default for SpecArgs {
    /// What [`LabSpec::new`] builds.
    fn default() -> Self {
        let spec = LabSpec::new("");
        SpecArgs {
            hosts: spec.hosts,
            queues: spec.queues,
            config: None,
            track_flows: spec.track_flows,
            no_ipv6: !spec.ipv6,
            no_software_rss: !spec.software_rss,
        }
    }
}

impl SpecArgs {
    /// The spec of the lab `name` these flags describe; fails only when
    /// the --config file cannot be read or parsed.
    pub fn spec(&self, name: &str) -> Result<LabSpec, rss::RssError> {
        let mut spec = LabSpec::new(name);
        spec.hosts = self.hosts.clone();
        spec.queues = self.queues;
        spec.track_flows = self.track_flows;
        spec.ipv6 = !self.no_ipv6;
        spec.software_rss = !self.no_software_rss;
        if let Some(path) = &self.config {
            spec = spec.with_config(rss::RssConfig::from_file(path)?);
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_build_lab_spec_new() {
        let spec = SpecArgs::default().spec("t").unwrap();
        let plain = LabSpec::new("t");
        assert_eq!(spec.hosts, plain.hosts);
        assert_eq!(spec.queues, plain.queues);
        assert_eq!(
            (spec.ipv6, spec.software_rss, spec.track_flows),
            (plain.ipv6, plain.software_rss, plain.track_flows)
        );
    }

    #[test]
    fn flags_reach_the_spec() {
        let args = SpecArgs {
            hosts: vec!["a".into(), "b".into(), "c".into()],
            queues: 2,
            no_ipv6: true,
            no_software_rss: true,
            ..SpecArgs::default()
        };
        let spec = args.spec("t").unwrap();
        assert_eq!(spec.hosts.len(), 3);
        assert_eq!(spec.queues, 2);
        assert!(!spec.ipv6 && !spec.software_rss);
    }

    #[test]
    fn config_file_sets_the_queues() {
        let dir = std::env::temp_dir().join(format!("lab-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cfg.json");
        let config = rss::RssConfig::ethtool_default(rss::RssKey::microsoft(), 3, 64).unwrap();
        std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
        let args = SpecArgs {
            config: Some(path),
            ..SpecArgs::default()
        };
        let spec = args.spec("t").unwrap();
        assert_eq!(spec.queues, 3);
        assert_eq!(spec.config, Some(config));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_config_file_is_bad_input() {
        let args = SpecArgs {
            config: Some("/nonexistent/steer-lab.json".into()),
            ..SpecArgs::default()
        };
        let err = args.spec("t").unwrap_err();
        assert!(err.is_bad_input(), "{err}");
        assert!(err.to_string().contains("steer-lab.json"), "{err}");
    }
}
