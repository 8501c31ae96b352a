//! Transparent source-port binders for SRAP
//! (papers/srap-source-port-selection.txt, section 3 (3)): make an
//! unmodified program's TCP connections use source ports chosen so that the
//! receiver's RSS puts each flow on its own core.
//!
//! Two binders, documented in docs/binders.md:
//!
//! - [`preload`]: a C library (`shim/steer_preload.c`) loaded with
//!   LD_PRELOAD that wraps connect(), asks the allocator (a Unix socket) for
//!   a port and pins it with IP_LOCAL_PORT_RANGE. Dynamically linked
//!   programs only.
//! - [`cgroup`]: cgroup connect4/connect6 BPF programs
//!   (`src/bpf/connect.bpf.c`) that bpf_bind() a planned port inside the
//!   kernel; works for static binaries, setuid programs and containers.
//!
//! Both fall back to the kernel's choice whenever steering is not possible;
//! a program never sees an error caused by a binder.
//!
//! Plans come from the one planner, [`srap::plan`] (CPUs first, then
//! queues; ports honour ip_local_port_range, reserved and used ports); the
//! source address from [`srap::alloc::source_address_for`]; work in another
//! network namespace, and a child that joins one before it executes, from
//! [`host::netns`]. This crate only adds what
//! binding needs.
//!
//! # API
//!
//! ```text
//! preload::{SHIM, install_shim(), configure(&mut Command, shim, socket)}
//! cgroup::CgroupBinder::{attach(cgroup), open_pinned(cgroup), open_or_attach_pinned(cgroup),
//!                        pin(), set_plan(&srap::Plan),
//!                        set_ports(local, remote, &[port]), stats()}
//! cgroup::{detach_pinned(cgroup), TempCgroup::{create(), enter_in_child(&mut Command)}}
//! plans::{plan(Receiver, seen_from, bind, to, ports) -> Planned, install(&binder, &[Planned]),
//!         plan_hosts(&[to], ports, from, learn, route_from) -> Vec<Planned>,
//!         plan_and_install(&binder, config, netns, from, &[to], ports)}
//! report::{BinderStatus::of(&binder), InstalledPlans(plans)}   // what `steer attach` shows
//! ```

pub mod args;
pub mod cgroup;
pub mod error;
pub mod plans;
pub mod preload;
pub mod report;

pub use args::DestinationArgs;
pub use cgroup::{BinderStats, CgroupBinder, TempCgroup};
pub use error::BinderError;
pub use report::{BinderStatus, InstalledPlans};
pub use srap::{Plan, PlanEntry};

// The unit tests include root-only ones (#[ignore]): strict mode runs them.
#[cfg(test)]
testkit::strict_mode_guard!();
