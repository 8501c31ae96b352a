//! `steer bench list`: the selected cases with their command lines.

use plot::text::{Present, Table, Text};
use serde::{Serialize, Serializer};

use crate::case::{Case, CaseSpec, CheckSpec};

/// The cases a run (`quick` or not) of `steer` in `root` would run.
#[derive(Debug, Clone)]
pub struct CaseList {
    pub cases: Vec<Case>,
    pub quick: bool,
    /// The steer binary and the working directory the JSON's command lines
    /// name (`{steer}`, `{root}`).
    pub steer: String,
    pub root: String,
}

/// Each case's [`Case::listing`], in matrix order.
impl Serialize for CaseList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            self.cases
                .iter()
                .map(|c| c.listing(self.quick, &self.steer, &self.root)),
        )
    }
}

/// One row per case: its timeout, metrics and command line. The command
/// reads as typed in the repository (`steer`, `.`), shorter than the
/// absolute paths the JSON gives a script.
impl Present for CaseList {
    fn text(&self) -> Text {
        let header = ["case", "timeout", "metrics", "command"];
        Table::of(&header, &self.cases, |c| {
            let metrics: Vec<&str> = c.spec.metrics.iter().map(|m| m.name.as_str()).collect();
            vec![
                c.id.clone(),
                c.timeout(self.quick).to_string(),
                metrics.join(","),
                c.argv(self.quick, "steer", ".").join(" "),
            ]
        })
        .into()
    }
}

/// The table of cases and what each checks, in Markdown, one row per case
/// (not per cell): its name, description and every check with the cells it
/// applies to. docs/bench.md holds it between `CHECKS_TABLE_BEGIN` and
/// `CHECKS_TABLE_END`, and a test holds the doc to cases.toml (issue 27,
/// "Docs that drift": the hand-written table listed checks that were gone).
pub fn checks_table<'a>(specs: impl IntoIterator<Item = &'a CaseSpec>) -> String {
    let mut out = String::from(
        "| case | what it runs | checks (besides: every metric is a number) |\n|---|---|---|\n",
    );
    for spec in specs {
        let checks: Vec<String> = spec.checks.iter().map(check_line).collect();
        let checks = if checks.is_empty() {
            "none".to_string()
        } else {
            checks.join("; ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            spec.name,
            cell(&spec.description),
            checks
        ));
    }
    out
}

/// The line docs/bench.md has before the generated table.
pub const CHECKS_TABLE_BEGIN: &str =
    "<!-- generated from crates/bench/cases.toml by `steer bench list --checks-table`; edit the cases, not this table -->";
/// The line docs/bench.md has after it.
pub const CHECKS_TABLE_END: &str = "<!-- end of generated table -->";

/// The cases of `cases` (cells of one case give one row), in matrix order.
pub fn specs(cases: &[Case]) -> Vec<&CaseSpec> {
    let mut out: Vec<&CaseSpec> = Vec::new();
    for c in cases {
        if !out.iter().any(|s| s.name == c.spec.name) {
            out.push(&c.spec);
        }
    }
    out
}

/// "about (`pointer op value`, only flows = 16, 30)".
fn check_line(check: &CheckSpec) -> String {
    let against = match (&check.same_as, &check.value) {
        (Some(other), _) => format!(" {other}"),
        (None, Some(v)) => format!(" {v}"),
        (None, None) => String::new(),
    };
    let mut line = format!("`{} {}{}`", check.pointer, check.op, against);
    if !check.when.is_empty() {
        let when: Vec<String> = check
            .when
            .iter()
            .map(|(k, vs)| {
                let vs: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
                format!("{k} = {}", vs.join(", "))
            })
            .collect();
        line.push_str(&format!(" when {}", when.join("; ")));
    }
    if check.about.is_empty() {
        cell(&line)
    } else {
        cell(&format!("{} ({line})", check.about))
    }
}

/// Text made safe for one Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CaseFile;

    fn list(quick: bool) -> CaseList {
        let text = r#"
[[case]]
name = "x"
command = ["{steer}", "exp", "--flows", "{flows}"]
quick_args = ["--quick"]
params = { flows = [1, 16] }
timeout = 600
quick_timeout = 60
metrics = [{ name = "rate", pointer = "/rate", better = "higher" }, { name = "drops", pointer = "/drops", better = "lower" }]
"#;
        CaseList {
            cases: CaseFile::parse(text, "t").unwrap().cases[0].expand(),
            quick,
            steer: "/bin/steer".into(),
            root: "/r".into(),
        }
    }

    #[test]
    fn the_json_is_each_case_s_listing_with_the_real_binary() {
        let json = serde_json::to_value(list(true)).unwrap();
        assert_eq!(json.as_array().map(Vec::len), Some(2));
        assert_eq!(json[1]["case_id"], "x/flows=16");
        assert_eq!(json[1]["timeout"], 60);
        assert_eq!(
            json[1]["command"],
            serde_json::json!(["/bin/steer", "exp", "--flows", "16", "--quick"])
        );
    }

    #[test]
    fn the_text_shows_timeouts_metrics_and_commands_as_typed() {
        assert_eq!(
            list(false).text().to_string(),
            "case        timeout     metrics               command\n\
             x/flows=1       600  rate,drops   steer exp --flows 1\n\
             x/flows=16      600  rate,drops  steer exp --flows 16\n"
        );
        let quick = list(true).text().to_string();
        assert!(
            quick.contains("  60  rate,drops  steer exp --flows 16 --quick\n"),
            "{quick}"
        );
    }

    /// docs/bench.md's table of cases and checks is the one cases.toml
    /// gives: a check added, changed or dropped changes the doc too.
    #[test]
    fn docs_bench_md_has_the_generated_checks_table() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench.md"),
        )
        .unwrap();
        let begin = doc
            .find(CHECKS_TABLE_BEGIN)
            .expect("docs/bench.md has the generated table's first line");
        let end = doc
            .find(CHECKS_TABLE_END)
            .expect("docs/bench.md has the generated table's last line");
        let in_doc = &doc[begin + CHECKS_TABLE_BEGIN.len() + 1..end];
        let file = CaseFile::builtin().unwrap();
        let generated = checks_table(&file.cases);
        assert!(
            in_doc == generated,
            "docs/bench.md's table differs from crates/bench/cases.toml: replace it with \
             the output of `steer bench list --checks-table`"
        );
    }

    #[test]
    fn a_checks_row_names_every_check_with_its_cells() {
        let file = CaseFile::parse(
            r#"
[[case]]
name = "x"
description = "a | b"
command = ["{steer}", "exp"]
params = { flows = [1, 16] }
checks = [
  { pointer = "/a", op = ">", value = 0, about = "flowed" },
  { pointer = "/b", op = "==", same_as = "/c", when = { flows = [16] } },
]
[[case]]
name = "y"
command = ["{steer}", "exp"]
"#,
            "t",
        )
        .unwrap();
        let table = checks_table(&file.cases);
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(
            rows,
            [
                "| `x` | a \\| b | flowed (`/a > 0`); `/b == /c` when flows = 16 |",
                "| `y` |  | none |",
            ]
        );
    }
}
