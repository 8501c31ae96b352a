//! `steer exp ooo`: flow completion times with 0, 1, 2 and unboundedly
//! many out-of-order intervals at the toe receiver, beside the thesis's
//! Table 5.3 (exp::ooo, docs/ooo.md).

use std::path::PathBuf;

use clap::Args;
use exp::ooo::{Cell, KindSummary, OooParams, OooResult, SenderCc, Tail, ThesisRow};
use toe::ooo::OooBound;

use super::exp::Common;
use crate::{exit, output};

/// Short requests and background uploads go to the toe data path through
/// the lab's wire (bottleneck, loss, reordering), sent by Linux NewReno
/// and by the data path's DCTCP (a toe endpoint in the sender's namespace;
/// the bottleneck marks CE past --ecn-mark-frames); the receiver keeps
/// each bound of out-of-order intervals in turn (thesis Table 5.3).
///
/// Example: sudo steer exp ooo --quick --svg ooo.svg
#[derive(Debug, Args)]
pub struct OooArgs {
    #[command(flatten)]
    pub params: OooParams,
    /// Write an SVG chart: p90 FCT per sender and bound against the same
    /// sender's unbounded receiver, beside Table 5.3.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(args: OooArgs, json: bool) -> anyhow::Result<i32> {
    let params = args.common.sized(args.params, OooParams::quick);
    params.check()?;
    let progress = output::progress(json);
    progress(&format!(
        "ooo: {} repetitions x {} senders ({}) x {} bounds x {} s; {} Mbit/s bottleneck, CE marks past {} frames for DCTCP, {}% loss, delays {}-{} us",
        params.repetitions,
        params.senders.len(),
        params
            .senders
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        params.bounds.len(),
        params.seconds,
        params.rate_mbit,
        params.ecn_mark_frames,
        params.loss_percent,
        params.delay_min_us,
        params.delay_max_us
    ));
    let result = exp::ooo::run(&params, |c| progress(&progress_line(c)))?;
    if let Some(path) = &args.svg {
        std::fs::write(path, exp::ooo::svg(&result))?;
    }
    args.common.finish(json, &result, print_table)?;
    Ok(exit::ok_unless(!result.byte_exact))
}

fn progress_line(c: &Cell) -> String {
    let p = |v: &[f64], q| output::measured(stats::percentile(v, q), 1);
    format!(
        "  rep {} {:>7} {:>9} intervals: {} short (p90 {} ms), {} background (p90 {} ms), {} failed; wire lost {} + {} queue, reordered {}, CE marked {}{}",
        c.repetition,
        c.sender.to_string(),
        c.bound.to_string(),
        c.short_fct_ms.len(),
        p(&c.short_fct_ms, 90.0),
        c.background_fct_ms.len(),
        p(&c.background_fct_ms, 90.0),
        c.failed,
        c.wire.dropped_policy,
        c.wire.dropped_overload,
        c.wire.reordered,
        c.wire.ce_marked,
        if c.verified { "" } else { " (NOT VERIFIED)" }
    )
}

/// "12.3 +-0.4 (x1.05)": pooled percentile, CI of the per-repetition
/// ones, ratio to the unbounded receiver.
fn cell(t: &Tail, ratio: Option<f64>) -> String {
    let ci = t
        .per_repetition
        .as_ref()
        .and_then(|s| s.ci95)
        .map_or(String::new(), |c| format!(" +-{c:.1}"));
    format!(
        "{}{ci} (x{})",
        output::measured(t.pooled_ms, 1),
        output::measured(ratio, 2)
    )
}

fn row(sender: SenderCc, bound: OooBound, s: &KindSummary, b: &KindSummary) -> Vec<String> {
    vec![
        sender.to_string(),
        bound.to_string(),
        cell(&s.p90, s.p90_vs_unbounded),
        cell(&s.p99, s.p99_vs_unbounded),
        cell(&s.p99_9, s.p99_9_vs_unbounded),
        cell(&b.p90, b.p90_vs_unbounded),
        cell(&b.p99_9, b.p99_9_vs_unbounded),
        format!("{}/{}", s.flows, b.flows),
    ]
}

fn print_table(r: &OooResult) -> anyhow::Result<()> {
    let body: Vec<Vec<String>> = r
        .senders
        .iter()
        .flat_map(|s| {
            s.bounds
                .iter()
                .map(move |b| row(s.sender, b.bound, &b.short, &b.background))
        })
        .collect();
    output::table(
        &[
            "sender",
            "intervals",
            "short p90 ms",
            "short p99 ms",
            "short p99.9 ms",
            "bg p90 ms",
            "bg p99.9 ms",
            "flows",
        ],
        &body,
    )?;
    println!();
    let thesis: Vec<Vec<String>> = [
        (SenderCc::NewReno, &r.thesis_newreno),
        (SenderCc::Dctcp, &r.thesis_dctcp),
    ]
    .into_iter()
    .filter(|(s, _)| r.params.senders.contains(s))
    .flat_map(|(s, rows)| thesis_rows(s, rows))
    .collect();
    output::table(
        &[
            "Table 5.3",
            "intervals",
            "fg p90 ms",
            "fg p99.9 ms",
            "bg p90 ms",
            "bg p99.9 ms",
        ],
        &thesis,
    )?;
    println!(
        "(thesis: ns-3, 96-node leaf-spine incast, SACK; here: one lab bottleneck, no SACK: compare trends)"
    );
    for s in &r.senders {
        println!(
            "{}: CE marked {} frames at the bottleneck",
            s.sender, s.wire_ce_marked
        );
    }
    println!(
        "byte-exact: {} (every flow's reply carried its request's length and digest)",
        if r.byte_exact { "yes" } else { "NO" }
    );
    Ok(())
}

/// Table 5.3's rows of one congestion control, with their ratios to its
/// unbounded row.
fn thesis_rows(sender: SenderCc, rows: &[ThesisRow]) -> Vec<Vec<String>> {
    rows.iter()
        .zip(exp::ooo::thesis_ratios(rows))
        .map(|(t, ratios)| {
            let times = t.times_ms().into_iter().zip(ratios).map(|(v, x)| match x {
                Some(x) => format!("{v} (x{x:.2})"),
                None => v.to_string(),
            });
            [sender.to_string(), t.bound.to_string()]
                .into_iter()
                .chain(times)
                .collect()
        })
        .collect()
}
