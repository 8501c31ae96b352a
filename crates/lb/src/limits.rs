//! What limits any load-balancing policy on a trace (docs/crossrss.md, "What
//! limits the margin").
//!
//! The simulator's rule is the paper's: a connection stays on the core its
//! server's RSS gives it, for its whole life (papers/crossrss-core-aware-lb.txt,
//! Section 2: bucket changes cause "inter-core packet processing"). So the
//! per-core variance of a window (the metric of [`crate::sim`]) cannot fall
//! below what the window's connections allow, whoever places them:
//!
//! - [`indivisible_floor`]: a lower bound for one window from the
//!   connections' packet counts alone. No policy, online or offline, with
//!   or without the RSS constraint, goes below it.
//! - [`oracle`]: offline placements that know every connection's packets in
//!   every window and respect the RSS constraint (a connection in bucket `b`
//!   can only reach the core each server's indirection table gives `b`):
//!   greedy in arrival order ("clairvoyant online": what an online policy
//!   could do if it knew each new connection's future), and heaviest first
//!   followed by local search ("offline oracle"). Both are achievable
//!   placements, so they bound the optimum from above; the floor bounds it
//!   from below.
//! - [`WindowStats`]: how many connections share a window, how unequal they
//!   are (the effective number `N_eff = T^2 / sum x_j^2`) and the variance
//!   that placing them uniformly at random gives in expectation,
//!   `(k - 1) / N_eff` over `k` cores (each core's count is a sum of
//!   `x_j` Bernoulli(1/k) terms: variance `sum x_j^2 (1/k)(1 - 1/k)`, divided
//!   by the squared mean `(T/k)^2`).
//! - [`sweep_windows`]: all of it, and every policy, per window length.

use serde::Serialize;

use crate::error::SimError;
use crate::sim::{window_variances, Policy, Replay, SimConfig, Simulator};
use crate::trace::Trace;

mod text;

/// Packets of each connection (one-way 5-tuple, as the simulator's
/// connection table keys them) per measurement window, sparse.
#[derive(Debug, Clone)]
pub struct ConnectionLoads {
    /// Windows counted: the simulator's rule (complete windows only, unless
    /// the replay is shorter than one window).
    pub windows: usize,
    /// Per connection: (window, packets), windows ascending. Connections
    /// with no packet in a counted window are empty.
    pub loads: Vec<Vec<(u32, u64)>>,
    /// Connections in order of their first packet.
    pub arrival: Vec<u32>,
    /// Packets per window.
    pub totals: Vec<u64>,
}

impl ConnectionLoads {
    /// Splits `replay` into windows of `window_ns`.
    pub fn new(replay: &Replay, window_ns: u64) -> ConnectionLoads {
        let window_ns = window_ns.max(1);
        let windows = ((replay.duration_ns() / window_ns) as usize).max(1);
        let mut loads: Vec<Vec<(u32, u64)>> = vec![Vec::new(); replay.flows.len()];
        let mut arrival = Vec::new();
        let mut totals = vec![0u64; windows];
        for p in &replay.packets {
            let w = (p.ts_ns / window_ns) as usize;
            if w >= windows {
                break;
            }
            let conn = &mut loads[p.flow as usize];
            if conn.is_empty() {
                arrival.push(p.flow);
            }
            match conn.last_mut() {
                Some((last, n)) if *last as usize == w => *n += 1,
                _ => conn.push((w as u32, 1)),
            }
            totals[w] += 1;
        }
        ConnectionLoads {
            windows,
            loads,
            arrival,
            totals,
        }
    }

    /// Each window's connections' packet counts.
    fn per_window(&self) -> Vec<Vec<u64>> {
        let mut out = vec![Vec::new(); self.windows];
        for conn in &self.loads {
            for &(w, n) in conn {
                out[w as usize].push(n);
            }
        }
        out
    }
}

/// The least per-core variance (population variance of count / mean over
/// `cores` cores) of any placement of `loads` (packet counts of one window's
/// connections) that keeps every connection on one core.
///
/// Why it is a bound: whatever the placement, the `j` busiest cores hold at
/// least the `j` heaviest connections, so the sorted core loads have every
/// prefix sum at least the heaviest connections' prefix sum, and the same
/// total. Among such vectors the most equal one (least in the majorization
/// order, hence least variance, which is Schur-convex) is the water level:
/// core `i` at `max(h, a_i)` with `a_i` the `i`-th heaviest connection and
/// `h` the level that makes the total. Connections lighter than the level
/// count as fluid, so the bound is reached only when they pack exactly.
/// `None` when the window has no packet.
pub fn indivisible_floor(loads: &[u64], cores: usize) -> Option<f64> {
    let total: u64 = loads.iter().sum();
    if total == 0 || cores == 0 {
        return None;
    }
    let mut top: Vec<u64> = loads.to_vec();
    top.sort_unstable_by(|a, b| b.cmp(a));
    top.resize(cores, 0);
    // The smallest j with level h_j = (rest) / (cores - j) at least a_j.
    let mut above = 0u64;
    let mut level = total as f64 / cores as f64;
    for (j, &a) in top.iter().enumerate() {
        let h = (total - above) as f64 / (cores - j) as f64;
        if a as f64 <= h {
            level = h;
            break;
        }
        above += a;
    }
    let mean = total as f64 / cores as f64;
    let var = top
        .iter()
        .map(|&a| {
            let x = (a as f64).max(level) / mean - 1.0;
            x * x
        })
        .sum::<f64>()
        / cores as f64;
    Some(var)
}

/// The order an [`oracle`] places connections in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OracleOrder {
    /// First packet first, each placed once: an online policy that knows
    /// the future load of every connection (its own and those placed).
    Arrival,
    /// Heaviest first, then moves of single connections while any lowers
    /// the objective: the offline oracle.
    HeaviestThenLocalSearch,
}

/// Passes of local search at most (each pass tries every connection once;
/// it stops earlier when a pass moves nothing).
pub const LOCAL_SEARCH_PASSES: usize = 20;

/// An oracle placement and its per-window per-core counts (server-major,
/// as the simulator's).
#[derive(Debug, Clone)]
pub struct OraclePlacement {
    /// Connection -> global core (`server * cores + core`); `u32::MAX` for
    /// connections outside the counted windows.
    pub core_of: Vec<u32>,
    pub windows: Vec<Vec<u64>>,
    /// Local-search moves made.
    pub moves: usize,
}

/// Places every connection of `loads` on one of its candidate cores (one per
/// server: where that server's RSS puts it), minimising the mean over windows
/// of the per-core variance, which for window `w` with mean `m_w` is
/// `(1/k) sum_i (c_wi / m_w)^2 - 1`: adding `x_w` packets per window to core
/// `i` costs `sum_w (2 c_wi x_w + x_w^2) / m_w^2`.
pub fn oracle(sim: &Simulator, loads: &ConnectionLoads, order: OracleOrder) -> OraclePlacement {
    let mut state = OracleState::new(sim, loads);
    let mut sequence = loads.arrival.clone();
    if order == OracleOrder::HeaviestThenLocalSearch {
        let weight = |f: u32| state.weight(&loads.loads[f as usize]);
        sequence.sort_by(|&a, &b| weight(b).total_cmp(&weight(a)).then(a.cmp(&b)));
    }
    let mut core_of = vec![u32::MAX; loads.loads.len()];
    for &flow in &sequence {
        let core = state.best(flow);
        state.add(flow, core);
        core_of[flow as usize] = core as u32;
    }
    let mut moves = 0;
    if order == OracleOrder::HeaviestThenLocalSearch {
        for _ in 0..LOCAL_SEARCH_PASSES {
            let moved = state.improve(&sequence, &mut core_of);
            moves += moved;
            if moved == 0 {
                break;
            }
        }
    }
    OraclePlacement {
        core_of,
        windows: state.counts,
        moves,
    }
}

/// The per-window per-core counts an [`oracle`] builds, and the costs.
struct OracleState<'a> {
    sim: &'a Simulator<'a>,
    loads: &'a ConnectionLoads,
    /// `1 / m_w^2` per window (0 for a window without packets).
    inv_m2: Vec<f64>,
    counts: Vec<Vec<u64>>,
}

impl<'a> OracleState<'a> {
    fn new(sim: &'a Simulator<'a>, loads: &'a ConnectionLoads) -> Self {
        let cfg = sim.config();
        let n_cores = (cfg.servers * cfg.cores) as usize;
        let inv_m2 = loads
            .totals
            .iter()
            .map(|&t| {
                let m = t as f64 / n_cores as f64;
                if m > 0.0 {
                    1.0 / (m * m)
                } else {
                    0.0
                }
            })
            .collect();
        OracleState {
            sim,
            loads,
            inv_m2,
            counts: vec![vec![0u64; n_cores]; loads.windows],
        }
    }

    /// `sum_w (x_w / m_w)^2`: how much a connection alone weighs.
    fn weight(&self, conn: &[(u32, u64)]) -> f64 {
        conn.iter()
            .map(|&(w, x)| (x * x) as f64 * self.inv_m2[w as usize])
            .sum()
    }

    /// What adding `flow` to `core` adds to the objective.
    fn cost(&self, flow: u32, core: usize) -> f64 {
        self.loads.loads[flow as usize]
            .iter()
            .map(|&(w, x)| {
                let (c, x) = (self.counts[w as usize][core] as f64, x as f64);
                (2.0 * c * x + x * x) * self.inv_m2[w as usize]
            })
            .sum()
    }

    /// The cheapest of `flow`'s candidate cores (first on a tie).
    fn best(&self, flow: u32) -> usize {
        let cfg = self.sim.config();
        let (servers, cores) = (cfg.servers, cfg.cores as usize);
        let mut best = (f64::INFINITY, 0usize);
        for s in 0..servers {
            let core = s as usize * cores + self.sim.place(flow, s).1 as usize;
            let c = self.cost(flow, core);
            if c < best.0 {
                best = (c, core);
            }
        }
        best.1
    }

    fn add(&mut self, flow: u32, core: usize) {
        for &(w, x) in &self.loads.loads[flow as usize] {
            self.counts[w as usize][core] += x;
        }
    }

    fn remove(&mut self, flow: u32, core: usize) {
        for &(w, x) in &self.loads.loads[flow as usize] {
            self.counts[w as usize][core] -= x;
        }
    }

    /// One pass of local search: each connection moves to its best core
    /// when that strictly lowers the objective (so the search ends).
    /// Returns the moves made.
    fn improve(&mut self, sequence: &[u32], core_of: &mut [u32]) -> usize {
        let mut moved = 0;
        for &flow in sequence {
            let from = core_of[flow as usize] as usize;
            self.remove(flow, from);
            let to = self.best(flow);
            let to = if self.cost(flow, to) < self.cost(flow, from) - 1e-12 {
                to
            } else {
                from
            };
            self.add(flow, to);
            if to != from {
                core_of[flow as usize] = to as u32;
                moved += 1;
            }
        }
        moved
    }
}

/// Means over the windows with packets of what limits a placement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowStats {
    /// Windows with at least one packet (the ones the means are over).
    pub windows: usize,
    pub packets_per_core: f64,
    /// Connections with a packet in the window.
    pub active_connections: f64,
    /// Connections whose first packet is in the window.
    pub new_connections: f64,
    /// Share of the window's packets from connections that began in an
    /// earlier window (placed before anything about this window was known).
    pub carried_share: f64,
    /// `T^2 / sum x_j^2`: as many equal connections would be as unequal.
    pub effective_connections: f64,
    /// Expected per-core variance of uniformly random placement,
    /// `(k - 1) / N_eff`, per window, then averaged.
    pub random_expectation: f64,
    /// Mean of [`indivisible_floor`].
    pub floor: f64,
}

/// [`WindowStats`] of `loads` over `cores` cores in all.
pub fn window_stats(loads: &ConnectionLoads, cores: usize) -> Option<WindowStats> {
    let per_window = loads.per_window();
    let mut new = vec![0usize; loads.windows];
    let mut carried = vec![0u64; loads.windows];
    for conn in &loads.loads {
        if let Some(&(first, _)) = conn.first() {
            new[first as usize] += 1;
            for &(w, x) in &conn[1..] {
                carried[w as usize] += x;
            }
        }
    }
    let mut sum = [0f64; 7];
    let mut used = 0usize;
    for (w, conns) in per_window.iter().enumerate() {
        let total: u64 = conns.iter().sum();
        let Some(floor) = indivisible_floor(conns, cores) else {
            continue;
        };
        let t = total as f64;
        let squares: f64 = conns.iter().map(|&x| (x * x) as f64).sum();
        let n_eff = t * t / squares;
        let row = [
            t / cores as f64,
            conns.len() as f64,
            new[w] as f64,
            carried[w] as f64 / t,
            n_eff,
            (cores as f64 - 1.0) / n_eff,
            floor,
        ];
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v;
        }
        used += 1;
    }
    (used > 0).then(|| {
        let n = used as f64;
        WindowStats {
            windows: used,
            packets_per_core: sum[0] / n,
            active_connections: sum[1] / n,
            new_connections: sum[2] / n,
            carried_share: sum[3] / n,
            effective_connections: sum[4] / n,
            random_expectation: sum[5] / n,
            floor: sum[6] / n,
        }
    })
}

/// One policy's mean per-core variance at one window length.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PolicyVariance {
    pub name: &'static str,
    /// `None` (JSON null) when no window had a packet.
    pub core_variance: Option<f64>,
}

/// Every policy, the oracles and the floor at one window length.
#[derive(Debug, Clone, Serialize)]
pub struct WindowPoint {
    pub window_s: f64,
    /// `None` (JSON null) when no window had a packet.
    pub stats: Option<WindowStats>,
    /// Every policy's mean per-core variance.
    pub policies: Vec<PolicyVariance>,
    /// The clairvoyant online placement ([`OracleOrder::Arrival`]).
    pub clairvoyant_online: Option<f64>,
    /// The offline oracle ([`OracleOrder::HeaviestThenLocalSearch`]).
    pub oracle: Option<f64>,
    /// The least of `policies` other than the CrossRSS ones, and its name.
    pub best_baseline: Option<(&'static str, f64)>,
}

/// Runs `policies`, both oracles and the floor on `replay` for each window
/// length in `windows_s` (seconds); the rest of `config` is kept.
pub fn sweep_windows(
    replay: &Replay,
    config: &SimConfig,
    windows_s: &[f64],
    policies: &[Policy],
) -> Result<Vec<WindowPoint>, SimError> {
    windows_s
        .iter()
        .map(|&window_s| {
            let cfg = SimConfig {
                window_s,
                ..config.clone()
            };
            let sim = Simulator::new(replay, cfg.clone())?;
            let cores = cfg.cores as usize;
            let n_cores = cores * cfg.servers as usize;
            let mut results = Vec::new();
            for &p in policies {
                let run = sim.run_counts(p)?;
                let v = window_variances(&run.windows, cores).map(|v| v.core_variance);
                results.push(PolicyVariance {
                    name: p.name(),
                    core_variance: v,
                });
            }
            let loads = ConnectionLoads::new(replay, cfg.window_ns());
            let variance = |order| {
                window_variances(&oracle(&sim, &loads, order).windows, cores)
                    .map(|v| v.core_variance)
            };
            let best_baseline = results
                .iter()
                .filter(|p| !p.name.starts_with("crossrss"))
                .filter_map(|p| p.core_variance.map(|v| (p.name, v)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            Ok(WindowPoint {
                window_s,
                stats: window_stats(&loads, n_cores),
                clairvoyant_online: variance(OracleOrder::Arrival),
                oracle: variance(OracleOrder::HeaviestThenLocalSearch),
                policies: results,
                best_baseline,
            })
        })
        .collect()
}

/// A window sweep of one trace, as printed and as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub trace: String,
    /// The set-up; `window_s` is each point's instead.
    pub config: SimConfig,
    pub points: Vec<WindowPoint>,
}

/// Replays `trace` as [`crate::sim::simulate`] does and runs
/// [`sweep_windows`] on it.
pub fn sweep(
    trace_name: &str,
    trace: &Trace,
    config: SimConfig,
    windows_s: &[f64],
    policies: &[Policy],
) -> Result<SweepReport, SimError> {
    config.validate()?;
    let max_gap_ns = (config.max_gap_s * 1e9) as u64;
    let replay = Replay::new(trace, config.speedup, config.amplify, max_gap_ns)?;
    let points = sweep_windows(&replay, &config, windows_s, policies)?;
    Ok(SweepReport {
        trace: trace_name.to_string(),
        config,
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Least variance over every assignment of `loads` to `k` cores.
    fn brute_force(loads: &[u64], k: usize) -> f64 {
        let n = loads.len();
        let mut best = f64::INFINITY;
        for code in 0..k.pow(n as u32) {
            let mut c = vec![0u64; k];
            let mut x = code;
            for &l in loads {
                c[x % k] += l;
                x /= k;
            }
            let v = crate::sim::normalized_variance(c.into_iter()).unwrap();
            best = best.min(v);
        }
        best
    }

    #[test]
    fn floor_never_exceeds_the_best_placement() {
        let mut rng = crate::rng::SplitMix64::new(7);
        for _ in 0..300 {
            let n = 1 + rng.below(6) as usize;
            let k = 2 + rng.below(3) as usize;
            let loads: Vec<u64> = (0..n).map(|_| 1 + rng.below(20)).collect();
            let floor = indivisible_floor(&loads, k).unwrap();
            let best = brute_force(&loads, k);
            assert!(floor <= best + 1e-12, "{loads:?} on {k}: {floor} > {best}");
        }
    }

    #[test]
    fn floor_is_exact_when_connections_pack() {
        // One connection alone: all on one core of 4, variance 3.
        assert_eq!(indivisible_floor(&[10], 4), Some(3.0));
        // Equal connections, one per core: 0.
        assert_eq!(indivisible_floor(&[5, 5, 5, 5], 4), Some(0.0));
        // An elephant of 6 and small ones totalling 6 on 4 cores: the
        // elephant's core at 6, the rest at level 2: mean 3.
        let v = indivisible_floor(&[6, 2, 2, 1, 1], 4).unwrap();
        let want = ((6.0f64 / 3.0 - 1.0).powi(2) + 3.0 * (2.0f64 / 3.0 - 1.0).powi(2)) / 4.0;
        assert!((v - want).abs() < 1e-12, "{v} vs {want}");
        assert!((brute_force(&[6, 2, 2, 1, 1], 4) - want).abs() < 1e-12);
        assert_eq!(indivisible_floor(&[], 4), None);
        assert_eq!(indivisible_floor(&[0, 0], 4), None);
    }
}
