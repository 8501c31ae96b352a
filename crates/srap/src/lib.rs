//! Port steering (SRAP, `papers/srap-source-port-selection.txt`): a sender
//! chooses TCP source ports so that N parallel flows land on N different
//! receiver cores, without changing the application or the receiver.
//!
//! - [`predict`]: where the flow from each source port lands, two table
//!   lookups per port (Toeplitz is linear over GF(2)).
//! - [`plan`]: ports for N flows, round-robin over CPUs, least loaded first,
//!   honouring the host's port range, reserved ports and ports in use.
//! - [`odds`]: what random ports give: the exact collision-free probability
//!   and the exact distribution of the most-loaded core.
//! - [`alloc`]: a local allocator service (JSON lines over a Unix socket) so
//!   concurrent processes get distinct cores, and its client.

pub mod alloc;
pub mod args;
pub mod error;
pub mod odds;
pub mod plan;
pub mod ports;
pub mod predict;

pub use args::{OddsArgs, SocketArgs};
pub use error::SrapError;
pub use plan::{plan, plan_from_config, plan_on_this_host, Plan, PlanEntry, PlanOptions};
pub use ports::{LocalPorts, PortRange, PortSet};
pub use predict::PortPredictor;
