//! `steer nic attach|update|stats|flows|detach`.

use std::path::Path;

use anyhow::Context;
use rss::RssConfig;

use crate::cli::NicCommand;
use crate::output;

fn read_config(path: &Path) -> anyhow::Result<RssConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    RssConfig::from_json(&text).with_context(|| format!("{}", path.display()))
}

pub fn run(cmd: NicCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        NicCommand::Attach {
            dev,
            config,
            netns,
            track_flows,
        } => {
            let config = read_config(&config)?;
            let opts = nic::AttachOptions {
                track_flows,
                ..Default::default()
            };
            nic::attach(&dev, netns.as_deref(), &config, &opts)?;
            eprintln!(
                "software RSS attached to {dev}: {} queues over CPUs {:?}",
                config.queues,
                config.cpus()
            );
        }
        NicCommand::Update { dev, config, netns } => {
            nic::update(&dev, netns.as_deref(), &read_config(&config)?)?;
            eprintln!("software RSS on {dev} updated");
        }
        NicCommand::Detach { dev, netns } => {
            nic::detach(&dev, netns.as_deref())?;
            eprintln!("software RSS detached from {dev}");
        }
        NicCommand::Stats { dev, netns, reset } => {
            let stats = nic::stats(&dev, netns.as_deref())?;
            if reset {
                nic::reset_stats(&dev, netns.as_deref())?;
            }
            print_stats(&stats, json)?;
        }
        NicCommand::Flows { dev, netns } => {
            let flows = nic::flows(&dev, netns.as_deref())?;
            if json {
                output::json(&flows)?;
            } else {
                let body: Vec<Vec<String>> = flows
                    .iter()
                    .map(|f| {
                        vec![
                            output::flow(&f.tuple),
                            f.queue.to_string(),
                            f.packets.to_string(),
                            f.bytes.to_string(),
                        ]
                    })
                    .collect();
                output::table(&["flow", "queue", "packets", "bytes"], &body)?;
            }
        }
    }
    Ok(0)
}

fn print_stats(stats: &nic::NicStats, json: bool) -> anyhow::Result<()> {
    if json {
        return output::json(stats);
    }
    let queues: Vec<Vec<String>> = stats
        .queues
        .iter()
        .map(|q| {
            vec![
                q.queue.to_string(),
                q.cpu.to_string(),
                q.packets.to_string(),
                q.bytes.to_string(),
            ]
        })
        .collect();
    output::table(&["queue", "cpu", "packets", "bytes"], &queues)?;
    println!();
    let cpus: Vec<Vec<String>> = stats
        .cpus
        .iter()
        .map(|c| {
            vec![
                c.cpu.to_string(),
                c.packets.to_string(),
                c.bytes.to_string(),
            ]
        })
        .collect();
    output::table(&["cpu", "packets", "bytes"], &cpus)?;
    println!("\nnon-IP frames (not hashed): {}", stats.non_ip_packets);
    Ok(())
}
