//! `steer exp ooo` through the real binary: bad input exits 2 with one
//! line, before any lab is built (so without root too). The run itself is
//! in cli_walk's root test and the matrix case `ooo`.

mod common;

use common::{fails_with_one_line, steer};

fn refused(args: &[&str], needle: &str) {
    let out = steer().args(["exp", "ooo"]).args(args).output().unwrap();
    fails_with_one_line(&out, 2, needle);
}

#[test]
fn bad_parameters_exit_2_with_one_line() {
    refused(
        &["--short-min", "9000", "--short-max", "100"],
        "--short-min",
    );
    refused(&["--loss-percent", "70"], "--loss-percent");
    refused(&["--seconds", "0"], "--seconds");
    refused(&["--rto-min-ms", "0"], "--rto-min-ms");
    refused(&["--bounds", "1,unbounded,1"], "twice");
    refused(&["--senders", "dctcp,dctcp"], "twice");
    refused(&["--ecn-mark-frames", "0"], "--ecn-mark-frames");
    refused(
        &["--queue-frames", "10", "--ecn-mark-frames", "11"],
        "--ecn-mark-frames",
    );
}

/// Values clap itself refuses (its message has more lines than one):
/// exit 2, naming the value.
#[test]
fn a_sender_or_bound_that_is_not_ours_is_a_usage_error() {
    for (flag, value, needle) in [
        ("--senders", "newreno,cubic", "sender 'cubic'"),
        ("--bounds", "1,lots", "out-of-order bound 'lots'"),
    ] {
        let out = steer().args(["exp", "ooo", flag, value]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{err}");
    }
}
