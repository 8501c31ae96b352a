//! What happened to a case: the OpenBSD regress/perform states.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The state of one case in one run (the worst over its repetitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum State {
    /// Exit 0, every metric found, every declared check true.
    Pass,
    /// Exit 0 and values, but a declared check on the JSON is false.
    Fail,
    /// No value: the output is not JSON, or a metric or a value a check
    /// reads is missing or null (not measured).
    #[serde(rename = "NOVALUE")]
    NoValue,
    /// The command exited with a non-zero status.
    #[serde(rename = "NOEXIT")]
    NoExit,
    /// The command did not terminate before the timeout; its process group was killed.
    Timeout,
    /// The case did not run: a precondition is missing (root, a program, a
    /// file, a `steer` subcommand), or the run was interrupted.
    #[serde(rename = "NORUN")]
    NoRun,
    /// No output at all (or the output file could not be created).
    #[serde(rename = "NOLOG")]
    NoLog,
}

impl State {
    pub const ALL: [State; 7] = [
        State::Pass,
        State::Fail,
        State::NoValue,
        State::NoExit,
        State::Timeout,
        State::NoRun,
        State::NoLog,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pass => "PASS",
            State::Fail => "FAIL",
            State::NoValue => "NOVALUE",
            State::NoExit => "NOEXIT",
            State::Timeout => "TIMEOUT",
            State::NoRun => "NORUN",
            State::NoLog => "NOLOG",
        }
    }

    /// One line for the legend of the report and the docs.
    pub fn meaning(self) -> &'static str {
        match self {
            State::Pass => "test passed: exit 0, every metric found, every check true",
            State::Fail => "exit 0 and values, but a declared check on the JSON is false",
            State::NoValue => {
                "no value produced: output not JSON, or a metric or checked value is missing or null"
            }
            State::NoExit => "did not exit with code 0",
            State::Timeout => "did not terminate, killed (whole process group) after the timeout",
            State::NoRun => "did not run: a precondition is missing, or the run was interrupted",
            State::NoLog => "no output at all, or the output file could not be created",
        }
    }

    /// How bad, for the worst-of over repetitions: PASS < FAIL < NOVALUE <
    /// NOLOG < NOEXIT < TIMEOUT < NORUN.
    pub fn severity(self) -> u8 {
        match self {
            State::Pass => 0,
            State::Fail => 1,
            State::NoValue => 2,
            State::NoLog => 3,
            State::NoExit => 4,
            State::Timeout => 5,
            State::NoRun => 6,
        }
    }

    pub fn worst(self, other: State) -> State {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for State {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown state '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>().unwrap(), s);
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
    }

    #[test]
    fn worst_of() {
        assert_eq!(State::Pass.worst(State::Fail), State::Fail);
        assert_eq!(State::Timeout.worst(State::Pass), State::Timeout);
    }
}
