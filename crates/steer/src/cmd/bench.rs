//! `steer bench run|list|compare|check|report|history`: the test matrix
//! (crate `bench`, docs/bench.md).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bench::db::HistoryPath;
use bench::list::CaseList;
use bench::progress::Progress;
use bench::run::{RunRequest, Selection};
use bench::History;
use clap::{Args, Subcommand};

use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Run the matrix (or the cases `--filter` selects) and record the results.
    ///
    /// Each case runs in its own process group with a timeout; labs it leaves
    /// behind are taken down. Ctrl-C stops the current case, records it as
    /// NORUN and the run as interrupted (exit 130); the history stays intact.
    Run(RunArgs),
    /// The cases of the matrix, expanded, with their command lines.
    List(ListArgs),
    /// The runs in the history.
    History(HistoryPath),
    /// Per-case change from run A to run B, judged against the noise band of
    /// their repetitions (mean ± 2 standard errors, at least min..max).
    Compare(CompareArgs),
    /// Exit 1 when a case that is PASS in the baseline is not PASS in the run.
    Check(CheckArgs),
    /// Write a static HTML page (DIR/index.html) with the case x run table,
    /// charts over runs and the raw outputs.
    Report(ReportArgs),
    /// Run a criterion benchmark and print the estimates of that run as one
    /// JSON object (the matrix's criterion cases).
    ///
    /// Criterion writes into a new empty directory for the run
    /// (CRITERION_HOME), so a benchmark renamed or left out by a filter
    /// cannot show an earlier run's number; the benchmark's own output goes
    /// to stderr. Fails when the benchmark fails or measures nothing.
    ///
    /// Example: steer bench criterion-json -- cargo bench -p rss --bench toeplitz
    #[command(name = "criterion-json")]
    CriterionJson {
        /// The benchmark command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Each case's quick variant (each experiment's --quick).
    #[arg(long)]
    pub quick: bool,
    /// Runs of every case (at least 1); each is one sample of every metric.
    #[arg(
        long,
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..),
        allow_negative_numbers = true
    )]
    pub repetitions: u32,
    /// Seconds (positive) before a case is killed, instead of each case's
    /// own timeout.
    #[arg(long, value_parser = seconds, allow_negative_numbers = true)]
    pub timeout: Option<Duration>,
    #[command(flatten)]
    pub select: Selection,
    #[command(flatten)]
    pub db: HistoryPath,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Show the quick variants' command lines.
    #[arg(long)]
    pub quick: bool,
    /// Print the table of cases and their checks (Markdown) that
    /// docs/bench.md shows, instead of the cells and their command lines.
    #[arg(long, conflicts_with_all = ["quick", "json"])]
    pub checks_table: bool,
    #[command(flatten)]
    pub select: Selection,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run A (a run id, `last`, `prev` or `last~N`).
    #[arg(default_value = "prev")]
    pub a: String,
    /// Run B.
    #[arg(default_value = "last")]
    pub b: String,
    #[command(flatten)]
    pub db: HistoryPath,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Baseline file: case id -> state from a real run.
    #[arg(long, default_value = "bench/matrix/baseline.json")]
    pub baseline: PathBuf,
    /// The run to check.
    #[arg(long, default_value = "last")]
    pub run: String,
    /// Write the run's states into the baseline instead of checking.
    #[arg(long)]
    pub update: bool,
    #[command(flatten)]
    pub db: HistoryPath,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Output directory (created); the page is DIR/index.html.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// How many of the newest runs to show.
    #[arg(long, default_value_t = 30)]
    pub runs: usize,
    #[command(flatten)]
    pub db: HistoryPath,
}

pub fn run(cmd: BenchCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        BenchCommand::Run(args) => run_matrix(args, json),
        BenchCommand::List(args) => list(args, json),
        BenchCommand::History(args) => history(args, json),
        BenchCommand::Compare(args) => compare(args, json),
        BenchCommand::Check(args) => check(args, json),
        BenchCommand::Report(args) => report(args, json),
        BenchCommand::CriterionJson { command } => {
            output::json(&bench::criterion::run(&command)?)?;
            Ok(exit::OK)
        }
    }
}

fn run_matrix(args: RunArgs, json: bool) -> anyhow::Result<i32> {
    let cases = args.select.cases()?;
    let db = args.db.path();
    let mut history = History::open(&db)?;
    let req = RunRequest {
        quick: args.quick,
        filter: args.select.filter.clone(),
        repetitions: args.repetitions,
        timeout: args.timeout,
        steer: std::env::current_exe().context("cannot find the steer binary")?,
        root: std::env::current_dir().context("cannot read the current directory")?,
    };
    let interrupted = bench::run::interrupt_flag()?;
    let progress = Progress::new(cases.len());
    let summary = bench::run::run_matrix(&mut history, &cases, &req, interrupted, |e| {
        progress.event(e)
    })?;
    progress.finish();
    output::print(json, &summary)?;
    Ok(if summary.interrupted() {
        exit::INTERRUPTED
    } else {
        exit::OK
    })
}

fn list(args: ListArgs, json: bool) -> anyhow::Result<i32> {
    if args.checks_table {
        if json {
            return Err(exit::usage(
                "--checks-table prints Markdown; drop --json (steer bench list --json lists the cells with their checks)",
            ));
        }
        let cases = args.select.cases()?;
        print!("{}", bench::list::checks_table(bench::list::specs(&cases)));
        return Ok(exit::OK);
    }
    let list = CaseList {
        cases: args.select.cases()?,
        quick: args.quick,
        steer: std::env::current_exe()?.display().to_string(),
        root: std::env::current_dir()?.display().to_string(),
    };
    output::print(json, &list)?;
    Ok(exit::OK)
}

fn history(args: HistoryPath, json: bool) -> anyhow::Result<i32> {
    let log = History::open_existing(&args.path())?.log()?;
    output::print(json, &log)?;
    Ok(exit::OK)
}

fn compare(args: CompareArgs, json: bool) -> anyhow::Result<i32> {
    let h = History::open_existing(&args.db.path())?;
    output::print(json, &bench::compare::compare(&h, &args.a, &args.b)?)?;
    Ok(exit::OK)
}

fn check(args: CheckArgs, json: bool) -> anyhow::Result<i32> {
    let h = History::open_existing(&args.db.path())?;
    if args.update {
        let run = bench::check::update_baseline(&h, &args.baseline, &args.run)?;
        if json {
            output::json(&serde_json::json!({
                "baseline": args.baseline,
                "updated_from_run": run,
            }))?;
        } else {
            output::note!(
                "baseline {} updated from run {run}",
                args.baseline.display()
            );
        }
        return Ok(exit::OK);
    }
    let report = bench::check::check_run(&h, &args.baseline, &args.run)?;
    output::print(json, &report)?;
    Ok(exit::ok_unless(report.regressions() > 0))
}

fn report(args: ReportArgs, json: bool) -> anyhow::Result<i32> {
    let h = History::open_existing(&args.db.path())?;
    let summary = bench::report::write_report(&h, &args.output, args.runs.max(1))?;
    output::print(json, &summary)?;
    Ok(exit::OK)
}

/// `--timeout`: a positive, finite number of seconds.
fn seconds(arg: &str) -> Result<Duration, String> {
    let secs: f64 = arg.parse().map_err(|e| format!("{e}"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err("must be a positive number of seconds".into());
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        args: RunArgs,
    }

    #[test]
    fn repetitions_and_timeout_are_checked_by_the_parser() {
        let parse = |argv: &[&str]| Run::try_parse_from([&["t"][..], argv].concat());
        let ok = parse(&["--repetitions", "3", "--timeout", "0.5"]).unwrap();
        assert_eq!(ok.args.repetitions, 3);
        assert_eq!(ok.args.timeout, Some(Duration::from_millis(500)));
        assert_eq!(parse(&[]).unwrap().args.timeout, None);
        for bad in [
            &["--repetitions", "0"][..],
            &["--timeout=-1"],
            &["--timeout", "0"],
            &["--timeout", "nan"],
            &["--timeout", "inf"],
            &["--timeout", "1e300"],
            &["--timeout", "soon"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
