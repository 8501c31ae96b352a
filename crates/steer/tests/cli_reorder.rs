//! `steer reorder`: stats and sort on the shared traces and on a crafted
//! reordered capture; bad input exits 2 with one line.

mod common;

use std::net::Ipv4Addr;

use common::{steer, success_json};
use testkit::shared_trace;
use testkit::TempDir;

fn tcp_frame(seq: u32, payload: usize) -> Vec<u8> {
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    testkit::tcp_frame(a, 5000, b, 80, seq, 0x10, payload)
}

/// 20 segments of 100 bytes in the order of the paper's Table 1 example
/// (6 reordered, max extent 3), starting just below the 2^32 wrap.
fn crafted() -> Vec<u8> {
    const ORDER: [u32; 20] = [
        1, 3, 6, 2, 4, 5, 7, 8, 9, 11, 10, 13, 15, 12, 14, 16, 17, 18, 19, 20,
    ];
    let records: Vec<(u64, Vec<u8>)> = ORDER
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let frame = tcp_frame((u32::MAX - 1000).wrapping_add(k * 100), 100);
            (i as u64 * 10_000, frame)
        })
        .collect();
    order::capture::write_pcap(1, &records)
}

fn stats_json(path: &std::path::Path) -> serde_json::Value {
    success_json(
        &steer()
            .args(["reorder", "stats", "--json"])
            .arg(path)
            .output()
            .unwrap(),
    )
}

#[test]
fn crafted_capture_stats_and_sort() {
    let dir = TempDir::new("steer-reorder");
    let input = dir.join("crafted.pcap");
    std::fs::write(&input, crafted()).unwrap();
    let v = stats_json(&input);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1);
    let f = &flows[0];
    assert_eq!(
        (
            f["src"].as_str(),
            f["dst"].as_str(),
            f["sport"].as_u64(),
            f["dport"].as_u64()
        ),
        (Some("10.0.0.1"), Some("10.0.0.2"), Some(5000), Some(80))
    );
    assert_eq!(
        (
            f["packets"].as_u64(),
            f["reordered"].as_u64(),
            f["max_extent"].as_u64()
        ),
        (Some(20), Some(6), Some(3))
    );
    assert!((f["reordered_ratio"].as_f64().unwrap() - 0.3).abs() < 1e-9);

    for (block, reordered, ratio) in [(5, 2, 0.10), (10, 1, 0.05)] {
        let output = dir.join(format!("sorted{block}.pcap"));
        steer()
            .args(["reorder", "sort"])
            .arg(&input)
            .args(["--block", &block.to_string(), "--batch", "20", "-o"])
            .arg(&output)
            .assert()
            .success();
        let v = stats_json(&output);
        let f = &v["flows"][0];
        assert_eq!(
            (
                f["packets"].as_u64(),
                f["reordered"].as_u64(),
                f["max_extent"].as_u64()
            ),
            (Some(20), Some(reordered), Some(1)),
            "block {block}"
        );
        assert!((f["reordered_ratio"].as_f64().unwrap() - ratio).abs() < 1e-9);
    }
    // The table form names the flow.
    steer()
        .args(["reorder", "stats"])
        .arg(&input)
        .assert()
        .success()
        .stdout(predicates::str::contains("10.0.0.1:5000"));
}

#[test]
fn shared_traces() {
    let v = stats_json(&shared_trace("tcptrace_sack_nasa_sim_bulk_1996.pcap"));
    let f = &v["flows"][0];
    assert_eq!(
        (f["sport"].as_u64(), f["dport"].as_u64()),
        (Some(1024), Some(5001))
    );
    assert_eq!(f["duplicates"].as_u64(), Some(7));
    let v = stats_json(&shared_trace("pcapplusplus_tls2_browsing_v4v6.pcap"));
    assert!(
        v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["src"].as_str().is_some_and(|s| s.contains(':'))),
        "IPv6 flows"
    );

    let chargen = shared_trace("tcptrace_urgent_chargen_bulk_2001.pcap");
    let scratch = TempDir::new("steer-reorder");
    let out = scratch.join("chargen-sorted.pcap");
    let res = steer()
        .args(["--json", "reorder", "sort"])
        .arg(chargen)
        .args(["--block", "32", "--variant", "ordered", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(res.status.success());
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(v["packets"].as_u64(), Some(9476));
    assert_eq!(v["sorter"]["packets_in"], v["sorter"]["packets_out"]);
    assert!(v["reordered_after"].as_u64() <= v["reordered_before"].as_u64());
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = TempDir::new("steer-reorder");
    let not_capture = dir.join("not.pcap");
    std::fs::write(&not_capture, b"this is not a capture file").unwrap();
    let truncated = dir.join("cut.pcap");
    let c = crafted();
    std::fs::write(&truncated, &c[..c.len() - 50]).unwrap();
    for path in [dir.join("missing.pcap"), not_capture, truncated] {
        let out = steer()
            .args(["reorder", "stats"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{path:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("steer: "));
        let out = steer()
            .args(["reorder", "sort"])
            .arg(&path)
            .args(["--block", "8", "-o"])
            .arg(dir.join("o.pcap"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
    }
    steer()
        .args(["reorder", "sort"])
        .arg(dir.join("x.pcap"))
        .args(["--block", "0", "-o", "/dev/null"])
        .assert()
        .code(2);
}
