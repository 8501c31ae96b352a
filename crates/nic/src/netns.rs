//! Running work inside a named network namespace.
//!
//! `setns(CLONE_NEWNET)` changes the namespace of the calling thread only, so
//! each operation runs in a fresh thread that joins `/run/netns/NAME` (the
//! place `ip netns add` creates) and then sees that namespace's devices,
//! netlink and ifindexes. Processes spawned from that thread inherit it.

use std::fs::File;
use std::path::PathBuf;

use nix::sched::{setns, CloneFlags};

use crate::error::NicError;

/// Where `ip netns` keeps the namespace named `name`.
pub fn netns_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// Runs `f` in the network namespace `netns` (`None`: the caller's own).
pub fn run_in<T, F>(netns: Option<&str>, f: F) -> Result<T, NicError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, NicError> + Send + 'static,
{
    let Some(name) = netns else {
        return f();
    };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(NicError::NoSuchNetns {
            netns: name.to_string(),
        });
    }
    let file = File::open(netns_path(name)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => NicError::NoSuchNetns {
            netns: name.to_string(),
        },
        _ => NicError::io(format!("open /run/netns/{name}"), e),
    })?;
    let name = name.to_string();
    let handle = std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || {
            setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| {
                NicError::io(format!("setns to network namespace '{name}'"), e.into())
            })?;
            f()
        })
        .map_err(|e| NicError::io("spawn a thread for setns", e))?;
    match handle.join() {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
