//! The namespace lab: named network namespaces joined by veths, with Steer's
//! software RSS (crate `nic`) on the receiver.
//!
//! Two hosts (`snd`, `rcv`) are joined by one veth pair; more hosts are each
//! joined to a bridge in a switch namespace. Addresses come from a private
//! test range and live on the lab's veths only: `10.77.<index>.<host+1>/24`
//! and `fd77:<index>::<host+1>/64`, `index` derived from the lab name.
//!
//! # API
//!
//! ```text
//! pub struct LabSpec { name, hosts, queues, table, key, fields, ipv6, track_flows,
//!                      wire, software_rss, owner }     // owner: $STEER_LAB_OWNER by default
//! impl LabSpec { pub fn new(name) -> Self }       // hosts snd,rcv; 4 queues; IPv6 on
//! impl LabSpec { pub fn wired(name) -> Self }     // through a wire; IPv4; no software RSS
//! impl Lab {
//!     pub fn up(&LabSpec) -> Result<Lab, LabError>      // idempotent
//!     pub fn open(name) / down(name) / status(name) / list()
//!     pub fn host(&self, name) -> Result<&Host, LabError>; receiver(); sender()
//!     pub fn command(&self, host, program) -> Result<Command, LabError>   // program, run in the host's namespace
//!     pub fn rss_config(&self) -> Result<RssConfig, LabError>
//!     pub fn wire(&self) -> Option<&Wire>               // the middle host, if any
//!     pub fn owner(&self) -> Option<&str>               // who made it
//!     pub fn switch_port(&self, host) -> Option<(String, String)> // (switch netns, port)
//!     pub fn teardown_on_drop(self) -> LabGuard
//! }
//! // code that runs inside a host's namespace: host::netns::run_in(Some(netns), f)
//! pub fn unique_name(prefix) -> String                  // prefix + pid + counter
//! pub mod packet  // Ethernet/IP/TCP/UDP frame builders; inject::send_frames (through pktio)
//! // a userspace data path on a host: inject::xdp_port(host) -> (AF_XDP port, MAC),
//! // inject::checksums_in_software_towards(lab, host)
//! ```
//!
//! # The wire (optional)
//!
//! With [`LabSpec::wire`] (two hosts only) the hosts are not joined directly:
//! each host's `veth0` is the peer of a device in a third namespace,
//! `<name>-wire`, named `to-<host>`. The wire namespace has no addresses; a
//! userspace forwarder there (crate `wire`, `steer wire`) moves frames
//! between its two devices and applies delay, loss and a rate limit. Both
//! hosts stay in one /24: the wire is a transparent L2 link. Until a
//! forwarder runs, nothing crosses. The hosts' veths get tx checksum offload
//! (and with it TSO) turned off, so the forwarder reads MTU-size frames with
//! complete checksums.
//!
//! # Cleanup rules
//!
//! `up` records every namespace it creates in `/run/steer/lab/<name>.json`
//! as soon as it exists; `down` (and a failed `up`) deletes only those, after
//! detaching the software RSS. A namespace that exists already and is not in
//! the state file is never touched (`up` fails instead). The veths live inside
//! the lab's namespaces and go away with them.
//!
//! # The checksum pitfall
//!
//! The veth that transmits into the receiver's XDP veth (the sender's, or the
//! switch port in front of the receiver) gets tx checksum offload turned off
//! with the `ETHTOOL_STXCSUM` ioctl (`host::link::set_tx_checksum`, same as
//! `ethtool -K DEV tx off`): otherwise frames redirected through the cpumap
//! reach TCP with unfilled checksums and are dropped (see `nic::offload`).
//! The same holds for a userspace receiver on AF_XDP (`toe`), which sees
//! frames as they were sent: in the direct and wire topologies every host
//! that transmits towards the receiver has its checksums filled in, so
//! callers need not turn anything off themselves.

pub mod args;
mod error;
mod exec;
pub mod inject;
mod lifecycle;
pub mod packet;
mod plan;
mod softrss;
mod spec;
mod state;
mod status;
mod topology;

pub use args::SpecArgs;
pub use error::LabError;
pub use lifecycle::LabGuard;
pub use softrss::DEFAULT_TABLE_SIZE;
pub use spec::{unique_name, LabSpec, OWNER_ENV};
pub use state::STATE_DIR;
pub use status::{HostStatus, LabStatus, WiredStatus};
pub use topology::{Host, Lab, Wire, HOST_DEV};
