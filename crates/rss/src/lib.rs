//! The exact RSS model shared by every part of Steer.
//!
//! Receive Side Scaling (RSS) decides which receive queue, and so which CPU core,
//! a packet lands on: the NIC hashes selected header fields with a secret key
//! (Toeplitz, in the field order of the Microsoft RSS specification), uses the low
//! bits of the hash to index an indirection table of queues, and the queue's
//! interrupt is served by one CPU (optionally re-steered by RPS).
//!
//! [`RssConfig`] holds all of that for one device. It is read from a live NIC
//! ([`live`]), written as JSON, loaded into the XDP software RSS, and used by every
//! predictor in Steer, so a prediction made anywhere is made the same way.

pub mod args;
pub mod config;
pub mod endpoint;
pub mod error;
pub mod fields;
pub mod indirection;
pub mod key;
#[cfg(feature = "live")]
pub mod live;
pub mod prediction;
pub mod toeplitz;
pub mod tuple;

pub use args::{StatedArgs, TableArgs};
pub use config::{HashFunction, InputTransform, Placement, Predictor, RssConfig, StatedConfig};
pub use endpoint::Endpoint;
pub use error::RssError;
pub use fields::{FlowType, HashFields, HashFieldsByFlow};
pub use indirection::IndirectionTable;
pub use key::RssKey;
pub use prediction::Prediction;
pub use toeplitz::{toeplitz_reference, PathUnsupported, ToeplitzPath, ToeplitzTable};
pub use tuple::{FlowTuple, HashInput, L4Proto};
