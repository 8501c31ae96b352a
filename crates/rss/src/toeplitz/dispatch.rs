//! Which Toeplitz implementation a [`super::ToeplitzTable`] runs.
//!
//! Chosen once per table: [`ToeplitzPath::detect`] takes the fastest path
//! whose CPU features are all present; [`super::ToeplitzTable::with_path`]
//! forces one (benchmarks, and the tests that check every path against the
//! same vectors on any host). A path the CPU lacks is an error naming the
//! missing features, never a silent fallback.
//!
//! There is no AVX2-only path: without GFNI the affine trick is gone, and
//! AVX2 offers only gathers (`VPGATHERDD`), which on the CPUs that have AVX2
//! but not GFNI (AMD Zen 2/3, Intel before Ice Lake) cost more per table
//! lookup than the scalar loads they would replace. Those CPUs run
//! [`ToeplitzPath::Table`], whose batch form interleaves four tuples.

use std::fmt;

/// A way to compute the hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToeplitzPath {
    /// `GF2P8AFFINEQB` on AVX-512 registers, the method of DPDK's
    /// `rte_thash_gfni` (see `gfni.rs`): x86-64 with GFNI, AVX-512F,
    /// AVX-512BW and AVX-512VBMI.
    GfniAvx512,
    /// One table lookup per input byte (any CPU); batches interleave four
    /// tuples so their lookups overlap.
    Table,
}

/// The CPU features each path needs, as `is_x86_feature_detected!` names
/// them.
const GFNI_AVX512_FEATURES: [&str; 4] = ["gfni", "avx512f", "avx512bw", "avx512vbmi"];

impl ToeplitzPath {
    /// Every path, fastest first.
    pub const ALL: [ToeplitzPath; 2] = [ToeplitzPath::GfniAvx512, ToeplitzPath::Table];

    pub fn name(self) -> &'static str {
        match self {
            ToeplitzPath::GfniAvx512 => "gfni-avx512",
            ToeplitzPath::Table => "table",
        }
    }

    /// The CPU features this path needs.
    pub fn required_features(self) -> &'static [&'static str] {
        match self {
            ToeplitzPath::GfniAvx512 => &GFNI_AVX512_FEATURES,
            ToeplitzPath::Table => &[],
        }
    }

    /// The required features that `has` reports absent.
    pub fn missing_with(self, has: impl Fn(&str) -> bool) -> Vec<&'static str> {
        self.required_features()
            .iter()
            .copied()
            .filter(|f| !has(f))
            .collect()
    }

    /// The required features this CPU lacks (empty: the path can run here).
    pub fn missing(self) -> Vec<&'static str> {
        self.missing_with(cpu_has)
    }

    /// The fastest path whose features `has` reports; [`ToeplitzPath::Table`]
    /// needs none, so there always is one.
    pub fn best_with(has: impl Fn(&str) -> bool) -> Self {
        Self::ALL
            .into_iter()
            .find(|p| p.missing_with(&has).is_empty())
            .unwrap_or(ToeplitzPath::Table)
    }

    /// The fastest path this CPU runs.
    pub fn detect() -> Self {
        Self::best_with(cpu_has)
    }
}

impl fmt::Display for ToeplitzPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether this CPU has `feature` (a name from [`ToeplitzPath::required_features`]).
fn cpu_has(feature: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match feature {
            "gfni" => is_x86_feature_detected!("gfni"),
            "avx512f" => is_x86_feature_detected!("avx512f"),
            "avx512bw" => is_x86_feature_detected!("avx512bw"),
            "avx512vbmi" => is_x86_feature_detected!("avx512vbmi"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        false
    }
}

/// A path was asked for that this CPU cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {path} Toeplitz path needs CPU features this CPU lacks: {}", missing.join(", "))]
pub struct PathUnsupported {
    pub path: ToeplitzPath,
    pub missing: Vec<&'static str>,
}

impl PathUnsupported {
    /// Always the machine, not the input (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        true
    }
}
