//! Core-aware load balancing (CrossRSS) and the baselines it is compared with.
//!
//! A load balancer spreads connections over servers; each server's NIC then
//! spreads them over cores with RSS. CrossRSS (Barbette et al., CoNEXT '20,
//! `papers/crossrss-core-aware-lb.txt`) lets the load balancer see the cores:
//! it computes the same RSS hash as the servers' NICs, and a controller picks,
//! for each RSS bucket, the server whose core for that bucket is least loaded.
//!
//! - [`servers`]: each server's [`rss::RssConfig`] (same key, indirection
//!   table shuffled by a PRNG seeded with the server id).
//! - [`controller`]: agent reports -> bucket -> server table; the published
//!   controller, hierarchical aggregation, and Steer's `crossrss-plus`.
//! - [`maglev`]: Maglev consistent hashing, the industry baseline.
//! - [`trace`]: a minimal pcap reader (timestamps and 5-tuples).
//! - [`sim`]: the trace-driven simulator and the paper's metrics.
//! - [`limits`]: what bounds any policy on a trace (a floor, oracles, window
//!   sweeps).
//! - [`svg`]: the plots.

pub mod controller;
pub mod error;
pub mod limits;
pub mod maglev;
pub mod rng;
pub mod servers;
pub mod sim;
pub mod svg;
pub mod trace;

pub use controller::{
    combine_groups, crossrss_table, summarize_group, validate_reports, AgentReport, BucketTable,
    CrossRssPlus, GroupSummary, PlusParams,
};
pub use error::{ReportError, SimError, TraceError};
pub use maglev::Maglev;
pub use sim::{simulate, Policy, PolicyResult, Replay, SimConfig, SimReport, Simulator};
pub use trace::{Trace, TracePacket, TraceStats};
