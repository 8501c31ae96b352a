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

/// What a report contains.
#[derive(Debug, Clone, Serialize)]
pub struct ReportSummary {
    pub index: String,
    pub runs: usize,
    pub cases: usize,
    pub charts: usize,
    pub raw_files: usize,
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
            for rep in &r.repetitions {
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
                        .entry((*run, r.case_id.clone()))
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
            if !case_ids.contains(&r.case_id) {
                case_ids.push(r.case_id.clone());
            }
        }
    }
    let find = |run: i64, id: &str| {
        rows.get(&run)
            .and_then(|v| v.iter().find(|r| r.case_id == id))
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
            let value = r.samples.iter().next().and_then(|(name, m)| {
                Summary::of(&m.values)
                    .map(|s| format!("{} {} {}", esc(name), num(s.mean), esc(&m.unit)))
            });
            let title = if r.reason.is_empty() {
                format!("{} in {:.1} s", r.state, r.seconds)
            } else {
                format!("{}: {}", r.state, r.reason)
            };
            let _ = write!(
                h,
                "<td class=\"cell st-{st}{chg}\" data-state=\"{st}\" data-run=\"{run}\" title=\"{title}\"><span class=\"state\">{st}</span>",
                st = r.state.as_str(),
                run = run.id,
                title = esc(&title)
            );
            if let Some(v) = value {
                let _ = write!(h, "<br><span class=\"value\">{v}</span>");
            }
            if !r.reason.is_empty() {
                let _ = write!(
                    h,
                    "<br><span class=\"reason\">{}</span>",
                    esc(&short(&r.reason, 70))
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
    h.push_str("<h2>Metrics over runs</h2>\n<p class=\"sub\">Mean per run (dot) with min..max of the samples (bar); x: run and commit.</p>\n");
    let mut charts = 0;
    for id in &case_ids {
        let mut metric_names: Vec<String> = Vec::new();
        for run in runs {
            if let Some(r) = find(run.id, id) {
                for k in r.samples.keys() {
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
            for run in runs {
                if let Some(m) = find(run.id, id).and_then(|r| r.samples.get(metric)) {
                    unit = m.unit.clone();
                    if let Some(s) = Summary::of(&m.values) {
                        points.push((format!("{} {}", run.id, run.git_commit), s));
                    }
                }
            }
            if points.is_empty() {
                continue;
            }
            h.push_str(&svg_chart(&format!("{metric} ({unit})"), &points));
            charts += 1;
        }
        h.push_str("</section>\n");
    }
    h.push_str("</body>\n</html>\n");
    (h, case_ids.len(), charts)
}

fn svg_chart(title: &str, points: &[(String, Summary)]) -> String {
    let (w, hgt, left, right, top, bottom) = (420.0, 170.0, 56.0, 10.0, 22.0, 40.0);
    let lo = points
        .iter()
        .map(|(_, s)| s.min)
        .fold(f64::INFINITY, f64::min);
    let hi = points
        .iter()
        .map(|(_, s)| s.max)
        .fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if hi - lo < 1e-12 {
        (
            lo - (lo.abs() * 0.1).max(0.5),
            hi + (hi.abs() * 0.1).max(0.5),
        )
    } else {
        let pad = (hi - lo) * 0.08;
        (lo - pad, hi + pad)
    };
    let n = points.len();
    let x = |i: usize| {
        if n == 1 {
            left + (w - left - right) / 2.0
        } else {
            left + (w - left - right) * i as f64 / (n - 1) as f64
        }
    };
    let y = |v: f64| top + (hgt - top - bottom) * (1.0 - (v - lo) / (hi - lo));
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{hgt}\" viewBox=\"0 0 {w} {hgt}\" role=\"img\"><title>{t}</title>\
         <text x=\"{left}\" y=\"14\" class=\"ct\">{t}</text>\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{yb}\" class=\"axis\"/>\
         <line x1=\"{left}\" y1=\"{yb}\" x2=\"{xr}\" y2=\"{yb}\" class=\"axis\"/>\
         <text x=\"{lx}\" y=\"{yt}\" class=\"tick\" text-anchor=\"end\">{hi_s}</text>\
         <text x=\"{lx}\" y=\"{yb}\" class=\"tick\" text-anchor=\"end\">{lo_s}</text>",
        t = esc(title),
        yb = hgt - bottom,
        xr = w - right,
        lx = left - 4.0,
        yt = top + 8.0,
        hi_s = num(hi),
        lo_s = num(lo),
    );
    let path: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, (_, p))| format!("{:.1},{:.1}", x(i), y(p.mean)))
        .collect();
    if n > 1 {
        let _ = write!(
            s,
            "<polyline class=\"line\" points=\"{}\"/>",
            path.join(" ")
        );
    }
    for (i, (label, p)) in points.iter().enumerate() {
        let _ = write!(
            s,
            "<line class=\"bar\" x1=\"{xi:.1}\" y1=\"{:.1}\" x2=\"{xi:.1}\" y2=\"{:.1}\"/>\
             <circle class=\"dot\" cx=\"{xi:.1}\" cy=\"{:.1}\" r=\"3\"><title>{} : mean {} (n={}, {}..{})</title></circle>",
            y(p.max),
            y(p.min),
            y(p.mean),
            esc(label),
            num(p.mean),
            p.n,
            num(p.min),
            num(p.max),
            xi = x(i)
        );
        if n <= 12 || i % n.div_ceil(12) == 0 {
            let _ = write!(
                s,
                "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x(i),
                hgt - bottom + 14.0,
                esc(label.split(' ').next().unwrap_or(""))
            );
        }
    }
    s.push_str("</svg>");
    s
}

fn num(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(0.01..100_000.0).contains(&a) {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
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

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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
svg.chart { border: 1px solid #ddd; margin: 0 8px 8px 0; background: #fff; }
svg .axis { stroke: #888; } svg .line { fill: none; stroke: #36c; stroke-width: 1.5; } svg .bar { stroke: #36c; stroke-width: 1; }
svg .dot { fill: #36c; } svg .ct { font: 11px sans-serif; } svg .tick { font: 9px sans-serif; fill: #555; }
</style>
</head>
<body>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_escaping() {
        assert_eq!(date(0), "1970-01-01 00:00");
        assert_eq!(date(1_700_000_000), "2023-11-14 22:13");
        assert_eq!(esc("<a href=\"x\">&"), "&lt;a href=&quot;x&quot;&gt;&amp;");
    }
}
