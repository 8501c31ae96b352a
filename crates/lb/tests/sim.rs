//! The simulator end to end on short prefixes of the shared traces and on
//! synthetic traces.

use lb::sim::{Replay, Simulator};
use lb::trace::TracePacket;
use lb::{simulate, Policy, SimConfig, Trace, TraceStats};
use rss::{FlowTuple, L4Proto};

fn synthetic(flows: u32, packets_per_flow: u32) -> Trace {
    let mut packets = Vec::new();
    for f in 0..flows {
        let tuple = FlowTuple::new(
            format!("10.0.{}.{}", f / 250, f % 250 + 1).parse().unwrap(),
            1024 + f as u16,
            "192.168.0.1".parse().unwrap(),
            80,
            L4Proto::Tcp,
        );
        for i in 0..packets_per_flow {
            packets.push(TracePacket {
                ts_ns: u64::from(f) * 7_000_000 + u64::from(i) * 3_000_000,
                tuple,
            });
        }
    }
    packets.sort_by_key(|p| p.ts_ns);
    Trace {
        link_type: 101,
        packets,
        stats: TraceStats::default(),
    }
}

#[test]
fn simulator_places_like_each_servers_rss_config() {
    let trace = synthetic(50, 3);
    let replay = Replay::new(&trace, 1.0, 2, u64::MAX).unwrap();
    let sim = Simulator::new(&replay, SimConfig::default()).unwrap();
    for (id, tuple) in replay.flows.iter().enumerate() {
        for (s, config) in sim.server_configs().iter().enumerate() {
            let want = config.place(tuple).unwrap();
            let (bucket, core) = sim.place(id as u32, s as u32);
            assert_eq!((bucket, core), (want.index, want.cpu), "{tuple:?} on {s}");
        }
    }
}

#[test]
fn every_packet_is_counted_once_and_runs_are_deterministic() {
    let trace = synthetic(200, 20);
    let replay = Replay::new(&trace, 1.0, 1, u64::MAX).unwrap();
    let sim = Simulator::new(&replay, SimConfig::default()).unwrap();
    for policy in Policy::ALL {
        let a = sim.run(policy).unwrap();
        let b = sim.run(policy).unwrap();
        assert_eq!(a.core_totals, b.core_totals, "{policy:?}");
        assert_eq!(a.connections, 200);
        // Complete windows only: the trailing partial window is dropped.
        let counted: u64 = a.core_totals.iter().sum();
        let in_windows = replay
            .packets
            .iter()
            .filter(|p| p.ts_ns < a.windows as u64 * 1_000_000_000)
            .count();
        assert_eq!(counted as usize, in_windows, "{policy:?}");
    }
}

#[test]
fn amplification_shifts_addresses_and_keeps_packet_counts() {
    let trace = synthetic(10, 5);
    let replay = Replay::new(&trace, 4.0, 3, u64::MAX).unwrap();
    assert_eq!(replay.packets.len(), 150);
    assert_eq!(replay.flows.len(), 30);
    assert!(replay
        .flows
        .iter()
        .any(|f| f.src.to_string().starts_with("12.")));
    assert!(replay.packets.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    // Speedup 4: the replay lasts about a quarter of the capture.
    assert!(replay.duration_ns() <= trace.duration_ns() / 4 + 1);
}

#[test]
fn long_idle_gaps_are_shortened() {
    let mut trace = synthetic(2, 2);
    trace.packets[3].ts_ns += 86_400_000_000_000; // a day later
    let replay = Replay::new(&trace, 1.0, 1, 1_000_000_000).unwrap();
    assert_eq!(replay.gaps_shortened, 1);
    assert!(replay.duration_ns() < 2_000_000_000);
}

#[test]
fn bad_configs_are_errors() {
    let trace = synthetic(5, 2);
    for cfg in [
        SimConfig {
            servers: 0,
            ..SimConfig::default()
        },
        SimConfig {
            cores: 0,
            ..SimConfig::default()
        },
        SimConfig {
            buckets: 0,
            ..SimConfig::default()
        },
        SimConfig {
            amplify: 0,
            ..SimConfig::default()
        },
        SimConfig {
            speedup: f64::NAN,
            ..SimConfig::default()
        },
        SimConfig {
            speedup: -1.0,
            ..SimConfig::default()
        },
        SimConfig {
            rate_hz: 0.0,
            ..SimConfig::default()
        },
        SimConfig {
            max_gap_s: 0.0,
            ..SimConfig::default()
        },
    ] {
        assert!(simulate("t", &trace, cfg, &Policy::ALL, |_, _| {}).is_err());
    }
}

#[test]
fn plus_beats_baselines_on_an_auckland_prefix() {
    let p = testkit::shared_trace("libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap");
    let mut trace = Trace::open(&p).unwrap();
    trace.truncate(8_000);
    let cfg = SimConfig {
        speedup: 10.0,
        amplify: 16,
        ..SimConfig::default()
    };
    let report = simulate("auckland", &trace, cfg, &Policy::ALL, |_, _| {}).unwrap();
    let core = |name: &str| {
        report
            .policies
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .core_variance
            .expect("a replay with packets has a per-core variance")
    };
    for baseline in ["rr", "hash", "pow2", "maglev"] {
        assert!(
            core("crossrss-plus") < core(baseline),
            "plus {} vs {baseline} {}",
            core("crossrss-plus"),
            core(baseline)
        );
    }
}

/// The per-core variances `steer lb sim --trace FILE` gives (native rate,
/// every default: the settings of the bench matrix's lb-sim-order case) on
/// the two traffic-mix traces. CrossRssPlus's value is pinned so that a
/// change to its algorithm shows here and is made on purpose (docs/crossrss.md
/// records these numbers); the order is what lb-sim-order checks.
#[test]
fn native_rate_results_are_pinned_and_ordered() {
    let cases = [
        (
            "libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap",
            0.498_466_184_621_331_8,
        ),
        (
            "pcapplusplus_tls2_browsing_v4v6.pcap",
            5.275_490_086_143_429,
        ),
    ];
    for (file, plus_pinned) in cases {
        let trace = Trace::open(&testkit::shared_trace(file)).unwrap();
        let report = simulate(file, &trace, SimConfig::default(), &Policy::ALL, |_, _| {}).unwrap();
        let core = |name: &str| {
            report
                .policies
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| p.core_variance)
                .unwrap()
        };
        let plus = core("crossrss-plus");
        assert!(
            (plus - plus_pinned).abs() <= 1e-12 * plus_pinned,
            "{file}: crossrss-plus {plus:?}, pinned {plus_pinned:?}"
        );
        for baseline in ["rr", "hash", "pow2", "maglev"] {
            assert!(plus < core(baseline), "{file}: plus vs {baseline}");
        }
        assert!(core("crossrss") < core("hash"), "{file}: crossrss vs hash");
    }
}
