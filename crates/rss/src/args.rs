//! A device stated rather than inspected, as a command line gives it
//! (`steer rss where|config`, and the table flags of `steer ports plan`):
//! flags, defaults and help written once here (doc comments are the help;
//! feature `clap` derives `clap::Args`), turned into a [`StatedConfig`] in
//! one step.

use crate::config::{InputTransform, RssConfig, StatedConfig};
use crate::error::RssError;
use crate::key::RssKey;

/// How the indirection table is filled: its size, and equally or by weight.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TableArgs {
    /// Indirection table size (filled like ethtool's default, entry i ->
    /// queue i % queues, unless --weight).
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = TableArgs::default().table_size)
    )]
    pub table_size: usize,
    /// Fill the table like `ethtool -X DEV weight W0 W1 ...` instead of equally.
    #[cfg_attr(feature = "clap", arg(long, num_args = 1.., value_name = "W"))]
    pub weight: Vec<u32>,
}

impl Default for TableArgs {
    /// ethtool's usual 128 entries, filled equally.
    fn default() -> Self {
        TableArgs {
            table_size: 128,
            weight: Vec::new(),
        }
    }
}

impl TableArgs {
    /// `key` and `queues` with this table, everything else as `ethtool -X
    /// DEV default`.
    pub fn stated(&self, key: RssKey, queues: u32) -> StatedConfig {
        StatedConfig {
            weights: self.weight.clone(),
            ..StatedConfig::new(key, queues, self.table_size)
        }
    }
}

/// What a user states about a device that cannot be inspected. `--key`
/// joins the argument group `from` of the command's other config sources
/// (`--config`, `--dev`), so that only one is given.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct StatedArgs {
    /// Key: hex bytes (colons allowed), `microsoft` (the verification key),
    /// `symmetric` (0x6d5a repeated, 40 bytes) or @FILE (a file holding the
    /// hex). `rss config` without --key uses `microsoft`.
    #[cfg_attr(feature = "clap", arg(long, group = "from"))]
    pub key: Option<String>,
    /// Number of receive queues (queue q is assumed served by CPU q).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = StatedArgs::default().queues))]
    pub queues: u32,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub table: TableArgs,
    /// Hash UDP on ports too (default: addresses only, the common driver default).
    #[cfg_attr(feature = "clap", arg(long))]
    pub udp_ports: bool,
    /// Input transform, as `ethtool -X DEV ... symmetric-xor`.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_enum, default_value_t = InputTransform::None)
    )]
    pub transform: InputTransform,
}

impl Default for StatedArgs {
    /// No key, one queue, the default table, addresses-only UDP, no transform.
    fn default() -> Self {
        StatedArgs {
            key: None,
            queues: 1,
            table: TableArgs::default(),
            udp_ports: false,
            transform: InputTransform::None,
        }
    }
}

impl StatedArgs {
    /// The config these flags state, with `default_key` (a [`RssKey::from_arg`]
    /// name) when no --key was given.
    pub fn config(&self, default_key: &str) -> Result<RssConfig, RssError> {
        let key = RssKey::from_arg(self.key.as_deref().unwrap_or(default_key)).map_err(|e| {
            RssError::Option {
                option: "--key",
                source: Box::new(e),
            }
        })?;
        let stated = StatedConfig {
            udp_ports: self.udp_ports,
            input_transform: self.transform,
            ..self.table.stated(key, self.queues)
        };
        stated.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashFieldsByFlow;

    #[test]
    fn defaults_state_ethtools_default() {
        let config = StatedArgs::default().config("microsoft").unwrap();
        assert_eq!(
            config,
            RssConfig::ethtool_default(RssKey::microsoft(), 1, 128).unwrap()
        );
    }

    #[test]
    fn every_flag_reaches_the_config() {
        let args = StatedArgs {
            key: Some("symmetric".into()),
            queues: 2,
            table: TableArgs {
                table_size: 8,
                weight: vec![3, 1],
            },
            udp_ports: true,
            transform: InputTransform::SymXor,
        };
        let config = args.config("microsoft").unwrap();
        assert_eq!(config.key, RssKey::symmetric(40));
        assert_eq!(config.indirection_table.len(), 8);
        assert_eq!(config.indirection_table.entries_per_queue()[&0], 6);
        assert_eq!(config.fields, HashFieldsByFlow::all_four_tuple());
        assert_eq!(config.input_transform, InputTransform::SymXor);
    }

    #[test]
    fn bad_key_names_the_option() {
        let args = StatedArgs {
            key: Some("zz".into()),
            ..StatedArgs::default()
        };
        let err = args.config("microsoft").unwrap_err();
        assert!(err.to_string() == "--key" && err.is_bad_input(), "{err}");
        assert!(matches!(err, RssError::Option { .. }));
    }

    #[test]
    fn weights_must_match_queues() {
        let args = StatedArgs {
            queues: 4,
            table: TableArgs {
                weight: vec![1, 2],
                ..TableArgs::default()
            },
            ..StatedArgs::default()
        };
        assert!(matches!(
            args.config("microsoft"),
            Err(RssError::WeightCount {
                weights: 2,
                queues: 4
            })
        ));
    }
}
