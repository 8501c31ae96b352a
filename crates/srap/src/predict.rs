//! The port-to-CPU predictor (SRAP paper, section 3, component 2): where a
//! flow from `local:port` to `remote:remote_port` lands on the receiver, for
//! every candidate source `port`, and a port for a wanted queue or CPU.
//!
//! # Why two table lookups per port are exact
//!
//! Toeplitz is linear over GF(2) (see `rss::toeplitz`): `h(a ^ b) = h(a) ^ h(b)`.
//! The receiver hashes the input `src ip | dst ip | src port | dst port`
//! (only the fields it is configured to hash). Write it as the XOR of the same
//! input with the source port zeroed (fixed by the addresses and destination
//! port) and an input that is zero except for the two source-port bytes:
//!
//! ```text
//! h(input(port)) = h(input(0)) ^ T[off][port >> 8] ^ T[off + 1][port & 0xff]
//! ```
//!
//! where `off` is the source port's byte offset in the input and `T[p][v]` is
//! the hash of a zero input with byte `v` at position `p`. So after building
//! two 256-entry tables once per (local, remote, remote port), each candidate
//! port costs two lookups and two XORs. This is a "port contribution table";
//! the paper only says the predictor "computes RSS hashes for
//! potential source ports" (section 3), which is what this does, fast.
//!
//! When the receiver applies an input transform (`symmetric-xor`,
//! `symmetric-or-xor`) the port enters the input through that transform
//! (`sport ^ dport`, `sport | dport`); the predictor then builds the real
//! hash input for each candidate instead (exact, slower).

use std::net::IpAddr;

use rand::Rng;
use rss::{
    toeplitz_reference, FlowTuple, HashFields, HashFunction, InputTransform, L4Proto, Placement,
    RssConfig, RssError, ToeplitzTable,
};

use crate::error::SrapError;
use crate::ports::PortRange;

/// How a candidate port's hash is computed.
#[derive(Clone)]
enum Mode {
    /// `fixed ^ hi[port >> 8] ^ lo[port & 0xff]`.
    Linear {
        fixed: u32,
        hi: Box<[u32; 256]>,
        lo: Box<[u32; 256]>,
    },
    /// Input transform set: the real input per candidate.
    General { table: ToeplitzTable },
}

/// Predicts the receiver queue and CPU of `local:port -> remote:remote_port`
/// for any source `port`, with the receiver's [`RssConfig`].
#[derive(Clone)]
pub struct PortPredictor {
    config: RssConfig,
    local: IpAddr,
    remote: IpAddr,
    remote_port: u16,
    proto: L4Proto,
    mode: Mode,
    /// Queue of each indirection entry.
    entry_queue: Vec<u32>,
    /// CPU of each indirection entry, when no queue uses RPS (the CPU then
    /// depends on the queue only).
    entry_cpu: Option<Vec<u32>>,
    /// `len - 1` when the table size is a power of two.
    mask: Option<usize>,
}

impl std::fmt::Debug for PortPredictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortPredictor")
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("remote_port", &self.remote_port)
            .field("proto", &self.proto)
            .field("linear", &matches!(self.mode, Mode::Linear { .. }))
            .finish_non_exhaustive()
    }
}

impl PortPredictor {
    /// `local` is the sender's address as the receiver sees it (the flow's
    /// source), `remote` the receiver's address, `remote_port` the port
    /// connected to. Fails when source ports cannot steer this flow: a hash
    /// other than Toeplitz, a flow type whose source port is not hashed
    /// (UDP hashing addresses only, the common default), or a key too short.
    pub fn new(
        config: &RssConfig,
        local: IpAddr,
        remote: IpAddr,
        remote_port: u16,
        proto: L4Proto,
    ) -> Result<Self, SrapError> {
        config.validate()?;
        if config.hash_function != HashFunction::Toeplitz {
            let name = config.hash_function.name().to_string();
            return Err(RssError::UnsupportedHash(name).into());
        }
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(SrapError::MixedFamilies {
                local: local.to_string(),
                remote: remote.to_string(),
            });
        }
        let flow = FlowTuple::new(local, 0, remote, remote_port, proto);
        let Some(flow_type) = flow.flow_type() else {
            return Err(SrapError::NoPorts(format!("{proto:?}").to_lowercase()));
        };
        let fields = config.fields.get(flow_type);
        if !fields.src_port {
            return Err(SrapError::PortNotHashed {
                flow_type: flow_type.name(),
                hashed: describe_fields(fields),
            });
        }
        let input = config.hash_input(&flow)?;
        let mode = if config.input_transform == InputTransform::None {
            // Two byte tables from 16 key windows; no full table needed.
            let bytes = input.as_bytes();
            let fixed = toeplitz_reference(&config.key, bytes)?;
            let addr_len = if local.is_ipv4() { 4 } else { 16 };
            let off = addr_len * (usize::from(fields.src_ip) + usize::from(fields.dst_ip));
            let mut one_bit = vec![0u8; bytes.len()];
            let mut windows = [0u32; 16];
            for (bit, w) in windows.iter_mut().enumerate() {
                let pos = off + bit / 8;
                one_bit[pos] = 0x80 >> (bit % 8);
                *w = toeplitz_reference(&config.key, &one_bit)?;
                one_bit[pos] = 0;
            }
            let byte_table = |w: &[u32]| -> Box<[u32; 256]> {
                Box::new(std::array::from_fn(|v| {
                    (0..8)
                        .filter(|j| v & (0x80 >> j) != 0)
                        .fold(0, |acc, j| acc ^ w[j])
                }))
            };
            Mode::Linear {
                fixed,
                hi: byte_table(&windows[..8]),
                lo: byte_table(&windows[8..]),
            }
        } else {
            let table = ToeplitzTable::new(&config.key);
            table.hash(input.as_bytes())?;
            Mode::General { table }
        };
        let entries = config.indirection_table.entries();
        let len = entries.len();
        let any_rps = config.rps_cpus.iter().any(|c| !c.is_empty());
        let entry_cpu = (!any_rps).then(|| {
            entries
                .iter()
                .map(|&q| config.queue_cpus.get(q as usize).copied().unwrap_or(q))
                .collect()
        });
        Ok(PortPredictor {
            config: config.clone(),
            local,
            remote,
            remote_port,
            proto,
            mode,
            entry_queue: entries.to_vec(),
            entry_cpu,
            mask: len.is_power_of_two().then(|| len - 1),
        })
    }

    pub fn config(&self) -> &RssConfig {
        &self.config
    }

    pub fn local(&self) -> IpAddr {
        self.local
    }

    pub fn remote(&self) -> IpAddr {
        self.remote
    }

    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    pub fn proto(&self) -> L4Proto {
        self.proto
    }

    /// True when each candidate costs two table lookups (no input transform).
    pub fn is_linear(&self) -> bool {
        matches!(self.mode, Mode::Linear { .. })
    }

    /// The flow with source port `port`, as the receiver sees it.
    pub fn flow(&self, port: u16) -> FlowTuple {
        FlowTuple::new(self.local, port, self.remote, self.remote_port, self.proto)
    }

    /// The receiver's RSS hash of the flow from source port `port`.
    #[inline]
    pub fn hash_of(&self, port: u16) -> u32 {
        match &self.mode {
            Mode::Linear { fixed, hi, lo } => {
                fixed ^ hi[usize::from(port >> 8)] ^ lo[usize::from(port & 0xff)]
            }
            Mode::General { table } => self
                .config
                .hash_input(&self.flow(port))
                .ok()
                .and_then(|input| table.hash(input.as_bytes()).ok())
                // Both were checked with the same family and length in new().
                .unwrap_or(0),
        }
    }

    #[inline]
    fn entry_of(&self, hash: u32) -> usize {
        match self.mask {
            Some(mask) => hash as usize & mask,
            None => hash as usize % self.entry_queue.len(),
        }
    }

    /// Receive queue of the flow from source port `port`.
    #[inline]
    pub fn queue_of(&self, port: u16) -> u32 {
        self.entry_queue[self.entry_of(self.hash_of(port))]
    }

    /// CPU of the flow from source port `port` (the queue's IRQ CPU, or the
    /// RPS choice).
    #[inline]
    pub fn cpu_of(&self, port: u16) -> u32 {
        let hash = self.hash_of(port);
        match &self.entry_cpu {
            Some(cpus) => cpus[self.entry_of(hash)],
            None => self.config.place_hash(hash).cpu,
        }
    }

    /// Queue and CPU of the flow from `port`, hashing once.
    #[inline]
    pub fn queue_and_cpu_of(&self, port: u16) -> (u32, u32) {
        let hash = self.hash_of(port);
        match &self.entry_cpu {
            Some(cpus) => {
                let e = self.entry_of(hash);
                (self.entry_queue[e], cpus[e])
            }
            None => {
                let p = self.config.place_hash(hash);
                (p.queue, p.cpu)
            }
        }
    }

    /// Hash, indirection entry, queue and CPU of the flow from `port`.
    pub fn place(&self, port: u16) -> Placement {
        self.config.place_hash(self.hash_of(port))
    }

    /// A port in `range` whose flow lands on `queue` and for which
    /// `is_free(port)` holds, scanning from a random start so that
    /// concurrent callers spread out. `None` when the range has none.
    pub fn port_for_queue(
        &self,
        queue: u32,
        range: PortRange,
        is_free: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        let start = rand::thread_rng().gen_range(0..range.len());
        self.port_for_queue_from(queue, range, start, is_free)
    }

    /// [`Self::port_for_queue`] scanning from offset `start` into the range.
    pub fn port_for_queue_from(
        &self,
        queue: u32,
        range: PortRange,
        start: u32,
        mut is_free: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        self.scan(range, start)
            .find(|&p| self.queue_of(p) == queue && is_free(p))
    }

    /// A port in `range` whose flow lands on `cpu`, like
    /// [`Self::port_for_queue`].
    pub fn port_for_cpu(
        &self,
        cpu: u32,
        range: PortRange,
        mut is_free: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        let start = rand::thread_rng().gen_range(0..range.len());
        self.scan(range, start)
            .find(|&p| self.cpu_of(p) == cpu && is_free(p))
    }

    /// Every port of `range` once, from offset `start`, wrapping.
    pub fn scan(&self, range: PortRange, start: u32) -> impl Iterator<Item = u16> {
        let start = start % range.len();
        let first = u32::from(range.low) + start;
        (first..=u32::from(range.high))
            .chain(u32::from(range.low)..first)
            .map(|p| p as u16)
    }
}

fn describe_fields(f: HashFields) -> String {
    let mut parts = Vec::new();
    if f.src_ip {
        parts.push("source address");
    }
    if f.dst_ip {
        parts.push("destination address");
    }
    if f.dst_port {
        parts.push("destination port");
    }
    if parts.is_empty() {
        "nothing".into()
    } else {
        format!("the {}", parts.join(" and "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rss::{HashFieldsByFlow, RssKey};

    fn v4(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn agrees_with_the_full_tuple_hash() {
        let config = RssConfig::ethtool_default(RssKey::microsoft(), 8, 128).unwrap();
        let rss = rss::Predictor::new(config.clone()).unwrap();
        let p = PortPredictor::new(&config, v4("10.0.0.1"), v4("10.0.0.2"), 5201, L4Proto::Tcp)
            .unwrap();
        assert!(p.is_linear());
        for port in [1u16, 80, 255, 256, 40000, 65535] {
            let want = rss.place(&p.flow(port)).unwrap();
            assert_eq!(p.place(port), want);
            assert_eq!(p.queue_of(port), want.queue);
            assert_eq!(p.cpu_of(port), want.cpu);
        }
    }

    #[test]
    fn udp_two_tuple_cannot_steer() {
        let config = RssConfig::ethtool_default(RssKey::microsoft(), 8, 128).unwrap();
        let err = PortPredictor::new(&config, v4("1.1.1.1"), v4("2.2.2.2"), 53, L4Proto::Udp)
            .unwrap_err();
        assert!(
            matches!(
                err,
                SrapError::PortNotHashed {
                    flow_type: "udp4",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("cannot steer"), "{err}");
        let mut config = config;
        config.fields = HashFieldsByFlow::all_four_tuple();
        assert!(
            PortPredictor::new(&config, v4("1.1.1.1"), v4("2.2.2.2"), 53, L4Proto::Udp).is_ok()
        );
    }

    #[test]
    fn other_hashes_and_families_are_errors() {
        let mut config = RssConfig::ethtool_default(RssKey::microsoft(), 8, 128).unwrap();
        let v6: IpAddr = "::1".parse().unwrap();
        assert!(matches!(
            PortPredictor::new(&config, v4("1.1.1.1"), v6, 1, L4Proto::Tcp),
            Err(SrapError::MixedFamilies { .. })
        ));
        assert!(matches!(
            PortPredictor::new(&config, v4("1.1.1.1"), v4("2.2.2.2"), 1, L4Proto::Other),
            Err(SrapError::NoPorts(_))
        ));
        config.hash_function = rss::HashFunction::Xor;
        let err =
            PortPredictor::new(&config, v4("1.1.1.1"), v4("2.2.2.2"), 1, L4Proto::Tcp).unwrap_err();
        assert!(err.to_string().contains("Toeplitz"), "{err}");
    }

    #[test]
    fn port_for_queue_finds_every_queue_or_none() {
        let config = RssConfig::ethtool_default(RssKey::microsoft(), 16, 128).unwrap();
        let p =
            PortPredictor::new(&config, v4("10.0.0.1"), v4("10.0.0.2"), 80, L4Proto::Tcp).unwrap();
        let range = PortRange::LINUX_DEFAULT;
        for q in 0..16 {
            let port = p.port_for_queue(q, range, |_| true).unwrap();
            assert!(range.contains(port));
            assert_eq!(p.queue_of(port), q);
            let port = p.port_for_cpu(q, range, |_| true).unwrap();
            assert_eq!(p.cpu_of(port), q);
        }
        assert_eq!(p.port_for_queue(16, range, |_| true), None);
        assert_eq!(p.port_for_queue(3, range, |_| false), None);
    }

    #[test]
    fn scan_visits_each_port_once() {
        let config = RssConfig::ethtool_default(RssKey::microsoft(), 2, 8).unwrap();
        let p =
            PortPredictor::new(&config, v4("10.0.0.1"), v4("10.0.0.2"), 80, L4Proto::Tcp).unwrap();
        let r = PortRange::new(100, 104).unwrap();
        assert_eq!(p.scan(r, 3).collect::<Vec<_>>(), [103, 104, 100, 101, 102]);
        assert_eq!(p.scan(r, 0).collect::<Vec<_>>(), [100, 101, 102, 103, 104]);
    }
}
