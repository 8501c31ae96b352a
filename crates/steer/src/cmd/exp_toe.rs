//! `steer exp toe`: the userspace TCP data path against Linux TCP on the
//! same lab path (exp::toe, docs/toe.md).

use clap::Args;
use exp::toe::ToeParams;

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
    // Bad parameters fail before anything is printed or built.
    params.check()?;
    let progress = output::progress(json);
    progress(&params.progress_header());
    let result = exp::toe::run(&params, |p| progress(&p.progress_line()))?;
    args.common.finish(json, &result)?;
    Ok(exit::ok_unless(!result.byte_exact))
}
