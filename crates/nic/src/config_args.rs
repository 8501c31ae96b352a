//! Where a command takes a device's RSS config from, as a command line
//! names it (`steer rss where`): a file, the live device (its software RSS
//! when attached, else the NIC's; [`crate::device_config`]) or stated
//! assumptions. Here rather than in `rss`, which cannot read the software
//! RSS state this crate keeps.

use std::path::PathBuf;

use rss::{RssConfig, StatedArgs};

use crate::error::NicError;

/// Where the RSS configuration comes from (exactly one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LocalConfigArgs {
    /// An RssConfig JSON file (from `steer rss config` or `steer rss show --json`).
    #[cfg_attr(feature = "clap", arg(long, group = "from"))]
    pub config: Option<PathBuf>,
    /// A live device: Steer's software RSS config if attached, else the NIC's.
    #[cfg_attr(feature = "clap", arg(long, group = "from"))]
    pub dev: Option<String>,
    /// Network namespace of --dev; default: the namespace steer runs in.
    #[cfg_attr(feature = "clap", arg(long, requires = "dev"))]
    pub netns: Option<String>,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub assumed: StatedArgs,
}

impl LocalConfigArgs {
    /// The config named by `--config`, `--dev` or `--key`.
    pub fn load(&self) -> Result<RssConfig, NicError> {
        if let Some(path) = &self.config {
            return RssConfig::from_file(path).map_err(NicError::Rss);
        }
        if let Some(dev) = &self.dev {
            return Ok(crate::device_config(dev, self.netns.as_deref())?.1);
        }
        if self.assumed.key.is_some() {
            return self.assumed.config("microsoft").map_err(NicError::Rss);
        }
        Err(NicError::NoConfigSource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stated_key_builds_its_config() {
        let args = LocalConfigArgs {
            assumed: StatedArgs {
                key: Some("microsoft".into()),
                queues: 4,
                ..StatedArgs::default()
            },
            ..LocalConfigArgs::default()
        };
        let config = args.load().unwrap();
        assert_eq!(config.queues, 4);
        assert_eq!(config, args.assumed.config("microsoft").unwrap());
    }

    #[test]
    fn no_source_is_bad_input_naming_the_flags() {
        let err = LocalConfigArgs::default().load().unwrap_err();
        assert!(err.is_bad_input());
        assert_eq!(
            err.to_string(),
            "say where the RSS config comes from: --config FILE, --dev DEV, or --key KEY --queues N"
        );
    }

    #[test]
    fn a_missing_file_is_bad_input_with_rss_own_message() {
        let args = LocalConfigArgs {
            config: Some("/nonexistent/rss.json".into()),
            ..LocalConfigArgs::default()
        };
        let err = args.load().unwrap_err();
        assert!(err.is_bad_input(), "{err}");
        let direct = RssConfig::from_file(std::path::Path::new("/nonexistent/rss.json"));
        assert_eq!(err.to_string(), direct.unwrap_err().to_string());
    }
}
