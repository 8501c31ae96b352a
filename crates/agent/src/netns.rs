//! Network namespaces: the agent's sockets and kernel reads must happen in
//! the namespace of the devices it serves.
//!
//! `setns(CLONE_NEWNET)` moves only the calling thread, and threads it spawns
//! inherit its namespace; so the agent binds its listener on a thread that
//! joined the namespace (a socket keeps the namespace it was created in) and
//! runs its sampler thread inside it.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::sched::{setns, CloneFlags};

use crate::error::AgentError;

/// Where `ip netns` keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

fn netns_path(name: &str) -> Result<PathBuf, AgentError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(AgentError::NoSuchNetns {
            netns: name.to_string(),
        });
    }
    Ok(Path::new(NETNS_DIR).join(name))
}

/// Moves the calling thread into the named namespace.
pub fn enter(name: &str) -> Result<(), AgentError> {
    let path = netns_path(name)?;
    let file = File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => AgentError::NoSuchNetns {
            netns: name.to_string(),
        },
        _ => AgentError::Io {
            what: format!("open {}", path.display()),
            source: e,
        },
    })?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| AgentError::Io {
        what: format!("setns to network namespace '{name}'"),
        source: e.into(),
    })
}

/// Runs `f` on a thread inside `netns` (`None`: the caller's namespace,
/// on the calling thread): [`nic::netns::run_in`], with its errors as
/// [`AgentError`]s.
pub fn run_in<T: Send + 'static>(
    netns: Option<&str>,
    f: impl FnOnce() -> Result<T, AgentError> + Send + 'static,
) -> Result<T, AgentError> {
    match nic::netns::run_in(netns, move || Ok(f())) {
        Ok(result) => result,
        Err(nic::NicError::NoSuchNetns { netns }) => Err(AgentError::NoSuchNetns { netns }),
        Err(e) => {
            let kind = if e.is_environment() {
                std::io::ErrorKind::PermissionDenied
            } else {
                std::io::ErrorKind::Other
            };
            Err(AgentError::Io {
                what: "enter the network namespace".into(),
                source: std::io::Error::new(kind, e.to_string()),
            })
        }
    }
}

/// The name under /run/netns of the calling thread's namespace, if it has
/// one (so `ip netns exec NS steer agent` finds the software RSS that was
/// attached with `--netns NS`, whose state is kept under that name).
pub fn current_name() -> Option<String> {
    let me = std::fs::metadata("/proc/thread-self/ns/net").ok()?;
    let root = std::fs::metadata("/proc/1/ns/net").ok();
    if root.is_some_and(|r| r.dev() == me.dev() && r.ino() == me.ino()) {
        return None; // the initial namespace, even if also bound under a name
    }
    std::fs::read_dir(NETNS_DIR)
        .ok()?
        .flatten()
        .find(|e| {
            std::fs::metadata(e.path()).is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino())
        })
        .and_then(|e| e.file_name().into_string().ok())
}
