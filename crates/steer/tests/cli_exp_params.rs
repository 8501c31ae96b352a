//! The experiments through the real binary: bad parameters exit 2 with one
//! line (the refusal), before a progress header or a lab, so without root
//! too. The runs themselves are in cli_walk's root test and the matrix.

mod common;

use common::{fails_with_one_line, steer};

fn refused(command: &[&str], args: &[&str], needle: &str) {
    let out = steer().args(command).args(args).output().unwrap();
    fails_with_one_line(&out, 2, needle);
}

#[test]
fn bad_parameters_exit_2_before_the_progress_header() {
    refused(&["demo"], &["--repetitions", "0"], "--repetitions");
    refused(&["demo"], &["--flows", "0"], "--flows");
    refused(&["exp", "toe"], &["--repetitions", "0"], "--repetitions");
    refused(&["exp", "toe"], &["--bytes", "0"], "--bytes");
    refused(&["exp", "toe"], &["--threads", "0"], "--threads");
    refused(&["exp", "toe"], &["--threads", "100000"], "--threads");
    refused(&["exp", "srpic"], &["--seconds", "0"], "seconds");
    refused(&["exp", "srpic"], &["--spreads", "2"], "spreads");
    refused(&["exp", "xdp-overhead"], &["--qsize", "0"], "--qsize");
}
