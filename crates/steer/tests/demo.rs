//! `steer demo --quick` on the real datapath (namespaces, veth, XDP software
//! RSS, iperf3, both binders). Needs root; without it the tests fail and say so.

mod common;

use common::{steer, success_json};
use serde_json::Value;

testkit::strict_mode_guard!();

fn way<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["ways"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no way {name}"))
}

/// Every repetition: each flow seen on exactly one queue, counts consistent,
/// and the model's prediction equal to what the datapath did.
fn check_runs(way: &Value, flows: u64, queues: usize) {
    for run in way["runs"].as_array().unwrap() {
        let per_queue: Vec<u64> = run["flows_per_queue"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        assert_eq!(per_queue.len(), queues);
        assert_eq!(per_queue.iter().sum::<u64>(), flows);
        let max = *per_queue.iter().max().unwrap();
        assert_eq!(run["max_flows_on_a_queue"].as_u64().unwrap(), max);
        assert_eq!(
            run["flow_queues"], run["predicted_queues"],
            "model == datapath"
        );
        assert!(run["aggregate_gbps"].as_f64().unwrap() > 0.0);
        assert_eq!(run["flow_gbps"].as_array().unwrap().len() as u64, flows);
    }
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn quick_demo_three_ways_measured_on_the_datapath() {
    testkit::require_root("network namespaces, XDP, cgroup BPF");
    let v = success_json(
        &steer()
            .args(["demo", "--quick", "--json", "--lab", "demo-test-quick"])
            .output()
            .unwrap(),
    );
    let theory = v["theory"]["perfect_probability"].as_f64().unwrap();
    assert!((theory - 0.0104).abs() < 0.0001, "{theory}");
    let random = way(&v, "random");
    assert_eq!(random["repetitions"], 3);
    let perfect = random["perfect_fraction"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&perfect));
    check_runs(random, 16, 32);
    // The goal: the steered ways put every flow on its own queue in every
    // repetition (README, "A tour"; SRAP paper, Figure 1).
    for name in ["preload", "bpf"] {
        let steered = way(&v, name);
        check_runs(steered, 16, 32);
        assert_eq!(steered["perfect_fraction"], 1.0, "{name}: {steered}");
        assert_eq!(steered["max_flows_on_a_queue"], 1, "{name}");
    }
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn fewer_queues_than_flows_and_separate_processes() {
    testkit::require_root("network namespaces, XDP, cgroup BPF");
    // One iperf3 -P 8 on 4 queues: at best 2 data flows per queue (its
    // control connection takes a lease too).
    let v = demo(&["--flows", "8", "--queues", "4", "--lab", "demo-test-few"]);
    for name in ["random", "preload", "bpf"] {
        check_runs(way(&v, name), 8, 4);
    }
    for name in ["preload", "bpf"] {
        assert_eq!(way(&v, name)["max_flows_on_a_queue"], 2, "{name}");
    }
    // 8 separate iperf3 processes (each with its own control connection) on
    // 16 queues: every data flow on its own queue.
    let v = demo(&[
        "--flows",
        "8",
        "--queues",
        "16",
        "--processes",
        "--lab",
        "demo-test-procs",
    ]);
    for name in ["random", "preload", "bpf"] {
        check_runs(way(&v, name), 8, 16);
    }
    // One shared cgroup plan: 1:1. The allocator leases to 8 processes
    // whose control and data connects race, so an idle control connection
    // can take a data flow's queue: at most 2 (seen once in 10 CI runs).
    assert_eq!(way(&v, "bpf")["max_flows_on_a_queue"], 1);
    assert!(way(&v, "preload")["max_flows_on_a_queue"].as_u64().unwrap() <= 2);
}

fn demo(args: &[&str]) -> Value {
    success_json(
        &steer()
            .args(["demo", "--json", "--repetitions", "1"])
            .args(args)
            .output()
            .unwrap(),
    )
}
