//! `steer exp loss` through the real binary: bad input exits 2 with one
//! line, before any lab is built (so without root too). The run itself is
//! in exp's root test, cli_walk's root test and the matrix case `loss`.

mod common;

use common::{fails_with_one_line, steer};

fn refused(args: &[&str], needle: &str) {
    let out = steer().args(["exp", "loss"]).args(args).output().unwrap();
    fails_with_one_line(&out, 2, needle);
}

#[test]
fn bad_parameters_exit_2_with_one_line() {
    refused(&["--loss", "150"], "--loss must be 0 to 50 percent");
    refused(&["--loss", "0.1,150%"], "--loss");
    refused(&["--rtt=-1"], "--rtt");
    refused(&["--rtt", "2,5000"], "--rtt");
    refused(&["--rate", "100kbit"], "--rate");
    refused(&["--engine", "toe,toe"], "twice");
    refused(&["--seconds", "0"], "--seconds");
    refused(&["--repetitions", "0"], "--repetitions");
}

/// Values clap itself refuses (its message has more lines than one):
/// exit 2, naming the value.
#[test]
fn an_engine_or_cc_that_is_not_ours_is_a_usage_error() {
    for (flag, value, needle) in [
        ("--engine", "toe,dpdk", "'dpdk'"),
        ("--cc", "vegas", "'vegas'"),
        ("--direction", "sideways", "'sideways'"),
        ("--rate", "fast", "fast"),
    ] {
        let out = steer().args(["exp", "loss", flag, value]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{err}");
    }
}
