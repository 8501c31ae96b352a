//! The cgroup binder's plans: for each destination, the source ports it
//! binds, in slot order, from the one planner ([`srap::plan_on_this_host`]:
//! CPUs first, then queues) over this host's `ip_local_port_range` minus
//! its reserved ports and ports in use, written into a [`CgroupBinder`].
//! `steer exec --bpf`, `steer attach` and the collision demo plan through
//! here once they know the receiver (docs/binders.md).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use rss::{L4Proto, RssConfig};
use srap::Plan;

use crate::cgroup::{CgroupBinder, MAX_PORTS};
use crate::BinderError;

/// The loads of a receiver whose CPUs are all counted as idle.
static IDLE: BTreeMap<u32, f64> = BTreeMap::new();

/// What the planner needs to know about a receiver.
#[derive(Debug, Clone, Copy)]
pub struct Receiver<'a> {
    /// Its RSS config (key, queues, indirection table, queue CPUs).
    pub config: &'a RssConfig,
    /// Load per receiver CPU, lower first (e.g. its agent's softirq
    /// share); an empty map counts every CPU as idle.
    pub loads: &'a BTreeMap<u32, f64>,
}

/// One destination's plan and the local address the binder binds for it.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Predicted with the source address the receiver's NIC hashes
    /// (`plan.local`).
    pub plan: Plan,
    /// The local address to bind: `plan.local`, except behind NAT where the
    /// receiver sees another address than ours.
    pub bind: IpAddr,
}

/// Plans `ports` TCP source ports (the binder's slots, 1..=[`MAX_PORTS`])
/// for connections from `bind` to `to`, predicted with `seen_from`, the
/// source address the receiver sees (`bind` itself unless there is NAT).
pub fn plan(
    receiver: Receiver<'_>,
    seen_from: IpAddr,
    bind: IpAddr,
    to: SocketAddr,
    ports: usize,
) -> Result<Planned, BinderError> {
    if ports == 0 || ports > MAX_PORTS {
        return Err(BinderError::Plan(format!(
            "{ports} ports per destination: the cgroup binder takes 1..={MAX_PORTS}"
        )));
    }
    let (plan, _) = srap::plan_on_this_host(
        receiver.config,
        receiver.loads,
        seen_from,
        to,
        L4Proto::Tcp,
        ports,
        |_| {},
    )?;
    Ok(Planned { plan, bind })
}

/// Writes `planned` into `binder`, one destination each (replacing a plan
/// the destination had).
pub fn install(binder: &CgroupBinder, planned: &[Planned]) -> Result<(), BinderError> {
    for p in planned {
        let ports: Vec<u16> = p.plan.entries.iter().map(|e| e.port).collect();
        let dest = SocketAddr::new(p.plan.remote, p.plan.remote_port);
        binder.set_ports(p.bind, dest, &ports)?;
    }
    Ok(())
}

/// Plans `ports` ports for each of `to` (one receiver with `config`, idle,
/// seen from our own address `from`) and writes them into `binder`. The
/// ports in use that the plan avoids are those of network namespace `netns`
/// (None: the caller's), where the connecting programs run: a port another
/// socket there holds, a TIME_WAIT one included, would make `bpf_bind` fail
/// and the connect fall back to a kernel-chosen port.
pub fn plan_and_install(
    binder: &CgroupBinder,
    config: &RssConfig,
    netns: Option<&str>,
    from: IpAddr,
    to: &[SocketAddr],
    ports: usize,
) -> Result<Vec<Planned>, BinderError> {
    let (config, to) = (config.clone(), to.to_vec());
    let planned = host::netns::run_in(netns, move || {
        let receiver = Receiver {
            config: &config,
            loads: &IDLE,
        };
        to.iter()
            .map(|&dest| plan(receiver, from, from, dest, ports))
            .collect::<Result<Vec<_>, _>>()
    })??;
    install(binder, &planned)?;
    Ok(planned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn config(queues: u32) -> RssConfig {
        RssConfig::ethtool_default(rss::RssKey::microsoft(), queues, 128).unwrap()
    }

    fn addr(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn idle(config: &RssConfig) -> Receiver<'_> {
        Receiver {
            config,
            loads: &IDLE,
        }
    }

    #[test]
    fn slots_spread_over_the_receivers_queues() {
        let config = config(8);
        let to: SocketAddr = "10.0.0.2:5201".parse().unwrap();
        let p = plan(idle(&config), addr("192.0.2.1"), addr("10.0.0.1"), to, 8).unwrap();
        assert_eq!(p.bind, addr("10.0.0.1"));
        assert_eq!(p.plan.local, addr("192.0.2.1"));
        assert_eq!((p.plan.remote, p.plan.remote_port), (to.ip(), 5201));
        assert_eq!(p.plan.entries.len(), 8);
        let queues: BTreeSet<u32> = p.plan.entries.iter().map(|e| e.queue).collect();
        assert_eq!(queues.len(), 8, "{:?}", p.plan.entries);
        // Every port is where the receiver's RSS puts it.
        let predictor = rss::Predictor::new(config.clone()).unwrap();
        for e in &p.plan.entries {
            let flow = rss::FlowTuple::new(p.plan.local, e.port, to.ip(), 5201, L4Proto::Tcp);
            assert_eq!(predictor.place(&flow).unwrap().queue, e.queue);
        }
    }

    #[test]
    fn port_counts_the_binder_cannot_hold_are_bad_input() {
        let config = config(4);
        let to: SocketAddr = "10.0.0.2:80".parse().unwrap();
        for ports in [0, MAX_PORTS + 1] {
            let e = plan(idle(&config), addr("10.0.0.1"), addr("10.0.0.1"), to, ports).unwrap_err();
            assert!(e.is_bad_input(), "{ports}: {e}");
            assert!(e.to_string().contains(&ports.to_string()), "{e}");
        }
    }

    #[test]
    #[ignore = "needs root (cgroup BPF)"]
    fn plans_are_written_into_the_binder() {
        testkit::require_root("cgroup BPF");
        let cgroup = crate::TempCgroup::create().unwrap();
        let binder = CgroupBinder::attach(cgroup.path()).unwrap();
        let to: Vec<SocketAddr> = vec![
            "10.0.0.2:5201".parse().unwrap(),
            "10.0.0.2:5202".parse().unwrap(),
        ];
        let planned =
            plan_and_install(&binder, &config(4), None, addr("10.0.0.1"), &to, 5).unwrap();
        assert_eq!(planned.len(), 2);
        assert!(planned.iter().all(|p| p.plan.entries.len() == 5));
        assert_eq!(binder.plan_count(), 2);
        drop(binder);
    }
}
