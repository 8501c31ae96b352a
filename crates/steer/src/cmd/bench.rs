//! `steer bench run|list|compare|check|report|history`: the test matrix
//! (crate `bench`, docs/bench.md).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bench::check::Baseline;
use bench::db::HistoryPath;
use bench::progress::Progress;
use bench::run::{RunRequest, RunSummary, Selection};
use bench::stats::Summary;
use bench::{History, State};
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
    /// Print criterion's latest estimates under DIR as one JSON object (used
    /// by criterion cases of the matrix).
    #[command(name = "criterion-json")]
    CriterionJson {
        /// The directory criterion writes its results into.
        #[arg(default_value = "target/criterion")]
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Each case's quick variant (each experiment's --quick).
    #[arg(long)]
    pub quick: bool,
    /// Runs of every case; each is one sample of every metric.
    #[arg(long, default_value_t = 1)]
    pub repetitions: u32,
    /// Seconds before a case is killed, instead of each case's own timeout.
    #[arg(long)]
    pub timeout: Option<f64>,
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
        BenchCommand::CriterionJson { dir } => {
            output::json(&bench::criterion::collect(&dir)?)?;
            Ok(exit::OK)
        }
    }
}

fn run_matrix(args: RunArgs, json: bool) -> anyhow::Result<i32> {
    let cases = args.select.cases()?;
    if args.repetitions == 0 {
        anyhow::bail!("--repetitions must be at least 1");
    }
    let timeout = match args.timeout {
        Some(t) if !(t > 0.0 && t.is_finite()) => anyhow::bail!("--timeout must be positive"),
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let db = args.db.path();
    let mut history = History::open(&db)?;
    let req = RunRequest {
        quick: args.quick,
        filter: args.select.filter.clone(),
        repetitions: args.repetitions,
        timeout,
        steer: std::env::current_exe().context("cannot find the steer binary")?,
        root: std::env::current_dir().context("cannot read the current directory")?,
    };
    let interrupted = bench::run::interrupt_flag()?;
    let progress = Progress::new(cases.len());
    let summary = bench::run::run_matrix(&mut history, &cases, &req, interrupted, |e| {
        progress.event(e)
    })?;
    progress.finish();
    if json {
        output::json(&summary)?;
    } else {
        print_run(&summary)?;
    }
    Ok(if summary.interrupted() {
        exit::INTERRUPTED
    } else {
        exit::OK
    })
}

fn first_metric(
    metrics: &std::collections::BTreeMap<String, bench::runner::MetricSamples>,
) -> String {
    metrics
        .iter()
        .find_map(|(name, m)| {
            Summary::of(&m.values).map(|s| format!("{name} {:.3} {}", s.mean, m.unit))
        })
        .unwrap_or_default()
}

fn print_run(s: &RunSummary) -> anyhow::Result<()> {
    output::table_of(
        &["case", "state", "seconds", "first metric", "reason"],
        s.results.iter(),
        |r| {
            vec![
                r.case_id.clone(),
                r.state.to_string(),
                format!("{:.1}", r.seconds),
                first_metric(&r.metrics),
                r.reason.clone(),
            ]
        },
    )?;
    let counts: Vec<String> = State::ALL
        .iter()
        .filter(|st| s.count(**st) > 0)
        .map(|st| format!("{} {st}", s.count(*st)))
        .collect();
    println!(
        "run {} {}: {}; history {}; raw outputs {}",
        s.run,
        s.status,
        counts.join(", "),
        s.db,
        s.raw_dir
    );
    Ok(())
}

fn list(args: ListArgs, json: bool) -> anyhow::Result<i32> {
    let cases = args.select.cases()?;
    let steer = std::env::current_exe()?.display().to_string();
    let root = std::env::current_dir()?.display().to_string();
    if json {
        let v: Vec<_> = cases
            .iter()
            .map(|c| c.listing(args.quick, &steer, &root))
            .collect();
        output::json(&v)?;
        return Ok(exit::OK);
    }
    output::table_of(
        &["case", "timeout", "metrics", "command"],
        cases.iter(),
        |c| {
            vec![
                c.id.clone(),
                c.timeout(args.quick).to_string(),
                c.spec
                    .metrics
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                c.argv(args.quick, "steer", ".").join(" "),
            ]
        },
    )?;
    Ok(exit::OK)
}

fn history(args: HistoryPath, json: bool) -> anyhow::Result<i32> {
    let h = History::open_existing(&args.path())?;
    let runs = h.runs()?;
    if json {
        output::json(&runs)?;
        return Ok(exit::OK);
    }
    let passed = runs
        .iter()
        .map(|r| h.passed(r.id))
        .collect::<Result<Vec<_>, _>>()?;
    output::table_of(
        &["run", "status", "kind", "commit", "pass", "filter"],
        runs.iter().zip(&passed),
        |(r, p)| {
            vec![
                r.id.to_string(),
                r.status.clone(),
                if r.quick { "quick" } else { "full" }.into(),
                r.git_commit.clone(),
                format!("{}/{}", p.passed, p.cases),
                r.filter.clone().unwrap_or_default(),
            ]
        },
    )?;
    Ok(exit::OK)
}

fn compare(args: CompareArgs, json: bool) -> anyhow::Result<i32> {
    let h = History::open_existing(&args.db.path())?;
    let cmp = bench::compare::compare(&h, &args.a, &args.b)?;
    if json {
        output::json(&cmp)?;
        return Ok(exit::OK);
    }
    println!(
        "run {} ({}) -> run {} ({})",
        cmp.run_a, cmp.commit_a, cmp.run_b, cmp.commit_b
    );
    let st = |s: Option<State>| s.map_or("-".to_string(), |s| s.to_string());
    let band = |s: &Option<Summary>| {
        s.map_or("-".into(), |s| {
            format!("{:.3} [{:.3}..{:.3}] n={}", s.mean, s.low, s.high, s.n)
        })
    };
    let mut body = Vec::new();
    for c in &cmp.cases {
        body.push(vec![
            c.case_id.clone(),
            format!("{} -> {}", st(c.state_a), st(c.state_b)),
            c.verdict.label().into(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
        for m in &c.metrics {
            body.push(vec![
                format!("  {}", m.metric),
                String::new(),
                m.verdict.label().into(),
                band(&m.a),
                band(&m.b),
                m.change_percent.map_or("-".into(), |p| format!("{p:+.1}%")),
                m.unit.clone(),
            ]);
        }
    }
    output::table(
        &[
            "case / metric",
            "state",
            "verdict",
            "A mean [band]",
            "B mean [band]",
            "change",
            "unit",
        ],
        &body,
    )?;
    println!(
        "{} state regressions (PASS -> not PASS); metric changes are flagged only beyond the noise band",
        cmp.regressions()
    );
    Ok(exit::OK)
}

fn check(args: CheckArgs, json: bool) -> anyhow::Result<i32> {
    let h = History::open_existing(&args.db.path())?;
    let run = h.resolve(&args.run)?;
    let rows = h.results(run)?;
    let info = h.run(run)?;
    if args.update {
        Baseline::update_file(&args.baseline, &info, &rows)?;
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
    let baseline = Baseline::load(&args.baseline)?;
    let report = bench::check::check(&baseline, run, info.filter.as_deref(), &rows);
    if json {
        output::json(&report)?;
    } else {
        let st = |s: Option<State>| s.map_or("-".to_string(), |s| s.to_string());
        let mut body: Vec<Vec<String>> = report
            .lines
            .iter()
            .map(|l| {
                vec![
                    l.case_id.clone(),
                    st(l.baseline),
                    l.now.to_string(),
                    if l.regression { "REGRESSION" } else { "ok" }.into(),
                    l.reason.clone(),
                ]
            })
            .collect();
        body.extend(report.missing.iter().map(|m| {
            vec![
                m.case_id.clone(),
                m.baseline.to_string(),
                "-".into(),
                "MISSING".into(),
                "selected by the run's filter, not in the run".into(),
            ]
        }));
        output::table(&["case", "baseline", "now", "verdict", "reason"], &body)?;
        println!(
            "run {run}: {} regressions against {} ({} state changes, {} cases missing; {} baseline cases not selected by the filter {})",
            report.regressions(),
            args.baseline.display(),
            report.regressions() - report.missing.len(),
            report.missing.len(),
            report.not_selected,
            report.filter.as_deref().unwrap_or("(none)")
        );
    }
    Ok(exit::ok_unless(report.regressions() > 0))
}

fn report(args: ReportArgs, json: bool) -> anyhow::Result<i32> {
    let h = History::open_existing(&args.db.path())?;
    let summary = bench::report::write_report(&h, &args.output, args.runs.max(1))?;
    if json {
        output::json(&summary)?;
    } else {
        println!(
            "{} ({} runs, {} cases, {} charts, {} raw files)",
            summary.index, summary.runs, summary.cases, summary.charts, summary.raw_files
        );
    }
    Ok(exit::OK)
}
