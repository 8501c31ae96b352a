//! Which header fields are hashed, per flow type (`ethtool -n DEV rx-flow-hash`).
//!
//! Fields always enter the hash in the NIC's order: source address, destination
//! address, source port, destination port (Microsoft RSS specification).

use serde::{Deserialize, Serialize};

/// Flow types whose hashed fields a NIC lets you choose (ethtool's `tcp4`,
/// `udp4`, `tcp6`, `udp6`). Other IP traffic and IP fragments always hash the
/// two addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowType {
    Tcp4,
    Udp4,
    Tcp6,
    Udp6,
}

impl FlowType {
    pub const ALL: [FlowType; 4] = [
        FlowType::Tcp4,
        FlowType::Udp4,
        FlowType::Tcp6,
        FlowType::Udp6,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FlowType::Tcp4 => "tcp4",
            FlowType::Udp4 => "udp4",
            FlowType::Tcp6 => "tcp6",
            FlowType::Udp6 => "udp6",
        }
    }
}

/// One hashed field, as ethtool names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashField {
    SrcIp,
    DstIp,
    SrcPort,
    DstPort,
}

/// The set of fields hashed for one flow type. Serialized as a list such as
/// `["src-ip", "dst-ip", "src-port", "dst-port"]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HashFields {
    pub src_ip: bool,
    pub dst_ip: bool,
    pub src_port: bool,
    pub dst_port: bool,
}

impl HashFields {
    pub const FOUR_TUPLE: HashFields = HashFields {
        src_ip: true,
        dst_ip: true,
        src_port: true,
        dst_port: true,
    };
    pub const TWO_TUPLE: HashFields = HashFields {
        src_ip: true,
        dst_ip: true,
        src_port: false,
        dst_port: false,
    };

    pub fn hashes_ports(&self) -> bool {
        self.src_port || self.dst_port
    }

    fn list(&self) -> Vec<HashField> {
        let all = [
            (self.src_ip, HashField::SrcIp),
            (self.dst_ip, HashField::DstIp),
            (self.src_port, HashField::SrcPort),
            (self.dst_port, HashField::DstPort),
        ];
        all.iter().filter(|(on, _)| *on).map(|(_, f)| *f).collect()
    }

    fn from_list(list: &[HashField]) -> Self {
        HashFields {
            src_ip: list.contains(&HashField::SrcIp),
            dst_ip: list.contains(&HashField::DstIp),
            src_port: list.contains(&HashField::SrcPort),
            dst_port: list.contains(&HashField::DstPort),
        }
    }

    /// ethtool's letters: `s` source IP, `d` destination IP, `f` bytes 0-1 of
    /// the L4 header (source port), `n` bytes 2-3 (destination port).
    pub fn ethtool_letters(&self) -> String {
        let mut out = String::new();
        for (on, c) in [
            (self.src_ip, 's'),
            (self.dst_ip, 'd'),
            (self.src_port, 'f'),
            (self.dst_port, 'n'),
        ] {
            if on {
                out.push(c);
            }
        }
        out
    }
}

impl Serialize for HashFields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.list().serialize(s)
    }
}

impl<'de> Deserialize<'de> for HashFields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(HashFields::from_list(&Vec::<HashField>::deserialize(d)?))
    }
}

/// Hashed fields for each configurable flow type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashFieldsByFlow {
    pub tcp4: HashFields,
    pub udp4: HashFields,
    pub tcp6: HashFields,
    pub udp6: HashFields,
}

impl HashFieldsByFlow {
    /// The common Linux driver default: TCP hashes the 4-tuple, UDP only the
    /// addresses (so fragments of one datagram stay together).
    pub fn linux_default() -> Self {
        HashFieldsByFlow {
            tcp4: HashFields::FOUR_TUPLE,
            udp4: HashFields::TWO_TUPLE,
            tcp6: HashFields::FOUR_TUPLE,
            udp6: HashFields::TWO_TUPLE,
        }
    }

    /// Every flow type hashes the 4-tuple (mlx5's default, and what a UDP
    /// steering experiment wants).
    pub fn all_four_tuple() -> Self {
        HashFieldsByFlow {
            tcp4: HashFields::FOUR_TUPLE,
            udp4: HashFields::FOUR_TUPLE,
            tcp6: HashFields::FOUR_TUPLE,
            udp6: HashFields::FOUR_TUPLE,
        }
    }

    pub fn get(&self, flow: FlowType) -> HashFields {
        match flow {
            FlowType::Tcp4 => self.tcp4,
            FlowType::Udp4 => self.udp4,
            FlowType::Tcp6 => self.tcp6,
            FlowType::Udp6 => self.udp6,
        }
    }

    pub fn set(&mut self, flow: FlowType, fields: HashFields) {
        match flow {
            FlowType::Tcp4 => self.tcp4 = fields,
            FlowType::Udp4 => self.udp4 = fields,
            FlowType::Tcp6 => self.tcp6 = fields,
            FlowType::Udp6 => self.udp6 = fields,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_as_lists() {
        let json = serde_json::to_string(&HashFields::TWO_TUPLE).unwrap();
        assert_eq!(json, r#"["src-ip","dst-ip"]"#);
        let back: HashFields = serde_json::from_str(&json).unwrap();
        assert_eq!(back, HashFields::TWO_TUPLE);
    }

    #[test]
    fn unknown_field_name_is_rejected() {
        assert!(serde_json::from_str::<HashFields>(r#"["src-mac"]"#).is_err());
    }
}
