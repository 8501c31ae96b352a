//! The host's plumbing that several crates need: entering network
//! namespaces ([`netns`]), asking the kernel about devices over netlink
//! ([`link`], on the request loop in [`netlink`]), a namespace's own sysfs
//! ([`sysfs`]) and protocol counters ([`snmp`]), running tools such as
//! `ip` ([`command`]), preloading shims ([`preload`]), taking in a BPF
//! program's skeleton ([`bpf_skeleton!`]) and reading its per-CPU counters
//! ([`bpf::percpu_values`]),
//! checking privilege ([`is_root`], [`require_root`]) and reading how busy
//! the CPUs were ([`cpu`]).
//!
//! It is a crate of its own, at the ground of the workspace, because its
//! users are at every layer: `pktio` (raw sockets opened in a namespace)
//! and the tests of `rss` (reading a device in a namespace) stand on
//! nothing else of the workspace and on neither of each other, and `nic`,
//! `lab`, `agent`, `binder`, `wire`, `lbxdp`, `bench` and the binary stand
//! on top of them; `testkit` checks for root through it. It must never
//! depend on another crate of the workspace.
//!
//! ```text
//! netns::run_in(netns, f) -> Result<T, HostError>        // f on a thread inside netns (None: here)
//! netns::spawn_in(name, f) -> JoinHandle<Result<T, HostError>>
//! netns::enter(name)                                     // the calling thread
//! netns::enter_in_child(&mut Command, name)              // the child joins before exec
//! netns::set_sysctl(netns, key, value)                   // a net.* sysctl of that namespace
//! netns::{add, delete, path, open, exists, names, current_name}
//! link::{link(netns, dev), links(netns), nsid_names(netns)} // RTM_GETLINK, RTM_GETNSID
//! link::{add_veth, add_bridge, set_up, set_controller, add_address, add_route, delete}
//! link::{tx_checksum, set_tx_checksum, set_gro}             // ethtool ioctls
//! link::{qdiscs(netns, dev), replace_root_pfifo(netns, dev, limit)} // RTM_GETQDISC, RTM_NEWQDISC
//! sysfs::Sysfs::of(netns).{write, list, path}             // /sys as that namespace sees it
//! snmp::Counters::read(netns).get("TcpRetransSegs")      // /proc/net/{snmp,netstat}, nstat's names
//! netlink::NlSocket::{open, request, request_each}       // one request, its replies
//! command::run(&mut Command) -> Result<String, HostError> // stdout; stderr in the error
//! command::ip(args) -> Result<String, HostError>
//! command::find_program(name) -> Option<PathBuf>         // as the shell looks it up
//! command::{wait_like_system(&mut Command), exit_code(status)} // a user program, as system(3)
//! preload::{install(bytes, name), install_in, preload(&mut Command, shim)} // LD_PRELOAD shims
//! bpf_skeleton!("prog.skel.rs", pod: [map_key, map_value]) // mod skel, its map types Pod
//! bpf::percpu_values::<T>(map, key, lookup_percpu(..)?)   // every CPU's value, or MapValueError
//! bpf::event_count(map, key, lookup_percpu(..)?)         // a steer_counters.h count, summed
//! is_root(), require_root(what)
//! cpu::CpuTimes::{read(), busy_since(&before)}          // /proc/stat
//! cpu::pin_current_thread(cpu)                          // sched_setaffinity
//! cpu::pin_thread(tid, cpu)                             // the same, another task
//! cpu::{allowed_cpus(), last_allowed_cpu()}            // sched_getaffinity
//! ```
//!
//! Errors say what they are about ([`HostError::is_environment`],
//! [`HostError::is_bad_input`]); the crates that call this one wrap them in
//! their own errors.

pub mod bpf;
pub mod command;
pub mod cpu;
mod error;
pub mod link;
pub mod netlink;
pub mod netns;
pub mod preload;
pub mod snmp;
pub mod sysfs;

pub use error::{error_line, HostError};

// The unit tests include root-only ones (#[ignore]): strict mode runs them.
#[cfg(test)]
testkit::strict_mode_guard!();

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// [`HostError::Privilege`] naming `what` unless this process runs as root.
pub fn require_root(what: &str) -> Result<(), HostError> {
    if is_root() {
        Ok(())
    } else {
        Err(HostError::Privilege {
            what: what.to_string(),
        })
    }
}

/// What the root tests of this crate set up.
#[cfg(test)]
pub(crate) mod test_lab {
    /// Two fresh namespaces joined by veth `va` (in the first) and `vb`.
    pub fn veth_pair(prefix: &str) -> [testkit::Netns; 2] {
        testkit::require_root("network namespaces");
        let ns = [
            testkit::Netns::new(&format!("{prefix}-a")),
            testkit::Netns::new(&format!("{prefix}-b")),
        ];
        crate::link::add_veth("va", ns[0].name(), "vb", ns[1].name()).unwrap();
        ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn into_io_keeps_the_kind_of_the_failure() {
        use std::io::ErrorKind;
        let kind = |e: HostError| e.into_io().kind();
        let no_ns = HostError::NoSuchNetns { name: "x".into() };
        assert_eq!(kind(no_ns), ErrorKind::NotFound);
        let privilege = HostError::Privilege { what: "x".into() };
        assert_eq!(kind(privilege), ErrorKind::PermissionDenied);
        let refused = HostError::Io {
            what: "setns".into(),
            source: ErrorKind::PermissionDenied.into(),
        };
        let text = refused.to_string();
        let io = refused.into_io();
        assert_eq!(io.kind(), ErrorKind::PermissionDenied);
        assert_eq!(io.to_string(), text);
    }

    #[test]
    fn require_root_agrees_with_the_effective_uid() {
        // SAFETY: geteuid cannot fail; read independently of nix.
        let uid = unsafe { nix::libc::geteuid() };
        assert_eq!(is_root(), uid == 0);
        match require_root("open the thing") {
            Ok(()) => assert_eq!(uid, 0),
            Err(e) => {
                assert_ne!(uid, 0);
                assert!(e.is_environment());
                assert!(e.to_string().contains("open the thing"), "{e}");
            }
        }
    }
}
