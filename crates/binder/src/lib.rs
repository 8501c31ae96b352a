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
//! # API
//!
//! ```text
//! plan::plan_ports(&RssConfig, local, remote, remote_port, max_ports, &PortSet) -> Plan
//! plan::route_source(SocketAddr) -> IpAddr
//! preload::{SHIM, install_shim(), configure(&mut Command, shim, socket)}
//! cgroup::CgroupBinder::{attach(cgroup), open_pinned(cgroup), pin(), set_plan(&Plan), stats()}
//! cgroup::{detach_pinned(cgroup), TempCgroup::{create(), enter_in_child(&mut Command)}}
//! netns::{run_in(name, f), enter_in_child(&mut Command, name)}
//! ```

pub mod cgroup;
pub mod error;
pub mod netns;
pub mod plan;
pub mod preload;
pub mod run;

pub use cgroup::{BinderStats, CgroupBinder, TempCgroup};
pub use error::BinderError;
pub use plan::{plan_ports, Plan, PlanEntry, PortSet};
