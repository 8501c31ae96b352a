//! Port plans: for one (local address, remote address, remote port), source
//! ports that land round-robin on the receiver's CPUs, one distinct queue per
//! slot (SRAP's port-to-CPU predictor, papers/srap-source-port-selection.txt
//! section 3 (2)), computed with [`rss::Predictor`] from the receiver's
//! [`rss::RssConfig`].
//!
//! Slot `i` lands on the same queue for every remote port of one host (see
//! [`slot_queues`]), so the cgroup binder can share one slot counter per
//! remote host across destinations.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};

use rss::{FlowTuple, L4Proto, Predictor, RssConfig};
use serde::Serialize;

use crate::error::BinderError;

/// One planned port and where the receiver's datapath puts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlanEntry {
    pub port: u16,
    pub queue: u32,
    pub cpu: u32,
    pub hash: u32,
}

/// Ports for one destination, in slot order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The source address the ports were computed for.
    pub local: IpAddr,
    pub remote: IpAddr,
    pub remote_port: u16,
    pub entries: Vec<PlanEntry>,
}

/// The ports a plan may use: the ephemeral range minus reserved ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSet {
    pub low: u16,
    pub high: u16,
    pub reserved: BTreeSet<u16>,
    /// Where the search starts, as an offset into `low..=high` (wrapping).
    /// Plans made with different offsets use different ports, so a new
    /// plan does not run into the TIME_WAIT sockets of the last one.
    pub offset: u32,
}

impl Default for PortSet {
    /// Linux's default ip_local_port_range, nothing reserved.
    fn default() -> Self {
        PortSet {
            low: 32768,
            high: 60999,
            reserved: BTreeSet::new(),
            offset: 0,
        }
    }
}

impl PortSet {
    /// This namespace's `net.ipv4.ip_local_port_range` and
    /// `ip_local_reserved_ports` (the defaults if unreadable), searched from
    /// a random offset.
    pub fn from_system() -> PortSet {
        use std::hash::{BuildHasher, Hasher};
        let mut set = PortSet::default();
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        set.offset = h.finish() as u32;
        if let Ok(text) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range") {
            let v: Vec<u16> = text
                .split_whitespace()
                .filter_map(|s| s.parse().ok())
                .collect();
            if let [low, high] = v[..] {
                if low > 0 && low <= high {
                    set.low = low;
                    set.high = high;
                }
            }
        }
        if let Ok(text) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_reserved_ports") {
            set.reserved = parse_port_list(&text);
        }
        set
    }

    fn ports(&self) -> impl Iterator<Item = u16> + '_ {
        let (low, high) = (u32::from(self.low), u32::from(self.high.max(self.low)));
        let n = high - low + 1;
        let start = self.offset % n;
        (0..n)
            .map(move |i| (low + (start + i) % n) as u16)
            .filter(|p| *p != 0 && !self.reserved.contains(p))
    }
}

/// `1000,2000-2005` as in ip_local_reserved_ports; bad items are skipped.
fn parse_port_list(text: &str) -> BTreeSet<u16> {
    let mut out = BTreeSet::new();
    for item in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match item.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(p) = item.parse() {
                    out.insert(p);
                }
            }
        }
    }
    out
}

/// The queues in slot order: queues the indirection table uses, grouped by
/// their CPU, taken one per CPU in turn (CPU a's first queue, CPU b's first
/// queue, ..., CPU a's second queue, ...). Consecutive slots therefore land
/// on different CPUs, and every slot on a different queue.
pub fn slot_queues(config: &RssConfig) -> Vec<u32> {
    let used: BTreeSet<u32> = config.indirection_table.entries().iter().copied().collect();
    let mut by_cpu: Vec<(u32, Vec<u32>)> = Vec::new();
    for q in used {
        let cpu = config.queue_cpus.get(q as usize).copied().unwrap_or(q);
        match by_cpu.iter_mut().find(|(c, _)| *c == cpu) {
            Some((_, qs)) => qs.push(q),
            None => by_cpu.push((cpu, vec![q])),
        }
    }
    by_cpu.sort_by_key(|(cpu, _)| *cpu);
    let rounds = by_cpu.iter().map(|(_, qs)| qs.len()).max().unwrap_or(0);
    let mut out = Vec::new();
    for r in 0..rounds {
        for (_, qs) in &by_cpu {
            if let Some(&q) = qs.get(r) {
                out.push(q);
            }
        }
    }
    out
}

/// Plans up to `max_ports` source ports from `ports` for TCP connections
/// from `local` to `remote:remote_port`, as the receiver described by
/// `config` will place them: slot order [`slot_queues`], repeated in rounds
/// with fresh ports while `max_ports` allows.
pub fn plan_ports(
    config: &RssConfig,
    local: IpAddr,
    remote: IpAddr,
    remote_port: u16,
    max_ports: usize,
    ports: &PortSet,
) -> Result<Plan, BinderError> {
    if local.is_ipv4() != remote.is_ipv4() {
        return Err(BinderError::Plan(format!(
            "local address {local} and remote address {remote} are of different families"
        )));
    }
    let predictor = Predictor::new(config.clone())?;
    let slots = slot_queues(config);
    if slots.is_empty() || max_ports == 0 {
        return Err(BinderError::Plan("no queue to plan for".into()));
    }
    let rounds = (max_ports / slots.len()).max(1);
    let mut buckets: Vec<Vec<PlanEntry>> = vec![Vec::new(); config.queues as usize];
    let mut wanted = slots.len() * rounds;
    for port in ports.ports() {
        let tuple = FlowTuple::new(local, port, remote, remote_port, L4Proto::Tcp);
        let p = predictor.place(&tuple)?;
        let Some(bucket) = buckets.get_mut(p.queue as usize) else {
            continue;
        };
        if bucket.len() < rounds && slots.contains(&p.queue) {
            bucket.push(PlanEntry {
                port,
                queue: p.queue,
                cpu: p.cpu,
                hash: p.hash,
            });
            wanted -= 1;
            if wanted == 0 {
                break;
            }
        }
    }
    let mut entries = Vec::new();
    for r in 0..rounds {
        for &q in &slots {
            if let Some(e) = buckets[q as usize].get(r) {
                entries.push(*e);
            }
        }
    }
    entries.truncate(max_ports);
    if entries.is_empty() {
        return Err(BinderError::Plan(format!(
            "no port in {}-{} lands on any queue",
            ports.low, ports.high
        )));
    }
    Ok(Plan {
        local,
        remote,
        remote_port,
        entries,
    })
}

/// The source address the kernel picks towards `remote` in the current
/// network namespace (a UDP connect does the route lookup; nothing is sent).
pub fn route_source(remote: SocketAddr) -> Result<IpAddr, BinderError> {
    let bind: SocketAddr = if remote.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    let sock = UdpSocket::bind(bind).map_err(|e| BinderError::io("UDP socket", e))?;
    sock.connect(remote)
        .map_err(|e| BinderError::io(format!("no route to {remote}"), e))?;
    sock.local_addr()
        .map(|a| a.ip())
        .map_err(|e| BinderError::io("getsockname", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rss::{IndirectionTable, RssKey};

    fn config(queues: u32, cpus: u32) -> RssConfig {
        let mut c = RssConfig::ethtool_default(RssKey::microsoft(), queues, 128).unwrap();
        c.queue_cpus = (0..queues).map(|q| q % cpus).collect();
        c
    }

    #[test]
    fn slots_alternate_cpus_and_cover_queues() {
        assert_eq!(slot_queues(&config(8, 2)), vec![0, 1, 2, 3, 4, 5, 6, 7]);
        let mut c = config(6, 3);
        c.queue_cpus = vec![0, 0, 0, 1, 1, 2];
        assert_eq!(slot_queues(&c), vec![0, 3, 5, 1, 4, 2]);
        // Queues the table never uses get no slot.
        let mut c = config(4, 4);
        c.indirection_table = IndirectionTable::weighted(128, &[1, 0, 1, 1], 0).unwrap();
        assert_eq!(slot_queues(&c), vec![0, 2, 3]);
    }

    #[test]
    fn planned_ports_land_where_the_plan_says() {
        let c = config(8, 2);
        let (l, r) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let plan = plan_ports(&c, l, r, 5201, 64, &PortSet::default()).unwrap();
        assert_eq!(plan.entries.len(), 64);
        let predictor = Predictor::new(c.clone()).unwrap();
        for (i, e) in plan.entries.iter().enumerate() {
            assert_eq!(e.queue, i as u32 % 8, "slot {i}");
            let t = FlowTuple::new(l, e.port, r, 5201, L4Proto::Tcp);
            assert_eq!(predictor.place(&t).unwrap().queue, e.queue);
            assert!((32768..=60999).contains(&e.port));
        }
        let ports: BTreeSet<u16> = plan.entries.iter().map(|e| e.port).collect();
        assert_eq!(ports.len(), 64, "ports are distinct");
    }

    #[test]
    fn ipv6_and_reserved_ports() {
        let c = config(4, 2);
        let mut set = PortSet {
            low: 40000,
            high: 40100,
            reserved: parse_port_list("40000-40050, 40060\n"),
            offset: 77,
        };
        let plan = plan_ports(
            &c,
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            80,
            8,
            &set,
        )
        .unwrap();
        assert!(plan
            .entries
            .iter()
            .all(|e| e.port > 40050 && e.port != 40060));
        set.reserved = parse_port_list("40000-40100");
        assert!(plan_ports(
            &c,
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            80,
            8,
            &set
        )
        .is_err());
        assert!(plan_ports(
            &c,
            "10.0.0.1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            80,
            8,
            &PortSet::default()
        )
        .is_err());
    }
}
