//! `steer lab up|down|status|exec`.

use anyhow::Context;
use lab::Lab;

use crate::cli::{LabCommand, LabUpArgs};
use crate::{exit, output};

pub fn run(cmd: LabCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        LabCommand::Up(args) => up(args, json),
        LabCommand::Down { lab } => down(&lab.name, json),
        LabCommand::Status { lab } => {
            output::print(json, &Lab::status(&lab.name)?)?;
            Ok(exit::OK)
        }
        LabCommand::Exec { host, lab, command } => {
            if json {
                return Err(exit::usage(
                    "lab exec prints the command's own output, which steer cannot turn into JSON; \
                     drop --json (the exit status is the command's)",
                ));
            }
            let lab = Lab::open(&lab.name)?;
            let (program, rest) = command.split_first().context("no command given")?;
            let mut cmd = lab.command(&host, program)?;
            let status = host::command::wait_like_system(cmd.args(rest))
                .with_context(|| format!("cannot run {program}"))?;
            Ok(host::command::exit_code(status))
        }
    }
}

/// `steer lab down` (and `steer wire down`): removes the lab, then says so
/// on stderr, or as `{"lab": NAME, "down": true}` with `--json`.
pub fn down(name: &str, json: bool) -> anyhow::Result<i32> {
    Lab::down(name)?;
    if json {
        output::json(&serde_json::json!({ "lab": name, "down": true }))?;
    } else {
        output::note!("lab {name} is down");
    }
    Ok(exit::OK)
}

fn up(args: LabUpArgs, json: bool) -> anyhow::Result<i32> {
    let name = &args.lab.name;
    Lab::up(&args.spec.spec(name)?)?;
    output::print(json, &Lab::status(name)?)?;
    Ok(exit::OK)
}
