//! `steer bench list`: the selected cases with their command lines.

use plot::text::{Present, Table, Text};
use serde::{Serialize, Serializer};

use crate::case::Case;

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
}
