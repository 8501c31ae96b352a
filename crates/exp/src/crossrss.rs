//! `steer exp crossrss` and `steer lb run`: live connections through the XDP
//! load balancer, one policy after another, measured from the datapath
//! counters.
//!
//! Per policy: a fresh controller (same lab, same backends, asking the
//! backends' agents over HTTP), clients opening
//! a mix of short and long TCP connections for `seconds`, and a sampler that
//! reads every backend's software-RSS per-queue counters once per second.
//! The metrics are `steer lb sim`'s (`lb::sim::normalized_variance`): per
//! 1 s window, each count divided by the window's mean, population variance,
//! over the backends (`server_variance`) and over all queues of all
//! backends (`core_variance`), averaged over the windows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lab::Host;
use serde::Serialize;

use lbxdp::control::{ControlLoop, LivePolicy, LoopSummary};
use lbxdp::live::{queue_counts, LiveLab, LiveSpec, SERVICE_PORT};
use lbxdp::maps;
use lbxdp::traffic::{ConnShape, Servers, Workload, WorkloadResult};
use lbxdp::LbXdpError;
use plot::text::Text;

use crate::experiment::{Experiment, Report};
use crate::ExpError;

mod text;
pub use text::FirstRepetition;

/// Parameters of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct CrossRssParams {
    #[serde(flatten)]
    pub load: LiveLoad,
    pub buckets: usize,
    pub clients: u32,
    pub short_bytes: u64,
    pub long_bytes: u64,
    pub policies: Vec<LivePolicy>,
    /// Repetitions; each runs every policy in turn (the order rotates by one
    /// policy per repetition, so no policy always follows the same one).
    pub repetitions: u32,
    pub seed: u64,
    pub quick: bool,
}

/// The lab and the load of a live run: what `steer exp crossrss` and
/// `steer lb run` set on their command lines.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LiveLoad {
    /// Backends behind the load balancer.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 4))]
    pub backends: u32,
    /// Software RSS queues ("cores") per backend.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 4))]
    pub queues: u32,
    /// Seconds of traffic per policy.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10.0))]
    pub seconds: f64,
    /// Controller / agent report rate (Hz).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10.0))]
    pub rate_hz: f64,
    /// Connection threads per client namespace (2 client namespaces): the
    /// connections in flight, and so how many new ones arrive per interval.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(1..=64)))]
    pub workers: u32,
    /// Every N-th connection of a worker is long (4 MB paced), the others
    /// 20 KB.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(1..=1000)))]
    pub long_every: u32,
}

impl Default for LiveLoad {
    fn default() -> Self {
        LiveLoad {
            backends: 4,
            queues: 4,
            seconds: 10.0,
            rate_hz: 10.0,
            workers: 4,
            long_every: 4,
        }
    }
}

impl LiveLoad {
    /// The experiment under this load for `policies`, `repetitions` times.
    pub fn params(self, policies: Vec<LivePolicy>, repetitions: u32) -> CrossRssParams {
        CrossRssParams {
            load: self,
            policies,
            repetitions,
            ..Default::default()
        }
    }
}

impl Default for CrossRssParams {
    fn default() -> Self {
        CrossRssParams {
            load: LiveLoad::default(),
            buckets: 128,
            clients: 2,
            short_bytes: 20_000,
            long_bytes: 4_000_000,
            policies: LivePolicy::ALL.to_vec(),
            repetitions: 3,
            seed: 0,
            quick: false,
        }
    }
}

impl CrossRssParams {
    /// Refuses a run that would measure nothing.
    pub fn check(&self) -> Result<(), ExpError> {
        crate::refuse_if(
            self.repetitions == 0 || self.policies.is_empty(),
            "at least one repetition and one policy (nothing would be measured)",
        )
    }

    /// The line a run starts with.
    pub fn progress_header(&self) -> String {
        let names: Vec<&str> = self.policies.iter().map(|p| p.name()).collect();
        format!(
            "crossrss: {} backends x {} queues, {} for {} s each, {} repetitions",
            self.load.backends,
            self.load.queues,
            names.join(", "),
            self.load.seconds,
            self.repetitions
        )
    }

    /// The `--quick` variant: 2 repetitions of 3 s per policy (about 75 s
    /// in all, lab included).
    pub fn quick(mut self) -> Self {
        self.load.seconds = 3.0;
        self.repetitions = self.repetitions.min(2);
        self.quick = true;
        self
    }

    fn workload(&self) -> Workload {
        Workload {
            workers: self.load.workers,
            duration: Duration::from_secs_f64(self.load.seconds),
            short: ConnShape {
                bytes: self.short_bytes,
                chunk: 64 * 1024,
                pause: Duration::ZERO,
            },
            // A long connection sends in 32 KB chunks, 5 ms apart: it lives
            // across many controller intervals.
            long: ConnShape {
                bytes: self.long_bytes,
                chunk: 32 * 1024,
                pause: Duration::from_millis(5),
            },
            long_every: self.load.long_every,
        }
    }
}

/// One policy's live result.
#[derive(Debug, Clone, Serialize)]
pub struct LivePolicyResult {
    pub name: &'static str,
    /// Mean over 1 s windows of the normalized variance across all queues
    /// of all backends (fraction; the paper's metric); `None` (JSON null)
    /// when no window had a packet.
    pub core_variance: Option<f64>,
    /// Same across backends.
    pub server_variance: Option<f64>,
    /// Windows with packets (the ones the means are over).
    pub windows: usize,
    /// Every window's per-queue packet counts (backend-major).
    pub window_counts: Vec<Vec<u64>>,
    /// Client payload acknowledged by backends, Mbit/s.
    pub throughput_mbit: f64,
    /// Packets the load balancer forwarded per second.
    pub lb_packets_per_s: f64,
    pub connections: u64,
    pub failures: u64,
    pub errors: Vec<String>,
    /// Connections answered per backend.
    pub per_backend: Vec<u64>,
    pub controller: LoopSummary,
}

/// Mean and 95% confidence half-width (Student t) over the repetitions.
pub use stats::Stat;

/// One policy over all repetitions: the means (the fields the bench matrix
/// reads), the statistics and every repetition's raw result.
#[derive(Debug, Clone, Serialize)]
pub struct PolicySummary {
    pub name: &'static str,
    /// Means over the repetitions; `None` (JSON null) unless every
    /// repetition measured it.
    pub core_variance: Option<f64>,
    pub server_variance: Option<f64>,
    /// `core_variance` over round robin's (`rr`) in the same run, both
    /// means over the same repetitions; `None` without an `rr` policy or a
    /// variance on either side.
    pub core_variance_vs_rr: Option<f64>,
    pub throughput_mbit: f64,
    pub lb_packets_per_s: f64,
    /// Sums over the repetitions.
    pub connections: u64,
    pub failures: u64,
    pub stats: PolicyStats,
    /// Every repetition's result, with its per-window per-queue counts.
    pub repetitions: Vec<LivePolicyResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyStats {
    pub n: usize,
    /// `None` unless every repetition measured it.
    pub core_variance: Option<Stat>,
    pub server_variance: Option<Stat>,
    pub throughput_mbit: Stat,
    pub failures: Stat,
}

impl PolicySummary {
    /// The summary of a policy's repetitions; an error without any.
    fn new(name: &'static str, reps: Vec<LivePolicyResult>) -> Result<Self, ExpError> {
        let stat = |f: fn(&LivePolicyResult) -> f64| {
            stats::stat(&reps.iter().map(f).collect::<Vec<f64>>())
                .ok_or_else(|| ExpError::Parameter(format!("policy {name} ran no repetition")))
        };
        // A repetition without a variance makes the policy's variance
        // absent: a mean over the others would hide the failed one.
        let measured = |f: fn(&LivePolicyResult) -> Option<f64>| {
            let xs: Option<Vec<f64>> = reps.iter().map(f).collect();
            xs.and_then(|xs| stats::stat(&xs))
        };
        let stats = PolicyStats {
            n: reps.len(),
            core_variance: measured(|r| r.core_variance),
            server_variance: measured(|r| r.server_variance),
            throughput_mbit: stat(|r| r.throughput_mbit)?,
            failures: stat(|r| r.failures as f64)?,
        };
        Ok(PolicySummary {
            name,
            core_variance: stats.core_variance.map(|s| s.mean),
            server_variance: stats.server_variance.map(|s| s.mean),
            core_variance_vs_rr: None,
            throughput_mbit: stats.throughput_mbit.mean,
            lb_packets_per_s: stat(|r| r.lb_packets_per_s)?.mean,
            connections: reps.iter().map(|r| r.connections).sum(),
            failures: reps.iter().map(|r| r.failures).sum(),
            stats,
            repetitions: reps,
        })
    }
}

/// `steer exp crossrss` ([`Experiment`]).
#[derive(Debug)]
pub struct CrossRssExperiment;

/// A crossrss run's result: its parameters and [`CrossRssOutput`], enveloped.
pub type CrossRssResult = Report<CrossRssExperiment>;

impl Experiment for CrossRssExperiment {
    const NAME: &'static str = "crossrss";
    const DRAWS: bool = true;
    type Params = CrossRssParams;
    type Output = CrossRssOutput;

    params_do_the_sizing!();

    fn run(
        params: &CrossRssParams,
        progress: &mut dyn FnMut(String),
    ) -> Result<CrossRssOutput, ExpError> {
        run(params, |rep, p| progress(p.progress_line(rep)))
    }

    fn text(report: &CrossRssResult) -> Text {
        report.render()
    }

    fn svg(report: &CrossRssResult) -> Option<String> {
        Some(svg(report))
    }

    fn succeeded(output: &CrossRssOutput) -> bool {
        output.failures == 0
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CrossRssOutput {
    pub policies: Vec<PolicySummary>,
    /// Sum of connection failures over all policies and repetitions (must be 0).
    pub failures: u64,
}

/// `policies` with each one's per-core variance over round robin's:
/// policies of one run are compared in it, where they shared the lab and
/// its noise (the CrossRSS paper's Fig. 2a orders policies by it).
fn against_round_robin(mut policies: Vec<PolicySummary>) -> Vec<PolicySummary> {
    let rr = policies
        .iter()
        .find(|p| p.name == LivePolicy::Rr.name())
        .and_then(|p| p.core_variance)
        .filter(|v| *v > 0.0);
    for p in &mut policies {
        p.core_variance_vs_rr = p.core_variance.zip(rr).map(|(v, rr)| v / rr);
    }
    policies
}

/// Per-core variance per policy, mean with 95% CI whiskers (SVG); a policy
/// whose variance was not measured in every repetition has no bar.
pub fn svg(result: &CrossRssResult) -> String {
    plot::BarChart::new(&format!(
        "steer exp crossrss: per-core variance, mean and 95% CI over {} repetitions",
        result.params.repetitions
    ))
    .x_label("policy")
    .y_label("per-core variance (%)")
    .groups(result.policies.iter().map(|p| p.name))
    .series(
        "per-core variance",
        result
            .policies
            .iter()
            .map(|p| {
                p.stats
                    .core_variance
                    .map(|s| plot::Value::with_ci(s.mean * 100.0, s.ci95.map(|c| c * 100.0)))
            })
            .collect(),
    )
    .note("whiskers: 95% CI")
    .svg()
}

/// Every backend's cumulative per-queue counts (backend-major), read from
/// the datapath (the software RSS counters), not from the agents: the
/// measurement must not depend on what the controller was told.
fn counts(backends: &[Host], queues: u32) -> Result<Vec<u64>, LbXdpError> {
    let mut all = Vec::with_capacity(backends.len() * queues as usize);
    for b in backends {
        all.extend(queue_counts(b, queues)?);
    }
    Ok(all)
}

/// Per-window packets per queue from cumulative readings taken 1 s apart.
fn window_deltas(readings: &[Vec<u64>]) -> Vec<Vec<u64>> {
    readings
        .windows(2)
        .map(|pair| {
            pair[1]
                .iter()
                .zip(&pair[0])
                .map(|(n, p)| n.saturating_sub(*p))
                .collect()
        })
        .collect()
}

/// One policy on a lab that is up, servers running.
pub fn run_policy(
    live: &LiveLab,
    params: &CrossRssParams,
    policy: LivePolicy,
) -> Result<LivePolicyResult, ExpError> {
    let ctl = ControlLoop::start(
        live.dp.clone(),
        policy,
        live.macs.clone(),
        params.buckets,
        live.reporters()?,
        params.load.rate_hz,
    )?;
    let (backends, queues) = (live.backends.clone(), live.spec.queues);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        // A failed read ends the sampling with the error: a window made
        // of zeros would read as idle cores.
        std::thread::spawn(move || -> Result<Vec<Vec<u64>>, LbXdpError> {
            let mut readings = vec![counts(&backends, queues)?];
            let mut next = Instant::now() + Duration::from_secs(1);
            while !stop.load(Ordering::Relaxed) {
                if Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                next += Duration::from_secs(1);
                readings.push(counts(&backends, queues)?);
            }
            Ok(window_deltas(&readings))
        })
    };
    let before = live.dp.stats(live.backends.len())?;
    let clients: Vec<String> = live.clients.iter().map(|c| c.netns.clone()).collect();
    let work: WorkloadResult =
        params
            .workload()
            .run(&clients, live.vip, SERVICE_PORT, live.backends.len())?;
    stop.store(true, Ordering::Relaxed);
    let windows = sampler.join().map_err(|_| ExpError::Program {
        program: "the backends' counter sampler".into(),
        detail: "it panicked".into(),
    })??;
    let after = live.dp.stats(live.backends.len())?;
    let controller = ctl.stop()?;
    let variances = lb::sim::window_variances(&windows, params.load.queues as usize);
    let fwd = after.get(maps::STAT_FORWARDED) - before.get(maps::STAT_FORWARDED);
    Ok(LivePolicyResult {
        name: policy.name(),
        core_variance: variances.map(|v| v.core_variance),
        server_variance: variances.map(|v| v.server_variance),
        windows: variances.map_or(0, |v| v.windows),
        window_counts: windows,
        throughput_mbit: work.bytes as f64 * 8.0 / work.seconds.max(1e-9) / 1e6,
        lb_packets_per_s: fwd as f64 / work.seconds.max(1e-9),
        connections: work.connections,
        failures: work.failures,
        errors: work.errors,
        per_backend: work.per_backend,
        controller,
    })
}

/// Builds the lab, runs every policy, tears the lab down.
fn run(
    params: &CrossRssParams,
    mut progress: impl FnMut(usize, &LivePolicyResult),
) -> Result<CrossRssOutput, ExpError> {
    params.check()?;
    let mut spec = LiveSpec::new(&lab::unique_name("xrss"));
    spec.backends = params.load.backends;
    spec.queues = params.load.queues;
    spec.buckets = params.buckets;
    spec.clients = params.clients;
    spec.seed = params.seed;
    let live = LiveLab::up(&spec)?;
    let ns: Vec<String> = live.backends.iter().map(|b| b.netns.clone()).collect();
    let _servers = Servers::start(&ns, live.vip, SERVICE_PORT)?;
    let np = params.policies.len();
    let mut reps: Vec<Vec<LivePolicyResult>> = vec![Vec::new(); np];
    for rep in 0..params.repetitions as usize {
        for j in 0..np {
            let i = (j + rep) % np;
            let r = run_policy(&live, params, params.policies[i])?;
            progress(rep, &r);
            reps[i].push(r);
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let policies: Vec<PolicySummary> = params
        .policies
        .iter()
        .zip(reps)
        .map(|(p, r)| PolicySummary::new(p.name(), r))
        .collect::<Result<_, _>>()?;
    let policies = against_round_robin(policies);
    Ok(CrossRssOutput {
        failures: policies.iter().map(|p| p.failures).sum(),
        policies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn rep(core: Option<f64>) -> LivePolicyResult {
        LivePolicyResult {
            name: "hash",
            core_variance: core,
            server_variance: core,
            windows: usize::from(core.is_some()),
            window_counts: Vec::new(),
            throughput_mbit: 1.0,
            lb_packets_per_s: 1.0,
            connections: 1,
            failures: 0,
            errors: Vec::new(),
            per_backend: Vec::new(),
            controller: LoopSummary::default(),
        }
    }

    #[test]
    fn a_backend_that_cannot_be_read_is_an_error_naming_it() {
        let ghost = Host {
            name: "b-ghost".into(),
            netns: "steer-no-such-netns".into(),
            dev: "veth-none".into(),
            ipv4: std::net::Ipv4Addr::LOCALHOST,
            ipv6: None,
        };
        match counts(&[ghost], 4) {
            Err(e @ LbXdpError::Counters { .. }) => {
                assert!(e.to_string().contains("b-ghost"), "{e}")
            }
            other => panic!("expected a counter error, got {other:?}"),
        }
    }

    /// The load's options sit at the top of the parameters' JSON, as
    /// before they were a type of their own.
    #[test]
    fn a_live_load_makes_the_parameters_and_their_json_keys() {
        let load = LiveLoad {
            backends: 2,
            ..LiveLoad::default()
        };
        let params = load.params(vec![LivePolicy::Hash], 1);
        assert_eq!(params.load.backends, 2);
        assert_eq!(params.policies, vec![LivePolicy::Hash]);
        assert_eq!(params.repetitions, 1);
        assert_eq!(params.buckets, CrossRssParams::default().buckets);
        let json = serde_json::to_value(&params).unwrap();
        assert_eq!(json["backends"], 2);
        assert_eq!(json["long_every"], 4);
        assert!(json.get("load").is_none());
    }

    #[test]
    fn nothing_to_run_is_an_error_before_any_lab() {
        let none = CrossRssParams {
            repetitions: 0,
            ..CrossRssParams::default()
        };
        assert!(matches!(run(&none, |_, _| {}), Err(ExpError::Parameter(_))));
        let no_policy = CrossRssParams {
            policies: Vec::new(),
            ..CrossRssParams::default()
        };
        assert!(matches!(
            run(&no_policy, |_, _| {}),
            Err(ExpError::Parameter(_))
        ));
    }

    #[test]
    fn windows_are_deltas_and_none_gives_no_variance() {
        let readings = vec![vec![0, 0, 0, 0], vec![1, 1, 1, 1], vec![1, 3, 1, 3]];
        let w = window_deltas(&readings);
        assert_eq!(w, vec![vec![1, 1, 1, 1], vec![0, 2, 0, 2]]);
        assert_eq!(window_deltas(&readings[..1]), Vec::<Vec<u64>>::new());
        assert_eq!(
            lb::sim::window_variances(&window_deltas(&readings[..1]), 2),
            None
        );
        // Counters that did not move: no window with packets, no variance.
        assert_eq!(
            lb::sim::window_variances(&window_deltas(&[vec![5; 4], vec![5; 4]]), 2),
            None
        );
    }

    #[test]
    fn a_repetition_without_variance_makes_the_policy_variance_absent() {
        let s = PolicySummary::new("hash", vec![rep(Some(0.5)), rep(None)]).unwrap();
        assert_eq!(s.core_variance, None);
        assert!(s.stats.core_variance.is_none());
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["core_variance"].is_null(), "{json}");
        let s = PolicySummary::new("hash", vec![rep(Some(0.5)), rep(Some(0.25))]).unwrap();
        assert_eq!(s.core_variance, Some(0.375));
        assert!(PolicySummary::new("hash", Vec::new()).is_err());
    }

    #[test]
    fn each_policy_is_compared_with_round_robin_of_the_same_run() {
        let summary = |name, v| PolicySummary::new(name, vec![rep(v)]).unwrap();
        let p = against_round_robin(vec![
            summary("rr", Some(0.5)),
            summary("crossrss-plus", Some(0.25)),
            summary("hash", None),
        ]);
        let vs: Vec<Option<f64>> = p.iter().map(|p| p.core_variance_vs_rr).collect();
        assert_eq!(vs, [Some(1.0), Some(0.5), None]);
        // Without round robin, or without its variance: no ratio, not 0.
        let p = against_round_robin(vec![summary("crossrss-plus", Some(0.25))]);
        assert_eq!(p[0].core_variance_vs_rr, None);
        let p = against_round_robin(vec![
            summary("rr", None),
            summary("crossrss-plus", Some(0.25)),
        ]);
        assert_eq!(p[1].core_variance_vs_rr, None);
    }

    pub(super) fn result(policies: Vec<PolicySummary>) -> CrossRssResult {
        let output = CrossRssOutput {
            policies,
            failures: 0,
        };
        Report::new(CrossRssParams::default(), output)
    }

    #[test]
    fn figure_shows_every_policy_with_its_interval() {
        let r = result(vec![
            PolicySummary::new("hash", vec![rep(Some(0.5)), rep(Some(0.25))]).unwrap(),
            PolicySummary::new("crossrss", vec![rep(Some(0.1)), rep(Some(0.2))]).unwrap(),
        ]);
        let o = plot::outline(&svg(&r)).unwrap();
        assert!(o.title.contains("per-core variance"), "{}", o.title);
        assert_eq!(o.y_label, "per-core variance (%)");
        assert_eq!(o.x_label, "policy");
        assert_eq!(o.legend, vec!["per-core variance"]);
        assert_eq!(o.x_ticks, vec!["hash", "crossrss"]);
        assert_eq!((o.bars, o.whiskers, o.not_available), (2, 2, 0));
        assert_eq!(o.note.as_deref(), Some("whiskers: 95% CI"));
    }

    #[test]
    fn figure_marks_an_unmeasured_policy_and_a_single_repetition() {
        let r = result(vec![
            PolicySummary::new("hash", vec![rep(Some(0.5)), rep(None)]).unwrap(),
            PolicySummary::new("crossrss", vec![rep(Some(0.1))]).unwrap(),
        ]);
        let o = plot::outline(&svg(&r)).unwrap();
        // hash: no bar, "n/a"; crossrss: a bar without an interval.
        assert_eq!((o.bars, o.whiskers, o.not_available), (1, 0, 1));
        assert_eq!(
            o.note.as_deref(),
            Some("n/a: not measured; whiskers: 95% CI")
        );
    }
}
