//! `toe`: a TCP data path in userspace after FlexTOE (thesis chapter 4,
//! ../shared/papers/flextoe-laminar-thesis.txt): the data path of
//! established connections is split into modules with private state
//! (pre-processing, protocol, post-processing, payload copy, context
//! queue), and a control plane outside it opens and closes connections and
//! handles timeouts.
//!
//! - [`segment`]: frames in and out (the pre-processor's *Val* step, and
//!   the headers the post-processor builds).
//! - [`state`]: the connection state partitioned as in Table 4.1, one type
//!   per stage.
//! - [`protocol`]: the protocol stage, the only per-connection atomic one.
//! - [`ooo`]: the out-of-order intervals it keeps (0, 1, N or unbounded).
//! - [`sack`]: SACK blocks, the ones a receiver reports (RFC 2018, D-SACK
//!   of RFC 2883) and the sender's scoreboard (RFC 6675).
//! - [`recovery`]: what the protocol stage sends again after a loss
//!   (RFC 6675 SACK recovery, NewReno without SACK, after a timeout).
//! - [`stages`]: the pre-processor, protocol and post-processor, each
//!   holding its partition's table.
//! - [`buffer`]: the per-connection payload rings.
//! - [`cc`]: congestion control policies (NewReno, DCTCP), run out of
//!   band by the control plane.
//! - [`wheel`]: the flow scheduler, a Carousel-style time wheel for
//!   rate-limited flows and round-robin for the rest.
//! - [`ablation`]: thesis Table 4.4's ablation, the pipeline driven
//!   in-process by a closed-loop RPC client and an echo application.
//! - [`cycles`]: what each stage of the endpoint costs, per segment.
//! - [`input`]: parallel input after OpenBSD, three ways to lock
//!   connection state, measured side by side.
//! - [`endpoint`]: the stages run to completion on a pktio AF_XDP port,
//!   with the control plane (passive open, RST, teardown, retransmission
//!   timeouts) and the application interface (accept, recv, send, close).
//! - [`app`]: the same interface for other processes: a service over
//!   shared memory, a Rust client API and an LD_PRELOAD sockets shim.

pub mod ablation;
pub mod app;
pub mod buffer;
pub mod cc;
pub mod cycles;
pub mod endpoint;
pub mod input;
pub mod laminar;
pub mod naps;
pub mod ooo;
pub mod pipeline;
pub mod protocol;
pub mod prr;
pub mod recovery;
pub mod sack;
pub mod segment;
pub mod sequencer;
pub mod stages;
pub mod state;
pub mod wheel;

pub use endpoint::{
    Counters, Endpoint, EndpointConfig, Engine, EngineChoice, EngineName, PipelineLayout, TcpInfo,
    ToeError,
};
