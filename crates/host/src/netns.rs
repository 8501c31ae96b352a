//! Network namespaces by name, as `ip netns add NAME` makes them (a file
//! under `/run/netns` holding the namespace open).
//!
//! `setns(CLONE_NEWNET)` moves only the calling thread (setns(2)), and
//! threads and processes it spawns inherit its namespace. So work for a
//! namespace runs on a short-lived thread that joins it ([`run_in`],
//! [`spawn_in`]) and sees that namespace's devices, netlink and ifindexes;
//! a socket keeps the namespace it was created in, so it can be used from
//! any thread afterwards. A child process joins before it executes
//! ([`enter_in_child`]) instead of going through `ip netns exec`, which
//! remounts /sys and so hides the cgroup and bpf filesystems from it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::JoinHandle;

use nix::sched::{setns, CloneFlags};

use crate::HostError;

/// Where `ip netns` keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// The file of namespace `name`; a name that could not be one (empty, with
/// a `/`, `.` or `..`) is [`HostError::NoSuchNetns`].
pub fn path(name: &str) -> Result<PathBuf, HostError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(no_such(name));
    }
    Ok(Path::new(NETNS_DIR).join(name))
}

/// Whether namespace `name` exists.
pub fn exists(name: &str) -> bool {
    path(name).is_ok_and(|p| p.exists())
}

/// Opens namespace `name` (for [`setns`]).
pub fn open(name: &str) -> Result<File, HostError> {
    let path = path(name)?;
    File::open(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => no_such(name),
        _ => HostError::io(format!("open {}", path.display()), e),
    })
}

fn no_such(name: &str) -> HostError {
    HostError::NoSuchNetns {
        name: name.to_string(),
    }
}

fn join(file: &File, name: &str) -> Result<(), HostError> {
    setns(file, CloneFlags::CLONE_NEWNET)
        .map_err(|e| HostError::io(format!("setns to network namespace '{name}'"), e.into()))
}

/// Moves the calling thread into namespace `name`, for good.
pub fn enter(name: &str) -> Result<(), HostError> {
    join(&open(name)?, name)
}

/// Starts `f` on a new thread inside namespace `name`. The namespace is
/// opened before the thread starts, so a name that names nothing fails
/// here; failing to enter it is the thread's result.
pub fn spawn_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<Result<T, HostError>>, HostError> {
    let file = open(name)?;
    let name = name.to_string();
    std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || {
            join(&file, &name)?;
            Ok(f())
        })
        .map_err(|e| HostError::io("spawn a thread for setns", e))
}

/// Runs `f` in namespace `netns` and returns what it returns (`None`: on
/// the calling thread, in its own namespace). A panic in `f` goes on in
/// the caller.
pub fn run_in<T: Send + 'static>(
    netns: Option<&str>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, HostError> {
    let Some(name) = netns else {
        return Ok(f());
    };
    match spawn_in(name, f)?.join() {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Sets the sysctl `key` (dotted: `net.ipv4.ip_forward`) to `value` in
/// namespace `netns`. The `net.*` sysctls belong to a network namespace,
/// and /proc/sys shows those of the reading thread's, so the file is
/// written from a thread inside it.
pub fn set_sysctl(netns: &str, key: &str, value: &str) -> Result<(), HostError> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let value = value.to_string();
    run_in(Some(netns), move || {
        std::fs::write(&path, value).map_err(|e| HostError::io(format!("write {path}"), e))
    })?
}

/// Makes the child of `cmd` join namespace `name` before it executes.
pub fn enter_in_child(cmd: &mut Command, name: &str) -> Result<(), HostError> {
    let file = open(name)?;
    // SAFETY: the closure only calls setns (async-signal-safe) on an fd it
    // owns; `file` lives in the closure, so it stays open in the parent
    // until the Command is dropped.
    unsafe {
        cmd.pre_exec(move || {
            if nix::libc::setns(file.as_raw_fd(), nix::libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// Creates namespace `name` (`ip netns add`: a mount of a fresh namespace
/// under /run/netns, which is not a netlink request, so the tool does it).
pub fn add(name: &str) -> Result<(), HostError> {
    path(name)?;
    crate::command::ip(&["netns", "add", name]).map(drop)
}

/// Deletes namespace `name` (`ip netns del`); its devices go with it once
/// no process or socket holds it.
pub fn delete(name: &str) -> Result<(), HostError> {
    path(name)?;
    crate::command::ip(&["netns", "del", name]).map(drop)
}

/// The names under /run/netns, sorted; none when the directory does not
/// exist (no namespace was ever named on this host).
pub fn names() -> Result<Vec<String>, HostError> {
    let entries = match std::fs::read_dir(NETNS_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(HostError::Io {
                what: format!("listing {NETNS_DIR}"),
                source,
            })
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// The name under /run/netns of the calling thread's namespace, if it has
/// one; `None` in the initial namespace, even if that is also bound under
/// a name.
pub fn current_name() -> Option<String> {
    let me = std::fs::metadata("/proc/thread-self/ns/net").ok()?;
    let root = std::fs::metadata("/proc/1/ns/net").ok();
    if root.is_some_and(|r| r.dev() == me.dev() && r.ino() == me.ino()) {
        return None;
    }
    std::fs::read_dir(NETNS_DIR)
        .ok()?
        .flatten()
        .find(|e| {
            std::fs::metadata(e.path()).is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino())
        })
        .and_then(|e| e.file_name().into_string().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifindex_of(dev: &str) -> Option<u32> {
        nix::net::if_::if_nametoindex(dev).ok()
    }

    /// The devices a thread sees: from /proc/self/net/dev, which follows
    /// the namespace of the reading thread (through /proc/thread-self).
    fn devices() -> Vec<String> {
        let text = std::fs::read_to_string("/proc/thread-self/net/dev")
            .expect("read /proc/thread-self/net/dev");
        text.lines()
            .skip(2)
            .filter_map(|l| Some(l.split(':').next()?.trim().to_string()))
            .collect()
    }

    #[test]
    fn names_that_cannot_be_namespaces_are_no_such_netns() {
        for bad in ["", ".", "..", "a/b", "../x"] {
            let e = path(bad).unwrap_err();
            assert!(e.is_bad_input(), "{bad:?}: {e}");
            assert!(!exists(bad));
        }
        let e = run_in(Some("steer-no-such-namespace"), || ()).unwrap_err();
        assert!(matches!(e, HostError::NoSuchNetns { .. }), "{e}");
        assert!(e.to_string().contains("steer-no-such-namespace"), "{e}");
    }

    #[test]
    fn none_runs_on_the_calling_thread() {
        let me = std::thread::current().id();
        assert_eq!(
            run_in(None, move || std::thread::current().id()).unwrap(),
            me
        );
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn a_thread_in_a_namespace_sees_its_own_loopback_only() {
        testkit::require_root("network namespaces");
        let ns = testkit::Netns::new("hostns-lo");
        let outside = devices();
        let (inside, lo, name) = run_in(Some(ns.name()), || {
            (devices(), ifindex_of("lo"), current_name())
        })
        .unwrap();
        // A fresh namespace holds its own loopback and nothing else.
        assert_eq!(inside, vec!["lo".to_string()], "outside: {outside:?}");
        assert_eq!(lo, Some(1));
        assert_eq!(name.as_deref(), Some(ns.name()));
        // The caller's thread did not move.
        assert_eq!(devices(), outside);
        assert!(exists(ns.name()));
        // A spawned thread: the same view, the result through the handle.
        let spawned = spawn_in(ns.name(), devices)
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(spawned, vec!["lo".to_string()]);
        // Its sysctls are its own: a fresh namespace does not forward.
        const FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
        let read = || std::fs::read_to_string(FORWARD).unwrap().trim().to_string();
        let outside = read();
        assert_eq!(run_in(Some(ns.name()), read).unwrap(), "0");
        set_sysctl(ns.name(), "net.ipv4.ip_forward", "1").unwrap();
        assert_eq!(run_in(Some(ns.name()), read).unwrap(), "1");
        assert_eq!(read(), outside);
        let e = set_sysctl(ns.name(), "net.steer.no_such_key", "1").unwrap_err();
        assert!(e.to_string().contains("net/steer/no_such_key"), "{e}");
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn a_child_joins_the_namespace_before_it_executes() {
        testkit::require_root("network namespaces");
        let ns = testkit::Netns::new("hostns-child");
        let mut cmd = Command::new("cat");
        cmd.arg("/proc/self/net/dev");
        enter_in_child(&mut cmd, ns.name()).unwrap();
        let out = crate::command::run(&mut cmd).unwrap();
        let devs: Vec<&str> = out
            .lines()
            .skip(2)
            .filter_map(|l| Some(l.split(':').next()?.trim()))
            .collect();
        assert_eq!(devs, vec!["lo"]);
    }
}
