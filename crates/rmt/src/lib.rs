//! An RMT pipeline emulator and Laminar's TCP transport as a program on it.
//!
//! The reconfigurable match-action (RMT) architecture (thesis §5.1.1, Figure
//! 5.1) is a parser, a fixed sequence of ingress match-action stages, a
//! traffic manager (TM) that queues and may drop, egress stages that never
//! drop for want of room, and a deparser. Each stage owns its stateful
//! memory: a register is read-modify-written at most once per packet and
//! only in its stage, and values move forward only, in the packet header
//! vector (PHV). State is revisited only by mirroring or recirculating a
//! packet (both costly and lossy); a packet generator provides timers.
//!
//! [`program`] declares a program as stages of tables, actions and
//! registers; [`Pipeline::load`] rejects a program that breaks the rules
//! ([`ProgramError`]) and runs the accepted one on packets in emulated time,
//! handing each action only the fields and registers it declared.
//! [`laminar`] is Laminar's transport (thesis §5.3) written as such a
//! program; [`report`] sums a program's stages and state (Table 5.2).
//!
//! The crate is pure: no I/O and no threads. Whoever runs a program on real
//! packets feeds [`Pipeline::inject`] and drains [`Pipeline::take_emitted`].

pub mod channel;
pub mod check;
pub mod laminar;
pub mod phv;
pub mod pipeline;
pub mod pktgen;
pub mod program;
mod register;
pub mod report;
mod stage;
mod table;
pub mod tm;

pub use check::ProgramError;
pub use phv::{FieldId, Phv};
pub use pipeline::{Pipeline, PipelineConfig};
pub use program::{Program, ProgramBuilder};
