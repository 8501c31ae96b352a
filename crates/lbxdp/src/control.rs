//! The controller loop of the live load balancer: agents' reports in, map
//! writes out. The reports come from the backends' real agents over HTTP
//! (`crate::agents`: `GET /v1/load` and `GET /v1/rss?dev=`, asked from the
//! load balancer's namespace once per interval). The policies themselves are crate `lb`'s (`crossrss_table`,
//! `CrossRssPlus`, `Maglev`); this module only decides which reports count
//! (validation, staleness) and copies the result into the data plane's maps
//! (`maps::Datapath`), once per interval.
//!
//! - A report is checked with `AgentReport::validate` (lb): a malformed or
//!   impossible one (negative, non-finite or absurd load, wrong bucket
//!   count, core out of range, unknown or duplicate server id) is refused,
//!   counted in [`Controller::rejected`], and leaves its agent as if it had
//!   not reported.
//! - An agent whose last accepted report is older than `stale_after` is
//!   stale: its backend is marked unhealthy in map `backends` (it keeps its
//!   established connections; the connection table never moves them) and
//!   buckets the policy would give it go by plain hashing among the healthy
//!   backends, until it reports again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lb::{AgentReport, BucketTable, CrossRssPlus, Maglev, PlusParams};
use serde::Serialize;

use crate::agents::{Pollers, Reporters, Round, AGENT_TIMEOUT};
use crate::error::LbXdpError;
use crate::maps::{self, BackendEntry, Datapath, Mode};

/// The policies the live data plane runs (names as in `steer lb sim`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LivePolicy {
    /// Per-connection round robin over healthy backends (per CPU).
    Rr,
    /// Plain hashing: bucket -> healthy backend by a fixed mix of the bucket.
    Hash,
    /// Maglev consistent hashing of the Toeplitz hash (65,537 entries).
    Maglev,
    /// The published CrossRSS controller.
    CrossRss,
    /// Steer's controller (docs/crossrss.md).
    CrossRssPlus,
}

impl LivePolicy {
    pub const ALL: [LivePolicy; 5] = [
        LivePolicy::Rr,
        LivePolicy::Hash,
        LivePolicy::Maglev,
        LivePolicy::CrossRss,
        LivePolicy::CrossRssPlus,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LivePolicy::Rr => "rr",
            LivePolicy::Hash => "hash",
            LivePolicy::Maglev => "maglev",
            LivePolicy::CrossRss => "crossrss",
            LivePolicy::CrossRssPlus => "crossrss-plus",
        }
    }

    /// One line on what the policy does (the help of `--policy NAME`).
    pub fn about(self) -> &'static str {
        match self {
            LivePolicy::Rr => "Per-connection round robin over healthy backends",
            LivePolicy::Hash => "Plain hashing of the bucket to a healthy backend",
            LivePolicy::Maglev => "Maglev consistent hashing",
            LivePolicy::CrossRss => "The published CrossRSS controller",
            LivePolicy::CrossRssPlus => "Steer's controller (docs/crossrss.md)",
        }
    }

    /// The policies `names` name, in order, each once: a policy's
    /// [`name`](Self::name), or `all` ([`lb::sim::Policy::ALL_NAME`]) for
    /// every policy. None when a name names no policy.
    pub fn named<S: AsRef<str>>(names: &[S]) -> Option<Vec<LivePolicy>> {
        lb::sim::pick_named(&LivePolicy::ALL, LivePolicy::name, names)
    }

    /// What `--policy` takes: `all`, then each policy's name with its
    /// [`about`](Self::about) as help; [`named`](Self::named) reads them.
    #[cfg(feature = "clap")]
    pub fn names_parser() -> clap::builder::PossibleValuesParser {
        use clap::builder::PossibleValue;
        let all = PossibleValue::new(lb::sim::Policy::ALL_NAME).help("Every policy below");
        let each = LivePolicy::ALL.map(|p| PossibleValue::new(p.name()).help(p.about()));
        clap::builder::PossibleValuesParser::new(std::iter::once(all).chain(each))
    }

    fn mode(self) -> Mode {
        match self {
            LivePolicy::Rr => Mode::RoundRobin,
            LivePolicy::Maglev => Mode::Ring,
            LivePolicy::CrossRssPlus => Mode::Plus,
            LivePolicy::Hash | LivePolicy::CrossRss => Mode::Table,
        }
    }
}

/// What one interval did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepInfo {
    pub epoch: u32,
    /// Backends that may take new connections.
    pub healthy: Vec<u32>,
    /// Reports refused in this interval, with the reason.
    pub rejected: Vec<String>,
    /// Buckets whose backend changed.
    pub table_changes: usize,
}

/// The controller of one load balancer.
pub struct Controller {
    dp: Arc<Datapath>,
    policy: LivePolicy,
    macs: Vec<[u8; 6]>,
    buckets: usize,
    stale_after: Duration,
    last_seen: Vec<Option<Instant>>,
    bucket_cores: Vec<Option<Vec<u32>>>,
    healthy: Vec<bool>,
    written_health: Option<Vec<bool>>,
    ring_for: Option<Vec<u32>>,
    table: Option<BucketTable>,
    plus: CrossRssPlus,
    bucket_prev: Vec<(u64, u64)>,
    epoch: u32,
    rejected: u64,
}

/// The "plain hashing" choice for `bucket` among `healthy` backends.
pub fn plain_hash(bucket: usize, healthy: &[u32]) -> Option<u32> {
    if healthy.is_empty() {
        return None;
    }
    let h = lb::rng::mix64(bucket as u64 ^ 0x9e37_79b9_7f4a_7c15);
    Some(healthy[(h % healthy.len() as u64) as usize])
}

impl Controller {
    /// A controller for backends with these MACs (slot = server id) and
    /// `buckets` buckets; an agent is stale after `stale_after` without an
    /// accepted report.
    pub fn new(
        dp: Arc<Datapath>,
        policy: LivePolicy,
        macs: Vec<[u8; 6]>,
        buckets: usize,
        stale_after: Duration,
    ) -> Result<Controller, LbXdpError> {
        if macs.is_empty() || macs.len() > maps::MAX_BACKENDS {
            return Err(LbXdpError::config(format!(
                "{} backends: 1..={} supported",
                macs.len(),
                maps::MAX_BACKENDS
            )));
        }
        let n = macs.len();
        let prev = dp.bucket_counters(buckets)?;
        Ok(Controller {
            dp,
            policy,
            macs,
            buckets,
            stale_after,
            last_seen: vec![None; n],
            bucket_cores: vec![None; n],
            healthy: vec![false; n],
            written_health: None,
            ring_for: None,
            table: None,
            plus: CrossRssPlus::new(buckets, PlusParams::default()),
            bucket_prev: prev,
            epoch: 0,
            rejected: 0,
        })
    }

    pub fn policy(&self) -> LivePolicy {
        self.policy
    }

    /// Reports refused since the start.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// One interval: take `reports` (any order, possibly malformed), decide
    /// who is healthy, compute the policy's table and write the maps.
    pub fn step(&mut self, reports: &[AgentReport], now: Instant) -> Result<StepInfo, LbXdpError> {
        let n = self.macs.len();
        let mut info = StepInfo::default();
        let mut fresh: Vec<AgentReport> = Vec::new();
        for r in reports {
            let verdict = if r.server as usize >= n {
                Err(format!("server {}: no such backend (0..{n})", r.server))
            } else if fresh.iter().any(|f| f.server == r.server) {
                Err(lb::ReportError::DuplicateServer(r.server).to_string())
            } else {
                r.validate(self.buckets).map_err(|e| e.to_string())
            };
            match verdict {
                Ok(()) => {
                    let s = r.server as usize;
                    self.last_seen[s] = Some(now);
                    if self.bucket_cores[s].as_ref() != Some(&r.bucket_cores) {
                        self.dp.write_bucket_cores(r.server, &r.bucket_cores)?;
                        self.bucket_cores[s] = Some(r.bucket_cores.clone());
                    }
                    fresh.push(r.clone());
                }
                Err(reason) => {
                    self.rejected += 1;
                    info.rejected.push(reason);
                }
            }
        }
        for s in 0..n {
            self.healthy[s] = self.last_seen[s]
                .is_some_and(|t| now.saturating_duration_since(t) <= self.stale_after);
        }
        // Only reports of healthy agents feed the policy (a refused report
        // does not; an accepted one this interval is fresh by definition).
        fresh.retain(|r| self.healthy[r.server as usize]);
        let healthy: Vec<u32> = (0..n as u32)
            .filter(|&s| self.healthy[s as usize])
            .collect();
        info.healthy = healthy.clone();
        if self.written_health.as_ref() != Some(&self.healthy) {
            let entries: Vec<BackendEntry> = self
                .macs
                .iter()
                .zip(&self.healthy)
                .map(|(&mac, &healthy)| BackendEntry { mac, healthy })
                .collect();
            self.dp.set_backends(&entries)?;
            self.written_health = Some(self.healthy.clone());
        }

        let counters = self.dp.bucket_counters(self.buckets)?;
        let mut new_load = vec![0.0; self.buckets];
        let mut new_conns = 0.0;
        for (b, (now_c, prev)) in counters.iter().zip(&self.bucket_prev).enumerate() {
            new_conns += now_c.0.saturating_sub(prev.0) as f64;
            new_load[b] = now_c.1.saturating_sub(prev.1) as f64;
        }
        self.bucket_prev = counters;

        let fallback = |b: usize| plain_hash(b, &healthy).unwrap_or(0);
        let table: Option<BucketTable> = match self.policy {
            LivePolicy::Rr => None,
            LivePolicy::Maglev => {
                if !healthy.is_empty() && self.ring_for.as_ref() != Some(&healthy) {
                    let ring = Maglev::new(&healthy, maps::RING_SIZE)
                        .map_err(|e| LbXdpError::config(e.to_string()))?;
                    self.dp.write_ring(ring.entries())?;
                    self.ring_for = Some(healthy.clone());
                }
                None
            }
            LivePolicy::Hash => Some(BucketTable::new((0..self.buckets).map(fallback).collect())),
            LivePolicy::CrossRss if !fresh.is_empty() => {
                Some(lb::crossrss_table(&fresh, self.buckets)?)
            }
            LivePolicy::CrossRssPlus if !fresh.is_empty() => {
                let plus = self.plus.update(&fresh, &new_load, new_conns)?;
                self.dp.write_plus(&plus)?;
                self.dp.reset_core_taken(n)?;
                Some(plus.table)
            }
            // No fresh report: plain hashing among whoever is healthy.
            _ => Some(BucketTable::new((0..self.buckets).map(fallback).collect())),
        };
        if let Some(t) = table {
            let entries: Vec<u32> = t
                .entries()
                .iter()
                .enumerate()
                .map(|(b, &s)| {
                    if self.healthy.get(s as usize) == Some(&true) {
                        s
                    } else {
                        fallback(b)
                    }
                })
                .collect();
            let t = BucketTable::new(entries);
            info.table_changes = self
                .table
                .as_ref()
                .map_or(t.len(), |old| t.changed_from(old));
            self.dp.write_buckets(t.entries())?;
            self.table = Some(t);
        }
        self.epoch = self.epoch.wrapping_add(1);
        info.epoch = self.epoch;
        self.dp.set_mode(self.policy.mode(), self.epoch)?;
        Ok(info)
    }
}

/// What a [`ControlLoop`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoopSummary {
    pub steps: u64,
    pub rejected: u64,
    pub table_changes: u64,
    /// Steps in which some backend was unhealthy.
    pub degraded_steps: u64,
    /// Agent answers that were failures (unreachable, timed out, refused,
    /// malformed): each counts as no report.
    pub agent_failures: u64,
    /// (interval, agent) pairs without any answer (the agent's poller
    /// still waiting for it).
    pub agent_silent: u64,
    /// The first distinct agent failures, for the log.
    pub agent_errors: Vec<String>,
    pub errors: Vec<String>,
}

impl LoopSummary {
    fn count(&mut self, round: &Round) {
        self.agent_failures += round.failures.len() as u64;
        self.agent_silent += round.silent as u64;
        for f in &round.failures {
            if self.agent_errors.len() < 10 && !self.agent_errors.contains(f) {
                self.agent_errors.push(f.clone());
            }
        }
    }
}

/// The controller on a thread, one step every `1/rate_hz`, with the
/// agents' pollers (`crate::agents::Pollers`).
pub struct ControlLoop {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<LoopSummary>>,
    injected: Arc<std::sync::Mutex<Vec<AgentReport>>>,
}

impl ControlLoop {
    /// Runs the first step at once (so backends whose agents answer are
    /// healthy when this returns), then keeps stepping on a thread.
    pub fn start(
        dp: Arc<Datapath>,
        policy: LivePolicy,
        macs: Vec<[u8; 6]>,
        buckets: usize,
        agents: Reporters,
        rate_hz: f64,
    ) -> Result<ControlLoop, LbXdpError> {
        if !(rate_hz.is_finite() && rate_hz > 0.0 && rate_hz <= 1000.0) {
            return Err(LbXdpError::config(format!(
                "rate {rate_hz} Hz: use (0, 1000]"
            )));
        }
        let interval = Duration::from_secs_f64(1.0 / rate_hz);
        let stale_after = (interval * 3).max(Duration::from_millis(300));
        let n = macs.len();
        let mut ctl = Controller::new(dp, policy, macs, buckets, stale_after)?;
        let mut pollers = Pollers::start(agents, interval)?;
        // The first round may wait for both requests of every agent; later
        // rounds wait at most 90% of an interval (less if every agent
        // asked answers sooner, the usual case), so the loop keeps its rate
        // whatever the agents do, while a loaded host's slow answers still
        // count in their interval (a silent agent goes stale after
        // `stale_after`).
        let first = pollers.collect(AGENT_TIMEOUT * 2);
        let wait = interval.mul_f64(0.9).min(AGENT_TIMEOUT * 2);
        ctl.step(&first.reports, Instant::now())?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let injected = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, inj) = (stop.clone(), injected.clone());
        let handle = std::thread::Builder::new()
            .name("lb-controller".into())
            .spawn(move || {
                let mut sum = LoopSummary {
                    steps: 1,
                    ..Default::default()
                };
                sum.count(&first);
                let mut next = Instant::now() + interval;
                while !s.load(std::sync::atomic::Ordering::Relaxed) {
                    let now = Instant::now();
                    if now < next {
                        std::thread::sleep((next - now).min(Duration::from_millis(20)));
                        continue;
                    }
                    next += interval;
                    let round = pollers.collect(wait);
                    sum.count(&round);
                    let mut reports = round.reports;
                    if let Ok(mut extra) = inj.lock() {
                        reports.append(&mut extra);
                    }
                    match ctl.step(&reports, Instant::now()) {
                        Ok(info) => {
                            sum.steps += 1;
                            sum.table_changes += info.table_changes as u64;
                            if info.healthy.len() < n {
                                sum.degraded_steps += 1;
                            }
                        }
                        Err(e) => {
                            if sum.errors.len() < 10 {
                                sum.errors.push(e.to_string());
                            }
                        }
                    }
                    sum.rejected = ctl.rejected();
                }
                sum
            })
            .map_err(|e| LbXdpError::io("spawn controller", e))?;
        Ok(ControlLoop {
            stop,
            handle: Some(handle),
            injected,
        })
    }

    /// Adds a report to the next step, next to the agents' (tests use it
    /// for malformed and impossible reports that a real agent never sends).
    pub fn inject(&self, report: AgentReport) {
        if let Ok(mut v) = self.injected.lock() {
            v.push(report);
        }
    }

    /// Stops the loop and returns what it did; an error when its thread
    /// died (an empty summary would read as a loop that never had to act).
    pub fn stop(mut self) -> Result<LoopSummary, LbXdpError> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .ok_or_else(|| LbXdpError::config("the controller loop was already stopped"))?
            .join()
            .map_err(|_| LbXdpError::config("the controller loop's thread panicked"))
    }
}

impl Drop for ControlLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_policies_expand_all_and_drop_repeats() {
        assert_eq!(LivePolicy::named(&["all"]), Some(LivePolicy::ALL.to_vec()));
        assert_eq!(
            LivePolicy::named(&["rr", "crossrss-plus", "rr"]),
            Some(vec![LivePolicy::Rr, LivePolicy::CrossRssPlus])
        );
        assert_eq!(
            LivePolicy::named(&["maglev", "all"]).map(|p| p.len()),
            Some(5)
        );
        assert_eq!(LivePolicy::named(&["rr", "pow2"]), None);
        for p in LivePolicy::ALL {
            assert_eq!(LivePolicy::named(&[p.name()]), Some(vec![p]));
            assert!(!p.about().is_empty() && !p.about().ends_with('.'));
        }
    }
}
