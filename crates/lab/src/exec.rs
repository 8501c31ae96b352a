//! Running programs inside a lab host. (Code that runs inside a host's
//! namespace uses `host::netns::run_in(Some(netns), f)`.)

use std::process::Command;

use crate::{Lab, LabError};

impl Lab {
    /// `program` ready to run in `host`'s network namespace: add arguments
    /// and run it. The child joins the namespace before it executes
    /// (`host::netns::enter_in_child`, as `nsenter --net` does), so it
    /// keeps the host's /sys, cgroup and BPF filesystems, which `ip netns
    /// exec` would remount away.
    pub fn command(&self, host: &str, program: &str) -> Result<Command, LabError> {
        let host = self.host(host)?;
        let mut cmd = Command::new(program);
        host::netns::enter_in_child(&mut cmd, &host.netns)?;
        Ok(cmd)
    }
}
