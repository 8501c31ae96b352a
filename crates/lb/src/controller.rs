//! The CrossRSS controller: from agents' reports (per-core load and the
//! bucket -> core map of each server's RSS) to a bucket -> server table.
//!
//! - [`crossrss_table`]: the published algorithm (papers/crossrss-core-aware-lb.txt,
//!   Section 2): "For each bucket, the controller has information about the
//!   load of one specific core for each server. The controller computes the
//!   least loaded core among these cores" and writes that core's server.
//! - [`summarize_group`] and [`combine_groups`]: hierarchical aggregation
//!   ("the minimal load of a group of servers is the same as the minimal load
//!   of any server"): a group controller forwards, per bucket, only its least
//!   load and the server holding it; the top controller takes the minimum of
//!   minima. Ties are broken by a rank that depends only on (bucket, server),
//!   so the result equals the flat controller's exactly.
//! - [`CrossRssPlus`]: Steer's controller (docs/crossrss.md): damped loads,
//!   per-bucket new-load rates measured at the load balancer, water-filling
//!   and a per-core bound on new load per interval.
//!
//! The output, [`BucketTable`], is a plain `u32` per bucket: what a data plane
//! copies into a BPF array map (key: bucket, value: server id).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::ReportError;
use crate::rng::{mix64, SplitMix64};

/// Largest load accepted in a report. Loads are rates in the agent's unit
/// (packets or busy-ns per interval); 1e15 is beyond any real core.
pub const MAX_LOAD: f64 = 1e15;

/// What one server's agent reports each interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentReport {
    /// Server id (unique among the reports).
    pub server: u32,
    /// Load of each core over the last interval (index = core).
    pub core_loads: Vec<f64>,
    /// For each RSS bucket (indirection entry), the core that serves it.
    pub bucket_cores: Vec<u32>,
}

impl AgentReport {
    /// Checks one report against the controller's bucket count.
    pub fn validate(&self, buckets: usize) -> Result<(), ReportError> {
        let server = self.server;
        if self.core_loads.is_empty() {
            return Err(ReportError::NoCores { server });
        }
        if self.bucket_cores.len() != buckets {
            return Err(ReportError::WrongBucketCount {
                server,
                got: self.bucket_cores.len(),
                expected: buckets,
            });
        }
        for (core, &load) in self.core_loads.iter().enumerate() {
            if !load.is_finite() {
                return Err(ReportError::NonFiniteLoad { server, core, load });
            }
            if load < 0.0 {
                return Err(ReportError::NegativeLoad { server, core, load });
            }
            if load > MAX_LOAD {
                return Err(ReportError::AbsurdLoad {
                    server,
                    core,
                    load,
                    max: MAX_LOAD,
                });
            }
        }
        let cores = self.core_loads.len();
        if let Some((bucket, &core)) = self
            .bucket_cores
            .iter()
            .enumerate()
            .find(|(_, &c)| c as usize >= cores)
        {
            return Err(ReportError::CoreOutOfRange {
                server,
                bucket,
                core,
                cores,
            });
        }
        Ok(())
    }

    /// A report of `server` with `cores` loads drawn below `max_load` and
    /// `buckets` cores drawn uniformly, from `rng`: the synthetic agents of
    /// the controller's tests, benchmarks and examples (the same seed gives
    /// the same reports).
    pub fn random(
        server: u32,
        cores: usize,
        buckets: usize,
        max_load: u64,
        rng: &mut SplitMix64,
    ) -> AgentReport {
        AgentReport {
            server,
            core_loads: (0..cores).map(|_| rng.below(max_load) as f64).collect(),
            bucket_cores: (0..buckets)
                .map(|_| rng.below(cores as u64) as u32)
                .collect(),
        }
    }

    /// Load of the core serving `bucket`.
    #[inline]
    fn bucket_load(&self, bucket: usize) -> f64 {
        self.core_loads[self.bucket_cores[bucket] as usize]
    }
}

/// Checks every report and that server ids are unique.
///
/// A fast pass first (sorted ids, one branch-free sweep per report); only
/// when it finds a problem does the exact pass below name the first one, so
/// the error is the same as checking report by report.
pub fn validate_reports(reports: &[AgentReport], buckets: usize) -> Result<(), ReportError> {
    if buckets == 0 {
        return Err(ReportError::NoBuckets);
    }
    if reports.is_empty() {
        return Err(ReportError::NoReports);
    }
    let mut ids: Vec<u32> = reports.iter().map(|r| r.server).collect();
    ids.sort_unstable();
    let unique = ids.windows(2).all(|w| w[0] != w[1]);
    if unique && reports.iter().all(|r| r.quick_valid(buckets)) {
        return Ok(());
    }
    let mut seen = HashSet::with_capacity(reports.len());
    for r in reports {
        if !seen.insert(r.server) {
            return Err(ReportError::DuplicateServer(r.server));
        }
        r.validate(buckets)?;
    }
    Ok(())
}

impl AgentReport {
    /// Whether [`AgentReport::validate`] would pass (no error detail).
    fn quick_valid(&self, buckets: usize) -> bool {
        let cores = self.core_loads.len();
        cores > 0
            && self.bucket_cores.len() == buckets
            && self
                .core_loads
                .iter()
                .fold(true, |ok, &l| ok & (0.0..=MAX_LOAD).contains(&l))
            && (self.bucket_cores.iter().fold(0u32, |m, &c| m.max(c)) as usize) < cores
    }
}

/// Bucket -> server id: the load balancer's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BucketTable(Vec<u32>);

impl BucketTable {
    pub fn new(entries: Vec<u32>) -> Self {
        BucketTable(entries)
    }

    /// Server ids, index = bucket: the value array of a BPF array map.
    pub fn entries(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The server for an RSS hash (bucket = `hash % len`, as the NICs index
    /// their indirection tables).
    pub fn server_for_hash(&self, hash: u32) -> u32 {
        self.0[hash as usize % self.0.len()]
    }

    /// Buckets whose server differs from `other`'s.
    pub fn changed_from(&self, other: &BucketTable) -> usize {
        self.0.iter().zip(&other.0).filter(|(a, b)| a != b).count()
    }
}

/// Tie-break rank of (bucket, server): a fixed pseudo-random order, so equal
/// loads do not all go to the lowest server id, and so that it depends on
/// nothing but the pair (hierarchical aggregation stays exact).
#[inline]
pub fn tie_rank(bucket: usize, server: u32) -> u64 {
    mix64(((bucket as u64) << 32) | u64::from(server))
}

#[inline]
fn better(load: f64, rank: u64, best_load: f64, best_rank: u64) -> bool {
    load < best_load || (load == best_load && rank < best_rank)
}

/// The published CrossRSS controller: for each bucket, the server whose core
/// for that bucket has the least reported load.
pub fn crossrss_table(reports: &[AgentReport], buckets: usize) -> Result<BucketTable, ReportError> {
    combine_groups(&[summarize_group(reports, buckets)?], buckets)
}

/// Per bucket, the least load in a group and the server that has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    pub minima: Vec<BucketMin>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BucketMin {
    pub load: f64,
    pub server: u32,
}

/// A group controller's work: validates its members' reports and keeps, per
/// bucket, the least loaded candidate.
pub fn summarize_group(
    reports: &[AgentReport],
    buckets: usize,
) -> Result<GroupSummary, ReportError> {
    validate_reports(reports, buckets)?;
    let mut minima = Vec::with_capacity(buckets);
    for b in 0..buckets {
        let mut best = BucketMin {
            load: f64::INFINITY,
            server: 0,
        };
        // The rank is computed only when loads tie (it costs a hash).
        let mut best_rank: Option<u64> = None;
        for r in reports {
            let load = r.bucket_load(b);
            if load > best.load {
                continue;
            }
            if load == best.load {
                let rank = tie_rank(b, r.server);
                let current = *best_rank.get_or_insert_with(|| tie_rank(b, best.server));
                if rank >= current {
                    continue;
                }
                best_rank = Some(rank);
            } else {
                best_rank = None;
            }
            best = BucketMin {
                load,
                server: r.server,
            };
        }
        minima.push(best);
    }
    Ok(GroupSummary { minima })
}

/// The top controller: per bucket, the minimum of the groups' minima.
pub fn combine_groups(groups: &[GroupSummary], buckets: usize) -> Result<BucketTable, ReportError> {
    if buckets == 0 {
        return Err(ReportError::NoBuckets);
    }
    if groups.is_empty() {
        return Err(ReportError::NoReports);
    }
    for (group, g) in groups.iter().enumerate() {
        if g.minima.is_empty() {
            return Err(ReportError::EmptyGroup { group });
        }
        if g.minima.len() != buckets {
            return Err(ReportError::GroupBucketMismatch {
                got: g.minima.len(),
                expected: buckets,
            });
        }
    }
    let table = (0..buckets)
        .map(|b| {
            let mut best = groups[0].minima[b];
            let mut best_rank = tie_rank(b, best.server);
            for g in &groups[1..] {
                let m = g.minima[b];
                let rank = tie_rank(b, m.server);
                if better(m.load, rank, best.load, best_rank) {
                    best = m;
                    best_rank = rank;
                }
            }
            best.server
        })
        .collect();
    Ok(BucketTable(table))
}

/// Tuning of [`CrossRssPlus`]. The defaults are the values docs/crossrss.md
/// measures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlusParams {
    /// EWMA weight of the newest report, in (0, 1]: `e = a * report + (1 - a) * e`.
    pub alpha: f64,
    /// EWMA weight of the newest per-bucket new-load measurement.
    pub bucket_alpha: f64,
    /// A core may be given at most `cap_factor` times its fair share of the
    /// interval's predicted new load (unless every candidate is at its cap).
    pub cap_factor: f64,
    /// Every bucket is assumed to bring at least this fraction of the mean
    /// bucket's new load, so buckets without history are spread too.
    pub floor: f64,
}

impl Default for PlusParams {
    fn default() -> Self {
        PlusParams {
            alpha: 0.5,
            bucket_alpha: 0.3,
            cap_factor: 2.0,
            floor: 0.25,
        }
    }
}

/// How many ranked candidate servers [`PlusTable`] keeps per bucket.
pub const PLUS_CANDIDATES: usize = 4;

/// What [`CrossRssPlus`] gives the data plane for one interval.
///
/// Two plain arrays and a number, so a data plane can copy them into BPF
/// maps: the primary table, the ranked candidates of each bucket, and the
/// budget of new connections each core may take until the next update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlusTable {
    /// Bucket -> server id (the first candidate).
    pub table: BucketTable,
    /// `candidates[b * k .. (b + 1) * k]`: servers for bucket `b`, best first.
    pub candidates: Vec<u32>,
    /// Candidates per bucket (`min(servers, PLUS_CANDIDATES)`).
    pub k: usize,
    /// New connections any one core may receive per interval (at least 1).
    /// Per new connection, the data plane takes the first candidate whose
    /// core for the bucket is under budget, else the candidate whose core has
    /// taken the fewest (see [`PlusTable::pick`]).
    pub conn_budget: u32,
}

impl PlusTable {
    /// The data plane's choice for a new connection in `bucket`: `core_of(server
    /// index in candidates order -> core)` gives the candidate's core and
    /// `taken(server, core)` what that core took this interval.
    pub fn pick(&self, bucket: usize, mut taken: impl FnMut(u32) -> u32) -> u32 {
        let cands = &self.candidates[bucket * self.k..(bucket + 1) * self.k];
        let mut best = (u32::MAX, cands[0]);
        for &server in cands {
            let t = taken(server);
            if t < self.conn_budget {
                return server;
            }
            if t < best.0 {
                best = (t, server);
            }
        }
        best.1
    }
}

/// Steer's CrossRSS controller. Stateful: it keeps damped loads between
/// intervals. See docs/crossrss.md for why each step is there.
///
/// Each interval:
/// 1. damp every core's reported load with an EWMA;
/// 2. damp each bucket's new load (packets of connections that began in the
///    bucket during the last interval, counted by the load balancer, which
///    sees every packet) and the number of new connections per interval;
/// 3. take buckets from the heaviest new load down, and give each to the
///    candidate core (one per server: the core that server's RSS uses for the
///    bucket) with the least *predicted* load, adding the bucket's new load
///    to that prediction at once (water-filling), so buckets do not herd onto
///    the core that looked idlest at the start;
/// 4. skip a candidate whose core was already given `cap_factor` times its
///    fair share of new load in this interval;
/// 5. rank the other candidates of each bucket and give every core a budget of
///    new connections (`cap_factor` times its fair share, at least 1) that
///    the data plane enforces per connection ([`PlusTable::pick`]), so that
///    connections arriving together (a burst, or the first interval, when
///    nothing is known yet) still spread.
#[derive(Debug, Clone)]
pub struct CrossRssPlus {
    params: PlusParams,
    buckets: usize,
    /// Damped loads, per server id (kept in report order; reset when the set
    /// of servers changes).
    servers: Vec<u32>,
    damped: Vec<Vec<f64>>,
    bucket_load: Vec<f64>,
    new_conns: f64,
    order: Vec<usize>,
    /// Reused between intervals (no allocation in the steady state).
    scratch: PlusScratch,
}

/// Buffers [`CrossRssPlus::update`] keeps between intervals. The candidate
/// array depends only on the servers' bucket -> core maps, which change only
/// when an RSS table does, so it is rebuilt only then.
#[derive(Debug, Clone, Default)]
struct PlusScratch {
    /// The reports' bucket -> core maps the candidate array was built from
    /// (report-major, concatenated), and each report's core count.
    maps: Vec<u32>,
    map_cores: Vec<usize>,
    /// Bucket-major global core index of every candidate.
    cand: Vec<u32>,
    offsets: Vec<usize>,
    /// Per core: predicted load, and new load given this interval (read only
    /// for cores marked in `touched`: at most one core per bucket is given
    /// load, so the scan gathers 8 bytes per candidate plus one L1-resident
    /// bit).
    predicted: Vec<f64>,
    given: Vec<f64>,
    touched: Vec<u64>,
    /// Per candidate of the current bucket: the order key (see `update`).
    keys: Vec<u64>,
}

impl CrossRssPlus {
    pub fn new(buckets: usize, params: PlusParams) -> Self {
        CrossRssPlus {
            params,
            buckets,
            servers: Vec::new(),
            damped: Vec::new(),
            bucket_load: vec![0.0; buckets],
            new_conns: 0.0,
            order: (0..buckets).collect(),
            scratch: PlusScratch::default(),
        }
    }

    pub fn params(&self) -> PlusParams {
        self.params
    }

    /// One interval: the reports, the new load the load balancer counted per
    /// bucket (any non-negative unit; only ratios matter) and the number of
    /// new connections it saw. The steps are those of the type's docs.
    pub fn update(
        &mut self,
        reports: &[AgentReport],
        bucket_new_load: &[f64],
        new_connections: f64,
    ) -> Result<PlusTable, ReportError> {
        validate_reports(reports, self.buckets)?;
        validate_new_load(bucket_new_load, new_connections, self.buckets)?;
        self.damp_core_loads(reports);
        let shares = self.damp_new_load(bucket_new_load, new_connections, reports);
        self.sort_buckets_heaviest_first(shares.floor);
        self.scratch.predict_from(&self.damped);
        self.scratch.refresh_candidates(reports, self.buckets);
        let (table, candidates) = self.water_fill(reports, &shares);
        Ok(PlusTable {
            table: BucketTable(table),
            candidates,
            k: shares.k,
            conn_budget: shares.conn_budget,
        })
    }

    /// Step 1: every core's reported load through an EWMA (restarted when
    /// the set of servers or their core counts change).
    fn damp_core_loads(&mut self, reports: &[AgentReport]) {
        let alpha = self.params.alpha;
        let same_servers = self.servers.len() == reports.len()
            && self
                .servers
                .iter()
                .zip(reports)
                .all(|(s, r)| *s == r.server)
            && self
                .damped
                .iter()
                .zip(reports)
                .all(|(d, r)| d.len() == r.core_loads.len());
        if same_servers {
            for (d, r) in self.damped.iter_mut().zip(reports) {
                for (e, &l) in d.iter_mut().zip(&r.core_loads) {
                    *e = alpha * l + (1.0 - alpha) * *e;
                }
            }
        } else {
            self.servers = reports.iter().map(|r| r.server).collect();
            self.damped = reports.iter().map(|r| r.core_loads.clone()).collect();
        }
    }

    /// Step 2: each bucket's new load and the new connections through an
    /// EWMA; from them the floor every bucket weighs at least, each core's
    /// cap of new load (step 4) and budget of new connections (step 5).
    fn damp_new_load(
        &mut self,
        bucket_new_load: &[f64],
        new_connections: f64,
        reports: &[AgentReport],
    ) -> Shares {
        let p = self.params;
        for (e, &l) in self.bucket_load.iter_mut().zip(bucket_new_load) {
            *e = p.bucket_alpha * l + (1.0 - p.bucket_alpha) * *e;
        }
        self.new_conns = p.bucket_alpha * new_connections + (1.0 - p.bucket_alpha) * self.new_conns;
        let mean = self.bucket_load.iter().sum::<f64>() / self.buckets as f64;
        let floor = (p.floor * mean).max(1e-9);
        let total_new: f64 = self.bucket_load.iter().map(|l| l.max(floor)).sum();
        let cores: usize = reports.iter().map(|r| r.core_loads.len()).sum();
        let conn_budget = (p.cap_factor * self.new_conns / cores as f64)
            .ceil()
            .max(1.0)
            .min(f64::from(u32::MAX)) as u32;
        Shares {
            floor,
            cap: p.cap_factor * total_new / cores as f64,
            conn_budget,
            k: reports.len().min(PLUS_CANDIDATES),
        }
    }

    /// Step 3's order: heaviest damped new load first, ties by bucket.
    fn sort_buckets_heaviest_first(&mut self, floor: f64) {
        let loads = &self.bucket_load;
        let weight = |b: usize| loads[b].max(floor);
        self.order
            .sort_by(|&a, &b| weight(b).total_cmp(&weight(a)).then(a.cmp(&b)));
    }

    /// Steps 3-5: each bucket, heaviest first, goes to its best candidate
    /// core, whose predicted load grows at once (water-filling); the bucket's
    /// k best candidates, ranked, are what the data plane tries in order.
    fn water_fill(&mut self, reports: &[AgentReport], shares: &Shares) -> (Vec<u32>, Vec<u32>) {
        let (buckets, k) = (self.buckets, shares.k);
        let mut table = vec![0u32; buckets];
        let mut candidates = vec![0u32; buckets * k];
        let mut top: Vec<Ranked> = Vec::with_capacity(k + 1);
        let sc = &mut self.scratch;
        for &b in &self.order {
            let w = self.bucket_load[b].max(shares.floor);
            sc.candidate_keys(b, reports.len(), w, shares.cap);
            best_k(&sc.keys, k, b, reports, &mut top);
            let winner = top[0].3;
            sc.give(
                sc.offsets[winner] + reports[winner].bucket_cores[b] as usize,
                w,
            );
            table[b] = reports[winner].server;
            for (slot, t) in candidates[b * k..(b + 1) * k].iter_mut().zip(&top) {
                *slot = reports[t.3].server;
            }
        }
        (table, candidates)
    }
}

/// What step 2 gives the water-filling of one interval.
struct Shares {
    /// The least weight of a bucket (a fraction of the mean).
    floor: f64,
    /// Step 4: new load a core may be given before it is skipped.
    cap: f64,
    /// Step 5: new connections per core per interval, enforced per packet.
    conn_budget: u32,
    /// Candidates kept per bucket.
    k: usize,
}

/// The per-bucket new load and the new-connection count must be finite,
/// non-negative and no larger than [`MAX_LOAD`], one value per bucket.
fn validate_new_load(
    bucket_new_load: &[f64],
    new_connections: f64,
    buckets: usize,
) -> Result<(), ReportError> {
    if bucket_new_load.len() != buckets {
        return Err(ReportError::WrongBucketCount {
            server: u32::MAX,
            got: bucket_new_load.len(),
            expected: buckets,
        });
    }
    let bad = |l: f64| !(0.0..=MAX_LOAD).contains(&l);
    if let Some((bucket, &load)) = bucket_new_load.iter().enumerate().find(|(_, l)| bad(**l)) {
        return Err(ReportError::NonFiniteLoad {
            server: u32::MAX,
            core: bucket,
            load,
        });
    }
    if bad(new_connections) {
        return Err(ReportError::NonFiniteLoad {
            server: u32::MAX,
            core: usize::MAX,
            load: new_connections,
        });
    }
    Ok(())
}

impl PlusScratch {
    /// Per core (flat: core `c` of report `i` is at `offsets[i] + c`): the
    /// predicted load starts at the damped load; nothing given yet.
    fn predict_from(&mut self, damped: &[Vec<f64>]) {
        self.offsets.clear();
        self.predicted.clear();
        for d in damped {
            self.offsets.push(self.predicted.len());
            self.predicted.extend_from_slice(d);
        }
        let cores = self.predicted.len();
        self.given.clear();
        self.given.resize(cores, 0.0);
        self.touched.clear();
        self.touched.resize(cores.div_ceil(64), 0);
    }

    /// Rebuilds the bucket-major candidate array when a report's bucket ->
    /// core map (or core count) changed since the last interval.
    fn refresh_candidates(&mut self, reports: &[AgentReport], buckets: usize) {
        let n = reports.len();
        let same_maps = self.map_cores.len() == n
            && self
                .map_cores
                .iter()
                .zip(reports)
                .all(|(&c, r)| c == r.core_loads.len())
            && reports
                .iter()
                .enumerate()
                .all(|(i, r)| r.bucket_cores[..] == self.maps[i * buckets..(i + 1) * buckets]);
        if same_maps {
            return;
        }
        self.map_cores.clear();
        self.map_cores
            .extend(reports.iter().map(|r| r.core_loads.len()));
        self.maps.clear();
        for r in reports {
            self.maps.extend_from_slice(&r.bucket_cores);
        }
        // Bucket-major, so the scan of a bucket reads memory in order. A
        // blocked transpose: 64 buckets at a time, so the 64 destination
        // lines stay in L1 while the reports go by.
        self.cand.clear();
        self.cand.resize(buckets * n, 0);
        const TILE: usize = 64;
        for b0 in (0..buckets).step_by(TILE) {
            let b1 = (b0 + TILE).min(buckets);
            for (i, r) in reports.iter().enumerate() {
                let off = self.offsets[i] as u32;
                for (b, &c) in (b0..b1).zip(&r.bucket_cores[b0..b1]) {
                    self.cand[b * n + i] = off + c;
                }
            }
        }
    }

    /// Step 3-4's order key of every candidate of bucket `b` (weight `w`),
    /// in `keys`: one integer whose order is (over cap, predicted load + w).
    /// Scores are non-negative floats, whose bit patterns order like the
    /// numbers, and the over-cap flag is the top bit. One branch-free pass:
    /// the loads are independent, so they overlap instead of waiting on the
    /// comparisons.
    fn candidate_keys(&mut self, b: usize, n: usize, w: f64, cap: f64) {
        self.keys.resize(n, 0);
        let cand = &self.cand[b * n..(b + 1) * n];
        let fresh_over = u64::from(w > cap) << 63;
        for (key, &idx) in self.keys.iter_mut().zip(cand) {
            let idx = idx as usize;
            let over = if self.touched[idx / 64] >> (idx % 64) & 1 == 0 {
                // Nothing given yet: 0.0 + w == w, the same test as below.
                fresh_over
            } else {
                u64::from(self.given[idx] + w > cap) << 63
            };
            *key = (self.predicted[idx] + w).to_bits() | over;
        }
    }

    /// Gives new load `w` to core `idx`: its prediction grows at once.
    fn give(&mut self, idx: usize, w: f64) {
        self.predicted[idx] += w;
        self.given[idx] += w;
        self.touched[idx / 64] |= 1 << (idx % 64);
    }
}

/// A candidate as ranked: (over cap, score, tie rank, report index).
type Ranked = (bool, f64, u64, usize);

/// The `k` candidates with the smallest keys into `top`, best first, ties by
/// rank, exactly as comparing the (over, score, rank) tuples; a key above the
/// k-th needs no rank.
fn best_k(keys: &[u64], k: usize, b: usize, reports: &[AgentReport], top: &mut Vec<Ranked>) {
    top.clear();
    let mut kth = u64::MAX;
    for (i, &key) in keys.iter().enumerate() {
        if key > kth {
            continue;
        }
        let t = (
            key >> 63 == 1,
            f64::from_bits(key & !(1 << 63)),
            tie_rank(b, reports[i].server),
            i,
        );
        if top.len() == k {
            if !ahead(&t, &top[k - 1]) {
                continue;
            }
            top.pop();
        }
        let at = top.iter().position(|x| ahead(&t, x)).unwrap_or(top.len());
        top.insert(at, t);
        if top.len() == k {
            let last = &top[k - 1];
            kth = last.1.to_bits() | (u64::from(last.0) << 63);
        }
    }
}

/// Whether candidate `a` ranks before `b`: within the cap first, then lower
/// predicted load, then the tie rank.
#[inline]
fn ahead(a: &Ranked, b: &Ranked) -> bool {
    (!a.0 && b.0) || (a.0 == b.0 && better(a.1, a.2, b.1, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(server: u32, loads: &[f64], map: &[u32]) -> AgentReport {
        AgentReport {
            server,
            core_loads: loads.to_vec(),
            bucket_cores: map.to_vec(),
        }
    }

    #[test]
    fn published_picks_least_loaded_core_per_bucket() {
        let reports = [
            report(10, &[5.0, 1.0], &[0, 1, 0, 1]),
            report(20, &[2.0, 9.0], &[1, 1, 0, 0]),
        ];
        let t = crossrss_table(&reports, 4).unwrap();
        // bucket 0: s10 core0=5, s20 core1=9 -> 10; bucket 1: 1 vs 9 -> 10;
        // bucket 2: 5 vs 2 -> 20; bucket 3: 1 vs 2 -> 10.
        assert_eq!(t.entries(), &[10, 10, 20, 10]);
    }

    #[test]
    fn bad_reports_are_typed_errors() {
        let ok = report(1, &[1.0, 2.0], &[0, 1]);
        type Check = fn(&ReportError) -> bool;
        let cases: Vec<(Vec<AgentReport>, Check)> = vec![
            (vec![], |e| matches!(e, ReportError::NoReports)),
            (vec![ok.clone(), ok.clone()], |e| {
                matches!(e, ReportError::DuplicateServer(1))
            }),
            (vec![report(2, &[-1.0, 0.0], &[0, 1])], |e| {
                matches!(
                    e,
                    ReportError::NegativeLoad {
                        server: 2,
                        core: 0,
                        ..
                    }
                )
            }),
            (vec![report(2, &[f64::NAN, 0.0], &[0, 1])], |e| {
                matches!(e, ReportError::NonFiniteLoad { .. })
            }),
            (vec![report(2, &[f64::INFINITY, 0.0], &[0, 1])], |e| {
                matches!(e, ReportError::NonFiniteLoad { .. })
            }),
            (vec![report(2, &[1e300, 0.0], &[0, 1])], |e| {
                matches!(e, ReportError::AbsurdLoad { .. })
            }),
            (vec![report(2, &[1.0, 0.0], &[0, 1, 0])], |e| {
                matches!(
                    e,
                    ReportError::WrongBucketCount {
                        got: 3,
                        expected: 2,
                        ..
                    }
                )
            }),
            (vec![report(2, &[1.0, 0.0], &[0, 7])], |e| {
                matches!(
                    e,
                    ReportError::CoreOutOfRange {
                        bucket: 1,
                        core: 7,
                        ..
                    }
                )
            }),
            (vec![report(2, &[], &[0, 0])], |e| {
                matches!(e, ReportError::NoCores { server: 2 })
            }),
        ];
        for (reports, check) in cases {
            let err = crossrss_table(&reports, 2).unwrap_err();
            assert!(check(&err), "{reports:?}: {err}");
            let mut plus = CrossRssPlus::new(2, PlusParams::default());
            assert!(plus.update(&reports, &[0.0, 0.0], 0.0).is_err());
        }
        assert_eq!(
            crossrss_table(std::slice::from_ref(&ok), 0),
            Err(ReportError::NoBuckets)
        );
        let mut plus = CrossRssPlus::new(2, PlusParams::default());
        assert!(plus.update(std::slice::from_ref(&ok), &[0.0], 0.0).is_err());
        assert!(plus
            .update(std::slice::from_ref(&ok), &[0.0, f64::NAN], 0.0)
            .is_err());
        assert!(plus.update(&[ok], &[0.0, 0.0], -1.0).is_err());
    }

    fn pseudo_reports(servers: u32, cores: usize, buckets: usize, seed: u64) -> Vec<AgentReport> {
        let mut rng = SplitMix64::new(seed);
        // Few distinct loads, so ties happen.
        (0..servers)
            .map(|s| AgentReport::random(s * 7 + 3, cores, buckets, 4, &mut rng))
            .collect()
    }

    #[test]
    fn hierarchy_equals_flat_controller() {
        for seed in 0..20 {
            let reports = pseudo_reports(12, 4, 64, seed);
            let flat = crossrss_table(&reports, 64).unwrap();
            for group_size in [1, 3, 5, 12] {
                let groups: Vec<GroupSummary> = reports
                    .chunks(group_size)
                    .map(|g| summarize_group(g, 64).unwrap())
                    .collect();
                assert_eq!(combine_groups(&groups, 64).unwrap(), flat, "seed {seed}");
            }
            // Two levels: groups of groups.
            let leaves: Vec<GroupSummary> = reports
                .chunks(2)
                .map(|g| summarize_group(g, 64).unwrap())
                .collect();
            let mids: Vec<GroupSummary> = leaves
                .chunks(3)
                .map(|g| {
                    let t = combine_groups(g, 64).unwrap();
                    GroupSummary {
                        minima: (0..64)
                            .map(|b| {
                                let m = g
                                    .iter()
                                    .map(|s| s.minima[b])
                                    .find(|m| m.server == t.entries()[b])
                                    .unwrap();
                                m
                            })
                            .collect(),
                    }
                })
                .collect();
            assert_eq!(combine_groups(&mids, 64).unwrap(), flat);
        }
    }

    #[test]
    fn combine_rejects_mismatched_groups() {
        let g = summarize_group(&pseudo_reports(2, 2, 8, 1), 8).unwrap();
        assert!(matches!(
            combine_groups(std::slice::from_ref(&g), 4),
            Err(ReportError::GroupBucketMismatch { .. })
        ));
        assert!(matches!(
            combine_groups(&[g, GroupSummary { minima: vec![] }], 8),
            Err(ReportError::EmptyGroup { group: 1 })
        ));
    }

    #[test]
    fn published_herds_plus_spreads() {
        // 4 servers x 4 cores, all idle but one busy core each: the published
        // controller sends every bucket to one of the few least loaded
        // candidates; water-filling spreads the buckets' new load.
        let reports = pseudo_reports(4, 4, 128, 9);
        let mut plus = CrossRssPlus::new(128, PlusParams::default());
        let t = plus.update(&reports, &vec![1.0; 128], 10.0).unwrap().table;
        let mut per_core = std::collections::HashMap::new();
        for (b, &s) in t.entries().iter().enumerate() {
            let r = reports.iter().find(|r| r.server == s).unwrap();
            *per_core.entry((s, r.bucket_cores[b])).or_insert(0) += 1;
        }
        let cap = (PlusParams::default().cap_factor * 128.0 / 16.0).ceil() as i32;
        assert!(per_core.values().all(|&n| n <= cap), "{per_core:?}");
    }
}
