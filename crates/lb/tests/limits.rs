//! The limits analysis on a prefix of a shared trace: the floor bounds every
//! policy and both oracles, the oracles only use the cores RSS allows, every
//! packet is placed once, and a window sweep changes the window.

use lb::limits::{
    indivisible_floor, oracle, sweep_windows, window_stats, ConnectionLoads, OracleOrder,
};
use lb::sim::{window_variances, Replay, Simulator};
use lb::{Policy, SimConfig, Trace};

fn auckland_prefix() -> Trace {
    let p = testkit::shared_trace("libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap");
    let mut trace = Trace::open(&p).unwrap();
    trace.truncate(6_000);
    trace
}

#[test]
fn floor_bounds_every_policy_and_the_oracles() {
    let trace = auckland_prefix();
    let config = SimConfig::default();
    let replay = Replay::new(&trace, 1.0, 1, 10_000_000_000).unwrap();
    let sim = Simulator::new(&replay, config.clone()).unwrap();
    let loads = ConnectionLoads::new(&replay, config.window_ns());
    let stats = window_stats(&loads, 16).unwrap();
    let core_var = |windows: &[Vec<u64>]| window_variances(windows, 4).unwrap().core_variance;
    for policy in Policy::ALL {
        let run = sim.run_counts(policy).unwrap();
        // Same windows as the simulator's metric.
        assert_eq!(run.windows.len(), loads.windows, "{policy:?}");
        let v = core_var(&run.windows);
        assert!(
            stats.floor <= v + 1e-12,
            "{policy:?}: {v} < {}",
            stats.floor
        );
    }
    let online = oracle(&sim, &loads, OracleOrder::Arrival);
    let offline = oracle(&sim, &loads, OracleOrder::HeaviestThenLocalSearch);
    assert!(offline.moves > 0, "local search found nothing to improve");
    let hash = core_var(&sim.run_counts(Policy::Hash).unwrap().windows);
    let (v_online, v_offline) = (core_var(&online.windows), core_var(&offline.windows));
    assert!(stats.floor <= v_offline + 1e-12);
    assert!(v_offline < hash, "oracle {v_offline} vs hash {hash}");
    assert!(v_online < hash, "clairvoyant {v_online} vs hash {hash}");
    // Every packet in a counted window is placed once, on an allowed core.
    let placed: u64 = offline.windows.iter().flatten().sum();
    assert_eq!(placed, loads.totals.iter().sum::<u64>());
    for (flow, &core) in offline.core_of.iter().enumerate() {
        if loads.loads[flow].is_empty() {
            assert_eq!(core, u32::MAX);
            continue;
        }
        let allowed: Vec<u32> = (0..4)
            .map(|s| s * 4 + sim.place(flow as u32, s).1)
            .collect();
        assert!(allowed.contains(&core), "flow {flow} on {core}");
    }
    // The floor of each window, from the raw counts, matches the mean.
    let mut per_window = vec![Vec::new(); loads.windows];
    for conn in &loads.loads {
        for &(w, x) in conn {
            per_window[w as usize].push(x);
        }
    }
    let floors: Vec<f64> = per_window
        .iter()
        .filter_map(|c| indivisible_floor(c, 16))
        .collect();
    let mean = floors.iter().sum::<f64>() / floors.len() as f64;
    assert!((mean - stats.floor).abs() < 1e-12);
}

#[test]
fn sweep_measures_each_window_length() {
    let trace = auckland_prefix();
    let config = SimConfig::default();
    let replay = Replay::new(&trace, 1.0, 1, 10_000_000_000).unwrap();
    let points = sweep_windows(&replay, &config, &[0.5, 2.0], &Policy::ALL).unwrap();
    assert_eq!(points.len(), 2);
    let (short, long) = (points[0].stats.unwrap(), points[1].stats.unwrap());
    assert!(short.windows > long.windows);
    // Longer windows hold more packets per core.
    assert!(long.packets_per_core > 3.0 * short.packets_per_core);
    for p in &points {
        assert_eq!(p.policies.len(), Policy::ALL.len());
        let (name, best) = p.best_baseline.unwrap();
        assert!(!name.starts_with("crossrss"));
        assert!(p.stats.unwrap().floor <= best);
        assert!(p.oracle.unwrap() <= best, "{p:?}");
    }
    // A window outside the bounds is a typed error, not a panic.
    let bad = sweep_windows(&replay, &config, &[0.0], &Policy::ALL);
    assert!(matches!(bad, Err(lb::SimError::BadWindow(_))));
}
