//! Steer's test matrix, after the OpenBSD network stack's daily regress and
//! performance runs (papers/openbsd-parallel-tcp-slides.txt, "Test Matrix"):
//! every experiment and benchmark is a declared case ([`case`]), expanded
//! into a matrix of parameters (listed with their command lines: [`list`]),
//! run in its own process group with a timeout and given a state
//! ([`State`]: PASS, FAIL, NOVALUE, NOEXIT, TIMEOUT, NORUN, NOLOG) by
//! [`runner`]; results go to a SQLite history ([`db`]),
//! are compared with the noise band of their repetitions ([`compare`]),
//! checked for state regressions against a baseline ([`check`]) and shown
//! as a static HTML page ([`report`]). How to add a case: docs/bench.md.

pub mod case;
pub mod check;
pub mod compare;
pub mod criterion;
pub mod db;
mod error;
pub mod list;
pub mod progress;
pub mod report;
pub mod run;
pub mod runner;
mod state;
pub mod stats;

pub use case::{load_matrix, Case, CaseFile, CaseSpec};
pub use db::History;
pub use error::BenchError;
pub use state::State;

// The unit tests include root-only ones (#[ignore]): strict mode runs them.
#[cfg(test)]
testkit::strict_mode_guard!();
