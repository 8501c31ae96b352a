//! `steer lb sim` through the real binary: JSON shape on a short trace
//! prefix, SVG files, and bad input -> one line, exit 2.

use assert_cmd::Command;
use predicates::prelude::*;

fn steer() -> Command {
    Command::cargo_bin("steer").unwrap()
}

const AUCKLAND: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/traces/libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap"
);

fn have_trace() -> bool {
    let ok = std::path::Path::new(AUCKLAND).exists();
    if !ok {
        eprintln!("skipping: {AUCKLAND} not found");
    }
    ok
}

#[test]
fn json_lists_every_policy_with_fractions() {
    if !have_trace() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("steer-lb-svg-{}", std::process::id()));
    let out = steer()
        .args([
            "--json",
            "lb",
            "sim",
            "--trace",
            AUCKLAND,
            "--max-packets",
            "3000",
        ])
        .args(["--speedup", "10", "--amplify", "4", "--svg"])
        .arg(&dir)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
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
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn table_names_the_replay_settings() {
    if !have_trace() {
        return;
    }
    steer()
        .args(["lb", "sim", "--trace", AUCKLAND, "--max-packets", "2000"])
        .args(["--policy", "hash,crossrss", "--amplify", "2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("amplify 2"))
        .stdout(predicate::str::contains("crossrss"))
        .stdout(predicate::str::contains("maglev").not());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let not_pcap = std::env::temp_dir().join(format!("steer-lb-bad-{}", std::process::id()));
    std::fs::write(&not_pcap, b"this is not a capture at all, not even close").unwrap();
    let np = not_pcap.to_str().unwrap().to_string();
    let trace = if have_trace() { AUCKLAND } else { np.as_str() };
    let cases: Vec<Vec<&str>> = vec![
        vec!["--trace", "/nonexistent/file.pcap"],
        vec!["--trace", &np],
        vec!["--trace", trace, "--servers", "0"],
        vec!["--trace", trace, "--cores", "0"],
        vec!["--trace", trace, "--policy", "fastest"],
        vec!["--trace", trace, "--speedup=-3"],
        vec!["--trace", trace, "--speedup", "nan"],
        vec!["--trace", trace, "--rate-hz", "0"],
        vec!["--trace", trace, "--amplify", "0"],
        vec!["--trace", trace, "--key", "6d5a"],
        vec!["--trace", trace, "--key", "zz"],
        vec!["--trace", trace, "--max-packets", "0"],
        vec!["--servers", "4"],
    ];
    for args in cases {
        let out = steer()
            .args(["lb", "sim"])
            .args(&args)
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        if args.len() >= 2 && args[0] == "--trace" {
            // Our own errors (not clap's usage text) are one line.
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with("steer: "), "{args:?}: {err}");
        }
    }
    let _ = std::fs::remove_file(not_pcap);
}
