//! `steer exp toe`: the userspace TCP data path against Linux TCP on the
//! same lab path (exp::toe, docs/toe.md).

use clap::Args;
use exp::toe::{Progress, ToeParams, ToeResult};

use super::exp::Common;
use crate::{exit, output};

#[derive(Debug, Args)]
pub struct ToeArgs {
    #[command(flatten)]
    pub params: ToeParams,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(args: ToeArgs, json: bool) -> anyhow::Result<i32> {
    let params = args.common.sized(args.params, ToeParams::quick);
    let progress = output::progress(json);
    progress(&format!(
        "toe: {} repetitions of a {} MiB stream and {} {}-byte RPCs, toe data path vs Linux TCP",
        params.repetitions,
        params.bytes >> 20,
        params.rpcs,
        params.rpc_size
    ));
    let result = exp::toe::run(&params, |p| progress(&progress_line(&p)))?;
    args.common.finish(json, &result, print_table)?;
    Ok(exit::ok_unless(!result.byte_exact))
}

fn progress_line(p: &Progress<'_>) -> String {
    match p {
        Progress::Stream(s) => format!(
            "  rep {} {:>5} stream: {} Gbit/s{}",
            s.repetition,
            output::serde_name(&s.stack),
            output::measured(s.gbit_per_s, 2),
            if s.verified { "" } else { " (BYTES DIFFER)" }
        ),
        Progress::Locking(l) => format!(
            "  rep {} input {:>14}, {:>2} streams: {:.2} M segments/s{}",
            l.repetition,
            output::serde_name(&l.run.locking),
            l.run.workload.streams,
            l.run.segments_per_s / 1e6,
            if l.complete { "" } else { " (INCOMPLETE)" }
        ),
        Progress::Ablation(a) => format!(
            "  ablation {:<34} {} Mbit/s, p50 {} us",
            a.design,
            output::measured(Some(a.result.mbit_per_s), 1),
            output::measured(a.result.p50_us, 0)
        ),
        Progress::Rpc(r) => format!(
            "  rep {} {:>5} rpc:    p50 {} us, p99 {} us{}",
            r.repetition,
            output::serde_name(&r.stack),
            output::measured(r.p50_us, 1),
            output::measured(r.p99_us, 1),
            if r.verified { "" } else { " (ECHO DIFFERS)" }
        ),
    }
}

fn print_table(r: &ToeResult) -> anyhow::Result<()> {
    let body = vec![
        vec![
            "toe".into(),
            output::measured(r.toe_stream_gbit, 2),
            output::measured(r.toe_rpc_p50_us, 1),
        ],
        vec![
            "linux".into(),
            output::measured(r.linux_stream_gbit, 2),
            output::measured(r.linux_rpc_p50_us, 1),
        ],
        vec![
            "toe / linux".into(),
            output::measured(r.stream_ratio, 2),
            output::measured(r.rpc_p50_ratio, 2),
        ],
    ];
    output::table(&["stack", "stream Gbit/s", "RPC p50 us"], &body)?;
    if let Some(c) = &r.stage_cycles {
        println!();
        output::table(
            &["stage", &format!("{} per segment", c.unit)],
            &[
                ("netif", c.netif),
                ("pre-processing", c.pre),
                ("protocol", c.protocol),
                ("post-processing", c.post),
                ("payload copy", c.copy),
                ("total", c.total),
            ]
            .iter()
            .map(|(s, v)| vec![s.to_string(), format!("{v:.0}")])
            .collect::<Vec<_>>(),
        )?;
    }
    println!();
    output::table_of(
        &[
            "Table 4.4 design",
            "Mbit/s",
            "p50 us",
            "p99 us",
            "p99.99 us",
        ],
        r.ablation.iter(),
        |a| {
            vec![
                a.design.into(),
                output::measured(Some(a.result.mbit_per_s), 1),
                output::measured(a.result.p50_us, 0),
                output::measured(a.result.p99_us, 0),
                output::measured(a.result.p9999_us, 0),
            ]
        },
    )?;
    println!();
    output::table_of(
        &["streams", "input locking", "M segments/s", "vs exclusive"],
        r.locking_summary.iter(),
        |s| {
            vec![
                s.streams.to_string(),
                output::serde_name(&s.locking),
                output::or_na(s.mean_segments_per_s, |m| format!("{:.2}", m / 1e6)),
                output::measured(s.vs_exclusive, 2),
            ]
        },
    )?;
    println!(
        "byte-exact: {} (every transfer checked byte for byte)",
        if r.byte_exact { "yes" } else { "NO" }
    );
    Ok(())
}
