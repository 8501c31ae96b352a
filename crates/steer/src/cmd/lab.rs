//! `steer lab up|down|status|exec`.

use anyhow::Context;
use lab::{Lab, LabSpec};

use crate::cli::{LabCommand, LabUpArgs};
use crate::output;

pub fn run(cmd: LabCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        LabCommand::Up(args) => up(args, json),
        LabCommand::Down { name } => {
            Lab::down(&name)?;
            eprintln!("lab {name} is down");
            Ok(0)
        }
        LabCommand::Status { name } => {
            let status = Lab::status(&name)?;
            if json {
                output::json(&status)?;
            } else {
                println!("{status}");
            }
            Ok(0)
        }
        LabCommand::Exec {
            host,
            name,
            command,
        } => {
            let lab = Lab::open(&name)?;
            let (program, rest) = command.split_first().context("no command given")?;
            let status = lab
                .command(&host, program)?
                .args(rest)
                .status()
                .with_context(|| format!("cannot run {program}"))?;
            Ok(status.code().unwrap_or(1))
        }
    }
}

fn up(args: LabUpArgs, json: bool) -> anyhow::Result<i32> {
    let mut spec = LabSpec::new(&args.name);
    spec.hosts = args.hosts;
    spec.queues = args.queues;
    spec.track_flows = args.track_flows;
    spec.ipv6 = !args.no_ipv6;
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let config = rss::RssConfig::from_json(&text)?;
        spec.queues = config.queues;
        spec.key = Some(config.key);
        spec.table = Some(config.indirection_table);
        spec.fields = Some(config.fields);
    }
    Lab::up(&spec)?;
    let status = Lab::status(&args.name)?;
    if json {
        output::json(&status)?;
    } else {
        println!("{status}");
    }
    Ok(0)
}
