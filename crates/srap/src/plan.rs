//! Planning N flows: source ports round-robin over the receiver's distinct
//! CPUs (SRAP paper, section 3: "returns collision-free ports via
//! round-robin allocation"), least-loaded CPU first when flows outnumber
//! cores, and within a CPU round-robin over its receive queues (the paper
//! has one queue per core; a receiver with several queues per CPU, like the
//! lab's software RSS with 32 queues on 2 CPUs, is measured per queue),
//! skipping ports that are in use or reserved.
//!
//! The planner scans the port range once from a random offset, buckets each
//! free port by the (CPU, queue) its flow lands on, and stops as soon as
//! every bucket has as many candidates as the assignment can give it. With the two-lookup
//! predictor ([`crate::predict`]) that is a few hundred ports for 64 CPUs.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::net::{IpAddr, SocketAddr};

use rand::{rngs::StdRng, Rng, SeedableRng};
use rss::{L4Proto, RssConfig};
use serde::{Deserialize, Serialize};

use crate::error::SrapError;
use crate::ports::{LocalPorts, PortRange, PortSet};
use crate::predict::PortPredictor;

/// Inputs of a plan besides the receiver's config.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Source ports to choose from (the host's `ip_local_port_range`).
    pub range: PortRange,
    /// Ports never to choose: in use or reserved.
    pub excluded: PortSet,
    /// Load per receiver CPU, any unit, lower is better (e.g. the agent's
    /// softirq share). CPUs not listed count as 0.
    pub loads: BTreeMap<u32, f64>,
    /// Flows already on each receiver CPU (e.g. live leases to the same
    /// receiver); the plan evens out the total.
    pub existing: BTreeMap<u32, u32>,
    /// The same flows per receive queue; within a CPU the plan prefers the
    /// queue with the fewest.
    pub existing_queues: BTreeMap<u32, u32>,
    /// Seed of the scan's random starting offset; `None` for a random one.
    pub seed: Option<u64>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            range: PortRange::LINUX_DEFAULT,
            excluded: PortSet::new(),
            loads: BTreeMap::new(),
            existing: BTreeMap::new(),
            existing_queues: BTreeMap::new(),
            seed: None,
        }
    }
}

impl PlanOptions {
    /// The host's port range, reserved ports and ports in use.
    pub fn from_local(local: &LocalPorts) -> Self {
        PlanOptions {
            range: local.range,
            excluded: local.excluded(),
            ..PlanOptions::default()
        }
    }
}

/// One planned flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// Source port to bind.
    pub port: u16,
    /// Receive queue the flow lands on.
    pub queue: u32,
    /// CPU that processes it.
    pub cpu: u32,
    /// The receiver's RSS hash of the flow.
    pub hash: u32,
}

/// Ports for N flows and where each lands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub remote_port: u16,
    pub flows: usize,
    /// In assignment order: distinct CPUs first, least loaded first.
    pub entries: Vec<PlanEntry>,
    /// CPUs the receiver's indirection table can reach.
    pub cpus: Vec<u32>,
    /// Distinct CPUs the plan uses.
    pub cpus_used: usize,
    /// Most flows on one CPU after the plan (counting `existing`).
    pub max_per_cpu: u32,
    /// The best possible: ceil((flows + existing) / CPUs).
    pub ideal_max_per_cpu: u32,
    /// Queues the indirection table reaches.
    pub queues: Vec<u32>,
    /// Distinct queues the plan uses.
    pub queues_used: usize,
    /// Most flows on one queue after the plan (counting `existing_queues`).
    pub max_per_queue: u32,
    /// ceil((flows + existing) / queues): the best when every CPU has as
    /// many queues.
    pub ideal_max_per_queue: u32,
    /// CPUs no free port in the range reaches (known only when the whole
    /// range was scanned; empty otherwise).
    pub unreachable_cpus: Vec<u32>,
    /// Ports examined.
    pub ports_scanned: u32,
}

/// The CPUs the indirection table reaches: each entry's queue's IRQ CPU, or
/// its RPS CPUs.
pub fn reachable_cpus(config: &RssConfig) -> Vec<u32> {
    let mut cpus: Vec<u32> = Vec::new();
    let mut queues: Vec<u32> = config.indirection_table.entries().to_vec();
    queues.sort_unstable();
    queues.dedup();
    for q in queues {
        match config.rps_cpus.get(q as usize) {
            Some(rps) if !rps.is_empty() => cpus.extend(rps),
            _ => cpus.push(config.queue_cpus.get(q as usize).copied().unwrap_or(q)),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// The assignment order: lowest (flows so far, load rank) first, as a heap
/// so N flows over C CPUs cost O(N log C).
struct Order {
    heap: BinaryHeap<Reverse<(u32, usize, usize)>>,
}

impl Order {
    /// `rank[i]`: CPU `i`'s position when sorted by (load, CPU id).
    fn new(counts: &[u32], rank: &[usize]) -> Self {
        Order {
            heap: (0..counts.len())
                .map(|i| Reverse((counts[i], rank[i], i)))
                .collect(),
        }
    }

    /// The next CPU for which `available` holds (CPUs that fail it are
    /// dropped for good): the fewest flows first and, among CPUs with as
    /// few, the first by rank for which `prefer` holds, else the first by
    /// rank.
    fn next(
        &mut self,
        available: impl Fn(usize) -> bool,
        prefer: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let mut passed: Vec<(u32, usize, usize)> = Vec::new();
        let mut chosen = None;
        while let Some(Reverse(entry)) = self.heap.pop() {
            let (count, _, i) = entry;
            if !available(i) {
                continue;
            }
            if passed.first().is_some_and(|first| first.0 != count) {
                self.heap.push(Reverse(entry));
                break;
            }
            if prefer(i) {
                chosen = Some(entry);
                break;
            }
            passed.push(entry);
        }
        if chosen.is_none() && !passed.is_empty() {
            chosen = Some(passed.remove(0));
        }
        self.heap.extend(passed.into_iter().map(Reverse));
        let (count, rank, i) = chosen?;
        self.heap.push(Reverse((count + 1, rank, i)));
        Some(i)
    }
}

/// The receive queues that reach each CPU of `cpus` (sorted), each list
/// sorted: a queue's IRQ CPU, or every CPU of its RPS set.
fn queues_by_cpu(config: &RssConfig, cpus: &[u32]) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); cpus.len()];
    let mut queues: Vec<u32> = config.indirection_table.entries().to_vec();
    queues.sort_unstable();
    queues.dedup();
    for q in queues {
        let mut add = |cpu: u32| {
            if let Ok(i) = cpus.binary_search(&cpu) {
                out[i].push(q);
            }
        };
        match config.rps_cpus.get(q as usize) {
            Some(rps) if !rps.is_empty() => rps.iter().copied().for_each(&mut add),
            _ => add(config.queue_cpus.get(q as usize).copied().unwrap_or(q)),
        }
    }
    out
}

/// Flows on `queue` so far: the map counts the flows planned and already
/// there, so a queue it does not name has none.
fn flows_on(per_queue: &BTreeMap<u32, u32>, queue: u32) -> u32 {
    per_queue.get(&queue).copied().unwrap_or(0)
}

/// The two-level assignment: a CPU by [`Order`], then within it the queue
/// with the fewest flows (lowest number on a tie) that `available` allows.
/// Groups are (CPU, queue) pairs; `first[i]..first[i + 1]` are CPU `i`'s.
struct Groups {
    /// Queue of each group.
    queue: Vec<u32>,
    /// First group of each CPU, plus the end.
    first: Vec<usize>,
}

impl Groups {
    fn new(by_cpu: &[Vec<u32>]) -> Self {
        let mut queue = Vec::new();
        let mut first = Vec::with_capacity(by_cpu.len() + 1);
        for qs in by_cpu {
            first.push(queue.len());
            queue.extend(qs);
        }
        first.push(queue.len());
        Groups { queue, first }
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    /// The group of (CPU index `cpu`, `queue`), if the pair exists.
    #[inline]
    fn find(&self, cpu: usize, queue: u32) -> Option<usize> {
        let (a, b) = (self.first[cpu], self.first[cpu + 1]);
        self.queue[a..b].binary_search(&queue).ok().map(|j| a + j)
    }

    /// Of CPU `cpu`'s groups for which `available` holds, the one whose
    /// queue has the fewest flows in `per_queue`.
    fn pick(
        &self,
        cpu: usize,
        per_queue: &BTreeMap<u32, u32>,
        available: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        (self.first[cpu]..self.first[cpu + 1])
            .filter(|&g| available(g))
            .min_by_key(|&g| {
                let q = self.queue[g];
                (flows_on(per_queue, q), q)
            })
    }

    /// CPU index of each group.
    fn cpus(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.len());
        for (i, w) in self.first.windows(2).enumerate() {
            out.extend(std::iter::repeat_n(i, w[1] - w[0]));
        }
        out
    }
}

/// The order in which flows take (CPU, queue) groups: a CPU by [`Order`],
/// then that CPU's queue with the fewest flows. Among CPUs with the same
/// count, one whose pick is a queue without a flow goes first while such a
/// queue is left, so a CPU whose own unused queues no port reaches does not
/// repeat a queue while another CPU of its count has a fresh one.
struct Sequence<'g> {
    groups: &'g Groups,
    order: Order,
    per_queue: BTreeMap<u32, u32>,
    /// How many of the queues `new` was told to count have no flow yet.
    /// Every group `next` picks is one of them, so a queue's first flow
    /// takes one off.
    fresh: usize,
}

impl<'g> Sequence<'g> {
    fn new(
        groups: &'g Groups,
        order: Order,
        per_queue: BTreeMap<u32, u32>,
        counted: impl Fn(usize) -> bool,
    ) -> Self {
        let fresh: BTreeSet<u32> = (0..groups.len())
            .filter(|&g| counted(g))
            .map(|g| groups.queue[g])
            .filter(|&q| flows_on(&per_queue, q) == 0)
            .collect();
        Sequence {
            groups,
            order,
            per_queue,
            fresh: fresh.len(),
        }
    }

    /// The next (CPU index, group) among the groups for which `free` holds
    /// (each of them counted by `new`), counted as taken.
    fn next(&mut self, free: impl Fn(usize) -> bool + Copy) -> Option<(usize, usize)> {
        let Sequence {
            groups,
            order,
            per_queue,
            fresh,
        } = self;
        let unused = |q: u32| flows_on(per_queue, q) == 0;
        let has_free = |i: usize| (groups.first[i]..groups.first[i + 1]).any(free);
        let has_fresh = |i: usize| {
            *fresh > 0
                && groups
                    .pick(i, per_queue, free)
                    .is_some_and(|g| unused(groups.queue[g]))
        };
        let i = order.next(has_free, has_fresh)?;
        let g = groups.pick(i, per_queue, free)?;
        let count = per_queue.entry(groups.queue[g]).or_default();
        if *count == 0 {
            *fresh = fresh.saturating_sub(1);
        }
        *count += 1;
        Some((i, g))
    }
}

/// Plans `flows` source ports for the predictor's (local, remote, remote
/// port): CPUs first (fewest flows, then least load), and within a CPU its
/// queue with the fewest flows, so N flows on Q queues over C CPUs use N
/// distinct queues while N <= Q, and at most ceil(N / C) flows share a CPU
/// (ceil(N / Q) a queue, when every CPU has as many queues).
///
/// Deterministic given the options (and `seed`): while some port reaches
/// every queue, the sequence of queues is the same for every remote port of
/// one receiver, so a slot counter can be shared across destinations (the
/// cgroup binder's plan map).
pub fn plan(
    predictor: &PortPredictor,
    flows: usize,
    options: &PlanOptions,
) -> Result<Plan, SrapError> {
    let targets = reachable_cpus(predictor.config());
    let n = targets.len();
    let groups = Groups::new(&queues_by_cpu(predictor.config(), &targets));
    let group_cpu = groups.cpus();
    let loads: Vec<f64> = targets
        .iter()
        .map(|c| options.loads.get(c).copied().unwrap_or(0.0))
        .collect();
    let existing: Vec<u32> = targets
        .iter()
        .map(|c| options.existing.get(c).copied().unwrap_or(0))
        .collect();

    let mut by_load: Vec<usize> = (0..n).collect();
    by_load.sort_by(|&a, &b| loads[a].total_cmp(&loads[b]).then(a.cmp(&b)));
    let mut rank = vec![0usize; n];
    for (r, &i) in by_load.iter().enumerate() {
        rank[i] = r;
    }

    // How many flows each (CPU, queue) gets if every one is reachable.
    let mut need = vec![0usize; groups.len()];
    {
        let order = Order::new(&existing, &rank);
        let mut sequence = Sequence::new(&groups, order, options.existing_queues.clone(), |_| true);
        for _ in 0..flows {
            let Some((_, g)) = sequence.next(|_| true) else {
                break;
            };
            need[g] += 1;
        }
    }
    let mut unsatisfied = need.iter().filter(|&&k| k > 0).count();

    // One pass over the range, bucketing free ports by (CPU, queue).
    let range = options.range;
    let start = match options.seed {
        Some(seed) => StdRng::seed_from_u64(seed).gen_range(0..range.len()),
        None => rand::thread_rng().gen_range(0..range.len()),
    };
    let mut candidates: Vec<Vec<u16>> = vec![Vec::new(); groups.len()];
    let mut scanned = 0u32;
    let mut complete = true;
    if unsatisfied > 0 {
        for port in predictor.scan(range, start) {
            scanned += 1;
            if options.excluded.contains(port) {
                continue;
            }
            let (queue, cpu) = predictor.queue_and_cpu_of(port);
            let Ok(slot) = targets.binary_search(&cpu) else {
                continue;
            };
            let Some(g) = groups.find(slot, queue) else {
                continue;
            };
            let bucket = &mut candidates[g];
            if bucket.len() < flows {
                bucket.push(port);
                if bucket.len() == need[g] {
                    unsatisfied -= 1;
                    if unsatisfied == 0 {
                        complete = false;
                        break;
                    }
                }
            }
        }
    }
    let found: usize = candidates.iter().map(Vec::len).sum();
    if found < flows {
        return Err(SrapError::Exhausted {
            wanted: flows,
            found,
            low: range.low,
            high: range.high,
        });
    }

    // Round-robin over CPUs (least flows, then least load), and over each
    // CPU's queues (least flows, then lowest number).
    let mut counts = existing;
    let mut used = vec![0usize; groups.len()];
    let mut entries = Vec::with_capacity(flows);
    let order = Order::new(&counts, &rank);
    let mut sequence = Sequence::new(&groups, order, options.existing_queues.clone(), |g| {
        !candidates[g].is_empty()
    });
    for _ in 0..flows {
        let Some((i, g)) = sequence.next(|g| used[g] < candidates[g].len()) else {
            break;
        };
        let port = candidates[g][used[g]];
        used[g] += 1;
        counts[i] += 1;
        let placement = predictor.place(port);
        entries.push(PlanEntry {
            port,
            queue: placement.queue,
            cpu: placement.cpu,
            hash: placement.hash,
        });
    }
    let per_queue = sequence.per_queue;
    let total: u32 = counts.iter().sum();
    let mut cpu_used = vec![false; n];
    for (g, &u) in used.iter().enumerate() {
        if u > 0 {
            cpu_used[group_cpu[g]] = true;
        }
    }
    let mut queues: Vec<u32> = groups.queue.clone();
    queues.sort_unstable();
    queues.dedup();
    let mut planned_queues: Vec<u32> = entries.iter().map(|e| e.queue).collect();
    planned_queues.sort_unstable();
    planned_queues.dedup();
    let queue_total: u32 = per_queue.values().sum();
    let unreachable_cpus = if complete {
        targets
            .iter()
            .enumerate()
            .filter(|&(i, _)| {
                (groups.first[i]..groups.first[i + 1]).all(|g| candidates[g].is_empty())
            })
            .map(|(_, &cpu)| cpu)
            .collect()
    } else {
        Vec::new()
    };
    Ok(Plan {
        local: predictor.local(),
        remote: predictor.remote(),
        remote_port: predictor.remote_port(),
        flows,
        entries,
        cpus_used: cpu_used.iter().filter(|&&u| u).count(),
        max_per_cpu: counts.iter().copied().max().unwrap_or(0),
        ideal_max_per_cpu: total.div_ceil(n.max(1) as u32),
        queues_used: planned_queues.len(),
        max_per_queue: per_queue.values().copied().max().unwrap_or(0),
        ideal_max_per_queue: queue_total.div_ceil(queues.len().max(1) as u32),
        cpus: targets,
        queues,
        unreachable_cpus,
        ports_scanned: scanned,
    })
}

/// The seam every front end calls: a plan for `flows` flows from `local` to
/// `remote:remote_port`, given the receiver's config (from a file, stated
/// assumptions, or an agent).
pub fn plan_from_config(
    config: &RssConfig,
    local: IpAddr,
    remote: IpAddr,
    remote_port: u16,
    proto: L4Proto,
    flows: usize,
    options: &PlanOptions,
) -> Result<Plan, SrapError> {
    let predictor = PortPredictor::new(config, local, remote, remote_port, proto)?;
    plan(&predictor, flows, options)
}

/// [`plan_from_config`] for connections this host will make: the options
/// start from this host's `ip_local_port_range`, reserved ports and ports
/// in use ([`LocalPorts::read`], the reading thread's network namespace),
/// with `loads` (per receiver CPU, lower first; empty: all idle), then
/// `adjust` may change them (another range, a seed). Returns the plan and
/// the range it chose from. Every sender-side front end plans through here
/// (`steer ports plan`, the binders, the collision demo).
pub fn plan_on_this_host(
    config: &RssConfig,
    loads: &BTreeMap<u32, f64>,
    local: IpAddr,
    remote: SocketAddr,
    proto: L4Proto,
    flows: usize,
    adjust: impl FnOnce(&mut PlanOptions),
) -> Result<(Plan, PortRange), SrapError> {
    let host = LocalPorts::read(proto)?;
    let mut options = PlanOptions {
        loads: loads.clone(),
        ..PlanOptions::from_local(&host)
    };
    adjust(&mut options);
    let plan = plan_from_config(
        config,
        local,
        remote.ip(),
        remote.port(),
        proto,
        flows,
        &options,
    )?;
    Ok((plan, options.range))
}
