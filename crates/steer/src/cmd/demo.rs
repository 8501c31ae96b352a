//! `steer demo`.

use exp::demo::DemoParams;

use crate::cli::DemoArgs;
use crate::{exit, output};

pub fn run(args: DemoArgs, json: bool) -> anyhow::Result<i32> {
    let params = args.common.sized(args.params, DemoParams::quick);
    // Bad parameters fail before anything is printed or built.
    params.check()?;
    let progress = output::progress(json);
    output::note!("{}", params.progress_header());
    let result = exp::demo::run(&params, |way, rep| progress(&rep.progress_line(way)))?;
    args.common.finish(json, &result)?;
    Ok(exit::OK)
}
