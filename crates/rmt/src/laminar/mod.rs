//! Laminar's TCP transport (thesis chapter 5) as a program for the
//! emulator, its control plane, and a model of the host side (libTOE's
//! receive buffer) for examples and tests.

pub mod control;
mod deparse;
pub mod example;
pub mod fields;
pub mod host;
mod ingress;
mod parse;
pub mod program;
mod reassembly;
pub mod receiver;
pub mod segment;
mod transmission;

pub use control::{install, remove, ConnectionSpec, ControlPlane};
pub use program::{program, LaminarConfig};
