//! The flow key: the 4-tuple a SRPIC manager is keyed by (paper section 3.3).

use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

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
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
