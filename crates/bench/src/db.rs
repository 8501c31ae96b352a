//! The history: one SQLite file, one row per run and one per case x run.
//!
//! Schema (version 1; `PRAGMA application_id` marks the file as Steer's):
//!
//! ```sql
//! runs(id INTEGER PRIMARY KEY, started INTEGER, finished INTEGER,
//!      status TEXT,             -- running | complete | interrupted
//!      quick INTEGER, filter TEXT, repetitions INTEGER,
//!      git_commit TEXT, kernel TEXT, cpu_model TEXT, cores INTEGER, raw_dir TEXT)
//! results(run_id INTEGER, case_id TEXT, name TEXT, params TEXT,    -- JSON object
//!         command TEXT,         -- JSON array
//!         state TEXT, reason TEXT,
//!         samples TEXT,         -- JSON {metric: {unit, better, values: [...]}}
//!         repetitions TEXT,     -- JSON [{repetition, state, reason, exit_code, seconds, output, stderr}]
//!         raw_path TEXT,        -- the first repetition's stdout file
//!         seconds REAL, timestamp INTEGER,
//!         git_commit TEXT, kernel TEXT, cpu_model TEXT, cores INTEGER,
//!         PRIMARY KEY (run_id, case_id))
//! ```
//!
//! Every write is a transaction: an interrupted run keeps every finished case.

use std::path::{Path, PathBuf};

use plot::text::{Present, Table, Text};
use rusqlite::{params, Connection, OpenFlags};
use serde::Serialize;

use crate::runner::CaseResult;
use crate::BenchError;
use crate::State;

/// 'STBR' (Steer bench results).
const APPLICATION_ID: i64 = 0x5354_4252;
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started INTEGER NOT NULL,
    finished INTEGER,
    status TEXT NOT NULL,
    quick INTEGER NOT NULL,
    filter TEXT,
    repetitions INTEGER NOT NULL,
    git_commit TEXT NOT NULL,
    kernel TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    cores INTEGER NOT NULL,
    raw_dir TEXT NOT NULL
);
CREATE TABLE results (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    case_id TEXT NOT NULL,
    name TEXT NOT NULL,
    params TEXT NOT NULL,
    command TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    samples TEXT NOT NULL,
    repetitions TEXT NOT NULL,
    raw_path TEXT,
    seconds REAL NOT NULL,
    timestamp INTEGER NOT NULL,
    git_commit TEXT NOT NULL,
    kernel TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    cores INTEGER NOT NULL,
    PRIMARY KEY (run_id, case_id)
);
";

/// A run of the matrix, as stored.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub id: i64,
    pub started: i64,
    pub finished: Option<i64>,
    pub status: String,
    pub quick: bool,
    pub filter: Option<String>,
    pub repetitions: u32,
    pub git_commit: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: i64,
    pub raw_dir: String,
}

/// A case x run row: the case's result as the runner recorded it, in the
/// run it belongs to.
#[derive(Debug, Clone, Serialize)]
pub struct ResultRow {
    pub run_id: i64,
    #[serde(flatten)]
    pub result: CaseResult,
    /// The first repetition's stdout file (the case's JSON), if any.
    pub raw_path: Option<String>,
    pub timestamp: i64,
}

/// A run's cases in state PASS, of all it recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Passed {
    pub passed: usize,
    pub cases: usize,
}

/// The runs of a history, oldest first, each with its pass count:
/// `steer bench history`. Its JSON is the runs alone ([`RunRow`]s).
#[derive(Debug, Clone, Serialize)]
pub struct RunLog(pub Vec<LoggedRun>);

/// A run and how many of its cases passed.
#[derive(Debug, Clone, Serialize)]
pub struct LoggedRun {
    #[serde(flatten)]
    pub run: RunRow,
    /// Shown in the text; the JSON gives the run as stored.
    #[serde(skip)]
    pub passed: Passed,
}

/// One row per run: status, kind, commit, passed/recorded, filter.
impl Present for RunLog {
    fn text(&self) -> Text {
        let header = ["run", "status", "kind", "commit", "pass", "filter"];
        Table::of(&header, &self.0, |LoggedRun { run, passed }| {
            vec![
                run.id.to_string(),
                run.status.clone(),
                if run.quick { "quick" } else { "full" }.into(),
                run.git_commit.clone(),
                format!("{}/{}", passed.passed, passed.cases),
                run.filter.clone().unwrap_or_default(),
            ]
        })
        .into()
    }
}

pub struct History {
    conn: Connection,
    path: PathBuf,
}

/// Where the history database is. With the `clap` feature, the `--db`
/// flag of the `steer bench` commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct HistoryPath {
    /// History database [default: $XDG_DATA_HOME/steer/bench.sqlite or
    /// ~/.local/share/steer/bench.sqlite].
    #[cfg_attr(feature = "clap", arg(long))]
    pub db: Option<PathBuf>,
}

impl HistoryPath {
    /// The database given, else [`default_path`].
    pub fn path(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(default_path)
    }
}

/// `$XDG_DATA_HOME/steer/bench.sqlite`, else `~/.local/share/steer/bench.sqlite`.
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("steer").join("bench.sqlite")
}

impl History {
    /// Opens (creating if absent) the history for writing.
    pub fn open(path: &Path) -> Result<History, BenchError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
        }
        let conn = Connection::open(path).map_err(|e| corrupt(path, e))?;
        let history = History {
            conn,
            path: path.into(),
        };
        history.prepare(true)?;
        Ok(history)
    }

    /// Opens an existing history read-only (compare, report, check).
    pub fn open_existing(path: &Path) -> Result<History, BenchError> {
        if !path.exists() {
            return Err(BenchError::NoDatabase {
                path: path.display().to_string(),
            });
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| corrupt(path, e))?;
        let history = History {
            conn,
            path: path.into(),
        };
        history.prepare(false)?;
        Ok(history)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks the file is an intact Steer history; creates the schema in
    /// an empty file when `create`. Never rewrites anything else.
    fn prepare(&self, create: bool) -> Result<(), BenchError> {
        let c = &self.conn;
        let p = &self.path;
        c.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| corrupt(p, e))?;
        let check: String = c
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| corrupt(p, e))?;
        if check != "ok" {
            return Err(BenchError::Corrupt {
                path: p.display().to_string(),
                detail: check,
            });
        }
        let app: i64 = c
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(|e| corrupt(p, e))?;
        let tables: i64 = c
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| corrupt(p, e))?;
        if app == 0 && tables == 0 {
            if !create {
                return Err(BenchError::NoDatabase {
                    path: p.display().to_string(),
                });
            }
            let sql = format!(
                "BEGIN; {SCHEMA} PRAGMA application_id = {APPLICATION_ID}; \
                 PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            );
            c.execute_batch(&sql).map_err(|e| self.sql(e))?;
            return Ok(());
        }
        if app != APPLICATION_ID {
            return Err(BenchError::Foreign {
                path: p.display().to_string(),
            });
        }
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| corrupt(p, e))?;
        if version != SCHEMA_VERSION {
            return Err(BenchError::Corrupt {
                path: p.display().to_string(),
                detail: format!("schema version {version}, this steer knows {SCHEMA_VERSION}"),
            });
        }
        Ok(())
    }

    fn sql(&self, e: rusqlite::Error) -> BenchError {
        BenchError::Sql {
            path: self.path.display().to_string(),
            source: e,
        }
    }

    /// Records the start of a run; returns its id.
    pub fn begin_run(
        &mut self,
        meta: &stats::Meta,
        quick: bool,
        filter: Option<&str>,
        repetitions: u32,
        raw_dir: &str,
    ) -> Result<i64, BenchError> {
        let tx = self.conn.transaction().map_err(|e| sql(&self.path, e))?;
        tx.execute(
            "INSERT INTO runs (started, status, quick, filter, repetitions, git_commit, kernel, \
             cpu_model, cores, raw_dir) VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                meta.timestamp as i64,
                quick,
                filter,
                repetitions,
                meta.git_commit,
                meta.kernel,
                meta.cpu_model,
                meta.cores as i64,
                raw_dir
            ],
        )
        .map_err(|e| sql(&self.path, e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| sql(&self.path, e))?;
        Ok(id)
    }

    /// Points a run at its raw directory (known once the id is).
    pub fn set_raw_dir(&mut self, run: i64, raw_dir: &str) -> Result<(), BenchError> {
        self.conn
            .execute(
                "UPDATE runs SET raw_dir = ?1 WHERE id = ?2",
                params![raw_dir, run],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Stores one case's result (one transaction).
    pub fn record(
        &mut self,
        run: i64,
        meta: &stats::Meta,
        result: &CaseResult,
    ) -> Result<(), BenchError> {
        let raw = result.repetitions.iter().find_map(|r| r.output.clone());
        let now = now();
        let tx = self.conn.transaction().map_err(|e| sql(&self.path, e))?;
        tx.execute(
            "INSERT OR REPLACE INTO results (run_id, case_id, name, params, command, state, \
             reason, samples, repetitions, raw_path, seconds, timestamp, git_commit, kernel, \
             cpu_model, cores) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
             ?14, ?15, ?16)",
            params![
                run,
                result.case_id,
                result.name,
                json(&result.params),
                json(&result.command),
                result.state.as_str(),
                result.reason,
                json(&result.metrics),
                json(&result.repetitions),
                raw,
                result.seconds,
                now,
                meta.git_commit,
                meta.kernel,
                meta.cpu_model,
                meta.cores as i64
            ],
        )
        .map_err(|e| sql(&self.path, e))?;
        tx.commit().map_err(|e| sql(&self.path, e))?;
        Ok(())
    }

    /// Marks a run `complete` or `interrupted`.
    pub fn finish_run(&mut self, run: i64, status: &str) -> Result<(), BenchError> {
        self.conn
            .execute(
                "UPDATE runs SET finished = ?1, status = ?2 WHERE id = ?3",
                params![now(), status, run],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    pub fn runs(&self) -> Result<Vec<RunRow>, BenchError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, started, finished, status, quick, filter, repetitions, git_commit, \
                 kernel, cpu_model, cores, raw_dir FROM runs ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    started: r.get(1)?,
                    finished: r.get(2)?,
                    status: r.get(3)?,
                    quick: r.get(4)?,
                    filter: r.get(5)?,
                    repetitions: r.get(6)?,
                    git_commit: r.get(7)?,
                    kernel: r.get(8)?,
                    cpu_model: r.get(9)?,
                    cores: r.get(10)?,
                    raw_dir: r.get(11)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// Every run with its pass count ([`History::passed`]).
    pub fn log(&self) -> Result<RunLog, BenchError> {
        let runs = self.runs()?.into_iter().map(|run| {
            let passed = self.passed(run.id)?;
            Ok(LoggedRun { run, passed })
        });
        runs.collect::<Result<_, _>>().map(RunLog)
    }

    /// `last`, `prev` (the one before last), `last~N`, or a run id.
    pub fn resolve(&self, which: &str) -> Result<i64, BenchError> {
        let ids: Vec<i64> = self.runs()?.iter().map(|r| r.id).collect();
        let back = match which {
            "last" => Some(0),
            "prev" => Some(1),
            w => w
                .strip_prefix("last~")
                .and_then(|n| n.parse::<usize>().ok()),
        };
        let found = match back {
            Some(n) => ids.iter().rev().nth(n).copied(),
            None => which.parse::<i64>().ok().filter(|id| ids.contains(id)),
        };
        found.ok_or_else(|| BenchError::NoSuchRun(which.into()))
    }

    pub fn run(&self, id: i64) -> Result<RunRow, BenchError> {
        self.runs()?
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| BenchError::NoSuchRun(id.to_string()))
    }

    /// How many of `run`'s cases passed, of how many recorded (what
    /// `steer bench history` shows per run).
    pub fn passed(&self, run: i64) -> Result<Passed, BenchError> {
        let rows = self.results(run)?;
        Ok(Passed {
            passed: rows
                .iter()
                .filter(|r| r.result.state == State::Pass)
                .count(),
            cases: rows.len(),
        })
    }

    /// Every case x run row of `run`, in case order of recording.
    pub fn results(&self, run: i64) -> Result<Vec<ResultRow>, BenchError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT run_id, case_id, name, params, command, state, reason, samples, \
                 repetitions, raw_path, seconds, timestamp FROM results WHERE run_id = ?1 \
                 ORDER BY rowid",
            )
            .map_err(|e| self.sql(e))?;
        let raw = stmt
            .query_map([run], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    [
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, String>(8)?,
                    ],
                    r.get::<_, Option<String>>(9)?,
                    r.get::<_, f64>(10)?,
                    r.get::<_, i64>(11)?,
                ))
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        let bad = |what: &str, e: String| BenchError::Corrupt {
            path: self.path.display().to_string(),
            detail: format!("run {run}: {what}: {e}"),
        };
        raw.into_iter()
            .map(
                |(
                    run_id,
                    case_id,
                    name,
                    [params, command, state, reason, samples, reps],
                    raw_path,
                    seconds,
                    timestamp,
                )| {
                    Ok(ResultRow {
                        run_id,
                        result: CaseResult {
                            params: serde_json::from_str(&params)
                                .map_err(|e| bad("params", e.to_string()))?,
                            command: serde_json::from_str(&command)
                                .map_err(|e| bad("command", e.to_string()))?,
                            state: state.parse().map_err(|e| bad("state", e))?,
                            metrics: serde_json::from_str(&samples)
                                .map_err(|e| bad("samples", e.to_string()))?,
                            repetitions: serde_json::from_str(&reps)
                                .map_err(|e| bad("repetitions", e.to_string()))?,
                            case_id,
                            name,
                            reason,
                            seconds,
                        },
                        raw_path,
                        timestamp,
                    })
                },
            )
            .collect()
    }
}

fn sql(path: &Path, e: rusqlite::Error) -> BenchError {
    BenchError::Sql {
        path: path.display().to_string(),
        source: e,
    }
}

fn corrupt(path: &Path, e: rusqlite::Error) -> BenchError {
    BenchError::Corrupt {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `serde_json::to_string` for the row's JSON columns.
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(case_id: &str, state: State) -> CaseResult {
        CaseResult {
            case_id: case_id.into(),
            name: case_id.into(),
            params: Default::default(),
            command: vec!["true".into()],
            state,
            reason: String::new(),
            metrics: Default::default(),
            repetitions: Vec::new(),
            seconds: 0.1,
        }
    }

    #[test]
    fn passed_counts_pass_only_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&dir.path().join("bench.sqlite")).unwrap();
        let meta = stats::Meta::collect();
        let first = h.begin_run(&meta, true, None, 1, "raw").unwrap();
        h.record(first, &meta, &result("a", State::Pass)).unwrap();
        h.record(first, &meta, &result("b", State::Fail)).unwrap();
        h.record(first, &meta, &result("c", State::Pass)).unwrap();
        let second = h.begin_run(&meta, true, None, 1, "raw").unwrap();
        h.record(second, &meta, &result("a", State::NoRun)).unwrap();
        let passed = |run| h.passed(run).unwrap();
        assert_eq!(
            passed(first),
            Passed {
                passed: 2,
                cases: 3
            }
        );
        assert_eq!(
            passed(second),
            Passed {
                passed: 0,
                cases: 1
            }
        );
        assert_eq!(
            passed(second + 1),
            Passed {
                passed: 0,
                cases: 0
            }
        );
    }

    #[test]
    fn the_log_reads_each_run_with_its_pass_count_and_its_json_is_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&dir.path().join("bench.sqlite")).unwrap();
        let meta = stats::Meta::collect();
        let first = h.begin_run(&meta, true, Some("a,b"), 1, "raw").unwrap();
        h.record(first, &meta, &result("a", State::Pass)).unwrap();
        h.record(first, &meta, &result("b", State::Fail)).unwrap();
        h.finish_run(first, "complete").unwrap();
        h.begin_run(&meta, false, None, 1, "raw").unwrap();
        let log = h.log().unwrap();
        let text = log.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("run    status   kind"), "{text}");
        assert!(lines[0].ends_with("pass  filter"), "{text}");
        assert!(lines[1].starts_with("  1  complete  quick"), "{text}");
        assert!(lines[1].ends_with("  1/2     a,b"), "{text}");
        assert!(lines[2].starts_with("  2   running   full"), "{text}");
        assert!(lines[2].ends_with("  0/0        "), "{text}");
        let json = serde_json::to_value(&log).unwrap();
        assert_eq!(json, serde_json::to_value(h.runs().unwrap()).unwrap());
    }
}
