//! The trace-driven simulator (the paper's Section 3 set-up, in Rust): a load
//! balancer in front of `servers` servers with `cores` cores each, replaying a
//! real capture in timestamp order.
//!
//! For each packet: the connection table gives the server chosen at the
//! connection's first packet (a connection never moves, whatever the table
//! does later); a new connection is placed by the policy. The chosen server's
//! NIC hashes the packet (Toeplitz, shared key) and its randomised
//! indirection table picks the core, whose counter is incremented. Every
//! `1 / rate_hz` seconds of replayed time the agents report the packets each
//! core received in the interval, and the controller (CrossRSS policies) or
//! the server-load view (Pow2) is updated.
//!
//! # The metric (papers/crossrss-core-aware-lb.txt, Section 3, Fig. 2a)
//!
//! "server load variance (i.e., number of packets received by each CPU
//! divided by the average number of packets) and (ii) the per-core variance
//! across all machines for consecutive 1 s windows". For one window with
//! counts `n_1..n_k` (k = servers for the server variance, servers x cores
//! for the per-core variance) and mean `m`, the window's variance is the
//! population variance of `n_i / m`: `(1/k) * sum (n_i/m - 1)^2` (the squared
//! coefficient of variation). The reported value is the mean over all
//! complete 1 s windows (a trailing partial window is dropped, unless it is
//! the only window); windows with no packet are skipped. A fraction: the
//! paper's 7.2% is 0.072.
//!
//! # Fig. 2b: packets processed versus offered load
//!
//! Each core processes at most `c` packets per 1 s window and drops the rest
//! (no queueing across windows). With `R` the replay's mean packet rate and
//! `c = R / (servers * cores)` (aggregate capacity = the replay's mean rate),
//! the trace's rate is scaled by `f` in 0.5..=1.5: processed(f) =
//! sum over windows and cores of `min(f * n, c)`, per second. Scaling every
//! count by `f` is what replaying `f` times the packets gives, because every
//! policy's choices depend only on load ratios.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rss::toeplitz::{V4_TUPLE_LEN, V6_TUPLE_LEN};
use rss::{FlowTuple, RssConfig, RssKey, ToeplitzTable};
use serde::Serialize;

use crate::controller::{crossrss_table, AgentReport, CrossRssPlus, PlusParams, PlusTable};
use crate::error::SimError;
use crate::maglev::{self, Maglev};
use crate::rng::mix64;
use crate::servers::{bucket_cores, server_config, DEFAULT_BUCKETS};
use crate::trace::{Trace, TraceStats};

pub mod text;

/// One second, the paper's window (the default of [`SimConfig::window_s`]).
pub const WINDOW_NS: u64 = 1_000_000_000;
/// Bounds on the measurement window, in seconds.
pub const MIN_WINDOW_S: f64 = 1e-3;
pub const MAX_WINDOW_S: f64 = 3600.0;
/// Sanity bounds on the set-up.
pub const MAX_SERVERS: u32 = 100_000;
pub const MAX_CORES: u32 = 4096;
pub const MAX_AMPLIFY: u32 = 4096;

/// A load-balancing policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Per-connection round robin over servers.
    Rr,
    /// Hash of the 5-tuple modulo the number of servers.
    Hash,
    /// Power of two choices on server load (reported at the controller rate).
    Pow2,
    /// Maglev consistent hashing.
    Maglev,
    /// CrossRSS as published.
    Crossrss,
    /// Steer's CrossRSS.
    CrossrssPlus,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::Rr,
        Policy::Hash,
        Policy::Pow2,
        Policy::Maglev,
        Policy::Crossrss,
        Policy::CrossrssPlus,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Rr => "rr",
            Policy::Hash => "hash",
            Policy::Pow2 => "pow2",
            Policy::Maglev => "maglev",
            Policy::Crossrss => "crossrss",
            Policy::CrossrssPlus => "crossrss-plus",
        }
    }

    /// What the policy does, in one line without a full stop (a command
    /// line's help for [`name`](Self::name)).
    pub fn about(self) -> &'static str {
        match self {
            Policy::Rr => "Per-connection round robin over servers",
            Policy::Hash => "Hash of the 5-tuple modulo the number of servers",
            Policy::Pow2 => "Power of two choices on server load",
            Policy::Maglev => "Maglev consistent hashing",
            Policy::Crossrss => "CrossRSS as published",
            Policy::CrossrssPlus => "Steer's CrossRSS (docs/crossrss.md)",
        }
    }

    /// The name that stands for every policy in [`named`](Self::named).
    pub const ALL_NAME: &'static str = "all";

    /// The policies `names` name, in order, each once: a policy's
    /// [`name`](Self::name), or [`ALL_NAME`](Self::ALL_NAME) for every
    /// policy. None when a name names no policy.
    pub fn named<S: AsRef<str>>(names: &[S]) -> Option<Vec<Policy>> {
        pick_named(&Policy::ALL, Policy::name, names)
    }
}

/// The values of `all` that `names` name, in order, each once: a value's
/// `name`, or [`Policy::ALL_NAME`] for every value. None when a name names
/// nothing. The one reading of a list of policy names, for the simulator's
/// policies and the live load balancer's.
pub fn pick_named<T: Copy + PartialEq, S: AsRef<str>>(
    all: &[T],
    name: fn(T) -> &'static str,
    names: &[S],
) -> Option<Vec<T>> {
    let mut out: Vec<T> = Vec::new();
    for given in names {
        let picked = match given.as_ref() {
            Policy::ALL_NAME => all.to_vec(),
            one => vec![*all.iter().find(|&&v| name(v) == one)?],
        };
        for v in picked {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    Some(out)
}

/// How the simulation is set up. With the `clap` feature these are also
/// `steer lb sim`'s flags, each defaulting to [`SimConfig::default`]; the
/// key is read by the caller (`--key` names one in several ways).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SimConfig {
    /// Servers behind the load balancer.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimConfig::default().servers))]
    pub servers: u32,
    /// Cores (RSS queues) per server.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimConfig::default().cores))]
    pub cores: u32,
    /// RSS buckets (indirection table entries), on every server and in the
    /// load balancer's table.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimConfig::default().buckets))]
    pub buckets: usize,
    /// Agent report / controller rate (Hz).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimConfig::default().rate_hz))]
    pub rate_hz: f64,
    /// Replay this many times faster than captured.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimConfig::default().speedup))]
    pub speedup: f64,
    /// Replay N copies of the trace, copy k with both addresses shifted by k
    /// (first octet, or first IPv6 group) and its timeline rotated by k/N of
    /// the trace's duration.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimConfig::default().amplify))]
    pub amplify: u32,
    /// Seed XORed (high half) with each server id for its indirection table,
    /// and used by Pow2's choices.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimConfig::default().seed))]
    pub seed: u64,
    #[serde(serialize_with = "ser_key")]
    #[cfg_attr(feature = "clap", arg(skip = SimConfig::default().key))]
    pub key: RssKey,
    #[cfg_attr(feature = "clap", arg(skip))]
    pub plus: PlusParams,
    #[cfg_attr(feature = "clap", arg(skip = SimConfig::default().maglev_size))]
    pub maglev_size: usize,
    /// Shorten idle gaps in the capture longer than this many seconds
    /// (some captures join sessions days apart).
    #[cfg_attr(
        feature = "clap",
        arg(long = "max-gap", value_name = "MAX_GAP", default_value_t = SimConfig::default().max_gap_s)
    )]
    pub max_gap_s: f64,
    /// Length of the measurement window the variances are taken over, in
    /// seconds (the paper's is 1 s). Only the metric changes with it: the
    /// agents still report at --rate-hz.
    #[cfg_attr(
        feature = "clap",
        arg(long = "window", value_name = "WINDOW", default_value_t = SimConfig::default().window_s)
    )]
    pub window_s: f64,
}

fn ser_key<S: serde::Serializer>(key: &RssKey, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&key.to_hex())
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            servers: 4,
            cores: 4,
            buckets: DEFAULT_BUCKETS,
            rate_hz: 10.0,
            speedup: 1.0,
            amplify: 1,
            seed: 0,
            key: RssKey::microsoft(),
            plus: PlusParams::default(),
            maglev_size: maglev::DEFAULT_TABLE_SIZE,
            max_gap_s: 10.0,
            window_s: 1.0,
        }
    }
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        let zero = |what, got: u64| {
            if got == 0 {
                Err(SimError::Zero { what, got })
            } else {
                Ok(())
            }
        };
        zero("servers", self.servers.into())?;
        zero("cores", self.cores.into())?;
        zero("buckets", self.buckets as u64)?;
        zero("amplify", self.amplify.into())?;
        let max = |what, got: u64, max: u64| {
            if got > max {
                Err(SimError::TooLarge { what, got, max })
            } else {
                Ok(())
            }
        };
        max("servers", self.servers.into(), MAX_SERVERS.into())?;
        max("cores", self.cores.into(), MAX_CORES.into())?;
        max("amplify", self.amplify.into(), MAX_AMPLIFY.into())?;
        max(
            "buckets",
            self.buckets as u64,
            rss::indirection::MAX_TABLE_SIZE as u64,
        )?;
        if !(self.speedup.is_finite() && self.speedup > 0.0) {
            return Err(SimError::BadSpeedup(self.speedup));
        }
        if !(self.max_gap_s.is_finite() && self.max_gap_s > 0.0) {
            return Err(SimError::BadSpeedup(self.max_gap_s));
        }
        if !(self.rate_hz.is_finite() && self.rate_hz > 0.0 && self.rate_hz <= 1e6) {
            return Err(SimError::BadRate(self.rate_hz));
        }
        if !(MIN_WINDOW_S..=MAX_WINDOW_S).contains(&self.window_s) {
            return Err(SimError::BadWindow(self.window_s));
        }
        Ok(())
    }

    /// The measurement window in replay nanoseconds.
    pub fn window_ns(&self) -> u64 {
        (self.window_s * 1e9).round() as u64
    }
}

/// One packet of a replay: when (ns from the replay's start) and which flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayPacket {
    pub ts_ns: u64,
    pub flow: u32,
}

/// A trace prepared for replay: sped up, amplified, flows interned.
#[derive(Debug, Clone)]
pub struct Replay {
    pub packets: Vec<ReplayPacket>,
    pub flows: Vec<FlowTuple>,
    pub speedup: f64,
    pub amplify: u32,
    /// Idle gaps that were shortened to `max_gap`.
    pub gaps_shortened: usize,
}

/// Copy `k` of an address: the first octet (IPv4) or first 16-bit group
/// (IPv6) plus `k`, wrapping.
pub fn shift_addr(addr: IpAddr, k: u32) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let v = u32::from(a).wrapping_add(k << 24);
            IpAddr::V4(Ipv4Addr::from(v))
        }
        IpAddr::V6(a) => {
            let mut seg = a.segments();
            seg[0] = seg[0].wrapping_add(k as u16);
            IpAddr::V6(Ipv6Addr::from(seg))
        }
    }
}

impl Replay {
    /// Copy `k` of `amplify` has both addresses shifted by `k` ([`shift_addr`])
    /// and its timeline rotated by `k / amplify` of the trace's duration (a
    /// circular shift), so the copies are not synchronised; then every
    /// timestamp is divided by `speedup`. Before that, idle gaps longer than
    /// `max_gap_ns` are shortened to `max_gap_ns`.
    pub fn new(
        trace: &Trace,
        speedup: f64,
        amplify: u32,
        max_gap_ns: u64,
    ) -> Result<Replay, SimError> {
        if !(speedup.is_finite() && speedup > 0.0) {
            return Err(SimError::BadSpeedup(speedup));
        }
        if amplify == 0 || amplify > MAX_AMPLIFY {
            return Err(SimError::TooLarge {
                what: "amplify",
                got: amplify.into(),
                max: MAX_AMPLIFY.into(),
            });
        }
        let first = trace.packets.first().ok_or(SimError::Empty)?;
        // Capture time -> compressed time from 0.
        let (mut prev, mut now, mut gaps_shortened) = (first.ts_ns, 0u64, 0usize);
        let times: Vec<u64> = trace
            .packets
            .iter()
            .map(|p| {
                let gap = p.ts_ns - prev;
                if gap > max_gap_ns {
                    gaps_shortened += 1;
                }
                now += gap.min(max_gap_ns.max(1));
                prev = p.ts_ns;
                now
            })
            .collect();
        let span = now + 1;
        let mut ids: HashMap<FlowTuple, u32> = HashMap::new();
        let mut flows = Vec::new();
        let mut packets = Vec::with_capacity(trace.packets.len() * amplify as usize);
        for k in 0..amplify {
            let offset = (u128::from(span) * u128::from(k) / u128::from(amplify)) as u64;
            for (p, &time) in trace.packets.iter().zip(&times) {
                let mut t = p.tuple;
                if k > 0 {
                    t.src = shift_addr(t.src, k);
                    t.dst = shift_addr(t.dst, k);
                }
                let id = *ids.entry(t).or_insert_with(|| {
                    flows.push(t);
                    (flows.len() - 1) as u32
                });
                let rel = (time + offset) % span;
                packets.push(ReplayPacket {
                    ts_ns: (rel as f64 / speedup) as u64,
                    flow: id,
                });
            }
        }
        packets.sort_by_key(|p| p.ts_ns);
        Ok(Replay {
            packets,
            flows,
            speedup,
            amplify,
            gaps_shortened,
        })
    }

    pub fn duration_ns(&self) -> u64 {
        self.packets.last().map_or(0, |p| p.ts_ns)
    }
}

/// The bytes a flow's packets are hashed on, padded with zeros to the fixed
/// size (Toeplitz is linear: trailing zero bytes add nothing, so the 2-tuple
/// of a UDP flow hashes the same padded or not).
#[derive(Debug, Clone, Copy)]
enum FlowInput {
    V4([u8; V4_TUPLE_LEN]),
    V6([u8; V6_TUPLE_LEN]),
}

/// Everything fixed for one replay and set-up; runs each policy.
pub struct Simulator<'a> {
    replay: &'a Replay,
    config: SimConfig,
    toeplitz: ToeplitzTable,
    inputs: Vec<FlowInput>,
    /// The load balancer's own 5-tuple hash (HASH, Maglev, Pow2).
    lb_hash: Vec<u64>,
    /// `server * buckets + bucket` -> core.
    core_of: Vec<u32>,
    bucket_maps: Vec<Vec<u32>>,
    maglev: Maglev,
    server_configs: Vec<RssConfig>,
}

/// Per-policy result.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyResult {
    pub name: &'static str,
    /// Mean over 1 s windows of the variance of (server count / mean);
    /// `None` (JSON null) when no window had a packet.
    pub server_variance: Option<f64>,
    /// Mean over 1 s windows of the variance of (core count / mean), all
    /// cores of all servers; `None` when no window had a packet.
    pub core_variance: Option<f64>,
    /// Worst window's per-core variance; `None` when no window had a packet.
    pub core_variance_max: Option<f64>,
    /// Mean over windows of (busiest core / mean core); `None` when no
    /// window had a packet.
    pub peak_to_mean: Option<f64>,
    /// Windows with at least one packet (the ones the means are over).
    pub windows: usize,
    pub connections: usize,
    /// Controller recomputations that changed at least one bucket.
    pub table_changes: usize,
    /// Fig. 2b: packets processed versus offered load.
    pub throughput: Vec<ThroughputPoint>,
    /// Packets per core over the whole replay (server-major).
    pub core_totals: Vec<u64>,
}

impl PolicyResult {
    /// The share of the offered packets processed when the offered load
    /// equals the aggregate core capacity (Fig. 2b at 100%); None without
    /// a throughput curve.
    pub fn processed_at_capacity(&self) -> Option<f64> {
        self.throughput
            .iter()
            .find(|t| (t.offered - 1.0).abs() < 1e-9)
            .map(|t| t.processed_pps / t.offered_pps)
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ThroughputPoint {
    /// Offered load, as a multiple of the aggregate core capacity.
    pub offered: f64,
    pub offered_pps: f64,
    pub processed_pps: f64,
}

/// Raw per-window counts of one run (server-major cores).
#[derive(Debug, Clone)]
pub struct RunCounts {
    pub windows: Vec<Vec<u64>>,
    pub connections: usize,
    pub table_changes: usize,
}

impl<'a> Simulator<'a> {
    pub fn new(replay: &'a Replay, config: SimConfig) -> Result<Self, SimError> {
        config.validate()?;
        if replay.packets.is_empty() {
            return Err(SimError::Empty);
        }
        let server_configs: Vec<RssConfig> = (0..config.servers)
            .map(|s| server_config(&config.key, s, config.cores, config.buckets, config.seed))
            .collect::<Result<_, _>>()?;
        let toeplitz = ToeplitzTable::new(&config.key);
        let reference = &server_configs[0];
        let inputs = replay
            .flows
            .iter()
            .map(|t| {
                let input = reference.hash_input(t)?;
                let bytes = input.as_bytes();
                Ok(if t.src.is_ipv4() {
                    let mut a = [0u8; V4_TUPLE_LEN];
                    a[..bytes.len()].copy_from_slice(bytes);
                    FlowInput::V4(a)
                } else {
                    let mut a = [0u8; V6_TUPLE_LEN];
                    a[..bytes.len()].copy_from_slice(bytes);
                    FlowInput::V6(a)
                })
            })
            .collect::<Result<Vec<_>, rss::RssError>>()?;
        let lb_hash = replay.flows.iter().map(lb_flow_hash).collect();
        let bucket_maps: Vec<Vec<u32>> = server_configs.iter().map(bucket_cores).collect();
        let core_of = bucket_maps.iter().flatten().copied().collect();
        let ids: Vec<u32> = (0..config.servers).collect();
        let maglev = Maglev::new(&ids, config.maglev_size)?;
        Ok(Simulator {
            replay,
            config,
            toeplitz,
            inputs,
            lb_hash,
            core_of,
            bucket_maps,
            maglev,
            server_configs,
        })
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The replay this simulator runs.
    pub fn replay(&self) -> &Replay {
        self.replay
    }

    /// The servers' RSS configurations (server id = index).
    pub fn server_configs(&self) -> &[RssConfig] {
        &self.server_configs
    }

    #[inline(always)]
    fn hash(&self, flow: u32) -> u32 {
        match &self.inputs[flow as usize] {
            FlowInput::V4(a) => self.toeplitz.hash_v4_4tuple(a),
            FlowInput::V6(a) => self.toeplitz.hash_v6_4tuple(a),
        }
    }

    /// Where a flow lands if sent to `server`: (bucket, core), as the
    /// simulator computes it (one shared Toeplitz hash, the server's table).
    pub fn place(&self, flow: u32, server: u32) -> (usize, u32) {
        let bucket = self.hash(flow) as usize % self.config.buckets;
        (
            bucket,
            self.core_of[server as usize * self.config.buckets + bucket],
        )
    }

    /// Replays the trace under one policy and returns the per-window counts.
    pub fn run_counts(&self, policy: Policy) -> Result<RunCounts, SimError> {
        let cfg = &self.config;
        let servers = cfg.servers as usize;
        let cores = cfg.cores as usize;
        let buckets = cfg.buckets;
        let n_cores = servers * cores;
        let interval_ns = ((1e9 / cfg.rate_hz) as u64).max(1);
        let mask = buckets.is_power_of_two().then_some(buckets as u32 - 1);
        let bucket_of = |h: u32| match mask {
            Some(m) => (h & m) as usize,
            None => h as usize % buckets,
        };

        const NONE: u32 = u32::MAX;
        let mut conn = vec![NONE; self.replay.flows.len()];
        let mut conn_tick = vec![0u32; self.replay.flows.len()];
        let mut interval = vec![0u64; n_cores];
        let mut window = vec![0u64; n_cores];
        let mut windows = Vec::new();
        let mut bucket_new = vec![0f64; buckets];
        let mut server_load = vec![0u64; servers];
        let mut reports: Vec<AgentReport> = self
            .bucket_maps
            .iter()
            .enumerate()
            .map(|(s, map)| AgentReport {
                server: s as u32,
                core_loads: vec![0.0; cores],
                bucket_cores: map.clone(),
            })
            .collect();
        let mut plus = CrossRssPlus::new(buckets, cfg.plus);
        let mut plus_table: PlusTable = plus.update(&reports, &bucket_new, 0.0)?;
        let mut table: Vec<u32> = match policy {
            Policy::Crossrss => crossrss_table(&reports, buckets)?.entries().to_vec(),
            Policy::CrossrssPlus => plus_table.table.entries().to_vec(),
            _ => Vec::new(),
        };
        let mut taken = vec![0u32; n_cores];
        let mut new_conns = 0f64;
        let mut rr_next = 0usize;
        let mut connections = 0usize;
        let mut table_changes = 0usize;
        let mut tick: u32 = 0;
        let mut next_tick = interval_ns;
        let window_ns = cfg.window_ns();
        let mut next_window = window_ns;

        for p in &self.replay.packets {
            while p.ts_ns >= next_tick {
                // Agents report; the controller recomputes.
                match policy {
                    Policy::Pow2 => {
                        for (s, load) in server_load.iter_mut().enumerate() {
                            *load = interval[s * cores..(s + 1) * cores].iter().sum();
                        }
                    }
                    Policy::Crossrss | Policy::CrossrssPlus => {
                        for (s, r) in reports.iter_mut().enumerate() {
                            for (l, &n) in r.core_loads.iter_mut().zip(&interval[s * cores..]) {
                                *l = n as f64;
                            }
                        }
                        let new = if policy == Policy::Crossrss {
                            crossrss_table(&reports, buckets)?
                        } else {
                            plus_table = plus.update(&reports, &bucket_new, new_conns)?;
                            new_conns = 0.0;
                            taken.iter_mut().for_each(|t| *t = 0);
                            plus_table.table.clone()
                        };
                        if new.entries() != table.as_slice() {
                            table_changes += 1;
                            table.copy_from_slice(new.entries());
                        }
                        bucket_new.iter_mut().for_each(|b| *b = 0.0);
                    }
                    _ => {}
                }
                interval.iter_mut().for_each(|n| *n = 0);
                tick += 1;
                next_tick += interval_ns;
            }
            while p.ts_ns >= next_window {
                windows.push(std::mem::replace(&mut window, vec![0; n_cores]));
                next_window += window_ns;
            }
            let flow = p.flow as usize;
            let h = self.hash(p.flow);
            let bucket = bucket_of(h);
            let mut s = conn[flow];
            if s == NONE {
                connections += 1;
                s = match policy {
                    Policy::Rr => {
                        let s = rr_next;
                        rr_next = (rr_next + 1) % servers;
                        s as u32
                    }
                    Policy::Hash => (self.lb_hash[flow] % servers as u64) as u32,
                    Policy::Maglev => self.maglev.lookup(self.lb_hash[flow]),
                    Policy::Pow2 => {
                        let h1 = mix64(self.lb_hash[flow] ^ cfg.seed);
                        let a = (h1 % servers as u64) as usize;
                        let b = ((h1 >> 32) % servers as u64) as usize;
                        // Ties go to the first choice.
                        if server_load[b] < server_load[a] {
                            b as u32
                        } else {
                            a as u32
                        }
                    }
                    Policy::Crossrss => table[bucket],
                    Policy::CrossrssPlus => {
                        new_conns += 1.0;
                        let core_of = &self.core_of;
                        let s = plus_table.pick(bucket, |server| {
                            let core = core_of[server as usize * buckets + bucket] as usize;
                            taken[server as usize * cores + core]
                        });
                        let core = core_of[s as usize * buckets + bucket] as usize;
                        taken[s as usize * cores + core] += 1;
                        s
                    }
                };
                conn[flow] = s;
                conn_tick[flow] = tick;
            }
            if policy == Policy::CrossrssPlus && conn_tick[flow] == tick {
                bucket_new[bucket] += 1.0;
            }
            let core = self.core_of[s as usize * buckets + bucket] as usize;
            let idx = s as usize * cores + core;
            interval[idx] += 1;
            window[idx] += 1;
        }
        // The trailing partial window counts only if it is the only one.
        if windows.is_empty() {
            windows.push(window);
        }
        Ok(RunCounts {
            windows,
            connections,
            table_changes,
        })
    }

    /// Replays under one policy and computes the paper's metrics.
    pub fn run(&self, policy: Policy) -> Result<PolicyResult, SimError> {
        let counts = self.run_counts(policy)?;
        Ok(summarize(
            policy.name(),
            &counts,
            self.config.servers as usize,
            self.config.cores as usize,
            self.config.window_s,
        ))
    }
}

/// The load balancer's own flow hash (not the NICs' Toeplitz hash: a real
/// load balancer hashes with its own function and seed).
fn lb_flow_hash(t: &FlowTuple) -> u64 {
    let fold = |a: IpAddr| -> u64 {
        match a {
            IpAddr::V4(v) => u64::from(u32::from(v)),
            IpAddr::V6(v) => {
                let x = u128::from(v);
                mix64((x >> 64) as u64) ^ (x as u64)
            }
        }
    };
    let proto = match t.proto {
        rss::L4Proto::Tcp => 6u64,
        rss::L4Proto::Udp => 17,
        rss::L4Proto::Other => 0,
    };
    let mut h = mix64(fold(t.src) ^ 0x5bd1_e995);
    h = mix64(h ^ fold(t.dst));
    mix64(h ^ (u64::from(t.src_port) << 32 | u64::from(t.dst_port) << 16 | proto))
}

/// Population variance of `counts[i] / mean`; `None` when the mean is 0.
pub fn normalized_variance(counts: impl Iterator<Item = u64> + Clone) -> Option<f64> {
    let k = counts.clone().count();
    let sum: u64 = counts.clone().sum();
    if k == 0 || sum == 0 {
        return None;
    }
    let mean = sum as f64 / k as f64;
    Some(
        counts
            .map(|n| {
                let x = n as f64 / mean - 1.0;
                x * x
            })
            .sum::<f64>()
            / k as f64,
    )
}

/// The paper's metrics over the 1 s windows that had packets (see the
/// module docs); the windows are server-major per-core counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowVariances {
    /// Mean over the windows of the variance of (server count / mean).
    pub server_variance: f64,
    /// Mean over the windows of the variance of (core count / mean).
    pub core_variance: f64,
    /// The worst window's per-core variance.
    pub core_variance_max: f64,
    /// Mean over the windows of (busiest core / mean core).
    pub peak_to_mean: f64,
    /// Windows the means are over.
    pub windows: usize,
}

/// The metrics of `windows`, or `None` when no window had a packet: with
/// nothing measured there is no variance, and 0 would read as perfect
/// balance.
pub fn window_variances(windows: &[Vec<u64>], cores: usize) -> Option<WindowVariances> {
    let (mut sv, mut cv, mut cmax, mut peak, mut used) = (0.0, 0.0, 0.0f64, 0.0, 0usize);
    for w in windows {
        // Server-major: each run of `cores` counts is one server.
        let per_server = w.chunks(cores.max(1)).map(|c| c.iter().sum::<u64>());
        if let (Some(s), Some(c)) = (
            normalized_variance(per_server),
            normalized_variance(w.iter().copied()),
        ) {
            sv += s;
            cv += c;
            cmax = cmax.max(c);
            let mean = w.iter().sum::<u64>() as f64 / w.len() as f64;
            peak += w.iter().copied().max().unwrap_or(0) as f64 / mean;
            used += 1;
        }
    }
    (used > 0).then(|| {
        let n = used as f64;
        WindowVariances {
            server_variance: sv / n,
            core_variance: cv / n,
            core_variance_max: cmax,
            peak_to_mean: peak / n,
            windows: used,
        }
    })
}

/// Computes the metrics of one run from its window counts (`window_s`
/// seconds each).
pub fn summarize(
    name: &'static str,
    run: &RunCounts,
    servers: usize,
    cores: usize,
    window_s: f64,
) -> PolicyResult {
    let mut totals = vec![0u64; servers * cores];
    for w in &run.windows {
        for (t, n) in totals.iter_mut().zip(w) {
            *t += n;
        }
    }
    let v = window_variances(&run.windows, cores);
    PolicyResult {
        name,
        server_variance: v.map(|v| v.server_variance),
        core_variance: v.map(|v| v.core_variance),
        core_variance_max: v.map(|v| v.core_variance_max),
        peak_to_mean: v.map(|v| v.peak_to_mean),
        windows: v.map_or(0, |v| v.windows),
        connections: run.connections,
        table_changes: run.table_changes,
        throughput: throughput_curve(&run.windows, window_s),
        core_totals: totals,
    }
}

/// Fig. 2b from window counts of `window_s` seconds (see the module docs).
pub fn throughput_curve(windows: &[Vec<u64>], window_s: f64) -> Vec<ThroughputPoint> {
    let cores = windows.first().map_or(0, Vec::len);
    let total: u64 = windows.iter().flatten().sum();
    if windows.is_empty() || cores == 0 || total == 0 {
        return Vec::new();
    }
    let secs = windows.len() as f64 * window_s;
    let rate = total as f64 / secs;
    let cap = total as f64 / (windows.len() * cores) as f64;
    (0..=20)
        .map(|i| {
            let f = 0.5 + 0.05 * i as f64;
            let processed: f64 = windows
                .iter()
                .flatten()
                .map(|&n| (f * n as f64).min(cap))
                .sum();
            ThroughputPoint {
                offered: f,
                offered_pps: f * rate,
                processed_pps: processed / secs,
            }
        })
        .collect()
}

/// What the report says about the replay.
#[derive(Debug, Clone, Serialize)]
pub struct ReplaySummary {
    pub speedup: f64,
    pub amplify: u32,
    /// Capture gaps longer than `config.max_gap_s` that were shortened.
    pub gaps_shortened: usize,
    pub packets: usize,
    pub flows: usize,
    pub duration_s: f64,
    /// `None` (JSON null) when the replay lasts no time (one timestamp):
    /// no rate to take.
    pub mean_pps: Option<f64>,
    /// Mean packets per core per 1 s window; `None` as `mean_pps`.
    pub packets_per_core_window: Option<f64>,
}

/// The whole comparison, as printed and as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub trace: String,
    pub trace_stats: TraceStats,
    pub config: SimConfig,
    pub replay: ReplaySummary,
    /// How the variances are computed.
    pub metric: &'static str,
    pub policies: Vec<PolicyResult>,
}

pub const METRIC: &str = "per window (config.window_s, 1 s by default): population variance of (count / mean count) over servers \
(server_variance) or over all cores of all servers (core_variance); mean over complete windows; a fraction";

/// Replays `trace` under each policy. `progress` is called before each policy.
pub fn simulate(
    trace_name: &str,
    trace: &Trace,
    config: SimConfig,
    policies: &[Policy],
    mut progress: impl FnMut(usize, Policy),
) -> Result<SimReport, SimError> {
    config.validate()?;
    let max_gap_ns = (config.max_gap_s * 1e9) as u64;
    let replay = Replay::new(trace, config.speedup, config.amplify, max_gap_ns)?;
    let sim = Simulator::new(&replay, config.clone())?;
    let mut results = Vec::new();
    for (i, &p) in policies.iter().enumerate() {
        progress(i, p);
        results.push(sim.run(p)?);
    }
    let duration_s = replay.duration_ns() as f64 / 1e9;
    let n_cores = (config.servers * config.cores) as f64;
    let mean_pps = (duration_s > 0.0).then(|| replay.packets.len() as f64 / duration_s);
    Ok(SimReport {
        trace: trace_name.to_string(),
        trace_stats: trace.stats.clone(),
        replay: ReplaySummary {
            speedup: config.speedup,
            amplify: config.amplify,
            gaps_shortened: replay.gaps_shortened,
            packets: replay.packets.len(),
            flows: replay.flows.len(),
            duration_s,
            mean_pps,
            packets_per_core_window: mean_pps.map(|r| r / n_cores),
        },
        config,
        metric: METRIC,
        policies: results,
    })
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "clap")]
    #[test]
    fn sim_config_flags_default_to_the_library_defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            config: SimConfig,
        }
        assert_eq!(Flags::parse_from(["t"]).config, SimConfig::default());
        let set = Flags::parse_from(["t", "--servers", "8", "--max-gap", "2", "--window", "0.5"]);
        assert_eq!(
            (
                set.config.servers,
                set.config.max_gap_s,
                set.config.window_s
            ),
            (8, 2.0, 0.5)
        );
    }

    use super::*;

    #[test]
    fn named_policies_expand_all_and_drop_repeats() {
        assert_eq!(Policy::named(&["all"]), Some(Policy::ALL.to_vec()));
        assert_eq!(
            Policy::named(&["rr", "crossrss-plus", "rr"]),
            Some(vec![Policy::Rr, Policy::CrossrssPlus])
        );
        assert_eq!(Policy::named(&["pow2", "all"]).map(|p| p.len()), Some(6));
        assert_eq!(Policy::named(&["rr", "fastest"]), None);
        for p in Policy::ALL {
            assert_eq!(Policy::named(&[p.name()]), Some(vec![p]));
            assert!(!p.about().is_empty() && !p.about().ends_with('.'));
        }
    }

    #[test]
    fn variance_of_equal_counts_is_zero() {
        assert_eq!(normalized_variance([5u64, 5, 5, 5].into_iter()), Some(0.0));
        assert_eq!(normalized_variance([0u64, 0].into_iter()), None);
        // counts 0 and 2: x = 0 and 2, variance 1.
        assert_eq!(normalized_variance([0u64, 2].into_iter()), Some(1.0));
    }

    #[test]
    fn no_window_with_packets_is_absent_not_zero() {
        let empty = RunCounts {
            windows: Vec::new(),
            connections: 0,
            table_changes: 0,
        };
        let r = summarize("rr", &empty, 2, 2, 1.0);
        assert_eq!(r.core_variance, None);
        assert_eq!(r.server_variance, None);
        assert_eq!(r.core_variance_max, None);
        assert_eq!(r.peak_to_mean, None);
        assert_eq!(r.windows, 0);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["core_variance"].is_null(), "{json}");
        // Windows without a packet are skipped, not counted as balanced.
        let idle = RunCounts {
            windows: vec![vec![0; 4], vec![0; 4]],
            ..empty
        };
        assert_eq!(summarize("rr", &idle, 2, 2, 1.0).core_variance, None);
        assert_eq!(window_variances(&idle.windows, 2), None);
        let v = window_variances(&[vec![0, 0, 0, 0], vec![0, 2, 0, 2]], 2).unwrap();
        assert_eq!(v.windows, 1);
        assert_eq!(v.core_variance, 1.0);
        assert_eq!(v.server_variance, 0.0);
    }

    /// A trace of `packets` packets of one TCP flow, packet `i` at
    /// `ts_ns(i)`.
    pub(super) fn one_flow_trace(packets: u64, ts_ns: impl Fn(u64) -> u64) -> Trace {
        let tuple = FlowTuple::new(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            1000,
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            80,
            rss::L4Proto::Tcp,
        );
        let packets = (0..packets).map(|i| crate::trace::TracePacket {
            ts_ns: ts_ns(i),
            tuple,
        });
        let packets: Vec<_> = packets.collect();
        let stats = TraceStats {
            frames: packets.len(),
            ipv4: packets.len(),
            ..TraceStats::default()
        };
        Trace {
            link_type: 101,
            packets,
            stats,
        }
    }

    #[test]
    fn a_replay_that_lasts_no_time_has_no_rate() {
        let trace = one_flow_trace(3, |_| 5);
        let r = simulate(
            "one instant",
            &trace,
            SimConfig::default(),
            &[Policy::Rr],
            |_, _| {},
        )
        .unwrap();
        assert_eq!(r.replay.duration_s, 0.0);
        assert_eq!(r.replay.mean_pps, None);
        assert_eq!(r.replay.packets_per_core_window, None);
        // Its only (partial) window has packets: the variance is measured.
        assert_eq!(r.policies[0].windows, 1);
        assert!(r.policies[0].core_variance.is_some());
    }

    #[test]
    fn processed_at_capacity_reads_the_point_at_100_percent() {
        // Two cores, one of them idle half the time: at 100% offered load
        // the busy windows lose what exceeds the capacity.
        let w = vec![vec![10, 0], vec![5, 5]];
        let mut p = PolicyResult {
            name: "rr",
            server_variance: None,
            core_variance: None,
            core_variance_max: None,
            peak_to_mean: None,
            windows: 2,
            connections: 1,
            table_changes: 0,
            throughput: throughput_curve(&w, 1.0),
            core_totals: vec![15, 5],
        };
        // Capacity 5 per core and window: 5 + 0 + 5 + 5 of 20 offered.
        assert_eq!(p.processed_at_capacity(), Some(0.75));
        p.throughput.clear();
        assert_eq!(p.processed_at_capacity(), None);
    }

    #[test]
    fn throughput_never_exceeds_offered_or_capacity() {
        let w = vec![vec![10, 0, 5, 5], vec![5, 5, 5, 5]];
        for p in throughput_curve(&w, 1.0) {
            assert!(p.processed_pps <= p.offered_pps + 1e-9);
            assert!(p.processed_pps <= 20.0 + 1e-9);
        }
    }
}
