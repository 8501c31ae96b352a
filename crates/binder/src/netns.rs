//! Starting a child in a named network namespace (/run/netns/NAME) without
//! `ip netns exec` (which remounts /sys and so hides the cgroup and bpf
//! filesystems from the child). Running code of this process in a namespace
//! is [`nic::netns::run_in`] (a thread that joins it); this is the other
//! case: the child joins before it executes, so a `Command` can be built as
//! usual.

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
    File::open(nic::netns::netns_path(name))
        .map(OwnedFd::from)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BinderError::NoSuchNetns {
                name: name.to_string(),
            },
            _ => BinderError::io(format!("open /run/netns/{name}"), e),
        })
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
