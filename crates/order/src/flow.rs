//! The flow key: the 4-tuple a SRPIC manager is keyed by (paper section 3.3).

use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr};

use serde::Serialize;

/// One direction of a transport connection: {src addr, dst addr, src port, dst port}.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

impl FlowKey {
    pub fn new(src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> Self {
        FlowKey {
            src,
            dst,
            sport,
            dport,
        }
    }
}

/// An IPv4 4-tuple as the header words a receive loop reads (host byte
/// order): the sorter's cheap key ([`crate::sorter::SortKey`]). Building it
/// makes no `IpAddr`; it is two words (both addresses, both ports), hashed
/// as two multiply rounds and compared as two integer compares. Each word is
/// built in a register and stored whole, so reading it back right away (the
/// next packet's lookup) never waits on two narrower stores.
/// [`FlowKey::from`] gives the general form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKeyV4 {
    /// Source address in the high half, destination in the low half.
    addrs: u64,
    /// Source port in the high half, destination port in the low half.
    ports: u32,
}

impl FlowKeyV4 {
    pub fn new(src: u32, sport: u16, dst: u32, dport: u16) -> Self {
        FlowKeyV4 {
            addrs: u64::from(src) << 32 | u64::from(dst),
            ports: u32::from(sport) << 16 | u32::from(dport),
        }
    }

    pub fn src(&self) -> u32 {
        (self.addrs >> 32) as u32
    }

    pub fn dst(&self) -> u32 {
        self.addrs as u32
    }

    pub fn sport(&self) -> u16 {
        (self.ports >> 16) as u16
    }

    pub fn dport(&self) -> u16 {
        self.ports as u16
    }
}

impl From<FlowKeyV4> for FlowKey {
    fn from(k: FlowKeyV4) -> Self {
        FlowKey::new(
            IpAddr::V4(Ipv4Addr::from(k.src())),
            k.sport(),
            IpAddr::V4(Ipv4Addr::from(k.dst())),
            k.dport(),
        )
    }
}

impl fmt::Display for FlowKeyV4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        FlowKey::from(*self).fmt(f)
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ep = |f: &mut fmt::Formatter<'_>, a: &IpAddr, p: u16| match a {
            IpAddr::V4(a) => write!(f, "{a}:{p}"),
            IpAddr::V6(a) => write!(f, "[{a}]:{p}"),
        };
        ep(f, &self.src, self.sport)?;
        f.write_str(" -> ")?;
        ep(f, &self.dst, self.dport)
    }
}

/// A small multiplicative hasher (the rustc "Fx" hash): flow keys are hashed
/// once per packet on the sorter's fast path, where SipHash costs too much.
/// Not DoS-resistant; the flow table is bounded, so a collision attack costs
/// lookups, not memory.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    /// A multiply carries entropy only upward, so the low bits (which pick
    /// the table bucket) depend only on the low bits of each word: a key whose
    /// varying part sits high (a source address above a fixed destination)
    /// would crowd a few buckets. Rotating the well-mixed top bits down fixes
    /// that (the "rustc-hash" 2 finish).
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
