//! Every planned port, hashed by `rss::Predictor` with the full tuple, lands
//! on the planned queue and CPU: random keys (40 and 52 bytes and between),
//! IPv4 and IPv6, weighted tables, several queues per CPU, RPS, input
//! transforms. Plus the planner's promises: distinct CPUs while they last,
//! at most ceil(N / CPUs) per CPU, least-loaded first, skipped ports,
//! exhaustion.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use proptest::prelude::*;
use rss::{
    FlowTuple, HashFieldsByFlow, IndirectionTable, InputTransform, L4Proto, RssConfig, RssKey,
};
use srap::{plan, plan_from_config, PlanOptions, PortPredictor, PortRange, PortSet, SrapError};

/// The queues some port of Linux's default ephemeral range reaches.
fn reached_queues(p: &PortPredictor) -> BTreeSet<u32> {
    let range = PortRange::LINUX_DEFAULT;
    (range.low..=range.high)
        .map(|port| p.place(port).queue)
        .collect()
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A TCP predictor from 10.0.0.1 to 10.0.0.2:`port`.
fn predictor(config: &RssConfig, port: u16) -> PortPredictor {
    PortPredictor::new(
        config,
        addr("10.0.0.1"),
        addr("10.0.0.2"),
        port,
        L4Proto::Tcp,
    )
    .unwrap()
}

/// A TCP predictor from the lab's sender, 10.77.1.1, to its receiver's
/// iperf3 port, 10.77.1.2:5201.
fn lab_predictor(config: &RssConfig) -> PortPredictor {
    PortPredictor::new(
        config,
        addr("10.77.1.1"),
        addr("10.77.1.2"),
        5201,
        L4Proto::Tcp,
    )
    .unwrap()
}

/// `flows` TCP ports planned from 10.0.0.1 to 10.0.0.2:`port`, from the config.
fn plan_tcp(config: &RssConfig, port: u16, flows: usize, options: &PlanOptions) -> srap::Plan {
    plan_from_config(
        config,
        addr("10.0.0.1"),
        addr("10.0.0.2"),
        port,
        L4Proto::Tcp,
        flows,
        options,
    )
    .unwrap()
}

fn microsoft(queues: u32) -> RssConfig {
    RssConfig::ethtool_default(RssKey::microsoft(), queues, 128).unwrap()
}

/// Checks each entry against the reference model with the full tuple.
fn check_plan_against_rss(config: &RssConfig, p: &PortPredictor, plan: &srap::Plan) {
    let rss = rss::Predictor::new(config.clone()).unwrap();
    for e in &plan.entries {
        let flow = FlowTuple::new(p.local(), e.port, p.remote(), p.remote_port(), p.proto());
        let placed = rss.place(&flow).unwrap();
        assert_eq!(
            (placed.hash, placed.queue, placed.cpu),
            (e.hash, e.queue, e.cpu),
            "port {}",
            e.port
        );
    }
}

#[derive(Debug, Clone)]
struct Case {
    config: RssConfig,
    local: IpAddr,
    remote: IpAddr,
    remote_port: u16,
    proto: L4Proto,
}

fn case() -> impl Strategy<Value = Case> {
    let key = prop_oneof![
        proptest::collection::vec(any::<u8>(), 52),
        proptest::collection::vec(any::<u8>(), 40),
        proptest::collection::vec(any::<u8>(), 40..=64),
    ];
    let v4 =
        (any::<[u8; 4]>(), any::<[u8; 4]>()).prop_map(|(a, b)| (IpAddr::from(a), IpAddr::from(b)));
    let v6 = (any::<[u8; 16]>(), any::<[u8; 16]>())
        .prop_map(|(a, b)| (IpAddr::from(a), IpAddr::from(b)));
    let addrs = prop_oneof![v4, v6];
    let queues = 1u32..=16;
    (
        key,
        addrs,
        queues,
        any::<u16>(),
        prop_oneof![Just(64usize), Just(128), Just(100), Just(512)],
        any::<bool>(),
        1u32..=4,
        0u8..4,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |(
                key,
                (local, remote),
                queues,
                remote_port,
                size,
                weighted,
                per_cpu,
                transform,
                udp,
                seed,
            )| {
                let mut config =
                    RssConfig::ethtool_default(RssKey::new(key).unwrap(), queues, size).unwrap();
                if weighted {
                    let weights: Vec<u32> = (0..queues)
                        .map(|q| (seed >> (q % 60)) as u32 % 4 + u32::from(q == 0))
                        .collect();
                    config.indirection_table =
                        IndirectionTable::weighted(size, &weights, 0).unwrap();
                }
                // Several queues per CPU.
                config.queue_cpus = (0..queues).map(|q| q / per_cpu).collect();
                match transform {
                    1 => config.input_transform = InputTransform::SymXor,
                    2 => config.input_transform = InputTransform::SymOrXor,
                    3 => {
                        config.rps_cpus = (0..queues)
                            .map(|q| if q % 2 == 0 { vec![q, q + 100] } else { vec![] })
                            .collect()
                    }
                    _ => {}
                }
                let proto = if udp {
                    config.fields = HashFieldsByFlow::all_four_tuple();
                    L4Proto::Udp
                } else {
                    L4Proto::Tcp
                };
                Case {
                    config,
                    local,
                    remote,
                    remote_port,
                    proto,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn planned_ports_land_where_planned(case in case(), flows in 1usize..40, seed in any::<u64>()) {
        let p = PortPredictor::new(&case.config, case.local, case.remote, case.remote_port, case.proto).unwrap();
        let options = PlanOptions { seed: Some(seed), ..PlanOptions::default() };
        let plan = plan(&p, flows, &options).unwrap();
        prop_assert_eq!(plan.entries.len(), flows);
        check_plan_against_rss(&case.config, &p, &plan);
        // Distinct ports, all in range.
        let mut ports: Vec<u16> = plan.entries.iter().map(|e| e.port).collect();
        ports.sort_unstable();
        ports.dedup();
        prop_assert_eq!(ports.len(), flows);
        prop_assert!(plan.entries.iter().all(|e| PortRange::LINUX_DEFAULT.contains(e.port)));
        // Balanced over the reachable CPUs.
        let reachable = plan.cpus.len() - plan.unreachable_cpus.len();
        let per_cpu = plan.entries.iter().fold(BTreeMap::<u32, u32>::new(), |mut m, e| {
            *m.entry(e.cpu).or_default() += 1;
            m
        });
        prop_assert_eq!(per_cpu.len(), flows.min(reachable));
        if plan.unreachable_cpus.is_empty() {
            prop_assert_eq!(plan.max_per_cpu, plan.ideal_max_per_cpu);
        }
    }

    /// Several queues per CPU, no RPS: distinct queues while flows <=
    /// queues, and then at most ceil(N / Q) per queue and ceil(N / C) per CPU.
    #[test]
    fn distinct_queues_while_they_last(
        cpus in 1u32..=4,
        per_cpu in 2u32..=8,
        flows in 1usize..70,
        key in proptest::collection::vec(any::<u8>(), 40),
        seed in any::<u64>(),
    ) {
        let queues = cpus * per_cpu;
        let mut config = RssConfig::ethtool_default(RssKey::new(key).unwrap(), queues, 128).unwrap();
        config.queue_cpus = (0..queues).map(|q| q % cpus).collect();
        let p = lab_predictor(&config);
        // The promise is about queues a port reaches: a degenerate key (mostly
        // zero bytes) can leave one that no source port hashes to.
        prop_assume!(reached_queues(&p).len() == queues as usize);
        let options = PlanOptions { seed: Some(seed), ..PlanOptions::default() };
        let plan = plan(&p, flows, &options).unwrap();
        check_plan_against_rss(&config, &p, &plan);
        let count = |f: fn(&srap::PlanEntry) -> u32| plan.entries.iter().fold(BTreeMap::<u32, u32>::new(), |mut m, e| {
            *m.entry(f(e)).or_default() += 1;
            m
        });
        let (per_queue, per_cpu_n) = (count(|e| e.queue), count(|e| e.cpu));
        prop_assert_eq!(per_queue.len(), flows.min(queues as usize));
        prop_assert_eq!(plan.queues_used, flows.min(queues as usize));
        prop_assert_eq!(*per_queue.values().max().unwrap(), (flows as u32).div_ceil(queues));
        prop_assert_eq!(*per_cpu_n.values().max().unwrap(), (flows as u32).div_ceil(cpus));
        prop_assert_eq!(plan.max_per_queue, plan.ideal_max_per_queue);
    }

    #[test]
    fn single_ports_agree_with_rss(case in case(), port in any::<u16>()) {
        let p = PortPredictor::new(&case.config, case.local, case.remote, case.remote_port, case.proto).unwrap();
        let rss = rss::Predictor::new(case.config.clone()).unwrap();
        let placed = rss.place(&p.flow(port)).unwrap();
        prop_assert_eq!(p.place(port), placed);
        prop_assert_eq!(p.queue_of(port), placed.queue);
        prop_assert_eq!(p.cpu_of(port), placed.cpu);
        if let Some(found) = p.port_for_queue(placed.queue, PortRange::new(1, 65535).unwrap(), |_| true) {
            prop_assert_eq!(rss.place(&p.flow(found)).unwrap().queue, placed.queue);
        }
    }
}

#[test]
fn flows_outnumber_cores_least_loaded_first() {
    let config = microsoft(4);
    let p = predictor(&config, 5201);
    let mut options = PlanOptions {
        seed: Some(1),
        ..PlanOptions::default()
    };
    options.loads = BTreeMap::from([(0, 0.9), (1, 0.1), (2, 0.5), (3, 0.2)]);
    let plan = plan(&p, 10, &options).unwrap();
    check_plan_against_rss(&config, &p, &plan);
    assert_eq!(plan.max_per_cpu, 3);
    assert_eq!(plan.ideal_max_per_cpu, 3);
    let cpus: Vec<u32> = plan.entries.iter().map(|e| e.cpu).collect();
    // Round-robin, least loaded first: 1, 3, 2, 0, then again.
    assert_eq!(cpus, [1, 3, 2, 0, 1, 3, 2, 0, 1, 3]);
    // Fewer flows than cores: only the least loaded.
    let two = plan_tcp(&config, 5201, 2, &options);
    assert_eq!(
        two.entries.iter().map(|e| e.cpu).collect::<Vec<_>>(),
        [1, 3]
    );
}

#[test]
fn existing_flows_are_evened_out() {
    let config = microsoft(4);
    let p = predictor(&config, 80);
    let options = PlanOptions {
        existing: BTreeMap::from([(0, 2), (1, 1)]),
        ..PlanOptions::default()
    };
    let plan = plan(&p, 3, &options).unwrap();
    let mut cpus: Vec<u32> = plan.entries.iter().map(|e| e.cpu).collect();
    cpus.sort_unstable();
    assert_eq!(cpus, [1, 2, 3]);
    assert_eq!(plan.max_per_cpu, 2);
}

#[test]
fn sixty_four_flows_on_sixty_four_cpus_one_each() {
    let config = RssConfig::ethtool_default(RssKey::symmetric(52), 64, 128).unwrap();
    let mut config = config;
    config.key = RssKey::new((0..52u8).map(|i| i.wrapping_mul(151) ^ 0x5c).collect()).unwrap();
    let p = predictor(&config, 5201);
    let plan = plan(&p, 64, &PlanOptions::default()).unwrap();
    check_plan_against_rss(&config, &p, &plan);
    assert_eq!(plan.cpus_used, 64);
    assert_eq!(plan.max_per_cpu, 1);
}

#[test]
fn exhaustion_is_a_clear_error() {
    let config = microsoft(8);
    let p = predictor(&config, 80);
    let options = PlanOptions {
        range: PortRange::new(40000, 40003).unwrap(),
        ..PlanOptions::default()
    };
    let err = plan(&p, 5, &options).unwrap_err();
    assert!(
        matches!(
            err,
            SrapError::Exhausted {
                wanted: 5,
                found: 4,
                low: 40000,
                high: 40003
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("40000-40003"), "{err}");
    // A tiny range still plans what it can hold, doubling up CPUs if needed.
    let plan = plan(&p, 4, &options).unwrap();
    assert_eq!(plan.entries.len(), 4);
    assert!(plan.unreachable_cpus.len() >= 4);
}

#[test]
fn reserved_and_used_ports_are_skipped() {
    let config = microsoft(2);
    let p = predictor(&config, 80);
    let mut excluded = PortSet::parse_list("40000-40095,40097-40099").unwrap();
    excluded.insert(40101);
    let options = PlanOptions {
        range: PortRange::new(40000, 40101).unwrap(),
        excluded,
        seed: Some(3),
        ..PlanOptions::default()
    };
    let plan = plan(&p, 2, &options).unwrap();
    let mut ports: Vec<u16> = plan.entries.iter().map(|e| e.port).collect();
    ports.sort_unstable();
    assert_eq!(ports, [40096, 40100]);
}

#[test]
fn ipv6_and_udp_four_tuple() {
    let mut config = microsoft(8);
    config.fields = HashFieldsByFlow::all_four_tuple();
    for (l, r) in [("2001:db8::1", "2001:db8::2"), ("10.1.1.1", "10.1.1.2")] {
        for proto in [L4Proto::Tcp, L4Proto::Udp] {
            let p = PortPredictor::new(&config, addr(l), addr(r), 443, proto).unwrap();
            let plan = plan(&p, 8, &PlanOptions::default()).unwrap();
            check_plan_against_rss(&config, &p, &plan);
            assert_eq!(plan.cpus_used, 8);
        }
    }
}

#[test]
fn reads_port_policy_from_a_procfs_tree() {
    let dir = testkit::TempDir::new("srap-proc");
    let sys = dir.join("sys/net/ipv4");
    std::fs::create_dir_all(&sys).unwrap();
    std::fs::create_dir_all(dir.join("net")).unwrap();
    std::fs::write(sys.join("ip_local_port_range"), "40000\t40009\n").unwrap();
    std::fs::write(sys.join("ip_local_reserved_ports"), "40001-40003\n").unwrap();
    // One connection from port 40004 (0x9C44).
    std::fs::write(
        dir.join("net/tcp"),
        "  sl  local_address rem_address   st\n   0: 0100000A:9C44 0200000A:0050 01 0\n",
    )
    .unwrap();
    let local = srap::LocalPorts::read_from(dir.path(), L4Proto::Tcp).unwrap();
    assert_eq!(local.range, PortRange::new(40000, 40009).unwrap());
    let excluded = local.excluded();
    let skipped: Vec<u16> = (40000..=40009).filter(|&p| excluded.contains(p)).collect();
    assert_eq!(skipped, [40001, 40002, 40003, 40004]);
    let options = PlanOptions::from_local(&local);
    let config = microsoft(1);
    let plan = plan_tcp(&config, 80, 6, &options);
    let mut ports: Vec<u16> = plan.entries.iter().map(|e| e.port).collect();
    ports.sort_unstable();
    assert_eq!(ports, [40000, 40005, 40006, 40007, 40008, 40009]);
}

/// The lab's receiver: software RSS with 32 queues on 2 CPUs (queue q on
/// CPU q % 2). 16 flows get 16 queues, 8 per CPU.
#[test]
fn sixteen_flows_on_thirty_two_queues_two_cpus() {
    let mut config = microsoft(32);
    config.queue_cpus = (0..32).map(|q| q % 2).collect();
    let p = lab_predictor(&config);
    for seed in 0..20 {
        let options = PlanOptions {
            seed: Some(seed),
            ..PlanOptions::default()
        };
        let plan = plan(&p, 16, &options).unwrap();
        check_plan_against_rss(&config, &p, &plan);
        let queues: std::collections::BTreeSet<u32> =
            plan.entries.iter().map(|e| e.queue).collect();
        assert_eq!(queues.len(), 16, "{plan:?}");
        assert_eq!(plan.entries.iter().filter(|e| e.cpu == 0).count(), 8);
        // The queue sequence does not depend on the ports found.
        let order: Vec<u32> = plan.entries.iter().map(|e| e.queue).collect();
        assert_eq!(order, (0..16).collect::<Vec<_>>());
    }
}

/// A key with three non-zero bytes leaves queue 13 of 15 (on CPU 1 of 3)
/// unreached by any source port (the case proptest found). 14 flows still
/// get 14 distinct queues and at most ceil(14 / 3) = 5 per CPU: when CPU 1
/// has no unused queue left that a port reaches, CPU 2, of the same count,
/// takes queue 14 instead of CPU 1 repeating a queue.
#[test]
fn an_unreached_queue_does_not_make_another_repeat() {
    let mut key = vec![0u8; 40];
    key[11..14].copy_from_slice(&[240, 82, 100]);
    let mut config = RssConfig::ethtool_default(RssKey::new(key).unwrap(), 15, 128).unwrap();
    config.queue_cpus = (0..15).map(|q| q % 3).collect();
    let p = lab_predictor(&config);
    let reached = reached_queues(&p);
    assert_eq!(reached.len(), 14);
    assert!(!reached.contains(&13));
    let options = PlanOptions {
        seed: Some(0),
        ..PlanOptions::default()
    };
    let plan = plan(&p, 14, &options).unwrap();
    check_plan_against_rss(&config, &p, &plan);
    let queues: BTreeSet<u32> = plan.entries.iter().map(|e| e.queue).collect();
    assert_eq!(queues.len(), 14, "{plan:?}");
    assert_eq!(plan.max_per_cpu, 5);
}

/// CPUs with unequal queue counts (CPU 0 has queues 0 and 4, CPU 1 the
/// other six): the queue sequence is still the same for every remote port
/// and seed, as the cgroup binder's per-host slot counter needs
/// (docs/srap.md "Plan"), and a CPU whose queues are all in use yields a
/// tie to one with an unused queue.
#[test]
fn unequal_cpus_give_one_queue_sequence_for_every_remote_port() {
    let mut config = microsoft(8);
    config.queue_cpus = vec![0, 1, 1, 1, 0, 1, 1, 1];
    let mut sequences = BTreeSet::new();
    for remote_port in [80, 443, 5201, 8080, 9000] {
        for seed in 0..5 {
            let options = PlanOptions {
                seed: Some(seed),
                ..PlanOptions::default()
            };
            let plan = plan_tcp(&config, remote_port, 8, &options);
            sequences.insert(plan.entries.iter().map(|e| e.queue).collect::<Vec<_>>());
        }
    }
    assert_eq!(
        sequences.into_iter().collect::<Vec<_>>(),
        [vec![0, 1, 4, 2, 3, 0, 5, 4]]
    );
}
