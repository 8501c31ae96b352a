//! Steer's experiments. Each writes one JSON result (parameters, every raw
//! sample, summary, and the machine it ran on) and prints a table.

/// `clap::ValueEnum` for a parameter enum from what it already says of
/// itself: its `ALL` values, `name` (as in the JSON) and a one-line `help`,
/// so the command line and the results name the values alike.
macro_rules! value_enum {
    ($type:ty, $help:ident) => {
        #[cfg(feature = "clap")]
        impl clap::ValueEnum for $type {
            fn value_variants<'a>() -> &'a [Self] {
                &Self::ALL
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(clap::builder::PossibleValue::new(self.name()).help(self.$help()))
            }
        }
    };
}

/// The three methods of an [`experiment::Experiment`] that hand the work
/// to its parameters' own `quick`, `check` and `progress_header`, as every
/// experiment's do.
macro_rules! params_do_the_sizing {
    () => {
        fn quick(params: Self::Params) -> Self::Params {
            params.quick()
        }

        fn check(params: &Self::Params) -> Result<(), crate::ExpError> {
            params.check()
        }

        fn progress_header(params: &Self::Params) -> String {
            params.progress_header()
        }
    };
}

pub mod apps;
pub mod cpus;
pub mod crossrss;
mod datapath;
pub mod demo;
pub mod experiment;
pub mod iperf;
pub mod loss;
pub mod ooo;
pub mod srpic;
pub mod toe;
pub mod xdp_overhead;

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ExpError {
    #[error(transparent)]
    Lab(#[from] lab::LabError),
    #[error(transparent)]
    Nic(#[from] nic::NicError),
    #[error(transparent)]
    Binder(#[from] binder::BinderError),
    #[error(transparent)]
    LbXdp(#[from] lbxdp::LbXdpError),
    #[error("{program} is not installed (the README's `make demo` installs it)")]
    MissingProgram { program: String },
    #[error("{program} failed: {detail}")]
    Program { program: String, detail: String },
    /// A counter the measurement needs is not in the program's output.
    #[error("{program} on {host} did not report the counter {counter}")]
    MissingCounter {
        program: String,
        host: String,
        counter: String,
    },
    #[error("iperf3 printed JSON Steer cannot read: {0}")]
    IperfOutput(String),
    #[error("the datapath saw {seen} of the {expected} flows iperf3 opened")]
    FlowsMissing { seen: usize, expected: usize },
    #[error("invalid parameter: {0}")]
    Parameter(String),
}

/// A parameter error saying `message` when `bad` holds: the one shape of
/// every experiment's parameter check.
pub(crate) fn refuse_if(bad: bool, message: &str) -> Result<(), ExpError> {
    if bad {
        Err(ExpError::Parameter(message.into()))
    } else {
        Ok(())
    }
}

/// True when some value of `values` stands there twice (a flag that
/// names a value twice would run it twice).
pub(crate) fn repeats<T: PartialEq>(values: &[T]) -> bool {
    values
        .iter()
        .enumerate()
        .any(|(i, v)| values[..i].contains(v))
}

/// A failure of the lab's wire (its forwarder could not start or stop)
/// as the experiment's.
pub(crate) fn wire_err(e: wire::WireError) -> ExpError {
    ExpError::Program {
        program: "the lab's wire".into(),
        detail: e.to_string(),
    }
}

/// The limits of iperf3 flows into a software-RSS receiver, which the
/// demo and xdp-overhead share: at most 128 flows (iperf3 -P) and 256
/// queues.
pub(crate) fn check_flows_and_queues(flows: u32, queues: u32) -> Result<(), ExpError> {
    refuse_if(flows == 0 || flows > 128, "--flows must be 1..=128")?;
    refuse_if(queues == 0 || queues > 256, "--queues must be 1..=256")
}

// The unit tests that run real servers are ignored outside `make test`.
#[cfg(test)]
testkit::strict_mode_guard!();

/// Parameters `P` as the command line parses `argv` (flags only).
#[cfg(all(test, feature = "clap"))]
pub(crate) fn parse_params<P: clap::Args>(argv: &[&str]) -> Result<P, clap::Error> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli<P: clap::Args> {
        #[command(flatten)]
        params: P,
    }
    let argv = std::iter::once("test").chain(argv.iter().copied());
    Cli::<P>::try_parse_from(argv).map(|cli| cli.params)
}

/// True when parsing no flags gives `P::default()` (compared as JSON).
#[cfg(all(test, feature = "clap"))]
pub(crate) fn clap_defaults_are_the_library_defaults<P>() -> bool
where
    P: clap::Args + Default + serde::Serialize,
{
    let parsed: P = parse_params(&[]).expect("no flags parse");
    serde_json::to_value(parsed).unwrap() == serde_json::to_value(P::default()).unwrap()
}

impl ExpError {
    /// True for missing privilege or a missing kernel feature or program.
    pub fn is_environment(&self) -> bool {
        match self {
            ExpError::Lab(e) => e.is_environment(),
            ExpError::Nic(e) => e.is_environment(),
            ExpError::Binder(e) => e.is_environment(),
            ExpError::LbXdp(e) => e.is_environment(),
            ExpError::MissingProgram { .. } => true,
            _ => false,
        }
    }

    /// True for a bad parameter, or a lab or device given wrong (CLI exit
    /// 2). Neither this nor [`is_environment`](Self::is_environment): the
    /// run failed (a program failed or its output lacks what the
    /// measurement needs; exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            ExpError::Lab(e) => e.is_bad_input(),
            ExpError::Nic(e) => e.is_bad_input(),
            ExpError::Binder(e) => e.is_bad_input(),
            ExpError::LbXdp(e) => e.is_bad_input(),
            ExpError::Parameter(_) => true,
            _ => false,
        }
    }
}
