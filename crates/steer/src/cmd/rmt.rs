//! `steer rmt`: the match-action pipeline emulator and Laminar's transport
//! on it (crate `rmt`, docs/rmt.md).

use clap::{Args, Subcommand};
use rmt::laminar::example::Table51;
use rmt::report::{laminar_reports, Reports};

use crate::output;

#[derive(Debug, Subcommand)]
pub enum RmtCommand {
    /// Worked examples of the thesis, computed by running Laminar's program
    /// on the emulator (never a table typed in).
    #[command(subcommand)]
    Example(ExampleCommand),
    /// Stages and state of each program, in the style of Table 5.2: stages
    /// used per half of the pipeline, register bytes per stage, per
    /// connection and in total.
    ///
    /// Example: steer rmt report --connections 32768
    Report(ReportArgs),
}

#[derive(Debug, Subcommand)]
pub enum ExampleCommand {
    /// Table 5.1 (§5.3.1.5): seven segments of one connection, the pseudo
    /// segments that merge its out-of-order interval, the lost P#3; the
    /// reassembly registers after every packet.
    #[command(name = "table-5.1")]
    Table51,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Connections the programs are sized for (every register and table
    /// has this many cells; the thesis's Tofino2 build holds 32K).
    #[arg(long, default_value_t = 32768, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: u32,
}

pub fn run(cmd: RmtCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        RmtCommand::Example(ExampleCommand::Table51) => output::print(json, &Table51::run()?)?,
        RmtCommand::Report(args) => {
            let programs = laminar_reports(args.connections);
            output::print(json, &Reports { programs })?
        }
    }
    Ok(crate::exit::OK)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    #[test]
    fn bad_arguments_are_usage_errors() {
        for argv in [
            &["steer", "rmt", "report", "--connections", "0"][..],
            &["steer", "rmt", "example", "table-5.2"],
            &["steer", "rmt", "report", "--connections", "many"],
        ] {
            let err = Cli::try_parse_from(argv).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
        let ok = Cli::try_parse_from(["steer", "rmt", "example", "table-5.1", "--json"]).unwrap();
        assert!(ok.json);
        assert!(matches!(
            ok.command,
            Command::Rmt(RmtCommand::Example(ExampleCommand::Table51))
        ));
    }
}
