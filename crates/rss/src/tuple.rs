//! Flow tuples and the byte string a NIC feeds to its hash.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::config::InputTransform;
use crate::error::RssError;
use crate::fields::{FlowType, HashFields};

/// The transport protocol of a flow, as far as RSS cares.
/// On the command line (feature `clap`): `tcp` or `udp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum L4Proto {
    Tcp,
    Udp,
    /// Any other IP protocol, or an IP fragment: the NIC hashes the addresses only.
    #[cfg_attr(feature = "clap", value(skip))]
    Other,
}

/// A flow as the receiving NIC sees it: source is the remote sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FlowTuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: L4Proto,
}

impl FlowTuple {
    pub fn new(src: IpAddr, src_port: u16, dst: IpAddr, dst_port: u16, proto: L4Proto) -> Self {
        FlowTuple {
            src,
            dst,
            src_port,
            dst_port,
            proto,
        }
    }

    /// The same flow seen from the other side.
    pub fn reversed(&self) -> Self {
        FlowTuple::new(self.dst, self.dst_port, self.src, self.src_port, self.proto)
    }

    /// The configurable flow type, or `None` for traffic that always hashes
    /// the 2-tuple.
    pub fn flow_type(&self) -> Option<FlowType> {
        match (self.proto, self.src.is_ipv4()) {
            (L4Proto::Tcp, true) => Some(FlowType::Tcp4),
            (L4Proto::Udp, true) => Some(FlowType::Udp4),
            (L4Proto::Tcp, false) => Some(FlowType::Tcp6),
            (L4Proto::Udp, false) => Some(FlowType::Udp6),
            (L4Proto::Other, _) => None,
        }
    }
}

/// `tcp 10.0.0.1:40000 -> 10.0.0.2:5201`, IPv6 as `[fd00::1]:40000`, and
/// `ip a -> b (2-tuple)` for traffic hashed on its addresses alone.
impl fmt::Display for FlowTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = match self.proto {
            L4Proto::Tcp => "tcp",
            L4Proto::Udp => "udp",
            L4Proto::Other => return write!(f, "ip {} -> {} (2-tuple)", self.src, self.dst),
        };
        write!(
            f,
            "{proto} {} -> {}",
            SocketAddr::new(self.src, self.src_port),
            SocketAddr::new(self.dst, self.dst_port)
        )
    }
}

/// The bytes hashed for one packet: at most two IPv6 addresses and two ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashInput {
    bytes: [u8; 36],
    len: usize,
}

impl HashInput {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn push(&mut self, data: &[u8]) {
        self.bytes[self.len..self.len + data.len()].copy_from_slice(data);
        self.len += data.len();
    }

    /// Builds the hash input in the NIC's field order (source address,
    /// destination address, source port, destination port), keeping only the
    /// selected fields, after the input transform (`ethtool -X ... symmetric-xor`
    /// or `symmetric-or-xor`, include/uapi/linux/ethtool.h RXH_XFRM_*).
    pub fn build(
        tuple: &FlowTuple,
        fields: HashFields,
        transform: InputTransform,
    ) -> Result<Self, RssError> {
        let (src, dst) = match (tuple.src, tuple.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => (s.octets().to_vec(), d.octets().to_vec()),
            (IpAddr::V6(s), IpAddr::V6(d)) => (s.octets().to_vec(), d.octets().to_vec()),
            (s, d) => {
                return Err(RssError::MixedFamilies {
                    src: s.to_string(),
                    dst: d.to_string(),
                })
            }
        };
        let (sp, dp) = (tuple.src_port, tuple.dst_port);
        let (src, dst, sp, dp) = match transform {
            InputTransform::None => (src, dst, sp, dp),
            InputTransform::SymXor => {
                let x: Vec<u8> = src.iter().zip(&dst).map(|(a, b)| a ^ b).collect();
                (x.clone(), x, sp ^ dp, sp ^ dp)
            }
            InputTransform::SymOrXor => {
                let or = src.iter().zip(&dst).map(|(a, b)| a | b).collect();
                let xor = src.iter().zip(&dst).map(|(a, b)| a ^ b).collect();
                (or, xor, sp | dp, sp ^ dp)
            }
        };
        let mut input = HashInput {
            bytes: [0; 36],
            len: 0,
        };
        if fields.src_ip {
            input.push(&src);
        }
        if fields.dst_ip {
            input.push(&dst);
        }
        if fields.src_port {
            input.push(&sp.to_be_bytes());
        }
        if fields.dst_port {
            input.push(&dp.to_be_bytes());
        }
        Ok(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_print_v6_addresses_in_brackets_and_2_tuples_without_ports() {
        for (src, dst, proto, text) in [
            (
                "10.0.0.1",
                "10.0.0.2",
                L4Proto::Tcp,
                "tcp 10.0.0.1:40000 -> 10.0.0.2:5201",
            ),
            (
                "fd00::1",
                "fd00::2",
                L4Proto::Udp,
                "udp [fd00::1]:40000 -> [fd00::2]:5201",
            ),
            (
                "10.0.0.1",
                "10.0.0.2",
                L4Proto::Other,
                "ip 10.0.0.1 -> 10.0.0.2 (2-tuple)",
            ),
        ] {
            let f = FlowTuple::new(
                src.parse().unwrap(),
                40000,
                dst.parse().unwrap(),
                5201,
                proto,
            );
            assert_eq!(f.to_string(), text);
        }
    }
}
