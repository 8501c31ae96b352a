//! Results as a person reads them in a terminal: aligned tables, labelled
//! rows and lines. Each library says how its results read ([`Present`]),
//! beside the result types, so the binary only chooses between this text
//! and the result's JSON and prints one of them.
//!
//! A value that was not measured reads "n/a" ([`measured`], [`or_na`]),
//! never a 0 that reads as a value.

use std::fmt;

/// How a result reads as text, where a script reads its JSON.
pub trait Present {
    fn text(&self) -> Text;
}

/// A table with a header row, columns padded to their widest cell. A first
/// column of names (any cell that is not a number) is left-aligned; every
/// other column is right-aligned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table of `header` and no rows yet.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// A table of one `row` per item.
    pub fn of<T>(
        header: &[&str],
        items: impl IntoIterator<Item = T>,
        row: impl FnMut(T) -> Vec<String>,
    ) -> Self {
        Self {
            rows: items.into_iter().map(row).collect(),
            ..Self::new(header)
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let names_first = self
            .rows
            .iter()
            .any(|row| row.first().is_some_and(|c| c.parse::<f64>().is_err()));
        let line = |cells: &[String]| -> String {
            cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| match i {
                    0 if names_first => format!("{c:<w$}"),
                    _ => format!("{c:>w$}"),
                })
                .collect::<Vec<_>>()
                .join("  ")
        };
        writeln!(f, "{}", line(&self.header))?;
        for row in &self.rows {
            writeln!(f, "{}", line(row))?;
        }
        Ok(())
    }
}

/// Aligned `label  value` rows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rows(pub Vec<(String, String)>);

impl Rows {
    pub fn new() -> Self {
        Self::default()
    }

    /// These rows and `label  value`.
    pub fn row(mut self, label: &str, value: impl Into<String>) -> Self {
        self.push(label, value);
        self
    }

    pub fn push(&mut self, label: &str, value: impl Into<String>) {
        self.0.push((label.to_string(), value.into()));
    }
}

impl fmt::Display for Rows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.0.iter().map(|(l, _)| l.chars().count()).max();
        let width = width.unwrap_or(0);
        for (label, value) in &self.0 {
            writeln!(f, "{label:<width$}  {value}")?;
        }
        Ok(())
    }
}

/// One block of a [`Text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    Table(Table),
    Rows(Rows),
    /// A line of its own (a heading, a summary, a note).
    Line(String),
}

/// Blocks printed one after the other, each line ended by a newline.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text(pub Vec<Block>);

impl Text {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn table(mut self, table: Table) -> Self {
        self.0.push(Block::Table(table));
        self
    }

    pub fn rows(mut self, rows: Rows) -> Self {
        self.0.push(Block::Rows(rows));
        self
    }

    pub fn line(mut self, line: impl Into<String>) -> Self {
        self.0.push(Block::Line(line.into()));
        self
    }

    /// An empty line between blocks.
    pub fn blank(self) -> Self {
        self.line("")
    }

    /// These blocks, then `other`'s.
    pub fn then(mut self, other: Text) -> Self {
        self.0.extend(other.0);
        self
    }
}

impl From<Table> for Text {
    fn from(table: Table) -> Self {
        Text::new().table(table)
    }
}

impl From<Rows> for Text {
    fn from(rows: Rows) -> Self {
        Text::new().rows(rows)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for block in &self.0 {
            match block {
                Block::Table(t) => write!(f, "{t}")?,
                Block::Rows(r) => write!(f, "{r}")?,
                Block::Line(l) => writeln!(f, "{l}")?,
            }
        }
        Ok(())
    }
}

/// A measured number with `digits` decimals, or "n/a" when it was not
/// measured.
pub fn measured(value: Option<f64>, digits: usize) -> String {
    or_na(value, |v| format!("{v:.digits$}"))
}

/// `show(value)`, or "n/a" when the value was not measured.
pub fn or_na<T>(value: Option<T>, show: impl FnOnce(T) -> String) -> String {
    value.map_or_else(|| "n/a".into(), show)
}

/// A fraction as a percentage with `digits` decimals and `unit` after it
/// ("%" or ""), or "n/a" when it was not measured.
pub fn percent(fraction: Option<f64>, digits: usize, unit: &str) -> String {
    or_na(fraction, |f| format!("{:.digits$}{unit}", f * 100.0))
}

/// "mean ± ci" times `scale`, or "mean ± n/a" without an interval (one
/// sample).
pub fn pm(mean: f64, ci95: Option<f64>, scale: f64, digits: usize) -> String {
    let ci = or_na(ci95, |ci| format!("{:.digits$}", ci * scale));
    format!("{:.digits$} ± {ci}", mean * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_go_left_and_numbers_right() {
        let t = Table::of(&["name", "n"], [("a", 1), ("bcd", 100)], |(s, n)| {
            vec![s.to_string(), n.to_string()]
        });
        assert_eq!(t.to_string(), "name    n\na       1\nbcd   100\n");
    }

    #[test]
    fn a_column_of_numbers_first_is_right_aligned() {
        let t = Table::of(&["port", "cpu"], [(40000, 1), (5, 12)], |(p, c)| {
            vec![p.to_string(), c.to_string()]
        });
        assert_eq!(t.to_string(), " port  cpu\n40000    1\n    5   12\n");
    }

    #[test]
    fn rows_align_their_labels_and_text_joins_blocks() {
        let text = Text::new()
            .line("title")
            .rows(Rows::new().row("a", "1").row("long", "2"))
            .blank()
            .table(Table::new(&["x"]));
        assert_eq!(text.to_string(), "title\na     1\nlong  2\n\nx\n");
    }

    #[test]
    fn an_absent_measurement_reads_na() {
        assert_eq!(measured(None, 2), "n/a");
        assert_eq!(measured(Some(0.0), 1), "0.0");
        assert_eq!(measured(Some(2.345), 2), "2.35");
        assert_eq!(pm(0.5, Some(0.01), 100.0, 1), "50.0 ± 1.0");
        assert_eq!(pm(0.5, None, 1.0, 2), "0.50 ± n/a");
        assert_eq!(percent(Some(0.0123), 3, "%"), "1.230%");
        assert_eq!(percent(None, 3, "%"), "n/a");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let t = Table::of(&["a", "b"], [("±", "x")], |(a, b)| {
            vec![a.to_string(), b.to_string()]
        });
        assert_eq!(t.to_string(), "a  b\n±  x\n");
    }
}
