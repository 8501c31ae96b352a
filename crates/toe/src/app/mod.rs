//! The application interface (thesis chapter 3's libTOE and context
//! queues, section 5.3's shared payload buffers): applications in other
//! processes use the data path through a service that runs the endpoint.
//!
//! - [`layout`]: the shared-memory layout and control messages, defined
//!   once in `shim/toe_app.h` and pinned here at compile time.
//! - [`shm`]: a context's memfd, with each payload ring mapped twice back
//!   to back (Fig. 5.7) so a wrapping copy is one copy.
//! - [`ctl`]: the control channel (SOCK_SEQPACKET, descriptors passed as
//!   SCM_RIGHTS) and the eventfd wake-ups.
//! - [`notice`]: a connection's descriptor, a socket pair whose readiness
//!   (POLLIN, POLLOUT, POLLRDHUP, POLLHUP, POLLERR) the service drives as
//!   the kernel drives a TCP socket's.
//! - [`request`]: a control request checked once into a command, or the
//!   errno its reply carries.
//! - [`service`]: the service: the endpoint, the contexts, and the moving
//!   of bytes between connections and rings.
//! - [`client`]: the Rust API (listen, accept, connect, send, recv, close).
//! - [`shim`]: the LD_PRELOAD sockets shim (`shim/toe_preload.c`) that
//!   runs unmodified programs on the data path.

pub mod client;
pub mod ctl;
pub mod layout;
pub mod notice;
pub mod request;
pub mod run;
pub mod service;
pub mod shim;
pub mod shm;

pub use client::{Connection, Context, Listener};
pub use layout::{DEBUG_ENV, SOCKET_ENV};
pub use run::{run, socket_path, Program, RunError};
pub use service::{Service, ServiceHandle};
