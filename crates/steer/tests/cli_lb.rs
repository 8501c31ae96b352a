//! `steer lb sim` through the real binary: JSON shape on a short trace
//! prefix, SVG files, pcapng as well as pcap, and bad input -> one line,
//! exit 2.

mod common;

use common::{steer, success_json};
use predicates::prelude::*;
use testkit::TempDir;
use testkit::{shared_trace, traces_search_path};

const AUCKLAND: &str = "libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap";

#[test]
fn json_lists_every_policy_with_fractions() {
    let trace = shared_trace(AUCKLAND);
    let dir = TempDir::new("steer-lb-svg");
    let out = steer()
        .args([
            "--json",
            "lb",
            "sim",
            "--trace",
            trace.to_str().unwrap(),
            "--max-packets",
            "3000",
        ])
        .args(["--speedup", "10", "--amplify", "4", "--svg"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = success_json(&out);
    let names: Vec<&str> = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["rr", "hash", "pow2", "maglev", "crossrss", "crossrss-plus"]
    );
    for p in v["policies"].as_array().unwrap() {
        for field in ["server_variance", "core_variance"] {
            let x = p[field].as_f64().unwrap();
            assert!((0.0..100.0).contains(&x), "{field} {x}");
        }
    }
    assert_eq!(v["replay"]["amplify"], 4);
    assert_eq!(v["replay"]["speedup"], 10.0);
    for f in ["variance.svg", "throughput.svg"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(text.starts_with("<svg") && text.contains("crossrss-plus"));
    }
}

#[test]
fn window_sweep_reports_policies_oracles_and_floor() {
    let trace = shared_trace(AUCKLAND);
    let dir = TempDir::new("steer-lb-sweep");
    let out = steer()
        .args(["--json", "lb", "sim", "--trace", trace.to_str().unwrap()])
        .args(["--max-packets", "5000", "--sweep-window", "0.5,2", "--svg"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = success_json(&out);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["window_s"], 0.5);
    for p in points {
        let floor = p["stats"]["floor"].as_f64().unwrap();
        let oracle = p["oracle"].as_f64().unwrap();
        assert!(floor <= oracle, "{p}");
        for policy in p["policies"].as_array().unwrap() {
            assert!(floor <= policy["core_variance"].as_f64().unwrap(), "{p}");
        }
    }
    let svg = std::fs::read_to_string(dir.join("window-sweep.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("offline oracle"));
    // The table names every column.
    steer()
        .args(["lb", "sim", "--trace", trace.to_str().unwrap()])
        .args(["--max-packets", "3000", "--sweep-window", "1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("oracle"))
        .stdout(predicate::str::contains("floor"))
        .stdout(predicate::str::contains("crossrss-plus"));
}

#[test]
fn table_names_the_replay_settings() {
    let trace = shared_trace(AUCKLAND);
    steer()
        .args(["lb", "sim", "--trace", trace.to_str().unwrap()])
        .args(["--max-packets", "2000"])
        .args(["--policy", "hash,crossrss", "--amplify", "2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("amplify 2"))
        .stdout(predicate::str::contains("crossrss"))
        .stdout(predicate::str::contains("maglev").not());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let scratch = TempDir::new("steer-lb-bad");
    let not_pcap = scratch.join("not.pcap");
    std::fs::write(&not_pcap, b"this is not a capture at all, not even close").unwrap();
    let np = not_pcap.to_str().unwrap().to_string();
    // The real trace when it is here, else the bad file: either way these
    // arguments are what is refused.
    let auckland = traces_search_path()
        .into_iter()
        .map(|dir| dir.join(AUCKLAND))
        .find(|path| path.is_file());
    let trace = match &auckland {
        Some(path) => path.to_str().unwrap(),
        None => np.as_str(),
    };
    // Refused by the command itself: one line, `steer: ...`.
    let ours: Vec<Vec<&str>> = vec![
        vec!["--trace", "/nonexistent/file.pcap"],
        vec!["--trace", &np],
        vec!["--trace", trace, "--servers", "0"],
        vec!["--trace", trace, "--cores", "0"],
        vec!["--trace", trace, "--speedup=-3"],
        vec!["--trace", trace, "--speedup", "nan"],
        vec!["--trace", trace, "--rate-hz", "0"],
        vec!["--trace", trace, "--amplify", "0"],
        vec!["--trace", trace, "--key", "6d5a"],
        vec!["--trace", trace, "--key", "zz"],
        vec!["--trace", trace, "--max-packets", "0"],
        vec!["--trace", trace, "--window", "0"],
        vec!["--trace", trace, "--sweep-window", "1,-2"],
        vec!["--trace", trace, "--sweep-window", "1e9"],
    ];
    for args in ours {
        let out = steer()
            .args(["lb", "sim"])
            .args(&args)
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("steer: "), "{args:?}: {err}");
    }
    // Refused by the argument parser (usage text, exit 2).
    let usage: Vec<Vec<&str>> = vec![
        vec!["--trace", trace, "--policy", "fastest"],
        vec!["--servers", "4"],
        vec!["--trace", trace, "--sweep-window", "fast"],
    ];
    for args in usage {
        steer()
            .args(["lb", "sim"])
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::starts_with("error: "));
    }
}

#[test]
fn a_pcapng_trace_gives_what_the_pcap_gives() {
    let pcap = shared_trace(AUCKLAND);
    let cap = order::capture::Capture::read_file(&pcap).unwrap();
    let records: Vec<(u64, Vec<u8>)> = cap
        .packets
        .iter()
        .map(|p| (p.time_ns, p.data.clone()))
        .collect();
    let dir = TempDir::new("steer-lb-pcapng");
    let ng = dir.join("auckland.pcapng");
    std::fs::write(&ng, order::capture::write_pcapng(101, &records)).unwrap();
    let run = |trace: &std::path::Path| {
        let out = steer()
            .args(["--json", "lb", "sim", "--max-packets", "5000", "--trace"])
            .arg(trace)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let mut v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        v.as_object_mut().unwrap().remove("trace");
        v
    };
    // Everything but the file name, trace statistics included.
    assert!(run(&ng) == run(&pcap), "pcapng and pcap runs differ");
}
