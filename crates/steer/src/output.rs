//! One result, two printers: a human table or `--json`.

use std::io::Write;
use std::net::SocketAddr;

use plot::text::{Present, Rows, Table, Text};
use rss::{FlowTuple, L4Proto};
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

pub use plot::text::{measured, or_na};

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

/// Prints aligned `label  value` rows.
pub fn rows(rows: &[(&str, String)]) -> anyhow::Result<()> {
    let rows = Rows(rows.iter().map(|(l, v)| (l.to_string(), v.clone())).collect());
    text(&rows.into())
}

/// Prints a [`Table`] of `header` and `body`.
pub fn table(header: &[&str], body: &[Vec<String>]) -> anyhow::Result<()> {
    let table = Table {
        rows: body.to_vec(),
        ..Table::new(header)
    };
    text(&table.into())
}

/// Prints a [`Table`] of one `row` per item.
pub fn table_of<T>(
    header: &[&str],
    items: impl IntoIterator<Item = T>,
    row: impl FnMut(T) -> Vec<String>,
) -> anyhow::Result<()> {
    text(&Table::of(header, items, row).into())
}

/// `tcp 10.0.0.1:40000 -> 10.0.0.2:5201`, `[v6]:port`, or `ip a -> b (2-tuple)`.
pub fn flow(f: &FlowTuple) -> String {
    let proto = match f.proto {
        L4Proto::Tcp => "tcp",
        L4Proto::Udp => "udp",
        L4Proto::Other => return format!("ip {} -> {} (2-tuple)", f.src, f.dst),
    };
    format!(
        "{proto} {} -> {}",
        SocketAddr::new(f.src, f.src_port),
        SocketAddr::new(f.dst, f.dst_port)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_print_v6_addresses_in_brackets() {
        for (src, dst, proto, text) in [
            (
                "10.0.0.1",
                "10.0.0.2",
                L4Proto::Tcp,
                "tcp 10.0.0.1:40000 -> 10.0.0.2:5201",
            ),
            (
                "fd00::1",
                "fd00::2",
                L4Proto::Udp,
                "udp [fd00::1]:40000 -> [fd00::2]:5201",
            ),
        ] {
            let f = FlowTuple::new(
                src.parse().unwrap(),
                40000,
                dst.parse().unwrap(),
                5201,
                proto,
            );
            assert_eq!(flow(&f), text);
        }
    }

    #[test]
    fn a_stat_prints_with_its_interval_or_na() {
        let stat = |ci95| stats::Stat { mean: 0.5, ci95 };
        assert_eq!(pm(stat(Some(0.01)), 100.0, 1), "50.0 ± 1.0");
        assert_eq!(pm(stat(None), 1.0, 2), "0.50 ± n/a");
    }

    #[test]
    fn unit_variants_print_their_json_names() {
        assert_eq!(
            serde_name(&toe::input::Locking::PerFlowBatch),
            "per-flow-batch"
        );
        assert_eq!(serde_name(&exp::toe::Stack::Linux), "linux");
    }
}
