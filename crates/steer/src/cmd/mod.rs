//! Command dispatch: each module turns arguments into library calls and prints.

pub mod agent;
pub mod bench;
pub mod exec;
pub mod exp;
mod lab;
pub mod lb;
mod nic;
pub mod ports;
pub mod reorder;
pub mod rmt;
mod rss;
pub mod toe;
pub mod wire;

use crate::cli::{Cli, Command};

/// Runs the command and returns its exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    let json = cli.json;
    match cli.command {
        Command::Rss(cmd) => rss::run(cmd, json),
        Command::Nic(cmd) => nic::run(cmd, json),
        Command::Lab(cmd) => lab::run(cmd, json),
        Command::Demo(args) => exp::run_experiment::<::exp::demo::DemoExperiment>(args, json),
        Command::Exp(cmd) => exp::run(cmd, json),
        Command::Bench(cmd) => bench::run(cmd, json),
        Command::Lb(cmd) => lb::run(cmd, json),
        Command::Exec(args) => exec::run_exec(args, json),
        Command::Attach(args) => exec::run_attach(args, json),
        Command::Agent(args) => agent::run(args, json),
        Command::Ports(cmd) => ports::run(cmd, json),
        Command::Reorder(cmd) => reorder::run(cmd, json),
        Command::Wire(cmd) => wire::run(cmd, json),
        Command::Rmt(cmd) => rmt::run(cmd, json),
        Command::Toe(cmd) => toe::run(cmd, json),
    }
}
