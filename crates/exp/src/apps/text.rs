//! How an apps run reads: a line per run as it ends, then one row per
//! cell and stack beside Linux, and its chart: each engine's throughput
//! and p99 against Linux's per cell.

use plot::text::{or_na, pm, Table, Text};

use super::{AppsParams, AppsResult, Sample};
use crate::datapath::Stack;

impl AppsParams {
    /// The line a run starts with.
    pub fn progress_header(&self) -> String {
        let names: Vec<&str> = self.workload.iter().map(|w| w.name()).collect();
        let stacks: Vec<&str> = self.stacks().iter().map(|s| s.name()).collect();
        format!(
            "apps: {} on {}, {} s each, {} repetitions; server CPUs {:?}, client CPUs {:?}",
            names.join(", "),
            stacks.join(", "),
            self.seconds,
            self.repetitions,
            self.server_cpus,
            self.client_cpus
        )
    }
}

fn us(v: Option<f64>) -> String {
    or_na(v, |v| format!("{v:.0}"))
}

fn ratio(v: Option<f64>) -> String {
    or_na(v, |v| format!("{v:.2}"))
}

impl Sample {
    /// One line as the run ends.
    pub fn progress_line(&self) -> String {
        format!(
            "  rep {} {}: {} req/s, p99 {} µs, {} errors, server {} µs CPU/request, content {}",
            self.repetition,
            self.id,
            or_na(self.rate, |r| format!("{r:.0}")),
            us(self.client.p99_us),
            self.client.errors,
            us(self.server_cpu_us_per_request),
            if self.verification.passed() {
                "verified"
            } else {
                "WRONG"
            }
        )
    }
}

impl AppsResult {
    pub(super) fn render(&self) -> Text {
        let table = Table::of(
            &[
                "cell",
                "stack",
                "req/s",
                "vs linux",
                "p50 µs",
                "p99 µs",
                "p99.9 µs",
                "p99 vs linux",
                "server CPU µs/req",
                "vs linux",
                "errors",
                "content",
            ],
            &self.cells,
            |c| {
                vec![
                    c.cell.clone(),
                    c.stack.name().to_string(),
                    or_na(c.rate, |r| pm(r.mean, r.ci95, 1.0, 0)),
                    ratio(c.rate_vs_linux),
                    us(c.p50_us),
                    us(c.p99_us),
                    us(c.p999_us),
                    ratio(c.p99_vs_linux),
                    or_na(c.server_cpu_us_per_request, |v| format!("{v:.1}")),
                    ratio(c.server_cpu_vs_linux),
                    format!("{}{}", c.errors, server_errors(c.server_errors)),
                    if c.verified { "verified" } else { "WRONG" }.to_string(),
                ]
            },
        );
        let mut text = Text::new().table(table).line(
            "goals (issue 24): req/s vs linux at least 1, p99 and server CPU per request vs linux \
             at most 1",
        );
        text = text.line(format!(
            "placement: server side on CPUs {:?} (Linux: the server, RPS; the data path: the \
             server and the data path's thread), clients on CPUs {:?}{}",
            self.placement.server_cpus,
            self.placement.client_cpus,
            match self.placement.held {
                Some(true) => "",
                Some(false) => " (not all allowed here: threads ran where the scheduler put them)",
                None => " (the affinity mask could not be read: whether the pins held is unknown)",
            }
        ));
        for s in self.samples.iter().filter(|s| !s.server_errors.is_empty()) {
            text = text.line(format!(
                "server errors, {}: {}",
                s.id,
                s.server_errors.join("; ")
            ));
        }
        if let Some(why) = self
            .samples
            .iter()
            .find_map(|s| s.verification.first_wrong.as_ref())
        {
            text = text.line(format!("first wrong content: {why}"));
        }
        text.line(format!(
            "content: {}",
            if self.verified {
                "verified (every file byte for byte, every value read back as written)"
            } else {
                "WRONG (see above)"
            }
        ))
    }
}

fn server_errors(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" (+{n} server)")
    }
}

/// Each engine's throughput and p99 against Linux's, per cell (1: as
/// Linux; the goals are throughput at least 1, p99 at most 1).
pub(super) fn svg(r: &AppsResult) -> String {
    let mut names: Vec<&str> = Vec::new();
    for c in &r.cells {
        if !names.contains(&c.cell.as_str()) {
            names.push(&c.cell);
        }
    }
    let engines: Vec<Stack> = r
        .params
        .stacks()
        .into_iter()
        .filter(|s| *s != Stack::Linux)
        .collect();
    let mut chart = plot::BarChart::new("steer exp apps: each engine against Linux, per cell")
        .x_label("cell")
        .y_label("ratio to Linux (mean)")
        .groups(names.iter().copied());
    for stack in engines {
        for (metric, pick) in [
            (
                "req/s",
                (|c: &super::Cell| c.rate_vs_linux) as fn(&super::Cell) -> Option<f64>,
            ),
            ("p99", |c: &super::Cell| c.p99_vs_linux),
        ] {
            let values = names
                .iter()
                .map(|n| {
                    r.cells
                        .iter()
                        .find(|c| c.cell == *n && c.stack == stack)
                        .and_then(pick)
                        .map(plot::Value::new)
                })
                .collect();
            chart = chart.series(&format!("{} {metric}", stack.name()), values);
        }
    }
    chart
        .note("req/s: at least 1 is the goal; p99: at most 1")
        .svg()
}
