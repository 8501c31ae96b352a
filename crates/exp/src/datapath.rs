//! The toe data path as the experiments run it: an endpoint on a lab
//! host's AF_XDP port ([`endpoint`]) at an address of its own
//! ([`toe_addr`]), its errors as the experiment's, and the stream every
//! bulk transfer carries ([`pattern`]) with the receiver's check of it
//! ([`StreamCheck`]).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use serde::Serialize;
use toe::{Endpoint, EndpointConfig, EngineName, PipelineLayout, ToeError};

use crate::ExpError;

/// Who runs the connection's end under test: Linux TCP or an engine of
/// the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    Linux,
    Toe,
    Pipeline,
    Laminar,
}

impl From<EngineName> for Stack {
    fn from(e: EngineName) -> Self {
        match e {
            EngineName::Toe => Stack::Toe,
            EngineName::Pipeline => Stack::Pipeline,
            EngineName::Laminar => Stack::Laminar,
        }
    }
}

impl Stack {
    pub fn name(self) -> &'static str {
        match self {
            Stack::Linux => "linux",
            Stack::Toe => "toe",
            Stack::Pipeline => "pipeline",
            Stack::Laminar => "laminar",
        }
    }

    /// The data path's engine (None: Linux).
    pub(crate) fn engine(self) -> Option<toe::Engine> {
        match self {
            Stack::Linux => None,
            Stack::Toe => Some(toe::Engine::Toe),
            Stack::Pipeline => Some(toe::Engine::Pipeline(PipelineLayout::default())),
            Stack::Laminar => Some(toe::Engine::Laminar),
        }
    }
}

/// Engines in a result as their stacks' names (`toe`, `laminar`).
pub(crate) fn engine_names<S: serde::Serializer>(
    engines: &[EngineName],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(engines.iter().map(|&e| Stack::from(e).name()))
}

/// The data path's engines a run compares with Linux (`--engine`),
/// defined once for every experiment that has the flag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Engines {
    /// Data path engines, comma-separated (each beside Linux).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "toe,pipeline,laminar"
        )
    )]
    #[serde(serialize_with = "engine_names")]
    pub engine: Vec<EngineName>,
}

impl Default for Engines {
    fn default() -> Self {
        Engines {
            engine: vec![EngineName::Toe, EngineName::Pipeline, EngineName::Laminar],
        }
    }
}

impl Engines {
    /// These engines only.
    pub fn of(engine: &[EngineName]) -> Self {
        Engines {
            engine: engine.to_vec(),
        }
    }

    /// Linux, then each engine.
    pub fn stacks(&self) -> Vec<Stack> {
        std::iter::once(Stack::Linux)
            .chain(self.engine.iter().map(|&e| Stack::from(e)))
            .collect()
    }
}

/// A toe endpoint for `addr` on an AF_XDP port on `host`'s device.
pub(crate) fn endpoint(
    host: &lab::Host,
    addr: IpAddr,
    cfg: EndpointConfig,
) -> Result<Endpoint, ExpError> {
    let (port, mac) = lab::inject::xdp_port(host).map_err(|e| ExpError::Program {
        program: "AF_XDP port".into(),
        detail: e.to_string(),
    })?;
    Endpoint::new(port, mac, addr, cfg).map_err(toe_err)
}

/// A failure of the data path itself.
pub(crate) fn toe_err(e: ToeError) -> ExpError {
    ExpError::Program {
        program: "the toe data path".into(),
        detail: e.to_string(),
    }
}

/// The data path's address: on the lab's subnet, on no interface (the
/// receiver's AF_XDP port takes every frame for it).
pub(crate) fn toe_addr(lab: &lab::Lab) -> IpAddr {
    let o = lab.receiver().ipv4.octets();
    IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 100))
}

/// Byte `i` of every stream the experiments send: no two nearby offsets
/// alike, so a byte in the wrong place is caught.
pub(crate) fn pattern(i: u64) -> u8 {
    ((i as u32).wrapping_mul(2_654_435_761) >> 24) as u8
}

/// What a stream receiver has received: bytes, whether each matched
/// [`pattern`], and when the first and the last arrived.
#[derive(Default)]
pub(crate) struct StreamCheck {
    got: u64,
    mismatched: bool,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl StreamCheck {
    /// Checks the next received bytes against the pattern.
    pub(crate) fn take(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        self.first.get_or_insert(now);
        self.last = Some(now);
        let got = self.got;
        self.mismatched |= !bytes
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(got + i as u64));
        self.got += bytes.len() as u64;
    }

    /// (bytes, seconds from the first byte to now, all matched).
    pub(crate) fn finish(&self) -> (u64, f64, bool) {
        let secs = self.first.map_or(0.0, |t| t.elapsed().as_secs_f64());
        (self.got, secs, !self.mismatched)
    }

    /// Seconds from the first byte to the last (0 without a byte).
    pub(crate) fn first_to_last(&self) -> f64 {
        self.first
            .zip(self.last)
            .map_or(0.0, |(a, b)| (b - a).as_secs_f64())
    }
}

/// The closing line of a stream experiment's table: whether every
/// transfer arrived byte for byte.
pub(crate) fn byte_exact_line(exact: bool) -> String {
    format!(
        "byte-exact: {} (every transfer checked byte for byte)",
        if exact { "yes" } else { "NO" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_check_counts_bytes_and_catches_one_wrong_byte() {
        let sent: Vec<u8> = (0..1000).map(pattern).collect();
        let mut stream = StreamCheck::default();
        stream.take(&sent[..300]);
        stream.take(&sent[300..]);
        let (got, _, ok) = stream.finish();
        assert_eq!((got, ok), (1000, true));
        assert!(stream.first_to_last() >= 0.0);
        let mut wrong = sent.clone();
        wrong[700] ^= 1;
        let mut stream = StreamCheck::default();
        stream.take(&wrong[..500]);
        stream.take(&wrong[500..]);
        assert!(!stream.finish().2);
        let empty = StreamCheck::default();
        let (got, secs, ok) = empty.finish();
        assert_eq!((got, secs, ok), (0, 0.0, true));
        assert_eq!(empty.first_to_last(), 0.0);
    }
}
