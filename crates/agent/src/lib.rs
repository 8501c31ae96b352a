//! The receiver agent of SRAP's "RSS information exchange"
//! (papers/srap-source-port-selection.txt, section 3 (1)): a receiver serves
//! its RSS configuration per interface and local address, its per-CPU
//! softirq load, and the source address and port it sees for a request, so
//! a sender can pick source ports that land its flows on distinct cores.
//!
//! The paper exchanges "indirection tables, hash functions, IRQ mappings";
//! here that is the whole [`rss::RssConfig`] (key included: Linux drivers
//! default to a per-boot random key, so a sender can only predict with the
//! receiver's real one). The paper does not say how; this crate does it over
//! a small versioned HTTP/JSON API (docs/agent.md).
//!
//! # API
//!
//! ```text
//! // server
//! pub struct ServerOptions { listen, token, sources: Sources, load_interval, config_interval, workers, log }
//! pub struct Sources { devices: Devices::{All, Listed(..), None}, files: Vec<FileSource { path, addrs }>, netns }
//! impl Agent { pub fn start(ServerOptions) -> Result<Agent, AgentError>; local_addr(); url(); devices(); wait(); shutdown() }
//! // client
//! impl AgentClient {
//!     pub fn new(url, token: Option<&str>, timeout) -> Result<Self, ClientError>
//!     pub fn rss(addr) / rss_dev(dev) -> Result<RssReply, ClientError>
//!     pub fn load() -> LoadReply; whoami(); devices(); metrics()
//!     pub fn whoami_from(local_port) -> (SocketAddr, WhoamiReply)
//!     pub fn check_path(local_port) -> PathCheck { seen_addr, seen_port, nat, port_rewritten, .. }
//!     pub fn require_steerable_path(local_port) -> Result<PathCheck, ClientError::PortsRewritten>
//! }
//! // what a sender knows of a receiver: from its agent, a file or stated assumptions
//! pub enum ReceiverSource { Agent { url, token }, File(path), Stated(StatedConfig) }
//! impl Receiver { pub fn resolve(&ReceiverSource, to) -> Result<Receiver, ReceiverError>; plan(from, to, proto, flows, range, seed) }
//! pub fn source_address(from, seen_from, to, netns) -> Result<(IpAddr, SourceOrigin), ReceiverError>
//! // a plan with where its inputs came from (`steer ports plan`)
//! impl PlanResult { pub fn new(&Receiver, &PlanRequest { to, from, proto, flows, port_range, seed }) -> Result<PlanResult, ReceiverError> }
//! ```
//!
//! # Security
//!
//! The agent listens on 127.0.0.1 by default; [`Agent::start`] refuses any
//! other address without a [`Token`]. With a token every request, `/metrics`
//! included, must carry `Authorization: Bearer TOKEN` (compared in constant
//! time); a refused request is answered 401 and logged as one line with the
//! peer, method, path (without query) and reason, never the token. The API
//! is read-only: nothing a client sends changes the host.

pub mod allocator;
pub mod api;
pub mod args;
pub mod client;
pub mod error;
mod http;
pub mod listening;
pub mod load;
pub mod metrics;
pub mod plan;
pub mod receiver;
pub mod served;
pub mod server;
pub mod token;

pub use api::{
    ConfigOrigin, CpuLoad, DeviceLoad, DevicesReply, ErrorReply, LoadReply, QueueLoad, RssReply,
    ServedEntry, WhoamiReply, API_VERSION,
};
pub use args::{ReceiverArgs, ServeArgs};
pub use client::{AgentClient, ClientError, PathCheck};
pub use error::AgentError;
pub use plan::{PlanRequest, PlanResult};
pub use receiver::{Receiver, ReceiverError, ReceiverSource, SourceOrigin};
pub use served::{Devices, FileSource, Sources};
pub use server::{stderr_log, Agent, LogFn, ServerOptions, DEFAULT_PORT};
pub use token::{Rejection, Token, TokenError};
