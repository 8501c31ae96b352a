//! `steer nic attach|update|stats|flows|detach`.

use nic::{Change, TrackedFlows};
use rss::RssConfig;

use crate::cli::NicCommand;
use crate::{exit, output};

pub fn run(cmd: NicCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        NicCommand::Attach {
            dev,
            config,
            options,
        } => {
            let (name, netns) = (dev.name(), dev.netns.as_deref());
            let config = RssConfig::from_file(&config)?;
            nic::attach(name, netns, &config, &options)?;
            report(json, &Change::attached(name, netns, &config, &options))?;
        }
        NicCommand::Update { dev, config } => {
            let (name, netns) = (dev.name(), dev.netns.as_deref());
            let config = RssConfig::from_file(&config)?;
            nic::update(name, netns, &config)?;
            report(json, &Change::updated(name, netns, &config))?;
        }
        NicCommand::Detach { dev } => {
            let (name, netns) = (dev.name(), dev.netns.as_deref());
            nic::detach(name, netns)?;
            report(json, &Change::detached(name, netns))?;
        }
        NicCommand::Stats { dev, reset } => {
            let stats = nic::stats(dev.name(), dev.netns.as_deref())?;
            if reset {
                nic::reset_stats(dev.name(), dev.netns.as_deref())?;
            }
            output::print(json, &stats)?;
        }
        NicCommand::Flows { dev } => {
            let flows = nic::flows(dev.name(), dev.netns.as_deref())?;
            output::print(json, &TrackedFlows(flows))?;
        }
    }
    Ok(exit::OK)
}

/// A change as JSON on stdout with `--json`, else as a note on stderr.
fn report(json: bool, change: &Change) -> anyhow::Result<()> {
    if json {
        output::json(change)
    } else {
        output::note!("{change}");
        Ok(())
    }
}
