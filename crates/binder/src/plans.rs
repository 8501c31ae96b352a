//! The cgroup binder's plans: for each destination, the source ports it
//! binds, in slot order, from the one planner ([`srap::plan_on_this_host`]:
//! CPUs first, then queues) over this host's `ip_local_port_range` minus
//! its reserved ports and ports in use, written into a [`CgroupBinder`].
//! `steer exec --bpf`, `steer attach` and the collision demo plan through
//! here once they know the receiver (docs/binders.md).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
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

/// What a caller learned of one receiver host (from its agent, a file or
/// stated assumptions): its config and load, and the source address it
/// sees from us when its agent told (NAT).
#[derive(Debug, Clone)]
pub struct LearnedReceiver {
    pub config: RssConfig,
    pub loads: BTreeMap<u32, f64>,
    pub seen_from: Option<IpAddr>,
}

/// Plans `ports` ports for each destination of `to` (`steer exec --bpf`,
/// `steer attach`). Each receiver host is learned once (`learn`), so every
/// port of a host gets the same queue sequence and the binder's per-host
/// slot counter keeps spreading. The binder binds `from` when given, else
/// the address the route towards the destination leaves from
/// (`route_from`); the plan predicts with the address the receiver sees:
/// the one its agent reported (NAT), unless `from` was given.
pub fn plan_hosts<E: From<BinderError>>(
    to: &[SocketAddr],
    ports: usize,
    from: Option<IpAddr>,
    mut learn: impl FnMut(SocketAddr) -> Result<LearnedReceiver, E>,
    mut route_from: impl FnMut(SocketAddr) -> Result<IpAddr, E>,
) -> Result<Vec<Planned>, E> {
    let mut learned: HashMap<IpAddr, LearnedReceiver> = HashMap::new();
    let mut out = Vec::with_capacity(to.len());
    for &dest in to {
        let receiver = match learned.entry(dest.ip()) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(new) => new.insert(learn(dest)?),
        };
        let bind = match from {
            Some(given) => given,
            None => route_from(dest)?,
        };
        let seen_from = match (from, receiver.seen_from) {
            (None, Some(seen)) => seen,
            _ => bind,
        };
        let target = Receiver {
            config: &receiver.config,
            loads: &receiver.loads,
        };
        out.push(plan(target, seen_from, bind, dest, ports)?);
    }
    Ok(out)
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
    fn each_host_is_learned_once_and_nat_changes_only_the_prediction() {
        let to: Vec<SocketAddr> = ["10.0.0.2:5201", "10.0.0.2:5202", "10.0.0.3:80"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let nat = addr("198.51.100.7");
        let mut learned = Vec::new();
        let mut routed = Vec::new();
        let planned = plan_hosts::<BinderError>(
            &to,
            4,
            None,
            |dest| {
                learned.push(dest.ip());
                Ok(LearnedReceiver {
                    config: config(4),
                    loads: BTreeMap::new(),
                    seen_from: (dest.ip() == addr("10.0.0.3")).then_some(nat),
                })
            },
            |dest| {
                routed.push(dest);
                Ok(addr("10.0.0.1"))
            },
        )
        .unwrap();
        assert_eq!(learned, [addr("10.0.0.2"), addr("10.0.0.3")]);
        assert_eq!(routed, to);
        assert!(planned.iter().all(|p| p.bind == addr("10.0.0.1")));
        let predicted: Vec<IpAddr> = planned.iter().map(|p| p.plan.local).collect();
        assert_eq!(predicted, [addr("10.0.0.1"), addr("10.0.0.1"), nat]);
        // The same host's ports follow the same queue sequence.
        let queues = |p: &Planned| p.plan.entries.iter().map(|e| e.queue).collect::<Vec<_>>();
        assert_eq!(queues(&planned[0]), queues(&planned[1]));
        // A source named by the caller is bound and predicted with, NAT or
        // not, and no route is asked.
        let given = addr("192.0.2.9");
        let planned = plan_hosts::<BinderError>(
            &to[2..],
            4,
            Some(given),
            |_| {
                Ok(LearnedReceiver {
                    config: config(4),
                    loads: BTreeMap::new(),
                    seen_from: Some(nat),
                })
            },
            |_| panic!("no route is needed for a given source"),
        )
        .unwrap();
        assert_eq!((planned[0].bind, planned[0].plan.local), (given, given));
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
