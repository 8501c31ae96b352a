//! Running programs inside a lab host. (Code that runs inside a host's
//! namespace uses `host::netns::run_in(Some(netns), f)`.)

use std::process::Command;

use crate::{Lab, LabError};

impl Lab {
    /// `ip netns exec NS program`: add arguments and run it.
    pub fn command(&self, host: &str, program: &str) -> Result<Command, LabError> {
        let host = self.host(host)?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &host.netns, program]);
        Ok(cmd)
    }
}
