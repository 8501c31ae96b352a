//! `steer exp ooo`: flow completion times with 0, 1, 2 and unboundedly
//! many out-of-order intervals at the toe receiver, beside the thesis's
//! Table 5.3 (exp::ooo, docs/ooo.md).

use std::path::PathBuf;

use clap::Args;
use exp::ooo::OooParams;

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
    progress(&params.progress_header());
    let result = exp::ooo::run(&params, |c| progress(&c.progress_line()))?;
    if let Some(path) = &args.svg {
        std::fs::write(path, exp::ooo::svg(&result))?;
    }
    args.common.finish(json, &result)?;
    Ok(exit::ok_unless(!result.byte_exact))
}
