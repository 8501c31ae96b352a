//! Errors of the test matrix.

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error("case file {path}: {reason}")]
    CaseFile { path: String, reason: String },
    #[error("case '{case}': {reason}")]
    Case { case: String, reason: String },
    #[error("the filter '{0}' matches no case (see `steer bench list`)")]
    NoCaseMatches(String),
    #[error(
        "history database {path} is unreadable or corrupted ({detail}); it was left untouched: \
         move it away or pass another --db"
    )]
    Corrupt { path: String, detail: String },
    #[error("history database {path} is not a steer bench database; it was left untouched")]
    Foreign { path: String },
    #[error("no history database at {path} (run `steer bench run` first)")]
    NoDatabase { path: String },
    #[error("history database {path}: {source}")]
    Sql {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("no run '{0}' in the history (use a run id, `last` or `prev`)")]
    NoSuchRun(String),
    #[error("baseline {path}: {reason}")]
    Baseline { path: String, reason: String },
    /// A criterion benchmark command failed or measured nothing.
    #[error("criterion benchmark '{command}': {reason}")]
    Criterion { command: String, reason: String },
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: std::io::Error,
    },
}

impl BenchError {
    /// True when a file or the database may not be read (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        matches!(self, BenchError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied)
    }

    /// True for bad input (exit 2): a bad case file, filter, run, baseline
    /// or history database (missing, corrupt or not Steer's: the user
    /// points --db elsewhere). Neither this nor
    /// [`is_environment`](Self::is_environment): an SQL or I/O operation
    /// failed (exit 1).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            BenchError::CaseFile { .. }
                | BenchError::Case { .. }
                | BenchError::NoCaseMatches(_)
                | BenchError::Corrupt { .. }
                | BenchError::Foreign { .. }
                | BenchError::NoDatabase { .. }
                | BenchError::NoSuchRun(_)
                | BenchError::Baseline { .. }
        )
    }

    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            op: op.into(),
            source,
        }
    }
}
