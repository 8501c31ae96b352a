//! The allocator's live leases, indexed so that one lease request costs the
//! same whether 16 or 2,000 leases are live: flows per CPU and queue are
//! kept per (local, remote) address pair as leases come and go, and the
//! leases seen connected are listed per pair, instead of walking every
//! lease on every request.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::protocol::LeasedFlow;
use crate::ports::PortSet;

#[derive(Debug, Clone)]
pub(super) struct Lease {
    pub flow: LeasedFlow,
    pub granted: Instant,
    pub connected: bool,
}

impl Lease {
    pub fn tuple(&self) -> (SocketAddr, SocketAddr) {
        (
            SocketAddr::new(self.flow.local, self.flow.port),
            SocketAddr::new(self.flow.remote, self.flow.remote_port),
        )
    }

    fn pair(&self) -> (IpAddr, IpAddr) {
        (self.flow.local, self.flow.remote)
    }
}

/// What the leases from one local address to one remote add up to.
#[derive(Debug, Default)]
pub(super) struct PairFlows {
    /// Leases per receiver CPU and per receiver queue.
    pub cpus: BTreeMap<u32, u32>,
    pub queues: BTreeMap<u32, u32>,
    /// The leases whose socket has been seen.
    pub connected: BTreeSet<u64>,
}

fn add(counts: &mut BTreeMap<u32, u32>, key: u32) {
    *counts.entry(key).or_default() += 1;
}

fn sub(counts: &mut BTreeMap<u32, u32>, key: u32) {
    if let Some(n) = counts.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&key);
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Leases {
    all: BTreeMap<u64, Lease>,
    /// Every leased port; a port is leased at most once at a time.
    ports: PortSet,
    by_port: HashMap<u16, u64>,
    by_pair: HashMap<(IpAddr, IpAddr), PairFlows>,
}

impl Leases {
    pub fn insert(&mut self, id: u64, lease: Lease) {
        self.remove(id);
        let flows = self.by_pair.entry(lease.pair()).or_default();
        add(&mut flows.cpus, lease.flow.cpu);
        add(&mut flows.queues, lease.flow.queue);
        if lease.connected {
            flows.connected.insert(id);
        }
        self.ports.insert(lease.flow.port);
        self.by_port.insert(lease.flow.port, id);
        self.all.insert(id, lease);
    }

    pub fn remove(&mut self, id: u64) -> Option<Lease> {
        let lease = self.all.remove(&id)?;
        self.forget(id, &lease);
        Some(lease)
    }

    fn forget(&mut self, id: u64, lease: &Lease) {
        if let Some(flows) = self.by_pair.get_mut(&lease.pair()) {
            sub(&mut flows.cpus, lease.flow.cpu);
            sub(&mut flows.queues, lease.flow.queue);
            flows.connected.remove(&id);
            if flows.cpus.is_empty() {
                self.by_pair.remove(&lease.pair());
            }
        }
        if self.by_port.get(&lease.flow.port) == Some(&id) {
            self.by_port.remove(&lease.flow.port);
            self.ports.remove(lease.flow.port);
        }
    }

    pub fn mark_connected(&mut self, id: u64) {
        let Some(lease) = self.all.get_mut(&id) else {
            return;
        };
        lease.connected = true;
        if let Some(flows) = self.by_pair.get_mut(&(lease.flow.local, lease.flow.remote)) {
            flows.connected.insert(id);
        }
    }

    pub fn get(&self, id: u64) -> Option<&Lease> {
        self.all.get(&id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &Lease)> {
        self.all.iter().map(|(&id, l)| (id, l))
    }

    pub fn ports(&self) -> &PortSet {
        &self.ports
    }

    /// The lease holding `port`, if any.
    pub fn on_port(&self, port: u16) -> Option<(u64, &Lease)> {
        let id = *self.by_port.get(&port)?;
        Some((id, self.all.get(&id)?))
    }

    pub fn pair(&self, local: IpAddr, remote: IpAddr) -> Option<&PairFlows> {
        self.by_pair.get(&(local, remote))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rss::L4Proto;

    fn lease(local: u8, port: u16, cpu: u32, queue: u32) -> Lease {
        Lease {
            flow: LeasedFlow {
                proto: L4Proto::Tcp,
                local: IpAddr::from([10, 0, 0, local]),
                remote: IpAddr::from([10, 0, 1, 1]),
                remote_port: 5201,
                port,
                queue,
                cpu,
            },
            granted: Instant::now(),
            connected: false,
        }
    }

    /// The indexes agree with a walk over every lease.
    fn check(leases: &Leases) {
        let mut pairs: HashMap<(IpAddr, IpAddr), PairFlows> = HashMap::new();
        for (id, l) in leases.iter() {
            let flows = pairs.entry(l.pair()).or_default();
            add(&mut flows.cpus, l.flow.cpu);
            add(&mut flows.queues, l.flow.queue);
            if l.connected {
                flows.connected.insert(id);
            }
            assert!(leases.ports().contains(l.flow.port));
            assert_eq!(leases.on_port(l.flow.port).map(|(i, _)| i), Some(id));
        }
        assert_eq!(pairs.len(), leases.by_pair.len());
        for (pair, want) in pairs {
            let got = leases.pair(pair.0, pair.1).expect("pair indexed");
            assert_eq!(got.cpus, want.cpus);
            assert_eq!(got.queues, want.queues);
            assert_eq!(got.connected, want.connected);
        }
        assert_eq!(leases.by_port.len(), leases.all.len());
    }

    proptest! {
        /// Random inserts, removals and connects keep every index exact.
        #[test]
        fn indexes_follow_every_change(ops in proptest::collection::vec((0u8..3, 0u64..40, 0u8..3, 0u32..4), 1..200)) {
            let mut leases = Leases::default();
            let mut next = 0u64;
            for (op, pick, local, cpu) in ops {
                match op {
                    0 => {
                        let port = 40000 + next as u16;
                        leases.insert(next, lease(local, port, cpu, cpu * 2));
                        next += 1;
                    }
                    1 => { leases.remove(pick); }
                    _ => leases.mark_connected(pick),
                }
                check(&leases);
            }
        }
    }
}
