//! One experiment interface: every experiment is a type implementing
//! [`Experiment`] (its parameters with their quick form and their check,
//! a run that reports progress, and its result's text and chart), and
//! [`run`] wraps what it measured in the one result envelope, [`Report`]:
//! the experiment's name, its parameters, the measurements and the machine
//! it ran on. Adding an experiment is one file here and one line in the
//! binary's `steer exp` (docs/architecture.md).

use plot::text::{Present, Text};
use serde::{Serialize, Serializer};
use stats::Meta;

use crate::ExpError;

/// An experiment: how its parameters are sized and checked, how it runs,
/// and how its result reads.
pub trait Experiment: Sized {
    /// Its name: `steer exp NAME`, and `experiment` in its JSON.
    const NAME: &'static str;
    /// Whether it draws a chart ([`Experiment::svg`]); `--svg` is refused
    /// before the run otherwise.
    const DRAWS: bool = false;
    /// Its parameters; with the `clap` feature they are the command's
    /// flags.
    type Params: Serialize + Clone;
    /// What it measured: the result without the envelope.
    type Output: Serialize;

    /// The reduced run (under 2 minutes) for CI and the test matrix.
    fn quick(params: Self::Params) -> Self::Params;
    /// Refuses bad parameters before anything is built.
    fn check(params: &Self::Params) -> Result<(), ExpError>;
    /// The line a run starts with.
    fn progress_header(params: &Self::Params) -> String;
    /// Runs it; `progress` takes a line per sample or cell as it ends.
    fn run(
        params: &Self::Params,
        progress: &mut dyn FnMut(String),
    ) -> Result<Self::Output, ExpError>;
    /// The result as text: tables and notes.
    fn text(report: &Report<Self>) -> Text;
    /// The result's chart, when it [`DRAWS`](Experiment::DRAWS) one.
    fn svg(_report: &Report<Self>) -> Option<String> {
        None
    }
    /// False when the run itself failed what it exists to show (bytes lost
    /// or misordered, connections failed): the command exits 1 after
    /// printing the result.
    fn succeeded(_output: &Self::Output) -> bool {
        true
    }
}

/// The one result envelope: `experiment`, `params`, the measurements'
/// fields, then `meta`.
#[derive(Debug, Clone)]
pub struct Report<E: Experiment> {
    pub params: E::Params,
    pub output: E::Output,
    pub meta: Meta,
}

impl<E: Experiment> Report<E> {
    /// What `run` measured, enveloped now (for the tests of text and
    /// charts: meta is this machine's).
    pub fn new(params: E::Params, output: E::Output) -> Self {
        Report {
            params,
            output,
            meta: Meta::collect(),
        }
    }

    /// Whether the run succeeded ([`Experiment::succeeded`]).
    pub fn succeeded(&self) -> bool {
        E::succeeded(&self.output)
    }

    /// The chart ([`Experiment::svg`]).
    pub fn svg(&self) -> Option<String> {
        E::svg(self)
    }
}

/// A report reads as its measurements (`report.cells`), beside its
/// `params` and `meta`.
impl<E: Experiment> std::ops::Deref for Report<E> {
    type Target = E::Output;

    fn deref(&self) -> &E::Output {
        &self.output
    }
}

impl<E: Experiment> std::ops::DerefMut for Report<E> {
    fn deref_mut(&mut self) -> &mut E::Output {
        &mut self.output
    }
}

impl<E: Experiment> Serialize for Report<E> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Envelope<'a, P, O> {
            experiment: &'static str,
            params: &'a P,
            #[serde(flatten)]
            output: &'a O,
            meta: &'a Meta,
        }
        Envelope {
            experiment: E::NAME,
            params: &self.params,
            output: &self.output,
            meta: &self.meta,
        }
        .serialize(s)
    }
}

impl<E: Experiment> Present for Report<E> {
    fn text(&self) -> Text {
        E::text(self)
    }
}

/// Runs `E` with `params` (or their quick form): checks them, reports the
/// header and every progress line to `progress`, and envelopes the result.
pub fn run<E: Experiment>(
    params: E::Params,
    quick: bool,
    progress: &mut dyn FnMut(String),
) -> Result<Report<E>, ExpError> {
    let params = if quick { E::quick(params) } else { params };
    E::check(&params)?;
    progress(E::progress_header(&params));
    let output = E::run(&params, progress)?;
    Ok(Report::new(params, output))
}

/// Refuses `--svg` for an experiment that draws no chart, before it runs.
pub fn check_chart<E: Experiment>(wanted: bool) -> Result<(), ExpError> {
    crate::refuse_if(
        wanted && !E::DRAWS,
        &format!("--svg: the {} experiment draws no chart", E::NAME),
    )
}
