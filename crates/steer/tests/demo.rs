//! `steer demo --quick` on the real datapath (namespaces, veth, XDP software
//! RSS, iperf3). Needs root; skipped with the reason otherwise.

use assert_cmd::Command;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn quick_demo_measures_flows_per_queue_from_the_datapath() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces, XDP)");
        return;
    }
    let out = Command::cargo_bin("steer")
        .unwrap()
        .args(["demo", "--quick", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let way = &v["ways"][0];
    assert_eq!(way["name"], "random");
    assert_eq!(way["repetitions"], 3);
    let perfect = way["perfect_fraction"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&perfect));
    let theory = v["theory"]["perfect_probability"].as_f64().unwrap();
    assert!((theory - 0.0104).abs() < 0.0001, "{theory}");
    for run in way["runs"].as_array().unwrap() {
        let per_queue: Vec<u64> = run["flows_per_queue"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        assert_eq!(per_queue.len(), 32);
        assert_eq!(
            per_queue.iter().sum::<u64>(),
            16,
            "every flow seen on exactly one queue"
        );
        let max = *per_queue.iter().max().unwrap();
        assert_eq!(run["max_flows_on_a_queue"].as_u64().unwrap(), max);
        assert_eq!(run["collision_free"].as_bool().unwrap(), max == 1);
        assert!(run["goodput_gbps"].as_f64().unwrap() > 0.0);
        assert_eq!(
            run["flow_queues"], run["predicted_queues"],
            "model == datapath"
        );
    }
    let worst = way["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["max_flows_on_a_queue"].as_u64().unwrap())
        .max();
    assert_eq!(way["max_flows_on_a_queue"].as_u64(), worst);
}
