//! `steer nic attach|update|stats|flows|detach`.

use rss::RssConfig;
use serde::Serialize;

use crate::cli::{NicCommand, NicDev};
use crate::{exit, output};

/// What `attach`, `update` and `detach` print with `--json`.
#[derive(Serialize)]
struct Change<'a> {
    dev: &'a str,
    netns: Option<&'a str>,
    /// `attached`, `updated` or `detached`.
    action: &'static str,
    /// The config now applied (absent after `detach`).
    queues: Option<u32>,
    cpus: Option<Vec<u32>>,
    track_flows: Option<bool>,
}

impl<'a> Change<'a> {
    /// `action` done on `dev`, leaving `config` applied (none after detach).
    fn new(dev: &'a NicDev, action: &'static str, config: Option<&RssConfig>) -> Self {
        Change {
            dev: dev.name(),
            netns: dev.netns.as_deref(),
            action,
            queues: config.map(|c| c.queues),
            cpus: config.map(RssConfig::cpus),
            track_flows: None,
        }
    }
}

pub fn run(cmd: NicCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        NicCommand::Attach {
            dev,
            config,
            options,
        } => {
            let config = RssConfig::from_file(&config)?;
            nic::attach(dev.name(), dev.netns.as_deref(), &config, &options)?;
            let change = Change {
                track_flows: Some(options.track_flows),
                ..Change::new(&dev, "attached", Some(&config))
            };
            if json {
                output::json(&change)?;
            } else {
                output::note!(
                    "software RSS attached to {}: {} queues over CPUs {:?}",
                    dev.name(),
                    config.queues,
                    config.cpus()
                );
            }
        }
        NicCommand::Update { dev, config } => {
            let config = RssConfig::from_file(&config)?;
            nic::update(dev.name(), dev.netns.as_deref(), &config)?;
            if json {
                output::json(&Change::new(&dev, "updated", Some(&config)))?;
            } else {
                output::note!("software RSS on {} updated", dev.name());
            }
        }
        NicCommand::Detach { dev } => {
            nic::detach(dev.name(), dev.netns.as_deref())?;
            if json {
                output::json(&Change::new(&dev, "detached", None))?;
            } else {
                output::note!("software RSS detached from {}", dev.name());
            }
        }
        NicCommand::Stats { dev, reset } => {
            let stats = nic::stats(dev.name(), dev.netns.as_deref())?;
            if reset {
                nic::reset_stats(dev.name(), dev.netns.as_deref())?;
            }
            print_stats(&stats, json)?;
        }
        NicCommand::Flows { dev } => {
            let flows = nic::flows(dev.name(), dev.netns.as_deref())?;
            if json {
                output::json(&flows)?;
            } else {
                output::table_of(&["flow", "queue", "packets", "bytes"], flows.iter(), |f| {
                    vec![
                        output::flow(&f.tuple),
                        f.queue.to_string(),
                        f.packets.to_string(),
                        f.bytes.to_string(),
                    ]
                })?;
            }
        }
    }
    Ok(exit::OK)
}

fn print_stats(stats: &nic::NicStats, json: bool) -> anyhow::Result<()> {
    if json {
        return output::json(stats);
    }
    output::table_of(
        &["queue", "cpu", "packets", "bytes"],
        stats.queues.iter(),
        |q| {
            vec![
                q.queue.to_string(),
                q.cpu.to_string(),
                q.packets.to_string(),
                q.bytes.to_string(),
            ]
        },
    )?;
    println!();
    output::table_of(
        &[
            "cpu",
            "packets",
            "bytes",
            "cpumap enqueued",
            "cpumap dropped (queue full)",
            "kthread dropped",
        ],
        stats.cpus.iter().zip(&stats.cpumap),
        |(c, m)| {
            vec![
                c.cpu.to_string(),
                c.packets.to_string(),
                c.bytes.to_string(),
                m.enqueued.to_string(),
                m.enqueue_drops.to_string(),
                m.kthread_drops.to_string(),
            ]
        },
    )?;
    println!("\nnon-IP frames (not hashed): {}", stats.non_ip_packets);
    Ok(())
}
