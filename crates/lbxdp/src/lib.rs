//! The live CrossRSS load balancer (docs/crossrss.md, "The live data plane"): an XDP L4 data
//! plane in a load-balancer namespace of the lab, backends with Steer's
//! software RSS and their own randomised indirection tables, the real Steer
//! agent (crate `agent`) on every backend reporting per-queue load and its
//! RSS config over HTTP, and the controller of crate `lb` writing the
//! bucket table at a fixed rate. See docs/crossrss.md, "The live data plane".
//!
//! - [`maps`]: the program (`bpf/lbxdp.bpf.c`), its maps (`bpf/lbxdp.h`) in
//!   load-balancer terms, BPF_PROG_TEST_RUN.
//! - [`agents`]: the backends' agents and the controller's HTTP clients.

pub mod agents;
pub mod error;
pub mod maps;

pub use error::LbXdpError;
pub use maps::{BackendEntry, Datapath, LbStats, Mode};
pub mod control;
pub mod live;
pub mod traffic;

pub use control::{ControlLoop, Controller, LivePolicy, LoopSummary, StepInfo};
pub use live::{LiveLab, LiveSpec};
