//! `steer bench report -o DIR`: one static page, no server, no network.
//!
//! `DIR/index.html` holds a case x run table coloured by state (as in the
//! OpenBSD regress/perform pages) and by change against the case's previous
//! run, one inline SVG chart per metric over runs, and links to the raw
//! outputs, copied to `DIR/raw/<run>/`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::compare::{case_change, Verdict};
use crate::db::{History, ResultRow, RunRow};
use crate::runner::file_stem;
use crate::stats::Summary;
use crate::{BenchError, State};
use plot::text::{Present, Text};
use plot::{esc, num};

/// What a report contains.
#[derive(Debug, Clone, Serialize)]
pub struct ReportSummary {
    pub index: String,
    pub runs: usize,
    pub cases: usize,
    pub charts: usize,
    pub raw_files: usize,
}

/// The page written and what it holds, on one line.
impl Present for ReportSummary {
    fn text(&self) -> Text {
        Text::new().line(format!(
            "{} ({} runs, {} cases, {} charts, {} raw files)",
            self.index, self.runs, self.cases, self.charts, self.raw_files
        ))
    }
}

/// Writes `dir/index.html` (and `dir/raw/`) from the last `max_runs` runs.
pub fn write_report(
    history: &History,
    dir: &Path,
    max_runs: usize,
) -> Result<ReportSummary, BenchError> {
    let mut runs = history.runs()?;
    if runs.len() > max_runs {
        runs.drain(..runs.len() - max_runs);
    }
    let mut rows: BTreeMap<i64, Vec<ResultRow>> = BTreeMap::new();
    for run in &runs {
        rows.insert(run.id, history.results(run.id)?);
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
    let mut raw_files = 0;
    let mut links: BTreeMap<(i64, String), Vec<(String, String)>> = BTreeMap::new();
    for (run, results) in &rows {
        for r in results {
            for rep in &r.result.repetitions {
                for (label, file) in [("json", &rep.output), ("stderr", &rep.stderr)] {
                    let Some(src) = file.as_deref().map(PathBuf::from) else {
                        continue;
                    };
                    let Some(name) = src.file_name() else {
                        continue;
                    };
                    let rel = format!("raw/{run}/{}", name.to_string_lossy());
                    let dst = dir.join(&rel);
                    if !src.exists() {
                        continue;
                    }
                    if let Some(parent) = dst.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| {
                            BenchError::io(format!("create {}", parent.display()), e)
                        })?;
                    }
                    std::fs::copy(&src, &dst).map_err(|e| {
                        BenchError::io(format!("copy {} to {}", src.display(), dst.display()), e)
                    })?;
                    raw_files += 1;
                    links
                        .entry((*run, r.result.case_id.clone()))
                        .or_default()
                        .push((format!("r{} {label}", rep.repetition), rel));
                }
            }
        }
    }
    let (html, cases, charts) = render(&runs, &rows, &links);
    let index = dir.join("index.html");
    std::fs::write(&index, html)
        .map_err(|e| BenchError::io(format!("write {}", index.display()), e))?;
    Ok(ReportSummary {
        index: index.display().to_string(),
        runs: runs.len(),
        cases,
        charts,
        raw_files,
    })
}

type Links = BTreeMap<(i64, String), Vec<(String, String)>>;

fn render(
    runs: &[RunRow],
    rows: &BTreeMap<i64, Vec<ResultRow>>,
    links: &Links,
) -> (String, usize, usize) {
    // Case order: as in the newest run, then older-only cases.
    let mut case_ids: Vec<String> = Vec::new();
    for run in runs.iter().rev() {
        for r in rows.get(&run.id).into_iter().flatten() {
            if !case_ids.contains(&r.result.case_id) {
                case_ids.push(r.result.case_id.clone());
            }
        }
    }
    let find = |run: i64, id: &str| {
        rows.get(&run)
            .and_then(|v| v.iter().find(|r| r.result.case_id == id))
    };
    let mut h = String::new();
    h.push_str(HEAD);
    let newest = runs.last();
    let _ = write!(
        h,
        "<h1>Steer test matrix</h1>\n<p class=\"sub\">{} runs, {} cases{}</p>\n",
        runs.len(),
        case_ids.len(),
        newest.map_or(String::new(), |r| format!(
            "; newest run {} at commit <code>{}</code>, kernel {}, {} ({} cores)",
            r.id,
            esc(&r.git_commit),
            esc(&r.kernel),
            esc(&r.cpu_model),
            r.cores
        ))
    );
    // Legend.
    h.push_str("<table class=\"legend\"><tr>");
    for s in State::ALL {
        let _ = write!(
            h,
            "<td class=\"st-{0}\" title=\"{1}\">{0}</td>",
            s.as_str(),
            esc(s.meaning())
        );
    }
    h.push_str("</tr></table>\n<ul class=\"legend-text\">");
    for s in State::ALL {
        let _ = write!(h, "<li><b>{}</b> {}</li>", s.as_str(), esc(s.meaning()));
    }
    h.push_str("<li>cell border: <span class=\"chg-worse\">worse</span> / <span class=\"chg-better\">better</span> \
        beyond the noise band (mean ± 2 standard errors, at least min..max of the samples) than the case's previous run</li></ul>\n");

    // The case x run table, newest run first.
    h.push_str("<table id=\"matrix\" class=\"matrix\">\n<thead><tr><th>case</th>");
    for run in runs.iter().rev() {
        let when = date(run.started);
        let _ = write!(
            h,
            "<th class=\"run\" data-run=\"{id}\">run {id}<br>{when}<br><code>{commit}</code><br>{kind}{status}</th>",
            id = run.id,
            commit = esc(&run.git_commit),
            kind = if run.quick { "quick" } else { "full" },
            status = if run.status == "complete" {
                String::new()
            } else {
                format!("<br><span class=\"status\">{}</span>", esc(&run.status))
            }
        );
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for id in &case_ids {
        let _ = write!(
            h,
            "<tr class=\"case\" id=\"case-{}\" data-case=\"{}\"><th class=\"name\"><a href=\"#chart-{0}\">{1}</a></th>",
            file_stem(id),
            esc(id)
        );
        for (i, run) in runs.iter().enumerate().rev() {
            let Some(r) = find(run.id, id) else {
                h.push_str("<td class=\"empty\"></td>");
                continue;
            };
            let prev = runs[..i].iter().rev().find_map(|p| find(p.id, id));
            let change = prev.map(|p| case_change(id, Some(p), Some(r)).verdict);
            let chg = match change {
                Some(Verdict::Regression) | Some(Verdict::Worse) => " chg-worse",
                Some(Verdict::Fixed) | Some(Verdict::Better) => " chg-better",
                Some(Verdict::StateChanged) | Some(Verdict::Changed) => " chg-changed",
                _ => "",
            };
            let value = r.result.metrics.iter().next().and_then(|(name, m)| {
                Summary::of(&m.values)
                    .map(|s| format!("{} {} {}", esc(name), num(s.mean), esc(&m.unit)))
            });
            let title = if r.result.reason.is_empty() {
                format!("{} in {:.1} s", r.result.state, r.result.seconds)
            } else {
                format!("{}: {}", r.result.state, r.result.reason)
            };
            let _ = write!(
                h,
                "<td class=\"cell st-{st}{chg}\" data-state=\"{st}\" data-run=\"{run}\" title=\"{title}\"><span class=\"state\">{st}</span>",
                st = r.result.state.as_str(),
                run = run.id,
                title = esc(&title)
            );
            if let Some(v) = value {
                let _ = write!(h, "<br><span class=\"value\">{v}</span>");
            }
            if !r.result.reason.is_empty() {
                let _ = write!(
                    h,
                    "<br><span class=\"reason\">{}</span>",
                    esc(&short(&r.result.reason, 70))
                );
            }
            if let Some(files) = links.get(&(run.id, id.clone())) {
                h.push_str("<br>");
                for (label, rel) in files {
                    let _ = write!(
                        h,
                        "<a class=\"raw\" href=\"{}\">{}</a> ",
                        esc(rel),
                        esc(label)
                    );
                }
            }
            h.push_str("</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n");

    // One chart per case and metric, oldest run left.
    h.push_str("<h2>Metrics over runs</h2>\n<p class=\"sub\">Mean per run (dot) with min..max of the samples (whisker); x: run.</p>\n");
    let mut charts = 0;
    for id in &case_ids {
        let mut metric_names: Vec<String> = Vec::new();
        for run in runs {
            if let Some(r) = find(run.id, id) {
                for k in r.result.metrics.keys() {
                    if !metric_names.contains(k) {
                        metric_names.push(k.clone());
                    }
                }
            }
        }
        let _ = write!(
            h,
            "<section class=\"charts\" id=\"chart-{}\"><h3>{}</h3>",
            file_stem(id),
            esc(id)
        );
        for metric in &metric_names {
            let mut points = Vec::new();
            let mut unit = String::new();
            // Every run of the case; one without a value for the metric
            // shows as n/a.
            for run in runs {
                let Some(r) = find(run.id, id) else {
                    continue;
                };
                let m = r.result.metrics.get(metric);
                if let Some(m) = m {
                    unit = m.unit.clone();
                }
                points.push((run.id, m.and_then(|m| Summary::of(&m.values))));
            }
            if points.iter().all(|(_, s)| s.is_none()) {
                continue;
            }
            h.push_str(&svg_chart(metric, &unit, &points));
            charts += 1;
        }
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    (h, case_ids.len(), charts)
}

/// One metric over runs: the mean per run (dot, joined by a line) with
/// min..max of its samples (whisker); a run without a value has none.
fn svg_chart(metric: &str, unit: &str, points: &[(i64, Option<Summary>)]) -> String {
    let values = points
        .iter()
        .enumerate()
        .filter_map(|(i, (_, s))| {
            let s = s.as_ref()?;
            Some(plot::Point {
                x: i as f64,
                value: plot::Value::with_range(s.mean, s.min, s.max),
            })
        })
        .collect();
    let runs = points.iter().map(|(run, _)| run.to_string()).collect();
    plot::LineChart::new(&format!("{metric} ({unit})"), plot::XAxis::Categories(runs))
        .fit_y()
        .size(440.0, 230.0)
        .x_label("run")
        .y_label(unit)
        .series("mean", values)
        .note("whiskers: min..max of the samples")
        .svg()
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        format!("{}...", s.chars().take(n).collect::<String>())
    } else {
        s.into()
    }
}

/// `YYYY-MM-DD HH:MM` (UTC) from Unix seconds.
fn date(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

const HEAD: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Steer test matrix</title>
<style>
body { font: 13px/1.35 system-ui, sans-serif; margin: 1.2em; color: #222; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } .sub { color: #555; margin: .2em 0 .8em; }
table.matrix { border-collapse: collapse; } .matrix th, .matrix td { border: 1px solid #bbb; padding: 3px 6px; vertical-align: top; }
.matrix th.name { text-align: left; white-space: nowrap; font-weight: normal; font-family: monospace; }
.matrix th.run { font-weight: normal; font-size: 11px; white-space: nowrap; background: #eee; }
td.cell { font-size: 11px; min-width: 8em; } .state { font-weight: bold; } .reason { color: #333; font-size: 10px; }
a.raw { font-size: 10px; }
.st-PASS { background: #8f8; } .st-FAIL { background: #f88; } .st-NOVALUE { background: #fc8; }
.st-NOEXIT { background: #f8f; } .st-TIMEOUT { background: #8cf; } .st-NORUN { background: #ddd; }
.st-NOLOG { background: #ff8; } td.empty { background: #fff; }
.chg-worse { outline: 3px solid #c00; outline-offset: -3px; } .chg-better { outline: 3px solid #070; outline-offset: -3px; }
.chg-changed { outline: 3px dashed #555; outline-offset: -3px; }
table.legend td { padding: 2px 8px; border: 1px solid #bbb; font-weight: bold; } table.legend { border-collapse: collapse; }
ul.legend-text { font-size: 11px; color: #444; columns: 2; } .status { color: #a00; font-weight: bold; }
section.charts { margin: .6em 0 1.2em; } section.charts h3 { font: 12px monospace; margin: .3em 0; }
section.charts svg { border: 1px solid #ddd; margin: 0 8px 8px 0; }
</style>
</head>
<body>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_as_the_page_and_its_counts() {
        let summary = ReportSummary {
            index: "out/index.html".into(),
            runs: 3,
            cases: 4,
            charts: 5,
            raw_files: 30,
        };
        assert_eq!(
            summary.text().to_string(),
            "out/index.html (3 runs, 4 cases, 5 charts, 30 raw files)\n"
        );
    }

    #[test]
    fn dates() {
        assert_eq!(date(0), "1970-01-01 00:00");
        assert_eq!(date(1_700_000_000), "2023-11-14 22:13");
    }

    #[test]
    fn metric_figure() {
        let points = [
            (7, Summary::of(&[1.0, 2.0, 3.0])),
            (8, Summary::of(&[2.5])),
            (9, Summary::of(&[2.0, 2.2])),
        ];
        let o = plot::outline(&svg_chart("rate", "Gbit/s", &points)).unwrap();
        assert_eq!(o.title, "rate (Gbit/s)");
        assert_eq!(o.y_label, "Gbit/s");
        assert_eq!(o.x_label, "run");
        assert_eq!(o.legend, vec!["mean"]);
        assert_eq!(o.x_ticks, vec!["7", "8", "9"]);
        assert_eq!((o.points, o.whiskers, o.not_available), (3, 3, 0));
        assert_eq!(o.note.as_deref(), Some("whiskers: min..max of the samples"));
    }

    #[test]
    fn metric_figure_with_a_run_without_the_value() {
        let points = [(7, Summary::of(&[1.0, 2.0])), (8, None)];
        let o = plot::outline(&svg_chart("rate <&>", "Gbit/s", &points)).unwrap();
        assert_eq!(o.title, "rate <&> (Gbit/s)");
        assert_eq!((o.points, o.not_available), (1, 1));
        assert_eq!(
            o.note.as_deref(),
            Some("n/a: not measured; whiskers: min..max of the samples")
        );
    }
}
