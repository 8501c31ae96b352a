//! `steer rss show|where|config`.

use anyhow::bail;
use rss::live::DeviceReports;
use rss::{Endpoint, Prediction, Predictor};

use crate::cli::{RssCommand, WhereArgs};
use crate::{exit, output};

pub fn run(cmd: RssCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        RssCommand::Show { dev, netns } => {
            let reports = rss::live::inspect_in(netns.as_deref(), dev.as_deref())?;
            output::print(json, &DeviceReports(reports))?;
        }
        RssCommand::Where(args) if args.sockets => {
            let predictor = Predictor::new(args.source.load()?)?;
            let rows = rss::live::socket_rows(&predictor, rss::live::tcp_sockets()?)?;
            output::print(json, &rows)?;
        }
        RssCommand::Where(args) => where_flow(&args, json)?,
        RssCommand::Config(assumed) => output::json(&assumed.config("microsoft")?)?,
    }
    Ok(exit::OK)
}

fn where_flow(args: &WhereArgs, json: bool) -> anyhow::Result<()> {
    let (Some(src), Some(dst)) = (&args.src, &args.dst) else {
        bail!("give SRC and DST, or --sockets");
    };
    let flow = Endpoint::flow(src.parse()?, dst.parse()?, args.proto)?;
    let config = args.source.load()?;
    output::print(json, &Prediction::of(&config, flow)?)
}
