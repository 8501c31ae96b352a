//! `steer rss where` and `steer rss config` through the real binary: every
//! Microsoft verification vector, and bad input -> one line, exit 2.

mod common;

use common::{microsoft_config, steer, success_json};
use predicates::prelude::*;
use testkit::TempDir;

/// (src, dst, 2-tuple hash, 4-tuple hash) from Microsoft's "Verifying the RSS
/// Hash Calculation".
const VECTORS: &[(&str, &str, &str, &str)] = &[
    (
        "66.9.149.187:2794",
        "161.142.100.80:1766",
        "0x323e8fc2",
        "0x51ccc178",
    ),
    (
        "199.92.111.2:14230",
        "65.69.140.83:4739",
        "0xd718262a",
        "0xc626b0ea",
    ),
    (
        "24.19.198.95:12898",
        "12.22.207.184:38024",
        "0xd2d0a5de",
        "0x5c2b394a",
    ),
    (
        "38.27.205.30:48228",
        "209.142.163.6:2217",
        "0x82989176",
        "0xafc7327f",
    ),
    (
        "153.39.163.191:44251",
        "202.188.127.2:1303",
        "0x5d1809c5",
        "0x10e828a2",
    ),
    (
        "[3ffe:2501:200:1fff::7]:2794",
        "[3ffe:2501:200:3::1]:1766",
        "0x2cc18cd5",
        "0x40207d3d",
    ),
    (
        "[3ffe:501:8::260:97ff:fe40:efab]:14230",
        "[ff02::1]:4739",
        "0x0f0c461c",
        "0xdde51bbf",
    ),
    (
        "[3ffe:1900:4545:3:200:f8ff:fe21:67cf]:44251",
        "[fe80::200:f8ff:fe21:67cf]:38024",
        "0x4b61e985",
        "0x02d1feef",
    ),
];

fn where_json(args: &[&str]) -> serde_json::Value {
    success_json(
        &steer()
            .args(["rss", "where", "--json", "--key", "microsoft"])
            .args(["--queues", "4"])
            .args(args)
            .output()
            .unwrap(),
    )
}

fn without_port(endpoint: &str) -> String {
    let (addr, _) = endpoint.rsplit_once(':').unwrap();
    addr.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

#[test]
fn reproduces_every_microsoft_vector() {
    for &(src, dst, two, four) in VECTORS {
        let v = where_json(&[src, dst]);
        assert_eq!(v["hash"], four, "{src} -> {dst}");
        let (s, d) = (without_port(src), without_port(dst));
        let v = where_json(&[&s, &d]);
        assert_eq!(v["hash"], two, "{s} -> {d}");
    }
}

#[test]
fn json_has_index_queue_and_cpu() {
    let v = where_json(&["66.9.149.187:2794", "161.142.100.80:1766"]);
    // 0x51ccc178 % 128 = 120; entry 120 -> queue 120 % 4 = 0; queue q -> CPU q.
    assert_eq!(v["index"], 120);
    assert_eq!(v["queue"], 0);
    assert_eq!(v["cpu"], 0);
}

#[test]
fn config_file_round_trips_through_where() {
    let dir = TempDir::new("steer-cli");
    let path = dir.join("cfg.json");
    let out = steer()
        .args([
            "rss",
            "config",
            "--key",
            "microsoft",
            "--queues",
            "3",
            "--weight",
            "1",
            "1",
            "2",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&path, &out.stdout).unwrap();
    let out = steer()
        .args(["rss", "where", "--json", "--config", path.to_str().unwrap()])
        .args(["66.9.149.187:2794", "161.142.100.80:1766"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hash"], "0x51ccc178");
    // Weights 1 1 2 over 128 entries: entries 64..128 -> queue 2.
    assert_eq!(v["queue"], 2);
}

fn fails_with_code_2(args: &[&str], needle: &str) {
    steer()
        .args(args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(needle))
        .stderr(predicate::function(|s: &str| {
            s.trim_end().lines().count() == 1
        }));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let w = ["rss", "where", "--key", "microsoft"];
    fails_with_code_2(
        &[&w[..], &["10.0.0.256:1", "10.0.0.1:2"]].concat(),
        "10.0.0.256:1",
    );
    fails_with_code_2(
        &[&w[..], &["10.0.0.1:70000", "10.0.0.2:2"]].concat(),
        "10.0.0.1:70000",
    );
    fails_with_code_2(&[&w[..], &["10.0.0.1:1", "[::1]:2"]].concat(), "IPv4");
    fails_with_code_2(&[&w[..], &["10.0.0.1:1", "10.0.0.2"]].concat(), "port");
    fails_with_code_2(
        &["rss", "where", "--key", "0102", "[::1]:1", "[::2]:2"],
        "needs at least 40 bytes",
    );
    fails_with_code_2(
        &["rss", "where", "--key", "xyz", "1.1.1.1:1", "2.2.2.2:2"],
        "not hex",
    );
    fails_with_code_2(&["rss", "where", "1.1.1.1:1", "2.2.2.2:2"], "--config");
    fails_with_code_2(
        &[
            "rss",
            "where",
            "--config",
            "/nonexistent/cfg.json",
            "1.1.1.1:1",
            "2.2.2.2:2",
        ],
        "cannot read",
    );
    fails_with_code_2(
        &[
            "rss",
            "config",
            "--key",
            "microsoft",
            "--queues",
            "2",
            "--weight",
            "0",
            "0",
        ],
        "weights",
    );
}

/// A device without RSS (loopback) named by --dev: why, said once (the
/// NIC error used to repeat its cause after itself).
#[test]
fn a_device_without_rss_is_one_line_saying_why_once() {
    let out = steer()
        .args(["rss", "where", "--dev", "lo", "1.1.1.1:1", "2.2.2.2:2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_eq!(
        err.matches("lo has no readable RSS configuration").count(),
        1,
        "{err}"
    );
}

#[test]
fn config_with_unknown_field_or_bad_queue_is_rejected() {
    let dir = TempDir::new("steer-cli-bad");
    let good: serde_json::Value = serde_json::from_slice(&microsoft_config(2)).unwrap();
    let cases = [
        (
            "unknown",
            {
                let mut v = good.clone();
                v["extra"] = 1.into();
                v
            },
            "extra",
        ),
        (
            "missing",
            {
                let mut v = good.clone();
                v.as_object_mut().unwrap().remove("queues");
                v
            },
            "queues",
        ),
        (
            "queue",
            {
                let mut v = good.clone();
                v["indirection_table"][5] = 7.into();
                v
            },
            "queue 7",
        ),
        (
            "shortkey",
            {
                let mut v = good.clone();
                v["key"] = "0102".into();
                v
            },
            "needs at least",
        ),
    ];
    for (name, value, needle) in cases {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, value.to_string()).unwrap();
        fails_with_code_2(
            &[
                "rss",
                "where",
                "--config",
                path.to_str().unwrap(),
                "1.1.1.1:1",
                "2.2.2.2:2",
            ],
            needle,
        );
    }
}
