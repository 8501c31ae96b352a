//! One result, two printers: a human table or `--json`.

use std::io::Write;

use plot::text::{Present, Text};
use serde::Serialize;

/// Writes a line to stderr (progress, notes, the final error) and ignores a
/// failure: a reader that closed stderr must not stop a server or a run,
/// where `eprintln!` would panic on the closed pipe.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use note;

/// Whether a long command writes progress notes to stderr: always with
/// tables, and with `--json` only when a person watches stderr.
pub fn shows_progress(json: bool) -> bool {
    use std::io::IsTerminal;
    !json || std::io::stderr().is_terminal()
}

/// What prints a long command's progress lines: each to stderr when
/// [`shows_progress`], else nothing.
pub fn progress(json: bool) -> impl Fn(&str) {
    let show = shows_progress(json);
    move |line| {
        if show {
            note!("{line}");
        }
    }
}

/// Prints `value` as pretty JSON on stdout.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Prints `result` as JSON with `--json`, else as its text
/// ([`plot::text::Present`]).
pub fn print<T: Serialize + Present>(json: bool, result: &T) -> anyhow::Result<()> {
    if json {
        self::json(result)
    } else {
        text(&result.text())
    }
}

/// Prints `text` on stdout.
pub fn text(text: &Text) -> anyhow::Result<()> {
    write!(std::io::stdout().lock(), "{text}")?;
    Ok(())
}
