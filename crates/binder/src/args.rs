//! Where the cgroup binder plans ports for, as a command line gives it
//! (`steer exec --bpf`, `steer attach`): flags, defaults and help written
//! once here (doc comments are the help; feature `clap` derives
//! `clap::Args`). The receiver's own flags are `agent::ReceiverArgs`.

use std::net::IpAddr;

use crate::cgroup::MAX_PORTS;
use crate::BinderError;

/// The destinations to plan for, the source address, and ports per
/// destination.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DestinationArgs {
    /// Destination HOST:PORT to plan ports for (repeatable).
    #[cfg_attr(feature = "clap", arg(long, value_name = "HOST:PORT"))]
    pub to: Vec<String>,
    /// Local source address (default: the route's source towards each --to).
    #[cfg_attr(feature = "clap", arg(long, value_name = "ADDR"))]
    pub from: Option<IpAddr>,
    /// Ports planned per destination (1..=64; slots round-robin over the
    /// receiver's CPUs, then over each CPU's queues).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MAX_PORTS))]
    pub ports: usize,
}

impl Default for DestinationArgs {
    /// No destination, the route's source address, every slot.
    fn default() -> Self {
        DestinationArgs {
            to: Vec::new(),
            from: None,
            ports: MAX_PORTS,
        }
    }
}

impl DestinationArgs {
    /// True when any of these flags differs from its default.
    pub fn is_given(&self) -> bool {
        *self != DestinationArgs::default()
    }

    /// Refuses a plan without destinations (`what` names the command for
    /// the message) or with a port count the binder's map cannot hold.
    pub fn check(&self, what: &str) -> Result<(), BinderError> {
        if self.to.is_empty() {
            return Err(BinderError::Plan(format!(
                "{what} needs --to HOST:PORT (the destinations to plan ports for)"
            )));
        }
        if self.ports == 0 || self.ports > MAX_PORTS {
            return Err(BinderError::Plan(format!(
                "--ports {}: must be 1..={MAX_PORTS}",
                self.ports
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(dest: &str) -> DestinationArgs {
        DestinationArgs {
            to: vec![dest.into()],
            ..DestinationArgs::default()
        }
    }

    #[test]
    fn default_is_not_given() {
        assert!(!DestinationArgs::default().is_given());
        assert!(to("10.0.0.1:80").is_given());
        let ports = DestinationArgs {
            ports: 8,
            ..DestinationArgs::default()
        };
        assert!(ports.is_given());
    }

    #[test]
    fn check_names_the_command_and_the_bounds() {
        let err = DestinationArgs::default().check("--bpf").unwrap_err();
        assert!(err.to_string().contains("--bpf needs --to"), "{err}");
        assert!(err.is_bad_input());
        for ports in [0, MAX_PORTS + 1] {
            let err = DestinationArgs {
                ports,
                ..to("10.0.0.1:80")
            }
            .check("x")
            .unwrap_err();
            assert!(err.to_string().contains("must be 1..="), "{err}");
        }
        assert!(to("10.0.0.1:80").check("x").is_ok());
    }
}
