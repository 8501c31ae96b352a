//! Running code and children in a named network namespace (/run/netns/NAME),
//! without `ip netns exec` (which remounts /sys and so hides the cgroup and
//! bpf filesystems from the child).

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::error::BinderError;

/// Opens `/run/netns/NAME`.
pub fn open(name: &str) -> Result<OwnedFd, BinderError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(BinderError::NoSuchNetns {
            name: name.to_string(),
        });
    }
    File::open(format!("/run/netns/{name}"))
        .map(OwnedFd::from)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BinderError::NoSuchNetns {
                name: name.to_string(),
            },
            _ => BinderError::io(format!("open /run/netns/{name}"), e),
        })
}

/// Runs `f` on a new thread that has joined network namespace `name`.
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T, BinderError> + Send + 'static,
) -> Result<T, BinderError> {
    let fd = open(name)?;
    std::thread::spawn(move || {
        // SAFETY: setns on a valid namespace fd only affects this thread.
        if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(BinderError::io("setns", std::io::Error::last_os_error()));
        }
        f()
    })
    .join()
    .unwrap_or_else(|_| Err(BinderError::Plan("namespace thread panicked".into())))
}

/// Makes the child join network namespace `name` before it executes.
pub fn enter_in_child(cmd: &mut Command, name: &str) -> Result<(), BinderError> {
    let fd = open(name)?;
    // SAFETY: the closure only calls setns (async-signal-safe) on an fd it
    // owns; `fd` stays open in the parent until the Command is dropped.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}
