//! `steer exp loss`: goodput of TCP transfers through the lab's wire under
//! uniform and bursty loss, the toe data path against Linux TCP on the
//! same wire (exp::loss, docs/loss.md).

use std::path::PathBuf;

use clap::Args;
use exp::loss::LossParams;

use super::exp::Common;
use crate::{exit, output};

/// Every cell of the grid (loss, RTT, rate, direction, sender CC) runs one
/// transfer per data path engine and one Linux to Linux on the same wire;
/// the table shows each engine's goodput beside Linux's and their ratio,
/// retransmissions per frame the wire dropped, and timeouts.
///
/// Example: sudo steer exp loss --quick --svg loss.svg
/// Example: sudo steer exp loss --loss 1 --rtt 2 --rate 1gbit --engine toe --direction receive --cc bbr
#[derive(Debug, Args)]
pub struct LossArgs {
    #[command(flatten)]
    pub params: LossParams,
    /// Write an SVG chart: goodput against loss, one line per engine and
    /// Linux's beside them (at the first --rtt and --rate).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(args: LossArgs, json: bool) -> anyhow::Result<i32> {
    let params = args.common.sized(args.params, LossParams::quick);
    // Bad parameters fail before anything is printed or built.
    params.check()?;
    let progress = output::progress(json);
    progress(&params.progress_header());
    let result = exp::loss::run(&params, |s| progress(&s.progress_line()))?;
    if let Some(path) = &args.svg {
        std::fs::write(path, exp::loss::svg(&result))?;
    }
    args.common.finish(json, &result)?;
    Ok(exit::ok_unless(!result.byte_exact))
}
