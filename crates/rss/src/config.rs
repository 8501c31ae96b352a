//! [`RssConfig`]: one device's complete RSS configuration, and the prediction
//! made from it (hash -> indirection entry -> queue -> CPU).

use serde::{Deserialize, Serialize};

use crate::error::RssError;
use crate::fields::{HashFields, HashFieldsByFlow};
use crate::indirection::IndirectionTable;
use crate::key::RssKey;
use crate::toeplitz::ToeplitzTable;
use crate::tuple::{FlowTuple, HashInput};

/// Version of the JSON form written by [`RssConfig::to_json`].
pub const CONFIG_VERSION: u32 = 1;

/// The hash functions the kernel reports (`ETH_RSS_HASH_TOP`, `_XOR`, `_CRC32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HashFunction {
    Toeplitz,
    Xor,
    Crc32,
}

impl HashFunction {
    pub fn name(self) -> &'static str {
        match self {
            HashFunction::Toeplitz => "toeplitz",
            HashFunction::Xor => "xor",
            HashFunction::Crc32 => "crc32",
        }
    }
}

/// Transform applied to the fields before hashing, so both directions of a flow
/// hash alike (`ETHTOOL_A_RSS_INPUT_XFRM`, include/uapi/linux/ethtool.h).
///
/// On the command line (feature `clap`) the names are ethtool's
/// (`ethtool -X DEV ... symmetric-xor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum InputTransform {
    /// Fields as they are.
    #[default]
    None,
    /// `RXH_XFRM_SYM_XOR`: (src^dst, src^dst, sport^dport, sport^dport).
    #[cfg_attr(feature = "clap", value(name = "symmetric-xor"))]
    SymXor,
    /// `RXH_XFRM_SYM_OR_XOR` (Linux 6.15): (src|dst, src^dst, sport|dport, sport^dport).
    #[cfg_attr(feature = "clap", value(name = "symmetric-or-xor"))]
    SymOrXor,
}

/// Everything needed to say where a flow lands on one device.
///
/// JSON form (all fields required except `rps_cpus`; unknown fields rejected):
/// ```json
/// { "version": 1, "hash_function": "toeplitz", "key": "6d5a56da...",
///   "input_transform": "none",
///   "fields": { "tcp4": ["src-ip","dst-ip","src-port","dst-port"], "udp4": ["src-ip","dst-ip"],
///               "tcp6": [...], "udp6": [...] },
///   "queues": 4, "indirection_table": [0,1,2,3, ...], "queue_cpus": [0,1,2,3],
///   "rps_cpus": [[], [], [], []] }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RssConfig {
    pub version: u32,
    pub hash_function: HashFunction,
    pub key: RssKey,
    pub input_transform: InputTransform,
    pub fields: HashFieldsByFlow,
    /// Number of receive queues (rx or combined channels).
    pub queues: u32,
    pub indirection_table: IndirectionTable,
    /// CPU serving each queue's interrupt (index = queue).
    pub queue_cpus: Vec<u32>,
    /// RPS CPUs per queue (`/sys/class/net/DEV/queues/rx-N/rps_cpus`); an
    /// empty list means RPS is off for that queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rps_cpus: Vec<Vec<u32>>,
}

/// Where a flow lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub hash: u32,
    /// Indirection table entry used.
    pub index: usize,
    pub queue: u32,
    /// The CPU that processes the flow: the queue's IRQ CPU, or the RPS choice.
    pub cpu: u32,
}

/// What a user states about a device that cannot be inspected (the
/// `--key/--queues/--table-size/--weight/--udp-ports/--transform` options):
/// [`RssConfig::ethtool_default`] with the stated changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatedConfig {
    pub key: RssKey,
    pub queues: u32,
    pub table_size: usize,
    /// Fill the table like `ethtool -X DEV weight W0 W1 ...` (one weight per
    /// queue); empty: equally.
    pub weights: Vec<u32>,
    /// Hash UDP on ports too (default: addresses only).
    pub udp_ports: bool,
    pub input_transform: InputTransform,
}

impl StatedConfig {
    /// The stated key and queues, everything else as `ethtool -X DEV default`.
    pub fn new(key: RssKey, queues: u32, table_size: usize) -> Self {
        StatedConfig {
            key,
            queues,
            table_size,
            weights: Vec::new(),
            udp_ports: false,
            input_transform: InputTransform::None,
        }
    }

    /// The config, validated.
    pub fn build(&self) -> Result<RssConfig, RssError> {
        let mut config =
            RssConfig::ethtool_default(self.key.clone(), self.queues, self.table_size)?;
        if !self.weights.is_empty() {
            if self.weights.len() != self.queues as usize {
                return Err(RssError::WeightCount {
                    weights: self.weights.len(),
                    queues: self.queues,
                });
            }
            config.indirection_table =
                IndirectionTable::weighted(self.table_size, &self.weights, 0)?;
        }
        if self.udp_ports {
            config.fields = HashFieldsByFlow::all_four_tuple();
        }
        config.input_transform = self.input_transform;
        config.validate()?;
        Ok(config)
    }
}

impl RssConfig {
    /// The configuration `ethtool -X DEV default` gives a device with `queues`
    /// queues: Toeplitz, the given key, 4-tuple TCP / 2-tuple UDP, table entry
    /// i -> queue i % queues, queue q served by CPU q.
    pub fn ethtool_default(key: RssKey, queues: u32, table_size: usize) -> Result<Self, RssError> {
        let config = RssConfig {
            version: CONFIG_VERSION,
            hash_function: HashFunction::Toeplitz,
            key,
            input_transform: InputTransform::None,
            fields: HashFieldsByFlow::linux_default(),
            queues,
            indirection_table: IndirectionTable::equal(table_size, queues, 0)?,
            queue_cpus: (0..queues).collect(),
            rps_cpus: Vec::new(),
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks the parts against each other.
    pub fn validate(&self) -> Result<(), RssError> {
        if self.version != CONFIG_VERSION {
            return Err(RssError::InvalidConfig(format!(
                "version {} is not supported (expected {CONFIG_VERSION})",
                self.version
            )));
        }
        if self.queues == 0 {
            return Err(RssError::NoQueues);
        }
        self.indirection_table.check_queues(self.queues)?;
        if self.queue_cpus.len() != self.queues as usize {
            return Err(RssError::QueueCpuCount {
                listed: self.queue_cpus.len(),
                queues: self.queues,
            });
        }
        if !self.rps_cpus.is_empty() && self.rps_cpus.len() != self.queues as usize {
            return Err(RssError::InvalidConfig(format!(
                "rps_cpus lists {} queues but the device has {}",
                self.rps_cpus.len(),
                self.queues
            )));
        }
        Ok(())
    }

    pub fn from_json(text: &str) -> Result<Self, RssError> {
        let config: RssConfig =
            serde_json::from_str(text).map_err(|e| RssError::InvalidConfig(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and validates a config file (JSON, as `steer rss show --json`
    /// prints it): the one loader every crate and command uses.
    pub fn from_file(path: &std::path::Path) -> Result<Self, RssError> {
        let text = std::fs::read_to_string(path).map_err(|e| RssError::Unreadable {
            what: "RSS config",
            path: path.display().to_string(),
            kind: e.kind(),
            reason: e.to_string(),
        })?;
        RssConfig::from_json(&text).map_err(|e| RssError::InFile {
            path: path.display().to_string(),
            source: Box::new(e),
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("RssConfig always serializes")
    }

    /// Fields hashed for this flow.
    pub fn fields_for(&self, tuple: &FlowTuple) -> HashFields {
        tuple
            .flow_type()
            .map_or(HashFields::TWO_TUPLE, |flow| self.fields.get(flow))
    }

    /// The exact bytes the NIC hashes for this flow.
    pub fn hash_input(&self, tuple: &FlowTuple) -> Result<HashInput, RssError> {
        HashInput::build(tuple, self.fields_for(tuple), self.input_transform)
    }

    fn check_toeplitz(&self) -> Result<(), RssError> {
        match self.hash_function {
            HashFunction::Toeplitz => Ok(()),
            other => Err(RssError::UnsupportedHash(other.name().to_string())),
        }
    }

    /// The 32-bit RSS hash of a flow.
    pub fn hash(&self, tuple: &FlowTuple) -> Result<u32, RssError> {
        self.check_toeplitz()?;
        let input = self.hash_input(tuple)?;
        crate::toeplitz::toeplitz_reference(&self.key, input.as_bytes())
    }

    /// Where a flow lands. For many flows, use [`Predictor`], which keeps the
    /// key's tables.
    pub fn place(&self, tuple: &FlowTuple) -> Result<Placement, RssError> {
        Ok(self.place_hash(self.hash(tuple)?))
    }

    /// Queue and CPU for a hash already computed.
    pub fn place_hash(&self, hash: u32) -> Placement {
        let index = self.indirection_table.index_of(hash);
        let queue = self.indirection_table.queue_at(index);
        Placement {
            hash,
            index,
            queue,
            cpu: self.cpu_for(queue, hash),
        }
    }

    /// The CPU for a queue: RPS picks `rps_cpus[(hash * len) >> 32]`
    /// (get_rps_cpu() in net/core/dev.c, reciprocal_scale); otherwise the
    /// queue's IRQ CPU.
    fn cpu_for(&self, queue: u32, hash: u32) -> u32 {
        let q = queue as usize;
        match self.rps_cpus.get(q) {
            Some(cpus) if !cpus.is_empty() => {
                cpus[((u64::from(hash) * cpus.len() as u64) >> 32) as usize]
            }
            _ => self.queue_cpus.get(q).copied().unwrap_or(queue),
        }
    }

    /// The distinct CPUs that serve queues.
    pub fn cpus(&self) -> Vec<u32> {
        let mut cpus: Vec<u32> = self.queue_cpus.clone();
        cpus.extend(self.rps_cpus.iter().flatten());
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }
}

/// A config with its key's Toeplitz tables precomputed, for placing many flows.
pub struct Predictor {
    config: RssConfig,
    table: ToeplitzTable,
}

impl Predictor {
    pub fn new(config: RssConfig) -> Result<Self, RssError> {
        config.validate()?;
        config.check_toeplitz()?;
        let table = ToeplitzTable::new(&config.key);
        Ok(Predictor { config, table })
    }

    pub fn config(&self) -> &RssConfig {
        &self.config
    }

    pub fn place(&self, tuple: &FlowTuple) -> Result<Placement, RssError> {
        let input = self.config.hash_input(tuple)?;
        Ok(self.config.place_hash(self.table.hash(input.as_bytes())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::L4Proto;

    #[test]
    fn stated_configs() {
        let plain = StatedConfig::new(RssKey::microsoft(), 4, 128)
            .build()
            .unwrap();
        assert_eq!(
            plain,
            RssConfig::ethtool_default(RssKey::microsoft(), 4, 128).unwrap()
        );
        let stated = StatedConfig {
            weights: vec![1, 0, 0, 1],
            udp_ports: true,
            input_transform: InputTransform::SymXor,
            ..StatedConfig::new(RssKey::microsoft(), 4, 128)
        };
        let config = stated.build().unwrap();
        assert_eq!(config.fields, HashFieldsByFlow::all_four_tuple());
        assert_eq!(config.input_transform, InputTransform::SymXor);
        let mut queues: Vec<u32> = config.indirection_table.entries().to_vec();
        queues.sort_unstable();
        queues.dedup();
        assert_eq!(queues, [0, 3]);
        let wrong = StatedConfig {
            weights: vec![1, 1, 1],
            ..StatedConfig::new(RssKey::microsoft(), 4, 128)
        };
        let err = wrong.build().unwrap_err();
        assert_eq!(
            err,
            RssError::WeightCount {
                weights: 3,
                queues: 4
            }
        );
        assert_eq!(
            err.to_string(),
            "3 weights given for 4 queues (give one per queue)"
        );
        assert_eq!(
            StatedConfig::new(RssKey::microsoft(), 0, 128).build(),
            Err(RssError::NoQueues)
        );
    }

    fn tuple(s: &str, sp: u16, d: &str, dp: u16) -> FlowTuple {
        FlowTuple::new(s.parse().unwrap(), sp, d.parse().unwrap(), dp, L4Proto::Tcp)
    }

    #[test]
    fn json_round_trips() {
        let mut config = RssConfig::ethtool_default(RssKey::microsoft(), 4, 128).unwrap();
        config.rps_cpus = vec![vec![0, 1], vec![], vec![], vec![2]];
        let back = RssConfig::from_json(&config.to_json()).unwrap();
        // Through a file, and the file errors name the file on one line.
        let dir = std::env::temp_dir().join(format!("rss-config-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rss.json");
        std::fs::write(&file, config.to_json()).unwrap();
        assert_eq!(RssConfig::from_file(&file).unwrap(), config);
        std::fs::write(&file, "{\"version\": 1").unwrap();
        let err = RssConfig::from_file(&file).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: invalid RSS config", file.display())),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        let err = RssConfig::from_file(std::path::Path::new("/nonexistent/rss.json")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot read RSS config /nonexistent/rss.json"),
            "{err}"
        );
        assert!(err.is_bad_input());
        assert_eq!(back, config);
    }

    #[test]
    fn unknown_and_missing_fields_are_rejected() {
        let config = RssConfig::ethtool_default(RssKey::microsoft(), 4, 128).unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&config.to_json()).unwrap();
        value["colour"] = "blue".into();
        let err = RssConfig::from_json(&value.to_string()).unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        let mut value: serde_json::Value = serde_json::from_str(&config.to_json()).unwrap();
        value.as_object_mut().unwrap().remove("key");
        let err = RssConfig::from_json(&value.to_string()).unwrap_err();
        assert!(err.to_string().contains("key"), "{err}");
    }

    #[test]
    fn table_naming_missing_queue_is_rejected() {
        let mut config = RssConfig::ethtool_default(RssKey::microsoft(), 4, 8).unwrap();
        config.queues = 2;
        config.queue_cpus = vec![0, 1];
        assert!(matches!(
            config.validate(),
            Err(RssError::QueueOutOfRange { .. })
        ));
    }

    #[test]
    fn non_toeplitz_hash_is_reported_not_guessed() {
        let mut config = RssConfig::ethtool_default(RssKey::microsoft(), 4, 8).unwrap();
        config.hash_function = HashFunction::Crc32;
        let err = config
            .place(&tuple("1.2.3.4", 1, "5.6.7.8", 2))
            .unwrap_err();
        assert_eq!(err, RssError::UnsupportedHash("crc32".into()));
        assert!(Predictor::new(config).is_err());
    }

    #[test]
    fn rps_picks_by_reciprocal_scale() {
        let mut config = RssConfig::ethtool_default(RssKey::microsoft(), 1, 8).unwrap();
        config.rps_cpus = vec![vec![4, 5, 6, 7]];
        assert_eq!(config.place_hash(0).cpu, 4);
        assert_eq!(config.place_hash(0x4000_0000).cpu, 5);
        assert_eq!(config.place_hash(0xffff_ffff).cpu, 7);
    }

    #[test]
    fn predictor_agrees_with_config() {
        let config = RssConfig::ethtool_default(RssKey::symmetric(52), 7, 128).unwrap();
        let predictor = Predictor::new(config.clone()).unwrap();
        for port in [1u16, 80, 443, 40000, 65535] {
            let t = tuple("10.0.0.1", port, "10.0.0.2", 5201);
            assert_eq!(predictor.place(&t).unwrap(), config.place(&t).unwrap());
        }
    }
}
